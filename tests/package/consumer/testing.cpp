// The conformance kit from an installed idem, on a record store written outside idem as a store's
// author for another database would write one: a std::map behind a mutex, its time a
// ManualClock. Two MapStores over one Table are two processes over one database, which lets the
// kit's reopen cases run too. Built with IDEM_KIT_BREAK_FENCES, commit ignores fences, and the
// kit must fail the store (tests/package checks that it does).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <idem/idem.hpp>
#include <idem/testing/record_store_conformance.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace {

using std::chrono::milliseconds;

enum class State { in_progress, completed, failed, released };

struct Record {
  State state = State::released;
  idem::Fingerprint fingerprint{};
  idem::Fence fence = 0;  // kept through release and expiry: the next claim goes above it
  idem::Clock::time_point lease_until{};
  idem::Clock::time_point expires_at{};
  std::string result;
};

// The "database": every record, one lock, one clock.
struct Table {
  std::mutex mutex;
  std::map<std::string, Record, std::less<>> records;
  std::shared_ptr<idem::ManualClock> clock = std::make_shared<idem::ManualClock>();
};

class MapStore {
 public:
  explicit MapStore(std::shared_ptr<Table> table) : table_(std::move(table)) {}

  // One critical section: acquire, take over an expired lease, or say what holds the key.
  idem::Result<idem::Claim> claim(const idem::ClaimRequest& request) {
    std::lock_guard lock(table_->mutex);
    const auto now = table_->clock->now();
    Record& r = table_->records[std::string(request.key)];
    const bool live = r.state != State::released && now < r.expires_at;
    if (live && r.fingerprint != request.fingerprint) {
      return idem::Claim{.status = idem::ClaimStatus::mismatch, .fence = r.fence};
    }
    if (live && r.state != State::in_progress) {
      return idem::Claim{.status = r.state == State::completed ? idem::ClaimStatus::completed
                                                               : idem::ClaimStatus::failed,
                         .fence = r.fence,
                         .result = r.result,
                         .expires_in = std::chrono::floor<milliseconds>(r.expires_at - now)};
    }
    const bool took_over = live;  // in progress: taken over only once its lease has passed
    if (live && now < r.lease_until) {
      return idem::Claim{.status = idem::ClaimStatus::in_progress,
                         .fence = r.fence,
                         .lease_remaining = std::chrono::ceil<milliseconds>(r.lease_until - now)};
    }
    r.state = State::in_progress;
    r.fingerprint = request.fingerprint;
    ++r.fence;
    r.lease_until = now + request.lease;
    r.expires_at = now + idem::held_retention(request.retention, request.lease);
    r.result.clear();
    return idem::Claim{
        .status = idem::ClaimStatus::acquired, .fence = r.fence, .took_over = took_over};
  }

  idem::Status commit(const idem::Ticket& ticket, const idem::Completion& completion) {
    std::lock_guard lock(table_->mutex);
    Record* r = find(ticket.key);
    const State end =
        completion.status == idem::ClaimStatus::failed ? State::failed : State::completed;
    if (r != nullptr && held(*r, ticket.fence, /*for_commit=*/true)) {
      r->state = end;
      r->result = std::string(completion.result);
      r->expires_at = table_->clock->now() + completion.ttl;
      return {};
    }
    // This very commit, landed earlier with its reply lost: success, and nothing changes.
    if (r != nullptr && r->fence == ticket.fence && r->state == end &&
        r->result == completion.result) {
      return {};
    }
    return lease_lost(ticket);
  }

  idem::Status abort(const idem::Ticket& ticket) {
    std::lock_guard lock(table_->mutex);
    Record* r = find(ticket.key);
    if (r == nullptr || !held(*r, ticket.fence)) return lease_lost(ticket);
    r->state = State::released;
    return {};
  }

  idem::Status extend(const idem::Ticket& ticket, milliseconds lease) {
    std::lock_guard lock(table_->mutex);
    Record* r = find(ticket.key);
    if (r == nullptr || !held(*r, ticket.fence)) return lease_lost(ticket);
    const auto now = table_->clock->now();
    r->lease_until = now + lease;
    r->expires_at = std::max(r->expires_at, now + idem::held_retention({}, lease));
    return {};
  }

  // The handler writes nothing through this store, so there is nothing to undo: the key stays
  // held by its holder.
  idem::Status rewind(const idem::Ticket& ticket) {
    std::lock_guard lock(table_->mutex);
    Record* r = find(ticket.key);
    if (r == nullptr || !held(*r, ticket.fence)) return lease_lost(ticket);
    return {};
  }

  const std::shared_ptr<Table>& table() const { return table_; }

 private:
  Record* find(std::string_view key) {
    auto it = table_->records.find(key);
    return it == table_->records.end() ? nullptr : &it->second;
  }
  static bool held(const Record& r, idem::Fence fence, bool for_commit = false) {
#ifdef IDEM_KIT_BREAK_FENCES
    if (for_commit) return r.state == State::in_progress;
#else
    (void)for_commit;
#endif
    return r.state == State::in_progress && r.fence == fence;
  }
  static idem::Status lease_lost(const idem::Ticket& ticket) {
    return idem::Status(idem::errc::lease_lost,
                        "fence " + std::to_string(ticket.fence) + " no longer holds the key");
  }

  std::shared_ptr<Table> table_;
};

static_assert(idem::RewindableStore<MapStore>);

}  // namespace

template <>
struct idem::testing::StoreTraits<MapStore> {
  static constexpr milliseconds lease{std::chrono::seconds{30}};
  static std::unique_ptr<MapStore> make() {
    return std::make_unique<MapStore>(std::make_shared<Table>());
  }
  static void advance(MapStore& store, milliseconds d) { store.table()->clock->advance(d); }
  static std::unique_ptr<MapStore> reopen(MapStore& store) {
    return std::make_unique<MapStore>(store.table());
  }
};

IDEM_RECORD_STORE_CONFORMANCE(MapStore, MapStore);

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
