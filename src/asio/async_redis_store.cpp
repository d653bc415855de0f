// AsyncRedisStore: the record scripts on hiredis asynchronous connections, driven by Asio; on a
// Redis Cluster, each call routed to its key slot's primary.
//
// Everything that touches a hiredis context, and the routing state, runs on one strand. A Link
// is one server's connection: hiredis asks for read and write readiness through its event hooks
// (Watcher); each call is one EVALSHA whose callback hands the reply, while it is valid, to the
// Impl, which decodes it and posts the result to the caller's executor, or on a cluster follows
// a redirection first. A link's watchdog drops its connection when the oldest call in flight has
// waited command_timeout (replies come in order, so "no reply for that long while a call waits"
// is exactly that), or when a connect takes longer than connect_timeout.

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
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster.hpp"
#include "idem/asio/redis_store.hpp"
#include "lua_scripts.hpp"
#include "node.hpp"
#include "store_common.hpp"

namespace idem {

namespace net = boost::asio;
using SteadyTime = std::chrono::steady_clock::time_point;

namespace {

class Link;

// One call in flight: its arguments (kept for a resend as EVAL after NOSCRIPT, or to another
// node) and how it ends.
struct Request {
  const redis::Script* script = nullptr;  // null: a plain command, `args` its whole argv
  std::vector<std::string> args;          // KEYS[1], then ARGV
  bool commit = false;                    // a reply lost after it went out is outcome_unknown
  bool went_out = false;                  // queued on a connection that was up
  bool reloaded = false;                  // already resent as EVAL after NOSCRIPT

  // Cluster routing.
  std::uint16_t slot = 0;
  int attempts = 0;             // sends so far
  SteadyTime deadline{};        // give up after
  std::uint64_t seen = 0;       // the slot map generation of the last send
  Link* ask_to = nullptr;       // ASK: the next send goes there, after ASKING
  bool asking = false;          // ASKING precedes the command on its link
  bool waited_for_map = false;  // waited once for a slot map that serves its slot
  bool in_doubt = false;        // a try of a commit went out and its reply was lost
  std::string last;             // why the last try did not answer, for the give-up message

  virtual ~Request() = default;
  // `reply` is valid during the call only; null with `failure` set when none came.
  virtual void finish(const redisReply* reply, Failure failure, std::string_view where) = 0;
};

template <class T, class Handler>
struct Op final : Request {
  using Decode = T (*)(const redisReply&, std::string_view where);
  Op(Decode d, Handler&& h) : decode(d), handler(std::move(h)) {}

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

// One server's connection: opened on demand, multiplexing every call sent to it, dropped when it
// fails or times out, and opened again after a backoff. Lives on the Impl's strand, as long as
// the Impl.
class Link {
 public:
  Link(AsyncRedisStore::Impl& impl, redis::ConnectionOptions options);

  // Sends `request` (after ASKING when request->asking); its reply or failure goes to the
  // Impl's answered() or failed().
  void submit(std::unique_ptr<Request> request);
  // Ends the connection (its calls fail) and stops the watchdog; no connection opens after.
  void close();

  const std::string& where() const noexcept { return where_; }
  const std::string& host() const noexcept { return options_.host; }

 private:
  // hiredis's event hooks: read and write readiness of the connection's socket on the strand.
  struct Watcher : std::enable_shared_from_this<Watcher> {
    Watcher(const net::strand<net::any_io_executor>& strand, redisAsyncContext* context)
        : ac(context), socket(strand, context->c.fd) {}

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

    redisAsyncContext* ac;
    net::posix::stream_descriptor socket;
    bool reading = false, writing = false, read_armed = false, write_armed = false;
    std::shared_ptr<Watcher> keep;  // the context's reference, until cleanup
  };

  void send(std::unique_ptr<Request> request, bool eval_source);
  static void on_reply(redisAsyncContext* ac, void* r, void* privdata);
  bool connect();
  template <class Args>
  void setup_command(const Args& args);
  static void on_connect(const redisAsyncContext* ac, int status);
  static void on_disconnect(const redisAsyncContext* ac, int);
  void failed_attempt();
  void drop(std::string why);
  void arm_watchdog();

