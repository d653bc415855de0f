#pragma once
// The batch operations a store may offer: many claims in one round trip, many commits in one.

#include <concepts>
#include <span>
#include <vector>

#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

/// One commit of a batch: the holder's ticket and the end it records.
struct CommitRequest {
  Ticket ticket{};
  Completion completion{};
};

/// A Store that claims and commits many keys in one step of the backend (one transaction, one
/// statement or one script call). Each answer is the one claim() or commit() would give for that
/// key on its own, in the order of the requests: the batch changes the cost, never a key's
/// fences, mismatches, replays or refusals. A key named twice in one batch is claimed twice, the
/// second time finding the first claim's hold. A failure of the whole step is every key's
/// failure; then none of the batch's records changed (or, for a commit whose answer was lost,
/// outcome_unknown says that they may have).
///
/// IdempotencyGuard::execute_batch uses these when the store has them and calls claim() and
/// commit() per key when it does not.
template <class S>
concept BatchStore = Store<S> && requires(S& store, std::span<const ClaimRequest> claims,
                                          std::span<const CommitRequest> commits) {
  { store.claim_batch(claims) } -> std::same_as<std::vector<Result<Claim>>>;
  { store.commit_batch(commits) } -> std::same_as<std::vector<Status>>;
};

/// The answers of a group written in one step (GroupStore::write_group), in request order.
struct GroupAnswers {
  std::vector<Status> commits;
  std::vector<Result<Claim>> claims;
};

/// A BatchStore that writes commits and claims together, in one step of the backend (one
/// transaction): the commits first, so that a claim of a key committed in the same step replays
/// it. GroupCommitStore uses it when the store has it, else commit_batch then claim_batch.
template <class S>
concept GroupStore = BatchStore<S> && requires(S& store, std::span<const CommitRequest> commits,
                                               std::span<const ClaimRequest> claims) {
  { store.write_group(commits, claims) } -> std::same_as<GroupAnswers>;
};

}  // namespace idem
