#pragma once
// How the guards call a handler that may take their context (idem::Context, idem::AsyncContext)
// after any leading arguments (a batch item's index), or not: one rule for every guard.

#include <functional>
#include <type_traits>
#include <utility>

namespace idem::detail {

template <class Fn, class Ctx, class... Lead>
constexpr bool kTakesContext = std::is_invocable_v<Fn&, Lead..., Ctx&>;

template <bool TakesContext, class Fn, class Ctx, class... Lead>
struct HandlerReturnOf {
  using type = std::remove_cvref_t<std::invoke_result_t<Fn&, Lead..., Ctx&>>;
};
template <class Fn, class Ctx, class... Lead>
struct HandlerReturnOf<false, Fn, Ctx, Lead...> {
  using type = std::remove_cvref_t<std::invoke_result_t<Fn&, Lead...>>;
};

/// What `fn` returns, called with `Lead...` and, if it takes one, a `Ctx&`.
template <class Fn, class Ctx, class... Lead>
using handler_return_t =
    typename HandlerReturnOf<kTakesContext<Fn, Ctx, Lead...>, Fn, Ctx, Lead...>::type;

/// Calls `fn` with `lead...` and, if it takes one, `context`.
template <class Fn, class Ctx, class... Lead>
decltype(auto) call_handler(Fn& fn, Ctx& context, Lead&&... lead) {
  if constexpr (kTakesContext<Fn, Ctx, Lead...>) {
    return std::invoke(fn, std::forward<Lead>(lead)..., context);
  } else {
    return std::invoke(fn, std::forward<Lead>(lead)...);
  }
}

}  // namespace idem::detail
