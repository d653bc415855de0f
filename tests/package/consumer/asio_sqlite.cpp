// The asynchronous SQLite store: links idem::asio_sqlite (header-only, on idem::sqlite); a key
// on a temp file, run once through AsyncGuard and replayed.
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <filesystem>
#include <idem/asio/async_guard.hpp>
#include <idem/idem.hpp>
#include <idem/sqlite/async_store.hpp>
#include <string>

int main() {
  const auto path = std::filesystem::temp_directory_path() /
                    ("idem_package_asio_sqlite_" + std::to_string(::getpid()) + ".db");
  std::string result = "not run";
  {
    boost::asio::io_context io;
    idem::sqlite::AsyncStore store{idem::SqliteStoreOptions{.path = path.string()}};
    idem::AsyncGuard guard{store, idem::Options{.scope = "package"}};
    boost::asio::co_spawn(
        io,
        [&]() -> boost::asio::awaitable<void> {
          const auto first = co_await guard.async_execute("k", [] { return 42; });
          const auto again = co_await guard.async_execute("k", [] { return 7; });
          result = first.recorded() && again.replayed() && again.value() == 42 ? "ok" : "wrong";
        },
        boost::asio::detached);
    io.run();
  }
  for (const char* s : {"", "-wal", "-shm", "-fences"}) {
    std::filesystem::remove(path.string() + s);
  }
  std::printf("idem::asio_sqlite consumer: %s\n", result.c_str());
  return result == "ok" ? 0 : 1;
}
