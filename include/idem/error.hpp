#pragma once
// Error codes of idem: every refusal and failure is a std::error_code in the idem::errc category.

#include <string>
#include <string_view>
#include <system_error>

namespace idem {

/// Why a call did not produce a fresh or replayed value. Each code says whether a retry can help.
/// The values are stored (a failed record holds its code): new codes go last.
enum class errc : int {
  /// The key is empty, longer than Options::max_key_size, or otherwise unusable.
  /// Retry: never with the same key; fix the request (HTTP 400).
  key_invalid = 1,
  /// The key was first used with another payload: misuse, never a replay.
  /// Retry: never with this payload (HTTP 422).
  payload_mismatch,
  /// Another caller holds the key and has not finished. Retry: yes, later (HTTP 409).
  in_progress,
  /// The one-time token is unknown, expired or consumed by another request.
  /// Retry: with a new token (HTTP 400).
  token_invalid,
  /// The event is not allowed from the entity's current state. Retry: no (HTTP 409).
  invalid_transition,
  /// The entity's version moved on; re-read and retry the read-modify-write (HTTP 409).
  version_conflict,
  /// The caller's lease ran out and another caller took the key over: its commit changed
  /// nothing. Retry: the key is now the new holder's; a retry replays or waits (HTTP 409).
  lease_lost,
  /// The backend could not be reached or failed the call. Retry: yes, with backoff (HTTP 503).
  /// A commit that may have landed all the same is outcome_unknown instead.
  store_unavailable,
  /// The handler's encoded result is larger than Options::max_result_size. The handler ran;
  /// repeats of the key get this code instead of running it again. Retry: no (HTTP 500).
  result_too_large,
  /// The handler failed (threw, or its Attempt failed) and the failure is remembered for the key
  /// (Options::remember_failures, or a result that could not be encoded): this call and every
  /// repeat until the record expires get it. Retry: not before expiry (HTTP 500).
  handler_failed,
  /// The store holds bytes under the key that idem cannot decode (corrupted or written by
  /// something else). Never mistaken for a result. Retry: no; inspect the store (HTTP 500).
  record_corrupt,
  /// A commit reached the store, or may have, and no answer came back (a reply lost, a
  /// connection cut after the request went out, replicas that did not confirm the write), and
  /// the guard's retries could not settle it: the result may or may not be recorded. The handler
  /// ran. Retry: yes, with the same key; a repeat replays the result if it landed, else runs the
  /// handler again (at once, or once the lease has passed). HTTP 504: like a gateway's upstream
  /// that did not answer, the request may or may not have taken effect.
  outcome_unknown,
  /// A handler's steps (Context::step) came in another order or under other names than the
  /// steps recorded for its key by an earlier run, or a name came twice. The key keeps its
  /// recorded steps. Retry: no; the handler must take its steps in the same order (HTTP 500).
  step_mismatch,
  /// A store's configuration cannot be used: a connection URI that does not parse or names
  /// something the store does not support. Said by the call that reads it (from_uri), before
  /// any connection; never an outage. Retry: no; fix the configuration (HTTP 500).
  config_invalid,
  /// The handler failed in this call (threw, or its Attempt failed) and its key was released,
  /// not remembered: nothing of the failed run is kept, and a retry of the same request runs the
  /// handler again. Answered for the failed item of a batch, by Attempt::fail(), and to
  /// observers. Retry: yes, the same request (HTTP 500).
  handler_aborted,
};

}  // namespace idem

// Before anything below converts an errc: the trait must be known at the first conversion.
template <>
struct std::is_error_code_enum<idem::errc> : std::true_type {};

