// AsyncRedisStore: the record scripts on one hiredis asynchronous connection, driven by Asio.
//
// Everything that touches the hiredis context runs on one strand. hiredis asks for read and
// write readiness through its event hooks (Watcher); each call is one EVALSHA whose callback
// decodes the reply while it is valid and posts the result to the caller's executor. A watchdog
// drops the connection when the oldest call in flight has waited command_timeout (replies come
// in order, so "no reply for that long while a call waits" is exactly that), or when a connect
// takes longer than connect_timeout.

#include <fmt/format.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "idem/asio/redis_store.hpp"
#include "lua_scripts.hpp"
#include "node.hpp"
#include "store_common.hpp"

namespace idem {

namespace net = boost::asio;
using SteadyTime = std::chrono::steady_clock::time_point;

namespace {

// A script call's KEYS[1] and ARGV, gathered in one buffer: one allocation per call (the
// arguments are kept until the reply, for a resend as EVAL after NOSCRIPT).
class ScriptArgs {
 public:
  static constexpr std::size_t kMax = 6;

  ScriptArgs(std::string_view prefix, std::string_view key, std::size_t more_bytes) {
    bytes_.reserve(prefix.size() + 18 + key.size() + more_bytes);
    redis::append_tagged_key(bytes_, prefix, key);
    ends_[n_ = 1] = static_cast<std::uint32_t>(bytes_.size());
  }
  ScriptArgs& add(std::string_view arg) {
    if (n_ == kMax) throw std::logic_error("ScriptArgs: more arguments than kMax");
    bytes_.append(arg);
    ends_[++n_] = static_cast<std::uint32_t>(bytes_.size());
    return *this;
  }
  std::size_t size() const noexcept { return n_; }
  std::string_view operator[](std::size_t i) const noexcept {
    return std::string_view(bytes_).substr(ends_[i], ends_[i + 1] - ends_[i]);
  }

 private:
  std::string bytes_;
  std::array<std::uint32_t, kMax + 1> ends_{};
  std::size_t n_ = 0;
};

// One call in flight: its arguments (kept for a resend as EVAL after NOSCRIPT) and how it ends.
struct Request {
  explicit Request(ScriptArgs a) : args(std::move(a)) {}

  const redis::Script* script = nullptr;
  ScriptArgs args;        // KEYS[1], then ARGV
  bool commit = false;    // a reply lost after it went out is outcome_unknown
  bool went_out = false;  // queued on a connection that was up
  bool reloaded = false;  // already resent as EVAL after NOSCRIPT

  virtual ~Request() = default;
  // `reply` is valid during the call only; null with `failure` set when none came.
  virtual void finish(const redisReply* reply, Failure failure, std::string_view where) = 0;
};

template <class T, class Handler>
struct Op final : Request {
  using Decode = T (*)(const redisReply&, std::string_view where);
  Op(ScriptArgs a, Decode d, Handler&& h)
      : Request(std::move(a)), decode(d), handler(std::move(h)) {}

  void finish(const redisReply* reply, Failure failure, std::string_view where) override {
    T value = reply != nullptr ? decode(*reply, where) : T(std::move(failure));
    auto executor = net::get_associated_executor(handler);
    net::post(executor, net::append(std::move(handler), std::move(value)));
  }

