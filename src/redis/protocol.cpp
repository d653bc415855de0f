// The Redis connection core without I/O (protocol.hpp).

#include "protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <new>

#include "acl_refusal.hpp"

namespace idem::redis {

bool is_error(const redisReply& reply, std::string_view prefix) noexcept {
  return reply.type == REDIS_REPLY_ERROR && reply.len >= prefix.size() &&
         std::memcmp(reply.str, prefix.data(), prefix.size()) == 0;
}

Failure error_reply_failure(const redisReply& reply, std::string_view doing,
                            std::string_view where) {
  if (is_error(reply, "WRONGTYPE") || text(reply).find("IDEM_CORRUPT") != std::string_view::npos) {
    return make_failure(errc::record_corrupt,
                        fmt::format("redis {}: {}: the key holds something that is not an idem "
                                    "record ({})",
                                    where, doing, text(reply)));
  }
  // An ACL right to grant: a command's NOPERM, a command a script runs, a key outside the
  // user's patterns.
  if (const std::optional<std::string> right = acl_refusal(text(reply))) {
    return make_failure(errc::config_invalid,
                        fmt::format("redis {}: {}: the user lacks a right idem needs: {} ({})",
                                    where, doing, *right, text(reply)));
  }
  return unavailable(fmt::format("redis {}: {}: {}", where, doing, text(reply)));
}

Failure reply_lost(Failure failure) {
  failure.code = make_error_code(errc::outcome_unknown);
  failure.message += "; the call was sent, and the server may have run it";
  return failure;
}

std::string_view to_chars(DecimalText& buf, std::int64_t n) noexcept {
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), n);
  (void)ec;  // 24 bytes hold any int64
  return {buf.data(), static_cast<std::size_t>(end - buf.data())};
}

void append_array_header(std::string& out, std::size_t argc) {
  DecimalText n;
  out += '*';
  out += to_chars(n, static_cast<std::int64_t>(argc));
  out += "\r\n";
}

void append_bulk(std::string& out, std::string_view arg) {
  DecimalText n;
  out += '$';
  out += to_chars(n, static_cast<std::int64_t>(arg.size()));
  out += "\r\n";
  out += arg;
  out += "\r\n";
}

ReplyReader::ReplyReader() : reader_(redisReaderCreate()) {
  if (reader_ == nullptr) throw std::bad_alloc();
}

ReplyReader::~ReplyReader() {
  if (reader_ != nullptr) redisReaderFree(reader_);
}

bool ReplyReader::feed(const char* bytes, std::size_t n) {
  return redisReaderFeed(reader_, bytes, n) == REDIS_OK;
}

ReplyReader::Got ReplyReader::next(ReplyPtr& out) {
  void* reply = nullptr;
  if (redisReaderGetReply(reader_, &reply) != REDIS_OK) return Got::broken;
  if (reply == nullptr) return Got::more;
  out.reset(static_cast<redisReply*>(reply));
  return Got::reply;
}

std::string ReplyReader::error() const {
  return reader_->err != 0 ? std::string(reader_->errstr) : std::string("out of memory");
}

std::string server_name(const ConnectionOptions& options) {
  if (!options.unix_socket.empty()) return options.unix_socket;
  return options.host.find(':') != std::string::npos
             ? fmt::format("[{}]:{}", options.host, options.port)
             : fmt::format("{}:{}", options.host, options.port);
}

Handshake::Handshake(const ConnectionOptions& options) {
  if (!options.password.empty()) {
    std::vector<std::string_view>& auth = commands.emplace_back();
    auth.emplace_back("AUTH");
    if (!options.user.empty()) auth.emplace_back(options.user);
    auth.emplace_back(options.password);
  }
  if (options.db != 0) commands.push_back({"SELECT", to_chars(db_, options.db)});
}

WaitCommand::WaitCommand(int replicas, std::chrono::milliseconds timeout) noexcept
    : argv{"WAIT", to_chars(replicas_, replicas),
           to_chars(timeout_, std::max<std::int64_t>(timeout.count(), 0))} {}

int acknowledged(const redisReply* reply) noexcept {
  return reply != nullptr && reply->type == REDIS_REPLY_INTEGER ? static_cast<int>(reply->integer)
                                                                : 0;
}

}  // namespace idem::redis
