// Batches and groups of the SQL record strategy: many finishes and claims in one transaction,
// each answered as Engine::claim or Engine::commit alone; what the step cannot settle goes
// through the single-key path after it.

#include <algorithm>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "sql/engine.hpp"

namespace idem::sql {

namespace {

using std::chrono::milliseconds;

// Whether each item is the first of its key: a multi-row statement may not touch a row twice.
template <class T, class KeyOf>
std::vector<bool> first_of_key(std::span<const T> items, KeyOf key_of) {
  std::vector<bool> first(items.size(), false);
  std::unordered_set<std::string_view> seen;
  seen.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) first[i] = seen.insert(key_of(items[i])).second;
  return first;
}

}  // namespace

std::vector<Result<Claim>> Engine::claim_batch(std::span<const ClaimRequest> requests) {
  return write_group({}, requests).claims;
}

std::vector<Status> Engine::commit_batch(std::span<const CommitRequest> requests) {
  return write_group(requests, {}).commits;
}

GroupAnswers Engine::write_group(std::span<const CommitRequest> commits,
                                 std::span<const ClaimRequest> claims) {
  GroupAnswers out;
  out.commits.reserve(commits.size());
  out.claims.reserve(claims.size());
  auto all_fail = [&](const Failure& claims_failure, const Failure& commits_failure) {
    out.commits.assign(commits.size(), Status(commits_failure));
    out.claims.clear();
    for (std::size_t i = 0; i < claims.size(); ++i) out.claims.emplace_back(claims_failure);
    return std::move(out);
  };
  if (commits.empty() && claims.empty()) return out;
  if (mode_ == SqlMode::transactional) {
    for (const CommitRequest& r : commits) out.commits.push_back(commit(r.ticket, r.completion));
    const Failure refused = make_failure(
        errc::store_unavailable,
        "idem: SQL batches need SqlMode::lease; in transactional mode each claim opens its own "
        "transaction: claim the keys one at a time");
    for (std::size_t i = 0; i < claims.size(); ++i) out.claims.emplace_back(refused);
    return out;
  }
  if (Status schema = ensure_schema(); !schema) {
    return all_fail(schema.failure(), schema.failure());
  }

  const std::vector<bool> first_commit =
      first_of_key(commits, [](const CommitRequest& r) { return r.ticket.key; });
  std::vector<FinishArgs> finish_args;
  std::vector<std::size_t> finish_at;  // finish_args[j] is commits[finish_at[j]]
  for (std::size_t i = 0; i < commits.size(); ++i) {
    if (!first_commit[i]) continue;
    const CommitRequest& r = commits[i];
    finish_args.push_back(FinishArgs{r.ticket,
                                     detail::to_sql(detail::finished_state(r.completion.status)),
                                     r.completion.result, r.completion.ttl.count()});
    finish_at.push_back(i);
  }
  const std::vector<bool> first_claim =
      first_of_key(claims, [](const ClaimRequest& r) { return r.key; });
  std::vector<ClaimArgs> claim_args;
  std::vector<std::size_t> claim_at;  // claim_args[j] is claims[claim_at[j]]
  for (std::size_t i = 0; i < claims.size(); ++i) {
    if (!first_claim[i] || claims[i].key.empty()) continue;
    const ClaimRequest& r = claims[i];
    claim_args.push_back(ClaimArgs{r.key, r.fingerprint, r.lease.count(),
                                   held_retention(r.retention, r.lease).count(), 1});
    claim_at.push_back(i);
  }

  std::vector<std::optional<Status>> committed(commits.size());
  std::vector<std::optional<Result<Claim>>> claimed(claims.size());
  if (!finish_args.empty() || !claim_args.empty()) {
    SessionLease s;
    try {
      s = backend_->acquire(milliseconds{0});
    } catch (...) {
      bool broken = false;
      const Failure f = failure(broken);
      return all_fail(f, f);
    }
    Session::Written written;
    try {
      written = s->write_many(finish_args, claim_args);
    } catch (...) {
      const Failure f = failure(s);
      Failure in_doubt = f;
      if (s.discarded() && !finish_args.empty()) {
        in_doubt.code = make_error_code(errc::outcome_unknown);
        in_doubt.message =
            "no reply to the batch's commit; it may or may not have landed (a retry under the "
            "same fences finds it if it did): " +
            f.describe();
      }
      return all_fail(f, in_doubt);
    }
    // An item rolled back alone under its savepoint: its own failure, nothing of it written.
    auto alone = [&](const std::vector<std::exception_ptr>& errors,
                     std::size_t j) -> std::optional<Failure> {
      if (j >= errors.size() || !errors[j]) return std::nullopt;
      bool broken = false;
      return backend_->failure(errors[j], broken, /*transactional_claim=*/false);
    };
    for (std::size_t j = 0; j < finish_at.size() && j < written.finished.size(); ++j) {
      if (std::optional<Failure> f = alone(written.finish_errors, j)) {
        committed[finish_at[j]] = Status(std::move(*f));
      } else if (written.finished[j]) {
        committed[finish_at[j]] = Status{};
      }
    }
    for (std::size_t j = 0; j < claim_at.size() && j < written.claimed.size(); ++j) {
      if (std::optional<Failure> f = alone(written.claim_errors, j)) {
        claimed[claim_at[j]] = Result<Claim>(std::move(*f));
        continue;
      }
      if (!written.claimed[j]) continue;  // changed under the statement: asked again below
      if (auto answer = classify(*written.claimed[j], claims[claim_at[j]])) {
        claimed[claim_at[j]] = std::move(*answer);
      }
    }
  }
  // The rest, one at a time: finishes that matched nothing (landed or lost), later mentions of
  // a key, records that changed under the statement, empty keys.
  for (std::size_t i = 0; i < commits.size(); ++i) {
    out.commits.push_back(committed[i] ? std::move(*committed[i])
                                       : commit(commits[i].ticket, commits[i].completion));
  }
  for (std::size_t i = 0; i < claims.size(); ++i) {
    out.claims.push_back(claimed[i] ? std::move(*claimed[i]) : claim(claims[i]));
  }
  return out;
}

}  // namespace idem::sql
