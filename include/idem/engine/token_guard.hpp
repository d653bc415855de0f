#pragma once
// What the token stores' execute() and begin<T>() share (token_invalid before any store call
// for a malformed token).

#include <string_view>
#include <type_traits>

#include "idem/codec.hpp"
#include "idem/engine/token.hpp"
#include "idem/guard.hpp"
#include "idem/key.hpp"
#include "idem/outcome.hpp"

namespace idem::detail {

/// guard.begin<T>(Key{token}, payload), or an Attempt refused as token_invalid (reported to the
/// observer as rejected) when `token` is not shaped like an issued one.
template <class T, class S>
typename IdempotencyGuard<S>::template Attempt<T> begin_token(IdempotencyGuard<S>& guard,
                                                              std::string_view token,
                                                              std::string_view payload) {
  require_codable<T>();
  using Attempt = typename IdempotencyGuard<S>::template Attempt<T>;
  if (!token_shaped(token)) {
    return Attempt(malformed_token(guard.options(), token),
                   StoreTarget<S>(guard.store(), guard.options(), Key{token}, {}, {}));
  }
  return guard.template begin<T>(Key{token}, payload);
}

/// execute() over begin_token(): runs fn once for the token, as IdempotencyGuard::execute does.
template <class S, class Fn>
Outcome<handler_result_t<Fn>> execute_token(IdempotencyGuard<S>& guard, std::string_view token,
                                            std::string_view payload, Fn& fn) {
  using R = handler_result_t<Fn>;
  require_codable<R>();
  if (!token_shaped(token)) return Outcome<R>::failed(malformed_token(guard.options(), token));
  return guard.execute(Key{token}, payload, fn);
}

}  // namespace idem::detail
