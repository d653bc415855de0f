#pragma once
// The PostgreSQL stores' values on libpq, for both connection cores: the record statements'
// parameters, the generic statements' as text, rows as the SQL layer's cells and records.

#include <array>
#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "postgres/pg_query.hpp"
#include "sql/engine.hpp"

namespace idem::postgres::detail {

/// bytea's text form: \x and two hex digits a byte.
inline std::string hex_bytea(std::string_view b) {
  static constexpr std::string_view kHex = "0123456789abcdef";
  std::string hex = "\\x";
  hex.reserve(2 + b.size() * 2);
  for (const unsigned char c : b) {
    hex.push_back(kHex[c >> 4]);
    hex.push_back(kHex[c & 15]);
  }
  return hex;
}

inline std::vector<std::string> text_values(std::span<const sql::Param> params) {
  std::vector<std::string> values;
  values.reserve(params.size());
  for (const sql::Param& p : params) {
    switch (p.kind) {
      case sql::Param::integer:
        values.push_back(std::to_string(p.number));
        break;
      case sql::Param::text:
        values.emplace_back(p.string);
        break;
      case sql::Param::bytes:
        values.push_back(hex_bytea(p.string));
        break;
    }
  }
  return values;
}

/// Row `i` of a generic query: columns whose bit is set in `blob_columns` as bytes, others as
/// their text.
inline sql::Row cells(const Reply& r, int i, unsigned blob_columns) {
  sql::Row row;
  const int n = r.column_count();
  row.reserve(static_cast<std::size_t>(n));
  for (int c = 0; c < n; ++c) {
    if (r.null(i, c)) {
      row.emplace_back(std::nullopt);
    } else if (c < 32 && (blob_columns >> c & 1u) != 0) {
      std::string bytes;
      (void)r.bytes(i, c, bytes);
      row.emplace_back(std::move(bytes));
    } else {
      row.emplace_back(std::string(r.text(i, c)));
    }
  }
  return row;
}

inline std::vector<sql::Row> rows_of(const Reply& r, unsigned blob_columns) {
  std::vector<sql::Row> all;
  all.reserve(static_cast<std::size_t>(r.row_count()));
  for (int i = 0; i < r.row_count(); ++i) all.push_back(cells(r, i, blob_columns));
  return all;
}

/// The record of row `i`, from the columns state, fp_hi, fp_lo, lease left, expires in and
/// result at `at`; kMalformedState when one is not what idem writes.
inline sql::ClaimRow record_row(const Reply& r, int i, std::array<int, 6> at) {
  sql::ClaimRow out;
  std::int64_t state = 0, hi = 0, lo = 0;
  const bool read = r.integer(i, at[0], state) && r.integer(i, at[1], hi) &&
                    r.integer(i, at[2], lo) && r.integer(i, at[3], out.lease_left_ms) &&
                    r.integer(i, at[4], out.expire_left_ms) &&
                    (r.null(i, at[5]) || r.bytes(i, at[5], out.result));
  out.state = read ? static_cast<std::int16_t>(state) : sql::kMalformedState;
  out.fingerprint = {std::bit_cast<std::uint64_t>(hi), std::bit_cast<std::uint64_t>(lo)};
  return out;
}

/// The record idem_read answers in row `i` (state, fp_hi, fp_lo, fence, lease left, expires in,
/// result).
inline sql::ClaimRow read_row(const Reply& r, int i) {
  sql::ClaimRow out = record_row(r, i, {0, 1, 2, 4, 5, 6});
  std::int64_t fence = 0;
  if (r.column_count() != 7 || !r.integer(i, 3, fence)) out.state = sql::kMalformedState;
  out.fence = static_cast<Fence>(fence);
  return out;
}

/// A claim's answer from claim_in_one's columns, starting at `at` in row `i`.
inline sql::ClaimRow claim_row(const Reply& r, int i, int at) {
  std::int64_t acquired = 0, fence = 0, took_over = 0;
  sql::ClaimRow out;
  if (r.column_count() < at + 9 || !r.integer(i, at, acquired) || !r.integer(i, at + 1, fence) ||
      !r.integer(i, at + 2, took_over)) {
    out.state = sql::kMalformedState;
    return out;
  }
  if (acquired != 1) out = record_row(r, i, {at + 3, at + 4, at + 5, at + 6, at + 7, at + 8});
  out.acquired = acquired == 1;
  out.fence = static_cast<Fence>(fence);
  out.took_over = took_over != 0;
  return out;
}

/// claim_in_one's parameters (and claim_in_one_drawn's), in binary and text form.
inline void add_claim(Query& q, const sql::ClaimArgs& a) {
  q.params.bytes(a.key);
  q.params.number(std::bit_cast<std::int64_t>(a.fingerprint.high));
  q.params.number(std::bit_cast<std::int64_t>(a.fingerprint.low));
  q.params.number(static_cast<std::int64_t>(a.min_fence));
  q.params.number(a.lease_ms);
  q.params.number(a.keep_ms);
}

/// The first parameters of the fenced statements (finish, release, extend).
inline void add_ticket(Query& q, const Ticket& ticket) {
  q.params.bytes(ticket.key);
  q.params.number(static_cast<std::int64_t>(ticket.fence));
}

inline void add_finish(Query& q, const Ticket& ticket, sql::State state, std::string_view result,
                       std::int64_t ttl_ms) {
  add_ticket(q, ticket);
  q.params.number(static_cast<int>(state));
  q.params.bytes(result);
  q.params.number(ttl_ms);
}

}  // namespace idem::postgres::detail
