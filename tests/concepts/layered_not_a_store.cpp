// Must NOT compile: a layer over a type that is not an idem::Store. The test that builds this file
// passes only if the compiler prints the layer's own explanation.

#include "idem/layered_guard.hpp"

struct NotAStore {
  int claim(int) { return 0; }
};

int main() {
  NotAStore store;
  idem::RecordLayer<NotAStore> layer{store, idem::LayerSettings{.scope = "s"}};
  return layer.settings().scope.empty() ? 1 : 0;
}