  Decode decode;
  Handler handler;
};

Failure unavailable(std::string message) {
  return make_failure(errc::store_unavailable, std::move(message));
}

// The record scripts' error replies (WRONGTYPE, IDEM_CORRUPT, others), or nullopt.
Result<Claim> decode_claim(const redisReply& reply, std::string_view where) {
  if (reply.type == REDIS_REPLY_ERROR) return redis::error_reply_failure(reply, "claim", where);
  redis::RedisClaimReply code{};
  Result<Claim> claim = redis::decode_claim(reply, where, code);
  if (claim && (code == redis::RedisClaimReply::token_unknown ||
                code == redis::RedisClaimReply::token_mismatch)) {
    return make_failure(errc::record_corrupt, "record claim script answered a token code");
  }
  return claim;
}

Status decode_fenced(const redisReply& reply, std::string_view where, std::string_view doing) {
  if (reply.type == REDIS_REPLY_ERROR) return redis::error_reply_failure(reply, doing, where);
  if (reply.type == REDIS_REPLY_INTEGER &&
      reply.integer == static_cast<long long>(redis::RedisFencedReply::done)) {
    return {};
  }
  if (reply.type == REDIS_REPLY_INTEGER &&
      reply.integer == static_cast<long long>(redis::RedisFencedReply::lease_lost)) {
    return Status(errc::lease_lost,
                  fmt::format("{}: the record is no longer held under this fence", doing));
  }
  return make_failure(
      errc::record_corrupt,
      fmt::format("redis {}: unexpected script reply: {}: not 0 or 1", where, doing));
}
Status decode_commit(const redisReply& r, std::string_view where) {
  return decode_fenced(r, where, "commit");
}
Status decode_abort(const redisReply& r, std::string_view where) {
  return decode_fenced(r, where, "abort");
}
Status decode_extend(const redisReply& r, std::string_view where) {
  return decode_fenced(r, where, "extend");
}

}  // namespace

class AsyncRedisStore::Impl : public std::enable_shared_from_this<AsyncRedisStore::Impl> {
 public:
  Impl(const net::any_io_executor& executor, AsyncRedisStoreOptions options)
      : options_(std::move(options)),
        strand_(net::make_strand(executor)),
        watchdog_(strand_),
        backoff_(options_.reconnect_backoff) {
    const redis::ConnectionOptions& c = options_.connection;
    where_ = c.unix_socket.empty() ? fmt::format("{}:{}", c.host, c.port) : c.unix_socket;
  }

  // Ends the connection (its calls fail) and stops the watchdog; the store's destructor.
  void close() {
    watchdog_.cancel();
    drop("the store was closed");
  }

  // Runs `script` with `args` and decodes its reply with `decode`, as an awaitable.
  template <class T>
  net::awaitable<T> eval(const redis::Script& script, ScriptArgs args, bool commit,
                         T (*decode)(const redisReply&, std::string_view)) {
    return net::async_initiate<const net::use_awaitable_t<>&, void(T)>(
        [self = shared_from_this(), &script, decode, commit,
         args = std::move(args)](auto handler) mutable {
          using Handler = decltype(handler);
          auto op = std::make_unique<Op<T, Handler>>(std::move(args), decode, std::move(handler));
          op->script = &script;
          op->commit = commit;
          if (self->options_.single_threaded) {
            self->submit(std::unique_ptr<Request>(op.release()));
            return;
          }
          net::dispatch(self->strand_, [self, op = std::move(op)]() mutable {
            self->submit(std::unique_ptr<Request>(op.release()));
          });
        },
        net::use_awaitable);
  }

  std::uint64_t connections_opened() const noexcept {
    return opened_.load(std::memory_order_relaxed);
  }

 private:
  // hiredis's event hooks: read and write readiness of the connection's socket on the strand.
  struct Watcher : std::enable_shared_from_this<Watcher> {
    Watcher(Impl* owner, redisAsyncContext* context)
        : impl(owner), ac(context), socket(owner->strand_, context->c.fd) {}

    void arm(bool read) {
      bool& armed = read ? read_armed : write_armed;
      if (armed || ac == nullptr) return;
      armed = true;
      socket.async_wait(read ? net::posix::stream_descriptor::wait_read
                             : net::posix::stream_descriptor::wait_write,
                        [self = shared_from_this(), read](boost::system::error_code ec) {
                          (read ? self->read_armed : self->write_armed) = false;
                          if (ec || self->ac == nullptr) return;
                          if (read ? !self->reading : !self->writing) return;
                          if (read) {
                            redisAsyncHandleRead(self->ac);
                          } else {
                            redisAsyncHandleWrite(self->ac);
                          }
                          // The context may be gone now (cleanup ran).
                          if (self->ac != nullptr && (read ? self->reading : self->writing)) {
                            self->arm(read);
                          }
                        });
    }

