#pragma once
// idem::GrpcGuard: idempotent gRPC unary calls, for the synchronous and the callback APIs
// (docs/grpc.md: usage, what happens per call, the status table).

#include <grpcpp/server_context.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "idem/codecs/protobuf.hpp"
#include "idem/context.hpp"
#include "idem/error.hpp"
#include "idem/key.hpp"
#include "idem/options.hpp"

namespace idem {

/// The gRPC status code a service answers with for `ec` (the table: docs/grpc.md).
::grpc::StatusCode grpc_status(std::error_code ec) noexcept;
inline ::grpc::StatusCode grpc_status(errc e) noexcept { return grpc_status(make_error_code(e)); }

/// True for the codes above a client may retry with the same key: ABORTED (later, after the
/// `retry-after-ms` the server sent) and UNAVAILABLE (with backoff).
bool grpc_retryable(::grpc::StatusCode code) noexcept;

/// A status's grpc-status-details-bin (gRPC's rich error model): a serialised google.rpc.Status
/// of `code` and `message` with one google.protobuf.Any detail of `detail_type` (a type URL) and
/// `detail` (that message serialised); no detail when `detail_type` is empty.
std::string grpc_status_details(::grpc::StatusCode code, std::string_view message,
                                std::string_view detail_type = {}, std::string_view detail = {});

/// Where a call's principal comes from: the tenant or caller the key belongs to. A function that
/// throws idem::Error refuses the call: its code's status (key_invalid: INVALID_ARGUMENT) and
/// message, and nothing runs.
using GrpcPrincipal = std::function<std::string(const ::grpc::ServerContextBase&)>;

/// The principal is the value of the metadata entry `name` ("" when the call has none); a call
/// with two such entries is refused (key_invalid), since one may be the client's beside the
/// proxy's. Only for entries an authenticating proxy or interceptor sets, never ones a client
/// picks freely.
GrpcPrincipal principal_from_metadata(std::string name);
/// The principal is the authenticated peer identity of the call (TLS: the certificate's names,
/// joined with ','; a ',' or '\' inside a name is escaped with '\'), "" for an
/// unauthenticated call.
GrpcPrincipal principal_from_peer_identity();

/// Metadata names GrpcGuard reads and writes.
inline constexpr std::string_view kGrpcKeyMetadata = "idempotency-key";
inline constexpr std::string_view kGrpcReplayedMetadata = "idempotent-replayed";
inline constexpr std::string_view kGrpcRetryAfterMetadata = "retry-after-ms";
/// The same delay under the name gRPC's client retry policy reads (gRFC A6).
inline constexpr std::string_view kGrpcRetryPushbackMetadata = "grpc-retry-pushback-ms";
/// The type of an in_progress status's detail: a google.rpc.RetryInfo (the holder's lease left).
inline constexpr std::string_view kGrpcRetryInfoType = "type.googleapis.com/google.rpc.RetryInfo";

struct GrpcOptions {
  std::string key_metadata{kGrpcKeyMetadata};  ///< lowercase ASCII, not a binary ("-bin") entry
  bool require_key = true;    ///< false: a call without a key runs its handler unguarded
  GrpcPrincipal principal{};  ///< the key's principal; none: every caller shares one key space
  /// A call with a deadline leases its key for the time left plus this grace, at most max_lease;
  /// without one, Options::lease. A handler that may outrun its deadline by more renews its lease
  /// through its Context, or a retry may take the key over.
  std::chrono::milliseconds deadline_grace{std::chrono::seconds{5}};
  std::chrono::milliseconds max_lease{std::chrono::minutes{10}};
  /// Codes a handler returns to say that nothing happened: the key is released, so a retry runs
  /// the handler again. Every other status the handler returns is its answer and replays.
  std::vector<::grpc::StatusCode> release_codes{
      ::grpc::StatusCode::CANCELLED, ::grpc::StatusCode::DEADLINE_EXCEEDED,
      ::grpc::StatusCode::RESOURCE_EXHAUSTED, ::grpc::StatusCode::ABORTED,
      ::grpc::StatusCode::UNAVAILABLE};
};

namespace detail {

/// The key of a call, or why it is refused (INVALID_ARGUMENT): two entries, a binary one, or a
/// blank value. Surrounding spaces and tabs are not part of the key (idem::key_text).
struct GrpcKey {
  ::grpc::Status refused;  // not OK: answer it
  std::string_view id;     // the entry's value without surrounding blanks; views the metadata
  bool present = false;    // false with refused OK: no key, and none is required
};
GrpcKey read_grpc_key(const ::grpc::ServerContextBase& context, const GrpcOptions& options);

/// Throws std::invalid_argument for options GrpcGuard cannot work with.
void check_grpc_options(const GrpcOptions& options);

/// principal_from_peer_identity's principal of a peer's names: joined with ',', a ',' or '\'
/// inside a name escaped with '\', so that two lists of names never give one principal.
std::string peer_identity_principal(const std::vector<::grpc::string_ref>& names);

/// The lease of a call: zero (keep the guard's) without a deadline, else the time left plus the
/// grace, at most max_lease. Negative: the deadline has passed.
std::chrono::milliseconds grpc_call_lease(const ::grpc::ServerContextBase& context,
                                          const GrpcOptions& options);

/// Stored replies: a tag byte, then the response's deterministic bytes or the status.
inline constexpr char kGrpcResponseTag = 'R';
inline constexpr char kGrpcStatusTag = 'S';
std::string encode_grpc_status(const ::grpc::Status& status);
void append_grpc_response(const google::protobuf::MessageLite& response, std::string& out);

/// The answer for a replay: the stored response parsed into `response` (OK) or the stored
/// status, marked replayed in the trailing metadata; DATA_LOSS for bytes that are neither.
::grpc::Status grpc_replay(::grpc::ServerContextBase& context, const std::string& bytes,
                           google::protobuf::MessageLite& response);
/// The answer for a refusal: its status with the holder's lease left (retry-after-ms and a
/// RetryInfo detail), marked replayed for a remembered failure.
::grpc::Status grpc_refusal(::grpc::ServerContextBase& context, std::error_code error,
                            const std::string& message, std::chrono::milliseconds retry_after,
                            bool replayed);

/// The answer for a call that did not acquire its key: a replay, or the refusal's status.
template <class O>
::grpc::Status grpc_answer(::grpc::ServerContextBase& context, const O& outcome,
                           google::protobuf::MessageLite& response) {
  if (outcome.has_value()) return grpc_replay(context, outcome.value(), response);
  return grpc_refusal(context, outcome.error(), outcome.message(), outcome.retry_after(),
                      outcome.replayed());
}
/// The status of a commit that returned `outcome` for a handler's `status`: the handler's, or
/// the key's after a takeover (lease_lost).
template <class O>
::grpc::Status grpc_committed(const O& outcome, const ::grpc::Status& status) {
  if (outcome) return status;
  return {grpc_status(outcome.error()), outcome.message()};
}
/// What a handler's exception answers once its key was settled as `settled` (none without a key):
/// an idem::Error's own code's status, else `settled`'s, with the exception's what().
::grpc::Status grpc_handler_threw(const std::exception_ptr& error, std::error_code settled = {});
std::string exception_text(const std::exception_ptr& error);

bool is_release_code(const GrpcOptions& options, ::grpc::StatusCode code) noexcept;

template <class Handler, class Response, class A>
::grpc::Status call_grpc_handler(Handler& handler, Response& response, A* attempt) {
  if constexpr (std::is_invocable_v<Handler&, Response&, Context&>) {
    if (attempt == nullptr) {
      throw std::logic_error("idem: a handler that takes an idem::Context& needs a key");
    }
    return std::invoke(handler, response, attempt->context());
  } else {
    return std::invoke(handler, response);
  }
}

/// Settles a held key with the handler's `status` and `response`; returns what the call answers.
template <class A>
::grpc::Status settle_grpc_call(A& attempt, const GrpcOptions& options,
                                const ::grpc::Status& status,
                                const google::protobuf::MessageLite& response) {
  if (status.ok()) {
    std::string bytes;
    try {
      append_grpc_response(response, bytes);
    } catch (...) {
      // The handler's work happened: repeats get this status rather than running it again.
      const ::grpc::Status unserialisable = grpc_handler_threw(std::current_exception());
      return grpc_committed(attempt.commit(encode_grpc_status(unserialisable)), unserialisable);
    }
    return grpc_committed(attempt.commit(std::move(bytes)), status);
  }
  if (is_release_code(options, status.error_code())) {
    attempt.fail(status.error_message());
    return status;
  }
  return grpc_committed(attempt.commit(encode_grpc_status(status)), status);
}

}  // namespace detail

/// A call of the callback API: the work finishes later, on any thread, with finish(status), which
/// records the answer for repeats and finishes the RPC. Move-only. Dropped without finish() or
/// release(), it releases the key and finishes the RPC with INTERNAL.
template <class Response, class A>
class GrpcPendingCall {
 public:
  /// `attempt` null: a call without a key (GrpcOptions::require_key false), recorded nowhere.
  GrpcPendingCall(std::unique_ptr<A> attempt, const GrpcOptions& options,
                  ::grpc::ServerUnaryReactor* reactor, Response& response)
      : attempt_(std::move(attempt)), options_(&options), reactor_(reactor), response_(&response) {}
  GrpcPendingCall(GrpcPendingCall&& other) noexcept
      : attempt_(std::move(other.attempt_)),
        options_(other.options_),
        reactor_(std::exchange(other.reactor_, nullptr)),
        response_(other.response_) {}
  GrpcPendingCall& operator=(GrpcPendingCall&&) = delete;
  GrpcPendingCall(const GrpcPendingCall&) = delete;
  GrpcPendingCall& operator=(const GrpcPendingCall&) = delete;
  ~GrpcPendingCall() {
    if (reactor_ == nullptr) return;
    try {
      release(::grpc::Status(::grpc::StatusCode::INTERNAL,
                             "the handler dropped the call without answering"));
    } catch (...) {
      // Allocation failed building the status; the Attempt settles the key as it goes.
    }
  }

