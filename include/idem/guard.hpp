#pragma once
// IdempotencyGuard: claim -> run the handler -> commit | abort, over any idem::Store.

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "idem/codec.hpp"
#include "idem/context.hpp"
#include "idem/detail/effective_key.hpp"
#include "idem/detail/failure_record.hpp"
#include "idem/detail/protocol.hpp"
#include "idem/error.hpp"
#include "idem/key.hpp"
#include "idem/observer.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

namespace detail {
template <class Fn>
constexpr bool kTakesContext = std::is_invocable_v<Fn&, Context&>;

template <class Fn, bool = kTakesContext<Fn>>
struct HandlerResult {
  using type = std::remove_cvref_t<std::invoke_result_t<Fn&, Context&>>;
};
template <class Fn>
struct HandlerResult<Fn, false> {
  using type = std::remove_cvref_t<std::invoke_result_t<Fn&>>;
};

inline std::string exception_message(std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "handler threw a non-standard exception";
  }
}
}  // namespace detail

/// The result type of a handler `fn`, called with or without an idem::Context&.
template <class Fn>
using handler_result_t = typename detail::HandlerResult<Fn>::type;

/// Makes a handler idempotent: for each key the handler runs once, and repeats of the key get
/// the stored result (docs/design.md §5). Thread-safe when the store is; holds a reference to
/// the store.
///
/// Cost in store round trips: a fresh key is one claim and one commit; a replay is one claim;
/// a refusal is one claim (or one per poll under the Wait policy).
template <class S>
class IdempotencyGuard {
  static_assert(Store<S>,
                "idem::IdempotencyGuard<S>: S is not an idem::Store. A store needs "
                "claim(const ClaimRequest&) -> Result<Claim>, commit(const Ticket&, const "
                "Completion&) -> Status, abort(const Ticket&) -> Status and extend(const Ticket&, "
                "std::chrono::milliseconds) -> Status (see idem/store.hpp).");

 public:
  /// Throws std::invalid_argument when an option is out of range (lease not positive, ttl
  /// negative). Unset options take their defaults (see idem::Options).
  explicit IdempotencyGuard(S& store, Options options = {})
      : store_(store), options_(with_defaults(std::move(options), OptionDefaults{})) {
    if (options_.lease.count() <= 0)
      throw std::invalid_argument("idem: Options::lease must be > 0");
    if (options_.ttl.count() < 0) throw std::invalid_argument("idem: Options::ttl must be >= 0");
    if (options_.hash == nullptr) throw std::invalid_argument("idem: Options::hash must be set");
    detail::check_commit_retry(options_.commit_retry, "Options");
    if (const Wait* wait = std::get_if<Wait>(&*options_.in_progress)) {
      // A zero first pause would never grow: the wait would spin instead of backing off.
      if (wait->timeout.count() < 0 || wait->initial_backoff.count() <= 0 ||
          wait->max_backoff < wait->initial_backoff) {
        throw std::invalid_argument(
            "idem: Wait needs timeout >= 0 and 0 < initial_backoff <= max_backoff");
      }
    }
    if (!options_.clock) options_.clock = steady_clock();
  }

  /// Runs `fn` once for `key`; repeats replay its result. Same as execute(key, "", fn): without
  /// a payload every repeat of the key matches.
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(const Key& key, Fn&& fn) {
    return execute(key, std::string_view{}, std::forward<Fn>(fn));
  }

