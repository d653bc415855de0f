#pragma once
// The promises a caller sees, each checked on every face of every store (faces.hpp): where two
// features meet (a failed handler and a batch, a lease and a short ttl, a forget and a step, a
// forget and a cache, a forget racing callers), a promise holds on each cell that claims it, not
// only on the cell that built it. Registered by register_record_store_conformance().

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "idem/engine/effective_key.hpp"
#include "idem/error.hpp"
#include "idem/observer.hpp"
#include "idem/steps.hpp"
#include "idem/testing/detail/conformance_case.hpp"
#include "idem/testing/faces.hpp"
#include "idem/testing/record_store_test.hpp"

namespace idem::testing {

/// The fixture of a face case: the cell's store (RecordStoreTest) and faces over it.
template <class F>
class FaceTest : public RecordStoreTest<typename F::Store> {
 protected:
  /// `setup` with this case's own scope and, unless set, the cell's lease.
  FaceSetup setup(FaceSetup s = {}) {
    if (s.scope.empty()) s.scope = this->key("scope");
    if (s.lease == FaceSetup{}.lease) s.lease = this->kLease;
    return s;
  }
  std::unique_ptr<F> face(const FaceSetup& s) { return std::make_unique<F>(this->store(), s); }

  /// A claim of (scope, key) made straight on the store with `payload`, as a holder in another
  /// process would make it; that holder then vanishes without a word.
  Claim claimed_elsewhere(const FaceSetup& s, const Key& key, std::string_view payload,
                          std::chrono::milliseconds retention) {
    const detail::EffectiveKey k(s.scope, key.principal, key.id);
    Result<Claim> c = this->store().claim(ClaimRequest{.key = k.view(),
                                                       .fingerprint = xxh3_128(payload),
                                                       .lease = s.lease,
                                                       .retention = retention});
    EXPECT_TRUE(c.has_value()) << (c ? "" : c.failure().describe());
    if (!c) return Claim{};
    EXPECT_EQ(c->status, ClaimStatus::acquired);
    return std::move(c).value();
  }
};

/// The events an Observer saw, in order, each with its error.
class SeenEvents {
 public:
  SeenEvents()
      : observer_(std::make_shared<Observer>([this](const EventInfo& e) {
          std::lock_guard lock(mutex_);
          events_.emplace_back(e.event, e.error);
        })) {}
  const std::shared_ptr<Observer>& observer() const noexcept { return observer_; }
  /// The events since the last take(), names only.
  std::vector<std::string> take() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> names;
    for (const auto& [event, error] : events_) names.emplace_back(to_string(event));
    events_.clear();
    return names;
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<Event, std::error_code>> events_;
  std::shared_ptr<Observer> observer_;
};

}  // namespace idem::testing

// Declares the face case `Name` and opens its body; inside, `this->` reaches the fixture, `F` is
// the face's type and `S` the store's.
#define IDEM_FACE_CASE(Name) IDEM_TESTING_CASE_OF(::idem::testing::FaceTest, F, Name)

namespace idem::testing::face_cases {

using std::chrono::milliseconds;

// docs/design.md §1, §5: however many callers race on a key, through any face, its handler runs
// once and every caller gets the same answer.
IDEM_FACE_CASE(EachKeyRunsOnceUnderRacingThreads) {
  constexpr int kThreads = 4;
  constexpr int kKeys = 8;
  constexpr int kRounds = 3;
  auto f = this->face(this->setup({.in_progress = Wait{.timeout = std::chrono::seconds{20}}}));
  std::vector<std::atomic<int>> runs(kKeys);
  std::mutex seen_mutex;
  std::map<int, std::vector<std::string>> seen;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        for (int i = 0; i < kKeys; ++i) {
          const int k = (i + t) % kKeys;  // threads meet on every key, in different orders
          Outcome<std::string> out =
              f->run(Key{"key-" + std::to_string(k)}, "payload", [&, k, t](Context*) {
                runs[k].fetch_add(1);
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                return "value of " + std::to_string(k) + " from " + std::to_string(t);
              });
          if (!out) {
            failures.fetch_add(1);
            continue;
          }
          std::lock_guard lock(seen_mutex);
          seen[k].push_back(out.value());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(runs[k].load(), 1) << "key " << k;
    ASSERT_EQ(seen[k].size(), static_cast<std::size_t>(kThreads * kRounds)) << "key " << k;
    for (const std::string& v : seen[k]) EXPECT_EQ(v, seen[k].front()) << "key " << k;
  }
}

// docs/design.md §7: a handler that fails releases its key, and every face says so the same way
// (handler_aborted: retryable), so a caller retries rather than gives up; the retry runs.
IDEM_FACE_CASE(AFailedHandlerSaysItsKeyWasReleased) {
  auto f = this->face(this->setup());
  int runs = 0;
  Outcome<std::string> failed = f->run(Key{"k"}, "p", [&](Context*) -> std::string {
    ++runs;
    throw std::runtime_error("card declined");
  });
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error(), errc::handler_aborted) << failed.message();
  EXPECT_TRUE(is_retryable(failed.error()));
  EXPECT_NE(failed.message().find("card declined"), std::string::npos) << failed.message();
  Outcome<std::string> retry = f->run(Key{"k"}, "p", [&](Context*) {
    ++runs;
    return std::string("second run");
  });
  ASSERT_TRUE(retry.has_value()) << retry.message();
  EXPECT_TRUE(retry.recorded());
  EXPECT_EQ(runs, 2);
}

