#pragma once
// Traits for the token-store and request-ID-cache kits on a Redis store: S made on a client from
// `client()` (the test server's or the cluster's; null after a skip or failure) with
// StoreOptions{.prefix, .guard}, its time the server's (advance() sleeps).

#include <chrono>
#include <memory>
#include <thread>
#include <utility>

#include "idem/options.hpp"
#include "idem/redis/client.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {

/// A client on the test server for a kit's make(), or null after it skipped the case (no
/// IDEM_TEST_REDIS_URI) or failed it (the server does not answer).
inline std::shared_ptr<redis::Client> kit_redis_client() {
  if (redis_uri() == nullptr) {
    [] { GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set; scripts/test sets it"; }();
    return nullptr;
  }
  return connect_redis(redis_options());
}

template <class S, class StoreOptions, std::shared_ptr<redis::Client> (*client)()>
struct RedisKitTraits {
  static constexpr std::chrono::milliseconds lease{500};

  static std::unique_ptr<S> make(Options guard) {
    std::shared_ptr<redis::Client> c = client();
    if (!c) return nullptr;
    return std::make_unique<S>(
        std::move(c), StoreOptions{.prefix = unique_prefix("kit"), .guard = std::move(guard)});
  }
  static void advance(S&, std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }
};

}  // namespace idem::testing
