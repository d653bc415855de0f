// Stored result bytes through every codec idem ships: decode either gives a value that encodes
// back to the same bytes, or throws idem::Error(record_corrupt). Nothing else may come out.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "idem/codec.hpp"

namespace {

enum class Color : std::uint8_t { red, green };
enum class Wide : std::int64_t { a = -1, b = 1 };

template <class T>
void round_trip(std::string_view bytes) {
  T value{};
  try {
    value = idem::codec<T>::decode(bytes);
  } catch (const idem::Error& e) {
    IDEM_FUZZ_CHECK(idem::fuzz::is(e.code(), idem::errc::record_corrupt));
    return;
  }
  IDEM_FUZZ_CHECK(idem::codec<T>::encode(value) == bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  round_trip<std::string>(bytes);
  IDEM_FUZZ_CHECK(idem::codec<std::string>::decode(std::string(bytes)) == bytes);  // the move path
  round_trip<std::vector<std::byte>>(bytes);
  round_trip<std::vector<std::uint8_t>>(bytes);
  round_trip<std::vector<char>>(bytes);
  round_trip<bool>(bytes);
  round_trip<std::int8_t>(bytes);
  round_trip<std::uint8_t>(bytes);
  round_trip<std::int16_t>(bytes);
  round_trip<std::uint16_t>(bytes);
  round_trip<std::int32_t>(bytes);
  round_trip<std::uint32_t>(bytes);
  round_trip<std::int64_t>(bytes);
  round_trip<std::uint64_t>(bytes);
  round_trip<Color>(bytes);
  round_trip<Wide>(bytes);
  // Width decides: exactly sizeof(T) bytes decode, any other length is corrupt.
  bool width_ok = true;
  try {
    (void)idem::codec<std::uint32_t>::decode(bytes);
  } catch (const idem::Error&) {
    width_ok = false;
  }
  IDEM_FUZZ_CHECK(width_ok == (size == 4));
  return 0;
}
