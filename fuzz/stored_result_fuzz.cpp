// A stored record's result bytes as the guard reads them back: a failed record's failure
// (engine/failure_record.hpp) and a completed record's replay (engine/protocol.hpp). A failure
// never decodes to success; bytes that are not a failure are record_corrupt; a replay is a value
// only when the codec reads the bytes, else a failure, never a fresh or completed value.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "idem/engine/failure_record.hpp"
#include "idem/engine/protocol.hpp"

namespace {

using idem::errc;
using idem::fuzz::is;

struct Receipt {
  std::uint32_t amount = 0;
  std::string note;
};

}  // namespace

// A user codec that throws something other than idem::Error on bad bytes.
template <>
struct idem::codec<Receipt> {
  static std::string encode(const Receipt& r) {
    return codec<std::uint32_t>::encode(r.amount) + r.note;
  }
  static Receipt decode(std::string_view bytes) {
    if (bytes.size() < 4) throw std::runtime_error("short receipt");
    if (bytes.size() > 4 && bytes[4] == '!') throw 42;  // not even a std::exception
    return Receipt{codec<std::uint32_t>::decode(bytes.substr(0, 4)), std::string(bytes.substr(4))};
  }
};

namespace {

template <class R>
void replay(std::string_view bytes, bool decodes) {
  auto out = idem::detail::decode_replay<R>(std::string(bytes));
  if (decodes) {
    IDEM_FUZZ_CHECK(out.has_value());
    IDEM_FUZZ_CHECK(out.replayed());
  } else {
    IDEM_FUZZ_CHECK(!out.has_value());
    IDEM_FUZZ_CHECK(is(out.error(), errc::record_corrupt));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  const idem::Failure failure = idem::detail::decode_failure(bytes);
  IDEM_FUZZ_CHECK(failure.code);  // never success
  IDEM_FUZZ_CHECK(failure.code.category() == idem::error_category());
  const bool tagged = size >= 2 && bytes[0] == idem::detail::kFailureTag &&
                      data[1] >= static_cast<std::uint8_t>(errc::key_invalid) &&
                      data[1] <= static_cast<std::uint8_t>(errc::record_corrupt);
  if (tagged) {
    IDEM_FUZZ_CHECK(failure.code.value() == data[1]);
    // The message round-trips: encoding it again gives the same record.
    IDEM_FUZZ_CHECK(idem::detail::encode_failure(static_cast<errc>(data[1]), bytes.substr(2)) ==
                    bytes);
  } else {
    IDEM_FUZZ_CHECK(is(failure.code, errc::record_corrupt));
  }

  replay<std::string>(bytes, true);
  replay<void>(bytes, size == 0);
  replay<bool>(bytes, size == 1 && data[0] <= 1);
  replay<std::int64_t>(bytes, size == 8);
  replay<Receipt>(bytes, size == 4 || (size > 4 && bytes[4] != '!'));
  if (size >= 4) {
    auto r = idem::detail::decode_replay<Receipt>(std::string(bytes));
    if (r.has_value()) IDEM_FUZZ_CHECK(idem::codec<Receipt>::encode(r.value()) == bytes);
  }
  return 0;
}