  /// Runs `fn` once for `key`; repeats with the same payload replay its result, a repeat with
  /// another payload is errc::payload_mismatch. `fn` may take an idem::Context&. If `fn`
  /// throws, the claim is released (or recorded as failed under remember_failures) and the
  /// exception propagates.
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(const Key& key, std::string_view payload,
                                                      Fn&& fn) {
    using R = handler_result_t<Fn>;
    static_assert(std::is_void_v<R> || Codable<R>,
                  "idem: the handler's result type has no idem::codec<T>; specialise idem::codec "
                  "for it (see idem/codec.hpp)");
    using Out = Outcome<R>;

    if (Failure bad = validate(key); bad.code) {
      notify(Event::rejected, key, 0, bad.code);
      return Out::failed(std::move(bad));
    }
    const detail::EffectiveKey effective(options_.scope, key.principal, key.id);
    const Wait* wait = std::get_if<Wait>(&*options_.in_progress);
    const ClaimRequest request{effective.view(), options_.hash(payload), options_.lease,
                               std::max(options_.ttl, options_.lease),
                               wait != nullptr ? wait->timeout : std::chrono::milliseconds{0},
                               /*rewindable=*/options_.remember_failures};

    Result<Claim> claimed = claim_or_wait(request, key);
    if (!claimed) return Out::failed(std::move(claimed).failure());
    Claim& claim = claimed.value();
    switch (claim.status) {
      case ClaimStatus::completed:
        return replay<R>(std::move(claim.result), key, claim.fence);
      case ClaimStatus::failed: {
        Failure failure = detail::decode_failure(claim.result);
        const bool corrupt = failure.code == errc::record_corrupt;
        notify(corrupt ? Event::store_error : Event::replayed, key, claim.fence, failure.code);
        return Out::failed(std::move(failure), /*replayed=*/!corrupt);
      }
      default:
        break;  // acquired: the other statuses were turned into failures above
    }

    const Ticket ticket{effective.view(), claim.fence};
    if (claim.took_over) notify(Event::took_over, key, ticket.fence, {});
    return run<R>(ticket, claim.transaction, key, std::forward<Fn>(fn));
  }

  const Options& options() const noexcept { return options_; }
  S& store() noexcept { return store_; }

 private:
  Failure validate(const Key& key) const {
    if (key.id.empty()) return make_failure(errc::key_invalid, "idempotency key is empty");
    if (key.id.size() > options_.max_key_size) {
      return make_failure(errc::key_invalid, "idempotency key is " + std::to_string(key.id.size()) +
                                                 " bytes; the limit is " +
                                                 std::to_string(options_.max_key_size));
    }
    if (key.principal.size() > options_.max_key_size) {
      return make_failure(errc::key_invalid,
                          "principal is " + std::to_string(key.principal.size()) +
                              " bytes; the limit is " + std::to_string(options_.max_key_size));
    }
    return {};
  }

  // Claims the key; refusals become failures. Under Wait, polls while another holds the key.
  Result<Claim> claim_or_wait(const ClaimRequest& request, const Key& key) {
    const Wait* wait = std::get_if<Wait>(&*options_.in_progress);
    Clock& clock = *options_.clock;
    Clock::time_point deadline{};
    std::chrono::milliseconds backoff{};
    for (bool first = true;; first = false) {
      Result<Claim> claim = store_.claim(request);
      if (!claim) {
        // A store's own refusal (token, transition, version) is not a failing store.
        const std::error_code e = claim.error();
        const bool refused = e == errc::token_invalid || e == errc::invalid_transition ||
                             e == errc::version_conflict;
        notify(refused ? Event::rejected : Event::store_error, key, 0, e);
        return claim;
      }
      if (claim->status == ClaimStatus::mismatch) {
        notify(Event::mismatched, key, claim->fence, make_error_code(errc::payload_mismatch));
        // The code's own message says it all; an empty one costs no allocation on this path.
        return make_failure(errc::payload_mismatch);
      }
      if (claim->status != ClaimStatus::in_progress) return claim;

      if (wait != nullptr) {
        if (first) {
          deadline = clock.now() + wait->timeout;
          backoff = wait->initial_backoff;
        }
        const auto now = clock.now();
        if (now < deadline) {
          auto pause = std::min<Clock::duration>(backoff, deadline - now);
          // The holder's lease ending is the moment a takeover becomes possible: look then.
          if (claim->lease_remaining.count() > 0) {
            pause = std::min<Clock::duration>(
                pause, claim->lease_remaining + std::chrono::milliseconds{1});
          }
          clock.sleep_for(pause);
          backoff = std::min(backoff * 2, wait->max_backoff);
          continue;
        }
      }
      notify(Event::in_progress, key, claim->fence, make_error_code(errc::in_progress));
      return make_failure(errc::in_progress);
    }
  }

  template <class R>
  Outcome<R> replay(std::string&& bytes, const Key& key, Fence fence) {
    Outcome<R> out = detail::decode_replay<R>(std::move(bytes));
    notify(out ? Event::replayed : Event::store_error, key, fence, out.error());
    return out;
  }

