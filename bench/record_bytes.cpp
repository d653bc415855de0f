// Fills a store with finished records and, beside it, a bare twin with the same keys and values,
// for scripts/record_bytes, which reports the bytes each record costs by the server's own
// accounting (docs/performance.md, Bytes per record).
//
//   idem_record_bytes redis  URI PREFIX RECORDS RESULT_BYTES guard|bare
//       guard: RedisStore through IdempotencyGuard; bare: SET key value PX ttl, the key named as
//       RedisStore names it. Then prints "memory_usage <sum of MEMORY USAGE over the keys>" and
//       "used_memory_delta <INFO memory's used_memory after minus before>".
//   idem_record_bytes sqlite FILE RECORDS RESULT_BYTES guard|bare
//       guard: SqliteStore through IdempotencyGuard; bare: one WITHOUT ROWID table (key, value,
//       expires_at) holding the same effective keys. The script reads the file's dbstat.
//
// Keys are 36-character UUID-shaped ids under the scope "bytes"; records live a day.

#include <SQLiteCpp/SQLiteCpp.h>
#include <hiredis/hiredis.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "idem/engine/effective_key.hpp"
#include "idem/guard.hpp"
#include "idem/redis/store.hpp"
#include "idem/sqlite/store.hpp"
#include "store_common.hpp"  // tagged_key: the bare twin's keys are RedisStore's

namespace {

using namespace std::chrono_literals;

constexpr std::string_view kScope = "bytes";
constexpr std::string_view kPayload = "card=4242424242424242&amount=1999&currency=EUR";
constexpr std::chrono::milliseconds kTtl = 24h;

std::string id_of(long i) {
  std::array<char, 48> buf{};
  std::snprintf(buf.data(), buf.size(), "00000000-0000-4000-8000-%012ld", i);
  return buf.data();
}

std::string effective(std::string_view id) {
  return std::string(idem::detail::EffectiveKey(kScope, {}, id).view());
}

template <class Store>
int fill_guarded(Store& store, long records, const std::string& result) {
  idem::IdempotencyGuard<Store> guard(store,
                                      idem::Options{.scope = std::string(kScope), .ttl = kTtl});
  for (long i = 0; i < records; ++i) {
    auto out = guard.execute(id_of(i), kPayload, [&] { return result; });
    if (!out.recorded()) {
      std::fprintf(stderr, "record %ld: %s\n", i, out.message().c_str());
      return 1;
    }
  }
  return 0;
}

struct ReplyFree {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

long long used_memory(redisContext* c) {
  Reply r(static_cast<redisReply*>(redisCommand(c, "INFO memory")));
  if (!r || r->type != REDIS_REPLY_STRING) return -1;
  const std::string_view info(r->str, r->len);
  const auto at = info.find("used_memory:");
  return at == std::string_view::npos ? -1 : std::atoll(info.data() + at + 12);
}

int redis_main(const std::string& uri, const std::string& prefix, long records,
               const std::string& result, bool guarded) {
  auto options = idem::redis::ConnectionOptions::from_uri(uri);
  if (!options) {
    std::fprintf(stderr, "%s\n", options.failure().describe().c_str());
    return 1;
  }
  std::unique_ptr<redisContext, void (*)(redisContext*)> c(
      redisConnect(options->host.c_str(), options->port), redisFree);
  if (!c || c->err != 0) {
    std::fprintf(stderr, "cannot connect to %s\n", uri.c_str());
    return 1;
  }
  const long long before = used_memory(c.get());
  if (guarded) {
    idem::RedisStore store(std::make_shared<idem::redis::Client>(options.value()),
                           idem::RedisStoreOptions{.prefix = prefix});
    if (fill_guarded(store, records, result) != 0) return 1;
  } else {
    const std::string ttl = std::to_string(kTtl.count());
    for (long i = 0; i < records; ++i) {
      const std::string key = idem::redis::tagged_key(prefix, effective(id_of(i)));
      redisAppendCommand(c.get(), "SET %b %b PX %s", key.data(), key.size(), result.data(),
                         result.size(), ttl.c_str());
    }
    for (long i = 0; i < records; ++i) {
      void* r = nullptr;
      if (redisGetReply(c.get(), &r) != REDIS_OK) return 1;
      freeReplyObject(r);
    }
  }
  const long long after = used_memory(c.get());
  long long usage = 0;
  for (long i = 0; i < records; ++i) {
    const std::string key = idem::redis::tagged_key(prefix, effective(id_of(i)));
    redisAppendCommand(c.get(), "MEMORY USAGE %b SAMPLES 0", key.data(), key.size());
  }
  for (long i = 0; i < records; ++i) {
    void* r = nullptr;
    if (redisGetReply(c.get(), &r) != REDIS_OK) return 1;
    Reply reply(static_cast<redisReply*>(r));
    if (reply->type != REDIS_REPLY_INTEGER) {
      std::fprintf(stderr, "record %ld: no MEMORY USAGE\n", i);
      return 1;
    }
    usage += reply->integer;
  }
  std::printf("memory_usage %lld\nused_memory_delta %lld\n", usage, after - before);
  return 0;
}

int sqlite_main(const std::string& file, long records, const std::string& result, bool guarded) {
  if (guarded) {
    idem::SqliteStore store(idem::SqliteStoreOptions{.path = file});
    return fill_guarded(store, records, result);
  }
  SQLite::Database db(file, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec(
      "CREATE TABLE IF NOT EXISTS bare (key BLOB PRIMARY KEY, value BLOB, "
      "expires_at INTEGER NOT NULL) WITHOUT ROWID");
  SQLite::Transaction tx(db);
  SQLite::Statement insert(db, "INSERT INTO bare VALUES (?, ?, ?)");
  const auto expires = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch() + kTtl)
                           .count();
  for (long i = 0; i < records; ++i) {
    const std::string key = effective(id_of(i));
    insert.bind(1, key.data(), static_cast<int>(key.size()));
    insert.bind(2, result.data(), static_cast<int>(result.size()));
    insert.bind(3, static_cast<std::int64_t>(expires));
    insert.exec();
    insert.reset();
  }
  tx.commit();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string backend = argc > 1 ? argv[1] : "";
  const bool redis = backend == "redis" && argc == 7;
  if (!redis && !(backend == "sqlite" && argc == 6)) {
    std::fprintf(stderr,
                 "usage: %s redis URI PREFIX RECORDS RESULT_BYTES guard|bare\n"
                 "       %s sqlite FILE RECORDS RESULT_BYTES guard|bare\n",
                 argv[0], argv[0]);
    return 2;
  }
  const int n = redis ? 4 : 3;
  const long records = std::atol(argv[n]);
  const std::string result(static_cast<std::size_t>(std::atol(argv[n + 1])), 'r');
  const bool guarded = std::string_view(argv[n + 2]) == "guard";
  try {
    return redis ? redis_main(argv[2], argv[3], records, result, guarded)
                 : sqlite_main(argv[2], records, result, guarded);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
