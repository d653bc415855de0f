// PgSession's batches and groups: one multi-row statement each, the keys as arrays unnested in
// it, each answer row naming its item by ordinality; the single-key statements' rules.

#include <fmt/format.h>

#include <bit>
#include <string>
#include <utility>
#include <vector>

#include "idem/engine/record_model.hpp"
#include "postgres/pg_session.hpp"
#include "postgres/pg_values.hpp"

namespace idem::postgres::detail {

namespace {

constexpr const char* kClaimMany = "idem_claim_many";
constexpr const char* kFinishMany = "idem_finish_many";
constexpr const char* kWriteMany = "idem_write_many";

constexpr const char* kNow = "CAST(extract(epoch FROM statement_timestamp()) * 1000 AS bigint)";

// The claim upsert over `input` ({claimed} below), in key order so that two batches lock shared
// keys in the same order.
constexpr const char* kClaimedText =
    "claimed AS (INSERT INTO {rec} AS r (key, state, fp_hi, fp_lo, fence, took_over, "
    "lease_until, expires_at, result) "
    "SELECT key, {held}, fp_hi, fp_lo, GREATEST(1, (SELECT max(fence_floor) FROM {sch}) + 1), 0, "
    "{now} + lease_ms, {now} + keep_ms, NULL FROM input ORDER BY key "
    "ON CONFLICT (key) DO UPDATE SET state = {held}, fp_hi = excluded.fp_hi, "
    "fp_lo = excluded.fp_lo, fence = GREATEST(r.fence + 1, excluded.fence), "
    "took_over = CASE WHEN r.state = {held} AND r.expires_at > {now} THEN 1 ELSE 0 END, "
    "lease_until = excluded.lease_until, expires_at = excluded.expires_at, result = NULL "
    "WHERE r.state = {released} OR r.expires_at <= {now} OR (r.state = {held} "
    "AND r.lease_until <= {now} AND r.fp_hi = excluded.fp_hi AND r.fp_lo = excluded.fp_lo) "
    "RETURNING key, fence, took_over) ";

constexpr const char* kClaimManyText =
    "WITH input AS (SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::bigint[], $4::bigint[], "
    "$5::bigint[]) WITH ORDINALITY AS t(key, fp_hi, fp_lo, lease_ms, keep_ms, ord)), "
    "{claimed}"
    "SELECT i.ord, 1, c.fence, c.took_over, 0, 0, 0, 0, 0, NULL "
    "FROM input i JOIN claimed c ON c.key = i.key "
    "UNION ALL SELECT i.ord, 0, r.fence, r.took_over, r.state, r.fp_hi, r.fp_lo, "
    "r.lease_until - {now}, r.expires_at - {now}, r.result FROM input i JOIN {rec} r "
    "ON r.key = i.key WHERE NOT EXISTS (SELECT 1 FROM claimed c WHERE c.key = i.key)";

constexpr const char* kFinishManyText =
    "UPDATE {rec} AS r SET state = i.state, result = i.result, expires_at = {now} + i.ttl_ms "
    "FROM unnest($1::bytea[], $2::bigint[], $3::smallint[], $4::bytea[], $5::bigint[]) "
    "WITH ORDINALITY AS i(key, fence, state, result, ttl_ms, ord) "
    "WHERE r.key = i.key AND r.fence = i.fence AND r.state = {held} RETURNING i.ord";

// A group: finishes ($1-$5) and claims ($6-$10) in one statement. Every part sees the records as
// they were before it, so a claim of a key the group finishes is left out (the engine claims it
// alone afterwards). Rows: 0 and a matched finish's ordinality; 1 and a claim's columns.
constexpr const char* kWriteManyText =
    "WITH fin AS (SELECT * FROM unnest($1::bytea[], $2::bigint[], $3::smallint[], $4::bytea[], "
    "$5::bigint[]) WITH ORDINALITY AS t(key, fence, state, result, ttl_ms, ord)), "
    "finished AS (UPDATE {rec} AS r SET state = f.state, result = f.result, "
    "expires_at = {now} + f.ttl_ms FROM fin f "
    "WHERE r.key = f.key AND r.fence = f.fence AND r.state = {held} RETURNING f.ord), "
    "input AS (SELECT * FROM unnest($6::bytea[], $7::bigint[], $8::bigint[], $9::bigint[], "
    "$10::bigint[]) WITH ORDINALITY AS t(key, fp_hi, fp_lo, lease_ms, keep_ms, ord) "
    "WHERE NOT EXISTS (SELECT 1 FROM fin f WHERE f.key = t.key)), "
    "{claimed}"
    "SELECT 0, ord, 0, CAST(0 AS bigint), 0, 0, CAST(0 AS bigint), CAST(0 AS bigint), "
    "CAST(0 AS bigint), CAST(0 AS bigint), CAST(NULL AS bytea) FROM finished "
    "UNION ALL SELECT 1, i.ord, 1, c.fence, c.took_over, 0, 0, 0, 0, 0, NULL "
    "FROM input i JOIN claimed c ON c.key = i.key "
    "UNION ALL SELECT 1, i.ord, 0, r.fence, r.took_over, r.state, r.fp_hi, r.fp_lo, "
    "r.lease_until - {now}, r.expires_at - {now}, r.result FROM input i JOIN {rec} r "
    "ON r.key = i.key WHERE NOT EXISTS (SELECT 1 FROM claimed c WHERE c.key = i.key)";

std::int64_t as_i64(std::uint64_t v) { return std::bit_cast<std::int64_t>(v); }

class ArrayText {  // an array literal
 public:
  void add_number(std::int64_t v) {
    next();
    text_ += std::to_string(v);
  }
  // A bytea element: its hex form, quoted, the backslash escaped for the array parser.
  void add_bytes(std::string_view b) {
    static constexpr std::string_view kHex = "0123456789abcdef";
    next();
    text_.reserve(text_.size() + 6 + b.size() * 2);
    text_ += R"("\\x)";
    for (const unsigned char c : b) {
      text_.push_back(kHex[c >> 4]);
      text_.push_back(kHex[c & 15]);
    }
    text_ += '"';
  }
  std::string done() && {
    text_ += '}';
    return std::move(text_);
  }

