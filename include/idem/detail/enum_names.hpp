#pragma once
// Names of an enum's values as a table, one entry per value in declaration order, instead of a
// switch per enum. Each table's owner static_asserts that its size matches the enum's last value.

#include <array>
#include <cstddef>
#include <string_view>

namespace idem::detail {

/// names[e]; `fallback` for a value past the table (an integer cast to the enum unchecked).
template <class E, std::size_t N>
constexpr std::string_view name_in(const std::array<std::string_view, N>& names, E e,
                                   std::string_view fallback = "unknown") noexcept {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? names[i] : fallback;
}

}  // namespace idem::detail
