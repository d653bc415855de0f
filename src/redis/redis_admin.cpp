// The admin of a RedisStore's records: one Lua script per operation on the record's own server;
// listings and counts scan every primary of a cluster.

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <memory>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>

#include "abandoned_index.hpp"
#include "acl_refusal.hpp"
#include "admin_scripts.hpp"
#include "client_impl.hpp"
#include "idem/redis/admin.hpp"
#include "slot_routing.hpp"
#include "store_common.hpp"

namespace idem::admin {

namespace {

constexpr std::size_t kTagSize = 18;  // "{" 16 hex digits "}"

std::string_view text(const redisReply* r) {
  if (r == nullptr || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS)) return {};
  return {r->str, r->len};
}

std::int64_t integer(const redisReply* r) {
  if (r == nullptr) return 0;
  if (r->type == REDIS_REPLY_INTEGER) return r->integer;
  std::int64_t v = 0;
  const std::string_view s = text(r);
  (void)std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::optional<State> state_of(std::string_view letter) {
  if (letter.size() != 1) return std::nullopt;
  switch (letter[0]) {
    case idem::detail::redis_state::held:
      return State::in_progress;
    case idem::detail::redis_state::completed:
      return State::completed;
    case idem::detail::redis_state::failed:
      return State::failed;
    case idem::detail::redis_state::released:
      return State::released;
    default:
      return std::nullopt;
  }
}

// `*?[]\` escaped for SCAN's MATCH.
std::string glob_escaped(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// An error reply's failure: an ACL refusal is config_invalid naming the right
// (redis::error_reply_failure), the rest store_unavailable.
Failure error_of(const redisReply& r, std::string_view doing, std::string_view where) {
  return redis::error_reply_failure(r, doing, where);
}

Status error_of(const redis::Reply& r, std::string_view doing) {
  if (const std::optional<std::string> right = redis::acl_refusal(r.str)) {
    return Status(
        errc::config_invalid,
        fmt::format("redis {}: the user lacks a right idem needs: {} ({})", doing, *right, r.str));
  }
  return Status(errc::store_unavailable, fmt::format("redis {}: {}", doing, r.str));
}

class RedisAdmin final : public Admin {
 public:
  RedisAdmin(redis::Client& client, RedisAdminOptions options)
      : client_(client), options_(std::move(options)) {}
  RedisAdmin(std::shared_ptr<redis::Client> client, RedisAdminOptions options)
      : owned_(std::move(client)), client_(*owned_), options_(std::move(options)) {}

  std::string_view store_name() const noexcept override { return "redis"; }

  Result<std::optional<RecordInfo>> inspect(std::string_view scope, const Key& key) override {
    if (key.id.empty()) return make_failure(errc::key_invalid, "the key id is empty");
    const std::string name = record_name(scope, key);
    const std::array<std::string_view, 4> argv{"EVAL", redis::admin_scripts::kRead, "1", name};
    Result<redis::Answer> a = redis::impl_of(client_).command(name, argv);
    if (!a) return std::move(a).failure();
    const redisReply& r = *a->reply;
    if (r.type == REDIS_REPLY_ERROR) return error_of(r, "inspect", a->where);
    if (r.type != REDIS_REPLY_ARRAY || r.elements == 0) return std::optional<RecordInfo>{};
    Result<RecordInfo> info = decode(r, 0, scope, name);
    if (!info) return std::move(info).failure();
    return std::optional<RecordInfo>(std::move(info).value());
  }

  Result<Page> list(std::string_view scope, const ListRequest& request) override {
    std::int64_t after_expiry = std::numeric_limits<std::int64_t>::min();
    std::string after_key;
    if (!request.cursor.empty() && !detail::read_cursor(request.cursor, after_expiry, after_key)) {
      return make_failure(errc::key_invalid, "the cursor is not one a listing returned");
    }
    std::vector<Entry> entries;
    if (Status s = scan(scope, entries); !s) return s.failure();
    // Oldest first, by absolute expiry then key, so that a cursor names a place in the order.
    std::vector<Entry> wanted;
    for (Entry& e : entries) {
      if (e.state != request.state) continue;
      if (std::tie(e.expire_at, e.key) <= std::tie(after_expiry, after_key)) continue;
      wanted.push_back(std::move(e));
    }
    const std::size_t limit = std::max<std::size_t>(request.limit, 1);
    std::sort(wanted.begin(), wanted.end(), [](const Entry& a, const Entry& b) {
      return std::tie(a.expire_at, a.key) < std::tie(b.expire_at, b.key);
    });
    Page page;
    for (std::size_t i = 0; i < wanted.size() && i < limit; ++i) {
      const std::string_view effective =
          std::string_view(wanted[i].key).substr(options_.prefix.size() + kTagSize);
      RecordInfo info;
      if (!detail::split_key(effective, scope, info.principal, info.id)) info.id = effective;
      // The rest of the record, read in one script; a record gone meanwhile is left out.
      Result<std::optional<RecordInfo>> full = inspect(scope, Key(info.id, info.principal));
      if (!full) return std::move(full).failure();
      if (full.value()) {
        page.records.push_back(std::move(*full.value()));
      }
    }
    if (wanted.size() > limit) {
      page.next_cursor = detail::make_cursor(wanted[limit - 1].expire_at, wanted[limit - 1].key);
    }
    return page;
  }

  Result<Change> release(std::string_view scope, const Key& key, Fence only_fence) override {
    return mark_released(scope, key, "release", only_fence);
  }

  Result<Change> forget(std::string_view scope, const Key& key) override {
    return mark_released(scope, key, "forget", 0);
  }

  Result<std::size_t> purge_expired(std::size_t /*max_records*/) override {
    if (Status s = client_.ping(); !s) return s.failure();
    // Redis removes expired records itself (PEXPIRE). What stays is the entries the indexes of
    // kept requests hold for runs that ended (a completer's pass drops them too): they go here,
    // so that an index without a completer does not grow with every run ever kept.
    std::vector<std::string> indexes;
    if (Status s = scan_keys(glob_escaped(options_.prefix) + "{abandoned:*", indexes); !s) {
      return s.failure();
    }
    for (const std::string& index : indexes) {
      if (index.size() <= options_.prefix.size() + redis::kIndexTagSize) continue;
      const std::string_view scope =
          std::string_view(index).substr(options_.prefix.size() + redis::kIndexTagSize);
      Result<std::size_t> dropped = redis::walk_abandoned_index(
          redis::impl_of(client_), options_.prefix, index, scope, 0, /*found=*/nullptr);
      if (!dropped) return std::move(dropped).failure();
    }
    return std::size_t{0};
  }

  std::string schema_text() const override {
    return fmt::format(
        "-- RedisStore records: one hash per key, no schema to create.\n"
        "-- key:    {}{{<16 hex digits of XXH3-64(effective key)>}}<effective key>\n"
        "-- fields: s state (P in progress, C completed, F failed, R released), f fingerprint "
        "(16 bytes),\n"
        "--         n fence, l lease end (ms since the epoch), r result bytes\n"
        "-- expiry: PEXPIRE on the hash (retention, then ttl from the commit)\n",
        options_.prefix);
  }

  Result<SchemaReport> check_schema() override {
    if (Status s = client_.ping(); !s) return s.failure();
    SchemaReport out;
    out.expected_version = out.found_version = 1;
    out.complete = true;
    out.note = "redis: records are hashes; there is no schema to create or upgrade";
    return out;
  }

  Result<SchemaReport> migrate_schema() override { return check_schema(); }

  Result<Stats> stats(std::string_view scope, bool all_scopes) override {
    std::vector<Entry> entries;
    if (Status s = scan(all_scopes ? std::optional<std::string_view>{} : scope, entries); !s) {
      return s.failure();
    }
    Stats out;
    out.store = "redis";
    for (const Entry& e : entries) detail::count(out, e.state);
    return out;
  }

 private:
  struct Entry {
    std::string key;  // the hash's name
    State state = State::released;
    std::int64_t expire_at = 0;
  };

  std::string record_name(std::string_view scope, const Key& key) const {
    return redis::tagged_key(options_.prefix, detail::effective_key(scope, key));
  }

  // A script reply's record fields from `at`: s, f, n, lease left, expire time, result length,
  // failure bytes.
  Result<RecordInfo> decode(const redisReply& r, std::size_t at, std::string_view scope,
                            std::string_view name) const {
    if (r.elements < at + 7) {
      return make_failure(errc::record_corrupt, "redis: unexpected admin script reply");
    }
    const redisReply* const* f = r.element + at;
    RecordInfo info;
    const std::string_view effective = name.substr(options_.prefix.size() + kTagSize);
    if (!detail::split_key(effective, scope, info.principal, info.id)) info.id = effective;
    const std::optional<State> state = state_of(text(f[0]));
    if (!state) {
      return make_failure(
          errc::record_corrupt,
          fmt::format("redis: record state '{}' is not one idem writes", text(f[0])));
    }
    info.state = *state;
    const std::string_view fp = text(f[1]);
    if (fp.size() == 16) {
      for (std::size_t i = 0; i < 8; ++i) {
        info.fingerprint.high = info.fingerprint.high << 8 | static_cast<unsigned char>(fp[i]);
        info.fingerprint.low = info.fingerprint.low << 8 | static_cast<unsigned char>(fp[8 + i]);
      }
    }
    info.fence = static_cast<Fence>(integer(f[2]));
    if (info.state == State::in_progress) {
      info.lease_left = std::chrono::milliseconds{std::max<std::int64_t>(integer(f[3]), 0)};
    }
    info.expires_at_ms = integer(f[4]);
    const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    info.expires_in = std::chrono::milliseconds{info.expires_at_ms - now_ms};
    if (info.state == State::completed) info.result_size = static_cast<std::size_t>(integer(f[5]));
    if (info.state == State::failed) info.failure = detail::failure_text(text(f[6]));
    return info;
  }

  Result<Change> mark_released(std::string_view scope, const Key& key, std::string_view mode,
                               Fence only_fence) {
    if (key.id.empty()) return make_failure(errc::key_invalid, "the key id is empty");
    const std::string name = record_name(scope, key);
    const std::string fence = std::to_string(only_fence);
    const std::array<std::string_view, 6> argv{
        "EVAL", redis::admin_scripts::kRelease, "1", name, mode, fence};
    Result<redis::Answer> a = redis::impl_of(client_).command(name, argv);
    if (!a) return std::move(a).failure();
    const redisReply& r = *a->reply;
    if (r.type == REDIS_REPLY_ERROR) return error_of(r, mode, a->where);
    Change change;
    if (r.type != REDIS_REPLY_ARRAY || r.elements < 2) return change;  // no record
    change.changed = integer(r.element[0]) == 1;
    Result<RecordInfo> before = decode(r, 1, scope, name);
    if (!before) return std::move(before).failure();
    change.before = std::move(before).value();
    return change;
  }

  // Runs a SCAN-shaped command, `argv(cursor)`, on the one server or every primary of a
  // Cluster, each until its cursor comes back to "0"; `page(reply, cursor)` reads each reply
  // and sets the next cursor.
  template <class Argv, class Page>
  Status scan_every_primary(Argv argv, Page page) {
    std::vector<std::unique_ptr<redis::Client>> owned;
    std::vector<redis::Client*> servers{&client_};
    if (client_.is_cluster()) {
      if (Status s = primaries(owned); !s) return s;
      servers.clear();
      for (auto& c : owned) servers.push_back(c.get());
    }
    for (redis::Client* server : servers) {
      std::string cursor = "0";
      do {
        Result<redis::Reply> r = server->command(argv(cursor));
        if (!r) return r.failure();
        if (Status s = page(r.value(), cursor); !s) return s;
      } while (cursor != "0");
    }
    return {};
  }

  // Every record of `scope` (every idem record: nullopt) on every primary.
  Status scan(std::optional<std::string_view> scope, std::vector<Entry>& out) {
    std::string pattern = glob_escaped(options_.prefix) + "{????????????????}";
    if (scope) pattern += glob_escaped(detail::scope_prefix(*scope));
    pattern += '*';
    Status scanned = scan_every_primary(
        [&](const std::string& cursor) {
          return std::array<std::string_view, 6>{
              "EVAL", redis::admin_scripts::kScan, "0", cursor, pattern, "1000"};
        },
        [&](const redis::Reply& r, std::string& cursor) -> Status {
          if (r.type == redis::Reply::Type::error) return error_of(r, "scan");
          if (r.type != redis::Reply::Type::array || r.elements.empty()) {
            return Status(errc::record_corrupt, "redis scan: unexpected reply");
          }
          cursor = r.elements[0].str;
          for (std::size_t i = 1; i + 2 < r.elements.size(); i += 3) {
            const std::optional<State> state = state_of(r.elements[i + 1].str);
            if (!state) continue;  // a token or another store's key under the same prefix
            out.push_back(Entry{r.elements[i].str, *state, r.elements[i + 2].integer});
          }
          return {};
        });
    if (!scanned) return scanned;
    // SCAN may return a key twice; each record counts once.
    std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.key < b.key; });
    out.erase(std::unique(out.begin(), out.end(),
                          [](const Entry& a, const Entry& b) { return a.key == b.key; }),
              out.end());
    return {};
  }

  // The names of every key that matches `pattern`, on every primary (plain SCAN: the indexes of
  // kept requests are sorted sets, which the record scan's script would not read).
  Status scan_keys(const std::string& pattern, std::vector<std::string>& out) {
    Status scanned = scan_every_primary(
        [&](const std::string& cursor) {
          return std::array<std::string_view, 6>{"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
        },
        [&](const redis::Reply& r, std::string& cursor) -> Status {
          if (r.type == redis::Reply::Type::error) return error_of(r, "SCAN");
          if (r.type != redis::Reply::Type::array || r.elements.size() != 2) {
            return Status(errc::store_unavailable, "redis SCAN: " + r.str);
          }
          cursor = r.elements[0].str;
          for (const redis::Reply& key : r.elements[1].elements) out.push_back(key.str);
          return {};
        });
    if (!scanned) return scanned;
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return {};
  }

  // A client of each primary of the cluster, from CLUSTER SLOTS.
  Status primaries(std::vector<std::unique_ptr<redis::Client>>& out) {
    Result<redis::Answer> a = redis::impl_of(client_).command({}, redis::kClusterSlots);
    if (!a) return std::move(a).failure();
    const std::optional<std::vector<redis::SlotRange>> ranges =
        redis::parse_cluster_slots(*a->reply, client_.options().host);
    if (a->reply->type == REDIS_REPLY_ERROR) {
      return error_of(*a->reply, "CLUSTER SLOTS", a->where);
    }
    if (!ranges) {
      return Status(errc::store_unavailable,
                    fmt::format("redis {}: CLUSTER SLOTS: {}", a->where, redis::text(*a->reply)));
    }
    std::vector<std::string> seen;
    for (const redis::SlotRange& range : *ranges) {
      std::string name = redis::node_address(range.host, range.port);
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
      seen.push_back(std::move(name));
      redis::ConnectionOptions options = client_.options();
      options.host = range.host;
      options.port = range.port;
      options.pipeline_connections = 0;
      options.pool_size = 1;
      out.push_back(std::make_unique<redis::Client>(options));
    }
    return {};
  }

  std::shared_ptr<redis::Client> owned_;  // the client, when the admin keeps it alive
  redis::Client& client_;
  RedisAdminOptions options_;
};

}  // namespace

std::unique_ptr<Admin> redis_admin(redis::Client& client, RedisAdminOptions options) {
  return std::make_unique<RedisAdmin>(client, std::move(options));
}

std::unique_ptr<Admin> redis_admin(std::shared_ptr<redis::Client> client,
                                   RedisAdminOptions options) {
  if (!client) throw std::invalid_argument("idem: redis_admin needs a client");
  return std::make_unique<RedisAdmin>(std::move(client), std::move(options));
}

namespace {
template <class Options>
std::shared_ptr<redis::Client> client_for(std::string_view uri, const std::string& password) {
  Result<Options> parsed = Options::from_uri(uri);
  if (!parsed) throw Error(parsed.failure().code, parsed.failure().message);
  Options options = std::move(parsed).value();
  if (!password.empty()) {
    if constexpr (std::is_same_v<Options, redis::ClusterOptions>) {
      options.node.password = password;
    } else {
      options.password = password;
    }
  }
  return std::make_shared<redis::Client>(std::move(options));
}
}  // namespace

const UriOpener redis_uri_opener{
    .forms = "redis://..., redis+cluster://... (rediss://, rediss+cluster://: over TLS)",
    .open = [](std::string_view uri, const UriOptions& options) -> std::unique_ptr<Admin> {
      std::shared_ptr<redis::Client> client;
      if (uri.starts_with("redis+cluster://") || uri.starts_with("rediss+cluster://")) {
        client = client_for<redis::ClusterOptions>(uri, options.password);
      } else if (uri.starts_with("redis://") || uri.starts_with("rediss://") ||
                 uri.starts_with("unix://")) {
        client = client_for<redis::ConnectionOptions>(uri, options.password);
      } else {
        return nullptr;
      }
      return redis_admin(std::move(client), {.prefix = options.key_prefix});
    }};

}  // namespace idem::admin
