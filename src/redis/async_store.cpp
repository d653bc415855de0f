// AsyncRedisStore: the record scripts on asynchronous connections driven by Asio; on a Redis
// Cluster, each call routed to its key slot's primary.
//
// Every connection, and the routing state, runs on one strand. A Link (async_link.hpp) is one
// server's connection; each call is one EVALSHA whose reply the link hands, while it is valid,
// to the Impl, which decodes it and posts the result to the caller's executor, or on a cluster
// follows a redirection first.

#include "idem/redis/async_store.hpp"

#include <fmt/format.h>
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
#include "common/resume_here.hpp"
#include "idem/asio/detail/wake_op.hpp"
#include "lua_scripts.hpp"
#include "sigpipe.hpp"
#include "store_common.hpp"

namespace idem {

namespace net = boost::asio;
using redis::detail::Link;
using redis::detail::Request;
using redis::detail::SteadyTime;

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

  void fail_held(const Failure& failure) override { held.emplace(T(failure)); }

  void complete_posted(std::unique_ptr<Request> /*self*/) override {
    auto executor = net::get_associated_executor(handler);
    net::post(executor, net::append(std::move(handler), std::move(*held)));
  }

  Decode decode;
  Handler handler;
  std::optional<T> held;  // the answer, between hold_answer and complete_in_place
};

Status decode_commit(const redisReply& r, std::string_view where) {
  return redis::decode_fenced(r, where, "commit");
}
Status decode_abort(const redisReply& r, std::string_view where) {
  return redis::decode_fenced(r, where, "abort");
}
Status decode_extend(const redisReply& r, std::string_view where) {
  return redis::decode_fenced(r, where, "extend");
}

}  // namespace

