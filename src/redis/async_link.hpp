#pragma once
// One Redis server's asynchronous connection for AsyncRedisStore: an Asio stream (transport.hpp)
// on a strand, multiplexing every call sent to it, with its watchdog and reconnect backoff. The
// store's Impl owns one Link per server (one, or a cluster's nodes) and routes calls to them; a
// Link hands each reply or failure back to its LinkOwner. Internal to idem_asio_redis.

#include <hiredis/hiredis.h>

#include <array>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "connection_policy.hpp"
#include "idem/redis/client.hpp"
#include "idem/result.hpp"
#include "protocol.hpp"
#include "slot_routing.hpp"
#include "tls.hpp"

namespace idem::redis::detail {

namespace net = boost::asio;
using SteadyTime = std::chrono::steady_clock::time_point;
using Strand = net::strand<net::any_io_executor>;

class Link;

// A command's arguments gathered in one buffer, kept until the reply (for a resend as EVAL after
// NOSCRIPT, or to another node). For a script: KEYS[1] (the tagged record key, from with_key),
// then ARGV. Inline up to kInline bytes, as a claim's are: the call then needs no allocation of
// its own for them; a longer command (a commit's result) moves to the heap.
class Args {
 public:
  static constexpr std::size_t kMax = 6;
  static constexpr std::size_t kInline = 128;

  Args() = default;
  Args(Args&& other) noexcept { take(other); }
  Args& operator=(Args&& other) noexcept {
    if (this != &other) take(other);
    return *this;
  }
  Args(const Args&) = delete;
  Args& operator=(const Args&) = delete;
  ~Args() = default;

  /// KEYS[1] as the record key of `key` under `prefix`, with room for `more_bytes` of ARGV.
  static Args with_key(std::string_view prefix, std::string_view key, std::size_t more_bytes);

  Args& add(std::string_view arg);
  std::size_t size() const noexcept { return n_; }
  std::string_view operator[](std::size_t i) const noexcept {
    return std::string_view(data() + ends_[i], ends_[i + 1] - ends_[i]);
  }

 private:
  const char* data() const noexcept { return on_heap_ ? heap_.data() : inline_.data(); }
  void reserve(std::size_t bytes);
  void put(std::string_view bytes);  // to the argument being built
  void take(Args& other) noexcept;

  std::array<char, kInline> inline_;
  std::string heap_;
  bool on_heap_ = false;
  std::uint32_t used_ = 0;
  std::array<std::uint32_t, kMax + 1> ends_{};
  std::size_t n_ = 0;
};

// One call in flight: its arguments (kept for a resend as EVAL after NOSCRIPT, or to another
// node) and how it ends.
struct Request {
  const redis::Script* script = nullptr;  // null: a plain command, `args` its whole argv
  Args args;                              // KEYS[1], then ARGV
  bool report_in_doubt = false;           // a commit: a reply lost after it went out is
                                          // outcome_unknown
  bool reloaded = false;                  // already resent as EVAL after NOSCRIPT
  bool with_source = false;  // sent as EVAL with the source at once: a command behind it on
                             // the connection (a BLPOP) must not run before it, as a resend
                             // after NOSCRIPT would
  bool direct = false;       // answered by the link it went to, never routed on (a wait's
                             // commands, on the wait connection of the node that serves the slot)
  std::chrono::milliseconds blocks_for{0};  // a blocking command (BLPOP): its reply is due
                                            // after this, not within command_timeout

  // Cluster routing.
  redis::Tries<Link> tries;
  bool asking = false;          // ASKING precedes the command on its link
  bool waited_for_map = false;  // waited once for a slot map that serves its slot

  virtual ~Request() = default;
  // `reply` is valid during the call only; null with `failure` set when none came. The caller's
  // wait ends through its executor (a post).
  virtual void finish(const redisReply* reply, Failure failure, std::string_view where) = 0;
  // For a store whose callers run on the thread that reads the replies (single_threaded):
  // decodes `reply` and keeps the answer, which complete_in_place() hands over once the Link is
  // done reading, without a post. false: this request cannot; finish() it instead.
  virtual bool hold_answer(const redisReply& /*reply*/, std::string_view /*where*/) {
    return false;
  }
  // Ends the caller's wait with the held answer, in this thread when its executor runs here.
  // `self` is this request: it is freed before the caller resumes.
  virtual void complete_in_place(std::unique_ptr<Request> /*self*/) {}

