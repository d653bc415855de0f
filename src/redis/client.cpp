// idem::redis::Client: the connection pool over hiredis, URI parsing, and the EVALSHA path the
// stores share.

#include <fmt/format.h>
#include <poll.h>
#include <sys/time.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <utility>

#include "client_impl.hpp"

namespace idem::redis {

namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  const auto count = std::max<std::int64_t>(ms.count(), 1);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(count / 1000);
  tv.tv_usec = static_cast<suseconds_t>((count % 1000) * 1000);
  return tv;
}

Failure unavailable(std::string message) {
  return make_failure(errc::store_unavailable, std::move(message));
}

bool parse_int(std::string_view text, int& out) {
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc{} && ptr == end;
}

// %XX escapes in the user-info part of a URI.
std::string percent_decode(std::string_view in) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size()) {
      unsigned value = 0;
      auto [ptr, ec] = std::from_chars(in.data() + i + 1, in.data() + i + 3, value, 16);
      if (ec == std::errc{} && ptr == in.data() + i + 3) {
        out.push_back(static_cast<char>(value));
        i += 2;
        continue;
      }
    }
    out.push_back(in[i]);
  }
  return out;
}

// Converts a hiredis reply to the public Reply.
Reply convert(const redisReply& r) {
  Reply out;
  switch (r.type) {
    case REDIS_REPLY_STRING:
      out.type = Reply::Type::string;
      break;
    case REDIS_REPLY_STATUS:
      out.type = Reply::Type::status;
      break;
    case REDIS_REPLY_ERROR:
      out.type = Reply::Type::error;
      break;
    case REDIS_REPLY_INTEGER:
      out.type = Reply::Type::integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = Reply::Type::array;
      break;
    default:
      out.type = Reply::Type::nil;
      break;
  }
  if (r.type == REDIS_REPLY_STRING || r.type == REDIS_REPLY_STATUS || r.type == REDIS_REPLY_ERROR) {
    out.str.assign(r.str, r.len);
  }
  if (r.type == REDIS_REPLY_INTEGER) out.integer = r.integer;
  if (r.type == REDIS_REPLY_ARRAY) {
    out.elements.reserve(r.elements);
    for (std::size_t i = 0; i < r.elements; ++i) out.elements.push_back(convert(*r.element[i]));
  }
  return out;
}

bool starts_with(const redisReply& r, std::string_view prefix) {
  return r.type == REDIS_REPLY_ERROR && r.len >= prefix.size() &&
         std::memcmp(r.str, prefix.data(), prefix.size()) == 0;
}

}  // namespace

// --- URI ---------------------------------------------------------------------------------------

Result<ConnectionOptions> ConnectionOptions::from_uri(std::string_view uri) {
  ConnectionOptions o;
  auto bad = [&](std::string_view why) {
    return unavailable(fmt::format("redis URI '{}': {}", uri, why));
  };
  const auto scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos)
    return bad("expected redis://host:port or unix:///path");
  const std::string_view scheme = uri.substr(0, scheme_end);
  std::string_view rest = uri.substr(scheme_end + 3);
  if (scheme != "redis" && scheme != "unix") {
    return bad(scheme == "rediss" ? "TLS (rediss://) is not supported"
                                  : "the scheme must be redis:// or unix://");
  }
  // user-info: the last '@' before the path (passwords may contain '@' only percent-encoded).
  const auto at = rest.find('@');
  if (at != std::string_view::npos) {
    const std::string_view info = rest.substr(0, at);
    const auto colon = info.find(':');
    if (colon == std::string_view::npos) {
      o.password = percent_decode(info);  // redis://password@host, as redis-cli accepts
    } else {
      o.user = percent_decode(info.substr(0, colon));
      o.password = percent_decode(info.substr(colon + 1));
    }
    rest = rest.substr(at + 1);
  }
  if (scheme == "unix") {
    const auto query = rest.find('?');
    o.unix_socket = std::string(rest.substr(0, query));
    if (o.unix_socket.empty() || o.unix_socket.front() != '/')
      return bad("unix:// needs an absolute socket path");
    if (query != std::string_view::npos) {
      const std::string_view q = rest.substr(query + 1);
      if (q.substr(0, 3) != "db=" || !parse_int(q.substr(3), o.db) || o.db < 0) {
        return bad("the only query parameter is db=<number>");
      }
    }
    return o;
  }
  const auto slash = rest.find('/');
  std::string_view hostport = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && (!parse_int(db, o.db) || o.db < 0))
      return bad("the path must be a database number");
  }
  std::string_view host = hostport;
  if (!hostport.empty() && hostport.front() == '[') {  // [::1]:6379
    const auto close = hostport.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    host = hostport.substr(1, close - 1);
    hostport = hostport.substr(close + 1);
    if (!hostport.empty() && hostport.front() != ':') return bad("junk after the host");
    if (!hostport.empty() && !parse_int(hostport.substr(1), o.port)) return bad("bad port");
  } else if (const auto colon = hostport.rfind(':'); colon != std::string_view::npos) {
    host = hostport.substr(0, colon);
    if (!parse_int(hostport.substr(colon + 1), o.port)) return bad("bad port");
  }
  if (o.port <= 0 || o.port > 65535) return bad("port out of range");
  if (!host.empty()) o.host = std::string(host);
  return o;
}

