// Keys from the client: the guard's key validation, the effective-key join of scope, principal
// and id, and the entity stores' operation key. Checked: an empty or over-long id or principal is
// key_invalid and the handler does not run; a valid key runs once, then replays; the join is
// injective (it parses back to the same triple), and so is an entity operation's key.

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/engine/entity.hpp"
#include "idem/guard.hpp"
#include "idem/memory/store.hpp"

namespace {

using idem::errc;
using idem::fuzz::is;

// Reads one length-prefixed part of an effective key back; false when the bytes are not one.
bool take_part(std::string_view key, std::size_t& at, std::string_view& part) {
  const auto n = idem::detail::get_varint(key, at);
  if (!n || *n > key.size() - at) return false;
  part = key.substr(at, *n);
  at += *n;
  return true;
}

void check_join(std::string_view scope, std::string_view principal, std::string_view id) {
  const idem::detail::EffectiveKey joined(scope, principal, id);
  const std::string_view key = joined.view();
  std::size_t at = 0;
  std::string_view s, p;
  IDEM_FUZZ_CHECK(take_part(key, at, s) && s == scope);
  IDEM_FUZZ_CHECK(take_part(key, at, p) && p == principal);
  IDEM_FUZZ_CHECK(key.substr(at) == id);
}

void check_entity_key(std::string_view scope, std::string_view entity, std::string_view op) {
  const std::string key = idem::detail::entity_op_key(scope, entity, op);
  std::size_t at = 0;
  std::string_view s, p, e, o;
  IDEM_FUZZ_CHECK(take_part(key, at, s) && s == scope);
  IDEM_FUZZ_CHECK(take_part(key, at, p) && p.empty());
  IDEM_FUZZ_CHECK(take_part(key, at, e) && e == entity);
  IDEM_FUZZ_CHECK(take_part(key, at, o) && o == op);
  IDEM_FUZZ_CHECK(at == key.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::size_t max_key = in.ConsumeIntegralInRange<std::size_t>(1, 300);
  const std::string scope = in.ConsumeRandomLengthString(64);
  const std::string principal = in.ConsumeRandomLengthString(400);
  const std::string id = in.ConsumeRandomLengthString(400);
  const std::string tail = in.ConsumeRemainingBytesAsString();

  check_join(scope, principal, id);
  check_entity_key(scope, id, principal);

  idem::MemoryStore store;
  idem::IdempotencyGuard guard{store, idem::Options{.scope = scope, .max_key_size = max_key}};
  const idem::Key key{id, principal};
  const bool valid = !id.empty() && id.size() <= max_key && principal.size() <= max_key;
  int runs = 0;
  auto first = guard.execute(key, tail, [&] {
    ++runs;
    return tail;
  });
  if (!valid) {
    IDEM_FUZZ_CHECK(is(first.error(), errc::key_invalid));
    IDEM_FUZZ_CHECK(runs == 0);
    return 0;
  }
  IDEM_FUZZ_CHECK(first.has_value() && first.executed() && first.value() == tail);
  auto again = guard.execute(key, tail, [&] {
    ++runs;
    return std::string("second run");
  });
  IDEM_FUZZ_CHECK(runs == 1);
  IDEM_FUZZ_CHECK(again.has_value() && again.replayed() && again.value() == tail);
  // Another principal with the same id is another intent.
  const std::string other = principal + "'";
  if (other.size() <= max_key) {
    auto theirs = guard.execute(idem::Key{id, other}, tail, [&] {
      ++runs;
      return tail;
    });
    IDEM_FUZZ_CHECK(runs == 2 && theirs.executed());
  }
  return 0;
}