// docs/design.md §7: under remember_failures the failure is remembered, every face says so
// (handler_failed: not retryable), and repeats replay it without running the handler.
IDEM_FACE_CASE(ARememberedFailureSaysSoAndReplays) {
  auto f = this->face(this->setup({.remember_failures = true}));
  int runs = 0;
  Outcome<std::string> failed = f->run(Key{"k"}, "p", [&](Context*) -> std::string {
    ++runs;
    throw std::runtime_error("card declined");
  });
  ASSERT_FALSE(failed.has_value());
  EXPECT_EQ(failed.error(), errc::handler_failed) << failed.message();
  EXPECT_FALSE(is_retryable(failed.error()));
  Outcome<std::string> repeat = f->run(Key{"k"}, "p", [&](Context*) {
    ++runs;
    return std::string("never");
  });
  ASSERT_FALSE(repeat.has_value());
  EXPECT_EQ(repeat.error(), errc::handler_failed);
  EXPECT_TRUE(repeat.replayed());
  EXPECT_NE(repeat.message().find("card declined"), std::string::npos) << repeat.message();
  EXPECT_EQ(runs, 1);
}

// docs/design.md §2, §4, guide's events: a fresh call raises `executed`, a replay `replayed`, a
// failed handler `aborted`, a live holder `in_progress`, on every face alike.
IDEM_FACE_CASE(EventsComeAsTheGuideSays) {
  SeenEvents seen;
  const FaceSetup s = this->setup({.observer = seen.observer()});
  auto f = this->face(s);
  ASSERT_TRUE(f->run(Key{"k"}, "p", [](Context*) { return std::string("r"); }).has_value());
  EXPECT_EQ(seen.take(), (std::vector<std::string>{"executed"}));
  ASSERT_TRUE(f->run(Key{"k"}, "p", [](Context*) { return std::string("x"); }).replayed());
  EXPECT_EQ(seen.take(), (std::vector<std::string>{"replayed"}));
  (void)f->run(Key{"t"}, "p", [](Context*) -> std::string { throw std::runtime_error("no"); });
  EXPECT_EQ(seen.take(), (std::vector<std::string>{"aborted"}));
  (void)this->claimed_elsewhere(s, Key{"held"}, "p", s.ttl);
  EXPECT_EQ(f->run(Key{"held"}, "p", [](Context*) { return std::string("x"); }).error(),
            errc::in_progress);
  EXPECT_EQ(seen.take(), (std::vector<std::string>{"in_progress"}));
}

// docs/design.md §6: a caller that waits for a holder gets the holder's result once it commits,
// and gives up with in_progress when its wait runs out; every wait returns.
IDEM_FACE_CASE(AWaitingCallerGetsTheHoldersResultOrGivesUpInTime) {
  const FaceSetup waiting = this->setup({.in_progress = Wait{.timeout = std::chrono::seconds{20}}});
  auto f = this->face(waiting);
  const Claim holder = this->claimed_elsewhere(waiting, Key{"k"}, "p", waiting.ttl);
  const detail::EffectiveKey k(waiting.scope, {}, "k");
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
    EXPECT_TRUE(this->commit(k.view(), holder.fence, "the holder's").ok());
  });
  int runs = 0;
  Outcome<std::string> out = f->run(Key{"k"}, "p", [&](Context*) {
    ++runs;
    return std::string("mine");
  });
  finisher.join();
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_TRUE(out.replayed());
  EXPECT_EQ(out.value(), "the holder's");
  EXPECT_EQ(runs, 0);

  const FaceSetup brief =
      this->setup({.scope = waiting.scope, .in_progress = Wait{.timeout = milliseconds{150}}});
  auto impatient = this->face(brief);
  (void)this->claimed_elsewhere(brief, Key{"held"}, "p", brief.ttl);
  Outcome<std::string> gave_up =
      impatient->run(Key{"held"}, "p", [&](Context*) { return std::string("never"); });
  EXPECT_EQ(gave_up.error(), errc::in_progress) << gave_up.message();
  EXPECT_GT(gave_up.retry_after().count(), 0);
}