// --- The pool ----------------------------------------------------------------------------------

Client::Impl::Impl(ConnectionOptions options) : options_(std::move(options)) {
  if (options_.pool_size == 0) options_.pool_size = 1;
  where_ = options_.unix_socket.empty() ? fmt::format("{}:{}", options_.host, options_.port)
                                        : options_.unix_socket;
  if (options_.ignore_sigpipe) {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      std::signal(SIGPIPE, SIG_IGN);
    }
  }
}

Client::Impl::~Impl() {
  std::lock_guard lock(mutex_);
  for (const Idle& idle : idle_) redisFree(idle.c);
  idle_.clear();
}

std::size_t Client::Impl::open_connections() const {
  std::lock_guard lock(mutex_);
  return open_;
}

Result<redisContext*> Client::Impl::connect() {
  const timeval connect_tv = to_timeval(options_.connect_timeout);
  redisContext* c = options_.unix_socket.empty()
                        ? redisConnectWithTimeout(options_.host.c_str(), options_.port, connect_tv)
                        : redisConnectUnixWithTimeout(options_.unix_socket.c_str(), connect_tv);
  if (c == nullptr) return unavailable(fmt::format("redis {}: out of memory connecting", where_));
  auto fail = [&](std::string why) {
    redisFree(c);
    return unavailable(fmt::format("redis {}: {}", where_, why));
  };
  if (c->err != 0) return fail(fmt::format("cannot connect: {}", c->errstr));
  if (redisSetTimeout(c, to_timeval(options_.command_timeout)) != REDIS_OK) {
    return fail("cannot set the command timeout");
  }
  if (options_.keep_alive && options_.unix_socket.empty()) (void)redisEnableKeepAlive(c);

  auto run = [&](std::span<const std::string_view> argv, std::string_view what) -> std::string {
    std::array<const char*, 3> args{};
    std::array<std::size_t, 3> lens{};
    for (std::size_t i = 0; i < argv.size(); ++i) {
      args[i] = argv[i].data();
      lens[i] = argv[i].size();
    }
    ReplyPtr r(static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), args.data(), lens.data())));
    if (!r) return fmt::format("{} failed: {}", what, c->errstr);
    if (r->type == REDIS_REPLY_ERROR)
      return fmt::format("{} refused: {}", what, std::string_view(r->str, r->len));
    return {};
  };
  if (!options_.password.empty()) {
    std::string error;
    if (options_.user.empty()) {
      const std::array<std::string_view, 2> argv{"AUTH", options_.password};
      error = run(argv, "AUTH");
    } else {
      const std::array<std::string_view, 3> argv{"AUTH", options_.user, options_.password};
      error = run(argv, "AUTH");
    }
    if (!error.empty()) return fail(error);
  }
  if (options_.db != 0) {
    char buf[24];
    const std::array<std::string_view, 2> argv{"SELECT", to_chars(buf, options_.db)};
    if (std::string error = run(argv, "SELECT"); !error.empty()) return fail(error);
  }
  return c;
}

