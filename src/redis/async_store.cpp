// AsyncRedisStore: the record scripts on hiredis asynchronous connections, driven by Asio; on a
// Redis Cluster, each call routed to its key slot's primary.
//
// Everything that touches a hiredis context, and the routing state, runs on one strand. A Link
// (async_link.hpp) is one server's connection; each call is one EVALSHA whose reply the link
// hands, while it is valid, to the Impl, which decodes it and posts the result to the caller's
// executor, or on a cluster follows a redirection first.

#include "idem/redis/async_store.hpp"

#include <fmt/format.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "async_link.hpp"
#include "cluster.hpp"
#include "common/resume_here.hpp"
#include "lua_scripts.hpp"
#include "node.hpp"
#include "sigpipe.hpp"
#include "store_common.hpp"

namespace idem {

namespace net = boost::asio;
using redis_async::Link;
using redis_async::Request;
using redis_async::SteadyTime;
using redis_async::text;
using redis_async::unavailable;

namespace {

template <class T, class Handler>
struct Op final : Request {
  using Decode = T (*)(const redisReply&, std::string_view where);
  Op(Decode d, Handler&& h) : decode(d), handler(std::move(h)) {}

  void finish(const redisReply* reply, Failure failure, std::string_view where) override {
    T value = reply != nullptr ? decode(*reply, where) : T(std::move(failure));
    auto executor = net::get_associated_executor(handler);
    net::post(executor, net::append(std::move(handler), std::move(value)));
  }

  bool hold_answer(const redisReply& reply, std::string_view where) override {
    held.emplace(decode(reply, where));
    return true;
  }

  // No post: the caller resumes here (detail::resume_here).
  void complete_in_place(std::unique_ptr<Request> self) override {
    Handler h = std::move(handler);
    T value = std::move(*held);
    self.reset();  // `this` is gone: the caller's next call may reuse its memory
    detail::resume_here(h, std::move(value));
  }