    static void add_read(void* p) {
      auto* w = static_cast<Watcher*>(p);
      w->reading = true;
      w->arm(true);
    }
    static void del_read(void* p) { static_cast<Watcher*>(p)->reading = false; }
    static void add_write(void* p) {
      auto* w = static_cast<Watcher*>(p);
      w->writing = true;
      w->arm(false);
    }
    static void del_write(void* p) { static_cast<Watcher*>(p)->writing = false; }
    // The context is being freed: hiredis closes the socket; stop watching it.
    static void cleanup(void* p) {
      auto* w = static_cast<Watcher*>(p);
      w->ac = nullptr;
      w->reading = w->writing = false;
      boost::system::error_code ignored;
      w->socket.cancel(ignored);
      (void)w->socket.release();
      w->keep.reset();  // the pending waits hold their own references
    }

    Impl* impl;
    redisAsyncContext* ac;
    net::posix::stream_descriptor socket;
    bool reading = false, writing = false, read_armed = false, write_armed = false;
    std::shared_ptr<Watcher> keep;  // the context's reference, until cleanup
  };

  void submit(std::unique_ptr<Request> request) {
    if (context_ == nullptr && !connect()) {
      request->finish(nullptr, unavailable(last_failure_), where_);
      return;
    }
    send(std::move(request), /*eval_source=*/false);
  }

  // EVALSHA (or EVAL with the source, after NOSCRIPT) on the open context.
  void send(std::unique_ptr<Request> request, bool eval_source) {
    const redis::Script& script = *request->script;
    std::array<const char*, 16> argv{};
    std::array<std::size_t, 16> lens{};
    std::size_t n = 0;
    auto put = [&](std::string_view s) {
      argv[n] = s.data();
      lens[n] = s.size();
      ++n;
    };
    put(eval_source ? std::string_view("EVAL") : std::string_view("EVALSHA"));
    put(eval_source ? script.source : script.sha);
    put("1");
    for (std::size_t i = 0; i < request->args.size(); ++i) put(request->args[i]);
    request->went_out = connected_;
    Request* raw = request.release();
    if (redisAsyncCommandArgv(context_, &Impl::on_reply, raw, static_cast<int>(n), argv.data(),
                              lens.data()) != REDIS_OK) {
      std::unique_ptr<Request> back(raw);
      back->finish(nullptr, unavailable(fmt::format("redis {}: the connection is closing", where_)),
                   where_);
      return;
    }
    if (in_flight_++ == 0) last_progress_ = std::chrono::steady_clock::now();
    arm_watchdog();
  }

  static void on_reply(redisAsyncContext* ac, void* r, void* privdata) {
    auto* self = static_cast<Impl*>(ac->data);
    std::unique_ptr<Request> request(static_cast<Request*>(privdata));
    auto* reply = static_cast<redisReply*>(r);
    if (self->in_flight_ > 0) --self->in_flight_;
    self->last_progress_ = std::chrono::steady_clock::now();
    if (reply == nullptr) {
      // The connection failed or was dropped: no reply will come.
      std::string why = !self->drop_reason_.empty() ? self->drop_reason_
                        : ac->err != 0              ? std::string(ac->errstr)
                                                    : std::string("connection closed");
      Failure failure = unavailable(fmt::format("redis {}: {}", self->where_, why));
      if (request->commit && request->went_out) failure = redis::reply_lost(std::move(failure));
      request->finish(nullptr, std::move(failure), self->where_);
      return;
    }
    if (redis::is_error(*reply, "NOSCRIPT") && !request->reloaded && ac == self->context_) {
      // The server lost its script cache (a restart, SCRIPT FLUSH): EVAL loads and runs it.
      request->reloaded = true;
      self->send(std::move(request), /*eval_source=*/true);
      return;
    }
    request->finish(reply, {}, self->where_);
  }

