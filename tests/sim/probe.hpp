#pragma once
// The store as the guard sees it, watched: every call goes on to the stack below unchanged, and
// each claim's answer is handed to the world, which checks an answer the cache gave without the
// server (the server checks its own) and keeps the call's answers for the checks at its end.

#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "idem/batch_store.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"

namespace idem::sim {

/// What a Probe tells: a claim's answer, and whether a local cache gave it alone.
class ClaimWatcher {
 public:
  virtual ~ClaimWatcher() = default;
  virtual void claimed(const ClaimRequest& request, const Result<Claim>& answer,
                       bool from_cache) = 0;
  /// Store calls the running task has sent to the server so far.
  virtual std::uint64_t calls_sent() const = 0;
};

template <class Inner>
class Probe {
 public:
  /// `cache_in_front`: a claim the server did not hear of was answered by a local cache.
  Probe(Inner& inner, ClaimWatcher& watcher, bool cache_in_front)
      : inner_(&inner), watcher_(&watcher), cache_in_front_(cache_in_front) {}

  Result<Claim> claim(const ClaimRequest& request) {
    const std::uint64_t before = watcher_->calls_sent();
    Result<Claim> answer = inner_->claim(request);
    watcher_->claimed(request, answer, cache_in_front_ && watcher_->calls_sent() == before);
    return answer;
  }
  Status commit(const Ticket& ticket, const Completion& completion) {
    return inner_->commit(ticket, completion);
  }
  Status abort(const Ticket& ticket) { return inner_->abort(ticket); }
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease) {
    return inner_->extend(ticket, lease);
  }
  Status rewind(const Ticket& ticket) requires RewindableStore<Inner> {
    return inner_->rewind(ticket);
  }
  Result<std::vector<StepRecord>> load_steps(const Ticket& ticket) requires StepStore<Inner> {
    return inner_->load_steps(ticket);
  }
  Status save_step(const Ticket& ticket, const StepWrite& step) requires StepStore<Inner> {
    return inner_->save_step(ticket, step);
  }
  Status save_step_atomically(const Ticket& ticket, std::uint32_t index, std::string_view name,
                              AtomicStepBody body) requires AtomicStepStore<Inner> {
    return inner_->save_step_atomically(ticket, index, name, body);
  }
  Status keep_request(const Ticket& ticket,
                      std::string_view request) requires CompletableStore<Inner> {
    return inner_->keep_request(ticket, request);
  }
  Result<std::vector<Abandoned>> find_abandoned(std::string_view prefix, std::size_t limit) requires
      CompletableStore<Inner> {
    return inner_->find_abandoned(prefix, limit);
  }
  std::vector<Result<Claim>> claim_batch(std::span<const ClaimRequest> requests) requires
      BatchStore<Inner> {
    std::vector<Result<Claim>> answers = inner_->claim_batch(requests);
    for (std::size_t i = 0; i < answers.size() && i < requests.size(); ++i) {
      watcher_->claimed(requests[i], answers[i], false);
    }
    return answers;
  }
  std::vector<Status> commit_batch(std::span<const CommitRequest> requests) requires
      BatchStore<Inner> {
    return inner_->commit_batch(requests);
  }

 private:
  Inner* inner_;
  ClaimWatcher* watcher_;
  bool cache_in_front_;
};

}  // namespace idem::sim