  template <class R, class Fn>
  Outcome<R> run(const Ticket& ticket, NativeTransaction transaction, const Key& key, Fn&& fn) {
    using Stored = std::conditional_t<std::is_void_v<R>, std::monostate, R>;
    std::string encoded;
    std::string_view bytes;       // the result as stored: a view of `encoded` or of the value
    std::optional<Stored> value;  // results need not be default-constructible
    try {
      Context context(store_, ticket, options_.lease, transaction);
      if constexpr (std::is_void_v<R>) {
        call(fn, context);
        value.emplace();
      } else {
        value.emplace(call(fn, context));
      }
    } catch (...) {
      settle_failure(ticket, key, std::current_exception(), options_.remember_failures,
                     /*undo_effects=*/true);
      throw;
    }
    if constexpr (!std::is_void_v<R>) {
      try {
        if constexpr (requires { codec<R>::view(*value); }) {
          bytes = codec<R>::view(*value);
        } else {
          encoded = codec<R>::encode(*value);
          bytes = encoded;
        }
      } catch (...) {
        // The handler's effect happened: remember the failure whatever the options say, so a
        // retry cannot run it a second time.
        settle_failure(ticket, key, std::current_exception(), /*remember=*/true,
                       /*undo_effects=*/false);
        throw;
      }
    }
    notify(Event::executed, key, ticket.fence, {});

    if (bytes.size() > options_.max_result_size) {
      // The handler's effect happened: repeats must not run it again, so its key remembers
      // result_too_large; this caller still gets the value it produced.
      Failure too_large =
          make_failure(errc::result_too_large, "result is " + std::to_string(bytes.size()) +
                                                   " bytes; the limit is " +
                                                   std::to_string(options_.max_result_size));
      const std::string failure = detail::encode_failure(errc::result_too_large, too_large.message);
      (void)commit_with_retry(ticket, Completion{ClaimStatus::failed, failure, options_.ttl}, key);
      notify(Event::result_unrecorded, key, ticket.fence, too_large.code);
      return Outcome<R>::fresh(std::move(*value), std::move(too_large));
    }

    Status committed =
        commit_with_retry(ticket, Completion{ClaimStatus::completed, bytes, options_.ttl}, key);
    if (!committed) notify(Event::result_unrecorded, key, ticket.fence, committed.error());
    return Outcome<R>::fresh(std::move(*value), committed.failure());
  }

  template <class Fn>
  static decltype(auto) call(Fn& fn, Context& context) {
    if constexpr (detail::kTakesContext<Fn>) {
      return std::invoke(fn, context);
    } else {
      return std::invoke(fn);
    }
  }

  // The handler threw: release the key, or remember the failure, so it is never left stuck
  // until the lease runs out. `undo_effects`: the handler failed, so what it wrote through the
  // store's transaction (and an entity's move) must not commit with the remembered failure; a
  // store that cannot rewind them gets its key released instead. Failures here are reported,
  // never thrown over the handler's.
  void settle_failure(const Ticket& ticket, const Key& key, std::exception_ptr error,
                      bool remember, bool undo_effects) {
    if constexpr (RewindableStore<S>) {
      if (remember && undo_effects) {
        if (Status rewound = store_.rewind(ticket); !rewound) {
          report(rewound, key, ticket.fence);
          remember = false;
        }
      }
    }
    Status settled;
    if (remember) {
      const std::string failure =
          detail::encode_failure(errc::handler_failed, detail::exception_message(std::move(error)));
      settled = store_.commit(ticket, Completion{ClaimStatus::failed, failure, options_.ttl});
    } else {
      settled = store_.abort(ticket);
    }
    notify(Event::aborted, key, ticket.fence, {});
    if (!settled) report(settled, key, ticket.fence);
  }

  // Commits, retrying failures other than lease_lost with doubling pauses.
  Status commit_with_retry(const Ticket& ticket, const Completion& completion, const Key& key) {
    Status status = detail::commit_with_retry(
        options_.commit_retry, *options_.clock, [&] { return store_.commit(ticket, completion); },
        [&](const Status& failed) {
          notify(Event::commit_retried, key, ticket.fence, failed.error());
        });
    if (!status) report(status, key, ticket.fence);
    return status;
  }

  void report(const Status& status, const Key& key, Fence fence) {
    notify(status.error() == errc::lease_lost ? Event::lease_lost : Event::store_error, key, fence,
           status.error());
  }

  void notify(Event event, const Key& key, Fence fence, std::error_code error) {
    if (options_.observer)
      options_.observer->notify(EventInfo{event, options_.scope, key.id, fence, error});
  }

  S& store_;
  Options options_;
};

}  // namespace idem
