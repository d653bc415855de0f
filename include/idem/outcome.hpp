#pragma once
// Outcome<T>: what IdempotencyGuard::execute returns.

#include <chrono>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "idem/error.hpp"
#include "idem/result.hpp"

namespace idem {

/// The value of an idempotent call, or why there is none: a fresh value (the handler ran;
/// recorded() says whether the store kept it), a replayed one, or an idem::errc with a message.
template <class T>
class [[nodiscard]] Outcome {
  using Stored = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

 public:
  /// A value the handler produced in this call and recorded (moved once: every fresh call's path).
  static Outcome fresh(Stored&& value) {
    Outcome o{std::in_place_index<0>, std::move(value)};
    o.recorded_ = true;
    return o;
  }
  static Outcome fresh(const Stored& value) { return fresh(Stored(value)); }
  /// A value the handler produced in this call that the store did not (or may not) record.
  // commit_failure is moved into the outcome: clang-tidy 14 misses a move into a member of the
  // class template being defined.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  static Outcome fresh(Stored&& value, Failure commit_failure) {
    Outcome o{std::in_place_index<0>, std::move(value)};
    o.recorded_ = !commit_failure.code;
    if (commit_failure.code) o.commit_failure_.emplace(std::move(commit_failure));
    return o;
  }
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  static Outcome fresh(const Stored& value, Failure commit_failure) {
    return fresh(Stored(value), std::move(commit_failure));
  }
  /// A value decoded from the store (moved once, into the outcome: every replay's path).
  static Outcome replay(Stored&& value) {
    Outcome o{std::in_place_index<0>, std::move(value)};
    o.replayed_ = true;
    return o;
  }
  static Outcome replay(const Stored& value) { return replay(Stored(value)); }
  /// A refusal or failure. `replayed` marks a failure replayed from a failed record. (By
  /// reference: a refusal's Failure moves once, into the outcome.)
  static Outcome failed(Failure&& failure, bool replayed = false) {
    Outcome o{std::in_place_index<1>, std::move(failure)};
    o.replayed_ = replayed;
    return o;
  }
  static Outcome failed(const Failure& failure, bool replayed = false) {
    Outcome o{std::in_place_index<1>, failure};
    o.replayed_ = replayed;
    return o;
  }

  bool has_value() const noexcept { return state_.index() == 0; }
  /// True when the outcome is the key's answer: a replayed value, or a fresh value repeats will
  /// get too (or whose fate is unknown). False for errors and for a fresh value superseded by
  /// another holder's (error() lease_lost). `if (r) reply(200, r.value())` is right.
  explicit operator bool() const noexcept { return has_value() && !superseded(); }

  /// The value; throws idem::Error carrying error() and message() when there is none.
  decltype(auto) value() & { return checked_value(*this); }
  decltype(auto) value() const& { return checked_value(*this); }
  decltype(auto) value() && { return checked_value(std::move(*this)); }

  /// The error; empty for a value, except lease_lost for a superseded fresh value.
  std::error_code error() const noexcept {
    if (has_value()) return superseded() ? commit_failure_->code : std::error_code{};
    return std::get<1>(state_).code;
  }
  /// What went wrong, in words: the store's or handler's message, else the code's message.
  std::string message() const {
    if (has_value()) return superseded() ? commit_failure_->describe() : std::string{};
    return std::get<1>(state_).describe();
  }

  /// What a refusal knows beyond its code (HolderLease, CurrentVersion, CurrentState), or empty.
  const Refusal& refusal() const noexcept {
    static const Refusal none{};
    return has_value() ? none : std::get<1>(state_).refusal;
  }
  /// errc::in_progress: when a retry is likely to succeed (Retry-After): the guard's estimate of
  /// when the holder is done (p90 of recent handler durations), at most the holder's lease left;
  /// that lease while there is no estimate. Zero otherwise, or when neither is known.
  std::chrono::milliseconds retry_after() const noexcept {
    const auto* lease = std::get_if<HolderLease>(&refusal());
    if (lease == nullptr) return std::chrono::milliseconds{0};
    return lease->retry_after.count() > 0 ? lease->retry_after : lease->remaining;
  }

  /// The value (or the remembered failure) came from the store; the handler did not run.
  bool replayed() const noexcept { return replayed_; }
  /// The handler ran in this call and the store kept its result for repeats.
  bool recorded() const noexcept { return recorded_; }
  /// The handler ran in this call (whether or not the result was recorded).
  bool executed() const noexcept { return has_value() && !replayed_; }
  /// Why a fresh value was not recorded (lease_lost, store_unavailable, result_too_large), or may
  /// not have been (outcome_unknown).
  std::error_code commit_error() const noexcept {
    return commit_failure_ ? commit_failure_->code : std::error_code{};
  }
  /// The failure commit_error() names; an empty Failure (no code) when there is none.
  const Failure& commit_failure() const noexcept {
    static const Failure none{};
    return commit_failure_ ? *commit_failure_ : none;
  }

 private:
  template <class... A>  // NOLINTNEXTLINE(modernize-use-equals-delete): not a copy; has a body
  explicit Outcome(A&&... a) : state_(std::forward<A>(a)...) {}

  bool superseded() const noexcept {
    return commit_failure_ && commit_failure_->code == errc::lease_lost;
  }

  template <class Self>
  static decltype(auto) checked_value(Self&& self) {
    if (!self.has_value()) {
      const Failure& f = std::get<1>(self.state_);
      if (f.message.empty()) throw Error(f.code);
      throw Error(f.code, f.message);
    }
    if constexpr (!std::is_void_v<T>) return std::get<0>(std::forward<Self>(self).state_);
  }

  std::variant<Stored, Failure> state_;
  bool replayed_ = false;
  bool recorded_ = false;
  std::optional<Failure> commit_failure_;  // empty on the common path: no Failure made or dropped
};

}  // namespace idem
