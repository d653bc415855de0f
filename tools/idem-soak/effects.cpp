#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "backend.hpp"
#include "idem/sqlite/transaction.hpp"
#ifdef IDEM_SOAK_POSTGRES
#include <pqxx/pqxx>

#include "idem/postgres/transaction.hpp"
#endif

namespace idem::soak {
namespace {

std::string table(const SoakOptions& o) { return o.store_prefix() + "effects"; }

[[noreturn]] void no_sql(const SoakOptions& o) {
  throw std::runtime_error(std::string("no effects table on ") + to_string(o.backend));
}

}  // namespace

void Effects::create(const SoakOptions& o) {
  const std::string sql = "CREATE TABLE IF NOT EXISTS " + table(o) +
                          " (key TEXT NOT NULL, call TEXT NOT NULL, "
                          "fence BIGINT NOT NULL)";
  if (o.backend == Backend::sqlite) {
    SQLite::Database db(o.target, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, 10'000);
    db.exec(sql);
    return;
  }
#ifdef IDEM_SOAK_POSTGRES
  if (o.backend == Backend::postgres) {
    pqxx::connection c(o.target);
    pqxx::work w(c);
    w.exec(sql);
    w.commit();
    return;
  }
#endif
  no_sql(o);
}

void Effects::insert(const SoakOptions& o, const Context& ctx, const Effect& e) {
  const std::string sql = "INSERT INTO " + table(o) + " (key, call, fence) VALUES ";
  try {
    if (o.backend == Backend::sqlite) {
      SQLite::Statement st(sqlite_transaction(ctx), sql + "(?1, ?2, ?3)");
      st.bind(1, e.key);
      st.bind(2, e.call);
      st.bind(3, static_cast<std::int64_t>(e.fence));
      st.exec();
      return;
    }
#ifdef IDEM_SOAK_POSTGRES
    if (o.backend == Backend::postgres) {
      // Values quoted into the text: the same call on libpqxx 6 and 7.
      pqxx::dbtransaction& tx = pg_transaction(ctx);
      tx.exec(sql + "(" + tx.quote(e.key) + ", " + tx.quote(e.call) + ", " +
              std::to_string(e.fence) + ")");
      return;
    }
#endif
  } catch (const Error&) {
    throw;
  } catch (const std::exception& ex) {
    // The database went away under the handler (a restart): a documented store failure.
    throw Error(make_error_code(errc::store_unavailable), ex.what());
  }
  no_sql(o);
}

std::vector<Effect> Effects::read_all(const SoakOptions& o) {
  std::vector<Effect> out;
  const std::string sql = "SELECT key, call, fence FROM " + table(o);
  if (o.backend == Backend::sqlite) {
    SQLite::Database db(o.target, SQLite::OPEN_READONLY, 10'000);
    SQLite::Statement st(db, sql);
    while (st.executeStep()) {
      out.push_back(
          {st.getColumn(0).getString(), st.getColumn(1).getString(), st.getColumn(2).getInt64()});
    }
    return out;
  }
#ifdef IDEM_SOAK_POSTGRES
  if (o.backend == Backend::postgres) {
    pqxx::connection c(o.target);
    pqxx::read_transaction r(c);
    for (const auto& row : r.exec(sql)) {
      out.push_back(
          {row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::int64_t>()});
    }
    return out;
  }
#endif
  no_sql(o);
}

}  // namespace idem::soak