class AsyncRedisStore::Impl : public std::enable_shared_from_this<AsyncRedisStore::Impl>,
                              public redis::detail::LinkOwner {
 public:
  Impl(const net::any_io_executor& executor, AsyncRedisStoreOptions options)
      : options_(std::move(options)), strand_(net::make_strand(executor)) {
    if (options_.max_attempts < 1) options_.max_attempts = 1;
    if (options_.connection.ignore_sigpipe) redis::ignore_sigpipe_if_default();
    if (options_.cluster_seeds.empty()) {
      single_ = make_link(options_.connection);
      return;
    }
    // A cluster: the seeds are the first nodes the slot map is read from.
    topology_ = std::make_unique<redis::Topology<Link>>(
        options_.connection, options_.cluster_seeds,
        redis::OptionNames{"AsyncRedisStore", "AsyncRedisStoreOptions::connection",
                           "AsyncRedisStoreOptions::cluster_seeds"},
        [this](redis::ConnectionOptions o) { return make_link(std::move(o)); });
  }

  // Ends every connection (their calls fail); the store's destructor.
  void close() {
    closed_ = true;
    for (const std::unique_ptr<Link>& link : single_waits_.links) link->close();
    for (auto& [node, pool] : node_waits_) {
      for (const std::unique_ptr<Link>& link : pool.links) link->close();
    }
    if (single_) single_->close();
    if (topology_) topology_->for_each_node([](Link& link) { link.close(); });
  }

  // Runs `script` with `args` and decodes its reply with `decode`, as an awaitable.
  // `report_in_doubt`: a commit (Request::report_in_doubt). `operation` ("claim", "commit"):
  // with durability on, a reply `wrote` accepts waits for WAIT.
  template <class T>
  net::awaitable<T> eval(const redis::Script& script, redis::detail::Args args,
                         bool report_in_doubt, T (*decode)(const redisReply&, std::string_view),
                         bool (*wrote)(const redisReply&) = nullptr,
                         std::string_view operation = {}) {
    if (options_.durability.replicas <= 0) wrote = nullptr;
    return net::async_initiate<const net::use_awaitable_t<>&, void(T)>(
        [self = shared_from_this(), &script, decode, report_in_doubt, wrote, operation,
         args = std::move(args)](auto handler) mutable {
          using Handler = decltype(handler);
          auto op = std::make_unique<Op<T, Handler>>(decode, std::move(handler));
          op->script = &script;
          op->args = std::move(args);
          op->report_in_doubt = report_in_doubt;
          op->wrote = wrote;
          op->operation = operation;
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
    if (!topology_ || request->script == nullptr || request->direct) {
      answer(link, std::move(request), reply);
      return;
    }
    const redis::Tries<Link>::Next next = request->tries.on_reply(*topology_, reply, link.where());
    if (next.answer) {
      answer(link, std::move(request), reply);
      return;
    }
    if (next.read_map) start_refresh(next.ask_last ? &link : nullptr);
    if (!next.pause) {
      route(std::move(request));
      return;
    }
    const std::optional<std::chrono::milliseconds> pause = request->tries.pause();
    if (!pause) {
      give_up(std::move(request));
      return;
    }
    auto timer = std::make_shared<net::steady_timer>(strand_, *pause);
    timer->async_wait([self = shared_from_this(), timer, request = std::move(request)](
                          boost::system::error_code) mutable { self->route(std::move(request)); });
  }

  // `reply` answers `request`. With single_threaded its caller resumes once the link's read is
  // done (Link::complete_after_read) rather than through a post. A write that durability asks
  // to confirm waits for WAIT on the same connection first.
  void answer(Link& link, std::unique_ptr<Request> request, const redisReply& reply) {
    if (request->wrote != nullptr && request->wrote(reply)) {
      (void)request->hold_answer(reply, link.where());
      link.submit(std::make_unique<WaitFor>(*this, link, std::move(request)));
      return;
    }
    if (options_.single_threaded && request->hold_answer(reply, link.where())) {
      link.complete_after_read(std::move(request));
      return;
    }
    request->finish(&reply, {}, link.where());
  }

  // No reply will come for `request` from `link`: it failed, timed out, or found no connection.
  void failed(Link& link, std::unique_ptr<Request> request, Failure failure) override {
    if (!topology_ || request->script == nullptr || request->direct) {
      request->finish(nullptr, std::move(failure), link.where());
      return;
    }
    request->tries.failed(failure);
    // After a failover another node serves the slot: once the map is read again (by this call
    // or another since this one was sent), one more try goes to the slot's owner then. Reads
    // after a failure are spaced by reconnect_backoff, so calls meeting a dead node that still
    // owns its slots fail at once, as on one server.
    if (topology_->generation() != request->tries.seen) {
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

  // WAIT's outcome for `request`, whose answer is held: a shortfall is reported, and fails a
  // commit (outcome_unknown: the write stands on the primary only). `in_read`: a reply came,
  // so the caller may resume once the read is done.
  void waited(Link& link, std::unique_ptr<Request> request, int acknowledged, bool in_read) {
    const redis::ReplicaWait wait{options_.durability, replication_timeouts_};
    if (!wait.check(acknowledged, request->operation) && request->operation == "commit") {
      request->fail_held(wait.unconfirmed(link.where(), "commit", acknowledged));
    }
    if (in_read && options_.single_threaded) {
      link.complete_after_read(std::move(request));
      return;
    }
    Request* raw = request.get();
    raw->complete_posted(std::move(request));
  }

  std::uint64_t replication_timeouts() const noexcept {
    return replication_timeouts_.load(std::memory_order_relaxed);
  }

  void slots_read(Link& link, const redisReply* reply, const Failure& failure) {
    if (reply == nullptr) {
      refresh_->failed(failure);
    } else {
      refresh_->answered(*reply, link.host(), link.where());
    }
    read_next();
  }

  std::uint64_t connections_opened() const noexcept {
    return opened_.load(std::memory_order_relaxed);
  }

  // Whether duplicates wait on the server (with wait connections allowed).
  bool wakes() const noexcept { return options_.connection.wait_connections > 0; }

  // Waits for the end of the hold of `record_key` under `fence`, at most `bound`: record_wait.lua
  // counts the waiter in, then BLPOP on the hold's wake list, both on a wait connection of their
  // own (BLPOP holds its connection: on the shared one it would hold up every call behind it);
  // on a cluster, a wait connection of the node that serves the record's slot by the slot map.
  // `done` ends false at once when every wait connection (of that node) is busy, or when no
  // node is known to serve the slot.
  void await_change(std::shared_ptr<detail::WaitCompletion> done, std::string_view record_key,
                    Fence fence, std::chrono::milliseconds bound) {
    auto count_in = std::make_unique<CountIn>();
    redis::DecimalText fence_text;
    count_in->script = &redis::script_record_wait;
    count_in->with_source = true;  // never NOSCRIPT: its resend would run after the BLPOP
    count_in->reloaded = true;
    count_in->direct = true;  // a MOVED (the slot moved since the map was read) ends the wait
    count_in->args.add(record_key)
        .add(redis::to_chars(fence_text, static_cast<std::int64_t>(fence)));
    auto pop = std::make_unique<BlockPop>(std::move(done));
    // BLPOP's timeout in seconds, to the millisecond (Redis 6 and later); 0 would block forever.
    const std::string seconds = fmt::format("{}.{:03}", bound.count() / 1000, bound.count() % 1000);
    pop->args.add("BLPOP").add(redis::wake_key(record_key, fence)).add(seconds);
    pop->blocks_for = bound;
    pop->direct = true;
    const std::uint16_t slot = topology_ ? redis::key_slot(record_key) : 0;
    auto begin = [self = shared_from_this(), count_in = std::move(count_in), pop = std::move(pop),
                  slot]() mutable {
      WaitPool* pool = &self->single_waits_;
      const redis::ConnectionOptions* node = &self->options_.connection;
      if (self->topology_) {
        const Link* owner = self->topology_->owner(slot);
        if (owner == nullptr) {  // no slot map read yet: the caller pauses
          pop->done->complete(/*waited=*/false);
          return;
        }
        pool = &self->node_waits_[owner];
        node = &owner->options();
      }
      Link* link = self->free_wait_link(*pool, *node);
      if (link == nullptr) {
        pop->done->complete(/*waited=*/false);
        return;
      }
      pop->link = link;
      pop->pool = pool;
      link->submit(std::move(count_in));
      link->submit(std::move(pop));
    };
    if (options_.single_threaded) {
      begin();
      return;
    }
    net::dispatch(strand_, std::move(begin));
  }
  std::shared_ptr<void> keep_alive() override { return shared_from_this(); }
  std::uint64_t moved() const noexcept { return topology_ ? topology_->moved() : 0; }
  std::uint64_t asked() const noexcept { return topology_ ? topology_->asked() : 0; }
  std::uint64_t slot_map_reads() const noexcept { return topology_ ? topology_->generation() : 0; }

 private:
  // A CLUSTER SLOTS read during a refresh: its answer goes to slots_read().
  struct SlotsRead final : Request {
    SlotsRead(Impl& i, Link& l) : impl(i), link(l) {
      for (std::string_view arg : redis::kClusterSlots) args.add(arg);
    }
    void finish(const redisReply* reply, Failure failure, std::string_view) override {
      impl.slots_read(link, reply, failure);
    }
    Impl& impl;
    Link& link;
  };

  // The WAIT after a write, on the link that carried it (a plain command: never routed).
  struct WaitFor final : Request {
    WaitFor(Impl& i, Link& l, std::unique_ptr<Request> w) : impl(i), link(l), write(std::move(w)) {
      const redis::WaitCommand command(i.options_.durability.replicas,
                                       i.options_.durability.timeout);
      for (std::string_view arg : command.argv) args.add(arg);
    }
    void finish(const redisReply* reply, Failure, std::string_view) override {
      impl.waited(link, std::move(write), redis::acknowledged(reply), reply != nullptr);
    }
    Impl& impl;
    Link& link;
    std::unique_ptr<Request> write;
  };

  // The waiter's count-in (record_wait.lua): its reply does not matter, the BLPOP's does (a
  // waiter not counted in is not woken, and waits out its bound).
  struct CountIn final : Request {
    void finish(const redisReply*, Failure, std::string_view) override {}
  };

  // One server's wait connections, on the strand: each carries one wait at a time.
  struct WaitPool {
    std::vector<std::unique_ptr<Link>> links;
    std::vector<Link*> free;
  };

  // The BLPOP of a wait: woken (an element) or its bound passed (nil): waited; no reply (the
  // connection failed or stalled past the bound and its command_timeout): not waited, the
  // caller pauses for what is left of its bound.
  struct BlockPop final : Request {
    explicit BlockPop(std::shared_ptr<detail::WaitCompletion> d) : done(std::move(d)) {}
    void finish(const redisReply* reply, Failure, std::string_view) override {
      pool->free.push_back(link);
      done->complete(reply != nullptr && reply->type != REDIS_REPLY_ERROR);
    }
    std::shared_ptr<detail::WaitCompletion> done;
    Link* link = nullptr;
    WaitPool* pool = nullptr;  // the link's
  };

  // A wait connection of `pool` (to the server `node`) nobody waits on, opened on demand up to
  // wait_connections; null when all are busy.
  Link* free_wait_link(WaitPool& pool, const redis::ConnectionOptions& node) {
    if (!pool.free.empty()) {
      Link* link = pool.free.back();
      pool.free.pop_back();
      return link;
    }
    if (closed_ || pool.links.size() >= options_.connection.wait_connections) return nullptr;
    pool.links.push_back(std::make_unique<Link>(
        *this, strand_, node, tls_,
        redis::ReconnectBackoff{options_.reconnect_backoff, options_.max_reconnect_backoff},
        wait_opened_, options_.single_threaded));
    return pool.links.back().get();
  }

  void start(std::unique_ptr<Request> request) {
    if (!topology_) {
      single_->submit(std::move(request));
      return;
    }
    request->tries.start(request->args[0], options_.connection);
    route(std::move(request));
  }

  // Sends `request` to the node a redirection named, else its slot's owner; waits for a slot map
  // first when none names one.
  void route(std::unique_ptr<Request> request) {
    redis::Tries<Link>& tries = request->tries;
    if (!tries.may_send(options_.max_attempts)) {
      give_up(std::move(request));
      return;
    }
    Link* link = tries.next(*topology_, request->asking);
    if (link == nullptr) {
      if (request->waited_for_map) {
        tries.no_owner();
        give_up(std::move(request));
        return;
      }
      request->waited_for_map = true;
      wait_for_map(std::move(request), nullptr);
      return;
    }
    ++tries.attempts;
    tries.seen = topology_->generation();
    link->submit(std::move(request));
  }

  void give_up(std::unique_ptr<Request> request) {
    request->finish(nullptr, request->tries.give_up(), "cluster");
  }

  void wait_for_map(std::unique_ptr<Request> request, Link* failed) {
    waiting_.push_back(std::move(request));
    start_refresh(failed);
    if (refresh_) watch_waiting();
  }

  // A refresh asks the nodes one after another, each read bounded only by its connection's
  // watchdog: past a waiting call's deadline the call gives up rather than wait for the rest.
  void watch_waiting() {
    if (waiting_.empty()) return;
    SteadyTime first = waiting_.front()->tries.deadline;
    for (const auto& r : waiting_) first = std::min(first, r->tries.deadline);
    if (waiting_timer_armed_ && waiting_timer_.expiry() <= first) return;
    waiting_timer_armed_ = true;
    waiting_timer_.expires_at(first);
    waiting_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;  // re-armed earlier, or the refresh ended
      self->waiting_timer_armed_ = false;
      const SteadyTime now = std::chrono::steady_clock::now();
      std::vector<std::unique_ptr<Request>> late;
      std::erase_if(self->waiting_, [&](std::unique_ptr<Request>& r) {
        if (r->tries.deadline > now) return false;
        late.push_back(std::move(r));
        return true;
      });
      for (std::unique_ptr<Request>& r : late) {
        r->tries.last = "the slot map was still being read from the nodes in turn";
        self->give_up(std::move(r));
      }
      self->watch_waiting();
    });
  }

  // Reads the slot map again unless a read is under way: asks the known nodes in turn,
  // `failed` last.
  void start_refresh(Link* failed) {
    if (refresh_) return;
    refresh_.emplace(*topology_, failed);
    read_next();
  }

  // Asks the next node, or ends the read when it is over.
  void read_next() {
    if (Link* link = refresh_->next()) {
      link->submit(std::make_unique<SlotsRead>(*this, *link));
      return;
    }
    end_refresh();
  }

  // Installs the best map read, if any, and routes the calls that waited for it.
  void end_refresh() {
    const bool read = refresh_->install();
    const Failure failure = refresh_->failure();
    refresh_.reset();
    if (waiting_timer_armed_) {
      waiting_timer_armed_ = false;
      waiting_timer_.cancel();
    }
    std::vector<std::unique_ptr<Request>> waiting = std::exchange(waiting_, {});
    for (std::unique_ptr<Request>& request : waiting) {
      if (read) {
        route(std::move(request));
      } else if (failure.code == errc::config_invalid) {
        request->finish(nullptr, failure, "cluster");  // a right to grant: no retry helps
      } else {
        request->tries.last = failure.message;
        give_up(std::move(request));
      }
    }
  }

  std::unique_ptr<Link> make_link(redis::ConnectionOptions o) {
    return std::make_unique<Link>(
        *this, strand_, std::move(o), tls_,
        redis::ReconnectBackoff{options_.reconnect_backoff, options_.max_reconnect_backoff},
        opened_, options_.single_threaded);
  }

  AsyncRedisStoreOptions options_;
  net::strand<net::any_io_executor> strand_;
  // One TLS context for every connection of the store; null without TLS.
  std::shared_ptr<const redis::TlsContext> tls_ = redis::TlsContext::make(options_.connection.tls);
  std::unique_ptr<Link> single_;  // one server

  // A cluster: its nodes and slot map; the refresh under way, on the strand.
  std::unique_ptr<redis::Topology<Link>> topology_;
  SteadyTime next_failure_refresh_{};
  std::optional<redis::SlotMapRead<Link>> refresh_;  // the read under way
  std::vector<std::unique_ptr<Request>> waiting_;    // for it
  net::steady_timer waiting_timer_{strand_};         // the first waiting call's deadline
  bool waiting_timer_armed_ = false;

  std::atomic<std::uint64_t> opened_{0};
  std::atomic<std::uint64_t> replication_timeouts_{0};

  // The wait connections, on the strand: of the one server, or by cluster node (a node's
  // command link names it; nodes live as long as the topology).
  WaitPool single_waits_;
  std::map<const Link*, WaitPool> node_waits_;
  std::atomic<std::uint64_t> wait_opened_{0};  // not in connections_opened(): the calls' only
  bool closed_ = false;
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
bool AsyncRedisStore::wakes() const noexcept { return impl_->wakes(); }

net::awaitable<bool> AsyncRedisStore::async_await_change(const Ticket& held,
                                                         std::chrono::milliseconds bound) {
  if (bound.count() <= 0) {
    return detail::async_wait_with(
        [](const std::shared_ptr<detail::WaitCompletion>& done) { done->complete(true); });
  }
  return detail::async_wait_with([impl = impl_, record = record_key(held.key), fence = held.fence,
                                  bound](std::shared_ptr<detail::WaitCompletion> done) {
    impl->await_change(std::move(done), record, fence, bound);
  });
}

std::uint64_t AsyncRedisStore::moved() const noexcept { return impl_->moved(); }
std::uint64_t AsyncRedisStore::asked() const noexcept { return impl_->asked(); }
std::uint64_t AsyncRedisStore::slot_map_reads() const noexcept { return impl_->slot_map_reads(); }
std::uint64_t AsyncRedisStore::replication_timeouts() const noexcept {
  return impl_->replication_timeouts();
}

net::awaitable<Result<Claim>> AsyncRedisStore::async_claim(const ClaimRequest& request) {
  const auto fp = redis::fingerprint_bytes(request.fingerprint);
  redis::DecimalText lease;
  redis::DecimalText retention;
  auto args = redis::detail::Args::with_key(prefix_, request.key,
                                            fp.size() + 2 * sizeof(redis::DecimalText));
  args.add(std::string_view(fp.data(), fp.size()))
      .add(redis::ms_text(lease, request.lease))
      .add(redis::ms_text(retention, request.retention));
  return impl_->eval<Result<Claim>>(redis::script_record_claim, std::move(args), false,
                                    &redis::decode_record_claim, &redis::claim_acquired, "claim");
}

net::awaitable<Status> AsyncRedisStore::async_commit(const Ticket& ticket,
                                                     const Completion& completion) {
  redis::DecimalText fence;
  redis::DecimalText ttl;
  auto args = redis::detail::Args::with_key(
      prefix_, ticket.key, completion.result.size() + 2 * sizeof(redis::DecimalText) + 1);
  args.add(redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence)))
      .add(detail::to_redis(detail::finished_state(completion.status)))
      .add(completion.result)
      .add(redis::ms_text(ttl, completion.ttl));
  return impl_->eval<Status>(redis::script_record_commit, std::move(args), true, &decode_commit,
                             &redis::fenced_ok, "commit");
}

net::awaitable<Status> AsyncRedisStore::async_abort(const Ticket& ticket) {
  redis::DecimalText fence;
  auto args = redis::detail::Args::with_key(prefix_, ticket.key, sizeof(redis::DecimalText));
  args.add(redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence)));
  return impl_->eval<Status>(redis::script_record_abort, std::move(args), false, &decode_abort);
}

net::awaitable<Status> AsyncRedisStore::async_extend(const Ticket& ticket,
                                                     std::chrono::milliseconds lease) {
  redis::DecimalText fence;
  redis::DecimalText ms;
  auto args = redis::detail::Args::with_key(prefix_, ticket.key, 2 * sizeof(redis::DecimalText));
  args.add(redis::to_chars(fence, static_cast<std::int64_t>(ticket.fence)))
      .add(redis::ms_text(ms, lease));
  return impl_->eval<Status>(redis::script_record_extend, std::move(args), false, &decode_extend);
}

}  // namespace idem
