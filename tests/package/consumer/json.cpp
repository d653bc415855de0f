// The JSON codec: a type with to_json/from_json is a result through idem::json alone.
#include <cstdio>
#include <idem/codecs/json.hpp>
#include <idem/idem.hpp>
#include <string>

struct Receipt {
  std::string id;
  long cents = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Receipt, id, cents)

int main() {
  idem::MemoryStore store;
  idem::IdempotencyGuard guard{store, idem::Options{.scope = "package"}};
  int runs = 0;
  auto pay = [&] {
    return guard.execute("k", [&] { return Receipt{"r" + std::to_string(++runs), 5}; });
  };
  const auto first = pay();
  const auto again = pay();
  const bool ok = first && again && again.replayed() && again.value().id == "r1" && runs == 1;
  std::printf("idem::json consumer: %s\n", ok ? "ok" : "replay differs");
  return ok ? 0 : 1;
}