  // Durability (WAIT after a write): a reply `wrote` accepts is held (hold_answer) while WAIT
  // runs on the same connection; the WAIT's outcome may replace the held answer (fail_held),
  // which then goes to the caller through its executor (complete_posted) or in place.
  bool (*wrote)(const redisReply&) = nullptr;
  std::string_view operation;  // "claim", "commit": for the shortfall's report
  virtual void fail_held(const Failure& /*failure*/) {}
  virtual void complete_posted(std::unique_ptr<Request> /*self*/) {}
};

/// Where a Link's replies go: the store's router. Called on the strand, from the Link's reads.
class LinkOwner {
 public:
  /// A reply came for `request` (a NOSCRIPT already answered by resending the script's source).
  virtual void answered(Link& link, std::unique_ptr<Request> request, const redisReply& reply) = 0;
  /// No reply will come: the connection failed, timed out, or could not be opened.
  virtual void failed(Link& link, std::unique_ptr<Request> request, Failure failure) = 0;
  /// What keeps the owner (and so its links) alive while a link's timer waits.
  virtual std::shared_ptr<void> keep_alive() = 0;

 protected:
  ~LinkOwner() = default;
};

// One server's connection: opened on demand, multiplexing every call sent to it, dropped when it
// fails or times out (Watchdog), and opened again after a backoff (ReconnectBackoff). Commands go
// out as RESP bytes (protocol.hpp), gathered into one write per read or per turn of the executor;
// replies come from a ReplyReader fed with what the Transport reads. Everything runs on the owner's
// strand; the owner keeps its links as long as itself.
class Link {
 public:
  // `one_thread`: every call comes from the one thread that runs the executor
  // (AsyncRedisStoreOptions::single_threaded).
  // `tls`: the store's TLS context, null when options.tls is off.
  Link(LinkOwner& owner, const Strand& strand, redis::ConnectionOptions options,
       std::shared_ptr<const redis::TlsContext> tls, redis::ReconnectBackoff backoff,
       std::atomic<std::uint64_t>& opened, bool one_thread);
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;
  ~Link();

  // Sends `request` (after ASKING when request->asking); its reply or failure goes to the
  // owner's answered() or failed().
  void submit(std::unique_ptr<Request> request);
  // Ends the connection (its calls fail) and stops the watchdog; no connection opens after.
  void close();

  // Keeps `request`, whose answer it holds (Request::hold_answer), until the read that brought
  // it is done: then it completes in place, in the order the replies came.
  void complete_after_read(std::unique_ptr<Request> request) {
    held_.push_back(std::move(request));
  }

  const std::string& where() const noexcept { return where_; }
  const std::string& host() const noexcept { return options_.host; }
  const redis::ConnectionOptions& options() const noexcept { return options_; }

 private:
  // A command whose reply is owed: a call (`request`), or one whose reply is not the caller's
  // (ASKING: the call's own reply tells; the handshake: `setup`, an error drops the connection).
  struct Sent {
    std::unique_ptr<Request> request;
    bool setup = false;
  };
  struct Connection;
  using ConnectionPtr = std::shared_ptr<Connection>;

  void send(std::unique_ptr<Request> request, bool eval_source);
  void complete_held();
  bool connect();
  void read(const ConnectionPtr& conn);
  void on_bytes(const ConnectionPtr& conn, std::size_t n);
  void on_reply(Sent sent, const redisReply& reply);
  void flush_soon(const ConnectionPtr& conn);
  void flush(const ConnectionPtr& conn);
  void drop(std::string why);
  void arm_watchdog();

  LinkOwner& owner_;
  const Strand& strand_;
  bool one_thread_;
  redis::ConnectionOptions options_;
  std::shared_ptr<const redis::TlsContext> tls_;
  redis::ReconnectBackoff backoff_;
  redis::Watchdog watchdog_;
  std::atomic<std::uint64_t>& opened_;
  std::string where_;
  net::steady_timer watchdog_timer_;
  bool watchdog_armed_ = false;
  bool closed_ = false;

  ConnectionPtr conn_;        // null: not connected; each handler keeps its own
  bool connected_ = false;    // the connect completed
  std::string last_failure_;  // the failure of a call that found no connection
  // An ASKING the server refused (an ACL user without the right): the error the call sent after
  // it is answered with, since its own reply would only redirect it again.
  std::string asking_refused_;
  std::vector<std::unique_ptr<Request>> held_;  // answered in the read now running
};

}  // namespace idem::redis::detail