  AsyncRedisStore::Impl& impl_;
  redis::ConnectionOptions options_;
  std::string where_;
  net::steady_timer watchdog_;
  bool watchdog_armed_ = false;
  bool closed_ = false;

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
};

std::string_view text(const redisReply& r) { return {r.str, r.len}; }

}  // namespace

class AsyncRedisStore::Impl : public std::enable_shared_from_this<AsyncRedisStore::Impl> {
 public:
  Impl(const net::any_io_executor& executor, AsyncRedisStoreOptions options)
      : options_(std::move(options)), strand_(net::make_strand(executor)) {
    if (options_.max_attempts < 1) options_.max_attempts = 1;
    if (options_.cluster_seeds.empty()) {
      single_ = std::make_unique<Link>(*this, options_.connection);
      return;
    }
    // A cluster: the seeds are the first nodes the slot map is read from.
    cluster_ = true;
    auto refuse = [&](std::string why) { unusable_ = fmt::format("redis cluster: {}", why); };
    if (options_.connection.db != 0) {
      refuse("a cluster has only database 0");
    } else if (!options_.connection.unix_socket.empty()) {
      refuse("cluster nodes are reached over TCP");
    }
    for (const std::string& seed : options_.cluster_seeds) {
      if (!unusable_.empty()) break;
      Result<redis::ConnectionOptions> parsed =
          redis::ConnectionOptions::from_uri("redis://" + seed);
      if (!parsed || parsed->db != 0) {
        refuse(fmt::format("seed '{}' is not host:port", seed));
      } else {
        seeds_.push_back(&link_for(parsed->host, parsed->port));
      }
    }
  }

  // Ends every connection (their calls fail); the store's destructor.
  void close() {
    if (single_) single_->close();
    for (auto& [name, link] : links_) link->close();
  }

  // Runs `script` with `args` and decodes its reply with `decode`, as an awaitable.
  template <class T>
  net::awaitable<T> eval(const redis::Script& script, std::vector<std::string> args, bool commit,
                         T (*decode)(const redisReply&, std::string_view)) {
    return net::async_initiate<const net::use_awaitable_t<>&, void(T)>(
        [self = shared_from_this(), &script, decode, commit,
         args = std::move(args)](auto handler) mutable {
          using Handler = decltype(handler);
          auto op = std::make_unique<Op<T, Handler>>(decode, std::move(handler));
          op->script = &script;
          op->args = std::move(args);
          op->commit = commit;
          if (self->options_.single_threaded) {
            self->start(std::unique_ptr<Request>(op.release()));
            return;
          }
          net::dispatch(self->strand_, [self, op = std::move(op)]() mutable {
            self->start(std::unique_ptr<Request>(op.release()));
          });
        },
        net::use_awaitable);
  }

  // A reply came for `request` from `link` (NOSCRIPT already handled there).
  void answered(Link& link, std::unique_ptr<Request> request, const redisReply& reply) {
    if (!cluster_ || request->script == nullptr || reply.type != REDIS_REPLY_ERROR) {
      request->finish(&reply, {}, link.where());
      return;
    }
    if (std::optional<redis::Redirect> to = redis::parse_redirect(reply)) {
      request->last = fmt::format("redis {}: {}", link.where(), text(reply));
      Link& next = link_for(to->host, to->port);
      if (to->ask) {
        asked_.fetch_add(1, std::memory_order_relaxed);
        request->ask_to = &next;  // this call only; the slot is still the source node's
      } else {
        moved_.fetch_add(1, std::memory_order_relaxed);
        if (to->slot < owners_.size()) owners_[to->slot] = &next;
        // A node the map does not know as a primary (a promoted replica, a new node) likely took
        // many slots at once: read the whole map rather than learn them one MOVED at a time.
        if (std::find(primaries_.begin(), primaries_.end(), &next) == primaries_.end()) {
          start_refresh(nullptr);
        }
      }
      route(std::move(request));
      return;
    }
    const bool down = redis::is_error(reply, "CLUSTERDOWN");
    if (down || redis::is_error(reply, "TRYAGAIN")) {
      request->last = fmt::format("redis {}: {}", link.where(), text(reply));
      // Either the cluster is down, or this node has not caught up with it: read the map from
      // the other nodes.
      if (down) start_refresh(&link);
      const auto pause = redis::retry_pause(request->attempts);
      if (std::chrono::steady_clock::now() + pause >= request->deadline) {
        give_up(std::move(request));
        return;
      }
      auto timer = std::make_shared<net::steady_timer>(strand_, pause);
      timer->async_wait([self = shared_from_this(), timer,
                         request = std::move(request)](boost::system::error_code) mutable {
        self->route(std::move(request));
      });
      return;
    }
    request->finish(&reply, {}, link.where());  // any other error reply is the decoder's
  }