  /// The response to fill before finish(OK).
  Response& response() noexcept { return *response_; }
  /// The claim's Context (fence, lease renewal), as an execute() handler gets it. Keyed calls only.
  Context& context() {
    if (!attempt_)
      throw std::logic_error("idem: GrpcPendingCall::context() on a call without a key");
    return attempt_->context();
  }
  /// True until finish() or release().
  bool pending() const noexcept { return reactor_ != nullptr; }

  /// Records the answer and finishes the RPC (a release code releases the key instead, see
  /// GrpcOptions::release_codes). Call finish() or release() once.
  void finish(const ::grpc::Status& status) {
    ::grpc::ServerUnaryReactor* reactor = take_reactor("finish()");
    reactor->Finish(attempt_ ? detail::settle_grpc_call(*attempt_, *options_, status, *response_)
                             : status);
  }
  /// Releases the key without recording anything and finishes the RPC with `status`.
  void release(const ::grpc::Status& status) {
    ::grpc::ServerUnaryReactor* reactor = take_reactor("release()");
    if (attempt_) attempt_->fail(status.error_message());
    reactor->Finish(status);
  }
  /// The work threw `error`: settles the key as Attempt::fail() does and finishes the RPC.
  void threw(const std::exception_ptr& error) {
    ::grpc::ServerUnaryReactor* reactor = take_reactor("threw()");
    std::error_code settled;
    if (attempt_) settled = attempt_->fail(detail::exception_text(error));
    reactor->Finish(detail::grpc_handler_threw(error, settled));
  }

