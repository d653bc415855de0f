#pragma once
// How the conformance kit makes a store of yours, moves its time, and which optional abilities
// it has. Specialise idem::testing::StoreTraits<S> for your store S:
//
//   template <>
//   struct idem::testing::StoreTraits<MyStore> {
//     static constexpr std::chrono::milliseconds lease{500};  // long enough for one step
//     static std::unique_ptr<MyStore> make();                 // a fresh store, no records
//     static void advance(MyStore&, std::chrono::milliseconds d);  // let d of store time pass
//   };
//
// make() runs before every case. It may skip the case (GTEST_SKIP() in a lambda, e.g. when no
// server is configured) or fail it (FAIL()), and return null then. advance() sleeps when the
// store reads a clock the kit cannot move (a database server's); keep `lease` short for those.
//
// Optional abilities, each checked by cases of its own:
//
//   static constexpr bool holds_until_finished = true;
//       A holder keeps its key until it commits or aborts, lease or not (transactional mode: the
//       holder's open transaction locks the record): there is no takeover of a live holder, and
//       a session that ends (the store closed, the process gone) frees the key.
//   static constexpr bool waits = false;
//       A WakingStore whose await_change cannot wait here (its wakes() says false: an
//       asynchronous Redis store without wait connections): the wake cases check that callers
//       poll instead.
//   static constexpr bool takeover_wakes = false;
//       A takeover after the lease does not end a duplicate's wait for the old holder before
//       its bound (the claim that takes the key over wakes nobody).
//   static constexpr bool admin_release_wakes = false;
//       An admin's release does not end a waiting duplicate's wait before its bound (SQLite:
//       the admin writes through a connection of its own, which no store of the process hears).
//   static constexpr bool wait_sees_ends_on_other_threads = false;
//       A hold that ended between a claim that found it and the wait is noticed at once only
//       when the claim and the wait ran on one thread (SQLite behind ThreadedAsyncStore); on
//       other threads the wait may run to its bound.
//   static std::unique_ptr<MyStore> reopen(MyStore& store);
//       Another store over the same records, as another process (or this one after a restart)
//       opens them. Records and fences then outlive the store object that wrote them, and
//       holders in different stores fence each other off.
//
//   static std::unique_ptr<idem::admin::Admin> admin(MyStore& store);
//       The store's admin (idem/admin.hpp): the faces' cases then also release and forget keys,
//       alone and racing callers.
//   static std::shared_ptr<idem::Clock> clock(MyStore& store);
//       The clock advance() moves, when the store reads one of the process's (a ManualClock):
//       the caches the faces put in front of the store expire by it. Default: the steady clock.
//   static constexpr bool batches = false;
//       The store cannot answer batches of claims (default: it can unless holds_until_finished):
//       no batch and no group-commit face.
//   using async_face = idem::testing::AsyncFace<MyStore>;   (idem/testing/async_face.hpp)
//       The store also has an asynchronous face, with async_store() and async_run() (see there).
//   static void write(MyStore&, const idem::NativeTransaction& tx, std::string_view tag);
//   static std::size_t written(MyStore&, std::string_view tag);
//       For a store with atomic steps (idem::AtomicStepStore): write() inserts `tag` through the
//       step's transaction tx into a table of unique tags (a second write of the same tag in one
//       transaction throws, as a statement the database refuses); written() counts the rows
//       tagged `tag` that committed. The atomic-step cases check what remains of a step's
//       writes (idem/testing/atomic_step_cases.hpp).
//
// A store with `Status rewind(const Ticket&)` (idem::RewindableStore) also gets the rewind cases.

#include <chrono>
#include <concepts>
#include <memory>

namespace idem::testing {

/// Specialised by each store's author (above); never defined for a store it does not know.
template <class S>
struct StoreTraits;

/// StoreTraits<S> has what every case needs: make(), advance() and lease.
template <class S>
concept ConformanceTraits = requires(S& store, std::chrono::milliseconds d) {
  { StoreTraits<S>::make() } -> std::convertible_to<std::unique_ptr<S>>;
  StoreTraits<S>::advance(store, d);
  { StoreTraits<S>::lease } -> std::convertible_to<std::chrono::milliseconds>;
};

/// The store's holder keeps its key until it finishes (StoreTraits<S>::holds_until_finished).
template <class S>
concept HoldsUntilFinished = requires {
  requires StoreTraits<S>::holds_until_finished;
};

/// Another store over the same records can be opened (StoreTraits<S>::reopen).
template <class S>
concept Reopenable = requires(S& store) {
  { StoreTraits<S>::reopen(store) } -> std::convertible_to<std::unique_ptr<S>>;
};

/// A takeover ends a waiting duplicate's wait (unless StoreTraits<S>::takeover_wakes says it
/// does not).
template <class S>
concept TakeoverWakes = !requires {
  requires !StoreTraits<S>::takeover_wakes;
};

/// An admin's release ends a waiting duplicate's wait (unless StoreTraits<S>::admin_release_wakes
/// says it does not).
template <class S>
concept AdminReleaseWakes = !requires {
  requires !StoreTraits<S>::admin_release_wakes;
};

/// A wait notices a hold that ended after the claim that found it, wherever that claim ran
/// (unless StoreTraits<S>::wait_sees_ends_on_other_threads says otherwise).
template <class S>
concept WaitSeesEarlierEnds = !requires {
  requires !StoreTraits<S>::wait_sees_ends_on_other_threads;
};

/// The store's await_change never waits, whatever it is built with (StoreTraits<S>::waits is
/// false): its callers poll.
template <class S>
concept NeverWaits = requires {
  requires !StoreTraits<S>::waits;
};

}  // namespace idem::testing
