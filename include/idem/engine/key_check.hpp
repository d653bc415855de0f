#pragma once
// The guard's check of a key before any store call (docs/design.md §5, step 1).

#include <string>
#include <string_view>

#include "idem/error.hpp"
#include "idem/key.hpp"
#include "idem/observer.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"

namespace idem::detail {

/// key_invalid when the id is empty, or the id or the principal is over max_key_size.
inline Failure check_key(const Options& options, const Key& key) {
  if (key.id.empty()) return make_failure(errc::key_invalid, "idempotency key is empty");
  if (key.id.size() > options.max_key_size) {
    return make_failure(errc::key_invalid, "idempotency key is " + std::to_string(key.id.size()) +
                                               " bytes; the limit is " +
                                               std::to_string(options.max_key_size));
  }
  if (key.principal.size() > options.max_key_size) {
    return make_failure(errc::key_invalid, "principal is " + std::to_string(key.principal.size()) +
                                               " bytes; the limit is " +
                                               std::to_string(options.max_key_size));
  }
  return {};
}

/// check_key, and a refusal reported to the observer (Event::rejected) with the guard's store.
inline Failure validate_key(const Options& options, const Key& key, std::string_view store_name) {
  Failure bad = check_key(options, key);
  if (bad.code && options.observer) {
    options.observer->notify(
        EventInfo{Event::rejected, options.scope, key.id, 0, bad.code, store_name});
  }
  return bad;
}

}  // namespace idem::detail