  bool connect() {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_connect_) {
      last_failure_ = fmt::format(
          "redis {}: not connected ({}); the next attempt in {} ms", where_, last_error_,
          std::chrono::duration_cast<std::chrono::milliseconds>(next_connect_ - now).count());
      return false;
    }
    const redis::ConnectionOptions& c = options_.connection;
    redisAsyncContext* ac = c.unix_socket.empty() ? redisAsyncConnect(c.host.c_str(), c.port)
                                                  : redisAsyncConnectUnix(c.unix_socket.c_str());
    if (ac == nullptr || ac->err != 0) {
      last_error_ = ac != nullptr ? ac->errstr : "out of memory";
      if (ac != nullptr) redisAsyncFree(ac);
      failed_attempt();
      last_failure_ = fmt::format("redis {}: cannot connect: {}", where_, last_error_);
      return false;
    }
    opened_.fetch_add(1, std::memory_order_relaxed);
    auto watcher = std::make_shared<Watcher>(this, ac);
    watcher->keep = watcher;
    ac->data = this;
    ac->ev.data = watcher.get();
    ac->ev.addRead = &Watcher::add_read;
    ac->ev.delRead = &Watcher::del_read;
    ac->ev.addWrite = &Watcher::add_write;
    ac->ev.delWrite = &Watcher::del_write;
    ac->ev.cleanup = &Watcher::cleanup;
    redisAsyncSetConnectCallback(ac, &Impl::on_connect);
    redisAsyncSetDisconnectCallback(ac, &Impl::on_disconnect);
    context_ = ac;
    connected_ = false;
    drop_reason_.clear();
    connect_started_ = now;
    // AUTH and SELECT go first on the connection; an error reply to either drops it.
    if (!c.password.empty()) {
      std::vector<std::string_view> auth{"AUTH"};
      if (!c.user.empty()) auth.emplace_back(c.user);
      auth.emplace_back(c.password);
      setup_command(auth);
    }
    if (c.db != 0) {
      const std::string db = std::to_string(c.db);
      const std::array<std::string_view, 2> select{"SELECT", db};
      setup_command(select);
    }
    arm_watchdog();
    return true;
  }

  template <class Args>
  void setup_command(const Args& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    redisAsyncCommandArgv(
        context_,
        [](redisAsyncContext* ac, void* r, void*) {
          auto* self = static_cast<Impl*>(ac->data);
          auto* reply = static_cast<redisReply*>(r);
          if (reply != nullptr && reply->type == REDIS_REPLY_ERROR && ac == self->context_) {
            self->drop(fmt::format("connection setup refused: {}",
                                   std::string_view(reply->str, reply->len)));
          }
        },
        nullptr, static_cast<int>(argv.size()), argv.data(), lens.data());
  }

  static void on_connect(const redisAsyncContext* ac, int status) {
    auto* self = static_cast<Impl*>(ac->data);
    if (ac != self->context_) return;
    if (status == REDIS_OK) {
      self->connected_ = true;
      self->backoff_ = self->options_.reconnect_backoff;
      return;
    }
    // hiredis frees the context after this; its calls end with no reply.
    self->last_error_ = ac->errstr;
    self->drop_reason_ = fmt::format("cannot connect: {}", ac->errstr);
    self->context_ = nullptr;
    self->connected_ = false;
    self->failed_attempt();
  }

  static void on_disconnect(const redisAsyncContext* ac, int) {
    auto* self = static_cast<Impl*>(ac->data);
    if (ac != self->context_) return;
    self->last_error_ = ac->err != 0 ? ac->errstr : "connection closed";
    self->context_ = nullptr;
    self->connected_ = false;
    self->failed_attempt();
  }

  // Starts the backoff before the next connection attempt.
  void failed_attempt() {
    next_connect_ = std::chrono::steady_clock::now() + backoff_;
    backoff_ = std::min(backoff_ * 2, options_.max_reconnect_backoff);
  }

  // Frees the context: hiredis ends every call on it with no reply, which reads `why`.
  void drop(std::string why) {
    redisAsyncContext* ac = std::exchange(context_, nullptr);
    if (ac == nullptr) return;
    last_error_ = why;
    drop_reason_ = std::move(why);
    connected_ = false;
    failed_attempt();
    redisAsyncFree(ac);
  }

