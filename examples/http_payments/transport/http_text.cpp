#include "transport/http_text.hpp"

#include <ctime>

// Beast's status.hpp prints a status on a std::ostream without including <ostream>.
// clang-format off
#include <ostream>
#include <boost/beast/http/status.hpp>
// clang-format on

namespace transport {

std::string http_date() {
  // One formatting a second per thread: the answers of that second share it.
  thread_local std::time_t formatted_at = -1;
  thread_local char text[32] = {};
  const std::time_t now = std::time(nullptr);
  if (now != formatted_at) {
    std::tm utc{};
    ::gmtime_r(&now, &utc);
    std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &utc);
    formatted_at = now;
  }
  return text;
}

std::string_view reason_phrase(int status) {
  namespace http = boost::beast::http;
  const http::status known = http::int_to_status(static_cast<unsigned>(status));
  return known == http::status::unknown ? "Unknown" : http::obsolete_reason(known);
}

}  // namespace transport
