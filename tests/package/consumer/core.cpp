// The core alone: one guarded call over the in-memory store, with a payload (so the XXH3
// fingerprint from libxxhash is linked and run), and a replay. Proves the package is usable, not
// just findable.
#include <cstdio>
#include <idem/idem.hpp>
#include <string>

#ifdef XXH_INLINE_ALL
#error "XXH_INLINE_ALL leaked from <idem/idem.hpp>"
#endif

int main() {
  idem::MemoryStore store;
  idem::IdempotencyGuard guard{store, idem::Options{.scope = "pkg"}};
  auto first = guard.execute(idem::Key{"k"}, std::string("payload"), [] { return 42; });
  auto again = guard.execute(idem::Key{"k"}, std::string("payload"), [] { return 7; });
  const bool ok = first.has_value() && first.value() == 42 && again.has_value() &&
                  again.replayed() && again.value() == 42;
  std::printf("idem %d.%d.%d core consumer: %s\n", IDEM_VERSION_MAJOR, IDEM_VERSION_MINOR,
              IDEM_VERSION_PATCH, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
