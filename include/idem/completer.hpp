#pragma once
// Completer: finishes runs whose holder died or failed when the client never retries, through a
// registered handler that resumes at the run's first unfinished step (docs/steps.md).

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "idem/context.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/engine/engine.hpp"
#include "idem/engine/failure_record.hpp"
#include "idem/guard.hpp"
#include "idem/options.hpp"
#include "idem/steps.hpp"

namespace idem {

struct CompleterOptions {
  std::size_t concurrency = 4;  ///< records re-driven at once (threads of one pass)
  /// Runs of one key before the completer records its failure (handler_failed, until ttl).
  int max_attempts = 5;
  /// Pause before a key whose run failed is tried again; doubles each failure up to max_backoff.
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{std::chrono::seconds{30}};
  std::size_t batch = 256;  ///< records looked at per pass
};

/// What one pass did.
struct CompleterPass {
  std::size_t found = 0;      // abandoned records seen
  std::size_t completed = 0;  // re-driven to a committed result
  std::size_t failed = 0;     // re-driven, and the handler failed again (backing off)
  std::size_t gave_up = 0;    // past max_attempts: the failure was recorded
  std::size_t waiting = 0;    // backing off, or held by someone else meanwhile
};

/// Re-drives the abandoned runs of one guard's scope. `handler(Context&, std::string_view
/// request)` must be the guard's handler for the kept payload (same steps, same result type); it
/// is called from up to `concurrency` threads at once. Thread-safe: run_once() from any thread,
/// or start() a background loop. The store must outlive it.
template <class S>
class Completer : detail::GuardBase {
  static_assert(CompletableStore<S>,
                "idem::Completer<S>: S must keep requests and find abandoned records "
                "(idem::CompletableStore)");

 public:
  /// `options`: the guard's (its scope picks the records; lease, ttl, hash and observer apply
  /// to the completer's runs too). Throws std::invalid_argument for options out of range.
  template <class Fn>
  Completer(S& store, Options options, Fn handler, CompleterOptions completer = {})
      : GuardBase(std::move(options), OptionDefaults{}, {}),
        store_(store),
        completer_(completer),
        prefix_(detail::EffectiveKey(options_.scope, {}, {}).view()) {
    if (completer_.concurrency == 0 || completer_.max_attempts < 1 ||
        completer_.initial_backoff.count() < 0 ||
        completer_.max_backoff < completer_.initial_backoff) {
      throw std::invalid_argument(
          "idem: CompleterOptions needs concurrency > 0, max_attempts >= 1 and "
          "0 <= initial_backoff <= max_backoff");
    }
    // The scope's keys start with its length and bytes: cut the empty principal and id off.
    prefix_.resize(prefix_.size() - 1);
    redrive_ = [this, fn = std::move(handler)](const Abandoned& record) mutable {
      return run<std::remove_cvref_t<std::invoke_result_t<Fn&, Context&, std::string_view>>>(record,
                                                                                             fn);
    };
  }

  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;
  ~Completer() { stop(); }

  /// One pass: finds abandoned records of the scope and re-drives those not backing off, up to
  /// `concurrency` at once. A store failure of the search is returned as it is.
  Result<CompleterPass> run_once() {
    Result<std::vector<Abandoned>> found = store_.find_abandoned(prefix_, completer_.batch);
    if (!found) return std::move(found).failure();
    std::vector<Abandoned>& records = found.value();
    CompleterPass pass;
    pass.found = records.size();
    std::atomic<std::size_t> next{0};
    std::mutex pass_mutex;
    auto work = [&] {
      for (std::size_t i; (i = next.fetch_add(1)) < records.size();) {
        const Verdict verdict = attempt(records[i]);
        std::lock_guard lock(pass_mutex);
        ++(pass.*kTally[static_cast<std::size_t>(verdict)]);
      }
    };
    const std::size_t threads = std::min(completer_.concurrency, records.size());
    std::vector<std::thread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
    return pass;
  }

  /// Runs a pass every `interval` on a thread of its own until stop() (or destruction).
  void start(std::chrono::milliseconds interval) {
    std::lock_guard lock(loop_mutex_);
    if (loop_.joinable()) return;
    stopping_ = false;
    loop_ = std::thread([this, interval] {
      std::unique_lock wait_lock(loop_mutex_);
      while (!stopping_) {
        wait_lock.unlock();
        (void)run_once();
        wait_lock.lock();
        wake_.wait_for(wait_lock, interval, [this] { return stopping_; });
      }
    });
  }

