#pragma once
// The faces the conformance kit calls a store through: every way a service reaches a record
// store (the guard's execute() and begin()/commit()|fail(), a batch, a LayeredGuard, a
// CachedStore or a GroupCommitStore in front), each behind one `run(key, payload, handler)`, so
// that a face case (face_cases.hpp) states a promise once and checks it on every face of every
// store. A face answers what its caller would see, as an Outcome: where the real face rethrows a
// failed handler's exception, the face turns it into the Outcome a batch item gets (the code the
// `aborted` event carried, handler_aborted or handler_failed, with the exception's message).

#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/admin.hpp"
#include "idem/admin/cached_admin.hpp"
#include "idem/batch_store.hpp"
#include "idem/cached_store.hpp"
#include "idem/context.hpp"
#include "idem/group_commit_store.hpp"
#include "idem/guard.hpp"
#include "idem/layered_guard.hpp"
#include "idem/observer.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/testing/store_traits.hpp"

namespace idem::testing {

/// What a face case asks of the guard under test; the rest are Options' defaults.
struct FaceSetup {
  std::string scope{};
  std::chrono::milliseconds lease{std::chrono::seconds{30}};
  std::chrono::milliseconds ttl{std::chrono::hours{1}};
  InProgressPolicy in_progress = FailFast{};
  bool remember_failures = false;
  std::shared_ptr<Observer> observer = nullptr;  // sees every event the face's guard raises
};

/// A handler as the face runs it: returns the result or throws. `context` is the holder's
/// Context on faces that have one (Face::kContext), null on the others.
using FaceHandler = std::function<std::string(Context* context)>;

/// The store's clock where its traits share it (StoreTraits::clock), for a cache's expiry; else
/// the steady clock, as real time is the store's.
template <class S>
std::shared_ptr<Clock> face_clock(S& store) {
  if constexpr (requires { StoreTraits<S>::clock(store); }) {
    return StoreTraits<S>::clock(store);
  } else {
    return steady_clock();
  }
}

/// The store's own admin (StoreTraits::admin), for the faces of cells that have one.
template <class S>
concept AdminTraits = requires(S& store) {
  { StoreTraits<S>::admin(store) } -> std::convertible_to<std::unique_ptr<admin::Admin>>;
};

/// The kit's batches: the store answers a batch of claims (not every cell can: a transactional
/// SQL store's claims each hold a transaction). StoreTraits::batches overrides the default, which
/// is "unless the holder keeps its key until it finishes".
template <class S>
constexpr bool has_batches() {
  if constexpr (requires { StoreTraits<S>::batches; }) {
    return StoreTraits<S>::batches;
  } else {
    return !HoldsUntilFinished<S>;
  }
}

namespace faces {

/// The code each key's last `aborted` event carried: what execute() and the other rethrowing
/// faces learned about a failed handler's key. By key id, since an event loop may run a call's
/// settlement on another thread than the caller's.
class AbortedCodes {
 public:
  void note(std::string_view key_id, std::error_code code) {
    std::lock_guard lock(mutex_);
    codes_[std::string(key_id)] = code;
  }
  std::error_code take(std::string_view key_id) {
    std::lock_guard lock(mutex_);
    auto it = codes_.find(std::string(key_id));
    if (it == codes_.end()) return {};
    const std::error_code code = it->second;
    codes_.erase(it);
    return code;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::error_code> codes_;
};

/// An Observer that notes `aborted` events in `aborted` and forwards every event to the case's
/// observer.
inline std::shared_ptr<Observer> observer_for(const FaceSetup& setup, AbortedCodes& aborted) {
  return std::make_shared<Observer>([forward = setup.observer, &aborted](const EventInfo& e) {
    if (e.event == Event::aborted) aborted.note(e.key, e.error);
    if (forward) forward->notify(e);
  });
}

/// The guard's options. Its clock stays the steady one: a guard waits in real time, even over a
/// store whose time a case moves by hand (waiting on that clock would move it).
inline Options options_for(const FaceSetup& setup, AbortedCodes& aborted) {
  return Options{.scope = setup.scope,
                 .lease = setup.lease,
                 .ttl = setup.ttl,
                 .in_progress = setup.in_progress,
                 .remember_failures = setup.remember_failures,
                 .observer = observer_for(setup, aborted)};
}

inline std::string what_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "a non-standard exception";
  }
}

/// Calls `call` (which runs the guard on `key`); a handler's exception becomes the failed Outcome
/// the key's `aborted` event announced.
template <class Call>
Outcome<std::string> catching(AbortedCodes& aborted, const Key& key, Call&& call) {
  (void)aborted.take(key.id);
  try {
    return call();
  } catch (...) {
    const std::error_code code = aborted.take(key.id);
    if (!code) throw;  // not a handler's failure the guard settled: the case sees it
    return Outcome<std::string>::failed(
        make_failure(static_cast<errc>(code.value()), what_of(std::current_exception())));
  }
}

/// The admin a face hands out: the store's own.
template <class S>
std::unique_ptr<admin::Admin> store_admin(S& store) {
  if constexpr (AdminTraits<S>) {
    return StoreTraits<S>::admin(store);
  } else {
    return nullptr;
  }
}

}  // namespace faces

