// Rides, after brandur's "rocket rides": a ride request is three steps: create the ride (an
// atomic phase: the row commits with its step record), charge at a payment provider, send a
// receipt. The provider is itself guarded by idem on the step's derived key and counts the
// charges it really made; the mailer drops repeats of a receipt's key.
//
// The example runs the service in worker processes and kills them with SIGKILL at random
// moments, restarting them; then a Completer finishes the runs the dead workers abandoned, and a
// last client pass retries every ride. It checks that every ride exists once, was charged once
// and got one receipt, and exits non-zero if not.
//
//   example_rides [rides] [kills]     (defaults: 30 rides, 12 kills; a fresh temporary database)

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "idem/idem.hpp"
#include "idem/sqlite/store.hpp"
#include "idem/sqlite/transaction.hpp"

namespace {

using std::chrono::milliseconds;

// The provider's own idempotency: a guard in transactional mode on its own tables, keyed by the
// caller's idempotency key; a charge row commits with the provider's record, so it is made once.
class FakeProvider {
 public:
  explicit FakeProvider(const std::string& db)
      : store_(idem::SqliteStoreOptions{
            .path = db, .mode = idem::SqlMode::transactional, .table_prefix = "provider_"}),
        guard_(store_, idem::Options{.scope = "provider.charge",
                                     .in_progress = idem::Wait{.timeout = milliseconds{5000}}}) {}

  std::string charge(const std::string& idempotency_key, const std::string& ride) {
    auto out = guard_.execute(idempotency_key, ride, [&](idem::Context& ctx) {
      SQLite::Statement st(idem::sqlite_transaction(ctx),
                           "INSERT INTO charges (ride, idempotency_key) VALUES (?1, ?2)");
      st.bind(1, ride);
      st.bind(2, idempotency_key);
      st.exec();
      return "ch_" + idempotency_key.substr(5, 12);
    });
    return out.value();  // throws idem::Error if the provider failed: the step runs again later
  }

 private:
  idem::SqliteStore store_;
  idem::IdempotencyGuard<idem::SqliteStore> guard_;
};

// The mailer keeps one receipt per receipt key; every send is counted.
void send_receipt(SQLite::Database& db, const std::string& ride, const std::string& key) {
  db.exec("INSERT INTO receipt_sends DEFAULT VALUES");
  SQLite::Statement st(db, "INSERT OR IGNORE INTO receipts (ride, receipt_key) VALUES (?1, ?2)");
  st.bind(1, ride);
  st.bind(2, key);
  st.exec();
}

idem::Options service_options() {
  return idem::Options{.scope = "rides.request",
                       .lease = milliseconds{200},
                       .in_progress = idem::Wait{.timeout = milliseconds{5000}},
                       .keep_request = true};
}

// The ride service's handler: the same three steps for every run of a request.
std::string ride_handler(idem::Context& ctx, std::string_view request, FakeProvider& provider,
                         SQLite::Database& mail) {
  const std::string ride(request);
  ctx.atomic_step("create", [&](idem::Context& c) {
    SQLite::Statement st(idem::sqlite_transaction(c), "INSERT INTO rides (ride) VALUES (?1)");
    st.bind(1, ride);
    st.exec();
  });
  const std::string charge =
      ctx.step("charge", [&] { return provider.charge(ctx.step_key("charge"), ride); });
  ctx.step("receipt", [&] { send_receipt(mail, ride, ctx.step_key("receipt")); });
  return ride + " paid by " + charge;
}

std::string ride_name(int i) { return fmt::format("ride-{:03}", i); }

// A client pass: requests every ride in turn (repeats replay).
int serve_all(const std::string& db, int rides) {
  idem::SqliteStore store(idem::SqliteStoreOptions{.path = db, .table_prefix = "rides_"});
  idem::IdempotencyGuard guard{store, service_options()};
  FakeProvider provider(db);
  SQLite::Database mail(db, SQLite::OPEN_READWRITE, 5000);
  int failed = 0;
  for (int i = 0; i < rides; ++i) {
    const std::string ride = ride_name(i);
    try {
      auto out = guard.execute(
          ride, ride, [&](idem::Context& ctx) { return ride_handler(ctx, ride, provider, mail); });
      if (!out.has_value()) ++failed;
    } catch (const std::exception&) {
      ++failed;
    }
  }
  return failed;
}

void create_tables(const std::string& db) {
  SQLite::Database d(db, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, 5000);
  d.exec("PRAGMA journal_mode = WAL");
  d.exec("CREATE TABLE rides (ride TEXT NOT NULL)");  // no unique key: duplicates would show
  d.exec("CREATE TABLE charges (ride TEXT NOT NULL, idempotency_key TEXT NOT NULL)");
  d.exec("CREATE TABLE receipts (ride TEXT NOT NULL, receipt_key TEXT NOT NULL UNIQUE)");
  d.exec("CREATE TABLE receipt_sends (id INTEGER PRIMARY KEY)");
}

std::map<std::string, int> count_by_ride(SQLite::Database& d, const std::string& table) {
  std::map<std::string, int> counts;
  SQLite::Statement st(d, "SELECT ride, count(*) FROM " + table + " GROUP BY ride");
  while (st.executeStep()) counts[st.getColumn(0).getString()] = st.getColumn(1).getInt();
  return counts;
}

}  // namespace