  /// Ends the background loop after its current pass.
  void stop() {
    {
      std::lock_guard lock(loop_mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (loop_.joinable() && loop_.get_id() != std::this_thread::get_id()) loop_.join();
  }

 private:
  enum class Verdict { completed, failed, gave_up, waiting };
  // The pass's counter of each verdict, in Verdict's order.
  static constexpr std::array<std::size_t CompleterPass::*, 4> kTally = {
      &CompleterPass::completed, &CompleterPass::failed, &CompleterPass::gave_up,
      &CompleterPass::waiting};

  // What the engine claims for the completer: one record by its effective key.
  class Target {
   public:
    static constexpr bool kRewindable = RewindableStore<S>;
    Target(Completer& owner, const Abandoned& record, bool rewindable)
        : owner_(&owner), record_(&record), rewindable_(rewindable) {}
    Result<Claim> claim() {
      const Options& o = owner_->options_;
      return owner_->store_.claim(ClaimRequest{record_->key,
                                               o.hash(record_->request),
                                               o.lease,
                                               held_retention(*o.ttl, o.lease),
                                               {},
                                               rewindable_});
    }
    Status commit(Fence fence, ClaimStatus status, std::string_view bytes) {
      return owner_->store_.commit(ticket(fence), Completion{status, bytes, *owner_->options_.ttl});
    }
    Status abort(Fence fence) { return owner_->store_.abort(ticket(fence)); }
    Status extend(Fence fence, std::chrono::milliseconds lease) {
      return owner_->store_.extend(ticket(fence), lease);
    }
    Status rewind(Fence fence) requires kRewindable { return owner_->store_.rewind(ticket(fence)); }
    void abandon() noexcept {}
    std::string_view scope() const noexcept { return owner_->options_.scope; }
    std::string_view key_id() const noexcept { return record_->key; }
    static std::string refusal_message(errc) { return {}; }
    std::chrono::milliseconds lease() const noexcept { return owner_->options_.lease; }
    S& context_store() const noexcept { return owner_->store_; }
    Ticket ticket(Fence fence) const noexcept { return Ticket{record_->key, fence}; }

   private:
    Completer* owner_;
    const Abandoned* record_;
    bool rewindable_;
  };

  struct KeyState {
    int attempts = 0;
    Clock::time_point next{};
  };

  // Runs the handler on the record through the engine (claim, resume, commit); throws as it does.
  template <class R, class Fn>
  Verdict run(const Abandoned& record, Fn& fn) {
    Target target(*this, record, options_.remember_failures);
    auto call = [&](Context& ctx) -> R { return fn(ctx, std::string_view(record.request)); };
    Outcome<R> out = detail::execute_on<R>(policy_, target, call);
    if (out.replayed() || out.has_value()) return Verdict::completed;
    return Verdict::waiting;  // held by another meanwhile, or a store failure: next pass
  }

  Verdict attempt(const Abandoned& record) {
    const auto now = policy_.clock->now();
    {
      std::lock_guard lock(keys_mutex_);
      auto it = keys_.find(record.key);
      if (it != keys_.end() && now < it->second.next) return Verdict::waiting;
    }
    try {
      const Verdict verdict = redrive_(record);
      if (verdict == Verdict::completed) {
        std::lock_guard lock(keys_mutex_);
        keys_.erase(record.key);
      }
      return verdict;
    } catch (...) {
      const std::string why = detail::exception_message(std::current_exception());
      int attempts = 0;
      {
        std::lock_guard lock(keys_mutex_);
        KeyState& state = keys_[record.key];
        attempts = ++state.attempts;
        auto backoff = completer_.initial_backoff;
        for (int i = 1; i < attempts && backoff < completer_.max_backoff; ++i) backoff *= 2;
        state.next = policy_.clock->now() + std::min(backoff, completer_.max_backoff);
      }
      if (attempts < completer_.max_attempts) return Verdict::failed;
      return give_up(record, attempts, why) ? Verdict::gave_up : Verdict::failed;
    }
  }

  // Records the key's failure: claims it once more and commits errc::handler_failed.
  bool give_up(const Abandoned& record, int attempts, const std::string& why) {
    Target target(*this, record, /*rewindable=*/false);
    Result<Claim> claimed = target.claim();
    if (!claimed || claimed->status != ClaimStatus::acquired) return false;
    const std::string failure = detail::encode_failure(
        errc::handler_failed, "idem::Completer gave up after " + std::to_string(attempts) +
                                  " attempts; the last failed with: " + why);
    if (!target.commit(claimed->fence, ClaimStatus::failed, failure)) {
      (void)target.abort(claimed->fence);
      return false;
    }
    std::lock_guard lock(keys_mutex_);
    keys_.erase(record.key);
    return true;
  }

  S& store_;
  CompleterOptions completer_;
  std::string prefix_;
  std::function<Verdict(const Abandoned&)> redrive_;
  std::mutex keys_mutex_;
  std::map<std::string, KeyState, std::less<>> keys_;  // keys whose runs failed here
  std::mutex loop_mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread loop_;
};

}  // namespace idem
