// Must NOT compile: a guard over a type that is not an idem::Store. The test that builds this
// file passes only if the compiler prints the guard's own explanation.

#include "idem/idem.hpp"

struct NotAStore {
  int claim(int) { return 0; }
};

int main() {
  NotAStore store;
  idem::IdempotencyGuard<NotAStore> guard{store};
  return guard.execute("k", [] { return 1; }).value();
}
