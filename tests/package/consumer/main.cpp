// Builds and runs one guarded call: proves the package is usable, not just findable.
#include <idem/idem.hpp>

int main() {
  idem::MemoryStore store;
  idem::IdempotencyGuard guard{store, idem::Options{.scope = "pkg"}};
  auto r = guard.execute(idem::Key{"k"}, [] { return 42; });
  return r.has_value() && r.value() == 42 ? 0 : 1;
}
