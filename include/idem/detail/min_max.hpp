#pragma once
// std::min and std::max for the core's headers, which every includer compiles: <algorithm>, where
// the standard declares them, costs a light includer about a tenth of its compile time.

namespace idem::detail {

template <class T>
constexpr const T& min_of(const T& a, const T& b) noexcept {
  return b < a ? b : a;
}

template <class T>
constexpr const T& max_of(const T& a, const T& b) noexcept {
  return a < b ? b : a;
}

}  // namespace idem::detail
