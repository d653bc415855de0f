// IdempotencyGuard over MemoryStore, each benchmark beside a bare twin that does the same backend
// work without the library: a sharded hash map with the same number of shards, one mutex per
// shard, std::unordered_map<std::string, record> inside. The guarded time divided by the bare
// time is the library's overhead (docs/design.md §14). What each pair measures:
// docs/performance.md.
//
//   build/bench/idem_bench_memory --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
//
// Built a second time as idem_bench_alloc (IDEM_BENCH_COUNT_ALLOCS): a replacement global
// operator new counts the heap allocations of the benchmark thread, and only the BM_Alloc_*
// pairs run, each reporting allocs_per_call.

#include <benchmark/benchmark.h>

#include <array>
#include <barrier>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "idem/cached_store.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/guard.hpp"
#include "idem/memory/store.hpp"
#include "latency.hpp"

#ifdef IDEM_BENCH_COUNT_ALLOCS
#include <cstdlib>
#include <new>

// Heap allocations made by this thread. Only the benchmark thread's count is read.
thread_local std::uint64_t t_allocations = 0;

void* operator new(std::size_t size) {
  ++t_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kShards = 64;  // MemoryStoreOptions' default, and the bare map's
constexpr std::string_view kScope = "payments.charge";
constexpr std::string_view kPayload = "card=4242424242424242&amount=1999&currency=EUR";
// A small receipt, past the 15-byte small-string buffer: one allocation, as a real one would be.
constexpr std::string_view kResult = "receipt:ch_0000000042:EUR";
constexpr std::chrono::milliseconds kLease{std::chrono::seconds{30}};
constexpr std::chrono::milliseconds kTtl{std::chrono::hours{24}};

// The handler both twins run.
std::string handler() { return std::string(kResult); }

// Never-seen keys, "req-<thread>-<13 digits>" (20 bytes or so, like a short request id), written
// into a buffer with std::to_chars: the same cheap cost on both sides of every pair.
class KeyMaker {
 public:
  explicit KeyMaker(int thread) {
    constexpr std::string_view kPrefix = "req-";
    char* out = kPrefix.copy(buffer_.data(), kPrefix.size()) + buffer_.data();
    out = std::to_chars(out, buffer_.data() + buffer_.size(), thread).ptr;
    *out++ = '-';
    prefix_size_ = static_cast<std::size_t>(out - buffer_.data());
  }

  std::string_view next() noexcept {
    // The offset keeps every counter 13 digits wide, so keys do not grow during a run.
    const std::uint64_t counter = 1'000'000'000'000 + count_++;
    const char* end =
        std::to_chars(buffer_.data() + prefix_size_, buffer_.data() + buffer_.size(), counter).ptr;
    return {buffer_.data(), static_cast<std::size_t>(end - buffer_.data())};
  }

 private:
  std::array<char, 48> buffer_{};
  std::size_t prefix_size_ = 0;
  std::uint64_t count_ = 0;
};

// ---- The bare twin: what a hand-written sharded idempotency map does per call -----------------

constexpr std::uint64_t kPayloadTag = 1;       // the bare twins' stand-in for kPayload
constexpr std::uint64_t kOtherPayloadTag = 2;  // ... and for kOtherPayload
constexpr std::string_view kOtherPayload = "card=4242424242424242&amount=2999&currency=EUR";

// The record a bare map needs to be one: whether it is done, a fence, an expiry and the result.
struct BareRecord {
  bool completed = false;
  std::uint64_t payload_tag = 0;  // stands in for the fingerprint: compared, never computed
  std::uint64_t fence = 0;
  Clock::time_point expires_at{};
  std::string result;
};

class BareShardedMap {
 public:
  // Inserts the key as in progress; false if it is already there.
  bool claim(std::string_view key, std::uint64_t payload_tag = kPayloadTag) {
    const auto now = Clock::now();
    Shard& shard = shard_for(key);
    std::lock_guard lock(shard.mutex);
    auto [it, inserted] = shard.records.try_emplace(std::string(key));
    if (!inserted) return false;
    it->second.payload_tag = payload_tag;
    it->second.fence += 1;
    it->second.expires_at = now + kLease;
    return true;
  }

  // Stores the result of a claimed key.
  bool commit(std::string_view key, std::string_view result) {
    const auto now = Clock::now();
    Shard& shard = shard_for(key);
    std::lock_guard lock(shard.mutex);
    auto it = shard.records.find(key);
    if (it == shard.records.end()) return false;
    it->second.completed = true;
    it->second.result.assign(result);
    it->second.expires_at = now + kTtl;
    return true;
  }

  // What a claim of a stored key answers: the result (replay), or a refusal because the key is
  // in progress or was stored with another payload tag.
  enum class Answer { replay, in_progress, mismatch, absent };
  Answer check(std::string_view key, std::uint64_t payload_tag, std::string* result) {
    const auto now = Clock::now();
    Shard& shard = shard_for(key);
    std::lock_guard lock(shard.mutex);
    auto it = shard.records.find(key);
    if (it == shard.records.end() || now >= it->second.expires_at) return Answer::absent;
    if (it->second.payload_tag != payload_tag) return Answer::mismatch;
    if (!it->second.completed) return Answer::in_progress;
    *result = it->second.result;
    return Answer::replay;
  }

  // Copies out the stored result of a completed, unexpired key.
  std::optional<std::string> replay(std::string_view key) {
    const auto now = Clock::now();
    Shard& shard = shard_for(key);
    std::lock_guard lock(shard.mutex);
    auto it = shard.records.find(key);
    if (it == shard.records.end() || !it->second.completed || now >= it->second.expires_at) {
      return std::nullopt;
    }
    return it->second.result;
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view key) const noexcept {
      return std::hash<std::string_view>{}(key);
    }
  };

  struct alignas(64) Shard {
    std::mutex mutex;
    std::unordered_map<std::string, BareRecord, Hash, std::equal_to<>> records;
  };

  Shard& shard_for(std::string_view key) noexcept {
    static_assert((kShards & (kShards - 1)) == 0);
    return shards_[(Hash{}(key) >> 32) & (kShards - 1)];
  }

  std::vector<Shard> shards_ = std::vector<Shard>(kShards);
};