namespace idem {

/// The enumerator's name ("payload_mismatch"), for logs and metrics labels.
std::string_view to_string(errc e) noexcept;

/// For logs and metrics labels: "ok" for no error, the enumerator's name for an idem code
/// (commit_error(), error()), else "<category>:<value>" ("system:111").
std::string to_string(std::error_code ec);

/// The std::error_category of idem::errc; its name is "idem".
const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// The HTTP status a service should answer with for `ec`: 200 when there is no error, the status
/// named on each idem::errc above, and 500 for codes of other categories.
int http_status(std::error_code ec) noexcept;

/// True where retrying the same request later can succeed (in_progress, store_unavailable,
/// version_conflict after a re-read, lease_lost, outcome_unknown, handler_aborted).
bool is_retryable(std::error_code ec) noexcept;

/// Thrown by Outcome::value() when the outcome holds an error.
class Error : public std::system_error {
 public:
  explicit Error(std::error_code ec) : std::system_error(ec) {}
  Error(std::error_code ec, const std::string& what) : std::system_error(ec, what) {}
};

namespace detail {

class ErrorCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "idem"; }

  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::key_invalid:
        return "key is empty, too long or unusable";
      case errc::payload_mismatch:
        return "key was first used with another payload";
      case errc::in_progress:
        return "another request with this key is in progress";
      case errc::token_invalid:
        return "token is unknown, expired or already used";
      case errc::invalid_transition:
        return "event is not allowed from the current state";
      case errc::version_conflict:
        return "entity version has moved on";
      case errc::lease_lost:
        return "lease expired and the key was taken over";
      case errc::store_unavailable:
        return "store is unavailable";
      case errc::result_too_large:
        return "result is larger than the configured maximum";
      case errc::handler_failed:
        return "handler failed on an earlier attempt";
      case errc::record_corrupt:
        return "stored record cannot be decoded";
      case errc::outcome_unknown:
        return "commit may or may not have been recorded";
      case errc::step_mismatch:
        return "handler's steps differ from the steps recorded for the key";
      case errc::config_invalid:
        return "store configuration cannot be used";
      case errc::handler_aborted:
        return "handler failed and its key was released; a retry runs it again";
    }
    return "unknown idem error";
  }
};

}  // namespace detail

inline std::string_view to_string(errc e) noexcept {
  // A table, one code a line (clang-format would split each case in two).
  // clang-format off
  switch (e) {
    case errc::key_invalid: return "key_invalid";
    case errc::payload_mismatch: return "payload_mismatch";
    case errc::in_progress: return "in_progress";
    case errc::token_invalid: return "token_invalid";
    case errc::invalid_transition: return "invalid_transition";
    case errc::version_conflict: return "version_conflict";
    case errc::lease_lost: return "lease_lost";
    case errc::store_unavailable: return "store_unavailable";
    case errc::result_too_large: return "result_too_large";
    case errc::handler_failed: return "handler_failed";
    case errc::record_corrupt: return "record_corrupt";
    case errc::outcome_unknown: return "outcome_unknown";
    case errc::step_mismatch: return "step_mismatch";
    case errc::config_invalid: return "config_invalid";
    case errc::handler_aborted: return "handler_aborted";
  }
  // clang-format on
  return "unknown";
}

inline std::string to_string(std::error_code ec) {
  if (!ec) return "ok";
  if (ec.category() == error_category())
    return std::string(to_string(static_cast<errc>(ec.value())));
  return std::string(ec.category().name()) + ":" + std::to_string(ec.value());
}

inline const std::error_category& error_category() noexcept {
  static const detail::ErrorCategory category;
  return category;
}

inline int http_status(std::error_code ec) noexcept {
  if (!ec) return 200;
  if (ec.category() != error_category()) return 500;
  switch (static_cast<errc>(ec.value())) {
    case errc::key_invalid:
    case errc::token_invalid:
      return 400;
    case errc::payload_mismatch:
      return 422;
    case errc::in_progress:
    case errc::invalid_transition:
    case errc::version_conflict:
    case errc::lease_lost:
      return 409;
    case errc::store_unavailable:
      return 503;
    case errc::outcome_unknown:
      return 504;
    case errc::result_too_large:
    case errc::handler_failed:
    case errc::record_corrupt:
    case errc::step_mismatch:
    case errc::config_invalid:
    case errc::handler_aborted:
      return 500;
  }
  return 500;
}

inline bool is_retryable(std::error_code ec) noexcept {
  if (ec.category() != error_category()) return false;
  switch (static_cast<errc>(ec.value())) {
    case errc::in_progress:
    case errc::store_unavailable:
    case errc::version_conflict:
    case errc::lease_lost:
    case errc::outcome_unknown:
    case errc::handler_aborted:
      return true;
    default:
      return false;
  }
}

}  // namespace idem
