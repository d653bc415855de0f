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

/// A Store that claims and commits many keys in one step of the backend. Each answer is the one
/// claim() or commit() would give for that key alone, in request order: a batch changes the
/// cost, never a key's answer (a key named twice is claimed twice). A failure of the whole step
/// is every key's failure, and none of the records changed (outcome_unknown: they may have).
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

/// A BatchStore that writes commits, then claims, in one step of the backend (a claim replays a
/// commit of the same step); GroupCommitStore uses it where the store has it.
template <class S>
concept GroupStore = BatchStore<S> && requires(S& store, std::span<const CommitRequest> commits,
                                               std::span<const ClaimRequest> claims) {
  { store.write_group(commits, claims) } -> std::same_as<GroupAnswers>;
};

}  // namespace idem