// docs/design.md §5, §15: an empty key, or an id or principal over max_key_size, is key_invalid
// before any store call, on every face; the handler never runs.
IDEM_FACE_CASE(ABadKeyIsRefusedBeforeTheStore) {
  auto f = this->face(this->setup());
  int runs = 0;
  const auto handler = [&](Context*) {
    ++runs;
    return std::string("never");
  };
  EXPECT_EQ(f->run(Key{""}, "p", handler).error(), errc::key_invalid);
  EXPECT_EQ(f->run(Key{std::string(257, 'k')}, "p", handler).error(), errc::key_invalid);
  EXPECT_EQ(f->run(Key{"k", std::string(257, 'p')}, "p", handler).error(), errc::key_invalid);
  EXPECT_EQ(runs, 0);
  ASSERT_TRUE(f->run(Key{std::string(256, 'k')}, "p", handler).has_value());
  EXPECT_EQ(runs, 1);
}

// docs/design.md §2, §4: a record in progress outlives its lease by another lease, whatever the
// ttl: once a holder's lease ran out, the same request takes the key over (reported as such) and
// another payload is still refused, even with a ttl shorter than the lease.
IDEM_FACE_CASE(ALapsedLeaseIsATakeoverEvenWhenTheTtlIsShorter) {
  SeenEvents seen;
  const milliseconds lease = 2 * this->kLease;
  const FaceSetup s = this->setup({.lease = lease, .ttl = lease / 4, .observer = seen.observer()});
  auto f = this->face(s);
  const Claim dead = this->claimed_elsewhere(s, Key{"k"}, "payload", s.ttl);
  this->advance(lease + lease / 4);
  Outcome<std::string> other =
      f->run(Key{"k"}, "other payload", [](Context*) { return std::string("must not run"); });
  EXPECT_EQ(other.error(), errc::payload_mismatch) << other.message();
  (void)seen.take();
  int runs = 0;
  Outcome<std::string> taken = f->run(Key{"k"}, "payload", [&](Context* ctx) {
    ++runs;
    if (ctx != nullptr) {
      EXPECT_GT(ctx->fence(), dead.fence);
    }
    return std::string("taken over");
  });
  ASSERT_TRUE(taken.has_value()) << taken.message();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(seen.take(), (std::vector<std::string>{"took_over", "executed"}));
}

// docs/design.md §4, operations.md: a key an operator released runs again at once, under a
// larger fence, and its old holder can no longer commit.
IDEM_FACE_CASE(AKeyTheAdminReleasedRunsAgain) {
  const FaceSetup s = this->setup();
  auto f = this->face(s);
  std::unique_ptr<admin::Admin> admin = f->admin();
  ASSERT_NE(admin, nullptr);
  const Claim dead = this->claimed_elsewhere(s, Key{"stuck"}, "p", s.ttl);
  Result<admin::Change> released = admin->release(s.scope, Key{"stuck"}, 0);
  ASSERT_TRUE(released.has_value()) << released.failure().describe();
  EXPECT_TRUE(released->changed);
  Fence fence = 0;
  Outcome<std::string> out = f->run(Key{"stuck"}, "other payload", [&](Context* ctx) {
    if (ctx != nullptr) fence = ctx->fence();
    return std::string("ran");
  });
  ASSERT_TRUE(out.has_value()) << out.message();
  EXPECT_TRUE(out.executed());
  if (F::kContext) {
    EXPECT_GT(fence, dead.fence);
  }
  const detail::EffectiveKey k(s.scope, {}, "stuck");
  EXPECT_EQ(this->commit(k.view(), dead.fence, "late").error(), errc::lease_lost);
}