  // No reply will come for `request` from `link`: it failed, timed out, or found no connection.
  void failed(Link& link, std::unique_ptr<Request> request, Failure failure) {
    if (!cluster_ || request->script == nullptr) {
      request->finish(nullptr, std::move(failure), link.where());
      return;
    }
    request->in_doubt = request->in_doubt || failure.code == errc::outcome_unknown;
    request->last = failure.describe();
    // After a failover another node serves the slot: once the map is read again (by this call
    // or another since this one was sent), one more try goes to the slot's owner then. Reads
    // after a failure are spaced by reconnect_backoff, so calls meeting a dead node that still
    // owns its slots fail at once, as on one server.
    if (generation_ != request->seen) {
      route(std::move(request));
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_failure_refresh_) {
      next_failure_refresh_ = now + options_.reconnect_backoff;
      wait_for_map(std::move(request), &link);
      return;
    }
    give_up(std::move(request));
  }

  void slots_read(Link& link, const redisReply* reply, const Failure& failure) {
    std::optional<std::vector<redis::SlotRange>> ranges;
    if (reply == nullptr) {
      refresh_failure_ = failure.describe();
    } else if (reply->type == REDIS_REPLY_ERROR) {
      refresh_failure_ = fmt::format("redis {}: CLUSTER SLOTS: {}", link.where(), text(*reply));
    } else if (!(ranges = redis::parse_cluster_slots(*reply, link.host()))) {
      refresh_failure_ = fmt::format("redis {}: CLUSTER SLOTS: unexpected reply", link.where());
    } else {
      SlotMap map;
      map.owners.assign(redis::kSlots, nullptr);
      for (const redis::SlotRange& range : *ranges) {
        Link* owner = &link_for(range.host, range.port);
        std::fill(map.owners.begin() + range.first, map.owners.begin() + range.last + 1, owner);
        if (std::find(map.primaries.begin(), map.primaries.end(), owner) == map.primaries.end()) {
          map.primaries.push_back(owner);
        }
      }
      map.served = static_cast<std::size_t>(std::count_if(map.owners.begin(), map.owners.end(),
                                                          [](Link* l) { return l != nullptr; }));
      // The first map that serves every slot wins; a node that has not caught up may answer
      // with an old map that leaves slots unserved, used only when no node has a complete one.
      if (map.served == redis::kSlots) {
        best_ = std::move(map);
        end_refresh();
        return;
      }
      if (!best_ || map.served > best_->served) best_ = std::move(map);
    }
    read_next();
  }

