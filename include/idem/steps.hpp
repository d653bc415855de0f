#pragma once
// Steps: recovery points inside a handler (docs/steps.md): what a store keeps of them, the
// concept of a store that keeps them, and the derived keys a step sends downstream.

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "idem/fingerprint.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/transaction.hpp"

namespace idem {

/// A completed step as a store gives it back (load_steps(): in the order they ran).
struct StepRecord {
  std::string name{};
  std::string result{};
};

/// What save_step() writes: the step at `index` (0 for the first) of the ticket's run.
struct StepWrite {
  std::uint32_t index = 0;
  std::string_view name{};
  std::string_view result{};
};

/// A Store that keeps steps. Both calls are one atomic step of the backend that checks the
/// ticket's fence (errc::lease_lost, nothing written). save_step() of an existing index replaces
/// it.
template <class S>
concept StepStore = Store<S> && requires(S& store, const Ticket& ticket, const StepWrite& step) {
  { store.load_steps(ticket) } -> std::same_as<Result<std::vector<StepRecord>>>;
  { store.save_step(ticket, step) } -> std::same_as<Status>;
};

/// What an atomic step runs inside the store's own transaction: `run(state, transaction,
/// result)` writes through `transaction`, puts the encoded result in `result` and returns true;
/// false when the step failed, and the store rolls back.
struct AtomicStepBody {
  bool (*run)(void* state, NativeTransaction transaction, std::string& result) = nullptr;
  void* state = nullptr;
};

/// A StepStore that runs a step and saves its record in one transaction of its own
/// (Context::atomic_step): both commit, or neither; lease_lost when the ticket no longer holds.
template <class S>
concept AtomicStepStore = StepStore<S> &&
    requires(S& store, const Ticket& ticket, std::uint32_t index, std::string_view name,
             AtomicStepBody body) {
  { store.save_step_atomically(ticket, index, name, body) } -> std::same_as<Status>;
};

/// A record the completer may finish: in progress past its lease, or released by a failed
/// holder, neither finished nor expired, with the request it kept (Options::keep_request).
struct Abandoned {
  std::string key{};      // the effective key
  std::string request{};  // the payload the record's run was claimed with
};

/// A StepStore that keeps a run's request beside its steps (fenced, like save_step()) and finds
/// at most `limit` abandoned records whose effective key starts with `prefix`.
template <class S>
concept CompletableStore = StepStore<S> &&
    requires(S& store, const Ticket& ticket, std::string_view bytes, std::size_t limit) {
  { store.keep_request(ticket, bytes) } -> std::same_as<Status>;
  { store.find_abandoned(bytes, limit) } -> std::same_as<Result<std::vector<Abandoned>>>;
};

/// The key a step sends downstream as its own idempotency key: "idem-" and 32 hex digits of
/// XXH3-128 over the record's effective key and the step's name (stable across runs/processes).
inline std::string derive_step_key(std::string_view record_key, std::string_view step) {
  // Length-prefixed, so that ("ab", "c") and ("a", "bc") differ.
  std::string input;
  input.reserve(record_key.size() + step.size() + 16);
  const auto put_size = [&](std::size_t n) {
    for (int i = 0; i < 8; ++i) input.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  };
  put_size(record_key.size());
  input.append(record_key);
  put_size(step.size());
  input.append(step);
  const Fingerprint h = xxh3_128(input);
  static constexpr std::array<char, 16> kHex = {'0', '1', '2', '3', '4', '5', '6', '7',
                                                '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
  std::string key = "idem-";
  for (std::uint64_t word : {h.high, h.low}) {
    for (int shift = 60; shift >= 0; shift -= 4) key.push_back(kHex[(word >> shift) & 0xf]);
  }
  return key;
}

}  // namespace idem
