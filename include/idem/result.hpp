#pragma once
// Result<T>: a value or an error code with a message, as stores return it.

#include <cassert>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

#include "idem/error.hpp"

namespace idem {

/// errc::in_progress: the holder's lease left when the key was refused (zero: unknown), and when
/// a retry is likely to succeed (p90 of recent handler durations, at most the lease left; zero:
/// no estimate).
struct HolderLease {
  std::chrono::milliseconds remaining{0};
  std::chrono::milliseconds retry_after{0};
};
/// errc::version_conflict: the version the entity is at.
struct CurrentVersion {
  std::uint64_t version = 0;
};
/// errc::invalid_transition: the entity's state, and the events its table allows from there.
struct CurrentState {
  std::string state;
  std::vector<std::string> allowed_events;
};

/// What a refusal knows beyond its code, as a typed value: no side channel carries it.
using Refusal = std::variant<std::monostate, HolderLease, CurrentVersion, CurrentState>;

/// Why a call failed: the code decides what happens next, the message says what went wrong.
struct Failure {
  std::error_code code;
  std::string message;  // empty: code.message() says it all
  Refusal refusal{};    // details of a refusal, where the code has some

  /// The message if there is one, else the code's own message.
  std::string describe() const { return message.empty() ? code.message() : message; }
};

inline Failure make_failure(errc e, std::string message = {}) {
  return Failure{make_error_code(e), std::move(message)};
}

/// A value of type T or a Failure. Cheap to move; no exceptions on the success path; value() on a
/// failure throws idem::Error (never std::bad_variant_access).
template <class T>
class [[nodiscard]] Result {
 public:
  // By reference, not by value: a result moves once, into the Result, on every call's path.
  Result(T&& value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  Result(const T& value) : state_(std::in_place_index<0>, value) {}        // NOLINT: implicit
  // By reference too: a refusal's Failure moves once into the Result, not twice.
  Result(Failure&& failure) : state_(std::in_place_index<1>, std::move(failure)) {  // NOLINT
    assert(std::get<1>(state_).code && "a Failure must carry an error code");
  }
  Result(const Failure& failure) : state_(std::in_place_index<1>, failure) {  // NOLINT
    assert(std::get<1>(state_).code && "a Failure must carry an error code");
  }
  /// Replaces the value or failure with `failure`, moved in once (no Result in between).
  Result& operator=(Failure&& failure) {
    assert(failure.code && "a Failure must carry an error code");
    state_.template emplace<1>(std::move(failure));
    return *this;
  }

  bool has_value() const noexcept { return state_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  /// The value; throws idem::Error carrying the failure's code and message when there is none.
  T& value() & {
    check();
    return std::get<0>(state_);
  }
  const T& value() const& {
    check();
    return std::get<0>(state_);
  }
  T&& value() && {
    check();
    return std::get<0>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Failure& failure() const& { return std::get<1>(state_); }
  Failure&& failure() && { return std::get<1>(std::move(state_)); }
  std::error_code error() const noexcept {
    return has_value() ? std::error_code{} : std::get<1>(state_).code;
  }

 private:
  // The check inlines into every value() call; the throw stays out of line.
  void check() const {
    if (has_value()) [[likely]]
      return;
    fail(std::get<1>(state_));
  }
  [[noreturn, gnu::noinline, gnu::cold]] static void fail(const Failure& f) {
    if (f.message.empty()) throw Error(f.code);
    throw Error(f.code, f.message);
  }

  std::variant<T, Failure> state_;
};

/// Success or a Failure: what commit, abort and extend return. Success holds no Failure at all:
/// the guard makes and drops several statuses per call, and an empty one costs nothing.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Failure failure) {  // NOLINT: implicit
    if (failure.code) failure_.emplace(std::move(failure));
  }
  Status(errc e, std::string message = {})
      : failure_{Failure{make_error_code(e), std::move(message)}} {}

  bool ok() const noexcept { return !failure_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  std::error_code error() const noexcept { return ok() ? std::error_code{} : failure_->code; }
  /// The failure; an empty Failure (no code) when the status is ok.
  const Failure& failure() const noexcept { return ok() ? no_failure() : *failure_; }

 private:
  static const Failure& no_failure() noexcept {
    static const Failure none{};
    return none;
  }

  std::optional<Failure> failure_;
};

}  // namespace idem
