#include "transport/request_reader.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <optional>
#include <utility>

#include "transport/request_rules.hpp"

namespace transport {

namespace http = boost::beast::http;

struct RequestReader::Parser {
  RequestParser parser;
};

RequestReader::RequestReader(const TransportSettings& settings) : settings_(settings) {}

RequestReader::~RequestReader() = default;

RequestReader::Step RequestReader::read(std::string& in) {
  if (!parser_) {
    if (in.empty()) return Step::more;
    parser_ = std::make_unique<Parser>();
    limit(parser_->parser, settings_);
    parser_->parser.eager(false);  // stop after the head: its rules come before the body
  }
  RequestParser& p = parser_->parser;
  while (!in.empty() && !p.is_done()) {
    boost::system::error_code error;
    const std::size_t used = p.put(boost::asio::buffer(in), error);
    in.erase(0, used);
    started_ = started_ || used > 0;
    if (error == http::error::need_more) break;
    if (error) {
      // Every parser error has an answer here: the client is still connected.
      refusal_ = refusal_for(error, settings_)
                     .value_or(Refusal{400, "Bad Request", "bad_request", error.message()});
      return Step::refused;
    }
    if (!head_checked_ && p.is_header_done()) {
      head_checked_ = true;
      if (std::optional<Refusal> refused = head_refusal(p)) {
        refusal_ = std::move(*refused);
        return Step::refused;
      }
      continue_wanted_ = expects_continue(p);
      p.eager(true);
    }
    if (used == 0) break;
  }
  return p.is_done() ? Step::done : Step::more;
}

bool RequestReader::take_continue() noexcept { return std::exchange(continue_wanted_, false); }

std::string_view RequestReader::method() const { return parser_->parser.get().method_string(); }

std::string_view RequestReader::target() const { return parser_->parser.get().target(); }

unsigned RequestReader::version() const { return parser_->parser.get().version(); }

bool RequestReader::keep_alive() const { return !ended_ && parser_->parser.keep_alive(); }

void RequestReader::each_field(
    const std::function<void(std::string_view, std::string_view)>& visit) const {
  for (const auto& field : parser_->parser.get()) visit(field.name_string(), field.value());
}

std::string RequestReader::take_body() { return std::move(parser_->parser.get().body()); }

void RequestReader::next() noexcept {
  parser_.reset();
  started_ = false;
  head_checked_ = false;
  continue_wanted_ = false;
}

}  // namespace transport
