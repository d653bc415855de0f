// Batches of the SQL record strategy: many claims in one transaction (or statement), many commits
// in one. Each key's answer is the one Engine::claim or Engine::commit gives it alone; keys the
// batch step could not settle (a record that changed under the statement, a key named twice) go
// through the single-key path after it.

#include <algorithm>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "sql/engine.hpp"

namespace idem::sql {

namespace {

using std::chrono::milliseconds;

// Gives the session back on every path (broken ones are dropped by the backend).
class Lent {
 public:
  Lent(Backend& backend, Session* session) : backend_(backend), session_(session) {}
  Lent(const Lent&) = delete;
  Lent& operator=(const Lent&) = delete;
  ~Lent() { give_back(); }
  Session* operator->() const noexcept { return session_; }
  Session& operator*() const noexcept { return *session_; }
  bool& broken() noexcept { return broken_; }
  void give_back() noexcept {
    if (session_ != nullptr) backend_.release(std::exchange(session_, nullptr), broken_);
  }

 private:
  Backend& backend_;
  Session* session_;
  bool broken_ = false;
};

// Marks, for each position, whether it is the first of its key in the batch: only those go into
// the batch step (a multi-row statement may not touch one row twice).
template <class T, class KeyOf>
std::vector<bool> first_of_key(std::span<const T> items, KeyOf key_of) {
  std::vector<bool> first(items.size(), false);
  std::unordered_set<std::string_view> seen;
  seen.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) first[i] = seen.insert(key_of(items[i])).second;
  return first;
}

}  // namespace

std::vector<std::optional<ClaimRow>> Session::claim_many(std::span<const ClaimArgs> args) {
  std::vector<std::optional<ClaimRow>> rows;
  rows.reserve(args.size());
  for (const ClaimArgs& a : args) rows.push_back(claim(a));
  return rows;
}

std::vector<bool> Session::finish_many(std::span<const FinishArgs> args) {
  std::vector<bool> done;
  done.reserve(args.size());
  for (const FinishArgs& a : args) done.push_back(finish(a.ticket, a.state, a.result, a.ttl_ms));
  return done;
}

std::vector<Result<Claim>> Engine::claim_batch(std::span<const ClaimRequest> requests) {
  std::vector<Result<Claim>> answers;
  answers.reserve(requests.size());
  auto all_fail = [&](const Failure& f) {
    answers.clear();
    for (std::size_t i = 0; i < requests.size(); ++i) answers.emplace_back(f);
    return answers;
  };
  if (requests.empty()) return answers;
  if (mode_ == SqlMode::transactional) {
    return all_fail(make_failure(
        errc::store_unavailable,
        "idem: SQL batches need SqlMode::lease; in transactional mode each claim opens its own "
        "transaction: claim the keys one at a time"));
  }
  if (Status schema = ensure_schema(); !schema) return all_fail(schema.failure());

  const std::vector<bool> first =
      first_of_key(requests, [](const ClaimRequest& r) { return r.key; });
  std::vector<ClaimArgs> args;
  std::vector<std::size_t> at;  // args[j] is requests[at[j]]
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (!first[i] || requests[i].key.empty()) continue;
    const ClaimRequest& r = requests[i];
    args.push_back(ClaimArgs{r.key, r.fingerprint, r.lease.count(),
                             std::max(r.retention, r.lease).count(), 1});
    at.push_back(i);
  }

  std::vector<std::optional<Result<Claim>>> settled(requests.size());
  if (!args.empty()) {
    bool broken = false;
    Session* session = nullptr;
    try {
      session = backend_->acquire(milliseconds{0});
    } catch (...) {
      return all_fail(failure(broken));
    }
    Lent s(*backend_, session);
    std::vector<std::optional<ClaimRow>> rows;
    try {
      rows = s->claim_many(args);
    } catch (...) {
      return all_fail(failure(s.broken()));
    }
    for (std::size_t j = 0; j < args.size() && j < rows.size(); ++j) {
      if (!rows[j]) continue;  // changed under the statement: asked again below
      if (auto answer = classify(*rows[j], requests[at[j]])) settled[at[j]] = std::move(*answer);
    }
  }
  // The rest, one at a time: later mentions of a key (they find the batch's hold), records that
  // changed under the statement, empty keys (refused by claim()).
  for (std::size_t i = 0; i < requests.size(); ++i) {
    answers.push_back(settled[i] ? std::move(*settled[i]) : claim(requests[i]));
  }
  return answers;
}

std::vector<Status> Engine::commit_batch(std::span<const CommitRequest> requests) {
  std::vector<Status> answers;
  answers.reserve(requests.size());
  if (requests.empty()) return answers;
  if (mode_ == SqlMode::transactional) {
    // Each open transaction commits on its own session.
    for (const CommitRequest& r : requests) answers.push_back(commit(r.ticket, r.completion));
    return answers;
  }
  auto all_fail = [&](const Failure& f) {
    answers.assign(requests.size(), Status(f));
    return answers;
  };
  if (Status schema = ensure_schema(); !schema) return all_fail(schema.failure());

  const std::vector<bool> first =
      first_of_key(requests, [](const CommitRequest& r) { return r.ticket.key; });
  std::vector<FinishArgs> args;
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (!first[i]) continue;
    const CommitRequest& r = requests[i];
    args.push_back(FinishArgs{r.ticket, detail::to_sql(detail::finished_state(r.completion.status)),
                              r.completion.result, r.completion.ttl.count()});
    at.push_back(i);
  }

  std::vector<std::optional<Status>> settled(requests.size());
  {
    bool broken = false;
    Session* session = nullptr;
    try {
      session = backend_->acquire(milliseconds{0});
    } catch (...) {
      return all_fail(failure(broken));
    }
    Lent s(*backend_, session);
    std::vector<bool> done;
    try {
      done = s->finish_many(args);
    } catch (...) {
      Failure f = failure(s.broken());
      if (s.broken()) {
        f.code = make_error_code(errc::outcome_unknown);
        f.message =
            "no reply to the batch's commit; it may or may not have landed (a retry under the "
            "same fences finds it if it did): " +
            f.describe();
      }
      return all_fail(f);
    }
    for (std::size_t j = 0; j < args.size() && j < done.size(); ++j) {
      if (done[j]) settled[at[j]] = Status{};
    }
  }
  // A finish that matched nothing, a later mention of a key: commit() alone tells landed from
  // lost, as it does for a single commit.
  for (std::size_t i = 0; i < requests.size(); ++i) {
    answers.push_back(settled[i] ? std::move(*settled[i])
                                 : commit(requests[i].ticket, requests[i].completion));
  }
  return answers;
}

}  // namespace idem::sql
