#pragma once
// A simulated process: its connection to the server, what it keeps in memory in front of it (a
// CachedStore, a GroupCommitStore: lost when it crashes), its guard and completer, and the
// operations its callers run on them. An incarnation lives until its process crashes; a restart
// builds a new one.

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "idem/admin.hpp"
#include "idem/admin/cached_admin.hpp"
#include "idem/batch.hpp"
#include "idem/cached_store.hpp"
#include "idem/completer.hpp"
#include "idem/group_commit_store.hpp"
#include "idem/guard.hpp"
#include "idem/layered_guard.hpp"
#include "idem/memory/request_id_cache.hpp"
#include "sim/network.hpp"
#include "sim/probe.hpp"
#include "sim/scenario.hpp"
#include "sim/sim_sync.hpp"
#include "sim/world.hpp"

namespace idem::sim {

/// Thrown in a handler whose process crashed: it unwinds the caller.
struct Crashed {};

/// The operator's admin as a process holds it: the backend's release, forget and purge (each
/// checked against the contract); a process with a CachedStore wraps it in cached_admin().
class BackendAdmin final : public admin::Admin {
 public:
  explicit BackendAdmin(World& world) : world_(&world) {}
  std::string_view store_name() const noexcept override { return "sim"; }
  Result<std::optional<admin::RecordInfo>> inspect(std::string_view, const Key&) override;
  Result<admin::Page> list(std::string_view, const admin::ListRequest&) override;
  Result<admin::Change> release(std::string_view scope, const Key& key, Fence only_fence) override;
  Result<admin::Change> forget(std::string_view scope, const Key& key) override;
  Result<std::size_t> purge_expired(std::size_t max_records) override;
  std::string schema_text() const override { return {}; }
  Result<admin::SchemaReport> check_schema() override;
  Result<admin::SchemaReport> migrate_schema() override;
  Result<admin::Stats> stats(std::string_view, bool) override;

 private:
  World* world_;
};

class Process {
 public:
  Process(World& world, int id) : world_(&world), id_(id) {}
  virtual ~Process() = default;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  int id() const noexcept { return id_; }
  /// Runs one operation of a caller of this process (on its task).
  void run(const Op& op);

 protected:
  virtual void run_guarded(const Op& op) = 0;
  virtual void run_completer() {}
  virtual admin::Admin& admin() = 0;
  World& world() { return *world_; }

 private:
  void run_admin(const Op& op);

  World* world_;
  int id_;
};

/// The guard's operations over one store stack.
template <class Store>
class Caller {
  using Layered = LayeredGuard<RequestIdLayer<MemoryRequestIdCache>, RecordLayer<Store>>;

 public:
  Caller(World& world, Store& store)
      : world_(&world),
        guard_(store, world.guard_options()),
        requests_(MemoryRequestIdCacheOptions{
            .guard = request_options(world), .shards = 1, .clock = world.clock()}),
        layered_(layered_options(world), RequestIdLayer<MemoryRequestIdCache>(requests_),
                 RecordLayer<Store>(store, record_settings(world))) {}

  void run(const Op& op);

 private:
  void execute(const Op& op);
  void two_phase(const Op& op);
  void batch(const Op& op);
  void layered(const Op& op);

  static Options request_options(World& world) {
    Options o;
    o.lease = world.options().lease;
    o.ttl = world.options().ttl;
    return o;
  }
  static LayerSettings record_settings(World& world) {
    const Options& o = world.options();
    return LayerSettings{"record", o.scope, o.lease, *o.ttl, std::chrono::milliseconds{0}};
  }
  static LayeredOptions layered_options(World& world) {
    const Options& o = world.options();
    return LayeredOptions{.policy = {.in_progress = o.in_progress,
                                     .remember_failures = o.remember_failures,
                                     .max_result_size = o.max_result_size,
                                     .clock = o.clock,
                                     .commit_retry = o.commit_retry}};
  }

