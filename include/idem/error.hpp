#pragma once
// Error codes of idem: every refusal and failure is a std::error_code in the idem::errc category.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>

namespace idem {

/// Why a call did not produce a fresh or replayed value. Each code says whether a retry can help.
/// The values are stored (a failed record holds its code): new codes go last, and into
/// detail::errc_table below, which says everything else about each.
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

/// Everything idem says about one error code, in one place: every mapping below (the name, the
/// message, the HTTP status, the gRPC status, whether a retry can help) is read from this table,
/// so a code's answers cannot disagree between the faces that report it.
struct ErrcFacts {
  errc code;
  /// The enumerator's name, for logs and metrics labels.
  std::string_view name;
  /// The category's message: what happened, in a few words.
  std::string_view message;
  /// The HTTP status a service answers with.
  int http_status;
  /// The gRPC status code (google.rpc.Code: 3 INVALID_ARGUMENT, 9 FAILED_PRECONDITION,
  /// 10 ABORTED, 13 INTERNAL, 14 UNAVAILABLE, 15 DATA_LOSS), without gRPC's headers.
  int grpc_status;
  /// Whether retrying the same request later can succeed.
  bool retryable;
};

namespace detail {

namespace grpc_code {  // google.rpc.Code, the values gRPC's StatusCode has too
inline constexpr int invalid_argument = 3, failed_precondition = 9, aborted = 10, internal = 13,
                     unavailable = 14, data_loss = 15;
}  // namespace grpc_code

// One code a line, in the enumeration's order (checked below).
// clang-format off
inline constexpr std::array<ErrcFacts, 15> errc_table = {{
  {errc::key_invalid, "key_invalid", "key is empty, too long or unusable",
   400, grpc_code::invalid_argument, false},
  {errc::payload_mismatch, "payload_mismatch", "key was first used with another payload",
   422, grpc_code::failed_precondition, false},
  {errc::in_progress, "in_progress", "another request with this key is in progress",
   409, grpc_code::aborted, true},
  {errc::token_invalid, "token_invalid", "token is unknown, expired or already used",
   400, grpc_code::invalid_argument, false},
  {errc::invalid_transition, "invalid_transition", "event is not allowed from the current state",
   409, grpc_code::failed_precondition, false},
  {errc::version_conflict, "version_conflict", "entity version has moved on",
   409, grpc_code::aborted, true},
  {errc::lease_lost, "lease_lost", "lease expired and the key was taken over",
   409, grpc_code::aborted, true},
  {errc::store_unavailable, "store_unavailable", "store is unavailable",
   503, grpc_code::unavailable, true},
  {errc::result_too_large, "result_too_large", "result is larger than the configured maximum",
   500, grpc_code::internal, false},
  {errc::handler_failed, "handler_failed", "handler failed on an earlier attempt",
   500, grpc_code::internal, false},
  {errc::record_corrupt, "record_corrupt", "stored record cannot be decoded",
   500, grpc_code::data_loss, false},
  {errc::outcome_unknown, "outcome_unknown", "commit may or may not have been recorded",
   504, grpc_code::unavailable, true},
  // The handler's steps differ from the key's: a fault of the handler, not a retry.
  {errc::step_mismatch, "step_mismatch",
   "handler's steps differ from the steps recorded for the key",
   500, grpc_code::internal, false},
  // The service's own configuration, not the caller's request.
  {errc::config_invalid, "config_invalid", "store configuration cannot be used",
   500, grpc_code::internal, false},
  // Released: the same request may run again.
  {errc::handler_aborted, "handler_aborted",
   "handler failed and its key was released; a retry runs it again",
   500, grpc_code::aborted, true},
}};
// clang-format on

constexpr bool errc_table_in_order() {
  int expected = 1;
  for (const ErrcFacts& facts : errc_table) {
    if (static_cast<int>(facts.code) != expected++) return false;
  }
  return true;
}
static_assert(errc_table_in_order(), "errc_table: one entry per code, in the enumeration's order");

/// `e`'s entry in errc_table; the table's size for a value that is no idem::errc.
constexpr std::size_t errc_index(errc e) noexcept {
  const auto index = static_cast<std::size_t>(e) - 1;  // a value below 1 wraps: out of range
  return index < errc_table.size() ? index : errc_table.size();
}

}  // namespace detail

/// The facts of `e`, or nullptr for a value that is no idem::errc (a corrupt stored code).
constexpr const ErrcFacts* facts_of(errc e) noexcept {
  const std::size_t i = detail::errc_index(e);
  return i < detail::errc_table.size() ? &detail::errc_table[i] : nullptr;
}

/// The enumerator's name ("payload_mismatch"), for logs and metrics labels. It reads the table by
/// index, not through facts_of(): under -fsanitize=undefined GCC cannot test an element's address
/// against null in a constant expression.
constexpr std::string_view to_string(errc e) noexcept {
  const std::size_t i = detail::errc_index(e);
  return i < detail::errc_table.size() ? detail::errc_table[i].name : "unknown";
}

/// For logs and metrics labels: "ok" for no error, the enumerator's name for an idem code
/// (commit_error(), error()), else "<category>:<value>" ("system:111").
std::string to_string(std::error_code ec);

/// The std::error_category of idem::errc; its name is "idem".
const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// The facts of `ec` if it is an idem code, else nullptr.
inline const ErrcFacts* facts_of(std::error_code ec) noexcept {
  return ec && ec.category() == error_category() ? facts_of(static_cast<errc>(ec.value()))
                                                 : nullptr;
}

/// The HTTP status a service should answer with for `ec`: 200 when there is no error, the status
/// of the code's ErrcFacts, and 500 for codes of other categories.
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
    const ErrcFacts* facts = facts_of(static_cast<errc>(value));
    return std::string(facts ? facts->message : "unknown idem error");
  }
};

}  // namespace detail

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
  const ErrcFacts* facts = facts_of(ec);
  return facts ? facts->http_status : 500;
}

inline bool is_retryable(std::error_code ec) noexcept {
  const ErrcFacts* facts = facts_of(ec);
  return facts != nullptr && facts->retryable;
}

}  // namespace idem
