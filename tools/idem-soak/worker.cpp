#include "worker.hpp"

#include <SQLiteCpp/Exception.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <thread>

#include "backend.hpp"
#include "ledger.hpp"
#include "shared_state.hpp"

namespace idem::soak {
namespace {

using namespace std::chrono_literals;

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string hex(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// What a worker process needs while it runs one operation.
class Worker {
 public:
  Worker(const SoakOptions& o, SlotState& slot)
      : o_(o), slot_(slot), ledger_(o.ledger_path()), pid_(static_cast<int>(::getpid())) {
    std::random_device entropy;
    incarnation_ = hex((std::uint64_t{entropy()} << 32) ^ entropy());
    rng_.seed(mix(o.seed ^ mix(static_cast<std::uint64_t>(pid_))) ^ entropy());
  }

  template <class Store>
  void run(Store& store, std::int64_t deadline_ns) {
    const Options base{.scope = "soak", .lease = o_.lease, .ttl = std::chrono::hours{1}};
    Options waiting = base;
    waiting.in_progress = Wait{.timeout = 2 * o_.lease};
    IdempotencyGuard fail_fast{store, base};
    IdempotencyGuard wait{store, waiting};
    for (std::int64_t op = slot_.next_op.load(); op < slot_.end_op.load(); ++op) {
      if (now_ns() >= deadline_ns) break;
      const std::string key = key_of_operation(o_, op);
      OutcomeRow row =
          std::bernoulli_distribution(0.3)(rng_) ? call(wait, key) : call(fail_fast, key);
      set_phase(Phase::after_call);
      row.slot = *o_.worker_slot;
      row.op = op;
      row.pid = pid_;
      row.key = key;
      ledger_.record_outcome(row);
      slot_.next_op.store(op + 1);
      set_phase(Phase::idle);
      if (row.code == "store_unavailable" && row.kind != "executed") {
        // Back off like a client would while the server restarts, instead of spinning.
        std::this_thread::sleep_for(
            std::chrono::milliseconds(std::uniform_int_distribution<int>(10, 50)(rng_)));
      }
    }
  }

 private:
  void set_phase(Phase p) { slot_.phase.store(static_cast<int>(p)); }

  template <class Guard>
  OutcomeRow call(Guard& guard, const std::string& key) {
    const std::int64_t t_call = now_ns();
    const std::string call_id = incarnation_ + "-" + std::to_string(++calls_);
    bool inject = o_.inject_double_execution && !injected_;
    set_phase(Phase::claiming);
    OutcomeRow row;
    try {
      // The payload is the key itself: every duplicate is the same request.
      Outcome<std::string> out = guard.execute(Key{key}, key, [&](Context& ctx) {
        std::string result = run_handler(ctx, key, call_id, t_call);
        if (inject) {  // deliberately wrong: the checks must catch this second run
          injected_ = true;
          result = run_handler(ctx, key, call_id, t_call);
        }
        return result;
      });
      if (out.has_value()) {
        row.kind = out.replayed() ? "replayed" : "executed";
        if (out.commit_error()) row.code = name_of(out.commit_error());
        row.result = std::move(out).value();
      } else {
        row.kind = "error";
        row.code = name_of(out.error());
      }
    } catch (const SQLite::Exception&) {
      throw;  // the ledger failed: a harness error
    } catch (const Error& e) {
      row.kind = "handler_error";
      row.code = name_of(e.code());
    } catch (const std::exception& e) {
      row.kind = "unexpected";
      row.code = e.what();
    }
    return row;
  }

  static std::string name_of(std::error_code ec) {
    if (ec.category() == error_category())
      return std::string(to_string(static_cast<errc>(ec.value())));
    return std::string(ec.category().name()) + ":" + ec.message();
  }

  // One handler run: ledger row first, then the work (and in transactional mode the effect, in
  // the claim's transaction), then the ledger row's end; all committed before returning.
  std::string run_handler(Context& ctx, const std::string& key, const std::string& call_id,
                          std::int64_t t_call) {
    set_phase(Phase::in_handler);
    Execution e{.call = call_id,
                .key = key,
                .fence = static_cast<std::int64_t>(ctx.fence()),
                .pid = pid_,
                .slot = *o_.worker_slot,
                .t_call = t_call,
                .t_start = now_ns()};
    const std::int64_t id = ledger_.begin_execution(e);
    try {
      if (o_.mode == Mode::steps) {
        run_steps(ctx, key, call_id, e.fence);
      } else {
        std::this_thread::sleep_for(work_time());
        if (o_.mode == Mode::transactional) Effects::insert(o_, ctx, {key, call_id, e.fence});
      }
    } catch (...) {
      ledger_.end_execution(id, now_ns(), "", true);
      throw;
    }
    std::string result = key + "|" + std::to_string(e.fence) + "|" + call_id;
    ledger_.end_execution(id, now_ns(), result, false);
    set_phase(Phase::before_commit);
    // A short pause with the effect done and the record not committed: the chaos thread aims
    // some of its kills here.
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(500, 3000)(rng_)));
    return result;
  }

  // Steps mode: an atomic phase (the effect row commits with its step record) and an outside
  // step whose runs the ledger sees; the checks find a recorded step run again, or a phase
  // that committed twice.
  void run_steps(Context& ctx, const std::string& key, const std::string& call_id,
                 std::int64_t fence) {
    ctx.atomic_step("effect", [&](Context& c) { Effects::insert(o_, c, {key, call_id, fence}); });
    ctx.step("outside", [&] {
      ledger_.record_step(key, call_id, "ran", now_ns());
      std::this_thread::sleep_for(work_time());
    });
    ledger_.record_step(key, call_id, "passed", now_ns());
  }

  std::chrono::microseconds work_time() {
    // Lease mode: a few handlers overrun the lease, so a duplicate takes the key over from a
    // live holder and the holder's commit must be refused.
    if (o_.mode != Mode::transactional && std::bernoulli_distribution(0.02)(rng_)) {
      return o_.lease + 150ms;
    }
    const int max_us = o_.mode != Mode::transactional ? 15'000 : 5'000;
    return std::chrono::microseconds(std::uniform_int_distribution<int>(0, max_us)(rng_));
  }

  const SoakOptions& o_;
  SlotState& slot_;
  Ledger ledger_;
  int pid_;
  std::string incarnation_;
  std::mt19937_64 rng_;
  std::uint64_t calls_ = 0;
  bool injected_ = false;
};

}  // namespace

std::string key_name(int i) { return "k" + std::to_string(i); }

std::string key_of_operation(const SoakOptions& o, std::int64_t op) {
  const std::uint64_t r = mix(mix(o.seed) ^ static_cast<std::uint64_t>(op));
  return key_name(static_cast<int>(r % static_cast<std::uint64_t>(o.keys)));
}

int run_worker(const SoakOptions& o) {
  try {
    SharedState shared(o.shared_path(), false);
    SlotState& slot = shared.table().slots[*o.worker_slot];
    Worker worker(o, slot);
    const std::int64_t deadline = shared.table().deadline_ns.load();
    with_store(o, [&](auto& store) {
      worker.run(store, deadline);
      return 0;
    });
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idem-soak worker %d: %s\n", static_cast<int>(::getpid()), e.what());
    return 3;
  }
}

}  // namespace idem::soak
