#pragma once
// One connection's requests as its bytes come in, parsed by Boost.Beast's request_parser under
// the rules of request_rules.hpp: the event loop feeds it whatever the socket had, and a thread
// answers a request only once it is whole, head and body (the body within the body limit). Beast
// stays in request_reader.cpp.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "transport/refusal.hpp"
#include "transport/transport_settings.hpp"

namespace transport {

class RequestReader {
 public:
  enum class Step {
    more,     // the request is not whole yet: wait for more bytes
    done,     // a whole request: see method() ... take_body()
    refused,  // a request the server refuses (refusal()); the connection closes after it
  };

  explicit RequestReader(const TransportSettings& settings);
  ~RequestReader();
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;

  /// Parses the bytes at the start of `in`, taking from it what it used: after `done`, what is
  /// left is the next request (pipelining).
  Step read(std::string& in);
  /// The client ended the connection: nothing more will come.
  void end() noexcept { ended_ = true; }
  /// True once any byte of the current request was parsed.
  bool started() const noexcept { return started_; }
  /// True, once, when the head asks for 100 Continue and its body has not come: the client
  /// waits for that answer before it sends the body.
  bool take_continue() noexcept;
  /// After `refused`: the answer.
  const Refusal& refusal() const noexcept { return refusal_; }

  // After `done`: the request.
  std::string_view method() const;
  std::string_view target() const;
  unsigned version() const;  // 10 or 11
  bool keep_alive() const;   // the client may send another request on the connection
  void each_field(const std::function<void(std::string_view, std::string_view)>& visit) const;
  std::string take_body();

  /// Forgets the request: the next read() starts the next one.
  void next() noexcept;

 private:
  struct Parser;

  const TransportSettings& settings_;
  std::unique_ptr<Parser> parser_;  // the current request's; made at its first byte
  Refusal refusal_{};
  bool started_ = false;
  bool head_checked_ = false;
  bool continue_wanted_ = false;
  bool ended_ = false;
};

}  // namespace transport
