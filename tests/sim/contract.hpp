#pragma once
// The record as docs/design.md describes it (§2-§4, §9, the admin's release/forget/purge and
// the steps of steps.md), kept per key beside the store under test. Every call that reaches the
// store is checked here at the moment it runs: the store's answer must be one the contract
// allows for the record as the contract knows it, and the contract then follows the answer.
// Where the contract leaves the store a choice (a record kept longer than its promised time),
// either answer is accepted and the next answer decides.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/batch_store.hpp"
#include "idem/steps.hpp"
#include "idem/store.hpp"
#include "sim/checks.hpp"
#include "sim/scheduler.hpp"

namespace idem::sim {

enum class StoreMode : std::uint8_t { lease, transactional };

struct ContractOptions {
  StoreMode mode = StoreMode::lease;
  /// A record in progress is kept at least this many leases from its claim and from its
  /// holder's last extend (§2: its lease ends a whole lease before the record may expire).
  int held_leases = 2;
  /// Lease mode: each claim's fence is the record's plus one (a new record: above every fence the
  /// key had). Off: only above every earlier fence.
  bool fences_by_one = true;
  /// Boundaries (lease end, expiry) are known to within this (0: exact, a simulated clock).
  Duration tolerance{};
  /// The store deletes a record once it expires: a claim of an expired record may start a new
  /// record above every earlier fence, not at the old record's next fence.
  bool expiry_removes = false;
};

/// One key's record as the contract has it.
struct KeyRecord {
  enum class State : std::uint8_t { absent, released, held, completed, failed };
  State state = State::absent;
  Fingerprint fingerprint{};
  Fence fence = 0;      // the record's
  Fence max_fence = 0;  // the largest fence the key ever had, any record
  Time claimed_at{};
  Time lease_until{};
  Time keep_until{};  // held or released: kept at least until then
  Time expires_at{};  // completed or failed: replays until then
  std::string result;
  std::uint64_t epoch = 0;  // a finished record that went (expiry, forget, purge) ends one
  std::vector<StepRecord> steps;
  std::uint64_t chain = 0;  // the run chain the steps belong to: a new one whenever they go
  std::optional<std::string> request;
  bool request_in_doubt = false;  // a real store's keep_request whose answer was lost
  bool took_over = false;         // the current hold began as a takeover
  Fence admin_fenced = 0;  // the largest fence the admin (release, forget, purge) took a hold from

  struct Landed {
    Fence fence;
    ClaimStatus status;
    std::string result;
    std::uint64_t epoch;
  };
  std::vector<Landed> landed;  // every commit that landed, in order
};

std::string_view to_string(KeyRecord::State state) noexcept;
std::string_view to_string(ClaimStatus status) noexcept;
/// A claim's answer in a line: "took over fence 7", "completed r3", ...
std::string claim_text(const Claim& claim);
/// A key's bytes, printable.
std::string printable(std::string_view key);

class Contract {
 public:
  Contract(ContractOptions options, Violations& violations)
      : options_(options), violations_(&violations) {}

  const ContractOptions& options() const noexcept { return options_; }
  /// The call about to be reported took `d` (a real store): the store decided at some moment
  /// in the `d` before it came back, so the boundaries near then are read either way.
  void took(Duration d) noexcept { call_time_ = d; }

  // Store calls that reached the store, at `now` (they are atomic there).
  void claim(const ClaimRequest& request, const Result<Claim>& answer, Time now);
  /// A claim whose answer was lost, and whose record now holds `fence` for its payload: it
  /// acquired (a takeover or not, whichever the contract allows).
  void claim_in_doubt(const ClaimRequest& request, Fence fence, Time now);
  void commit(const Ticket& ticket, const Completion& completion, const Status& answer, Time now);
  void abort(const Ticket& ticket, const Status& answer, Time now);
  void extend(const Ticket& ticket, std::chrono::milliseconds lease, const Status& answer,
              Time now);
  void load_steps(const Ticket& ticket, const Result<std::vector<StepRecord>>& answer, Time now);
  void save_step(const Ticket& ticket, const StepWrite& step, const Status& answer, Time now);
  void keep_request(const Ticket& ticket, std::string_view request, const Status& answer, Time now);
  /// A real store's call whose answer was lost: the holder's steps read back, or its kept
  /// request no longer known (any request find_abandoned reports for it is taken).
  void resync_steps(const Ticket& ticket, const std::vector<StepRecord>& steps);
  void request_in_doubt(const Ticket& ticket);
  void find_abandoned(std::string_view prefix, const Result<std::vector<Abandoned>>& answer,
                      Time now);

  // The admin's operations, as they ran.
  void release(std::string_view key, Fence only_fence, bool changed, Time now);
  void forget(std::string_view key, bool changed, Time now);
  /// After a purge: `still_there(key)` says whether the store kept the key's record.
  template <class StillThere>
  void purge(Time now, StillThere&& still_there) {
    for (auto& [key, record] : keys_) purge_one(key, record, now, still_there(key));
  }
  /// The store lost every record (a memory store's process restarted): a new store.
  void wipe();

  // Transactional mode: the holder's transaction under `fence` rolled back (abort, a dropped
  // connection, a crash), or back to the savepoint after the claim (rewind).
  void rolled_back(std::string_view key, Fence fence);
  void rewound(std::string_view key, Fence fence);

  /// Hears of every commit that lands (the ledger's check).
  std::function<void(std::string_view key, Fence fence, ClaimStatus status, Time now)> on_landed;

  /// The key's record, or null when the contract never saw it.
  const KeyRecord* find(std::string_view key) const;
  const std::map<std::string, KeyRecord, std::less<>>& keys() const noexcept { return keys_; }

 private:
  struct Expect;
  Expect expect_claim(const KeyRecord& record, const Fingerprint& fingerprint, Time at) const;
  /// Whether `claim` is an answer the record allows near `now`; `matched`: the answer's reading
  /// of the record (what an acquisition carries over).
  bool allowed(const KeyRecord& record, const ClaimRequest& request, const Claim& claim, Time now,
               Check& broken, std::string& why, Expect& matched) const;
  void acquire(KeyRecord& record, const ClaimRequest& request, const Claim& claim, Time now,
               const Expect& e);
  void purge_one(const std::string& key, KeyRecord& record, Time now, bool still_there);
  /// The record goes (forget, purge, expiry): a new one starts the next epoch's chain, above
  /// every fence; its holder (or one whose commit landed unheard) hears lease_lost from now on.
  static void remove(KeyRecord& record);
  bool holds(const KeyRecord& record, Fence fence) const noexcept;
  // A store that deletes expired records may have deleted this one by `now`: a call under its
  // fence then answers lease_lost, and the record is gone (true: the answer was that).
  bool went(KeyRecord& record, const Status& answer, Time now);
  // A fenced call (`what`: abort, extend, a step, ...) answered `answer`: true when it is the
  // holder's and succeeded, so that the caller applies its change; a stale call that succeeded,
  // or the holder's that was refused, is a violation.
  bool fenced(KeyRecord& record, std::string_view key, Fence fence, const Status& answer, Time now,
              std::string_view what);
  void fail(Check check, std::string_view key, std::string what);

  ContractOptions options_;
  Duration call_time_{};
  Violations* violations_;
  std::map<std::string, KeyRecord, std::less<>> keys_;
  // Transactional mode: each open transaction's record as it was before its claim.
  std::map<std::pair<std::string, Fence>, KeyRecord, std::less<>> before_;
  std::map<std::pair<std::string, Fence>, std::vector<StepRecord>, std::less<>> savepoints_;
};

}  // namespace idem::sim
