#pragma once
// The Redis connection core without I/O, shared by both faces (the blocking Node and Pipeline,
// the Asio Link): commands as RESP bytes, replies read from bytes, what a connection sends when
// it opens, what a script call and its WAIT look like, and what a reply or a lost reply means as
// an idem::errc. The faces move the bytes (hiredis's blocking calls and poll(2); an Asio socket)
// and ask this file the rest. Internal to idem_redis.

#include <hiredis/hiredis.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
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

inline std::string_view text(const redisReply& r) noexcept { return {r.str, r.len}; }

inline Failure unavailable(std::string message) {
  return make_failure(errc::store_unavailable, std::move(message));
}

/// Whether `reply` is an error reply that starts with `prefix`.
bool is_error(const redisReply& reply, std::string_view prefix) noexcept;

/// Turns an error reply into a Failure: WRONGTYPE and IDEM_CORRUPT are errc::record_corrupt,
/// the rest errc::store_unavailable.
Failure error_reply_failure(const redisReply& reply, std::string_view doing,
                            std::string_view where);

/// `failure` (an I/O failure or a timeout) of a call that went out, whose reply did not come:
/// errc::outcome_unknown, since the server may have run it.
Failure reply_lost(Failure failure);

/// Room for the decimal text of any int64 (at most 20 characters with the sign).
using DecimalText = std::array<char, 24>;

/// Decimal text of n, for arguments: a view into `buf`.
std::string_view to_chars(DecimalText& buf, std::int64_t n) noexcept;

/// A command as hiredis's calls take it (argc, argv, argvlen): the arguments' pointers and
/// lengths, inline up to kInline arguments. Views: the bytes must outlive the call.
class HiredisArgv {
 public:
  static constexpr std::size_t kInline = 16;
  HiredisArgv() = default;
  explicit HiredisArgv(std::span<const std::string_view> argv) {
    for (std::string_view arg : argv) add(arg);
  }
  void add(std::string_view arg) {
    if (n_ == kInline) {  // rare (a long batch): move to the heap
      heap_args_.assign(args_.begin(), args_.end());
      heap_lens_.assign(lens_.begin(), lens_.end());
    }
    if (n_ >= kInline) {
      heap_args_.push_back(arg.data());
      heap_lens_.push_back(arg.size());
    } else {
      args_[n_] = arg.data();
      lens_[n_] = arg.size();
    }
    ++n_;
  }
  int argc() const noexcept { return static_cast<int>(n_); }
  const char** argv() noexcept { return n_ > kInline ? heap_args_.data() : args_.data(); }
  const std::size_t* lens() const noexcept {
    return n_ > kInline ? heap_lens_.data() : lens_.data();
  }

 private:
  std::array<const char*, kInline> args_{};
  std::array<std::size_t, kInline> lens_{};
  std::vector<const char*> heap_args_;
  std::vector<std::size_t> heap_lens_;
  std::size_t n_ = 0;
};

/// Appends a command's RESP encoding to `out` in parts: its number of arguments, then each.
void append_array_header(std::string& out, std::size_t argc);
void append_bulk(std::string& out, std::string_view arg);
inline void append_command(std::string& out, std::span<const std::string_view> argv) {
  append_array_header(out, argv.size());
  for (std::string_view arg : argv) append_bulk(out, arg);
}

/// Replies parsed from the bytes a connection reads (hiredis's reader, no I/O): feed() what came,
/// then next() until it asks for more.
class ReplyReader {
 public:
  ReplyReader();
  ~ReplyReader();
  ReplyReader(const ReplyReader&) = delete;
  ReplyReader& operator=(const ReplyReader&) = delete;

  enum class Got : std::uint8_t { reply, more, broken };
  /// false: the reader is broken (error() says why) or out of memory.
  bool feed(const char* bytes, std::size_t n);
  /// The next whole reply into `out`; `more` when its bytes have not all come, `broken` when
  /// they are not RESP (error() says why; the connection is unusable).
  Got next(ReplyPtr& out);
  std::string error() const;

 private:
  redisReader* reader_;
};

/// "host:port" ("[host]:port" for IPv6) or the socket path: a server's name in messages.
std::string server_name(const ConnectionOptions& options);

/// The commands a new connection sends before any call (AUTH when a password is set, SELECT
/// when the database is not 0); an error reply to either makes the connection unusable.
struct Handshake {
  explicit Handshake(const ConnectionOptions& options);
  Handshake(const Handshake&) = delete;  // the commands point into it
  Handshake& operator=(const Handshake&) = delete;
  ~Handshake() = default;
  std::vector<std::vector<std::string_view>> commands;

 private:
  DecimalText db_{};
};

/// `WAIT replicas timeout`, sent after a write on the connection that carried it.
class WaitCommand {
  DecimalText replicas_{}, timeout_{};  // before argv, which points into them

 public:
  WaitCommand(int replicas, std::chrono::milliseconds timeout) noexcept;
  WaitCommand(const WaitCommand&) = delete;
  WaitCommand& operator=(const WaitCommand&) = delete;
  ~WaitCommand() = default;
  std::array<std::string_view, 3> argv;
};

/// WAIT's reply: the replicas that acknowledged; 0 for anything else (an error, a lost reply).
int acknowledged(const redisReply* reply) noexcept;

}  // namespace idem::redis