/// IdempotencyGuard::execute().
template <class S>
class ExecuteFace {
 public:
  using Store = S;
  using GuardStore = S;  // what the guard calls
  static constexpr const char* kName = "ExecuteFace";
  static constexpr bool kContext = true;

  ExecuteFace(S& store, const FaceSetup& setup)
      : store_(store), guard_(store, faces::options_for(setup, aborted_)) {}

  Outcome<std::string> run(const Key& key, std::string_view payload, const FaceHandler& fn) {
    return faces::catching(aborted_, key, [&] {
      return guard_.execute(key, payload, [&](Context& ctx) { return fn(&ctx); });
    });
  }
  std::unique_ptr<admin::Admin> admin() { return faces::store_admin(store_); }

 private:
  faces::AbortedCodes aborted_;  // before the guard, whose observer refers to it
  S& store_;
  IdempotencyGuard<S> guard_;
};

/// IdempotencyGuard::begin(), then commit(value) or fail(what) as the handler returns or throws.
template <class S>
class TwoPhaseFace {
 public:
  using Store = S;
  using GuardStore = S;  // what the guard calls
  static constexpr const char* kName = "TwoPhaseFace";
  static constexpr bool kContext = true;

  TwoPhaseFace(S& store, const FaceSetup& setup)
      : store_(store), guard_(store, faces::options_for(setup, aborted_)) {}

  Outcome<std::string> run(const Key& key, std::string_view payload, const FaceHandler& fn) {
    auto attempt = guard_.template begin<std::string>(key, payload);
    if (!attempt.acquired()) return std::move(attempt).outcome();
    std::string value;
    try {
      value = fn(&attempt.context());
    } catch (...) {
      const std::string what = faces::what_of(std::current_exception());
      (void)attempt.fail(what);
      return std::move(attempt).outcome();  // what fail() said became of the key
    }
    return attempt.commit(std::move(value));
  }
  std::unique_ptr<admin::Admin> admin() { return faces::store_admin(store_); }

 private:
  faces::AbortedCodes aborted_;  // before the guard, whose observer refers to it
  S& store_;
  IdempotencyGuard<S> guard_;
};

/// IdempotencyGuard::execute_batch() with the call as its one item.
template <class S>
class BatchFace {
 public:
  using Store = S;
  using GuardStore = S;  // what the guard calls
  static constexpr const char* kName = "BatchFace";
  static constexpr bool kContext = true;

  BatchFace(S& store, const FaceSetup& setup)
      : store_(store), guard_(store, faces::options_for(setup, aborted_)) {}

  Outcome<std::string> run(const Key& key, std::string_view payload, const FaceHandler& fn) {
    const std::array<BatchItem, 1> items{BatchItem{key, payload}};
    std::vector<Outcome<std::string>> out = guard_.execute_batch(
        std::span<const BatchItem>(items), [&](std::size_t, Context& ctx) { return fn(&ctx); });
    return std::move(out.front());
  }
  std::unique_ptr<admin::Admin> admin() { return faces::store_admin(store_); }

