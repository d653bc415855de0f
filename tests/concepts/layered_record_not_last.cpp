// Must NOT compile: a LayeredGuard whose innermost (last) layer is not the record. The test that
// builds this file passes only if the compiler prints the guard's own explanation.

#include "idem/layered_guard.hpp"
#include "idem/memory/request_id_cache.hpp"

int main() {
  idem::MemoryStore records;
  idem::MemoryRequestIdCache cache;
  idem::LayeredGuard guard{idem::RecordLayer{records, idem::LayerSettings{.scope = "s"}},
                           idem::RequestIdLayer{cache}};
  return guard.execute({.request_id = "r", .business_key = "k"}, [] { return 1; }).value();
}
