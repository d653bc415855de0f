// A helper process of the two-phase race tests (process_race_cases.hpp):
//
//   idem_two_phase_worker <sqlite|postgres|redis> <path-or-uri> <prefix> <lease|transactional>
//                         <scope> <keys> <hold-ms>
//
// Opens its own store (SQL: tables under <prefix>; Redis: keys under <prefix>), prints "ready",
// waits for a line on stdin, then for each key-<i> calls begin(). Holding the key, it does the
// work (SQL: a business row "<scope>/<key>", through the claim's transaction in transactional
// mode; Redis: INCR <prefix>runs:<scope>/<key>), waits <hold-ms> and commits, printing
// "committed <key> <value>"; else it prints "replayed <key> <value>" or "refused <key>"
// (in_progress). Anything else is "err <key> <message>".

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <thread>

#include "idem/idem.hpp"

#ifdef IDEM_TWO_PHASE_SQL
#include "sql/sql_test_support.hpp"
#endif
#ifdef IDEM_TWO_PHASE_REDIS
#include "idem/redis/client.hpp"
#include "idem/redis/store.hpp"
#endif

using namespace idem;

namespace {

void say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

struct Race {
  std::string scope;
  int keys = 0;
  std::chrono::milliseconds hold{0};
};

// `work(attempt, name)` does the key's work while the attempt holds it.
template <class S, class Work>
int run(S& store, const Race& race, Work&& work) {
  IdempotencyGuard guard{store, Options{.scope = race.scope, .lease = std::chrono::seconds{30}}};
  say("ready");
  std::string go;
  if (!std::getline(std::cin, go) || go != "go") return 2;
  const std::string value = "v-" + std::to_string(::getpid());
  for (int i = 0; i < race.keys; ++i) {
    const std::string key = "key-" + std::to_string(i);
    auto attempt = guard.template begin<std::string>(key);
    if (attempt.acquired()) {
      try {
        work(attempt, race.scope + "/" + key);
      } catch (const std::exception& e) {
        say("err " + key + " the work failed: " + e.what());
        attempt.fail(e.what());
        continue;
      }
      std::this_thread::sleep_for(race.hold);
      Outcome<std::string> out = attempt.commit(value);
      say(out.recorded() ? "committed " + key + " " + out.value()
                         : "err " + key + " commit: " + out.message());
      continue;
    }
    const Outcome<std::string>& out = attempt.outcome();
    if (out) {
      say("replayed " + key + " " + out.value());
    } else if (out.error() == errc::in_progress) {
      say("refused " + key);
    } else {
      say("err " + key + " " + out.message());
    }
  }
  return 0;
}

#ifdef IDEM_TWO_PHASE_SQL
// A business row written on a connection of its own (lease mode: no transaction to join).
void insert_row_directly(const idem::testing::Target& t, const std::string& key) {
  const std::string sql =
      "INSERT INTO " + idem::testing::business_table(t) + " (key, note) VALUES ";
  if (t.backend == idem::testing::Backend::sqlite) {
    SQLite::Database db(t.location, SQLite::OPEN_READWRITE, 5000);
    SQLite::Statement st(db, sql + "(?1, 'run')");
    st.bind(1, key);
    st.exec();
  } else {
    pqxx::connection c(t.location);
    pqxx::work w(c);
    w.exec(sql + "(" + w.quote(key) + ", 'run')");
    w.commit();
  }
}

int run_sql(const std::string& backend, const std::string& location, const std::string& prefix,
            const std::string& mode, const Race& race) {
  const idem::testing::Target t{
      backend == "sqlite" ? idem::testing::Backend::sqlite : idem::testing::Backend::postgres,
      location, prefix};
  const bool tx = mode == "transactional";
  auto store = idem::testing::make_store(t, tx ? SqlMode::transactional : SqlMode::lease);
  return run(*store, race, [&](auto& attempt, const std::string& name) {
    if (tx) {
      idem::testing::insert_business_row(t, attempt.context(), name, "run");
    } else {
      insert_row_directly(t, name);
    }
  });
}
#endif

#ifdef IDEM_TWO_PHASE_REDIS
int run_redis(const std::string& uri, const std::string& prefix, const Race& race) {
  Result<redis::ConnectionOptions> options = redis::ConnectionOptions::from_uri(uri);
  if (!options) {
    say("err - bad URI: " + options.failure().describe());
    return 2;
  }
  auto client = std::make_shared<redis::Client>(options.value());
  RedisStore store(client, RedisStoreOptions{.prefix = prefix});
  return run(store, race, [&](auto&, const std::string& name) {
    Result<redis::Reply> incr = client->command({"INCR", prefix + "runs:" + name});
    if (!incr) throw Error(incr.error(), incr.failure().describe());
  });
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr,
                 "usage: %s <sqlite|postgres|redis> <path-or-uri> <prefix> "
                 "<lease|transactional> <scope> <keys> <hold-ms>\n",
                 argv[0]);
    return 2;
  }
  const std::string backend = argv[1];
  const Race race{argv[5], std::stoi(argv[6]), std::chrono::milliseconds{std::stoi(argv[7])}};
  try {
#ifdef IDEM_TWO_PHASE_SQL
    if (backend == "sqlite" || backend == "postgres") {
      return run_sql(backend, argv[2], argv[3], argv[4], race);
    }
#endif
#ifdef IDEM_TWO_PHASE_REDIS
    if (backend == "redis") return run_redis(argv[2], argv[3], race);
#endif
  } catch (const std::exception& e) {
    say(std::string("err - ") + e.what());
    return 1;
  }
  say("err - backend " + backend + " is not built in");
  return 2;
}
