#pragma once
// The httplib::Stream one request is read from and answered on. It reads first what the loop
// already took from the socket (the head, perhaps the body), then the socket under the
// request's deadline, which bounds the whole request however the client paces its bytes (a
// per-read timeout would not). What the answer writes is gathered and sent in one write.

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "transport/connection.hpp"

namespace transport {

class RequestStream final : public httplib::Stream {
 public:
  /// The request's head is the first `head_size` bytes of `c.in`. At most `body_cap` bytes are
  /// read after it: a body without a length (chunked, or up to the end of the connection)
  /// cannot grow past that.
  RequestStream(Connection& c, std::size_t head_size, Clock::time_point read_deadline,
                std::chrono::milliseconds write_timeout, std::size_t body_cap);
  /// Leaves in `c.in` only what this request did not read (the next request, if any).
  ~RequestStream() override;

  /// Once the head is parsed: how much body the request announced (none known for chunked).
  void expect_body(const httplib::Request& req);
  /// Sends what the answer wrote. False if the client did not take it in time.
  bool flush();
  /// True when the body was not read to its end, or its end is not known: the connection
  /// cannot carry another request.
  bool body_left() const;

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override;

 private:
  bool wait_for(short events, Clock::time_point deadline) const;

  Connection& c_;
  std::size_t head_size_;
  Clock::time_point read_deadline_;
  std::chrono::milliseconds write_timeout_;
  std::size_t body_cap_;
  std::size_t used_ = 0;                      // bytes of c_.in read
  std::size_t body_read_ = 0;                 // bytes read after the head, from c_.in or the socket
  std::optional<std::size_t> body_expected_;  // unknown until the head is parsed
  std::string out_;
};

}  // namespace transport
