// idem::redis::Client: URI parsing, and the router (Client::Impl) that sends each call to the
// server that holds its key.

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "client_impl.hpp"
#include "common/redacted_uri.hpp"

namespace idem::redis {

namespace {

Failure config_invalid(std::string message) {
  return make_failure(errc::config_invalid, std::move(message));
}

std::string redacted(std::string_view uri) {
  return detail::redacted_uri(uri, detail::LoneUserInfo::password);
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

// The TLS settings of a rediss:// URI's query (`name=value&...`, values percent-encoded) into
// `tls`: empty, or why they cannot be used.
std::string parse_tls_query(std::string_view query, TlsOptions& tls) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    const auto eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq);
    std::string value =
        eq == std::string_view::npos ? std::string{} : percent_decode(pair.substr(eq + 1));
    if (name == "verify") {
      if (value != "yes" && value != "no") return "verify must be yes or no";
      tls.verify = value == "yes";
      continue;
    }
    std::string* field = name == "ca_file"       ? &tls.ca_file
                         : name == "ca_dir"      ? &tls.ca_dir
                         : name == "cert_file"   ? &tls.cert_file
                         : name == "key_file"    ? &tls.key_file
                         : name == "server_name" ? &tls.server_name
                                                 : nullptr;
    if (field == nullptr) {
      return fmt::format(
          "unknown query parameter '{}' (TLS settings: ca_file, ca_dir, cert_file, key_file, "
          "server_name, verify)",
          name);
    }
    if (value.empty()) return fmt::format("{} needs a value", name);
    *field = std::move(value);
  }
  return {};
}

