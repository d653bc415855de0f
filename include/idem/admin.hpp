#pragma once
// The operator's view of a record store (docs/operations.md#the-admin-api). Each call is one
// atomic step in the backend, so an operator never races the guard into a half-changed record;
// fences are never reused (release keeps the fence, forget raises the floor to it).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/fingerprint.hpp"
#include "idem/key.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem::admin {

/// A record's state as an operator sees it.
enum class State : std::uint8_t { in_progress, completed, failed, released };

std::string_view to_string(State state) noexcept;
/// "in_progress" (or "in-progress"), "completed", "failed", "released"; nullopt otherwise.
std::optional<State> state_from_string(std::string_view text) noexcept;

/// One record as it stands.
struct RecordInfo {
  std::string principal;  // the key's principal and id, bytes as given to the guard
  std::string id;
  State state = State::released;
  Fence fence = 0;
  bool took_over = false;                   // the holder took the key over (SQL only)
  std::chrono::milliseconds lease_left{0};  // in progress: until another claim may take over
  std::chrono::milliseconds expires_in{0};  // until the record may be removed or reclaimed
  std::int64_t expires_at_ms = 0;           // the same, ms since the epoch (backend clock)
  Fingerprint fingerprint;                  // the payload's
  std::size_t result_size = 0;              // completed: the stored result's bytes
  std::string failure;                      // failed: the error and message it replays
};

/// One page of a listing: records of one state, oldest first (by expiry: the claim or commit
/// time plus the retention), and the cursor of the next page (empty: this was the last).
struct Page {
  std::vector<RecordInfo> records;
  std::string next_cursor;
};

struct ListRequest {
  State state = State::in_progress;
  std::size_t limit = 100;  // records per page, at least 1
  std::string cursor{};     // from the previous page; empty: from the oldest
};

/// What release or forget did.
struct Change {
  bool changed = false;                // false: nothing matched (see `before`)
  std::optional<RecordInfo> before{};  // the record as it was; nullopt: no record
};

/// The schema as found, against the version this library writes.
struct SchemaReport {
  int expected_version = 0;
  int found_version = 0;               // 0: no schema table or no version row
  bool complete = false;               // every table and index present, at the expected version
  std::vector<std::string> missing{};  // tables or indexes absent
  std::int64_t fence_floor = 0;        // SQL: the floor new records start above
  std::string note{};                  // one line an operator can act on
};

/// Counts of a scope's records, by state.
struct Stats {
  std::string store;  // "sqlite", "postgres", "redis", "memory"
  std::uint64_t in_progress = 0;
  std::uint64_t completed = 0;
  std::uint64_t failed = 0;
  std::uint64_t released = 0;
  std::uint64_t expired = 0;  // past their expiry, still stored (purge removes them)
};

/// The operations. Thread-safe. Errors are idem::errc codes with a message: store_unavailable
/// (unreachable, missing table, another schema version), record_corrupt (a row idem did not
/// write), key_invalid (an empty id, or a cursor this store did not hand out).
class Admin {
 public:
  virtual ~Admin() = default;

  /// "sqlite", "postgres", "redis" or "memory".
  virtual std::string_view store_name() const noexcept = 0;

  /// The record of a key, or nullopt when there is none.
  virtual Result<std::optional<RecordInfo>> inspect(std::string_view scope, const Key& key) = 0;

  /// A page of a scope's records in one state, oldest first. Paging with next_cursor returns each
  /// record that stays in that state throughout exactly once.
  virtual Result<Page> list(std::string_view scope, const ListRequest& request) = 0;

  /// Releases a key held in progress, as the holder's abort would: the fence stays, so the old
  /// holder's commit answers lease_lost; the run's steps and kept request stay, so the same
  /// request resumes. `only_fence` (non-zero): only if the holder still has that fence.
  virtual Result<Change> release(std::string_view scope, const Key& key, Fence only_fence = 0) = 0;
  /// Removes a record in any state, so the next claim runs the handler with any payload under a
  /// larger fence; its result, steps and kept request go. A CachedStore elsewhere may replay it
  /// for up to its max_ttl; in this process, forget through cached_admin().
  virtual Result<Change> forget(std::string_view scope, const Key& key) = 0;

  /// Removes up to `max_records` records past their expiry; how many went. Redis expires records
  /// itself: 0.
  virtual Result<std::size_t> purge_expired(std::size_t max_records) = 0;

  /// The schema this library writes, as the backend's DDL (Redis: a description of the keys).
  virtual std::string schema_text() const = 0;
  virtual Result<SchemaReport> check_schema() = 0;
  /// Creates what is missing and upgrades an older version to this library's, in one
  /// transaction; refuses a newer version.
  virtual Result<SchemaReport> migrate_schema() = 0;

  /// A scope's records counted by state (every scope: an empty scope and `all_scopes`).
  virtual Result<Stats> stats(std::string_view scope, bool all_scopes = false) = 0;
};

/// What an admin opened from a URI needs beside it: the prefixes the stores were given.
struct UriOptions {
  std::string table_prefix = "idem_";  // the SQL stores' table prefix
  std::string key_prefix = "idem:";    // the Redis stores' key prefix
  /// The Redis stores' AUTH password, for a URI that has none (it then stays out of the URI, and
  /// of any message that shows it); empty: the URI's. PostgreSQL's libpq reads its own,
  /// PGPASSWORD or the password file PGPASSFILE, when the URI has none.
  std::string password{};
};

/// How a backend opens its admin from a URI, for a tool taking any store's URI (the `idem`
/// command): each compiled backend defines one, `idem::admin::<backend>_uri_opener`.
struct UriOpener {
  std::string_view forms;  ///< the URIs it takes, for messages: "sqlite:PATH"
  /// The admin of the store `uri` names (holding what it needs alive), or nullptr when `uri` is
  /// not this backend's. Throws idem::Error (config_invalid) or std::invalid_argument for a URI
  /// of its own it cannot use.
  std::unique_ptr<Admin> (*open)(std::string_view uri, const UriOptions& options);
};

// --- Shared by the adapters' admins --------------------------------------------------------------

namespace detail {

/// The principal and id of an effective key under `scope` (idem/engine/effective_key.hpp's
/// layout); false when the bytes are not a key of that scope.
bool split_key(std::string_view effective, std::string_view scope, std::string& principal,
               std::string& id);
std::string scope_prefix(std::string_view scope);
std::string effective_key(std::string_view scope, const Key& key);

/// The failure text a failed record's bytes replay ("handler failed: card declined").
std::string failure_text(std::string_view bytes);

/// A listing cursor: the expiry and the key of the last record of a page, as text.
std::string make_cursor(std::int64_t expires_at_ms, std::string_view key);
/// False when `cursor` is not one make_cursor wrote.
bool read_cursor(std::string_view cursor, std::int64_t& expires_at_ms, std::string& key);

}  // namespace detail

}  // namespace idem::admin

#include "idem/admin/admin_inline.hpp"