 private:
  faces::AbortedCodes aborted_;  // before the guard, whose observer refers to it
  S& store_;
  IdempotencyGuard<S> guard_;
};

/// A LayeredGuard whose one layer is a RecordLayer over the store.
template <class S>
class LayeredFace {
 public:
  using Store = S;
  using GuardStore = S;  // what the guard calls
  static constexpr const char* kName = "LayeredFace";
  static constexpr bool kContext = true;

  LayeredFace(S& store, const FaceSetup& setup)
      : store_(store),
        guard_(LayeredOptions{.policy = {.in_progress = setup.in_progress,
                                         .remember_failures = setup.remember_failures,
                                         .observer = faces::observer_for(setup, aborted_)}},
               RecordLayer<S>(store, LayerSettings{.name = "record",
                                                   .scope = setup.scope,
                                                   .lease = setup.lease,
                                                   .ttl = setup.ttl})) {}

  Outcome<std::string> run(const Key& key, std::string_view payload, const FaceHandler& fn) {
    return faces::catching(aborted_, key, [&]() -> Outcome<std::string> {
      return guard_.execute(
          LayeredRequest{.business_key = key.id, .principal = key.principal, .payload = payload},
          [&](Context& ctx) { return fn(&ctx); });
    });
  }
  std::unique_ptr<admin::Admin> admin() { return faces::store_admin(store_); }

 private:
  faces::AbortedCodes aborted_;  // before the guard, whose observer refers to it
  S& store_;
  LayeredGuard<RecordLayer<S>> guard_;
};

/// execute() through a CachedStore in front of the store; its admin keeps the cache in step
/// (admin::cached_admin), as a service owning the cache would use it.
template <class S>
class CachedFace {
 public:
  using Store = S;
  using GuardStore = CachedStore<S&>;  // what the guard calls
  static constexpr const char* kName = "CachedFace";
  static constexpr bool kContext = true;

  CachedFace(S& store, const FaceSetup& setup)
      : store_(store),
        cache_(CachedStoreOptions{.shards = 4, .clock = face_clock(store)}, store),
        guard_(cache_, faces::options_for(setup, aborted_)) {}

  Outcome<std::string> run(const Key& key, std::string_view payload, const FaceHandler& fn) {
    return faces::catching(aborted_, key, [&] {
      return guard_.execute(key, payload, [&](Context& ctx) { return fn(&ctx); });
    });
  }
  std::unique_ptr<admin::Admin> admin() {
    std::unique_ptr<admin::Admin> backend = faces::store_admin(store_);
    return backend ? admin::cached_admin(cache_, std::move(backend)) : nullptr;
  }

 private:
  faces::AbortedCodes aborted_;  // before the guard, whose observer refers to it
  S& store_;
  CachedStore<S&> cache_;
  IdempotencyGuard<CachedStore<S&>> guard_;
};

/// execute() through a GroupCommitStore in front of the store (stores with batches).
template <class S>
class GroupedFace {
 public:
  using Store = S;
  using GuardStore = GroupCommitStore<S>;  // what the guard calls
  static constexpr const char* kName = "GroupedFace";
  static constexpr bool kContext = true;

  GroupedFace(S& store, const FaceSetup& setup)
      : store_(store), grouped_(store), guard_(grouped_, faces::options_for(setup, aborted_)) {}

  Outcome<std::string> run(const Key& key, std::string_view payload, const FaceHandler& fn) {
    return faces::catching(aborted_, key, [&] {
      return guard_.execute(key, payload, [&](Context& ctx) { return fn(&ctx); });
    });
  }
  std::unique_ptr<admin::Admin> admin() { return faces::store_admin(store_); }

 private:
  faces::AbortedCodes aborted_;  // before the guard, whose observer refers to it
  S& store_;
  GroupCommitStore<S> grouped_;
  IdempotencyGuard<GroupCommitStore<S>> guard_;
};

}  // namespace idem::testing
