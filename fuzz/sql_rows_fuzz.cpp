// Rows the SQL stores read back, with any types and values a foreign writer or damage could leave
// (SQLite keeps whatever type was written). The first byte picks the table:
//  - the record table: a fuzzed row is written under a key of a real SqliteStore file, then the
//    store claims that key. A completed or failed answer must come from a row idem could have
//    written (integer state 1 or 2, matching integer fingerprint, live expiry) and carry its
//    result; a row that is one must be answered as such; other rows give record_corrupt or
//    in_progress, never a replayed value and never an exception.
//  - the entity op log: a fuzzed row (cells as the session hands them over: decimal text or
//    bytes, or NULL) goes through the op-log decoder with the same rules.

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "idem/engine/record_model.hpp"
#include "idem/sqlite/store.hpp"
#include "sql/entity_engine.hpp"

namespace {

using idem::ClaimStatus;
using idem::errc;
using idem::fuzz::is;
using namespace std::chrono_literals;

constexpr const char* kNow = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";
const idem::Fingerprint kFingerprint{0x0123456789abcdefULL, 0xfedcba9876543210ULL};

// One fuzzed cell: its SQLite type and value.
struct Cell {
  enum Kind : std::uint8_t { integer, real, text, blob, null } kind = integer;
  std::int64_t number = 0;
  double real_value = 0;
  std::string bytes;
};

Cell make_cell(FuzzedDataProvider& in, std::int64_t likely) {
  Cell c;
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0:
      c.kind = Cell::real;
      c.real_value = in.ConsumeFloatingPoint<double>();
      break;
    case 1:
      c.kind = Cell::text;
      c.bytes = in.ConsumeRandomLengthString(24);
      break;
    case 2:
      c.kind = Cell::blob;
      c.bytes = in.ConsumeRandomLengthString(24);
      break;
    case 3:
      c.kind = Cell::null;
      break;
    case 4:
      c.number = in.ConsumeIntegral<std::int64_t>();
      break;
    default:
      c.number = likely;
      break;
  }
  return c;
}

void bind(SQLite::Statement& st, int i, const Cell& c) {
  switch (c.kind) {
    case Cell::integer:
      st.bind(i, c.number);
      break;
    case Cell::real:
      st.bind(i, c.real_value);
      break;
    case Cell::text:
      st.bind(i, c.bytes);
      break;
    case Cell::blob:
      st.bind(i, c.bytes.data(), static_cast<int>(c.bytes.size()));
      break;
    case Cell::null:
      st.bind(i);
      break;
  }
}

struct Fixture {
  std::string dir;
  std::unique_ptr<idem::SqliteStore> store;
  std::unique_ptr<SQLite::Database> raw;