  void arm_watchdog() {
    if (watchdog_armed_) return;
    const auto& c = options_.connection;
    const auto period =
        std::max(std::chrono::milliseconds{1}, std::min(c.command_timeout, c.connect_timeout) / 4);
    watchdog_armed_ = true;
    watchdog_.expires_after(period);
    watchdog_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      self->watchdog_armed_ = false;
      if (ec || self->context_ == nullptr) return;
      const auto now = std::chrono::steady_clock::now();
      const auto& c = self->options_.connection;
      if (!self->connected_ && now - self->connect_started_ > c.connect_timeout) {
        self->drop(fmt::format("connecting took more than {} ms", c.connect_timeout.count()));
        return;
      }
      if (self->in_flight_ > 0 && now - self->last_progress_ > c.command_timeout) {
        self->drop(fmt::format("no reply within {} ms", c.command_timeout.count()));
        return;
      }
      if (self->in_flight_ > 0 || !self->connected_) self->arm_watchdog();
    });
  }

  AsyncRedisStoreOptions options_;
  std::string where_;
  net::strand<net::any_io_executor> strand_;
  net::steady_timer watchdog_;
  bool watchdog_armed_ = false;

  redisAsyncContext* context_ = nullptr;  // null: not connected
  bool connected_ = false;                // the connect completed
  std::size_t in_flight_ = 0;
  SteadyTime last_progress_{};
  SteadyTime connect_started_{};
  SteadyTime next_connect_{};
  std::chrono::milliseconds backoff_;
  std::string last_error_;    // why the last connection failed or ended
  std::string last_failure_;  // the failure of a call that found no connection
  std::string drop_reason_;   // why this store dropped the connection
  std::atomic<std::uint64_t> opened_{0};
};

AsyncRedisStore::AsyncRedisStore(const net::any_io_executor& executor,
                                 AsyncRedisStoreOptions options)
    : prefix_(options.prefix) {
  impl_ = std::make_shared<Impl>(executor, std::move(options));
}

AsyncRedisStore::~AsyncRedisStore() {
  try {
    impl_->close();
  } catch (...) {
    // Out of memory for the message: the connection stays open until the process ends.
  }
}

std::string AsyncRedisStore::record_key(std::string_view effective_key) const {
  return redis::tagged_key(prefix_, effective_key);
}

std::uint64_t AsyncRedisStore::connections_opened() const noexcept {
  return impl_->connections_opened();
}

net::awaitable<Result<Claim>> AsyncRedisStore::async_claim(const ClaimRequest& request) {
  const auto fp = redis::fingerprint_bytes(request.fingerprint);
  redis::DecimalText lease;
  redis::DecimalText retention;
  ScriptArgs args(prefix_, request.key, fp.size() + 2 * sizeof(redis::DecimalText));
  args.add(std::string_view(fp.data(), fp.size()))
      .add(redis::ms_text(lease, request.lease))
      .add(redis::ms_text(retention, request.retention));
  return impl_->eval<Result<Claim>>(redis::script_record_claim, std::move(args), false,
                                    &decode_claim);
}

net::awaitable<Status> AsyncRedisStore::async_commit(const Ticket& ticket,
                                                     const Completion& completion) {
  redis::DecimalText fence;
  redis::DecimalText ttl;
  ScriptArgs args(prefix_, ticket.key,
                  completion.result.size() + 2 * sizeof(redis::DecimalText) + 1);
  args.add(redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence)))
      .add(detail::to_redis(detail::finished_state(completion.status)))
      .add(completion.result)
      .add(redis::ms_text(ttl, completion.ttl));
  return impl_->eval<Status>(redis::script_record_commit, std::move(args), true, &decode_commit);
}

net::awaitable<Status> AsyncRedisStore::async_abort(const Ticket& ticket) {
  redis::DecimalText fence;
  ScriptArgs args(prefix_, ticket.key, sizeof(redis::DecimalText));
  args.add(redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence)));
  return impl_->eval<Status>(redis::script_record_abort, std::move(args), false, &decode_abort);
}

net::awaitable<Status> AsyncRedisStore::async_extend(const Ticket& ticket,
                                                     std::chrono::milliseconds lease) {
  redis::DecimalText fence;
  redis::DecimalText ms;
  ScriptArgs args(prefix_, ticket.key, 2 * sizeof(redis::DecimalText));
  args.add(redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence)))
      .add(redis::ms_text(ms, lease));
  return impl_->eval<Status>(redis::script_record_extend, std::move(args), false, &decode_extend);
}

}  // namespace idem