 private:
  ::grpc::ServerUnaryReactor* take_reactor(const char* what) {
    if (reactor_ == nullptr) {
      throw std::logic_error(std::string("idem: GrpcPendingCall::") + what +
                             " on a call already answered");
    }
    return std::exchange(reactor_, nullptr);
  }

  std::unique_ptr<A> attempt_;  // on the heap: the call moves between callbacks cheaply
  const GrpcOptions* options_;
  ::grpc::ServerUnaryReactor* reactor_;
  Response* response_;
};

/// Makes unary RPCs idempotent over a guard (IdempotencyGuard<S>: its begin<T>(key, payload)).
/// Thread-safe when the guard is; refers to the guard, which must outlive it.
template <class Guard>
class GrpcGuard {
 public:
  template <class T>
  using Attempt = typename Guard::template Attempt<T>;
  template <class Response>
  using PendingCall = GrpcPendingCall<Response, Attempt<std::string>>;

  /// Throws std::invalid_argument for an unusable key_metadata name or lease bounds.
  explicit GrpcGuard(Guard& guard, GrpcOptions options = {})
      : guard_(guard), options_(std::move(options)) {
    detail::check_grpc_options(options_);
  }
  GrpcGuard(const GrpcGuard&) = delete;
  GrpcGuard& operator=(const GrpcGuard&) = delete;