  Decode decode;
  Handler handler;
  std::optional<T> held;  // the answer, between hold_answer and complete_in_place
};

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

class AsyncRedisStore::Impl : public std::enable_shared_from_this<AsyncRedisStore::Impl>,
                              public redis_async::LinkOwner {
 public:
  Impl(const net::any_io_executor& executor, AsyncRedisStoreOptions options)
      : options_(std::move(options)), strand_(net::make_strand(executor)) {
    if (options_.max_attempts < 1) options_.max_attempts = 1;
    if (options_.connection.ignore_sigpipe) redis::ignore_sigpipe_if_default();
    if (options_.cluster_seeds.empty()) {
      single_ = make_link(options_.connection);
      return;
    }
    // A cluster: the seeds are the first nodes the slot map is read from. Options no cluster
    // allows are a programming error, refused here rather than answered as an outage.
    cluster_ = true;
    const auto refuse = [](std::string_view why) {
      return std::invalid_argument(fmt::format("idem::AsyncRedisStore: a cluster {}", why));
    };
    if (options_.connection.db != 0) {
      throw refuse("has only database 0 (AsyncRedisStoreOptions::connection.db)");
    }
    if (!options_.connection.unix_socket.empty()) {
      throw refuse("is reached over TCP (AsyncRedisStoreOptions::connection.unix_socket)");
    }
    std::vector<redis::ConnectionOptions> seeds;
    for (const std::string& seed : options_.cluster_seeds) {
      Result<redis::ConnectionOptions> parsed =
          redis::ConnectionOptions::from_uri("redis://" + seed);
      if (!parsed || parsed->db != 0) {
        throw refuse(fmt::format("seed '{}' is not host:port", seed));
      }
      seeds.push_back(std::move(parsed).value());
    }
    for (const redis::ConnectionOptions& seed : seeds) {
      seeds_.push_back(&link_for(seed.host, seed.port));
    }
  }

  // Ends every connection (their calls fail); the store's destructor.
  void close() {
    if (single_) single_->close();
    for (auto& [name, link] : links_) link->close();
  }

  // Runs `script` with `args` and decodes its reply with `decode`, as an awaitable.
  template <class T>
  net::awaitable<T> eval(const redis::Script& script, redis_async::Args args, bool commit,
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
  void answered(Link& link, std::unique_ptr<Request> request, const redisReply& reply) override {
    if (!cluster_ || request->script == nullptr || reply.type != REDIS_REPLY_ERROR) {
      answer(link, std::move(request), reply);
      return;
    }
    if (std::optional<redis::Redirect> to = redis::parse_redirect(reply)) {
      request->last = fmt::format("redis {}: {}", link.where(), text(reply));
      Link& next = link_for(to->host, to->port);
      request->redirect_to = &next;
      request->ask = to->ask;
      if (to->ask) {
        asked_.fetch_add(1, std::memory_order_relaxed);  // the slot stays the source node's
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
    answer(link, std::move(request), reply);  // any other error reply is the decoder's
  }

  // `reply` answers `request`. With single_threaded its caller resumes once the link's read is
  // done (Link::complete_after_read) rather than through a post.
  void answer(Link& link, std::unique_ptr<Request> request, const redisReply& reply) {
    if (options_.single_threaded && request->hold_answer(reply, link.where())) {
      link.complete_after_read(std::move(request));
      return;
    }
    request->finish(&reply, {}, link.where());
  }

  // No reply will come for `request` from `link`: it failed, timed out, or found no connection.
  void failed(Link& link, std::unique_ptr<Request> request, Failure failure) override {
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
  std::shared_ptr<void> keep_alive() override { return shared_from_this(); }
  std::uint64_t moved() const noexcept { return moved_.load(std::memory_order_relaxed); }
  std::uint64_t asked() const noexcept { return asked_.load(std::memory_order_relaxed); }
  std::uint64_t slot_map_reads() const noexcept {
    return installed_.load(std::memory_order_relaxed);
  }

 private:
  // One node's CLUSTER SLOTS, by link.
  struct SlotMap {
    std::vector<Link*> owners;     // by slot; null: served by nobody in this map
    std::vector<Link*> primaries;  // in the order the reply names them
    std::size_t served = 0;        // slots with an owner
  };

  // A CLUSTER SLOTS read during a refresh: its answer goes to slots_read().
  struct SlotsRead final : Request {
    SlotsRead(Impl& i, Link& l) : impl(i), link(l) { args.add("CLUSTER").add("SLOTS"); }
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
    request->slot = redis::key_slot(request->args[0]);
    route(std::move(request));
  }

  // Sends `request` to the node a redirection named, else its slot's owner; waits for a slot map
  // first when none names one.
  void route(std::unique_ptr<Request> request) {
    if (request->attempts >= options_.max_attempts ||
        std::chrono::steady_clock::now() >= request->deadline) {
      give_up(std::move(request));
      return;
    }
    Link* link = std::exchange(request->redirect_to, nullptr);
    request->asking = link != nullptr && std::exchange(request->ask, false);
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
    if (refreshing_) watch_waiting();
  }

  // A refresh asks the nodes one after another, each read bounded only by its connection's
  // watchdog: past a waiting call's deadline the call gives up rather than wait for the rest.
  void watch_waiting() {
    if (waiting_.empty()) return;
    SteadyTime first = waiting_.front()->deadline;
    for (const auto& r : waiting_) first = std::min(first, r->deadline);
    if (waiting_timer_armed_ && waiting_timer_.expiry() <= first) return;
    waiting_timer_armed_ = true;
    waiting_timer_.expires_at(first);
    waiting_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;  // re-armed earlier, or the refresh ended
      self->waiting_timer_armed_ = false;
      const SteadyTime now = std::chrono::steady_clock::now();
      std::vector<std::unique_ptr<Request>> late;
      std::erase_if(self->waiting_, [&](std::unique_ptr<Request>& r) {
        if (r->deadline > now) return false;
        late.push_back(std::move(r));
        return true;
      });
      for (std::unique_ptr<Request>& r : late) {
        r->last = "the slot map was still being read from the nodes in turn";
        self->give_up(std::move(r));
      }
      self->watch_waiting();
    });
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
    if (waiting_timer_armed_) {
      waiting_timer_armed_ = false;
      waiting_timer_.cancel();
    }
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
      it = links_.emplace(std::move(name), make_link(std::move(o))).first;
    }
    return *it->second;
  }

  std::unique_ptr<Link> make_link(redis::ConnectionOptions o) {
    return std::make_unique<Link>(
        *this, strand_, std::move(o),
        redis_async::LinkBackoff{options_.reconnect_backoff, options_.max_reconnect_backoff},
        opened_, options_.single_threaded);
  }

  AsyncRedisStoreOptions options_;
  net::strand<net::any_io_executor> strand_;
  std::unique_ptr<Link> single_;  // one server

  // A cluster, on the strand.
  bool cluster_ = false;
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
  net::steady_timer waiting_timer_{strand_};       // the first waiting call's deadline
  bool waiting_timer_armed_ = false;

  std::atomic<std::uint64_t> opened_{0};
  std::atomic<std::uint64_t> moved_{0}, asked_{0}, installed_{0};
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
std::uint64_t AsyncRedisStore::moved() const noexcept { return impl_->moved(); }
std::uint64_t AsyncRedisStore::asked() const noexcept { return impl_->asked(); }
std::uint64_t AsyncRedisStore::slot_map_reads() const noexcept { return impl_->slot_map_reads(); }

net::awaitable<Result<Claim>> AsyncRedisStore::async_claim(const ClaimRequest& request) {
  const auto fp = redis::fingerprint_bytes(request.fingerprint);
  redis::DecimalText lease;
  redis::DecimalText retention;
  auto args =
      redis_async::Args::with_key(prefix_, request.key, fp.size() + 2 * sizeof(redis::DecimalText));
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
  auto args = redis_async::Args::with_key(
      prefix_, ticket.key, completion.result.size() + 2 * sizeof(redis::DecimalText) + 1);
  args.add(redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence)))
      .add(detail::to_redis(detail::finished_state(completion.status)))
      .add(completion.result)
      .add(redis::ms_text(ttl, completion.ttl));
  return impl_->eval<Status>(redis::script_record_commit, std::move(args), true, &decode_commit);
}

net::awaitable<Status> AsyncRedisStore::async_abort(const Ticket& ticket) {
  redis::DecimalText fence;
  auto args = redis_async::Args::with_key(prefix_, ticket.key, sizeof(redis::DecimalText));
  args.add(redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence)));
  return impl_->eval<Status>(redis::script_record_abort, std::move(args), false, &decode_abort);
}

net::awaitable<Status> AsyncRedisStore::async_extend(const Ticket& ticket,
                                                     std::chrono::milliseconds lease) {
  redis::DecimalText fence;
  redis::DecimalText ms;
  auto args = redis_async::Args::with_key(prefix_, ticket.key, 2 * sizeof(redis::DecimalText));
  args.add(redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence)))
      .add(redis::ms_text(ms, lease));
  return impl_->eval<Status>(redis::script_record_extend, std::move(args), false, &decode_extend);
}

}  // namespace idem
