// The Redis adapter: links every Redis store of idem::redis and needs no server: an unreachable
// Redis must answer store_unavailable, promptly.
#include <chrono>
#include <cstdio>
#include <idem/idem.hpp>
#include <idem/redis/request_id_cache.hpp>
#include <idem/redis/store.hpp>
#include <idem/redis/token_store.hpp>
#include <memory>

int main() {
  auto client = std::make_shared<idem::redis::Client>(idem::redis::ConnectionOptions{
      .host = "127.0.0.1", .port = 1, .connect_timeout = std::chrono::milliseconds{300}});
  idem::RedisStore store{client};
  idem::IdempotencyGuard guard{store, idem::Options{.scope = "package"}};
  idem::RedisTokenStore tokens{client};
  idem::RequestIdCache cache{client};

  const auto record = guard.execute("k", [] { return 1; });
  const auto token = tokens.issue(std::chrono::minutes{1});
  const auto request = cache.execute(idem::Key{"r", "p"}, [] { return 2; });
  const bool ok = record.error() == idem::errc::store_unavailable &&
                  token.error() == idem::errc::store_unavailable &&
                  request.error() == idem::errc::store_unavailable;
  std::printf("idem::redis consumer: %s\n", ok ? "ok" : record.message().c_str());
  return ok ? 0 : 1;
}
