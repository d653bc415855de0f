// idem/http.hpp's parsers on arbitrary bytes: the Idempotency-Key header value and a stored HTTP
// response read back from a store; and the payments example's Authorization: Bearer. Checked: an
// accepted key is 1-255 bytes of printable ASCII; a bare value is kept as it is (spaces around it
// trimmed); a key re-quoted as an sf-string parses to itself, with or without parameters after
// it; a refusal has its reason; a stored response either decodes and re-encodes to the same bytes
// or is refused with errc::record_corrupt.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "idem/http.hpp"
#include "request_headers.hpp"

namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  namespace http = idem::http;

  const http::ParsedKey parsed = http::parse_idempotency_key(raw);
  if (parsed) {
    IDEM_FUZZ_CHECK(!parsed.key().empty() && parsed.key().size() <= http::KeyRules{}.max_bytes);
    for (char c : parsed.key()) IDEM_FUZZ_CHECK(c >= 0x20 && c <= 0x7e);
    if (trimmed(raw).front() != '"') IDEM_FUZZ_CHECK(parsed.key() == trimmed(raw));
    const http::ParsedKey again = http::parse_idempotency_key(http::quote_key(parsed.key()));
    IDEM_FUZZ_CHECK(again && again.key() == parsed.key());
    const http::ParsedKey with_parameters =
        http::parse_idempotency_key(http::quote_key(parsed.key()) + ";p=1;q=\"x\"");
    IDEM_FUZZ_CHECK(with_parameters && with_parameters.key() == parsed.key());
  } else {
    IDEM_FUZZ_CHECK(parsed.key().empty() && !parsed.reason().empty());
  }
  const http::ParsedKey strict = http::parse_idempotency_key(raw, {.accept_bare = false});
  IDEM_FUZZ_CHECK(!strict || (parsed && strict.key() == parsed.key()));

  if (const auto principal = payments::bearer_principal(raw)) {
    IDEM_FUZZ_CHECK(!principal->empty() && principal->front() != ' ');
    IDEM_FUZZ_CHECK(http::equals_ignoring_case(raw.substr(0, 7), "Bearer "));
    IDEM_FUZZ_CHECK(raw.ends_with(*principal));
  }

  try {
    const http::StoredResponse response = idem::codec<http::StoredResponse>::decode(raw);
    IDEM_FUZZ_CHECK(response.status >= 100 && response.status <= 599);
    IDEM_FUZZ_CHECK(idem::codec<http::StoredResponse>::encode(response) == raw);
  } catch (const idem::Error& e) {
    IDEM_FUZZ_CHECK(e.code() == idem::errc::record_corrupt);
  }
  return 0;
}
