#pragma once
// The database beside the records: what handlers and atomic steps write through a store's
// transaction (Context::native_transaction() while they run). Writes stand only once their
// transaction commits; each commit is checked: a failed step's writes never commit, an atomic
// step commits once per run chain, and in transactional mode the handler's writes commit once per
// key and epoch, with the record.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "idem/store.hpp"
#include "idem/transaction.hpp"
#include "sim/checks.hpp"
#include "sim/contract.hpp"

namespace idem::sim {

/// One row a run wrote.
struct Write {
  std::string key;        // the record's effective key
  std::uint64_t run = 0;  // the handler run that wrote it
  Fence fence = 0;        // that run's fence
  int step = -1;          // the atomic step that wrote it; -1: the handler itself
  bool failed = false;    // written by a step or handler that then threw
};

/// The kind of the simulated stores' transactions.
inline constexpr TransactionKind sim_transaction_kind{"simulated",
                                                      "a simulated store in transactional mode"};

/// An open transaction of the simulated stores, as a handler reaches it.
class SimTransaction final : public detail::TransactionHandle {
 public:
  static constexpr const TransactionKind& kKind = sim_transaction_kind;
  SimTransaction() : TransactionHandle(kKind) {}
  std::vector<Write> writes;
};

/// The writes of the transaction a handler (or its atomic step) holds.
inline SimTransaction& sim_transaction(NativeTransaction transaction) {
  return const_cast<SimTransaction&>(transaction.get<SimTransaction>("sim_transaction"));
}

class Database {
 public:
  Database(const Contract& contract, Violations& violations)
      : contract_(&contract), violations_(&violations) {}

  /// The writes commit (the record or step that carries them just did).
  void commit(std::vector<Write>& writes);

  /// Transactional mode, at the end of a run: each completed record's run wrote and committed;
  /// no failed record's run did (a remembered failure commits without the handler's writes).
  void check_final(bool transactional);

  std::size_t rows() const noexcept { return rows_; }

 private:
  const Contract* contract_;
  Violations* violations_;
  std::size_t rows_ = 0;
  // (key, epoch) -> fence of the run whose handler writes committed.
  std::map<std::pair<std::string, std::uint64_t>, Fence, std::less<>> handler_writes_;
  // (key, chain, step) -> fence of the run whose atomic step committed.
  std::map<std::tuple<std::string, std::uint64_t, int>, Fence, std::less<>> step_writes_;
};

}  // namespace idem::sim
