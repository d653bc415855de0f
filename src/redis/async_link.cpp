// One Redis server's asynchronous connection (async_link.hpp).

#include "async_link.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <utility>

#include "hiredis_events.hpp"
#include "store_common.hpp"

namespace idem::redis::detail {

Args Args::with_key(std::string_view prefix, std::string_view key, std::size_t more_bytes) {
  Args args;
  const redis::KeyTag tag = redis::key_tag(key);
  args.reserve(prefix.size() + tag.size() + key.size() + more_bytes);
  args.put(prefix);
  args.put(std::string_view(tag.data(), tag.size()));
  args.put(key);
  args.ends_[args.n_ = 1] = args.used_;
  return args;
}

Args& Args::add(std::string_view arg) {
  if (n_ == kMax) throw std::logic_error("idem: redis::detail::Args: more arguments than kMax");
  put(arg);
  ends_[++n_] = used_;
  return *this;
}

void Args::reserve(std::size_t bytes) {
  if (bytes <= kInline || on_heap_) return;
  heap_.reserve(bytes);
  heap_.assign(inline_.data(), used_);
  on_heap_ = true;
}

void Args::put(std::string_view bytes) {
  if (!on_heap_ && used_ + bytes.size() > kInline) reserve(2 * (used_ + bytes.size()));
  if (on_heap_) {
    heap_.append(bytes);
  } else if (!bytes.empty()) {
    std::memcpy(inline_.data() + used_, bytes.data(), bytes.size());
  }
  used_ += static_cast<std::uint32_t>(bytes.size());
}

void Args::take(Args& other) noexcept {
  on_heap_ = other.on_heap_;
  used_ = other.used_;
  ends_ = other.ends_;
  n_ = other.n_;
  if (on_heap_) {
    heap_ = std::move(other.heap_);
  } else if (used_ != 0) {
    std::memcpy(inline_.data(), other.inline_.data(), used_);
  }
}

// After a read of the connection: each answer held back during it goes to its caller, in the
// order the replies came. Called once hiredis is done with the read, so no caller runs inside its
// callbacks; a caller may end the store, and this link with it, so the answers leave the link
// first. A caller's exception (rethrown after the others are answered) goes out of
// io_context::run, as one from a posted completion would.
void Link::complete_held() {
  if (held_.empty()) return;
  std::vector<std::unique_ptr<Request>> answered;
  answered.swap(held_);
  std::exception_ptr thrown;
  for (auto& request : answered) {
    try {
      Request* raw = request.get();
      raw->complete_in_place(std::move(request));
    } catch (...) {
      if (!thrown) thrown = std::current_exception();
    }
  }
  if (thrown) std::rethrow_exception(thrown);
}

Link::Link(LinkOwner& owner, const Strand& strand, redis::ConnectionOptions options,
           LinkBackoff backoff, std::atomic<std::uint64_t>& opened, bool one_thread)
    : owner_(owner),
      strand_(strand),
      one_thread_(one_thread),
      options_(std::move(options)),
      backoff_options_(backoff),
      opened_(opened),
      watchdog_(strand),
      backoff_(backoff.initial) {
  where_ = redis::server_name(options_);
}

void Link::close() {
  closed_ = true;
  watchdog_.cancel();
  drop("the store was closed");
}

void Link::submit(std::unique_ptr<Request> request) {
  if (context_ == nullptr && !connect()) {
    owner_.failed(*this, std::move(request), redis::unavailable(last_failure_));
    return;
  }
  send(std::move(request), /*eval_source=*/false);
}

// EVALSHA (or EVAL with the source, after NOSCRIPT; or a plain command) on the open context.
void Link::send(std::unique_ptr<Request> request, bool eval_source) {
  redis::HiredisArgv argv;
  if (const redis::Script* script = request->script) {
    argv.add(eval_source ? std::string_view("EVAL") : std::string_view("EVALSHA"));
    argv.add(eval_source ? script->source : script->sha);
    argv.add("1");
  }
  for (std::size_t i = 0; i < request->args.size(); ++i) argv.add(request->args[i]);
  if (request->asking) {
    // ASK: the importing node runs the next command on this connection for a key it does not
    // serve yet. Its reply is not read: the command's own reply tells.
    std::array<const char*, 1> asking{"ASKING"};
    std::array<std::size_t, 1> asking_len{6};
    (void)redisAsyncCommandArgv(context_, nullptr, nullptr, 1, asking.data(), asking_len.data());
  }
  request->went_out = connected_;
  Request* raw = request.release();
  if (redisAsyncCommandArgv(context_, &Link::on_reply, raw, argv.argc(), argv.argv(),
                            argv.lens()) != REDIS_OK) {
    owner_.failed(*this, std::unique_ptr<Request>(raw),
                  redis::unavailable(fmt::format("redis {}: the connection is closing", where_)));
    return;
  }
  if (in_flight_++ == 0) last_progress_ = std::chrono::steady_clock::now();
  arm_watchdog();
}

void Link::on_reply(redisAsyncContext* ac, void* r, void* privdata) {
  auto* self = static_cast<Link*>(ac->data);
  std::unique_ptr<Request> request(static_cast<Request*>(privdata));
  auto* reply = static_cast<redisReply*>(r);
  if (self->in_flight_ > 0) --self->in_flight_;
  self->progressed_ = true;  // the watchdog's next tick reads the clock: not one read per reply
  if (reply == nullptr) {
    // The connection failed or was dropped: no reply will come.
    std::string why = !self->drop_reason_.empty() ? self->drop_reason_
                      : ac->err != 0              ? std::string(ac->errstr)
                                                  : std::string("connection closed");
    Failure failure = redis::unavailable(fmt::format("redis {}: {}", self->where_, why));
    if (request->commit && request->went_out) failure = redis::reply_lost(std::move(failure));
    self->owner_.failed(*self, std::move(request), std::move(failure));
    return;
  }
  if (request->script != nullptr && redis::is_error(*reply, "NOSCRIPT") && !request->reloaded &&
      ac == self->context_) {
    // The server lost its script cache (a restart, SCRIPT FLUSH): EVAL loads and runs it.
    request->reloaded = true;
    self->send(std::move(request), /*eval_source=*/true);
    return;
  }
  self->owner_.answered(*self, std::move(request), *reply);
}

bool Link::connect() {
  const auto now = std::chrono::steady_clock::now();
  if (closed_) {
    last_failure_ = fmt::format("redis {}: the store was closed", where_);
    return false;
  }
  if (now < next_connect_) {
    last_failure_ = fmt::format(
        "redis {}: not connected ({}); the next attempt in {} ms", where_, last_error_,
        std::chrono::duration_cast<std::chrono::milliseconds>(next_connect_ - now).count());
    return false;
  }
  const redis::ConnectionOptions& c = options_;
  redisAsyncContext* ac = c.unix_socket.empty() ? redisAsyncConnect(c.host.c_str(), c.port)
                                                : redisAsyncConnectUnix(c.unix_socket.c_str());
  if (ac == nullptr || ac->err != 0) {
    last_error_ = ac != nullptr ? ac->errstr : "out of memory";
    if (ac != nullptr) redisAsyncFree(ac);
    failed_attempt();
    last_failure_ = fmt::format("redis {}: cannot connect: {}", where_, last_error_);
    return false;
  }
  if (c.keep_alive && c.unix_socket.empty()) (void)redisEnableKeepAlive(&ac->c);
  opened_.fetch_add(1, std::memory_order_relaxed);
  ac->data = this;
  // The link outlives every read of its connection: its store closes the connection first.
  // On one thread the socket's handlers need no strand.
  const net::any_io_executor events = one_thread_
                                          ? net::any_io_executor(strand_.get_inner_executor())
                                          : net::any_io_executor(strand_);
  HiredisEvents::attach(ac, events, [this] { complete_held(); });
  redisAsyncSetConnectCallback(ac, &Link::on_connect);
  redisAsyncSetDisconnectCallback(ac, &Link::on_disconnect);
  context_ = ac;
  connected_ = false;
  drop_reason_.clear();
  connect_started_ = now;
  // AUTH and SELECT go first on the connection; an error reply to either drops it.
  const redis::Handshake handshake(c);
  for (const std::vector<std::string_view>& command : handshake.commands) {
    redis::HiredisArgv argv(command);
    redisAsyncCommandArgv(
        context_,
        [](redisAsyncContext* ac, void* r, void*) {
          auto* self = static_cast<Link*>(ac->data);
          auto* reply = static_cast<redisReply*>(r);
          if (reply != nullptr && reply->type == REDIS_REPLY_ERROR && ac == self->context_) {
            self->drop(fmt::format("connection setup refused: {}", redis::text(*reply)));
          }
        },
        nullptr, argv.argc(), argv.argv(), argv.lens());
  }
  arm_watchdog();
  return true;
}

void Link::on_connect(const redisAsyncContext* ac, int status) {
  auto* self = static_cast<Link*>(ac->data);
  if (ac != self->context_) return;
  if (status == REDIS_OK) {
    self->connected_ = true;
    self->backoff_ = self->backoff_options_.initial;
    return;
  }
  // hiredis frees the context after this; its calls end with no reply.
  self->last_error_ = ac->errstr;
  self->drop_reason_ = fmt::format("cannot connect: {}", ac->errstr);
  self->context_ = nullptr;
  self->connected_ = false;
  self->failed_attempt();
}

void Link::on_disconnect(const redisAsyncContext* ac, int) {
  auto* self = static_cast<Link*>(ac->data);
  if (ac != self->context_) return;
  self->last_error_ = ac->err != 0 ? ac->errstr : "connection closed";
  self->context_ = nullptr;
  self->connected_ = false;
  self->failed_attempt();
}

// Starts the backoff before the next connection attempt.
void Link::failed_attempt() {
  next_connect_ = std::chrono::steady_clock::now() + backoff_;
  backoff_ = std::min(backoff_ * 2, backoff_options_.max);
}

// Frees the context: hiredis ends every call on it with no reply, which reads `why`.
void Link::drop(std::string why) {
  redisAsyncContext* ac = std::exchange(context_, nullptr);
  if (ac == nullptr) return;
  last_error_ = why;
  drop_reason_ = std::move(why);
  connected_ = false;
  failed_attempt();
  redisAsyncFree(ac);
}

void Link::arm_watchdog() {
  if (watchdog_armed_) return;
  const auto& c = options_;
  const auto period =
      std::max(std::chrono::milliseconds{1}, std::min(c.command_timeout, c.connect_timeout) / 4);
  watchdog_armed_ = true;
  watchdog_.expires_after(period);
  watchdog_.async_wait([keep = owner_.keep_alive(), this](boost::system::error_code ec) {
    watchdog_armed_ = false;
    if (ec || context_ == nullptr) return;
    const auto now = std::chrono::steady_clock::now();
    if (std::exchange(progressed_, false)) last_progress_ = now;
    const auto& c = options_;
    if (!connected_ && now - connect_started_ > c.connect_timeout) {
      drop(fmt::format("connecting took more than {} ms", c.connect_timeout.count()));
      return;
    }
    if (in_flight_ > 0 && now - last_progress_ > c.command_timeout) {
      drop(fmt::format("no reply within {} ms", c.command_timeout.count()));
      return;
    }
    if (in_flight_ > 0 || !connected_) arm_watchdog();
  });
}

}  // namespace idem::redis::detail
