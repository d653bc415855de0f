#include "postgres/pg_query.hpp"

namespace idem::postgres::detail {

namespace {

constexpr Oid kByteaOid = 17;

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// bytea's hex output (the server's default) decoded in place; false for anything else.
bool from_hex(std::string_view text, std::string& out) {
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x' || text.size() % 2 != 0) return false;
  out.resize((text.size() - 2) / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int high = hex_digit(text[2 + 2 * i]);
    const int low = hex_digit(text[3 + 2 * i]);
    if (high < 0 || low < 0) return false;
    out[i] = static_cast<char>(high << 4 | low);
  }
  return true;
}

}  // namespace

std::string first_line(const char* what) {
  std::string s(what != nullptr ? what : "");
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  return s;
}

bool Reply::bytes(int row, int col, std::string& out) const {
  if (null(row, col)) return false;
  if (from_hex(text(row, col), out)) return true;
  std::size_t n = 0;
  unsigned char* decoded = PQunescapeBytea(
      reinterpret_cast<const unsigned char*>(PQgetvalue(result.get(), row, col)), &n);
  if (decoded == nullptr) return false;
  out.assign(reinterpret_cast<const char*>(decoded), n);
  PQfreemem(decoded);
  return true;
}

Reply::Row Reply::row(int i) const {
  const int cols = column_count();
  Row cells(static_cast<std::size_t>(cols));
  for (int c = 0; c < cols; ++c) {
    if (null(i, c)) continue;
    auto& cell = cells[static_cast<std::size_t>(c)].emplace();
    if (PQftype(result.get(), c) == kByteaOid) {
      (void)bytes(i, c, cell);
    } else {
      cell.assign(text(i, c));
    }
  }
  return cells;
}

bool Reply::integer(int row, int col, std::int64_t& out) const noexcept {
  const char* s = result ? PQgetvalue(result.get(), row, col) : nullptr;
  if (s == nullptr) return false;
  const bool negative = *s == '-';
  if (negative) ++s;
  if (*s == '\0') return false;
  std::uint64_t v = 0;
  int digits = 0;
  for (; *s != '\0'; ++s) {
    const unsigned d = static_cast<unsigned char>(*s) - unsigned{'0'};
    if (d > 9 || ++digits > 19) return false;  // 19 digits never overflow 64 bits
    v = v * 10 + d;
  }
  constexpr std::uint64_t kMax = std::uint64_t{1} << 63;  // |INT64_MIN|
  if (v > (negative ? kMax : kMax - 1)) return false;
  out = negative ? static_cast<std::int64_t>(std::uint64_t{0} - v) : static_cast<std::int64_t>(v);
  return true;
}

int send_query(PGconn* conn, const Query& q) {
  std::array<const char*, Params::kMax> held{};
  std::vector<const char*> values;
  std::vector<int> lengths;
  const char* const* value_ptrs = held.data();
  const int* length_ptrs = q.params.lengths();
  const int* formats = q.params.formats();
  int n = q.params.size();
  if (!q.values.empty()) {
    values.reserve(q.values.size());
    lengths.reserve(q.values.size());
    for (const std::string& v : q.values) {
      values.push_back(v.data());
      lengths.push_back(static_cast<int>(v.size()));
    }
    value_ptrs = values.data();
    length_ptrs = lengths.data();
    formats = nullptr;  // all text
    n = static_cast<int>(values.size());
  } else {
    q.params.point(held);
  }
  switch (q.kind) {
    case Query::prepared:
      return PQsendQueryPrepared(conn, q.name, n, value_ptrs, length_ptrs, formats, 0);
    case Query::text:
      return PQsendQueryParams(conn, q.sql.c_str(), n, nullptr, value_ptrs, length_ptrs, formats,
                               0);
    case Query::script:
      return PQsendQuery(conn, q.sql.c_str());
    case Query::prepare:
      return PQsendPrepare(conn, q.name, q.sql.c_str(), 0, nullptr);
  }
  return 0;
}

}  // namespace idem::postgres::detail
