#pragma once
// Options of an IdempotencyGuard. Every field has a default; most services set only the scope.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <variant>

#include "idem/clock.hpp"
#include "idem/fingerprint.hpp"
#include "idem/observer.hpp"

namespace idem {

/// When another caller holds the key: answer errc::in_progress at once.
struct FailFast {};

/// When another caller holds the key: poll with backoff until it completes (replay), its lease
/// expires (take over) or the timeout passes (errc::in_progress).
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

struct Options {
  /// Names the operation ("payments.charge"); part of every effective key.
  std::string scope{};
  /// How long a holder may run before another caller may take the key over.
  std::chrono::milliseconds lease{std::chrono::seconds{30}};
  /// How long a completed (or failed) record replays.
  std::chrono::milliseconds ttl{std::chrono::hours{24}};
  /// What a caller does when the key is held by another: FailFast (default) or Wait{...}.
  InProgressPolicy in_progress = FailFast{};
  /// false (default): a handler that throws releases the key, so a retry runs it again.
  /// true: the failure is recorded and replayed as errc::handler_failed until ttl.
  bool remember_failures = false;
  /// Longest key id and longest principal, in bytes; longer ones are errc::key_invalid.
  std::size_t max_key_size = 256;
  /// Largest encoded result, in bytes; larger ones are errc::result_too_large.
  std::size_t max_result_size = std::size_t{1} << 20;
  /// Payload fingerprint function (default XXH3-128).
  PayloadHash hash = &xxh3_128;
  /// Time source for waiting (default: steady clock). Shared stores use their own clock.
  std::shared_ptr<Clock> clock = nullptr;
  /// Counters and events (default: none; costs nothing when absent).
  std::shared_ptr<Observer> observer = nullptr;
  /// Retries of a failed commit before a fresh result is returned unrecorded.
  CommitRetry commit_retry{};
};

}  // namespace idem