// ---- Shared state, rebuilt by Setup for every run -----------------------------------------------

using Guard = idem::IdempotencyGuard<idem::MemoryStore>;

struct GuardedState {
  // Unbounded, so that no claim evicts: the fresh pair empties its table itself (FreshBatches).
  idem::MemoryStore store{idem::MemoryStoreOptions{.shards = kShards, .capacity = 0}};
  Guard guard{store, idem::Options{.scope = std::string(kScope), .lease = kLease, .ttl = kTtl}};
};

std::unique_ptr<GuardedState> g_guarded;
std::unique_ptr<BareShardedMap> g_bare;

// Replay benchmarks cycle over this many stored keys, shared by the threads.
constexpr std::size_t kReplayKeys = 1 << 14;

const std::vector<std::string>& replay_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    out.reserve(kReplayKeys);
    KeyMaker maker(99);
    for (std::size_t i = 0; i < kReplayKeys; ++i) out.emplace_back(maker.next());
    return out;
  }();
  return keys;
}

// Fresh keys fill the table; every kFreshBatch claims (all threads together) the timers pause,
// the threads meet, and the table starts again empty. So both twins measure claims into a table
// of 0 to kFreshBatch records, whatever the run length, and memory stays bounded.
constexpr std::int64_t kFreshBatch = 1 << 16;

class FreshBatches {
 public:
  explicit FreshBatches(const benchmark::State& state)
      : per_thread_(kFreshBatch / state.threads()), meeting_(state.threads()) {}

  // Call once per iteration; `reset` runs on thread 0 while every thread waits, timers paused.
  // Every thread runs the same number of iterations, so all of them reach each meeting.
  template <class Reset>
  void step(benchmark::State& state, std::int64_t& done, Reset&& reset) {
    if (++done < per_thread_) return;
    done = 0;
    state.PauseTiming();
    meeting_.arrive_and_wait();
    if (state.thread_index() == 0) reset();
    meeting_.arrive_and_wait();
    state.ResumeTiming();
  }

  // A thread that stops early (SkipWithError) leaves, so that the others never wait for it.
  void leave() { meeting_.arrive_and_drop(); }

 private:
  std::int64_t per_thread_;
  std::barrier<> meeting_;
};

std::unique_ptr<FreshBatches> g_batches;

void setup_guarded(const benchmark::State&) { g_guarded = std::make_unique<GuardedState>(); }
void setup_bare(const benchmark::State&) { g_bare = std::make_unique<BareShardedMap>(); }
void teardown_guarded(const benchmark::State&) { g_guarded.reset(); }
void teardown_bare(const benchmark::State&) { g_bare.reset(); }