  Fixture() {
    // Under IDEM_FUZZ_TMPDIR when set (scripts/fuzz: a directory it removes, even after a
    // crash), else memory-backed /dev/shm when there is one: every input writes the file twice.
    const char* base = std::getenv("IDEM_FUZZ_TMPDIR");
    if (base == nullptr) base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string pattern = std::string(base) + "/idem-fuzz-sql-XXXXXX";
    IDEM_FUZZ_CHECK(::mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
    const std::string path = dir + "/records.db";
    store = std::make_unique<idem::SqliteStore>(
        idem::SqliteStoreOptions{.path = path, .table_prefix = "fz_"});
    IDEM_FUZZ_CHECK(store->ensure_schema().ok());
    raw = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE);
    raw->exec("PRAGMA synchronous=OFF");
  }
  ~Fixture() {
    raw.reset();
    store.reset();
    for (const char* f :
         {"/records.db", "/records.db-wal", "/records.db-shm", "/records.db-fences"}) {
      (void)::unlink((dir + f).c_str());
    }
    (void)::rmdir(dir.c_str());
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void record_row(FuzzedDataProvider& in) {
  Fixture& fx = fixture();
  const std::int64_t state_guess = in.ConsumeIntegralInRange<std::int64_t>(
      0, static_cast<std::int64_t>(idem::detail::SqlState::released));
  const bool same_fp = in.ConsumeBool();
  const std::array<Cell, 8> cells{
      make_cell(in, state_guess),
      make_cell(in, same_fp ? static_cast<std::int64_t>(kFingerprint.high) : 5),
      make_cell(in, same_fp ? static_cast<std::int64_t>(kFingerprint.low) : 6),
      make_cell(in, in.ConsumeIntegralInRange<std::int64_t>(1, 1000)),
      make_cell(in, 0),
      // lease_until and expires_at: an integer is an offset from now, at least a minute away,
      // so that the row cannot change between the write and the claim.
      make_cell(in, (in.ConsumeBool() ? 1 : -1) *
                        in.ConsumeIntegralInRange<std::int64_t>(60'000, 1LL << 40)),
      make_cell(in, (in.ConsumeBool() ? 1 : -1) *
                        in.ConsumeIntegralInRange<std::int64_t>(60'000, 1LL << 40)),
      make_cell(in, 0),
  };
  std::string result_cell = in.ConsumeRemainingBytesAsString();
  Cell result = cells[7];
  if (result.kind == Cell::integer) {  // most rows: a blob result, as idem writes it
    result.kind = Cell::blob;
    result.bytes = std::move(result_cell);
  }

  fx.raw->exec("DELETE FROM fz_records");
  std::string sql =
      "INSERT INTO fz_records (key, state, fp_hi, fp_lo, fence, took_over, "
      "lease_until, expires_at, result) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ";
  for (int i : {5, 6}) {
    sql += cells[i].kind == Cell::integer ? std::string(kNow) + " + ?" + std::to_string(i + 2)
                                          : "?" + std::to_string(i + 2);
    sql += ", ";
  }
  sql += "?9)";
  SQLite::Statement insert(*fx.raw, sql);
  insert.bind(1, "k", 1);
  for (int i = 0; i < 7; ++i) bind(insert, i + 2, cells[static_cast<std::size_t>(i)]);
  bind(insert, 9, result);
  try {
    insert.exec();
  } catch (const SQLite::Exception&) {
    return;  // a NOT NULL column given NULL: the schema refuses such a row
  }

  // What the row holds now: SQLite's type affinity may have turned '1' or 1.0 into 1.
  SQLite::Statement stored(*fx.raw,
                           std::string("SELECT typeof(state) = 'integer' AND typeof(fp_hi) = "
                                       "'integer' AND typeof(fp_lo) = 'integer' AND typeof(fence) "
                                       "= 'integer' AND typeof(expires_at - 0) = 'integer' AND "
                                       "typeof(result) IN ('blob', 'null'), state, "
                                       "fp_hi, fp_lo, fence, expires_at - ") +
                               kNow + ", typeof(result), result FROM fz_records");
  IDEM_FUZZ_CHECK(stored.executeStep());
  const bool integers = stored.getColumn(0).getInt() != 0;
  const std::int64_t state = stored.getColumn(1).getInt64();
  const auto decoded = idem::detail::from_sql(state);
  const bool finished = decoded == idem::detail::RecordState::completed ||
                        decoded == idem::detail::RecordState::failed;
  const bool ours =
      integers && finished &&
      stored.getColumn(2).getInt64() == static_cast<std::int64_t>(kFingerprint.high) &&
      stored.getColumn(3).getInt64() == static_cast<std::int64_t>(kFingerprint.low) &&
      stored.getColumn(5).getInt64() > 10'000;
  const auto fence = static_cast<idem::Fence>(stored.getColumn(4).getInt64());
  const std::string result_type = stored.getColumn(6).getString();
  const SQLite::Column result_column = stored.getColumn(7);
  const auto* result_data = static_cast<const char*>(result_column.getBlob());
  const std::string result_bytes =
      result_data == nullptr
          ? std::string()
          : std::string(result_data, static_cast<std::size_t>(result_column.getBytes()));
  stored.reset();

  const idem::Result<idem::Claim> claim =
      fx.store->claim(idem::ClaimRequest{"k", kFingerprint, 1000ms, 1h});
  if (ours) {
    // A record idem could have written is read as what it is.
    IDEM_FUZZ_CHECK(claim.has_value());
    IDEM_FUZZ_CHECK(claim->status == (decoded == idem::detail::RecordState::completed
                                          ? ClaimStatus::completed
                                          : ClaimStatus::failed));
    IDEM_FUZZ_CHECK(claim->fence == fence);
  }
  if (!claim) {
    IDEM_FUZZ_CHECK(is(claim.error(), errc::record_corrupt) ||
                    is(claim.error(), errc::in_progress));
    return;
  }
  switch (claim->status) {
    case ClaimStatus::completed:
    case ClaimStatus::failed:
      IDEM_FUZZ_CHECK(ours);  // never a replay of a row idem did not write
      if (result_type == "blob" || result_type == "text")
        IDEM_FUZZ_CHECK(claim->result == result_bytes);
      if (result_type == "null") IDEM_FUZZ_CHECK(claim->result.empty());
      break;
    case ClaimStatus::acquired:
      IDEM_FUZZ_CHECK(fx.store->abort(idem::Ticket{"k", claim->fence}).ok());
      break;
    case ClaimStatus::in_progress:
    case ClaimStatus::mismatch:
      break;
  }
}

std::optional<std::int64_t> whole_integer(const std::optional<std::string>& cell) {
  if (!cell || cell->empty()) return std::nullopt;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(cell->data(), cell->data() + cell->size(), v);
  if (ec != std::errc{} || end != cell->data() + cell->size()) return std::nullopt;
  return v;
}

void op_log_row(FuzzedDataProvider& in) {
  idem::sql::Row row;
  const int columns = in.ConsumeIntegralInRange<int>(0, 6);
  for (int i = 0; i < columns; ++i) {
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {
      row.emplace_back(std::nullopt);
    } else if (in.ConsumeBool() && i >= 1 && i <= 2) {
      const auto half = i == 1 ? kFingerprint.high : kFingerprint.low;
      row.emplace_back(std::to_string(static_cast<std::int64_t>(half)));
    } else {
      row.emplace_back(in.ConsumeRandomLengthString(24));
    }
  }
  const idem::Result<idem::detail::CasAnswer> answer =
      idem::detail::stored_operation(row, kFingerprint);
  if (!answer) {
    IDEM_FUZZ_CHECK(is(answer.error(), errc::record_corrupt));
    return;
  }
  IDEM_FUZZ_CHECK(row.size() == 5);
  const auto state = whole_integer(row[0]);
  const auto fence = whole_integer(row[3]);
  const auto decoded = state ? idem::detail::from_sql(*state) : std::nullopt;
  IDEM_FUZZ_CHECK(decoded && *decoded != idem::detail::RecordState::released);
  IDEM_FUZZ_CHECK(whole_integer(row[1]) && whole_integer(row[2]));
  IDEM_FUZZ_CHECK(fence && *fence > 0 && answer->claim.fence == static_cast<idem::Fence>(*fence));
  const bool same = static_cast<std::uint64_t>(*whole_integer(row[1])) == kFingerprint.high &&
                    static_cast<std::uint64_t>(*whole_integer(row[2])) == kFingerprint.low;
  const ClaimStatus status = answer->claim.status;
  if (!same) {
    IDEM_FUZZ_CHECK(status == ClaimStatus::mismatch);
  } else if (*decoded == idem::detail::RecordState::held) {
    IDEM_FUZZ_CHECK(status == ClaimStatus::in_progress);
  } else {
    IDEM_FUZZ_CHECK(status == (*decoded == idem::detail::RecordState::completed
                                   ? ClaimStatus::completed
                                   : ClaimStatus::failed));
    IDEM_FUZZ_CHECK(answer->claim.result == row[4].value_or(std::string()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  if (in.ConsumeIntegralInRange<int>(0, 3) == 0) {
    op_log_row(in);
  } else {
    record_row(in);
  }
  return 0;
}
