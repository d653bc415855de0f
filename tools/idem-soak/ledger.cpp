#include "ledger.hpp"

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/VariadicBind.h>

namespace idem::soak {
namespace {
// Writers are a handful of processes; a long busy timeout rides out their bursts.
constexpr int kBusyTimeoutMs = 60'000;
}  // namespace

void Ledger::create(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, kBusyTimeoutMs);
  db.exec("PRAGMA journal_mode = WAL");
  db.exec(R"(CREATE TABLE IF NOT EXISTS executions (
               id INTEGER PRIMARY KEY, call TEXT NOT NULL, key TEXT NOT NULL,
               fence INTEGER NOT NULL, pid INTEGER NOT NULL, slot INTEGER NOT NULL,
               t_call INTEGER NOT NULL, t_start INTEGER NOT NULL, t_end INTEGER,
               result TEXT NOT NULL DEFAULT '', threw INTEGER NOT NULL DEFAULT 0))");
  db.exec(R"(CREATE TABLE IF NOT EXISTS outcomes (
               slot INTEGER NOT NULL, op INTEGER NOT NULL, pid INTEGER NOT NULL,
               key TEXT NOT NULL, kind TEXT NOT NULL, code TEXT NOT NULL, result TEXT NOT NULL))");
  db.exec(R"(CREATE TABLE IF NOT EXISTS steps (
               key TEXT NOT NULL, call TEXT NOT NULL, kind TEXT NOT NULL, t INTEGER NOT NULL))");
}

void Ledger::record_step(const std::string& key, const std::string& call, const char* kind,
                         std::int64_t t) {
  SQLite::Statement st(*db_, "INSERT INTO steps (key, call, kind, t) VALUES (?1, ?2, ?3, ?4)");
  SQLite::bind(st, key, call, std::string(kind), t);
  st.exec();
}

std::vector<Ledger::StepRow> Ledger::steps() const {
  std::vector<StepRow> out;
  SQLite::Statement st(*db_, "SELECT key, call, kind, t FROM steps");
  while (st.executeStep()) {
    out.push_back(StepRow{st.getColumn(0).getString(), st.getColumn(1).getString(),
                          st.getColumn(2).getString(), st.getColumn(3).getInt64()});
  }
  return out;
}

Ledger::Ledger(const std::string& path)
    : db_(std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE, kBusyTimeoutMs)) {
  // NORMAL in WAL mode: a commit survives the writer's SIGKILL (not a power loss, which the
  // soak does not simulate).
  db_->exec("PRAGMA synchronous = NORMAL");
}

Ledger::~Ledger() = default;

std::int64_t Ledger::begin_execution(const Execution& e) {
  SQLite::Statement st(*db_,
                       "INSERT INTO executions (call, key, fence, pid, slot, t_call, t_start) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  SQLite::bind(st, e.call, e.key, e.fence, e.pid, e.slot, e.t_call, e.t_start);
  st.exec();
  return db_->getLastInsertRowid();
}

void Ledger::end_execution(std::int64_t id, std::int64_t t_end, std::string_view result,
                           bool threw) {
  SQLite::Statement st(*db_,
                       "UPDATE executions SET t_end = ?2, result = ?3, threw = ?4 "
                       "WHERE id = ?1");
  SQLite::bind(st, id, t_end, std::string(result), threw ? 1 : 0);
  st.exec();
}

void Ledger::record_outcome(const OutcomeRow& o) {
  SQLite::Statement st(*db_,
                       "INSERT INTO outcomes (slot, op, pid, key, kind, code, result) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  SQLite::bind(st, o.slot, o.op, o.pid, o.key, o.kind, o.code, o.result);
  st.exec();
}

std::vector<Execution> Ledger::executions() const {
  std::vector<Execution> out;
  SQLite::Statement st(*db_,
                       "SELECT call, key, fence, pid, slot, t_call, t_start, t_end, "
                       "result, threw FROM executions ORDER BY id");
  while (st.executeStep()) {
    Execution e;
    e.call = st.getColumn(0).getString();
    e.key = st.getColumn(1).getString();
    e.fence = st.getColumn(2).getInt64();
    e.pid = st.getColumn(3).getInt();
    e.slot = st.getColumn(4).getInt();
    e.t_call = st.getColumn(5).getInt64();
    e.t_start = st.getColumn(6).getInt64();
    if (!st.getColumn(7).isNull()) e.t_end = st.getColumn(7).getInt64();
    e.result = st.getColumn(8).getString();
    e.threw = st.getColumn(9).getInt() != 0;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<OutcomeRow> Ledger::outcomes() const {
  std::vector<OutcomeRow> out;
  SQLite::Statement st(*db_, "SELECT slot, op, pid, key, kind, code, result FROM outcomes");
  while (st.executeStep()) {
    OutcomeRow o;
    o.slot = st.getColumn(0).getInt();
    o.op = st.getColumn(1).getInt64();
    o.pid = st.getColumn(2).getInt();
    o.key = st.getColumn(3).getString();
    o.kind = st.getColumn(4).getString();
    o.code = st.getColumn(5).getString();
    o.result = st.getColumn(6).getString();
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace idem::soak