  World* world_;
  IdempotencyGuard<Store> guard_;
  MemoryRequestIdCache requests_;
  Layered layered_;
};

template <class Store>
void Caller<Store>::run(const Op& op) {
  switch (op.kind) {
    case OpKind::execute:
      execute(op);
      break;
    case OpKind::commit:
    case OpKind::fail:
    case OpKind::drop:
      two_phase(op);
      break;
    case OpKind::batch:
      batch(op);
      break;
    case OpKind::layered:
      layered(op);
      break;
    default:
      break;
  }
}

/// Runs `call`, which ends the world's call with its outcome; a handler's exception that comes
/// out of it ends the call there.
template <class Call>
void ending_call(World& w, Call&& call) {
  try {
    call();
  } catch (const Crashed&) {
    w.end_call_settled(/*threw=*/true);
  } catch (const std::exception& e) {
    w.end_call_threw(e.what());
  }
}

template <class Store>
void Caller<Store>::execute(const Op& op) {
  World& w = *world_;
  const Item item = op.items.front();
  w.begin_call(item.key, item.payload);
  const std::string payload = w.payload(item.key, item.payload);
  ending_call(w, [&] {
    w.end_call(guard_.execute(w.key(item.key), payload,
                              [&](Context& ctx) { return w.handle(ctx, op.handler, item.key); }));
  });
}

template <class Store>
void Caller<Store>::two_phase(const Op& op) {
  World& w = *world_;
  const Item item = op.items.front();
  w.begin_call(item.key, item.payload);
  const std::string payload = w.payload(item.key, item.payload);
  auto attempt = guard_.template begin<std::string>(w.key(item.key), payload);
  if (!attempt.acquired()) {
    w.end_call(std::move(attempt).outcome());
    return;
  }
  std::string value;
  try {
    value = w.handle(attempt.context(), op.handler, item.key);
  } catch (const Crashed&) {
    attempt.fail("crashed");
    w.end_call_settled(true);
    return;
  } catch (const std::exception& e) {
    w.end_call_failed(attempt.fail(e.what()));
    return;
  }
  if (op.kind == OpKind::fail) {
    w.end_call_failed(attempt.fail("the caller failed the attempt"));
  } else if (op.kind == OpKind::drop) {
    { auto dropped = std::move(attempt); }
    w.end_call_settled(true);
  } else {
    w.end_call(attempt.commit(std::move(value)));
  }
}

template <class Store>
void Caller<Store>::batch(const Op& op) {
  World& w = *world_;
  std::vector<Key> keys;
  std::vector<std::string> payloads;
  std::vector<BatchItem> items;
  keys.reserve(op.items.size());
  payloads.reserve(op.items.size());
  for (const Item& i : op.items) {
    keys.push_back(w.key(i.key));
    payloads.push_back(w.payload(i.key, i.payload));
  }
  for (std::size_t i = 0; i < op.items.size(); ++i)
    items.push_back(BatchItem{keys[i], payloads[i]});
  w.begin_call(op.items.front().key, op.items.front().payload, op.items.size());
  w.stats().add(Stat::batches);
  std::vector<Outcome<std::string>> outs = guard_.execute_batch(
      items,
      [&](std::size_t i, Context& ctx) { return w.handle(ctx, op.handler, op.items[i].key, i); });
  for (std::size_t i = 0; i < outs.size(); ++i) {
    w.end_batch_item(i, op.items[i].key, op.items[i].payload, outs[i], i + 1 == outs.size());
  }
}

template <class Store>
void Caller<Store>::layered(const Op& op) {
  World& w = *world_;
  const Item item = op.items.front();
  w.begin_call(item.key, item.payload);
  w.call().layered = true;  // its events are per layer: not checked here
  w.stats().add(Stat::layered_calls);
  LayeredRequest request;
  request.request_id = "q" + std::to_string(item.key) + "." + std::to_string(op.request);
  request.business_key = std::string(w.key(item.key).id);
  request.principal = std::string(w.key(item.key).principal);
  request.payload = w.payload(item.key, item.payload);
  ending_call(w, [&] {
    LayeredOutcome<std::string> out = layered_.execute(
        request, [&](Context& ctx) { return w.handle(ctx, op.handler, item.key); });
    w.end_layered(out, out.layer() == 0);
  });
}

/// A process whose guard runs over `Stack` (its connection, and what it keeps in front of it).
template <class Stack>
class ProcessOf final : public Process {
 public:
  ProcessOf(World& world, int id, Network<typename Stack::Server>& network, const ProcessPlan& plan)
      : Process(world, id),
        stack_(make_stack(world, network, plan)),
        probe_(stack_.top(), world, Stack::kCache),
        caller_(world, probe_) {
    if constexpr (Stack::kCompleter) {
      if (world.scenario().keep_request) {
        completer_ = std::make_unique<Completer<typename Stack::Link>>(
            stack_.link, world.options(),
            [&world](Context& ctx, std::string_view request) {
              return world.handle_kept(ctx, request);
            },
            CompleterOptions{.concurrency = 1, .max_attempts = 2, .batch = 8});
      }
    }
  }
  ~ProcessOf() override {
    if constexpr (requires { stack_.group.groups(); }) {
      world().stats().add(Stat::groups, stack_.group.groups());
      world().stats().add(Stat::grouped_calls, stack_.group.grouped_calls());
    }
  }

