#pragma once
// codec<T>: how a handler's result crosses the store as bytes; round trips are exact. For your
// own type specialise idem::codec (encode, and a decode that throws idem::Error(record_corrupt)
// on bytes it cannot read); an optional view(const T&) stores a value's own bytes without a copy.

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "idem/error.hpp"

namespace idem {

template <class T, class Enable = void>
struct codec;  // deliberately undefined: a type without a codec cannot be a result

/// A type whose values can be stored as results.
template <class T>
concept Codable = requires(const T& value, std::string_view bytes) {
  { codec<T>::encode(value) } -> std::convertible_to<std::string>;
  { codec<T>::decode(bytes) } -> std::convertible_to<T>;
};

namespace detail {
/// A result type a guard can record: void, or one with an idem::codec.
template <class T>
constexpr void require_codable() {
  static_assert(std::is_void_v<T> || Codable<T>,
                "idem: the result type has no idem::codec<T>; specialise idem::codec for it "
                "(see idem/codec.hpp)");
}

[[noreturn]] inline void corrupt(const char* what) {
  throw Error(make_error_code(errc::record_corrupt), what);
}

/// The bytes `value` is stored as: a view of it where its codec has view() (no copy), else
/// codec<T>::encode(value), kept in `buffer`. Valid while `value` and `buffer` are.
template <class T>
std::string_view stored_bytes(const T& value, std::string& buffer) {
  if constexpr (requires { codec<T>::view(value); }) {
    return codec<T>::view(value);
  } else {
    buffer = codec<T>::encode(value);
    return buffer;
  }
}
}  // namespace detail

template <>
struct codec<std::string> {
  static std::string encode(const std::string& s) { return s; }
  // Types that are already bytes hand the guard a view, saving a copy per fresh call.
  static std::string_view view(const std::string& s) noexcept { return s; }
  static std::string decode(std::string_view bytes) { return std::string(bytes); }
  // Replays hand over the store's buffer instead of copying it.
  static std::string decode(std::string&& bytes) noexcept { return std::move(bytes); }
};

/// Byte vectors: the bytes themselves.
template <class Byte>
struct codec<std::vector<Byte>,
             std::enable_if_t<std::is_same_v<Byte, std::byte> ||
                              std::is_same_v<Byte, std::uint8_t> || std::is_same_v<Byte, char>>> {
  static std::string encode(const std::vector<Byte>& v) { return std::string(view(v)); }
  static std::string_view view(const std::vector<Byte>& v) noexcept {
    return {reinterpret_cast<const char*>(v.data()), v.size()};
  }
  static std::vector<Byte> decode(std::string_view bytes) {
    std::vector<Byte> v(bytes.size());
    if (!bytes.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
};

/// Integers: fixed width, little-endian, so a record reads the same on any host.
template <class Int>
struct codec<Int, std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>>> {
  static std::string encode(Int value) {
    using U = std::make_unsigned_t<Int>;
    auto u = static_cast<U>(value);
    std::string out(sizeof(Int), '\0');
    for (std::size_t i = 0; i < sizeof(Int); ++i) {
      out[i] = static_cast<char>(static_cast<unsigned char>(u >> (8 * i)));
    }
    return out;
  }
  static Int decode(std::string_view bytes) {
    if (bytes.size() != sizeof(Int)) detail::corrupt("stored integer has the wrong width");
    using U = std::make_unsigned_t<Int>;
    U u = 0;
    for (std::size_t i = 0; i < sizeof(Int); ++i) {
      u |= static_cast<U>(static_cast<U>(static_cast<unsigned char>(bytes[i])) << (8 * i));
    }
    return static_cast<Int>(u);
  }
};

template <>
struct codec<bool> {
  static std::string encode(bool value) { return std::string(1, value ? '\1' : '\0'); }
  static bool decode(std::string_view bytes) {
    if (bytes.size() != 1 || static_cast<unsigned char>(bytes[0]) > 1) {
      detail::corrupt("stored bool is not one byte of 0 or 1");
    }
    return bytes[0] == '\1';
  }
};

/// Enums: their underlying integer.
template <class Enum>
struct codec<Enum, std::enable_if_t<std::is_enum_v<Enum>>> {
  using Underlying = std::underlying_type_t<Enum>;
  static std::string encode(Enum value) {
    return codec<Underlying>::encode(static_cast<Underlying>(value));
  }
  static Enum decode(std::string_view bytes) {
    return static_cast<Enum>(codec<Underlying>::decode(bytes));
  }
};

}  // namespace idem
