#pragma once
// ThreadCounters: N counters that many threads add to without a locked instruction or a shared
// cache line: each thread adds to a block of its own (relaxed load and store) and a read sums the
// blocks. A thread finds its block through a thread-local cache keyed by a never-reused id; an
// exiting thread hands its blocks back, counts kept, for the next thread to adopt.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace idem::detail {

template <std::size_t N>
class ThreadCounters {
  struct Block;

 public:
  ThreadCounters() = default;
  ThreadCounters(const ThreadCounters&) = delete;
  ThreadCounters& operator=(const ThreadCounters&) = delete;

  void add(std::size_t i) noexcept { local().add(i); }

  /// The calling thread's own counts, valid while the counters live, used only on this thread.
  class Local {
   public:
    Local() = default;
    void add(std::size_t i) const noexcept {
      std::atomic<std::uint64_t>& v = block_->values[i];
      if (block_->many_writers) {
        v.fetch_add(1, std::memory_order_relaxed);
      } else {
        v.store(v.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      }
    }

   private:
    friend class ThreadCounters;
    explicit Local(Block* block) noexcept : block_(block) {}
    Block* block_ = nullptr;
  };
  Local local() noexcept { return Local(&block()); }

  /// The sum over every thread's block: exact once the adding threads are done (counts only grow).
  std::uint64_t get(std::size_t i) const noexcept {
    std::uint64_t sum = 0;
    for (const Block* b = shared_->head.load(std::memory_order_acquire); b != nullptr;
         b = b->next) {
      sum += b->values[i].load(std::memory_order_relaxed);
    }
    return sum;
  }

 private:
  struct alignas(64) Block {
    std::array<std::atomic<std::uint64_t>, N> values{};
    std::atomic<bool> owned{true};  // a live thread writes to it
    Block* next = nullptr;          // fixed once the block is in the list
    bool many_writers = false;      // the overflow block: shared, so added to with a locked add
  };

  // The blocks, kept alive for exiting threads that hand theirs back. The overflow block counts
  // (with a locked add) for threads that could not get one of their own (memory ran out).
  struct Shared {
    Block overflow;
    std::atomic<Block*> head{&overflow};
    Shared() { overflow.many_writers = true; }
    Shared(const Shared&) = delete;
    Shared& operator=(const Shared&) = delete;
    ~Shared() {
      for (Block* b = head.load(); b != &overflow;) delete std::exchange(b, b->next);
    }
  };

  // Every block a thread took, handed back when the thread exits if its counters still live.
  struct Taken {
    struct Entry {
      std::uint64_t id;
      std::weak_ptr<Shared> shared;
      Block* block;
    };
    std::vector<Entry> entries;
    Taken() = default;
    Taken(const Taken&) = delete;
    Taken& operator=(const Taken&) = delete;
    ~Taken() {
      for (Entry& e : entries) {
        if (std::shared_ptr<Shared> alive = e.shared.lock()) {
          e.block->owned.store(false, std::memory_order_release);
        }
      }
    }
  };

  struct CacheEntry {
    std::uint64_t id;
    Block* block;
  };
  static constexpr std::size_t kCache = 4;
  // Trivially destructible, so reading it needs no thread-local initialisation check.
  struct Cache {
    std::array<CacheEntry, kCache> entries;
    std::size_t next;
  };

  static std::uint64_t new_id() noexcept {
    static std::atomic<std::uint64_t> last{0};
    return last.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  Block& block() noexcept {
    thread_local Cache cache{};
    for (const CacheEntry& e : cache.entries) {
      if (e.id == id_) return *e.block;
    }
    Block* b = take();
    cache.entries[cache.next] = CacheEntry{id_, b};
    cache.next = (cache.next + 1) % kCache;
    return *b;
  }

  // This thread's block: the one it took before (evicted from the cache since), one handed back
  // by an exited thread, a new one, or the overflow block when memory ran out.
  Block* take() noexcept {
    try {
      return take_own();
    } catch (const std::bad_alloc&) {
      return &shared_->overflow;
    }
  }

  Block* take_own() {
    thread_local Taken taken;
    // Drops the entries of counters gone, by hand: std::erase_if costs every includer of the
    // core compile time.
    for (std::size_t i = 0; i < taken.entries.size();) {
      typename Taken::Entry& e = taken.entries[i];
      if (e.id == id_) return e.block;  // this counters' own: alive
      if (e.shared.expired()) {
        if (&e != &taken.entries.back()) e = std::move(taken.entries.back());
        taken.entries.pop_back();
      } else {
        ++i;
      }
    }
    Block* b = nullptr;
    for (Block* p = shared_->head.load(std::memory_order_acquire); p != &shared_->overflow;
         p = p->next) {
      bool free = false;
      if (p->owned.compare_exchange_strong(free, true, std::memory_order_acquire)) {
        b = p;
        break;
      }
    }
    if (b == nullptr) {
      b = new Block;
      b->next = shared_->head.load(std::memory_order_relaxed);
      while (!shared_->head.compare_exchange_weak(b->next, b, std::memory_order_release,
                                                  std::memory_order_relaxed)) {
      }
    }
    taken.entries.push_back(typename Taken::Entry{id_, shared_, b});
    return b;
  }

  const std::uint64_t id_ = new_id();
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
};

}  // namespace idem::detail
