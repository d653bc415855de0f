#pragma once
// Options of an IdempotencyGuard. Every field has a default; most services set only the scope.

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "idem/clock.hpp"
#include "idem/fingerprint.hpp"
#include "idem/observer.hpp"

namespace idem {

/// When another caller holds the key: answer errc::in_progress at once.
struct FailFast {};

/// When another caller holds the key: poll with backoff until it completes (replay), its lease
/// expires (take over) or the timeout passes (errc::in_progress). Over a WakingStore with the
/// real clock, each pause is a wait the hold's end cuts short, bounded by max_backoff.
struct Wait {
  std::chrono::milliseconds timeout{5000};       // total time to wait
  std::chrono::milliseconds initial_backoff{2};  // first pause; doubles each poll
  std::chrono::milliseconds max_backoff{100};    // longest pause between polls
};

using InProgressPolicy = std::variant<FailFast, Wait>;

/// Retries of a commit that failed after the handler succeeded.
struct CommitRetry {
  int attempts = 3;                            // tries in all, the first included
  std::chrono::milliseconds backoff{10};       // first pause; doubles each try
  std::chrono::milliseconds max_backoff{200};  // longest pause between tries
};

/// Every field has a default, and setting some keeps the others'. `scope`, `ttl` and
/// `in_progress` may stay unset so that a strategy built on a guard can put its own default there;
/// a plain IdempotencyGuard reads them as no scope, 24 hours and FailFast.
struct Options {
  /// Names the operation ("payments.charge"); part of every effective key. Empty: the owner's
  /// scope ("version", "state", "request-id", "token"), or none for a plain guard.
  std::string scope{};
  std::chrono::milliseconds lease{std::chrono::seconds{30}};  ///< a holder's time before takeover
  /// How long a completed (or failed) record replays; positive (else std::invalid_argument).
  /// Unset: the owner's default (24 hours; 10 minutes for the request-ID caches).
  std::optional<std::chrono::milliseconds> ttl{};
  /// What a caller does when the key is held by another: FailFast or Wait{...}. Unset: FailFast,
  /// or Wait{} for the version and state-machine stores (their holders are short transactions).
  std::optional<InProgressPolicy> in_progress{};
  /// false (default): a handler that throws releases the key, so a retry runs it again.
  /// true: the failure is recorded and replayed as errc::handler_failed until ttl.
  bool remember_failures = false;
  std::size_t max_key_size = 256;  ///< longest id and principal, in bytes (else key_invalid)
  std::size_t max_result_size = std::size_t{1} << 20;  ///< largest result (else result_too_large)
  PayloadHash hash = &xxh3_128;  ///< payload fingerprint function (default XXH3-128)
  /// Time source for waiting (default: steady clock). Shared stores use their own clock.
  std::shared_ptr<Clock> clock = nullptr;
  std::shared_ptr<Observer> observer = nullptr;  ///< counters and events; none costs nothing
  CommitRetry commit_retry{};  ///< retries of a failed commit before a result goes unrecorded
  /// true: execute() keeps each claimed run's payload with its record (one more store write per
  /// fresh run), so an idem::Completer can finish a run whose holder died. Needs a
  /// CompletableStore.
  bool keep_request = false;
  std::size_t max_kept_request = std::size_t{64} << 10;  ///< larger payloads run, not kept
};

/// What one call may choose apart from its guard's Options (IdempotencyGuard::begin, execute).
struct CallOptions {
  /// The holder's lease for this call; zero keeps the guard's (Options::lease). A call that has
  /// a deadline (an RPC's) claims for the deadline's time at once: no extend after the claim.
  std::chrono::milliseconds lease{0};
};

/// The defaults an owner of a guard gives the fields its user left unset (see Options).
struct OptionDefaults {
  std::string_view scope{};
  std::chrono::milliseconds ttl{std::chrono::hours{24}};
  InProgressPolicy in_progress = FailFast{};
};

/// `options` with its unset fields filled from `defaults`; fields the user set are kept.
inline Options with_defaults(Options options, const OptionDefaults& defaults) {
  if (options.scope.empty()) options.scope = defaults.scope;
  if (!options.ttl) options.ttl = defaults.ttl;
  if (!options.in_progress) options.in_progress = defaults.in_progress;
  return options;
}

}  // namespace idem
