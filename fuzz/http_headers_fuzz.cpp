// The payments example's request parsing (examples/http_payments/request_headers.hpp): the
// Idempotency-Key header value, Authorization: Bearer, and a stored answer read back from the
// store. Checked: an accepted key is 1-255 bytes of printable ASCII; a quoted key re-quoted
// parses to the same key; a bare value is taken as it is; a stored answer is accepted only in
// the form the service writes, and formatting it again gives the same bytes.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "request_headers.hpp"

namespace {

std::string quote(std::string_view key) {
  std::string out = "\"";
  for (char c : key) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);

  const payments::IdempotencyKey parsed = payments::parse_idempotency_key(raw);
  if (parsed.ok()) {
    IDEM_FUZZ_CHECK(!parsed.key.empty() && parsed.key.size() <= payments::kMaxIdempotencyKey);
    for (char c : parsed.key) IDEM_FUZZ_CHECK(c >= 0x20 && c <= 0x7e);
    if (raw.front() != '"') IDEM_FUZZ_CHECK(parsed.key == raw);
    const payments::IdempotencyKey again = payments::parse_idempotency_key(quote(parsed.key));
    IDEM_FUZZ_CHECK(again.ok() && again.key == parsed.key);
  } else {
    IDEM_FUZZ_CHECK(parsed.key.empty());
  }

  if (const auto principal = payments::bearer_principal(raw)) {
    IDEM_FUZZ_CHECK(!principal->empty() && "Bearer " + *principal == raw);
  }

  if (const auto answer = payments::parse_stored_answer(raw)) {
    IDEM_FUZZ_CHECK(answer->status >= 200 && answer->status <= 599);
    IDEM_FUZZ_CHECK(payments::format_stored_answer(answer->status, answer->body) == raw);
  }
  return 0;
}