  std::uint64_t connections_opened() const noexcept {
    return opened_.load(std::memory_order_relaxed);
  }
  void count_opened() noexcept { opened_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t moved() const noexcept { return moved_.load(std::memory_order_relaxed); }
  std::uint64_t asked() const noexcept { return asked_.load(std::memory_order_relaxed); }
  std::uint64_t slot_map_reads() const noexcept {
    return installed_.load(std::memory_order_relaxed);
  }

  const AsyncRedisStoreOptions& options() const noexcept { return options_; }
  const net::strand<net::any_io_executor>& strand() const noexcept { return strand_; }

 private:
  // One node's CLUSTER SLOTS, by link.
  struct SlotMap {
    std::vector<Link*> owners;     // by slot; null: served by nobody in this map
    std::vector<Link*> primaries;  // in the order the reply names them
    std::size_t served = 0;        // slots with an owner
  };

  // A CLUSTER SLOTS read during a refresh: its answer goes to slots_read().
  struct SlotsRead final : Request {
    SlotsRead(Impl& i, Link& l) : impl(i), link(l) { args = {"CLUSTER", "SLOTS"}; }
    void finish(const redisReply* reply, Failure failure, std::string_view) override {
      impl.slots_read(link, reply, failure);
    }
    Impl& impl;
    Link& link;
  };

  void start(std::unique_ptr<Request> request) {
    const auto& c = options_.connection;
    request->deadline = std::chrono::steady_clock::now() + c.connect_timeout + c.command_timeout;
    if (!cluster_) {
      single_->submit(std::move(request));
      return;
    }
    if (!unusable_.empty()) {
      request->finish(nullptr, unavailable(unusable_), "cluster");
      return;
    }
    request->slot = redis::key_slot(request->args.front());
    route(std::move(request));
  }

  // Sends `request` to the node named by ASK, else its slot's owner; waits for a slot map first
  // when none names one.
  void route(std::unique_ptr<Request> request) {
    if (request->attempts >= options_.max_attempts ||
        std::chrono::steady_clock::now() >= request->deadline) {
      give_up(std::move(request));
      return;
    }
    Link* link = std::exchange(request->ask_to, nullptr);
    request->asking = link != nullptr;
    if (link == nullptr) link = owners_.empty() ? nullptr : owners_[request->slot];
    if (link == nullptr) {
      if (request->waited_for_map) {
        request->last = fmt::format("no node serves slot {}", request->slot);
        give_up(std::move(request));
        return;
      }
      request->waited_for_map = true;
      wait_for_map(std::move(request), nullptr);
      return;
    }
    ++request->attempts;
    request->seen = generation_;
    link->submit(std::move(request));
  }

  void give_up(std::unique_ptr<Request> request) {
    Failure failure = unavailable(fmt::format(
        "redis cluster: slot {}: gave up after {} tries: {}", request->slot, request->attempts,
        request->last.empty() ? std::string("out of time") : request->last));
    // A try that went out may have run, whatever the later ones met.
    if (request->in_doubt) failure = redis::reply_lost(std::move(failure));
    request->finish(nullptr, std::move(failure), "cluster");
  }

  void wait_for_map(std::unique_ptr<Request> request, Link* failed) {
    waiting_.push_back(std::move(request));
    start_refresh(failed);
  }

  // Reads the slot map again unless a read is under way: asks the known nodes in turn (the last
  // map's primaries, the seeds, every node met since), `failed` last.
  void start_refresh(Link* failed) {
    if (refreshing_) return;
    refreshing_ = true;
    std::vector<Link*> candidates = primaries_;
    candidates.insert(candidates.end(), seeds_.begin(), seeds_.end());
    for (const auto& [name, link] : links_) candidates.push_back(link.get());
    order_.clear();
    for (Link* l : candidates) {
      if (l != failed && std::find(order_.begin(), order_.end(), l) == order_.end()) {
        order_.push_back(l);
      }
    }
    if (failed != nullptr) order_.push_back(failed);
    next_read_ = 0;
    best_.reset();
    refresh_failure_ = "redis cluster: no node to read the slot map from";
    read_next();
  }

  void read_next() {
    if (next_read_ >= order_.size()) {
      end_refresh();
      return;
    }
    Link& link = *order_[next_read_++];
    link.submit(std::make_unique<SlotsRead>(*this, link));
  }

  // Installs the best map read, if any, and routes the calls that waited for it.
  void end_refresh() {
    if (best_) {
      owners_ = std::move(best_->owners);
      primaries_ = std::move(best_->primaries);
      ++generation_;
      installed_.fetch_add(1, std::memory_order_relaxed);
    }
    const bool read = best_.has_value();
    best_.reset();
    refreshing_ = false;
    std::vector<std::unique_ptr<Request>> waiting = std::exchange(waiting_, {});
    for (std::unique_ptr<Request>& request : waiting) {
      if (read) {
        route(std::move(request));
      } else {
        request->last = refresh_failure_;
        give_up(std::move(request));
      }
    }
  }

  Link& link_for(const std::string& host, int port) {
    std::string name = redis::node_address(host, port);
    auto it = links_.find(name);
    if (it == links_.end()) {
      redis::ConnectionOptions o = options_.connection;
      o.host = host;
      o.port = port;
      it = links_.emplace(std::move(name), std::make_unique<Link>(*this, std::move(o))).first;
    }
    return *it->second;
  }

  AsyncRedisStoreOptions options_;
  net::strand<net::any_io_executor> strand_;
  std::unique_ptr<Link> single_;  // one server

  // A cluster, on the strand.
  bool cluster_ = false;
  std::string unusable_;                                // a configuration no call can succeed with
  std::map<std::string, std::unique_ptr<Link>> links_;  // by "host:port", for the Impl's life
  std::vector<Link*> seeds_;
  std::vector<Link*> owners_;     // the slot map: by slot, null: not known; empty before a read
  std::vector<Link*> primaries_;  // of the last map read
  std::uint64_t generation_ = 0;  // maps installed
  SteadyTime next_failure_refresh_{};
  bool refreshing_ = false;
  std::vector<Link*> order_;  // the nodes a refresh asks, in turn
  std::size_t next_read_ = 0;
  std::optional<SlotMap> best_;  // the most complete map read so far by this refresh
  std::string refresh_failure_;
  std::vector<std::unique_ptr<Request>> waiting_;  // for the refresh under way

  std::atomic<std::uint64_t> opened_{0};
  std::atomic<std::uint64_t> moved_{0}, asked_{0}, installed_{0};
};

namespace {

Link::Link(AsyncRedisStore::Impl& impl, redis::ConnectionOptions options)
    : impl_(impl),
      options_(std::move(options)),
      watchdog_(impl.strand()),
      backoff_(impl.options().reconnect_backoff) {
  where_ = options_.unix_socket.empty() ? redis::node_address(options_.host, options_.port)
                                        : options_.unix_socket;
}

void Link::close() {
  closed_ = true;
  watchdog_.cancel();
  drop("the store was closed");
}

void Link::submit(std::unique_ptr<Request> request) {
  if (context_ == nullptr && !connect()) {
    impl_.failed(*this, std::move(request), unavailable(last_failure_));
    return;
  }
  send(std::move(request), /*eval_source=*/false);
}

// EVALSHA (or EVAL with the source, after NOSCRIPT; or a plain command) on the open context.
void Link::send(std::unique_ptr<Request> request, bool eval_source) {
  std::array<const char*, 16> argv{};
  std::array<std::size_t, 16> lens{};
  std::size_t n = 0;
  auto put = [&](std::string_view s) {
    argv[n] = s.data();
    lens[n] = s.size();
    ++n;
  };
  if (const redis::Script* script = request->script) {
    put(eval_source ? std::string_view("EVAL") : std::string_view("EVALSHA"));
    put(eval_source ? script->source : script->sha);
    put("1");
  }
  for (const std::string& a : request->args) put(a);
  if (request->asking) {
    // ASK: the importing node runs the next command on this connection for a key it does not
    // serve yet. Its reply is not read: the command's own reply tells.
    std::array<const char*, 1> asking{"ASKING"};
    std::array<std::size_t, 1> asking_len{6};
    (void)redisAsyncCommandArgv(context_, nullptr, nullptr, 1, asking.data(), asking_len.data());
  }
  request->went_out = connected_;
  Request* raw = request.release();
  if (redisAsyncCommandArgv(context_, &Link::on_reply, raw, static_cast<int>(n), argv.data(),
                            lens.data()) != REDIS_OK) {
    impl_.failed(*this, std::unique_ptr<Request>(raw),
                 unavailable(fmt::format("redis {}: the connection is closing", where_)));
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
  self->last_progress_ = std::chrono::steady_clock::now();
  if (reply == nullptr) {
    // The connection failed or was dropped: no reply will come.
    std::string why = !self->drop_reason_.empty() ? self->drop_reason_
                      : ac->err != 0              ? std::string(ac->errstr)
                                                  : std::string("connection closed");
    Failure failure = unavailable(fmt::format("redis {}: {}", self->where_, why));
    if (request->commit && request->went_out) failure = redis::reply_lost(std::move(failure));
    self->impl_.failed(*self, std::move(request), std::move(failure));
    return;
  }
  if (request->script != nullptr && redis::is_error(*reply, "NOSCRIPT") && !request->reloaded &&
      ac == self->context_) {
    // The server lost its script cache (a restart, SCRIPT FLUSH): EVAL loads and runs it.
    request->reloaded = true;
    self->send(std::move(request), /*eval_source=*/true);
    return;
  }
  self->impl_.answered(*self, std::move(request), *reply);
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
  impl_.count_opened();
  auto watcher = std::make_shared<Watcher>(impl_.strand(), ac);
  watcher->keep = watcher;
  ac->data = this;
  ac->ev.data = watcher.get();
  ac->ev.addRead = &Watcher::add_read;
  ac->ev.delRead = &Watcher::del_read;
  ac->ev.addWrite = &Watcher::add_write;
  ac->ev.delWrite = &Watcher::del_write;
  ac->ev.cleanup = &Watcher::cleanup;
  redisAsyncSetConnectCallback(ac, &Link::on_connect);
  redisAsyncSetDisconnectCallback(ac, &Link::on_disconnect);
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
void Link::setup_command(const Args& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  redisAsyncCommandArgv(
      context_,
      [](redisAsyncContext* ac, void* r, void*) {
        auto* self = static_cast<Link*>(ac->data);
        auto* reply = static_cast<redisReply*>(r);
        if (reply != nullptr && reply->type == REDIS_REPLY_ERROR && ac == self->context_) {
          self->drop(fmt::format("connection setup refused: {}", text(*reply)));
        }
      },
      nullptr, static_cast<int>(argv.size()), argv.data(), lens.data());
}

void Link::on_connect(const redisAsyncContext* ac, int status) {
  auto* self = static_cast<Link*>(ac->data);
  if (ac != self->context_) return;
  if (status == REDIS_OK) {
    self->connected_ = true;
    self->backoff_ = self->impl_.options().reconnect_backoff;
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
  backoff_ = std::min(backoff_ * 2, impl_.options().max_reconnect_backoff);
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
  watchdog_.async_wait([self = impl_.shared_from_this(), this](boost::system::error_code ec) {
    watchdog_armed_ = false;
    if (ec || context_ == nullptr) return;
    const auto now = std::chrono::steady_clock::now();
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

}  // namespace

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
std::uint64_t AsyncRedisStore::moved() const noexcept { return impl_->moved(); }
std::uint64_t AsyncRedisStore::asked() const noexcept { return impl_->asked(); }
std::uint64_t AsyncRedisStore::slot_map_reads() const noexcept { return impl_->slot_map_reads(); }

net::awaitable<Result<Claim>> AsyncRedisStore::async_claim(const ClaimRequest& request) {
  const auto fp = redis::fingerprint_bytes(request.fingerprint);
  redis::DecimalText lease;
  redis::DecimalText retention;
  std::vector<std::string> args{record_key(request.key), std::string(fp.data(), fp.size()),
                                std::string(redis::ms_text(lease, request.lease)),
                                std::string(redis::ms_text(retention, request.retention))};
  return impl_->eval<Result<Claim>>(redis::script_record_claim, std::move(args), false,
                                    &decode_claim);
}

net::awaitable<Status> AsyncRedisStore::async_commit(const Ticket& ticket,
                                                     const Completion& completion) {
  redis::DecimalText fence;
  redis::DecimalText ttl;
  std::vector<std::string> args{
      record_key(ticket.key),
      std::string(redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence))),
      std::string(detail::to_redis(detail::finished_state(completion.status))),
      std::string(completion.result), std::string(redis::ms_text(ttl, completion.ttl))};
  return impl_->eval<Status>(redis::script_record_commit, std::move(args), true, &decode_commit);
}

net::awaitable<Status> AsyncRedisStore::async_abort(const Ticket& ticket) {
  redis::DecimalText fence;
  std::vector<std::string> args{
      record_key(ticket.key),
      std::string(redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence)))};
  return impl_->eval<Status>(redis::script_record_abort, std::move(args), false, &decode_abort);
}

net::awaitable<Status> AsyncRedisStore::async_extend(const Ticket& ticket,
                                                     std::chrono::milliseconds lease) {
  redis::DecimalText fence;
  redis::DecimalText ms;
  std::vector<std::string> args{
      record_key(ticket.key),
      std::string(redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence))),
      std::string(redis::ms_text(ms, lease))};
  return impl_->eval<Status>(redis::script_record_extend, std::move(args), false, &decode_extend);
}

}  // namespace idem
