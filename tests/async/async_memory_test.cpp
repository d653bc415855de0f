// AsyncGuard on MemoryStore through ImmediateStore: every call completes at once.

#include "async/async_guard_cases.hpp"
#include "idem/stores/memory_store.hpp"

// Not in an anonymous namespace: the coroutine frames of the header's templates hold these types.
namespace idem::testing {

struct MemoryBackend : IoRunner {
  using Store = ImmediateStore<MemoryStore>;
  void set_up() {}
  bool ready() const { return true; }
  Store& store() { return async_; }

  MemoryStore memory_;
  Store async_{memory_};
};

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, AsyncGuardCases, MemoryBackend);

TEST(ImmediateStore, IsAnAsyncStore) {
  static_assert(AsyncStore<ImmediateStore<MemoryStore>>);
  static_assert(!AsyncStore<MemoryStore>);
}

}  // namespace idem::testing
