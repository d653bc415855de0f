#include "answer_bytes.hpp"

#include <array>
#include <cstdio>

#include "hop_by_hop.hpp"
#include "transport/http_text.hpp"

namespace idem::proxy {

namespace {

void append_field(std::string& out, std::string_view name, std::string_view value) {
  out.append(name);
  out += ": ";
  out.append(value);
  out += "\r\n";
}

}  // namespace

std::string answer_head(int status, const Headers& headers, unsigned version, bool keep_alive,
                        Framing framing, std::uint64_t length) {
  std::string out = version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  out += std::to_string(status);
  out.push_back(' ');
  out.append(transport::reason_phrase(status));
  out += "\r\n";
  for (const auto& [name, value] : headers) append_field(out, name, value);
  append_field(out, "Date", transport::http_date());
  if (framing == Framing::chunked) {
    append_field(out, "Transfer-Encoding", "chunked");
  } else if (framing == Framing::length && !bodiless(status)) {
    append_field(out, "Content-Length", std::to_string(length));
  }
  if (!keep_alive || framing == Framing::close) {
    append_field(out, "Connection", "close");
  } else if (version == 10) {
    append_field(out, "Connection", "keep-alive");
  }
  out += "\r\n";
  return out;
}

std::string whole_answer(const idem::http::StoredResponse& answer, unsigned version,
                         bool keep_alive) {
  std::string out = answer_head(answer.status, answer.headers, version, keep_alive, Framing::length,
                                answer.body.size());
  if (!bodiless(answer.status)) out += answer.body;
  return out;
}

std::string chunk(std::string_view piece) {
  if (piece.empty()) return {};
  std::array<char, 24> size{};
  const int n = std::snprintf(size.data(), size.size(), "%zx\r\n", piece.size());
  std::string out(size.data(), static_cast<std::size_t>(n));
  out.append(piece);
  out += "\r\n";
  return out;
}

std::string upstream_request(const ProxyRequest& request, const Headers& extra) {
  std::string out = request.method;
  out.push_back(' ');
  out += request.target;
  out += " HTTP/1.1\r\n";
  const bool framed = !request.body.empty() || !request.values("Content-Length").empty() ||
                      !request.values("Transfer-Encoding").empty();
  // Expect: 100-continue was answered by the proxy; the upstream gets the body at once.
  for (const auto& [name, value] : without(end_to_end(request.headers), "Expect")) {
    append_field(out, name, value);
  }
  for (const auto& [name, value] : extra) append_field(out, name, value);
  if (framed) append_field(out, "Content-Length", std::to_string(request.body.size()));
  out += "\r\n";
  out += request.body;
  return out;
}

}  // namespace idem::proxy