// docs/design.md §2, operations.md: a record an operator forgot is never replayed again: the next
// call runs the handler, with any payload (a cache in front included: its admin drops the key).
IDEM_FACE_CASE(AForgottenRecordIsNeverReplayed) {
  const FaceSetup s = this->setup();
  auto f = this->face(s);
  std::unique_ptr<admin::Admin> admin = f->admin();
  ASSERT_NE(admin, nullptr);
  ASSERT_EQ(f->run(Key{"k"}, "p", [](Context*) { return std::string("first"); }).value(), "first");
  ASSERT_TRUE(f->run(Key{"k"}, "p", [](Context*) { return std::string("x"); }).replayed());
  Result<admin::Change> forgot = admin->forget(s.scope, Key{"k"});
  ASSERT_TRUE(forgot.has_value()) << forgot.failure().describe();
  EXPECT_TRUE(forgot->changed);
  Outcome<std::string> again =
      f->run(Key{"k"}, "p", [](Context*) { return std::string("second"); });
  ASSERT_TRUE(again.has_value()) << again.message();
  EXPECT_TRUE(again.executed()) << "the forgotten record was replayed: " << again.value();
  EXPECT_EQ(again.value(), "second");
  EXPECT_EQ(f->run(Key{"k"}, "other", [](Context*) { return std::string("x"); }).error(),
            errc::payload_mismatch);
}

// docs/design.md §2, steps.md: nothing of a forgotten run comes back: the next run of the key
// starts at its first step, whether the record was finished or released when it was forgotten.
IDEM_FACE_CASE(AForgottenRunLeavesNoStepsToTheNextOne) {
  const FaceSetup s = this->setup();
  auto f = this->face(s);
  std::unique_ptr<admin::Admin> admin = f->admin();
  ASSERT_NE(admin, nullptr);
  int charges = 0;
  std::size_t replayed = 0;
  const auto charge_then = [&](bool fail) {
    return [&, fail](Context* ctx) -> std::string {
      (void)ctx->step("charge", [&] { return "charge " + std::to_string(++charges); });
      replayed = ctx->steps_replayed();
      if (fail) throw std::runtime_error("after the charge");
      return "done";
    };
  };
  // Finished, then forgotten.
  ASSERT_TRUE(f->run(Key{"done"}, "p", charge_then(false)).has_value());
  ASSERT_TRUE(admin->forget(s.scope, Key{"done"}).has_value());
  ASSERT_TRUE(f->run(Key{"done"}, "p", charge_then(false)).has_value());
  EXPECT_EQ(charges, 2) << "the forgotten run's step was replayed";
  EXPECT_EQ(replayed, 0u);
  // Released by its failed handler (steps kept for a retry), then forgotten.
  EXPECT_EQ(f->run(Key{"failed"}, "p", charge_then(true)).error(), errc::handler_aborted);
  ASSERT_TRUE(admin->forget(s.scope, Key{"failed"}).has_value());
  ASSERT_TRUE(f->run(Key{"failed"}, "p", charge_then(false)).has_value());
  EXPECT_EQ(charges, 4) << "the forgotten run's step was replayed";
  EXPECT_EQ(replayed, 0u);
}