// An idle connection must have nothing to read: readable means the server closed it (restart,
// idle timeout, CLIENT KILL). One that was idle for a while is checked before it is lent, so the
// caller's command does not fail on it; one returned moments ago is not worth the syscall.
constexpr auto kCheckIdleAfter = std::chrono::milliseconds{100};

namespace {
bool closed_by_server(const redisContext* c) {
  pollfd p{c->fd, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}
}  // namespace

Result<Connection> Client::Impl::acquire() {
  const auto deadline = std::chrono::steady_clock::now() + options_.pool_wait;
  std::unique_lock lock(mutex_);
  for (;;) {
    while (!idle_.empty()) {
      const Idle idle = idle_.back();
      idle_.pop_back();
      lock.unlock();  // no syscall under the pool's lock
      if (std::chrono::steady_clock::now() - idle.since < kCheckIdleAfter ||
          !closed_by_server(idle.c)) {
        return Connection(this, idle.c);
      }
      redisFree(idle.c);
      dropped_.fetch_add(1, std::memory_order_relaxed);
      lock.lock();
      --open_;
    }
    if (open_ < options_.pool_size) {
      ++open_;
      lock.unlock();
      Result<redisContext*> c = connect();
      if (!c) {
        lock.lock();
        --open_;
        returned_.notify_one();
        return std::move(c).failure();
      }
      return Connection(this, c.value());
    }
    if (returned_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() &&
        open_ >= options_.pool_size) {
      return unavailable(fmt::format("redis {}: all {} connections busy for {} ms", where_,
                                     options_.pool_size, options_.pool_wait.count()));
    }
  }
}

void Client::Impl::give_back(redisContext* c, bool healthy) {
  if (!healthy) {
    redisFree(c);
    dropped_.fetch_add(1, std::memory_order_relaxed);
  }
  {
    std::lock_guard lock(mutex_);
    if (healthy) {
      idle_.push_back(Idle{c, std::chrono::steady_clock::now()});
    } else {
      --open_;
    }
  }
  returned_.notify_one();
}

// --- A borrowed connection ---------------------------------------------------------------------

Connection::~Connection() {
  if (c_ != nullptr) pool_->give_back(c_, c_->err == 0);
}

Failure Connection::io_failure(std::string_view doing) const {
  // hiredis reports a read timeout as an I/O error with EAGAIN's text.
  const bool timed_out = c_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
  if (timed_out) {
    return unavailable(fmt::format("redis {}: {} timed out after {} ms", pool_->where(), doing,
                                   pool_->options().command_timeout.count()));
  }
  return unavailable(fmt::format(
      "redis {}: {} failed: {}", pool_->where(), doing,
      c_->err == REDIS_ERR_EOF ? "connection closed by the server" : std::string_view(c_->errstr)));
}

Result<ReplyPtr> Connection::command(std::span<const std::string_view> argv) {
  constexpr std::size_t kInline = 16;
  std::array<const char*, kInline> inline_args{};
  std::array<std::size_t, kInline> inline_lens{};
  std::vector<const char*> heap_args;
  std::vector<std::size_t> heap_lens;
  const char** args = inline_args.data();
  std::size_t* lens = inline_lens.data();
  if (argv.size() > kInline) {
    heap_args.resize(argv.size());
    heap_lens.resize(argv.size());
    args = heap_args.data();
    lens = heap_lens.data();
  }
  for (std::size_t i = 0; i < argv.size(); ++i) {
    args[i] = argv[i].data();
    lens[i] = argv[i].size();
  }
  ReplyPtr reply(
      static_cast<redisReply*>(redisCommandArgv(c_, static_cast<int>(argv.size()), args, lens)));
  if (!reply) return io_failure(argv.empty() ? std::string_view("command") : argv[0]);
  return reply;
}

Result<ReplyPtr> Connection::eval(const Script& script, std::span<const std::string_view> keys,
                                  std::span<const std::string_view> args) {
  constexpr std::size_t kMax = 16;
  std::array<std::string_view, kMax> argv{};
  char numkeys[24];
  const std::size_t n = 3 + keys.size() + args.size();
  if (n > kMax) return unavailable("idem: too many script arguments");  // a bug, not input
  argv[0] = "EVALSHA";
  argv[1] = script.sha;
  argv[2] = to_chars(numkeys, static_cast<std::int64_t>(keys.size()));
  std::size_t i = 3;
  for (std::string_view k : keys) argv[i++] = k;
  for (std::string_view a : args) argv[i++] = a;
  const std::span<const std::string_view> call(argv.data(), n);

  Result<ReplyPtr> reply = command(call);
  if (reply && starts_with(*reply.value(), "NOSCRIPT")) {
    // The server lost its script cache (SCRIPT FLUSH, restart, failover): load and retry once.
    const std::array<std::string_view, 3> load{"SCRIPT", "LOAD", script.source};
    Result<ReplyPtr> loaded = command(load);
    if (!loaded) return std::move(loaded).failure();
    if (loaded.value()->type == REDIS_REPLY_ERROR) {
      return error_reply_failure(*loaded.value(), fmt::format("loading script {}", script.name),
                                 pool_->where());
    }
    reply = command(call);
  }
  if (!reply) return reply;
  if (reply.value()->type == REDIS_REPLY_ERROR) {
    return error_reply_failure(*reply.value(), fmt::format("script {}", script.name),
                               pool_->where());
  }
  return reply;
}

bool Connection::wait_for_replicas(const Durability& durability, std::string_view operation) {
  if (durability.replicas <= 0) return true;
  char replicas[24], timeout[24];
  const std::array<std::string_view, 3> argv{
      "WAIT", to_chars(replicas, durability.replicas),
      to_chars(timeout, std::max<std::int64_t>(durability.timeout.count(), 0))};
  Result<ReplyPtr> reply = command(argv);
  int acknowledged = 0;
  if (reply && reply.value()->type == REDIS_REPLY_INTEGER) {
    acknowledged = static_cast<int>(reply.value()->integer);
  }
  if (acknowledged >= durability.replicas) return true;
  if (durability.on_timeout) durability.on_timeout(operation, acknowledged, durability.replicas);
  return false;
}

Failure error_reply_failure(const redisReply& reply, std::string_view doing,
                            std::string_view where) {
  const std::string_view text(reply.str, reply.len);
  if (starts_with(reply, "WRONGTYPE") || starts_with(reply, "IDEM_CORRUPT") ||
      text.find("IDEM_CORRUPT") != std::string_view::npos) {
    return make_failure(errc::record_corrupt,
                        fmt::format("redis {}: {}: the key holds something that is not an idem "
                                    "record ({})",
                                    where, doing, text));
  }
  return unavailable(fmt::format("redis {}: {}: {}", where, doing, text));
}

std::string_view to_chars(char (&buf)[24], std::int64_t n) noexcept {
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
  (void)ec;  // 24 bytes hold any int64
  return {buf, static_cast<std::size_t>(end - buf)};
}

// --- Client ------------------------------------------------------------------------------------

Client::Client(ConnectionOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;

Result<Reply> Client::command(std::span<const std::string_view> argv) {
  if (argv.empty()) return unavailable("redis: empty command");
  Result<Connection> conn = impl_->acquire();
  if (!conn) return std::move(conn).failure();
  Result<ReplyPtr> reply = conn->command(argv);
  if (!reply) return std::move(reply).failure();
  return convert(*reply.value());
}

Status Client::ping() {
  Result<Reply> reply = command({"PING"});
  if (!reply) return std::move(reply).failure();
  if (reply->type == Reply::Type::error) {
    return unavailable(fmt::format("redis {}: PING: {}", impl_->where(), reply->str));
  }
  return {};
}

const ConnectionOptions& Client::options() const noexcept { return impl_->options(); }
std::size_t Client::open_connections() const { return impl_->open_connections(); }
std::uint64_t Client::dropped_connections() const noexcept { return impl_->dropped(); }

}  // namespace idem::redis
