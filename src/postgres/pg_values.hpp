#pragma once
// The generic statements' values on libpqxx: parameters as text, rows as the SQL layer's cells.

#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "postgres/pqxx_compat.hpp"
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

/// A row of a generic query: columns whose bit is set in `blob_columns` as bytes, others as text.
template <class PqRow>
sql::Row cells(const PqRow& r, unsigned blob_columns) {
  sql::Row row;
  for (int i = 0; i < static_cast<int>(r.size()); ++i) {
    const auto f = r[i];
    if (f.is_null()) {
      row.emplace_back(std::nullopt);
    } else if (i < 32 && (blob_columns >> i & 1u) != 0) {
      row.emplace_back(field_bytes(f));
    } else {
      row.emplace_back(std::string(f.c_str(), f.size()));
    }
  }
  return row;
}

inline std::vector<sql::Row> rows_of(const pqxx::result& r, unsigned blob_columns) {
  std::vector<sql::Row> all;
  all.reserve(r.size());
  for (const auto& row : r) all.push_back(cells(row, blob_columns));
  return all;
}

/// A claim's answer from claim_in_one's columns, starting at `at`.
template <class PqRow>
sql::ClaimRow claim_row(const PqRow& row, int at) {
  sql::ClaimRow out;
  out.acquired = row[at].template as<int>() == 1;
  out.fence = static_cast<Fence>(row[at + 1].template as<std::int64_t>());
  out.took_over = row[at + 2].template as<int>() != 0;
  if (!out.acquired) {
    out.state = static_cast<std::int16_t>(row[at + 3].template as<int>());
    out.fingerprint = {std::bit_cast<std::uint64_t>(row[at + 4].template as<std::int64_t>()),
                       std::bit_cast<std::uint64_t>(row[at + 5].template as<std::int64_t>())};
    out.lease_left_ms = row[at + 6].template as<std::int64_t>();
    out.expire_left_ms = row[at + 7].template as<std::int64_t>();
    out.result = field_bytes(row[at + 8]);
  }
  return out;
}

}  // namespace idem::postgres::detail