int main(int argc, char** argv) {
  const int rides = argc > 1 ? std::atoi(argv[1]) : 30;
  const int kills = argc > 2 ? std::atoi(argv[2]) : 12;
  const auto dir = std::filesystem::temp_directory_path() /
                   fmt::format("idem_rides_{}", static_cast<long>(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "rides.db").string();
  create_tables(db);

  // Workers serve every ride and are killed at random moments; each restart resumes.
  std::mt19937 random(std::random_device{}());
  int killed = 0;
  for (int round = 0; round < kills; ++round) {
    const pid_t worker = ::fork();
    if (worker == 0) ::_exit(serve_all(db, rides) == 0 ? 0 : 1);
    std::this_thread::sleep_for(milliseconds{std::uniform_int_distribution<>(5, 120)(random)});
    if (::kill(worker, SIGKILL) == 0) ++killed;
    ::waitpid(worker, nullptr, 0);
  }

  // The runs the dead workers left behind: finished by the completer, no client needed.
  std::size_t completed = 0;
  {
    idem::SqliteStore store(idem::SqliteStoreOptions{.path = db, .table_prefix = "rides_"});
    FakeProvider provider(db);
    SQLite::Database mail(db, SQLite::OPEN_READWRITE, 5000);
    idem::Completer completer(store, service_options(),
                              [&](idem::Context& ctx, std::string_view request) {
                                return ride_handler(ctx, request, provider, mail);
                              });
    std::this_thread::sleep_for(milliseconds{250});  // the dead workers' leases run out
    for (int pass = 0; pass < 20; ++pass) {
      auto done = completer.run_once();
      if (!done || done->found == 0) break;
      completed += done->completed;
      std::this_thread::sleep_for(milliseconds{50});
    }
  }
  // The clients come back: rides never requested run now, the others replay.
  const int failed = serve_all(db, rides);

  SQLite::Database d(db, SQLite::OPEN_READONLY);
  const auto created = count_by_ride(d, "rides");
  const auto charged = count_by_ride(d, "charges");
  const auto receipts = count_by_ride(d, "receipts");
  const int sends = d.execAndGet("SELECT count(*) FROM receipt_sends").getInt();
  int wrong = failed;
  for (int i = 0; i < rides; ++i) {
    const std::string ride = ride_name(i);
    auto count = [&](const std::map<std::string, int>& m) {
      auto it = m.find(ride);
      return it == m.end() ? 0 : it->second;
    };
    if (count(created) != 1 || count(charged) != 1 || count(receipts) != 1) {
      fmt::print("{}: {} rides, {} charges, {} receipts\n", ride, count(created), count(charged),
                 count(receipts));
      ++wrong;
    }
  }
  fmt::print(
      "rides example: {} rides, {} workers killed, {} runs finished by the completer; "
      "{} receipt sends for {} receipts; {}\n",
      rides, killed, completed, sends, receipts.size(),
      wrong == 0 ? "every ride created, charged and receipted exactly once" : "FAILED");
  std::filesystem::remove_all(dir);
  return wrong == 0 ? 0 : 1;
}
