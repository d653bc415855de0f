// The Redis connection core without I/O (protocol.hpp).

#include "protocol.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>

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
