#pragma once
// The header-only parts of idem/admin.hpp: state names, key splitting, cursors.

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "idem/admin.hpp"
#include "idem/detail/enum_names.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/engine/failure_record.hpp"
#include "idem/key.hpp"

namespace idem::admin {

namespace detail {
inline constexpr std::array<std::string_view, 4> kStateNames = {"in_progress", "completed",
                                                                "failed", "released"};
static_assert(kStateNames.size() == static_cast<std::size_t>(State::released) + 1);
}  // namespace detail

inline std::string_view to_string(State state) noexcept {
  return idem::detail::name_in(detail::kStateNames, state);
}

inline std::optional<State> state_from_string(std::string_view text) noexcept {
  if (text == "in_progress" || text == "in-progress") return State::in_progress;
  if (text == "completed") return State::completed;
  if (text == "failed") return State::failed;
  if (text == "released") return State::released;
  return std::nullopt;
}

namespace detail {

// Counts `n` records of `state` in `stats`.
inline void count(Stats& stats, State state, std::uint64_t n = 1) noexcept {
  static constexpr std::array<std::uint64_t Stats::*, 4> kCounters{
      &Stats::in_progress, &Stats::completed, &Stats::failed, &Stats::released};  // State's order
  stats.*kCounters[static_cast<std::size_t>(state)] += n;
}

// Reads a LEB128 length at `pos`; false when the bytes end first or it is absurdly long.
inline bool read_varint(std::string_view bytes, std::size_t& pos, std::size_t& n) {
  n = 0;
  for (unsigned shift = 0; shift < 63; shift += 7) {
    if (pos >= bytes.size()) return false;
    const auto byte = static_cast<unsigned char>(bytes[pos++]);
    n |= static_cast<std::size_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

inline std::string scope_prefix(std::string_view scope) {
  std::string out(10 + scope.size(), '\0');
  const std::size_t n = idem::detail::put_varint(out.data(), scope.size());
  out.resize(n);
  out.append(scope);
  return out;
}

inline std::string effective_key(std::string_view scope, const Key& key) {
  const idem::detail::EffectiveKey k(scope, key.principal, key.id);
  return std::string(k.view());
}

inline bool split_key(std::string_view effective, std::string_view scope, std::string& principal,
                      std::string& id) {
  std::size_t pos = 0;
  std::size_t n = 0;
  if (!read_varint(effective, pos, n) || n > effective.size() - pos) return false;
  if (effective.substr(pos, n) != scope) return false;
  pos += n;
  if (!read_varint(effective, pos, n) || n > effective.size() - pos) return false;
  principal.assign(effective.substr(pos, n));
  id.assign(effective.substr(pos + n));
  return true;
}

inline std::string failure_text(std::string_view bytes) {
  return idem::detail::decode_failure(bytes).message;
}

inline std::string make_cursor(std::int64_t expires_at_ms, std::string_view key) {
  static constexpr std::string_view kHex = "0123456789abcdef";
  std::string out = std::to_string(expires_at_ms);
  out.push_back('.');
  for (char c : key) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

inline bool read_cursor(std::string_view cursor, std::int64_t& expires_at_ms, std::string& key) {
  const std::size_t dot = cursor.find('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  const auto [end, ec] = std::from_chars(cursor.data(), cursor.data() + dot, expires_at_ms);
  if (ec != std::errc{} || end != cursor.data() + dot) return false;
  const std::string_view hex = cursor.substr(dot + 1);
  if (hex.size() % 2 != 0) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  key.clear();
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]);
    const int lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    key.push_back(static_cast<char>(hi << 4 | lo));
  }
  return true;
}

}  // namespace detail

}  // namespace idem::admin
