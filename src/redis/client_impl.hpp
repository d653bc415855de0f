#pragma once
// The pool behind idem::redis::Client, and what the stores use of it: a borrowed connection that
// runs commands and EVALSHA with hiredis. Internal to idem_redis.

#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/redis/client.hpp"
#include "idem/result.hpp"

namespace idem::redis {

struct ReplyDeleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

/// A Lua script embedded at build time (lua_scripts.hpp, generated from src/redis/*.lua).
struct Script {
  std::string_view name;    // file name without .lua
  std::string_view source;  // the exact bytes
  std::string_view sha;     // SHA1 of source, lower-case hex, as EVALSHA wants it
};

class Connection;

class Client::Impl {
 public:
  explicit Impl(ConnectionOptions options);
  ~Impl();

  /// Borrows a connection: an idle one, a new one while under pool_size, or the first one
  /// returned within pool_wait.
  Result<Connection> acquire();

  const ConnectionOptions& options() const noexcept { return options_; }
  std::size_t open_connections() const;
  std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  /// "host:port" or the socket path, for messages.
  const std::string& where() const noexcept { return where_; }

 private:
  friend class Connection;
  Result<redisContext*> connect();
  void give_back(redisContext* c, bool healthy);

  ConnectionOptions options_;
  std::string where_;
  mutable std::mutex mutex_;
  std::condition_variable returned_;
  struct Idle {
    redisContext* c;
    std::chrono::steady_clock::time_point since;  // when it was returned
  };
  std::vector<Idle> idle_;
  std::size_t open_ = 0;  // idle + borrowed + being opened
  std::atomic<std::uint64_t> dropped_{0};
};

/// A borrowed connection; returns to the pool when destroyed, or is dropped when it failed.
class Connection {
 public:
  Connection(Client::Impl* pool, redisContext* c) noexcept : pool_(pool), c_(c) {}
  Connection(Connection&& other) noexcept
      : pool_(other.pool_), c_(std::exchange(other.c_, nullptr)) {}
  Connection& operator=(Connection&&) = delete;
  ~Connection();

  /// One command. Error replies come back as replies; I/O failures and timeouts are
  /// errc::store_unavailable and break the connection.
  Result<ReplyPtr> command(std::span<const std::string_view> argv);

  /// EVALSHA script keys... args...; on NOSCRIPT, SCRIPT LOAD and one retry. Error replies
  /// become failures: WRONGTYPE and IDEM_CORRUPT are errc::record_corrupt, the rest
  /// errc::store_unavailable.
  Result<ReplyPtr> eval(const Script& script, std::span<const std::string_view> keys,
                        std::span<const std::string_view> args);

  /// WAIT replicas timeout when `durability` asks for it; reports a shortfall to its callback.
  /// Returns whether the replicas acknowledged (true when nothing was asked).
  bool wait_for_replicas(const Durability& durability, std::string_view operation);

  bool broken() const noexcept { return c_ == nullptr || c_->err != 0; }

 private:
  Failure io_failure(std::string_view doing) const;

  Client::Impl* pool_;
  redisContext* c_;
};

/// Turns an error reply into a Failure (see Connection::eval).
Failure error_reply_failure(const redisReply& reply, std::string_view doing,
                            std::string_view where);

/// Decimal text of n, for arguments.
std::string_view to_chars(char (&buf)[24], std::int64_t n) noexcept;

}  // namespace idem::redis
