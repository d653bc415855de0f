// The payments example's transport on arbitrary bytes: its RequestReader (Boost.Beast's
// request_parser under the rules of request_rules.hpp), fed what a client sends, all at once and
// in pieces of the size the first byte names. Checked: every request is handed over whole or
// refused with a status the rules name; a request handed over has a method, HTTP/1.0 or 1.1, no
// control byte in any field value and a body within the limit; and the pieces change no request:
// both feedings see the same requests, and where one refuses the other refuses too or still
// waits for the rest of that head. Seeds: fuzz/corpus/fuzz_http_request
// (the hostile corpus of tests/http/http_hostile_corpus_test.cpp among them).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "idem/http/field_value.hpp"
#include "transport/request_reader.hpp"

namespace {

// What one feeding saw: each request's method, target and body, then how it ended.
std::vector<std::string> read_all(std::string_view bytes, std::size_t piece,
                                  const transport::TransportSettings& settings) {
  using Step = transport::RequestReader::Step;
  transport::RequestReader reader(settings);
  std::vector<std::string> seen;
  std::string in;
  std::size_t at = 0;
  for (;;) {
    const Step step = reader.read(in);
    if (step == Step::refused) {
      const int status = reader.refusal().status;
      IDEM_FUZZ_CHECK(status == 400 || status == 413 || status == 431 || status == 501 ||
                      status == 505);
      seen.push_back("refused " + std::to_string(status));
      return seen;
    }
    if (step == Step::done) {
      IDEM_FUZZ_CHECK(!reader.method().empty());
      IDEM_FUZZ_CHECK(reader.version() == 10 || reader.version() == 11);
      reader.each_field([](std::string_view, std::string_view value) {
        IDEM_FUZZ_CHECK(idem::http::valid_field_value(value));
      });
      std::string body = reader.take_body();
      IDEM_FUZZ_CHECK(body.size() <= settings.body_limit);
      seen.push_back(std::string(reader.method()) + " " + std::string(reader.target()) + " " +
                     body);
      reader.next();
      continue;
    }
    if (at == bytes.size()) {
      // Bytes of a request came (parsed or still buffered): it waits for the rest.
      seen.push_back(reader.started() || !in.empty() ? "incomplete" : "idle");
      return seen;
    }
    const std::size_t n = piece == 0 ? bytes.size() - at : std::min(piece, bytes.size() - at);
    in.append(bytes.substr(at, n));
    at += n;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  transport::TransportSettings settings;
  settings.head_limit = 4096;
  settings.body_limit = 4096;
  const std::vector<std::string> whole = read_all(bytes, 0, settings);
  if (piece == 0) return 0;
  const std::vector<std::string> pieces = read_all(bytes, piece, settings);
  // The same requests, in the same order. Where they part, both feedings end there, and neither
  // with a request: Beast may refuse a malformed head from more bytes at once than it would see
  // in pieces (it does not scan again what it scanned), so one can refuse where the other still
  // waits for more.
  std::size_t same = 0;
  while (same < whole.size() && same < pieces.size() && whole[same] == pieces[same]) ++same;
  if (same == whole.size() && same == pieces.size()) return 0;
  auto unfinished = [](const std::string& s) {
    return s == "incomplete" || s.rfind("refused ", 0) == 0;
  };
  IDEM_FUZZ_CHECK(whole.size() == same + 1 && pieces.size() == same + 1);
  IDEM_FUZZ_CHECK(unfinished(whole[same]) && unfinished(pieces[same]));
  return 0;
}
