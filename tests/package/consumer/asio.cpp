// The asynchronous guard: links idem::asio (header-only, Boost.Asio); a coroutine's call runs its
// handler once and its repeat is a replay.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <idem/asio/async_guard.hpp>
#include <idem/asio/async_store.hpp>
#include <idem/idem.hpp>

int main() {
  idem::MemoryStore memory;
  idem::ImmediateStore store{memory};
  idem::AsyncGuard guard{store, idem::Options{.scope = "package"}};
  int runs = 0;
  bool ok = false;
  boost::asio::io_context io;
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        const auto first = co_await guard.async_execute("k", [&] { return ++runs; });
        const auto again = co_await guard.async_execute("k", [&] { return ++runs; });
        ok = first.executed() && again.replayed() && again.value() == 1 && runs == 1;
      },
      boost::asio::detached);
  io.run();
  std::printf("idem::asio consumer: %s\n", ok ? "ok" : "wrong outcome");
  return ok ? 0 : 1;
}