 private:
  void next() { text_ += text_.empty() ? "{" : ","; }
  std::string text_;
};

std::string close(ArrayText a) {
  std::string t = std::move(a).done();
  return t == "}" ? "{}" : t;
}

}  // namespace

void PgSession::declare_batches(const sql::Statements& text) {
  std::string claimed;  // kClaimedText filled in; a format argument is inserted as it is
  auto fill = [&](const char* sql) {
    return fmt::format(
        fmt::runtime(sql), fmt::arg("rec", text.records), fmt::arg("sch", text.schema),
        fmt::arg("now", kNow), fmt::arg("held", static_cast<int>(sql::State::held)),
        fmt::arg("released", static_cast<int>(sql::State::released)), fmt::arg("claimed", claimed));
  };
  claimed = fill(kClaimedText);
  declare(kClaimMany, fill(kClaimManyText));
  declare(kFinishMany, fill(kFinishManyText));
  declare(kWriteMany, fill(kWriteManyText));
}

namespace {

std::vector<std::string> claim_values(std::span<const sql::ClaimArgs> args) {
  ArrayText keys, hi, lo, lease, keep;
  for (const sql::ClaimArgs& a : args) {
    keys.add_bytes(a.key);
    hi.add_number(as_i64(a.fingerprint.high));
    lo.add_number(as_i64(a.fingerprint.low));
    lease.add_number(a.lease_ms);
    keep.add_number(a.keep_ms);
  }
  return {close(std::move(keys)), close(std::move(hi)), close(std::move(lo)),
          close(std::move(lease)), close(std::move(keep))};
}

std::vector<std::string> finish_values(std::span<const sql::FinishArgs> args) {
  ArrayText keys, fences, states, results, ttls;
  for (const sql::FinishArgs& a : args) {
    keys.add_bytes(a.ticket.key);
    fences.add_number(static_cast<std::int64_t>(a.ticket.fence));
    states.add_number(static_cast<int>(a.state));
    results.add_bytes(a.result);
    ttls.add_number(a.ttl_ms);
  }
  return {close(std::move(keys)), close(std::move(fences)), close(std::move(states)),
          close(std::move(results)), close(std::move(ttls))};
}

// The item row `i` answers (1-based ordinality in column `at`) as an index; n when none.
std::size_t item_of(const Reply& r, int i, int at, std::size_t n) {
  std::int64_t ord = 0;
  if (!r.integer(i, at, ord)) return n;
  return ord >= 1 && ord <= static_cast<std::int64_t>(n) ? static_cast<std::size_t>(ord - 1) : n;
}

}  // namespace

// Crossing batches and groups lock records in different orders, so PostgreSQL may end one as a
// deadlock; it rolled back whole, so it is sent again, a few times.
sql::Session::Written PgSession::write_many(std::span<const sql::FinishArgs> finishes,
                                            std::span<const sql::ClaimArgs> claims) {
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    try {
      return write_many_once(finishes, claims);
    } catch (const PgError& e) {
      const bool again = e.sqlstate == "40P01" || e.sqlstate == "40001";  // deadlock, serialization
      if (!again || attempt >= kAttempts || !is_open()) throw;
    }
  }
}

sql::Session::Written PgSession::write_many_once(std::span<const sql::FinishArgs> finishes,
                                                 std::span<const sql::ClaimArgs> claims) {
  Written out;
  out.finished.assign(finishes.size(), false);
  out.claimed.resize(claims.size());
  Query q = prepared(finishes.empty() ? kClaimMany : claims.empty() ? kFinishMany : kWriteMany);
  if (!finishes.empty()) q.values = finish_values(finishes);
  if (!claims.empty()) {
    for (std::string& v : claim_values(claims)) q.values.push_back(std::move(v));
  }
  const Reply r = call(q);
  // A group's rows say which part they answer first (0: a finish, 1: a claim).
  const int at = !finishes.empty() && !claims.empty() ? 1 : 0;
  for (int i = 0; i < r.row_count(); ++i) {
    std::int64_t part = claims.empty() ? 0 : 1;
    if (at == 1 && !r.integer(i, 0, part)) continue;
    if (part == 0) {
      if (const std::size_t f = item_of(r, i, at, finishes.size()); f < finishes.size()) {
        out.finished[f] = true;
      }
    } else if (const std::size_t c = item_of(r, i, at, claims.size()); c < claims.size()) {
      out.claimed[c] = claim_row(r, i, at + 1);
    }
  }
  return out;
}

}  // namespace idem::postgres::detail
