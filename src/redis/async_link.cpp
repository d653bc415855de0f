// One Redis server's asynchronous connection (async_link.hpp).

#include "async_link.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <utility>

#include "store_common.hpp"
#include "transport.hpp"
#include "wire.hpp"

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
// order the replies came. Called once the read is done, so no caller runs inside the reply
// loop; a caller may end the store, and this link with it, so the answers leave the link
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

// One connection: its stream, the bytes going out, the replies coming in, and the calls that
// wait for them, in the order they were sent.
struct Link::Connection {
  Connection(const net::any_io_executor& e, std::shared_ptr<const redis::TlsContext> tls)
      : executor(e), transport(e, std::move(tls)) {}

  net::any_io_executor executor;  // the strand, or its inner executor on one thread
  Transport transport;
  redis::Wire<Sent> wire;
  std::array<char, std::size_t{16} * 1024> in{};
  std::string writing;  // handed to the write under way
  bool write_busy = false, flush_posted = false, in_read = false, write_after_read = false;
};

Link::Link(LinkOwner& owner, const Strand& strand, redis::ConnectionOptions options,
           std::shared_ptr<const redis::TlsContext> tls, redis::ReconnectBackoff backoff,
           std::atomic<std::uint64_t>& opened, bool one_thread)
    : owner_(owner),
      strand_(strand),
      one_thread_(one_thread),
      options_(std::move(options)),
      tls_(std::move(tls)),
      backoff_(std::move(backoff)),
      watchdog_(options_),
      opened_(opened),
      where_(redis::server_name(options_)),
      watchdog_timer_(strand) {}

Link::~Link() {
  if (conn_) conn_->transport.close();
}

void Link::close() {
  closed_ = true;
  watchdog_timer_.cancel();
  drop("the store was closed");
}

void Link::submit(std::unique_ptr<Request> request) {
  if (tls_ && tls_->unusable()) {  // no connection can open: say why, as config_invalid
    owner_.failed(*this, std::move(request), *tls_->unusable());
    return;
  }
  if (!conn_ && !connect()) {
    owner_.failed(*this, std::move(request), redis::unavailable(last_failure_));
    return;
  }
  const bool with_source = request->script != nullptr && request->with_source;
  send(std::move(request), with_source);
}

// EVALSHA (or EVAL with the source, after NOSCRIPT; or a plain command) on the open connection.
void Link::send(std::unique_ptr<Request> request, bool eval_source) {
  Connection& c = *conn_;
  const auto now = std::chrono::steady_clock::now();
  if (c.wire.awaiting() == 0) watchdog_.sent_to_idle(now);
  if (request->blocks_for.count() > 0) watchdog_.blocks_until(now + request->blocks_for);
  if (request->asking) {
    // ASK: the importing node runs the next command on this connection for a key it does not
    // serve yet.
    c.wire.queue(std::array<std::string_view, 1>{"ASKING"}, {});
  }
  const redis::Script* script = request->script;
  std::string& out = c.wire.out();
  redis::append_array_header(out, request->args.size() + (script != nullptr ? 3 : 0));
  if (script != nullptr) {
    redis::append_bulk(out, eval_source ? std::string_view("EVAL") : std::string_view("EVALSHA"));
    redis::append_bulk(out, eval_source ? script->source : script->sha);
    redis::append_bulk(out, "1");
  }
  for (std::size_t i = 0; i < request->args.size(); ++i) redis::append_bulk(out, request->args[i]);
  c.wire.expect({std::move(request)});
  arm_watchdog();
  flush_soon(conn_);
}

// Writes what is encoded now if the connection is up and no write is under way; the write's
// completion sends what came meanwhile. In a read, at its end (the commands its replies caused
// go out together); else at the end of this turn of the executor.
void Link::flush_soon(const ConnectionPtr& conn) {
  Connection& c = *conn;
  if (!connected_ || c.write_busy || c.flush_posted) return;
  if (c.in_read) {
    c.write_after_read = true;
    return;
  }
  c.flush_posted = true;
  net::post(conn->executor, [keep = owner_.keep_alive(), this, conn] {
    conn->flush_posted = false;
    if (conn == conn_) flush(conn);
  });
}

void Link::flush(const ConnectionPtr& conn) {
  Connection& c = *conn;
  if (c.write_busy || !c.wire.has_output()) return;
  // From here the server may run them: a commit whose reply is lost is then in doubt.
  c.wire.take_output(c.writing);
  c.write_busy = true;
  c.transport.async_write(net::buffer(c.writing), [keep = owner_.keep_alive(), this, conn](
                                                      boost::system::error_code ec, std::size_t) {
    conn->write_busy = false;
    conn->writing.clear();
    if (conn != conn_) return;
    if (ec) {
      drop(ec.message());
      return;
    }
    flush(conn);
  });
}

void Link::read(const ConnectionPtr& conn) {
  conn->transport.async_read_some(
      net::buffer(conn->in),
      [keep = owner_.keep_alive(), this, conn](boost::system::error_code ec, std::size_t n) {
        if (conn != conn_) return;
        if (ec) {
          drop(ec == net::error::eof ? std::string("Server closed the connection") : ec.message());
          return;
        }
        on_bytes(conn, n);
      });
}