void setup_guarded_fresh(const benchmark::State& state) {
  setup_guarded(state);
  g_batches = std::make_unique<FreshBatches>(state);
}
void setup_bare_fresh(const benchmark::State& state) {
  setup_bare(state);
  g_batches = std::make_unique<FreshBatches>(state);
}
void teardown_guarded_fresh(const benchmark::State& state) {
  teardown_guarded(state);
  g_batches.reset();
}
void teardown_bare_fresh(const benchmark::State& state) {
  teardown_bare(state);
  g_batches.reset();
}

void setup_guarded_replay(const benchmark::State& state) {
  setup_guarded(state);
  for (const std::string& key : replay_keys()) {
    (void)g_guarded->guard.execute(key, kPayload, handler);
  }
}

void setup_bare_replay(const benchmark::State& state) {
  setup_bare(state);
  for (const std::string& key : replay_keys()) {
    g_bare->claim(key);
    g_bare->commit(key, handler());
  }
}

// Each thread starts at its own place in the replay keys.
std::size_t replay_start(const benchmark::State& state) {
  return static_cast<std::size_t>(state.thread_index()) * (kReplayKeys / 2 + 7);
}

// ---- Fresh: a never-seen key, the handler runs, its result is stored ---------------------------

void BM_Memory_Fresh(benchmark::State& state) {
  KeyMaker keys(state.thread_index());
  std::int64_t done = 0;
  idem_bench::Latency latency{16};
  for (auto _ : state) {
    const auto timer = latency.time();
    idem::Outcome<std::string> out = g_guarded->guard.execute(keys.next(), kPayload, handler);
    if (!out.recorded()) {
      state.SkipWithError("a fresh key was not executed and recorded");
      g_batches->leave();
      break;
    }
    benchmark::DoNotOptimize(out);
    g_batches->step(state, done, [] { g_guarded = std::make_unique<GuardedState>(); });
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

void BM_Memory_Fresh_bare(benchmark::State& state) {
  KeyMaker keys(state.thread_index());
  std::int64_t done = 0;
  idem_bench::Latency latency{16};
  for (auto _ : state) {
    const auto timer = latency.time();
    BareShardedMap& map = *g_bare;
    const std::string_view key = keys.next();
    if (!map.claim(key)) {
      state.SkipWithError("a fresh key was already claimed");
      g_batches->leave();
      break;
    }
    std::string result = handler();
    if (!map.commit(key, result)) {
      state.SkipWithError("a claimed key could not be committed");
      g_batches->leave();
      break;
    }
    benchmark::DoNotOptimize(result);
    g_batches->step(state, done, [] { g_bare = std::make_unique<BareShardedMap>(); });
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

// ---- Replay: a stored key, its result is copied out --------------------------------------------

void BM_Memory_Replay(benchmark::State& state) {
  Guard& guard = g_guarded->guard;
  const std::vector<std::string>& keys = replay_keys();
  std::size_t i = replay_start(state);
  idem_bench::Latency latency{16};
  for (auto _ : state) {
    const auto timer = latency.time();
    idem::Outcome<std::string> out =
        guard.execute(keys[i++ & (kReplayKeys - 1)], kPayload, handler);
    if (!out.replayed()) {
      state.SkipWithError("a stored key did not replay");
      break;
    }
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

void BM_Memory_Replay_bare(benchmark::State& state) {
  BareShardedMap& map = *g_bare;
  const std::vector<std::string>& keys = replay_keys();
  std::size_t i = replay_start(state);
  idem_bench::Latency latency{16};
  for (auto _ : state) {
    const auto timer = latency.time();
    std::optional<std::string> out = map.replay(keys[i++ & (kReplayKeys - 1)]);
    if (!out) {
      state.SkipWithError("a stored key did not replay");
      break;
    }
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

// ---- Refusals: a key in progress elsewhere, a key stored with another payload ------------------

// The replay keys claimed and never committed, straight on the store under the guard's
// effective key, so that every execute finds them held (FailFast: refused at once).
void setup_guarded_in_progress(const benchmark::State& state) {
  setup_guarded(state);
  for (const std::string& key : replay_keys()) {
    const idem::detail::EffectiveKey effective(kScope, "", key);
    (void)g_guarded->store.claim(
        idem::ClaimRequest{effective.view(), idem::xxh3_128(kPayload), kLease, kTtl});
  }
}

void setup_bare_in_progress(const benchmark::State& state) {
  setup_bare(state);
  for (const std::string& key : replay_keys()) g_bare->claim(key);
}

void BM_Memory_InProgress(benchmark::State& state) {
  Guard& guard = g_guarded->guard;
  const std::vector<std::string>& keys = replay_keys();
  std::size_t i = replay_start(state);
  idem_bench::Latency latency{16};
  for (auto _ : state) {
    const auto timer = latency.time();
    idem::Outcome<std::string> out =
        guard.execute(keys[i++ & (kReplayKeys - 1)], kPayload, handler);
    if (out.error() != idem::errc::in_progress) {
      state.SkipWithError("a held key was not refused as in progress");
      break;
    }
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

void BM_Memory_InProgress_bare(benchmark::State& state) {
  BareShardedMap& map = *g_bare;
  const std::vector<std::string>& keys = replay_keys();
  std::size_t i = replay_start(state);
  std::string result;
  idem_bench::Latency latency{16};
  for (auto _ : state) {
    const auto timer = latency.time();
    if (map.check(keys[i++ & (kReplayKeys - 1)], kPayloadTag, &result) !=
        BareShardedMap::Answer::in_progress) {
      state.SkipWithError("a held key was not refused as in progress");
      break;
    }
    benchmark::DoNotOptimize(result);
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

// Stored keys asked with another payload: refused as a mismatch.
void BM_Memory_Mismatch(benchmark::State& state) {
  Guard& guard = g_guarded->guard;
  const std::vector<std::string>& keys = replay_keys();
  std::size_t i = replay_start(state);
  idem_bench::Latency latency{16};
  for (auto _ : state) {
    const auto timer = latency.time();
    idem::Outcome<std::string> out =
        guard.execute(keys[i++ & (kReplayKeys - 1)], kOtherPayload, handler);
    if (out.error() != idem::errc::payload_mismatch) {
      state.SkipWithError("another payload was not refused as a mismatch");
      break;
    }
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

void BM_Memory_Mismatch_bare(benchmark::State& state) {
  BareShardedMap& map = *g_bare;
  const std::vector<std::string>& keys = replay_keys();
  std::size_t i = replay_start(state);
  std::string result;
  idem_bench::Latency latency{16};
  for (auto _ : state) {
    const auto timer = latency.time();
    if (map.check(keys[i++ & (kReplayKeys - 1)], kOtherPayloadTag, &result) !=
        BareShardedMap::Answer::mismatch) {
      state.SkipWithError("another payload was not refused as a mismatch");
      break;
    }
    benchmark::DoNotOptimize(result);
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

// ---- CachedStore over MemoryStore: a replay answered by the cache ----------------------------

using CachedGuard = idem::IdempotencyGuard<idem::CachedStore<idem::MemoryStore>>;

struct CachedState {
  idem::CachedStore<idem::MemoryStore> store{
      idem::CachedStoreOptions{.shards = kShards},
      idem::MemoryStoreOptions{.shards = kShards, .capacity = 0}};
  CachedGuard guard{store,
                    idem::Options{.scope = std::string(kScope), .lease = kLease, .ttl = kTtl}};
};

std::unique_ptr<CachedState> g_cached;

// Every replay below is a hit. The keys are first committed in the store behind the cache, then
// claimed once through the cache, which fills it: so the cache's records lie together in memory,
// as they do in front of a store that keeps its records elsewhere (a server, a file), and are not
// interleaved with the memory store's own (BM_Cached_ReplayInterleaved).
void setup_cached_replay(const benchmark::State&) {
  g_cached = std::make_unique<CachedState>();
  Guard behind{g_cached->store.inner(),
               idem::Options{.scope = std::string(kScope), .lease = kLease, .ttl = kTtl}};
  for (const std::string& key : replay_keys()) (void)behind.execute(key, kPayload, handler);
  for (const std::string& key : replay_keys()) {
    (void)g_cached->guard.execute(key, kPayload, handler);
  }
}

// Committed through the cache: each key's cache record is allocated right after the memory
// store's, so the cache's records are spread over twice the memory.
void setup_cached_replay_interleaved(const benchmark::State&) {
  g_cached = std::make_unique<CachedState>();
  for (const std::string& key : replay_keys()) {
    (void)g_cached->guard.execute(key, kPayload, handler);
  }
}
void teardown_cached(const benchmark::State&) { g_cached.reset(); }

// Compare with BM_Memory_Replay: the same keys and payload, answered by the cache in front.
void BM_Cached_Replay(benchmark::State& state) {
  CachedGuard& guard = g_cached->guard;
  const std::vector<std::string>& keys = replay_keys();
  std::size_t i = replay_start(state);
  const std::uint64_t hits_before = g_cached->store.hits();
  idem_bench::Latency latency{16};
  for (auto _ : state) {
    const auto timer = latency.time();
    idem::Outcome<std::string> out =
        guard.execute(keys[i++ & (kReplayKeys - 1)], kPayload, handler);
    if (!out.replayed()) {
      state.SkipWithError("a stored key did not replay");
      break;
    }
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    state.counters["hits"] = static_cast<double>(g_cached->store.hits() - hits_before);
  }
}

// The same hits, the cache filled as its records are committed (setup_cached_replay_interleaved).
void BM_Cached_ReplayInterleaved(benchmark::State& state) { BM_Cached_Replay(state); }

// A cache hit's backend work is what the bare map's replay does: one lookup, one copy.
void BM_Cached_Replay_bare(benchmark::State& state) { BM_Memory_Replay_bare(state); }
void BM_Cached_ReplayInterleaved_bare(benchmark::State& state) { BM_Memory_Replay_bare(state); }

// ---- Null store: the guard's own CPU, with a store that does nothing ---------------------------

// Satisfies idem::Store and does no work: every claim is acquired, everything else succeeds.
struct NullStore {
  idem::Result<idem::Claim> claim(const idem::ClaimRequest&) {
    return idem::Claim{.status = idem::ClaimStatus::acquired, .fence = 1};
  }
  idem::Status commit(const idem::Ticket&, const idem::Completion&) { return {}; }
  idem::Status abort(const idem::Ticket&) { return {}; }
  idem::Status extend(const idem::Ticket&, std::chrono::milliseconds) { return {}; }
};
static_assert(idem::Store<NullStore>);

constexpr std::string_view kNullKey = "req-0-1000000000042";

// Validation, effective key, payload fingerprint, claim, handler, encode, commit, Outcome.
void BM_Guard_NullStore(benchmark::State& state) {
  NullStore store;
  idem::IdempotencyGuard guard{
      store, idem::Options{.scope = std::string(kScope), .lease = kLease, .ttl = kTtl}};
  for (auto _ : state) {
    idem::Outcome<std::string> out = guard.execute(kNullKey, kPayload, handler);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations());
}

// The null store's claim and commit called directly around the same handler.
void BM_Guard_NullStore_bare(benchmark::State& state) {
  NullStore store;
  for (auto _ : state) {
    idem::Result<idem::Claim> claim = store.claim(idem::ClaimRequest{kNullKey, {}, kLease, kTtl});
    benchmark::DoNotOptimize(claim);
    std::string result = handler();
    idem::Status status =
        store.commit(idem::Ticket{kNullKey, claim.value().fence},
                     idem::Completion{idem::ClaimStatus::completed, result, kTtl});
    benchmark::DoNotOptimize(status);
    benchmark::DoNotOptimize(result);
  }
  state.SetItemsProcessed(state.iterations());
}

#ifdef IDEM_BENCH_COUNT_ALLOCS
// ---- Allocations per call (idem_bench_alloc) ----------------------------------------------------

// Runs `call` once per iteration and reports the heap allocations of this thread per call.
// The tables grow during a fresh run, so their rehashes count too (equally on both sides).
template <class Call>
void count_allocations(benchmark::State& state, Call&& call) {
  const std::uint64_t before = t_allocations;
  for (auto _ : state) {
    if (!call()) {
      state.SkipWithError("the call did not do what the benchmark measures");
      break;
    }
  }
  state.counters["allocs_per_call"] = benchmark::Counter(
      static_cast<double>(t_allocations - before), benchmark::Counter::kAvgIterations);
}

void BM_Alloc_Fresh(benchmark::State& state) {
  KeyMaker keys(0);
  count_allocations(state, [&] {
    idem::Outcome<std::string> out = g_guarded->guard.execute(keys.next(), kPayload, handler);
    benchmark::DoNotOptimize(out);
    return out.recorded();
  });
}

void BM_Alloc_Fresh_bare(benchmark::State& state) {
  KeyMaker keys(0);
  count_allocations(state, [&] {
    const std::string_view key = keys.next();
    if (!g_bare->claim(key)) return false;
    std::string result = handler();
    benchmark::DoNotOptimize(result);
    return g_bare->commit(key, result);
  });
}

void BM_Alloc_Replay(benchmark::State& state) {
  const std::vector<std::string>& keys = replay_keys();
  std::size_t i = 0;
  count_allocations(state, [&] {
    idem::Outcome<std::string> out =
        g_guarded->guard.execute(keys[i++ & (kReplayKeys - 1)], kPayload, handler);
    benchmark::DoNotOptimize(out);
    return out.replayed();
  });
}

void BM_Alloc_Replay_bare(benchmark::State& state) {
  const std::vector<std::string>& keys = replay_keys();
  std::size_t i = 0;
  count_allocations(state, [&] {
    std::optional<std::string> out = g_bare->replay(keys[i++ & (kReplayKeys - 1)]);
    benchmark::DoNotOptimize(out);
    return out.has_value();
  });
}

void BM_Alloc_CachedReplay(benchmark::State& state) {
  const std::vector<std::string>& keys = replay_keys();
  std::size_t i = 0;
  count_allocations(state, [&] {
    idem::Outcome<std::string> out =
        g_cached->guard.execute(keys[i++ & (kReplayKeys - 1)], kPayload, handler);
    benchmark::DoNotOptimize(out);
    return out.replayed();
  });
}

void BM_Alloc_CachedReplay_bare(benchmark::State& state) { BM_Alloc_Replay_bare(state); }
#endif

}  // namespace

#ifdef IDEM_BENCH_COUNT_ALLOCS
// A fixed number of calls, one thread: the counts are exact, not sampled.
constexpr benchmark::IterationCount kAllocCalls = 20'000;
BENCHMARK(BM_Alloc_Fresh)
    ->Setup(setup_guarded)
    ->Teardown(teardown_guarded)
    ->Iterations(kAllocCalls);
BENCHMARK(BM_Alloc_Fresh_bare)->Setup(setup_bare)->Teardown(teardown_bare)->Iterations(kAllocCalls);
BENCHMARK(BM_Alloc_Replay)
    ->Setup(setup_guarded_replay)
    ->Teardown(teardown_guarded)
    ->Iterations(kAllocCalls);
BENCHMARK(BM_Alloc_Replay_bare)
    ->Setup(setup_bare_replay)
    ->Teardown(teardown_bare)
    ->Iterations(kAllocCalls);
BENCHMARK(BM_Alloc_CachedReplay)
    ->Setup(setup_cached_replay)
    ->Teardown(teardown_cached)
    ->Iterations(kAllocCalls);
BENCHMARK(BM_Alloc_CachedReplay_bare)
    ->Setup(setup_bare_replay)
    ->Teardown(teardown_bare)
    ->Iterations(kAllocCalls);
#else
BENCHMARK(BM_Memory_Fresh)
    ->Setup(setup_guarded_fresh)
    ->Teardown(teardown_guarded_fresh)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Memory_Fresh_bare)
    ->Setup(setup_bare_fresh)
    ->Teardown(teardown_bare_fresh)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Memory_Replay)
    ->Setup(setup_guarded_replay)
    ->Teardown(teardown_guarded)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Memory_Replay_bare)
    ->Setup(setup_bare_replay)
    ->Teardown(teardown_bare)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Memory_InProgress)
    ->Setup(setup_guarded_in_progress)
    ->Teardown(teardown_guarded)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Memory_InProgress_bare)
    ->Setup(setup_bare_in_progress)
    ->Teardown(teardown_bare)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Memory_Mismatch)
    ->Setup(setup_guarded_replay)
    ->Teardown(teardown_guarded)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Memory_Mismatch_bare)
    ->Setup(setup_bare_replay)
    ->Teardown(teardown_bare)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Cached_Replay)
    ->Setup(setup_cached_replay)
    ->Teardown(teardown_cached)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Cached_ReplayInterleaved)
    ->Setup(setup_cached_replay_interleaved)
    ->Teardown(teardown_cached)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Cached_Replay_bare)
    ->Setup(setup_bare_replay)
    ->Teardown(teardown_bare)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Cached_ReplayInterleaved_bare)
    ->Setup(setup_bare_replay)
    ->Teardown(teardown_bare)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_Guard_NullStore)->Threads(1)->UseRealTime();
BENCHMARK(BM_Guard_NullStore_bare)->Threads(1)->UseRealTime();
#endif

BENCHMARK_MAIN();