 private:
  using Top = std::remove_reference_t<decltype(std::declval<Stack&>().top())>;
  // The stack, given the process's plan where it takes one (a group's writers in flight).
  static Stack make_stack(World& world, Network<typename Stack::Server>& network,
                          const ProcessPlan& plan) {
    if constexpr (std::is_constructible_v<Stack, World&, Network<typename Stack::Server>&,
                                          const ProcessPlan&>) {
      return Stack(world, network, plan);
    } else {
      return Stack(world, network);
    }
  }
  void run_guarded(const Op& op) override { caller_.run(op); }
  admin::Admin& admin() override {
    if (!admin_) {
      auto backend = std::make_unique<BackendAdmin>(world());
      if constexpr (Stack::kCache) {
        admin_ = admin::cached_admin(stack_.cache, std::move(backend));
      } else {
        admin_ = std::move(backend);
      }
    }
    return *admin_;
  }
  void run_completer() override {
    if constexpr (Stack::kCompleter) {
      if (completer_) {
        world().stats().add(Stat::completer_passes);
        const auto pass = completer_->run_once();
        if (pass) {
          world().stats().add(Stat::completer_redrives,
                              pass->completed + pass->failed + pass->gave_up);
        }
      }
    }
  }

  Stack stack_;
  std::unique_ptr<admin::Admin> admin_;
  Probe<Top> probe_;
  Caller<Probe<Top>> caller_;
  std::conditional_t<Stack::kCompleter, std::unique_ptr<Completer<typename Stack::Link>>, bool>
      completer_{};
};

/// The stacks over a server type B: the connection alone, a CachedStore in front of it, a
/// GroupCommitStore in front of it.
template <class B>
struct DirectStack {
  using Server = B;
  using Link = sim::Link<B>;
  static constexpr bool kCache = false;
  static constexpr bool kCompleter = CompletableStore<Link>;
  DirectStack(World&, Network<B>& network) : link(network) {}
  Link& top() { return link; }
  Link link;
};

template <class B>
struct CachedStack {
  using Server = B;
  using Link = sim::Link<B>;
  static constexpr bool kCache = true;
  static constexpr bool kCompleter = CompletableStore<Link>;
  CachedStack(World& world, Network<B>& network)
      : link(network),
        cache(CachedStoreOptions{.shards = 1,
                                 .max_entries = 64,
                                 .max_ttl = world.cache_max_ttl(),
                                 .clock = world.clock()},
              link) {}
  CachedStore<Link&>& top() { return cache; }
  Link link;
  CachedStore<Link&> cache;
};

template <class B>
struct GroupStack {
  using Server = B;
  using Link = sim::Link<B>;
  static constexpr bool kCache = false;
  static constexpr bool kCompleter = false;
  GroupStack(World&, Network<B>& network, const ProcessPlan& plan)
      : link(network),
        group(link, GroupCommitOptions{.max_delay = std::chrono::microseconds{500},
                                       .in_flight = plan.group_in_flight}) {}
  GroupCommitStore<Link, SimSync>& top() { return group; }
  Link link;
  GroupCommitStore<Link, SimSync> group;
};

}  // namespace idem::sim
