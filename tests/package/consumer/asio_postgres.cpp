// The asynchronous PostgreSQL store: links idem::asio_postgres and needs no server: an
// unreachable PostgreSQL must answer store_unavailable, promptly.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdio>
#include <idem/asio/async_guard.hpp>
#include <idem/idem.hpp>
#include <idem/postgres/async_store.hpp>
#include <string>

int main() {
  boost::asio::io_context io;
  idem::AsyncPostgresStore store{
      io.get_executor(), idem::AsyncPostgresStoreOptions{
                             .connection = {.uri = "postgresql://127.0.0.1:1/idem",
                                            .connect_timeout = std::chrono::milliseconds{300}}}};
  idem::AsyncGuard guard{store, idem::Options{.scope = "package"}};
  std::string result = "not run";
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        const auto outcome = co_await guard.async_execute("k", [] { return 1; });
        result = outcome.error() == idem::errc::store_unavailable ? "ok" : outcome.message();
      },
      boost::asio::detached);
  io.run();
  std::printf("idem::asio_postgres consumer: %s\n", result.c_str());
  return result == "ok" ? 0 : 1;
}