// docs/design.md §2, operations.md: an operator's forgets, releases and purges racing callers
// never bring a forgotten record back (a call that starts after a forget returned never replays a
// result committed before it), and every call gets an answer.
IDEM_FACE_CASE(AForgetRacingCallersNeverBringsTheRecordBack) {
  constexpr int kKeys = 3;
  constexpr int kMaxCallsPerThread = 5000;  // callers go on while the forgets last, up to this
  constexpr int kForgets = 15;
  // Waiting: a caller that meets another's hold waits for its answer rather than counting it.
  const FaceSetup s = this->setup({.in_progress = Wait{.timeout = std::chrono::seconds{10}}});
  auto f = this->face(s);
  std::unique_ptr<admin::Admin> admin = f->admin();
  ASSERT_NE(admin, nullptr);
  // Per key: odd while a forget runs, even once it returned. A value carries the epoch its
  // handler started in; a forget that returned before a call started (epoch >= 2m + 2) erased
  // every value of a handler that started before it began (epoch <= 2m).
  std::vector<std::atomic<std::int64_t>> epoch(kKeys);
  std::atomic<int> violations{0};
  std::atomic<int> uid{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  // A first call makes the store's tables (a SQL store makes them at its first call), which the
  // admin needs.
  ASSERT_TRUE(f->run(Key{"first"}, "p", [](Context*) { return std::string("0:0"); }).has_value());
  std::atomic<bool> forgetting{true};
  auto caller = [&](int t) {
    for (int i = 0; forgetting.load() && i < kMaxCallsPerThread; ++i) {
      const int k = (i + t) % kKeys;
      const std::int64_t started = epoch[k].load();
      Outcome<std::string> out = f->run(Key{"k" + std::to_string(k)}, "p", [&, k](Context*) {
        return std::to_string(epoch[k].load()) + ":" + std::to_string(uid.fetch_add(1));
      });
      // A fresh value whose commit a release or forget overtook (lease_lost) is no failure.
      if (!out.has_value()) {
        std::lock_guard lock(failures_mutex);
        failures.push_back(to_string(out.error()) + ": " + out.message());
        continue;
      }
      if (!out.replayed()) continue;
      const std::int64_t tag = std::stoll(out.value().substr(0, out.value().find(':')));
      const std::int64_t forgets_done = started / 2;
      if (tag <= 2 * forgets_done - 2) violations.fetch_add(1);
    }
  };
  const auto failed = [&](const Failure& f) {
    std::lock_guard lock(failures_mutex);
    failures.push_back(f.describe());
  };
  std::thread forgetter([&] {
    for (int i = 0; i < kForgets; ++i) {
      const int k = i % kKeys;
      const Key key{"k" + std::to_string(k)};
      epoch[k].fetch_add(1);
      Result<admin::Change> forgot = admin->forget(s.scope, key);
      epoch[k].fetch_add(1);
      if (!forgot) failed(forgot.failure());
      // A release (of whatever holds the key now) and a purge in between erase no result.
      Result<admin::Change> released = admin->release(s.scope, key, 0);
      if (!released) failed(released.failure());
      Result<std::size_t> purged = admin->purge_expired(16);
      if (!purged) failed(purged.failure());
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
    forgetting.store(false);
  });
  std::thread a(caller, 0);
  std::thread b(caller, 1);
  a.join();
  b.join();
  forgetter.join();
  EXPECT_TRUE(failures.empty()) << failures.front();
  EXPECT_EQ(violations.load(), 0) << "a forgotten record was replayed after its forget returned";
}

/// Every case that applies to face F (of store F::Store) as `<prefix>/<F::kName>.<Case>`.
template <class F>
void register_face(const char* prefix, const char* file, int line) {
  using S = typename F::Store;
  const std::string suite = std::string(prefix) + "/" + F::kName;
  conformance::register_cases<F, EachKeyRunsOnceUnderRacingThreads,
                              AFailedHandlerSaysItsKeyWasReleased,
                              ARememberedFailureSaysSoAndReplays, ABadKeyIsRefusedBeforeTheStore>(
      suite.c_str(), file, line);
  if constexpr (!HoldsUntilFinished<S>) {
    // A holder in another process that vanished is a transaction that rolls back there, and a
    // lease never runs out under one.
    conformance::register_cases<F, EventsComeAsTheGuideSays,
                                ALapsedLeaseIsATakeoverEvenWhenTheTtlIsShorter,
                                AWaitingCallerGetsTheHoldersResultOrGivesUpInTime>(suite.c_str(),
                                                                                   file, line);
    if constexpr (AdminTraits<S>) {
      conformance::register_cases<F, AKeyTheAdminReleasedRunsAgain>(suite.c_str(), file, line);
    }
  }
  if constexpr (AdminTraits<S>) {
    conformance::register_cases<F, AForgottenRecordIsNeverReplayed,
                                AForgetRacingCallersNeverBringsTheRecordBack>(suite.c_str(), file,
                                                                              line);
    if constexpr (F::kContext && StepStore<typename F::GuardStore>) {
      conformance::register_cases<F, AForgottenRunLeavesNoStepsToTheNextOne>(suite.c_str(), file,
                                                                             line);
    }
  }
}

/// The faces of store S: every store has execute(), begin(), a LayeredGuard and a cache in
/// front; batches and group commit where it has batches; the asynchronous guard where its
/// traits name an async face (StoreTraits::async_face).
template <class S>
void register_faces(const char* prefix, const char* file, int line) {
  register_face<ExecuteFace<S>>(prefix, file, line);
  register_face<TwoPhaseFace<S>>(prefix, file, line);
  register_face<LayeredFace<S>>(prefix, file, line);
  register_face<CachedFace<S>>(prefix, file, line);
  if constexpr (has_batches<S>()) {
    register_face<BatchFace<S>>(prefix, file, line);
    if constexpr (BatchStore<S>) register_face<GroupedFace<S>>(prefix, file, line);
  }
  if constexpr (requires { typename StoreTraits<S>::async_face; }) {
    register_face<typename StoreTraits<S>::async_face>(prefix, file, line);
  }
}

}  // namespace idem::testing::face_cases
