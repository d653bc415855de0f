// A Redis Streams consumer whose effects happen exactly once: each message is deduplicated by
// its id through the guard, its effect (a ledger row) is written in the claim's SQLite
// transaction, and it is acknowledged only after that commit. A consumer that dies holding
// messages loses nothing: another one reclaims them (XAUTOCLAIM) and the guard runs or replays
// each. See docs/consumers.md.
//
//   example_stream_consumer redis://127.0.0.1:6379   (or IDEM_EXAMPLE_REDIS_URI; without one it
//                                                     says so and exits 0)

#include "idem/redis/stream_consumer.hpp"

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "idem/idem.hpp"
#include "idem/sqlite/store.hpp"
#include "idem/sqlite/transaction.hpp"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  const char* uri = argc > 1 ? argv[1] : std::getenv("IDEM_EXAMPLE_REDIS_URI");
  if (uri == nullptr || *uri == '\0') {
    fmt::print(
        "stream_consumer: no Redis URI given (argument or IDEM_EXAMPLE_REDIS_URI); skipped\n");
    return 0;
  }
  auto options = idem::redis::ConnectionOptions::from_uri(uri);
  if (!options) {
    fmt::print(stderr, "bad URI: {}\n", options.failure().describe());
    return 2;
  }
  auto client = std::make_shared<idem::redis::Client>(options.value());

  // The ledger and the idempotency records in one SQLite file: one transaction holds both.
  const std::string stream = fmt::format("example:payments:{}", ::getpid());
  const std::string db = (std::filesystem::temp_directory_path() /
                          fmt::format("idem_stream_example_{}.db", ::getpid()))
                             .string();
  {
    SQLite::Database d(db, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    d.exec("CREATE TABLE ledger (message TEXT NOT NULL, account TEXT, cents INTEGER)");
  }
  idem::SqliteStore store({.path = db, .mode = idem::SqlMode::transactional});
  idem::IdempotencyGuard guard(store, idem::Options{.scope = "payments.apply"});

  auto consumer_named = [&](const char* name) {
    return idem::redis::StreamConsumer(client, {.stream = stream,
                                                .group = "ledger",
                                                .consumer = name,
                                                .count = 10,
                                                .reclaim_idle = 200ms});
  };
  auto first = consumer_named("worker-1");
  if (!first.create_group()) return 1;
  for (int i = 0; i < 30; ++i) {
    (void)client->command({"XADD", stream, "*", "account", fmt::format("acct-{}", i % 3), "cents",
                           std::to_string(100 + i)});
  }

  // Applies one payment inside the claim's transaction.
  auto apply = [](const idem::redis::StreamMessage& m, idem::Context& ctx) {
    SQLite::Statement st(idem::sqlite_transaction(ctx),
                         "INSERT INTO ledger (message, account, cents) VALUES (?1, ?2, ?3)");
    st.bind(1, m.id);
    st.bind(2, std::string(m.field("account")));
    st.bind(3, static_cast<std::int64_t>(std::stoll(std::string(m.field("cents")))));
    st.exec();
    return std::string("applied");
  };

  // worker-1 takes a page and dies before it applies or acknowledges anything.
  auto taken = first.next();
  fmt::print("worker-1 took {} messages and crashed\n", taken ? taken->size() : 0);

  // worker-2 drains the stream; after 200 ms idle, worker-1's page is reclaimed too.
  auto second = consumer_named("worker-2");
  std::size_t acked = 0;
  for (int round = 0; round < 100 && acked < 30; ++round) {
    auto report = second.process(guard, apply);
    if (!report) {
      fmt::print(stderr, "read failed: {}\n", report.failure().describe());
      return 1;
    }
    acked += report->acked;
    if (report->read == 0) std::this_thread::sleep_for(50ms);
  }

  // A redelivery of an applied message (its XACK lost, say) is a replay, not a second payment.
  auto again = guard.execute(idem::Key{taken->front().id, stream}, taken->front().payload(),
                             [&](idem::Context& ctx) { return apply(taken->front(), ctx); });

  SQLite::Database d(db, SQLite::OPEN_READONLY);
  const auto rows = d.execAndGet("SELECT count(*) FROM ledger").getInt64();
  const auto distinct = d.execAndGet("SELECT count(DISTINCT message) FROM ledger").getInt64();
  fmt::print("acknowledged {}, ledger rows {} ({} messages), redelivery replayed: {}\n", acked,
             rows, distinct, again.replayed());
  (void)client->command({"DEL", stream});
  for (const char* suffix : {"", "-wal", "-shm", "-fences"}) {
    std::error_code ignored;
    std::filesystem::remove(db + suffix, ignored);
  }
  return acked == 30 && rows == 30 && distinct == 30 && again.replayed() ? 0 : 1;
}
