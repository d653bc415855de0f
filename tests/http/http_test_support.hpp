#pragma once
// What the end-to-end tests of examples/http_payments share: the server binary run as a child
// process on a free port, the database it writes (a SQLite file, or table and key prefixes on
// the PostgreSQL and Redis servers of IDEM_TEST_PG_URI / IDEM_TEST_REDIS_URI when the test is
// built with IDEM_HTTP_TEST_PG), and request helpers.

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "idem/postgres/admin.hpp"
#include "idem/sqlite/admin.hpp"

#ifndef IDEM_HTTP_PAYMENTS_SERVER
#error "IDEM_HTTP_PAYMENTS_SERVER must name the http_payments binary"
#endif

namespace http_test {

using json = nlohmann::json;

inline const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// PostgreSQL + Redis when built with IDEM_HTTP_TEST_PG, or when IDEM_HTTP_TEST_BACKING is "pg"
// (ctest runs the SQLite-built hostile-client tests so against http_payments_async, which
// serves PostgreSQL only).
#ifdef IDEM_HTTP_TEST_PG
inline const bool kPg = true;
#else
inline const bool kPg = env("IDEM_HTTP_TEST_BACKING") != nullptr &&
                        std::string_view(env("IDEM_HTTP_TEST_BACKING")) == "pg";
#endif

// Where one test's data lives: a SQLite file, or table and key prefixes on the shared servers.
struct Backing {
  std::filesystem::path dir;
  std::string prefix;

  Backing() {
    std::random_device rd;
    prefix = "t" + std::to_string(::getpid()) + "_" + std::to_string(rd() % 1000000) + "_";
    dir = std::filesystem::temp_directory_path() / ("idem_http_" + prefix);
    std::filesystem::create_directories(dir);
  }
  ~Backing() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  std::vector<std::string> args() const {
    std::vector<std::string> a{"--prefix", prefix};
    if (kPg) {
      a.insert(a.end(), {"--pg", env("IDEM_TEST_PG_URI"), "--redis", env("IDEM_TEST_REDIS_URI")});
    } else {
      a.insert(a.end(), {"--db", (dir / "payments.db").string()});
    }
    return a;
  }
  // One number from the payments database, read on a connection of its own.
  long long scalar(const std::string& sql_with_table) const {
    if (kPg) {
      pqxx::connection c(env("IDEM_TEST_PG_URI"));
      pqxx::nontransaction n(c);
      return n.exec(sql_with_table)[0][0].as<long long>();
    }
    SQLite::Database db((dir / "payments.db").string(), SQLite::OPEN_READONLY, 5000);
    return db.execAndGet(sql_with_table).getInt64();
  }
  long long payments() const { return scalar("SELECT count(*) FROM " + prefix + "payments"); }
  long long distinct_keys() const {
    return scalar("SELECT count(DISTINCT principal || ':' || idempotency_key) FROM " + prefix +
                  "payments");
  }
  long long outbox() const { return scalar("SELECT count(*) FROM " + prefix + "payments_outbox"); }
  // The admin of the service's record store (its table prefix is the service's prefix + "idem_").
  std::unique_ptr<idem::admin::Admin> record_admin() const {
    if (kPg) {
      return idem::admin::postgres_admin(
          {.connection = {.uri = env("IDEM_TEST_PG_URI"), .table_prefix = prefix + "idem_"}});
    }
    return idem::admin::sqlite_admin(
        {.path = (dir / "payments.db").string(), .table_prefix = prefix + "idem_"});
  }
  // Payment rows per "principal:key".
  std::map<std::string, long long> rows_per_key() const {
    const std::string sql = "SELECT principal || ':' || idempotency_key, count(*) FROM " + prefix +
                            "payments GROUP BY principal, idempotency_key";
    std::map<std::string, long long> rows;
    if (kPg) {
      pqxx::connection c(env("IDEM_TEST_PG_URI"));
      pqxx::nontransaction n(c);
      for (const auto& row : n.exec(sql)) rows[row[0].as<std::string>()] = row[1].as<long long>();
      return rows;
    }
    SQLite::Database db((dir / "payments.db").string(), SQLite::OPEN_READONLY, 5000);
    SQLite::Statement q(db, sql);
    while (q.executeStep()) rows[q.getColumn(0).getString()] = q.getColumn(1).getInt64();
    return rows;
  }
};

// The server binary: IDEM_HTTP_TEST_SERVER when set (ctest runs the PostgreSQL tests a second
// time against http_payments_async this way), else the http_payments built with the test.
inline std::string server_binary() {
  const char* chosen = env("IDEM_HTTP_TEST_SERVER");
  return chosen != nullptr ? chosen : IDEM_HTTP_PAYMENTS_SERVER;
}

// The server as a child process; the first stdout line names its port.
class Server {
 public:
  Server(const Backing& backing, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{server_binary(), "--port", "0"};
    for (auto& a : backing.args()) args.push_back(a);
    for (auto& a : extra) args.push_back(a);
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
    ::close(out[1]);
    FILE* f = ::fdopen(out[0], "r");
    char line[256] = {};
    if (std::fgets(line, sizeof line, f) == nullptr) {
      std::fclose(f);
      throw std::runtime_error(server_binary() + " did not start");
    }
    std::fclose(f);
    const std::string s(line);
    port_ = std::stoi(s.substr(s.rfind(':') + 1));
  }
  ~Server() { stop(SIGTERM); }
  Server(const Server&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends `sig` and waits for the process; its wait status (-1 if it was stopped already).
  int stop(int sig) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

// The most memory a process has held (VmHWM), in KiB; -1 if unknown.
inline long peak_rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

inline httplib::Headers headers(const std::string& principal, const std::string& key) {
  httplib::Headers h{{"Authorization", "Bearer " + principal}};
  if (!key.empty()) h.emplace("Idempotency-Key", key);
  return h;
}

inline std::string body_of(int i) { return json{{"amount", 100 + i}, {"currency", "EUR"}}.dump(); }

}  // namespace http_test