// Bytes came: each whole reply goes to its call, in order; then the next read is started, what
// the replies caused is written, and the callers held back resume (complete_held).
void Link::on_bytes(const ConnectionPtr& conn, std::size_t n) {
  Connection& c = *conn;
  watchdog_.replied();
  using Got = redis::Wire<Sent>::Got;
  if (!c.wire.feed(c.in.data(), n)) {
    drop(fmt::format("protocol error: {}", c.wire.error()));
    return;
  }
  c.in_read = true;
  redis::ReplyPtr reply;
  Sent sent;
  for (Got got; (got = c.wire.next(reply, sent)) != Got::more;) {
    if (got != Got::reply) {
      drop(got == Got::stray ? std::string("a reply came for no command")
                             : fmt::format("protocol error: {}", c.wire.error()));
      break;
    }
    on_reply(std::move(sent), *reply);
    if (conn != conn_) break;  // dropped: its other calls have failed
  }
  c.in_read = false;
  if (conn == conn_) {
    read(conn);
    if (std::exchange(c.write_after_read, false)) flush(conn);
  }
  complete_held();
}

void Link::on_reply(Sent sent, const redisReply& reply) {
  if (sent.setup) {
    if (reply.type == REDIS_REPLY_ERROR) {
      drop(fmt::format("connection setup refused: {}", redis::text(reply)));
    }
    return;
  }
  std::unique_ptr<Request> request = std::move(sent.request);
  if (!request) {  // ASKING's
    if (reply.type == REDIS_REPLY_ERROR) asking_refused_.assign(reply.str, reply.len);
    return;
  }
  if (!asking_refused_.empty()) {
    const std::string error = std::exchange(asking_refused_, {});
    redisReply refused{};
    refused.type = REDIS_REPLY_ERROR;
    refused.str = const_cast<char*>(error.data());  // read only: hiredis's field is not const
    refused.len = error.size();
    owner_.answered(*this, std::move(request), refused);
    return;
  }
  if (request->script != nullptr && redis::is_error(reply, "NOSCRIPT") && !request->reloaded) {
    // The server lost its script cache (a restart, SCRIPT FLUSH): EVAL loads and runs it.
    request->reloaded = true;
    send(std::move(request), /*eval_source=*/true);
    return;
  }
  owner_.answered(*this, std::move(request), reply);
}

bool Link::connect() {
  const auto now = std::chrono::steady_clock::now();
  if (closed_) {
    last_failure_ = fmt::format("redis {}: the store was closed", where_);
    return false;
  }
  if (const auto wait = backoff_.wait_left(now); wait.count() > 0) {
    last_failure_ = fmt::format("redis {}: not connected ({}); the next attempt in {} ms", where_,
                                backoff_.why(), wait.count());
    return false;
  }
  // On one thread the stream's handlers need no strand.
  const net::any_io_executor events = one_thread_
                                          ? net::any_io_executor(strand_.get_inner_executor())
                                          : net::any_io_executor(strand_);
  auto conn = std::make_shared<Connection>(events, tls_);
  opened_.fetch_add(1, std::memory_order_relaxed);
  conn_ = conn;
  connected_ = false;
  watchdog_.connecting(now);
  // AUTH and SELECT go first on the connection; an error reply to either drops it.
  const redis::Handshake handshake(options_);
  for (const std::vector<std::string_view>& command : handshake.commands) {
    conn->wire.queue(command, {nullptr, /*setup=*/true});
  }
  conn->transport.async_connect(
      options_, [keep = owner_.keep_alive(), this, conn](boost::system::error_code ec) {
        if (conn != conn_) return;
        if (ec) {
          drop(conn->transport.connect_failure(ec));
          return;
        }
        connected_ = true;
        backoff_.connected();
        read(conn);
        flush(conn);
      });
  arm_watchdog();
  return true;
}

// Closes the connection; every call on it fails with `why`, a commit that went out as
// outcome_unknown.
void Link::drop(std::string why) {
  ConnectionPtr conn = std::exchange(conn_, nullptr);
  if (!conn) return;
  asking_refused_.clear();  // it was the dropped connection's
  backoff_.failed(std::chrono::steady_clock::now(), why);
  connected_ = false;
  conn->transport.close();
  const Failure failure = redis::unavailable(fmt::format("redis {}: {}", where_, why));
  conn->wire.fail_all([&](Sent& s, bool written) {
    if (!s.request) return;
    owner_.failed(*this, std::move(s.request),
                  redis::lost_call(failure, s.request->report_in_doubt, written));
  });
}

void Link::arm_watchdog() {
  if (watchdog_armed_) return;
  watchdog_armed_ = true;
  watchdog_timer_.expires_after(watchdog_.period());
  watchdog_timer_.async_wait([keep = owner_.keep_alive(), this](boost::system::error_code ec) {
    watchdog_armed_ = false;
    if (ec || !conn_) return;
    const bool awaiting = conn_->wire.awaiting() != 0;
    std::string overdue = watchdog_.overdue(std::chrono::steady_clock::now(), connected_, awaiting);
    if (!overdue.empty() && !connected_ && conn_->transport.handshaking()) {
      overdue += " (the TLS handshake got no answer: does the server speak TLS on this port?)";
    }
    if (!overdue.empty()) {
      drop(std::move(overdue));
    } else if (awaiting || !connected_) {
      arm_watchdog();
    }
  });
}

}  // namespace idem::redis::detail
