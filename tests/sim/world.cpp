#include "sim/world.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "idem/engine/effective_key.hpp"
#include "sim/backend.hpp"
#include "sim/process.hpp"
#include "sim/server.hpp"
#include "sim/tx_server.hpp"

namespace idem::sim {

using std::chrono::milliseconds;

namespace {

milliseconds ms(int n) { return milliseconds(n); }

/// A step's body threw (the plan's failing step).
struct StepFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

ContractOptions contract_options(const Scenario& s, const RunOptions& run) {
  ContractOptions o;
  o.mode = s.mode;
  o.tolerance = run.tolerance;
  o.expiry_removes = run.expiry_removes;
  return o;
}

std::string describe(const Outcome<std::string>& out) {
  if (out.has_value()) {
    std::string text = (out.replayed() ? "replayed " : "fresh ") + out.value();
    if (!out.replayed()) {
      text += out.recorded() ? " (recorded)" : " (" + out.commit_failure().describe() + ")";
    }
    return text;
  }
  return std::string(out.replayed() ? "replayed error " : "error ") +
         std::string(to_string(static_cast<errc>(out.error().value()))) + ": " + out.message();
}

}  // namespace

// --- Setting up ----------------------------------------------------------------------------

World::World(const Scenario& scenario, const RunOptions& options)
    : scenario_(scenario),
      run_options_(options),
      scheduler_(scenario.seed, options.real_time),
      clock_(std::make_shared<SimClock>(scheduler_)),
      trace_(options.trace),
      contract_(contract_options(scenario, options), violations_),
      database_(contract_, violations_),
      ledger_(contract_, violations_) {
  trace_.start(scheduler_.now());
  options_.scope = options.scope;
  options_.lease = ms(scenario.lease_ms);
  options_.ttl = ms(scenario.ttl_ms);
  options_.remember_failures = scenario.remember_failures;
  if (scenario.wait_ms > 0) {
    options_.in_progress = Wait{ms(scenario.wait_ms), ms(2), ms(20)};
  } else {
    options_.in_progress = FailFast{};
  }
  options_.commit_retry = CommitRetry{scenario.commit_tries, ms(10), ms(40)};
  options_.clock = clock_;
  options_.keep_request = scenario.keep_request;
  options_.max_result_size = 48;
  observer_ = std::make_shared<Observer>([this](const EventInfo& e) { observe(e); });
  contract_.on_landed = [this](std::string_view key, Fence fence, ClaimStatus status, Time now) {
    if (status == ClaimStatus::completed) ledger_.committed(key, fence, now);
  };
  if (options.backend) {
    backend_ = options.backend(*this);
  } else if (scenario.mode == StoreMode::lease) {
    backend_ = std::make_unique<BackendOf<Server>>(scheduler_, scenario.faults, stats_, scheduler_,
                                                   clock_, contract_, database_, trace_);
  } else {
    backend_ = std::make_unique<BackendOf<TxServer>>(
        scheduler_, scenario.faults, stats_, scheduler_, contract_, database_, stats_, trace_);
  }
  events_left_ = scenario.max_events;
  next_op_.resize(scenario.processes.size());
  incarnation_.assign(scenario.processes.size(), -1);
  for (std::size_t p = 0; p < scenario.processes.size(); ++p) {
    next_op_[p].assign(scenario.processes[p].actors.size(), 0);
    restart_process(static_cast<int>(p), Duration::zero());
  }
}

World::~World() = default;

Options World::guard_options() const {
  Options o = options_;
  o.observer = observer_;
  return o;
}

Key World::key(int k) const { return Key{"k" + std::to_string(k), "t"}; }

std::string World::payload(int key, int p) const {
  return "p" + std::to_string(p) + "@" + std::to_string(key);
}

std::string World::effective(int k) const {
  const Key kk = key(k);
  return std::string(detail::EffectiveKey(options_.scope, kk.principal, kk.id).view());
}

std::unique_ptr<Process> World::make_process(int plan) {
  const int id = static_cast<int>(processes_.size());
  return backend_->make_process(*this, id, scenario_.processes[static_cast<std::size_t>(plan)]);
}

void World::restart_process(int plan, Duration after) {
  auto start = [this, plan] {
    processes_.push_back(make_process(plan));
    Process& process = *processes_.back();
    incarnation_[static_cast<std::size_t>(plan)] = process.id();
    const ProcessPlan& p = scenario_.processes[static_cast<std::size_t>(plan)];
    for (std::size_t a = 0; a < p.actors.size(); ++a) {
      if (next_op_[plan][a] >= p.actors[a].ops.size()) continue;
      scheduler_.spawn(
          process.id(),
          "p" + std::to_string(plan) + "." + std::to_string(a) + "#" + std::to_string(process.id()),
          [this, &process, plan, a, &p] {
            std::size_t& next = next_op_[plan][a];
            const auto& ops = p.actors[a].ops;
            while (next < ops.size()) {
              const Op& op = ops[next];
              if (op.pause_ms > 0) scheduler_.sleep_for(ms(op.pause_ms));
              if (scheduler_.current()->dead) return;
              process.run(op);
              if (scheduler_.current()->dead) return;  // a restart redoes it
              ++next;
            }
          });
    }
  };
  if (after <= Duration::zero()) {
    start();
    return;
  }
  scheduler_.spawn(-2, "restart", [this, start, after] {
    scheduler_.sleep_for(after);
    trace_.add(scheduler_, "a process restarts");
    start();
  });
}

// --- The world's events --------------------------------------------------------------------

bool World::between() {
  if (violations_.any()) return false;
  if (events_left_ <= 0) return true;
  const Scenario& s = scenario_;
  Rng& rng = scheduler_.rng();
  if (s.crash_rate > 0 && rng.chance(static_cast<std::uint64_t>(s.crash_rate))) {
    std::vector<int> live;
    for (std::size_t p = 0; p < incarnation_.size(); ++p) {
      if (incarnation_[p] >= 0) live.push_back(static_cast<int>(p));
    }
    if (!live.empty()) {
      crash(live[rng.below(live.size())]);
      --events_left_;
    }
  } else if (s.restart_rate > 0 && rng.chance(static_cast<std::uint64_t>(s.restart_rate))) {
    --events_left_;
    if (s.volatile_store && backend_->wipe()) {
      // The memory store lives in its process: the process restarts, every record gone.
      stats_.add(Stat::wipes);
      trace_.add(scheduler_, "the store's process restarts: every record is gone");
      for (std::size_t p = 0; p < incarnation_.size(); ++p) {
        if (incarnation_[p] >= 0) crash(static_cast<int>(p));
      }
      scheduler_.crash(kNetwork);  // copies of the old process's messages go with it
      ledger_.reset();
    } else {
      stats_.add(Stat::restarts);
      const Duration down = ms(static_cast<int>(rng.between(1, s.lease_ms)));
      trace_.add(scheduler_,
                 "the store restarts (records kept), down for " +
                     std::to_string(std::chrono::duration_cast<milliseconds>(down).count()) +
                     " ms");
      backend_->restart(scheduler_.now() + down);
    }
  } else if (s.jump_rate > 0 && rng.chance(static_cast<std::uint64_t>(s.jump_rate))) {
    --events_left_;
    jump_clock();
  } else if (s.drop_rate > 0 && rng.chance(static_cast<std::uint64_t>(s.drop_rate))) {
    if (backend_->drop_session(rng.next())) {
      stats_.add(Stat::session_drops);
      --events_left_;
    }
  }
  return true;
}

void World::crash(int plan) {
  const int id = incarnation_[static_cast<std::size_t>(plan)];
  if (id < 0) return;
  incarnation_[static_cast<std::size_t>(plan)] = -1;
  stats_.add(Stat::crashes);
  trace_.add(scheduler_, "process " + std::to_string(id) + " crashes");
  scheduler_.crash(id);
  backend_->crashed(id);
  restart_process(plan, ms(static_cast<int>(scheduler_.rng().between(1, scenario_.lease_ms))));
}

void World::jump_clock() {
  Rng& rng = scheduler_.rng();
  const Time now = scheduler_.now();
  std::vector<Time> edges;
  for (const auto& [key, r] : contract_.keys()) {
    for (Time t : {r.lease_until, r.keep_until, r.expires_at}) {
      if (t > now) edges.push_back(t);
    }
  }
  Time to = now + ms(static_cast<int>(rng.between(1, 2 * scenario_.lease_ms)));
  if (!edges.empty() && rng.chance(600)) {
    // Onto a boundary the record's rules turn on, or just either side of it.
    to = edges[rng.below(edges.size())] + Duration(rng.pick<long long>({0, 0, -1, 1, 1'000'000}));
    if (to <= now) to = now + Duration(1);
  }
  stats_.add(Stat::clock_jumps);
  trace_.add(scheduler_,
             "the clock jumps " +
                 std::to_string(std::chrono::duration<double, std::milli>(to - now).count()) +
                 " ms");
  jumped_ += to - now;
  scheduler_.jump(to - now);
}

// --- Running -----------------------------------------------------------------------------------

RunReport World::run() {
  const RunEnd end = scheduler_.run([this] { return between(); }, run_options_.max_steps);
  if (!violations_.any()) {
    if (end == RunEnd::deadlock || end == RunEnd::too_long) {
      std::string who;
      for (const Task* t : scheduler_.stuck()) who += " " + t->name;
      violations_.add(Check::calls_return, end == RunEnd::deadlock
                                               ? "deadlock: no task can run; waiting:" + who
                                               : "the run did not end within " +
                                                     std::to_string(run_options_.max_steps) +
                                                     " steps; still running:" + who);
    }
  }
  if (!violations_.any()) {
    database_.check_final(scenario_.mode == StoreMode::transactional &&
                          run_options_.sim_transactions);
  }
  if (!violations_.any() && run_options_.check_effects) {
    run_options_.check_effects(contract_, violations_);
  }
  processes_.clear();  // (their figures go into the stats)
  RunReport report;
  report.failed = violations_.any();
  if (report.failed) report.violation = violations_.first();
  report.digest = scheduler_.digest();
  report.steps = scheduler_.steps();
  stats_.seeds = 1;
  stats_.steps = report.steps;
  stats_.longest_trace = report.steps;
  stats_.longest_seed = scenario_.seed;
  report.stats = stats_;
  report.trace = std::move(trace_.lines());
  return report;
}

RunReport run(const Scenario& scenario, const RunOptions& options) {
  World world(scenario, options);
  return world.run();
}

// --- Operations ----------------------------------------------------------------------------

void Process::run(const Op& op) {
  switch (op.kind) {
    case OpKind::release:
    case OpKind::forget:
    case OpKind::purge:
      run_admin(op);
      return;
    case OpKind::completer:
      run_completer();
      return;
    default:
      run_guarded(op);
  }
}

void Process::run_admin(const Op& op) {
  World& w = world();
  Scheduler& s = w.scheduler();
  s.yield();
  if (s.current()->dead || w.backend().down()) return;
  const Key key = w.key(op.items.front().key);
  switch (op.kind) {
    case OpKind::release:
      w.stats().add(Stat::admin_releases);
      w.trace().add(s, "admin releases " + std::string(key.id));
      (void)admin().release(w.scope(), key, 0);
      break;
    case OpKind::forget: {
      w.stats().add(Stat::admin_forgets);
      w.trace().add(s, "admin forgets " + std::string(key.id));
      const KeyRecord* r = w.contract().find(w.effective(op.items.front().key));
      const std::uint64_t epoch = r != nullptr ? r->epoch : 0;
      if (admin().forget(w.scope(), key)) w.forgot(op.items.front().key, id(), epoch);
      break;
    }
    default:
      w.stats().add(Stat::admin_purges);
      w.trace().add(s, "admin purges");
      (void)admin().purge_expired(1000);
      break;
  }
}

Result<std::optional<admin::RecordInfo>> BackendAdmin::inspect(std::string_view, const Key&) {
  return make_failure(errc::store_unavailable, "not simulated");
}
Result<admin::Page> BackendAdmin::list(std::string_view, const admin::ListRequest&) {
  return make_failure(errc::store_unavailable, "not simulated");
}
Result<admin::Change> BackendAdmin::release(std::string_view scope, const Key& key, Fence) {
  return world_->backend().release(scope, key);
}
Result<admin::Change> BackendAdmin::forget(std::string_view scope, const Key& key) {
  return world_->backend().forget(scope, key);
}
Result<std::size_t> BackendAdmin::purge_expired(std::size_t) { return world_->backend().purge(); }
Result<admin::SchemaReport> BackendAdmin::check_schema() {
  return make_failure(errc::store_unavailable, "not simulated");
}
Result<admin::SchemaReport> BackendAdmin::migrate_schema() {
  return make_failure(errc::store_unavailable, "not simulated");
}
Result<admin::Stats> BackendAdmin::stats(std::string_view, bool) {
  return make_failure(errc::store_unavailable, "not simulated");
}

// --- Calls and their checks ----------------------------------------------------------------

CallState& World::call() {
  const auto id = static_cast<std::size_t>(scheduler_.current()->id);
  if (calls_.size() <= id) calls_.resize(id + 1);
  return calls_[id];
}

std::uint64_t World::calls_sent() const {
  return const_cast<Scheduler&>(scheduler_).current()->store_calls;
}

void World::begin_call(int key, int payload, std::size_t items) {
  CallState& c = call();
  c = CallState{};
  c.active = true;
  c.items = items;
  c.key = key;
  c.payload = payload;
  c.effective = effective(key);
  c.start = scheduler_.now();
  c.held_start = scheduler_.current()->held_up;
  c.jumped_start = jumped_;
  stats_.add(Stat::guard_calls);
}

void World::observe(const EventInfo& e) {
  Task* t = scheduler_.current();
  if (t == nullptr) return;
  CallState& c = call();
  if (!c.active) return;
  const auto i = static_cast<std::size_t>(e.event);
  if (i < c.events.size()) ++c.events[i];
  if (e.event == Event::aborted) c.aborted = e.error;
}

void World::claimed(const ClaimRequest& request, const Result<Claim>& answer, bool from_cache) {
  Task* t = scheduler_.current();
  if (t == nullptr || !answer) return;
  CallState& c = call();
  const Claim& a = answer.value();
  if (trace_.on()) {
    trace_.add(scheduler_, std::string(from_cache ? "cache answers " : "the guard hears ") +
                               printable(request.key) + ": " + claim_text(a));
  }
  if (a.status == ClaimStatus::acquired) {
    ++c.acquired;
    if (a.took_over) {
      ++c.takeovers;
      stats_.add(Stat::takeovers);
    }
  }
  c.claims.push_back(CallState::Answer{std::string(request.key), request.fingerprint, a});
  if (from_cache && !t->dead) check_cached_answer(request, a);
}

void World::check_cached_answer(const ClaimRequest& request, const Claim& a) {
  stats_.add(Stat::cache_hits);
  const KeyRecord* r = contract_.find(request.key);
  const Time now = scheduler_.now();
  const std::string key = printable(request.key);
  using State = KeyRecord::State;
  if (a.status == ClaimStatus::completed || a.status == ClaimStatus::failed) {
    const State want = a.status == ClaimStatus::failed ? State::failed : State::completed;
    const bool current =
        r != nullptr && r->state == want && now < r->expires_at + run_options_.tolerance;
    if (current && r->result == a.result && r->fingerprint == request.fingerprint) return;
    // A cache in another process than the admin's that forgot the record may replay it up to
    // its max_ttl (the admin cannot reach it); its own process's cache must not.
    const int process = scheduler_.current()->process;
    for (const KeyRecord::Landed& l : r != nullptr ? r->landed : std::vector<KeyRecord::Landed>{}) {
      if (l.result != a.result) continue;
      for (const Forget& f : forgets_) {
        if (f.effective == request.key && f.epoch == l.epoch && f.process != process &&
            now < f.at + cache_max_ttl()) {
          return;
        }
      }
    }
    if (!current) {
      violations_.add(Check::no_forgotten_replay,
                      "key " + key + ": the cache replayed a record the store no longer has (" +
                          std::string(r == nullptr ? "absent" : to_string(r->state)) + ")");
    } else {
      violations_.add(
          Check::replay_is_committed,
          "key " + key + ": the cache replayed bytes that are not the committed result");
    }
    return;
  }
  if (a.status == ClaimStatus::mismatch) {
    const bool live =
        r != nullptr && r->fingerprint != request.fingerprint &&
        (r->state == State::held ||
         ((r->state == State::completed || r->state == State::failed) && now < r->expires_at));
    if (!live) {
      violations_.add(Check::no_forgotten_replay,
                      "key " + key + ": the cache answered mismatch for a record that is gone");
    }
    return;
  }
  violations_.add(Check::store_answers,
                  "key " + key + ": the cache answered a claim itself: " + claim_text(a));
}

void World::forgot(int key, int process, std::uint64_t epoch) {
  forgets_.push_back(Forget{effective(key), scheduler_.now(), process, epoch});
}

void World::check_alive() {
  if (scheduler_.current()->dead) throw Crashed{};
}

void World::step_ran(const std::string& effective, Fence fence, int index) {
  stats_.add(Stat::steps_run);
  const KeyRecord* r = contract_.find(effective);
  if (r != nullptr && r->state == KeyRecord::State::held && r->fence == fence &&
      static_cast<std::size_t>(index) < r->steps.size()) {
    violations_.add(Check::steps_once, "key " + printable(effective) + ": step " +
                                           std::to_string(index) +
                                           " runs again; the run chain saved it already");
  }
}

std::string World::handle(Context& ctx, const HandlerPlan& plan, int key, std::size_t item) {
  check_alive();
  Task& task = *scheduler_.current();
  CallState& c = call();
  const std::uint64_t run = ++runs_;
  const Fence fence = ctx.fence();
  const std::string eff = effective(key);
  stats_.add(Stat::handler_runs);
  std::string value = "r" + std::to_string(run);
  if (plan.big) value.append(64, 'x');
  if (c.active) {
    const KeyRecord* r = contract_.find(eff);
    c.runs.push_back(CallState::Run{item, eff, run, fence, value, r != nullptr ? r->epoch : 0});
  }
  trace_.add(scheduler_, "run " + std::to_string(run) + " of " + printable(eff) + " under fence " +
                             std::to_string(fence));
  const Time t0 = scheduler_.now();
  const Duration h0 = task.held_up;
  struct Timing {
    World* w;
    CallState& c;
    Task& task;
    Time t0;
    Duration h0;
    ~Timing() {
      if (!c.active) return;
      c.handler_time += w->scheduler().now() - t0;
      c.held_in_handler += task.held_up - h0;
    }
  } timing{this, c, task, t0, h0};

  for (int i = 0; i < plan.steps; ++i) {
    const bool fail = plan.fail_step == i;
    const std::string name = "s" + std::to_string(i);
    const std::string result = "v" + std::to_string(run) + "." + std::to_string(i);
    try {
      if (run_options_.atomic_steps && atomic_step_at(key, i)) {
        (void)ctx.atomic_step(name, [&](Context& inner) -> std::string {
          check_alive();
          step_ran(eff, fence, i);
          write(inner.native_transaction(), Write{eff, run, fence, i, fail});
          if (fail)
            throw StepFailure("step " + name + " of run " + std::to_string(run) + " failed");
          return result;
        });
      } else {
        (void)ctx.step(name, [&]() -> std::string {
          check_alive();
          step_ran(eff, fence, i);
          if (fail)
            throw StepFailure("step " + name + " of run " + std::to_string(run) + " failed");
          return result;
        });
      }
    } catch (const StepFailure&) {
      if (!plan.catch_step) throw;
      // The handler goes on without its later steps: a step saved past a missing one is
      // refused by some stores and kept out of sight by others (docs/simulation.md).
      break;
    }
  }
  stats_.add(Stat::steps_replayed, ctx.steps_replayed());
  if (plan.work_ms > 0) {
    scheduler_.sleep_for(ms(plan.work_ms));
    check_alive();
  }
  if (plan.extend) {
    const Status extended = ctx.extend_lease();
    check_alive();
    if (!extended)
      throw std::runtime_error("the lease could not be renewed: " + extended.failure().describe());
  }
  if (plan.ledger) {
    check_alive();
    if (!ledger_.write(eff, fence, run, scheduler_.now())) {
      throw std::runtime_error("downstream refused fence " + std::to_string(fence));
    }
  }
  if (scenario_.mode == StoreMode::transactional) {
    check_alive();
    write(ctx.native_transaction(), Write{eff, run, fence, -1, plan.throws});
  }
  if (plan.throws) {
    stats_.add(Stat::handler_throws);
    throw std::runtime_error("run " + std::to_string(run) + " declined");
  }
  return value;
}

void World::write(NativeTransaction transaction, const Write& w) {
  if (run_options_.sim_transactions) {
    sim_transaction(transaction).writes.push_back(w);
  } else if (run_options_.write_effect) {
    run_options_.write_effect(transaction, w);
  }
}

std::string World::handle_kept(Context& ctx, std::string_view request) {
  const std::size_t at = request.find('@');
  const int key = at == std::string_view::npos ? 0 : std::stoi(std::string(request.substr(at + 1)));
  HandlerPlan plan;
  plan.steps = 2;
  plan.ledger = true;
  return handle(ctx, plan, key);
}

void World::check_bound(const CallState& c, std::size_t items) {
  const Task& task = *scheduler_.current();
  const Duration elapsed = scheduler_.now() - c.start;
  const Duration held = task.held_up - c.held_start - c.held_in_handler;
  Duration commit_pauses{};
  Duration pause = ms(10);
  for (int i = 1; i < scenario_.commit_tries; ++i) {
    commit_pauses += pause;
    pause = std::min<Duration>(pause * 2, ms(40));
  }
  const auto n = static_cast<long>(items);
  const Duration allowed = c.handler_time + held + (jumped_ - c.jumped_start) +
                           n * (ms(scenario_.wait_ms) + commit_pauses) + run_options_.tolerance;
  if (elapsed > allowed) {
    violations_.add(Check::calls_return,
                    "key " + printable(c.effective) + ": a call took " +
                        std::to_string(std::chrono::duration<double, std::milli>(elapsed).count()) +
                        " ms; its bound was " +
                        std::to_string(std::chrono::duration<double, std::milli>(allowed).count()) +
                        " ms");
  }
}

void World::check_events(const CallState& c, const Outcome<std::string>* out, bool threw) {
  using idem::Event;
  auto heard = [&](Event e) { return c.events[static_cast<std::size_t>(e)]; };
  const bool fresh = out != nullptr && out->has_value() && !out->replayed();
  const bool replayed = out != nullptr && out->replayed();
  std::string wrong;
  if (heard(Event::executed) != (fresh ? 1 : 0)) wrong = "executed";
  if (heard(Event::replayed) != (replayed ? 1 : 0)) wrong = "replayed";
  if (heard(Event::took_over) != c.takeovers) wrong = "took_over";
  if (heard(Event::result_unrecorded) != (fresh && !out->recorded() ? 1 : 0)) {
    wrong = "result_unrecorded";
  }
  if (threw && heard(Event::aborted) != 1) wrong = "aborted";
  if (!wrong.empty()) {
    violations_.add(Check::observer_matches,
                    "key " + printable(c.effective) + ": the observer heard " +
                        std::to_string(heard(Event::executed)) + " executed, " +
                        std::to_string(heard(Event::replayed)) + " replayed, " +
                        std::to_string(heard(Event::took_over)) +
                        " took_over (the call took over " + std::to_string(c.takeovers) +
                        " times), " + std::to_string(heard(Event::result_unrecorded)) +
                        " result_unrecorded, " + std::to_string(heard(Event::aborted)) +
                        " aborted; wrong: " + wrong +
                        (out != nullptr ? "; outcome " + describe(*out) : std::string()));
  }
}

void World::check_outcome(CallState& c, std::size_t item, const std::string& eff,
                          const Fingerprint& fingerprint, const Outcome<std::string>& out,
                          bool batch) {
  const KeyRecord* r = contract_.find(eff);
  const std::string key = printable(eff);
  // The claim answers of this key and payload (a batch may name them more than once).
  auto answered = [&](ClaimStatus status, const std::string* bytes) {
    for (const CallState::Answer& a : c.claims) {
      if (a.effective == eff && a.fingerprint == fingerprint && a.claim.status == status &&
          (bytes == nullptr || a.claim.result == *bytes)) {
        return true;
      }
    }
    return false;
  };
  if (out.has_value()) {
    const std::string& v = out.value();
    if (out.replayed()) {
      stats_.add(Stat::replays);
      if (!answered(ClaimStatus::completed, &v)) {
        violations_.add(Check::replay_is_committed, "key " + key + ": the guard replayed " + v +
                                                        ", which no claim of the call answered");
      }
      return;
    }
    const CallState::Run* run = nullptr;
    for (const CallState::Run& candidate : c.runs) {
      if (candidate.item == item && candidate.effective == eff && candidate.value == v) {
        run = &candidate;
      }
    }
    if (run == nullptr) {
      violations_.add(Check::replay_is_committed,
                      "key " + key + ": a fresh value no run of this call produced: " + v);
      return;
    }
    bool landed = false;
    if (r != nullptr) {
      for (const KeyRecord::Landed& l : r->landed) {
        if (l.fence == run->fence && l.status == ClaimStatus::completed && l.result == v) {
          landed = true;
        }
      }
    }
    const std::error_code e = out.commit_error();
    if (out.recorded() && !landed) {
      violations_.add(Check::taken_over_never_commits,
                      "key " + key + ": run " + std::to_string(run->id) + " (fence " +
                          std::to_string(run->fence) +
                          ") was told recorded; its commit never landed");
    } else if (e == errc::lease_lost &&
               (r == nullptr || (r->max_fence <= run->fence && r->admin_fenced < run->fence))) {
      violations_.add(Check::lost_reply_is_recorded,
                      "key " + key + ": run " + std::to_string(run->id) + " (fence " +
                          std::to_string(run->fence) + ") heard lease_lost, but nobody took over");
    } else if (e == errc::store_unavailable && landed) {
      violations_.add(Check::lost_reply_is_recorded,
                      "key " + key + ": run " + std::to_string(run->id) +
                          "'s commit landed, and the caller heard store_unavailable (no try "
                          "landed)");
    }
    return;
  }
  const std::error_code e = out.error();
  if (out.replayed()) {
    stats_.add(Stat::replays);
    if (!answered(ClaimStatus::failed, nullptr)) {
      violations_.add(Check::replay_is_committed,
                      "key " + key + ": a replayed failure whose claim did not answer failed");
    }
    return;
  }
  stats_.add(Stat::refusals);
  if (batch && (e == errc::handler_failed || e == errc::handler_aborted)) {
    check_settled(c, item, eff, e);
  }
  if (e == errc::payload_mismatch && !answered(ClaimStatus::mismatch, nullptr)) {
    violations_.add(Check::store_answers, "key " + key + ": payload_mismatch without a mismatch");
  }
}

void World::check_settled(const CallState& c, std::size_t item, const std::string& eff,
                          std::error_code said) {
  // Whether a retry can help (§7, §11): handler_failed only if the key remembers the failure,
  // handler_aborted only if it does not (unless the settlement's answer never came back).
  const KeyRecord* r = contract_.find(eff);
  const std::string key = printable(eff);
  // Remembered: a failure under one of this call's fences landed (whatever came after it).
  bool remembered = false;
  for (const CallState::Run& run : c.runs) {
    if (r == nullptr || run.effective != eff || run.item != item) continue;
    for (const KeyRecord::Landed& l : r->landed) {
      if (l.fence == run.fence && l.epoch == run.epoch && l.status == ClaimStatus::failed) {
        remembered = true;
      }
    }
  }
  const bool doubt = c.events[static_cast<std::size_t>(Event::store_error)] > 0 ||
                     c.events[static_cast<std::size_t>(Event::lease_lost)] > 0;
  if (said == errc::handler_failed && !remembered && !doubt) {
    violations_.add(Check::retry_advice,
                    "key " + key +
                        ": the failed call said handler_failed (a retry cannot help), "
                        "and no failure of its run landed: a retry runs the handler "
                        "again");
  } else if (said == errc::handler_aborted && remembered && !doubt) {
    violations_.add(Check::retry_advice,
                    "key " + key +
                        ": the failed call said handler_aborted (a retry runs it "
                        "again) while its key remembers the failure");
  } else if (said != errc::handler_failed && said != errc::handler_aborted) {
    violations_.add(Check::retry_advice,
                    "key " + key + ": a failed call settled with " + said.message());
  }
}

void World::end_call_failed(std::error_code said) {
  CallState& c = call();
  c.active = false;
  if (scheduler_.current()->dead) return;
  trace_.add(scheduler_, "call on " + printable(c.effective) + " ends: failed, " + said.message());
  check_bound(c, 1);
  check_events(c, nullptr, true);
  if (c.aborted != said) {
    violations_.add(Check::observer_matches, "key " + printable(c.effective) + ": fail() said " +
                                                 said.message() + " and the aborted event " +
                                                 c.aborted.message());
    return;
  }
  check_settled(c, 0, c.effective, said);
}

void World::end_call(const Outcome<std::string>& out) {
  CallState& c = call();
  c.active = false;
  if (scheduler_.current()->dead) return;
  trace_.add(scheduler_, "call on " + printable(c.effective) + " ends: " + describe(out));
  check_bound(c, 1);
  check_outcome(c, 0, c.effective, options_.hash(payload(c.key, c.payload)), out, false);
  check_events(c, &out, false);
}

void World::end_layered(const Outcome<std::string>& out, bool cache_answered) {
  CallState& c = call();
  c.active = false;
  if (scheduler_.current()->dead) return;
  trace_.add(scheduler_, "layered call on " + printable(c.effective) + " ends: " + describe(out) +
                             (cache_answered ? " (from the request-ID layer)" : ""));
  check_bound(c, 2);
  if (!cache_answered) {
    check_outcome(c, 0, c.effective, options_.hash(payload(c.key, c.payload)), out, false);
    return;
  }
  // The request-ID layer holds only what the record layer committed first (§13).
  if (out.has_value()) {
    const KeyRecord* r = contract_.find(c.effective);
    bool committed = false;
    for (const KeyRecord::Landed& l : r != nullptr ? r->landed : std::vector<KeyRecord::Landed>{}) {
      if (l.status == ClaimStatus::completed && l.result == out.value()) committed = true;
    }
    if (!committed) {
      violations_.add(
          Check::replay_is_committed,
          "key " + printable(c.effective) +
              ": the request-ID layer replayed a result the record never held: " + out.value());
    }
  }
}

void World::end_call_threw(const std::string& what) {
  CallState& c = call();
  c.active = false;
  if (scheduler_.current()->dead) return;
  trace_.add(scheduler_, "call on " + printable(c.effective) + " ends: threw " + what);
  check_bound(c, c.layered ? 2 : 1);
  if (c.layered) return;
  check_events(c, nullptr, true);
  if (!violations_.any() && c.runs.size() > 0) check_settled(c, 0, c.effective, c.aborted);
}

void World::end_call_settled(bool threw) {
  CallState& c = call();
  c.active = false;
  if (scheduler_.current()->dead) return;
  trace_.add(scheduler_, "call on " + printable(c.effective) + " ends: settled as a failure");
  check_bound(c, c.layered ? 2 : 1);
  if (c.layered) return;
  check_events(c, nullptr, threw);
  if (!violations_.any() && threw && c.runs.size() > 0) check_settled(c, 0, c.effective, c.aborted);
}

void World::end_batch_item(std::size_t item, int key, int payload, const Outcome<std::string>& out,
                           bool last) {
  CallState& c = call();
  if (last) c.active = false;
  if (scheduler_.current()->dead) return;
  const std::string eff = effective(key);
  trace_.add(scheduler_, "batch item " + printable(eff) + ": " + describe(out));
  check_outcome(c, item, eff, options_.hash(this->payload(key, payload)), out, true);
  if (last) check_bound(c, c.items);
}

}  // namespace idem::sim
