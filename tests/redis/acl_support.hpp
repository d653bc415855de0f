#pragma once
// The ACL lines docs/redis.md ("Least privilege: an ACL user") gives, read from the file itself
// so that the tests and the docs cannot drift, and the calls the ACL tests make as such a user:
// every store and admin operation, each failure kept with what it was doing.

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "idem/admin.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/guard.hpp"
#include "idem/redis/admin.hpp"
#include "idem/redis/client.hpp"
#include "idem/redis/request_id_cache.hpp"
#include "idem/redis/store.hpp"
#include "idem/redis/token_store.hpp"

namespace idem::testing {

/// The rules of each `ACL SETUSER idem_app on >PASSWORD ...` line of docs/redis.md, in order:
/// the one server's, then the cluster's.
inline std::vector<std::vector<std::string>> documented_acl_lines() {
  static constexpr std::string_view kHead = "ACL SETUSER idem_app on >PASSWORD ";
  std::ifstream in(std::string(IDEM_SOURCE_DIR) + "/docs/redis.md");
  if (!in) throw std::runtime_error("cannot read docs/redis.md");
  std::vector<std::vector<std::string>> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(kHead, 0) != 0) continue;
    std::istringstream words(line.substr(kHead.size()));
    std::vector<std::string>& rules = lines.emplace_back();
    for (std::string rule; words >> rule;) rules.push_back(rule);
  }
  return lines;
}

/// Whether `rule` grants something (a command or a key pattern) rather than resetting.
inline bool grants(const std::string& rule) {
  return rule != "resetkeys" && rule != "resetchannels" && rule != "-@all";
}

/// Whether `message` says the user lacks a right and names `rule` among the rights it lists
/// ("+hset", "one of +type, +hget", "a key pattern ...").
inline bool names_right(const std::string& message, const std::string& rule) {
  static constexpr std::string_view kSays = "the user lacks a right idem needs: ";
  const std::size_t at = message.find(kSays);
  if (at == std::string::npos) return false;
  const std::string rights =
      message.substr(at + kSays.size(), message.find(" (", at) - at - kSays.size());
  if (rule[0] == '~') return rights.rfind("a key pattern", 0) == 0;
  return (rights + ",").find(rule + ",") != std::string::npos;
}

/// A call that failed, and what it was doing.
struct FailedCall {
  std::string doing;
  Failure failure;
};

/// Every operation of the blocking stores and the admin as the user of `client`, on records of
/// scope `scope` (unique to the run): the calls that failed.
inline std::vector<FailedCall> run_every_operation(const std::shared_ptr<redis::Client>& client,
                                                   const std::string& scope) {
  using namespace std::chrono_literals;
  std::vector<FailedCall> failed;
  const auto note = [&](const std::string& doing, const auto& outcome) {
    if (outcome && !outcome.commit_error()) return;
    failed.push_back(
        outcome ? FailedCall{doing + " (commit)", outcome.commit_failure()}
                : FailedCall{doing, make_failure(static_cast<errc>(outcome.error().value()),
                                                 outcome.message())});
  };
  const auto note_result = [&](const std::string& doing, const auto& result) {
    if (!result) failed.push_back({doing, result.failure()});
  };

  RedisStore store{client};
  IdempotencyGuard guard{store, Options{.scope = scope, .keep_request = true}};
  for (const char* pass : {"fresh call", "replay"}) {
    note(pass, guard.execute("k", "request", [] { return 1; }));
  }
  note("steps", guard.execute("steps", "request", [](Context& ctx) {
    return ctx.step("one", [] { return 1; }) + ctx.step("two", [] { return 2; });
  }));
  try {  // the handler throws: the guard aborts (a kept request, an abandoned run)
    note("abort",
         guard.execute("thrown", "request", []() -> int { throw std::runtime_error("x"); }));
  } catch (const std::runtime_error&) {
  }
  {  // a duplicate waits for the holder (its wait counted in, woken by the commit)
    IdempotencyGuard waiting{
        store, Options{.scope = scope, .in_progress = Wait{.timeout = 10s}, .keep_request = true}};
    std::thread holder([&] {
      note("holder", guard.execute("held", "request", [] {
        std::this_thread::sleep_for(300ms);
        return 7;
      }));
    });
    std::this_thread::sleep_for(100ms);
    note("waiting duplicate", waiting.execute("held", "request", [] { return 8; }));
    holder.join();
  }
  std::string scope_prefix(detail::EffectiveKey(scope, {}, {}).view());
  scope_prefix.pop_back();
  note_result("find_abandoned", store.find_abandoned(scope_prefix, 10));

  RedisTokenStore tokens{client};
  const Result<std::string> token = tokens.issue(60s);
  note_result("token issue", token);
  if (token) note("token claim", tokens.execute(token.value(), [] { return 1; }));

  RequestIdCache cache{client, RequestIdCacheOptions{.guard = Options{.scope = scope}}};
  for (const char* pass : {"request-ID cache", "request-ID cache replay"}) {
    note(pass, cache.execute(Key{"r"}, [] { return std::string("response"); }));
  }

  const auto admin = admin::redis_admin(client);
  note_result("admin check_schema", admin->check_schema());
  note_result("admin inspect", admin->inspect(scope, Key{"k"}));
  note_result("admin list", admin->list(scope, {.state = admin::State::completed}));
  note_result("admin stats", admin->stats(scope));
  note_result("admin release", admin->release(scope, Key{"none"}));
  note_result("admin forget", admin->forget(scope, Key{"k"}));
  note_result("admin purge_expired", admin->purge_expired(100));
  return failed;
}

/// Expects `failed` to hold some call refused as config_invalid naming `rule`, and every other
/// to be that too, or in_progress: a key a refused call had taken stays held until its lease ends,
/// as a crashed holder's would.
inline void expect_refused_naming(const std::vector<FailedCall>& failed, const std::string& rule) {
  bool refused = false;
  for (const FailedCall& f : failed) {
    if (refused && f.failure.code == errc::in_progress) continue;
    EXPECT_EQ(f.failure.code, errc::config_invalid) << f.doing << ": " << f.failure.describe();
    EXPECT_TRUE(names_right(f.failure.message, rule)) << f.doing << ": " << f.failure.describe();
    refused = true;
  }
  EXPECT_TRUE(refused) << "no operation needed " << rule;
}

}  // namespace idem::testing
