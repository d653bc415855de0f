#pragma once
// codec<T> for any class type nlohmann-json converts both ways (to_json/from_json): compact JSON
// text (component idem::json). Types with a codec of their own keep it; JsonCodec<T> is the same
// codec by name. Bytes that are not JSON or do not fit T are errc::record_corrupt.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "idem/codec.hpp"
#include "idem/error.hpp"

namespace idem {

template <class T>
struct JsonCodec {
  static std::string encode(const T& value) {
    try {
      // Strings that are not UTF-8 are written with U+FFFD instead of throwing: a result must
      // always be storable once the handler has run.
      return nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } catch (const nlohmann::json::exception& e) {
      throw Error(make_error_code(errc::record_corrupt),
                  std::string("value cannot be written as JSON: ") + e.what());
    }
  }

  static T decode(std::string_view bytes) {
    const nlohmann::json j = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) detail::corrupt("stored result is not JSON");
    try {
      return j.template get<T>();
    } catch (const nlohmann::json::exception& e) {
      throw Error(make_error_code(errc::record_corrupt),
                  std::string("stored JSON does not fit the result type: ") + e.what());
    }
  }
};

/// A class type nlohmann-json converts to and from JSON.
template <class T>
concept JsonConvertible = std::is_class_v<T> && requires(const T& value, const nlohmann::json& j) {
  nlohmann::json(value);
  j.template get<T>();
};

namespace detail {
template <class T>
inline constexpr bool has_byte_codec = false;  // codec.hpp's byte vectors
template <class Byte>
inline constexpr bool has_byte_codec<std::vector<Byte>> =
    std::is_same_v<Byte, std::byte> || std::is_same_v<Byte, std::uint8_t> ||
    std::is_same_v<Byte, char>;
}  // namespace detail

template <class T>
struct codec<T, std::enable_if_t<JsonConvertible<T> && !std::is_same_v<T, std::string> &&
                                 !detail::has_byte_codec<T>>> : JsonCodec<T> {};

}  // namespace idem
