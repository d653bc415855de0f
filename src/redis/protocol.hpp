#pragma once
// The Redis connection core without I/O, shared by both faces (the blocking Node and Pipeline,
// the Asio Link): commands as RESP bytes, replies read from bytes, what a connection sends when
// it opens, what a script call and its WAIT look like, and what a reply or a lost reply means as
// an idem::errc. The faces move the bytes (poll(2) on a socket, socket.hpp; an Asio socket) and
// ask this file and wire.hpp the rest. Internal to idem_redis.

#include <hiredis/hiredis.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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
/// an ACL refusal (a right the user lacks: acl_refusal(), which the message names)
/// errc::config_invalid, the rest errc::store_unavailable.
Failure error_reply_failure(const redisReply& reply, std::string_view doing,
                            std::string_view where);

/// `failure` (an I/O failure or a timeout) of a call that went out, whose reply did not come:
/// errc::outcome_unknown, since the server may have run it.
Failure reply_lost(Failure failure);

/// What a call on a connection that broke fails with: `why`, or reply_lost(why) when the call
/// asked for that (a commit) and its command went out.
inline Failure lost_call(const Failure& why, bool report_in_doubt, bool written) {
  return report_in_doubt && written ? reply_lost(why) : why;
}

/// Room for the decimal text of any int64 (at most 20 characters with the sign).
using DecimalText = std::array<char, 24>;

/// Decimal text of n, for arguments: a view into `buf`.
std::string_view to_chars(DecimalText& buf, std::int64_t n) noexcept;

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
  ReplyReader(ReplyReader&& other) noexcept : reader_(std::exchange(other.reader_, nullptr)) {}
  ReplyReader& operator=(ReplyReader&&) = delete;
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