  /// Synchronous API: runs `handler(response)` (or `handler(response, idem::Context&)`), which
  /// fills the response and returns its status, once per key; repeats get its answer. A throwing
  /// handler releases the key (ABORTED), or under remember_failures records it (INTERNAL).
  template <class Request, class Response, class Handler>
  ::grpc::Status unary(::grpc::ServerContext& context, const Request& request, Response& response,
                       Handler&& handler) {
    Claimed claimed = claim(context, request, response);
    if (!claimed.attempt && !claimed.unguarded) return claimed.answer;
    Attempt<std::string>* attempt = claimed.attempt.get();
    ::grpc::Status status;
    try {
      status = detail::call_grpc_handler(handler, response, attempt);
    } catch (...) {
      std::error_code settled;
      if (attempt != nullptr) {
        settled = attempt->fail(detail::exception_text(std::current_exception()));
      }
      return detail::grpc_handler_threw(std::current_exception(), settled);
    }
    if (attempt == nullptr) return status;
    return detail::settle_grpc_call(*attempt, options_, status, response);
  }

  /// Callback API: returns the call's reactor. When the call holds its key (or needs none),
  /// `start` gets a PendingCall<Response> whose finish(status) answers the call, now or later;
  /// otherwise the call is answered at once and `start` is not called. A throwing `start` settles
  /// the key as a throwing synchronous handler does.
  template <class Request, class Response, class Start>
  ::grpc::ServerUnaryReactor* unary(::grpc::CallbackServerContext& context, const Request& request,
                                    Response& response, Start&& start) {
    ::grpc::ServerUnaryReactor* reactor = context.DefaultReactor();
    Claimed claimed = claim(context, request, response);
    if (!claimed.attempt && !claimed.unguarded) {
      reactor->Finish(claimed.answer);
      return reactor;
    }
    PendingCall<Response> call(std::move(claimed.attempt), options_, reactor, response);
    try {
      std::invoke(start, std::move(call));
    } catch (...) {
      // A `start` taking the call by value has settled it already, as a dropped call.
      if (call.pending()) call.threw(std::current_exception());
    }
    return reactor;
  }

  const GrpcOptions& options() const noexcept { return options_; }

 private:
  struct Claimed {
    std::unique_ptr<Attempt<std::string>> attempt;  // the held key
    ::grpc::Status answer;                          // without one: the call's answer
    bool unguarded = false;                         // no key, none required: run unguarded
  };

  template <class Request, class Response>
  Claimed claim(::grpc::ServerContextBase& context, const Request& request, Response& response) {
    Claimed out;
    const detail::GrpcKey key = detail::read_grpc_key(context, options_);
    if (!key.refused.ok() || !key.present) {
      out.answer = key.refused;
      out.unguarded = key.refused.ok();
      return out;
    }
    const std::chrono::milliseconds lease = detail::grpc_call_lease(context, options_);
    if (lease.count() < 0) {
      out.answer = ::grpc::Status(::grpc::StatusCode::DEADLINE_EXCEEDED,
                                  "the call's deadline passed before it started");
      return out;
    }
    std::string principal;
    if (options_.principal) {
      try {
        principal = options_.principal(context);
      } catch (const Error& refused) {  // the principal function refuses the call
        out.answer = ::grpc::Status(grpc_status(refused.code()), refused.what());
        return out;
      }
    }
    thread_local std::string payload;  // begin() hashes it and keeps nothing
    payload.clear();
    protobuf::append_deterministic(request, payload);
    // A call with a deadline claims for it (lease zero: the guard's): one store call, no extend.
    auto attempt = std::make_unique<Attempt<std::string>>(guard_.template begin<std::string>(
        Key{key.id, principal}, payload, CallOptions{.lease = lease}));
    if (!attempt->acquired()) {
      out.answer = detail::grpc_answer(context, std::move(*attempt).outcome(), response);
      return out;
    }
    out.attempt = std::move(attempt);
    return out;
  }

  Guard& guard_;
  GrpcOptions options_;
};

}  // namespace idem