// Converts a hiredis reply to the public Reply.
Reply convert(const redisReply& r) {
  static constexpr std::array<std::pair<int, Reply::Type>, 5> kTypes{{
      {REDIS_REPLY_STRING, Reply::Type::string},
      {REDIS_REPLY_STATUS, Reply::Type::status},
      {REDIS_REPLY_ERROR, Reply::Type::error},
      {REDIS_REPLY_INTEGER, Reply::Type::integer},
      {REDIS_REPLY_ARRAY, Reply::Type::array},
  }};
  Reply out;
  for (const auto& [wire, type] : kTypes) {
    if (r.type == wire) out.type = type;
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

}  // namespace

// --- URI ---------------------------------------------------------------------------------------

Result<ConnectionOptions> ConnectionOptions::from_uri(std::string_view uri) {
  ConnectionOptions o;
  auto bad = [&](std::string_view why) {
    return config_invalid(fmt::format("redis URI '{}': {}", redacted(uri), why));
  };
  const auto scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos)
    return bad("expected redis://host:port, rediss://host:port or unix:///path");
  const std::string_view scheme = uri.substr(0, scheme_end);
  std::string_view rest = uri.substr(scheme_end + 3);
  if (scheme != "redis" && scheme != "rediss" && scheme != "unix") {
    return bad("the scheme must be redis://, rediss:// or unix://");
  }
  if (scheme == "rediss") {
    o.tls.enabled = true;
    const auto query = rest.find('?');
    if (query != std::string_view::npos) {
      if (std::string why = parse_tls_query(rest.substr(query + 1), o.tls); !why.empty()) {
        return bad(why);
      }
      rest = rest.substr(0, query);
    }
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
  if (rest.find('?') != std::string_view::npos) {
    return bad("query parameters are TLS settings, for rediss:// only");
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

Result<ClusterOptions> ClusterOptions::from_uri(std::string_view uri) {
  constexpr std::string_view kScheme = "redis+cluster://";
  constexpr std::string_view kTlsScheme = "rediss+cluster://";
  auto bad = [&](std::string_view why) {
    return config_invalid(fmt::format("redis cluster URI '{}': {}", redacted(uri), why));
  };
  const bool tls = uri.substr(0, kTlsScheme.size()) == kTlsScheme;
  if (!tls && uri.substr(0, kScheme.size()) != kScheme) {
    return bad("expected redis+cluster:// or rediss+cluster://[[user]:password@]host:port[,...]");
  }
  std::string_view rest = uri.substr(tls ? kTlsScheme.size() : kScheme.size());
  TlsOptions tls_options{.enabled = tls};
  if (const auto query = rest.find('?'); tls && query != std::string_view::npos) {
    if (std::string why = parse_tls_query(rest.substr(query + 1), tls_options); !why.empty()) {
      return bad(why);
    }
    rest = rest.substr(0, query);
  }
  std::string_view info;
  if (const auto at = rest.find('@'); at != std::string_view::npos) {
    info = rest.substr(0, at + 1);  // with the '@'
    rest = rest.substr(at + 1);
  }
  if (rest.find_first_of("/?") != std::string_view::npos) {
    return bad(tls ? "a cluster has only database 0 and takes TLS settings only"
                   : "a cluster has only database 0 and takes no options");
  }
  ClusterOptions o;
  while (!rest.empty() || o.seeds.empty()) {
    const auto comma = rest.find(',');
    const std::string_view seed = rest.substr(0, comma);
    if (seed.empty()) return bad("empty seed");
    // Each seed parses as a redis:// URI, which also yields the user and password.
    Result<ConnectionOptions> node =
        ConnectionOptions::from_uri(fmt::format("redis://{}{}", info, seed));
    if (!node) return bad(node.failure().message);
    o.node = std::move(node).value();
    o.seeds.emplace_back(seed);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (comma != std::string_view::npos && rest.empty()) return bad("empty seed");
  }
  o.node.host = ConnectionOptions{}.host;  // each node's address comes from the slot map
  o.node.port = ConnectionOptions{}.port;
  o.node.tls = std::move(tls_options);
  return o;
}

// --- The router ------------------------------------------------------------------------------

Client::Impl::Impl(ConnectionOptions options) {
  std::shared_ptr<const TlsContext> tls = TlsContext::make(options.tls);
  node_ = std::make_unique<Node>(std::move(options), std::move(tls));
}
Client::Impl::Impl(ClusterOptions options)
    : cluster_(std::make_unique<Cluster>(std::move(options))) {}
Client::Impl::~Impl() = default;

Result<Answer> Client::Impl::route(std::string_view key, const Call& call) {
  return cluster_ ? cluster_->execute(key, call) : node_->execute(call);
}

Result<Answer> Client::Impl::eval(const Script& script, std::string_view key,
                                  std::span<const std::string_view> args,
                                  const Durability* durability, bool (*wrote)(const redisReply&),
                                  bool report_in_doubt) {
  return eval_keys(script, std::span(&key, 1), args, durability, wrote, report_in_doubt);
}

Result<Answer> Client::Impl::eval_keys(const Script& script, std::span<const std::string_view> keys,
                                       std::span<const std::string_view> args,
                                       const Durability* durability,
                                       bool (*wrote)(const redisReply&), bool report_in_doubt) {
  if (keys.empty()) return unavailable("idem: a script call needs a key");  // a bug, not input
  // EVALSHA sha <numkeys> keys... args...: on the stack for a single record's call.
  std::array<std::string_view, 16> inline_argv{};
  std::vector<std::string_view> heap_argv;
  const std::size_t n = 3 + keys.size() + args.size();
  if (n > inline_argv.size()) heap_argv.resize(n);
  const std::span<std::string_view> argv =
      heap_argv.empty() ? std::span(inline_argv).first(n) : std::span(heap_argv);
  DecimalText count;
  argv[0] = "EVALSHA";
  argv[1] = script.sha;
  argv[2] = to_chars(count, static_cast<std::int64_t>(keys.size()));
  std::copy(args.begin(), args.end(), std::copy(keys.begin(), keys.end(), argv.begin() + 3));
  Call call{.argv = argv, .script = &script, .report_in_doubt = report_in_doubt};
  if (durability != nullptr && durability->replicas > 0) {
    call.wait_replicas = durability->replicas;
    call.wait_timeout = durability->timeout;
    call.wrote = wrote;
  }
  Result<Answer> answer = route(keys.front(), call);
  if (answer && answer->reply->type == REDIS_REPLY_ERROR) {
    return error_reply_failure(*answer->reply, fmt::format("script {}", script.name),
                               answer->where);
  }
  return answer;
}

Result<Answer> Client::Impl::block(std::string_view key, std::span<const std::string_view> first,
                                   std::span<const std::string_view> blocking,
                                   std::chrono::milliseconds blocks_for) {
  return route(key, Call{.argv = first, .then = blocking, .blocks_for = blocks_for});
}

Result<Answer> Client::Impl::command(std::string_view key, std::span<const std::string_view> argv) {
  return route(key, Call{.argv = argv});
}

Status Client::Impl::ping() {
  if (cluster_) return cluster_->ping();
  static constexpr std::array<std::string_view, 1> kPing{"PING"};
  Result<Answer> answer = node_->execute(Call{.argv = kPing});
  if (!answer) return std::move(answer).failure();
  if (answer->reply->type == REDIS_REPLY_ERROR) {
    return error_reply_failure(*answer->reply, "PING", answer->where);
  }
  return {};
}

const ConnectionOptions& Client::Impl::options() const noexcept {
  return cluster_ ? cluster_->options() : node_->options();
}
std::size_t Client::Impl::open_connections() const {
  return cluster_ ? cluster_->open_connections() : node_->open_connections();
}
std::uint64_t Client::Impl::dropped() const noexcept {
  return cluster_ ? cluster_->dropped() : node_->dropped();
}
StoreStats Client::Impl::stats() const {
  PoolStats pool;
  RedisStats redis;
  if (cluster_) {
    cluster_->add_stats(pool, redis);
  } else {
    node_->add_stats(pool, redis);
  }
  StoreStats out{.store = "redis", .pool = pool};
  out.parts.set(redis);
  return out;
}

// --- Client ------------------------------------------------------------------------------------

Client::Client(ConnectionOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Client::Client(ClusterOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;

Result<Reply> Client::command(std::span<const std::string_view> argv) {
  if (argv.empty())
    throw std::invalid_argument("idem: redis::Client::command needs a command name");
  Result<Answer> answer = impl_->command(argv.size() > 1 ? argv[1] : std::string_view{}, argv);
  if (!answer) return std::move(answer).failure();
  return convert(*answer->reply);
}

Status Client::ping() { return impl_->ping(); }

bool Client::is_cluster() const noexcept { return impl_->is_cluster(); }
const ConnectionOptions& Client::options() const noexcept { return impl_->options(); }
std::size_t Client::open_connections() const { return impl_->open_connections(); }
std::uint64_t Client::dropped_connections() const noexcept { return impl_->dropped(); }
StoreStats Client::stats() const { return impl_->stats(); }

}  // namespace idem::redis
