// Redis over TLS, on servers of its own with a throwaway authority (scripts/lib/tls.sh): a good
// certificate connects (blocking client, its pipeline, AsyncRedisStore); a server that requires
// a client certificate takes the right one only; a wrong authority, an expired certificate and a
// wrong server name are refused with a message that says which; plaintext and TLS on the wrong
// port fail within their deadline; unusable files are config_invalid, naming the file.
//
// The authority is IDEM_TEST_TLS_DIR's when set (scripts/tls makes one), else one made here in
// a temporary folder. The servers are redis-server processes on free ports, stopped at the end.

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "idem/redis/client.hpp"
#include "redis/redis_test_support.hpp"
#include "support/free_port.hpp"

#ifdef IDEM_TLS_TEST_ASYNC
#include "async/async_test_support.hpp"
#include "idem/redis/async_store.hpp"
#endif

namespace idem::testing {
namespace {

using namespace std::chrono_literals;
using redis::ConnectionOptions;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

// A redis-server of the test's own, in a temporary folder; stopped and removed on destruction.
class Server {
 public:
  // `tls_args`: the TLS settings; empty: a plaintext server.
  explicit Server(const std::vector<std::string>& tls_args) {
    char tmpl[] = "/tmp/idem-tls-redis.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return;
    dir_ = tmpl;
    port_ = free_port();
    std::string cmd = "redis-server --bind 127.0.0.1 --save '' --appendonly no --daemonize yes";
    cmd += " --dir '" + dir_.string() + "' --pidfile '" + (dir_ / "redis.pid").string() + "'";
    cmd += " --logfile '" + (dir_ / "redis.log").string() + "'";
    cmd += tls_args.empty() ? " --port " + std::to_string(port_)
                            : " --port 0 --tls-port " + std::to_string(port_);
    for (const std::string& a : tls_args) cmd += " " + a;
    if (std::system(cmd.c_str()) != 0) return;
    // The pidfile is written once the server listens.
    for (int i = 0; i < 200 && pid_ <= 0; ++i) {
      std::ifstream in(dir_ / "redis.pid");
      if (!(in >> pid_)) std::this_thread::sleep_for(25ms);
    }
  }
  ~Server() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      for (int i = 0; i < 200 && ::kill(pid_, 0) == 0; ++i) std::this_thread::sleep_for(25ms);
    }
    std::error_code ignored;
    if (!dir_.empty()) fs::remove_all(dir_, ignored);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  bool up() const { return pid_ > 0; }
  int port() const { return port_; }
  std::string log() const {
    std::ifstream in(dir_ / "redis.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  fs::path dir_;
  int port_ = 0;
  pid_t pid_ = 0;
};

// The test authority's folder: IDEM_TEST_TLS_DIR, or one made here in a new temporary folder,
// `made` then set (empty when that failed).
fs::path authority(fs::path& made) {
  if (const char* dir = std::getenv("IDEM_TEST_TLS_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  char tmpl[] = "/tmp/idem-tls-ca.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return {};
  made = tmpl;
  const std::string cmd = std::string("bash -c 'source \"") + IDEM_SOURCE_DIR +
                          "/scripts/lib/tls.sh\" && make_test_ca \"" + tmpl + "\"'";
  return std::system(cmd.c_str()) == 0 ? made : fs::path{};
}

class RedisTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ca_ = authority(made_);
    if (ca_.empty()) return;
    const auto server = [](const std::string& cert, const std::string& clients) {
      return std::vector<std::string>{"--tls-cert-file '" + (ca_ / (cert + ".crt")).string() + "'",
                                      "--tls-key-file '" + (ca_ / (cert + ".key")).string() + "'",
                                      "--tls-ca-cert-file '" + (ca_ / "ca.crt").string() + "'",
                                      "--tls-auth-clients " + clients};
    };
    good_ = new Server(server("server", "no"));
    mutual_ = new Server(server("server", "yes"));
    expired_ = new Server(server("expired", "no"));
    plain_ = new Server({});
  }
  static void TearDownTestSuite() {
    for (Server** s : {&good_, &mutual_, &expired_, &plain_}) {
      delete *s;
      *s = nullptr;
    }
    std::error_code ignored;
    if (!made_.empty()) fs::remove_all(made_, ignored);
  }
  void SetUp() override {
    ASSERT_FALSE(ca_.empty()) << "no test authority: scripts/lib/tls.sh make_test_ca failed";
    for (const Server* s : {good_, mutual_, expired_, plain_}) ASSERT_TRUE(s->up());
  }

  static std::string file(const std::string& name) { return (ca_ / name).string(); }

  // Options for `server` over TLS, trusting the test authority, with short timeouts.
  static ConnectionOptions tls_to(const Server& server, const std::string& host = "127.0.0.1") {
    ConnectionOptions o;
    o.host = host;
    o.port = server.port();
    o.connect_timeout = 1000ms;
    o.command_timeout = 1000ms;
    o.tls.enabled = true;
    o.tls.ca_file = file("ca.crt");
    return o;
  }

  static inline fs::path ca_;
  static inline fs::path made_;  // the authority's folder when made here
  static inline Server* good_ = nullptr;
  static inline Server* mutual_ = nullptr;
  static inline Server* expired_ = nullptr;
  static inline Server* plain_ = nullptr;
};

// A ping's failure, with how long it took.
struct Refused {
  Failure failure;
  Clock::duration took;
};
Refused refused(const ConnectionOptions& o) {
  redis::Client client(o);
  const auto start = Clock::now();
  Status s = client.ping();
  const auto took = Clock::now() - start;
  EXPECT_FALSE(s.ok()) << "the client was not refused";
  return {s.ok() ? Failure{} : s.failure(), took};
}

bool says(const Failure& f, const std::string& text) {
  return f.message.find(text) != std::string::npos;
}

TEST_F(RedisTlsTest, AGoodCertificateConnectsByAddressAndByName) {
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    redis::Client client(tls_to(*good_, host));
    ASSERT_TRUE(client.ping().ok()) << host;
    const std::string key = unique_prefix("tls") + host;
    EXPECT_EQ(redis_string(client, {"SET", key, "over tls", "PX", "10000"}), "OK");
    EXPECT_EQ(redis_string(client, {"GET", key}), "over tls");
  }
}

// The scripts travel over the shared pipelined connections, many threads at once.
TEST_F(RedisTlsTest, PipelinedCallsFromManyThreadsOverOneSession) {
  ConnectionOptions o = tls_to(*good_);
  o.pipeline_connections = 1;
  auto client = std::make_shared<redis::Client>(o);
  const std::string prefix = unique_prefix("tls-pipe");
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string key = prefix + std::to_string(t) + ":" + std::to_string(i);
        const std::string value(1 + (i * 37) % 3000, static_cast<char>('a' + t));
        if (redis_string(*client, {"SET", key, value, "PX", "10000"}) == "OK" &&
            redis_string(*client, {"GET", key}) == value) {
          ++right;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(right.load(), 8 * 200);
}

TEST_F(RedisTlsTest, AServerThatRequiresAClientCertificateTakesTheRightOneOnly) {
  ConnectionOptions with = tls_to(*mutual_);
  with.tls.cert_file = file("client.crt");
  with.tls.key_file = file("client.key");
  redis::Client client(with);
  EXPECT_TRUE(client.ping().ok());

  // The server's alert ("certificate required") may be lost to a reset, so the client says what
  // it knows itself: the server asked for a certificate it has none of.
  const Refused without = refused(tls_to(*mutual_));
  EXPECT_EQ(without.failure.code, errc::store_unavailable);
  EXPECT_TRUE(says(without.failure, "asked for a client certificate")) << without.failure.message;

  ConnectionOptions other = tls_to(*mutual_);
  other.tls.cert_file = file("other-client.crt");
  other.tls.key_file = file("other-client.key");
  // Refused by the server; its alert may be lost to a reset, so only the refusal is certain.
  const Refused stranger = refused(other);
  EXPECT_EQ(stranger.failure.code, errc::store_unavailable);
}

TEST_F(RedisTlsTest, AnotherAuthorityAnExpiredCertificateAndAWrongNameAreRefusedSayingWhich) {
  ConnectionOptions wrong_ca = tls_to(*good_);
  wrong_ca.tls.ca_file = file("other-ca.crt");
  const Refused untrusted = refused(wrong_ca);
  EXPECT_EQ(untrusted.failure.code, errc::store_unavailable);
  EXPECT_TRUE(says(untrusted.failure, "certificate was refused")) << untrusted.failure.message;
  EXPECT_TRUE(says(untrusted.failure, std::to_string(good_->port()))) << untrusted.failure.message;

  const Refused expired = refused(tls_to(*expired_));
  EXPECT_EQ(expired.failure.code, errc::store_unavailable);
  EXPECT_TRUE(says(expired.failure, "certificate has expired")) << expired.failure.message;

  ConnectionOptions wrong_name = tls_to(*good_);
  wrong_name.tls.server_name = "redis.example.com";
  const Refused mismatch = refused(wrong_name);
  EXPECT_EQ(mismatch.failure.code, errc::store_unavailable);
  EXPECT_TRUE(says(mismatch.failure, "hostname mismatch")) << mismatch.failure.message;
  EXPECT_TRUE(says(mismatch.failure, "redis.example.com")) << mismatch.failure.message;

  // Verification off (unsafe, explicit) takes the expired certificate.
  ConnectionOptions unchecked = tls_to(*expired_);
  unchecked.tls.verify = false;
  redis::Client client(unchecked);
  EXPECT_TRUE(client.ping().ok());
}

TEST_F(RedisTlsTest, PlaintextAndTlsOnTheWrongPortFailWithinTheDeadline) {
  ConnectionOptions plaintext_to_tls = tls_to(*good_);
  plaintext_to_tls.tls = redis::TlsOptions{};
  const Refused plain = refused(plaintext_to_tls);
  EXPECT_EQ(plain.failure.code, errc::store_unavailable);
  EXPECT_LT(plain.took, 4s);  // connect_timeout + command_timeout, and slack for a slow machine

  const Refused tls = refused(tls_to(*plain_));
  EXPECT_EQ(tls.failure.code, errc::store_unavailable);
  EXPECT_TRUE(says(tls.failure, "TLS")) << tls.failure.message;
  EXPECT_LT(tls.took, 4s);
}

TEST_F(RedisTlsTest, UnusableFilesAreConfigInvalidNamingTheFileAndNoKeyBytes) {
  ConnectionOptions missing = tls_to(*good_);
  missing.tls.ca_file = file("no-such-ca.crt");
  const Refused no_ca = refused(missing);
  EXPECT_EQ(no_ca.failure.code, errc::config_invalid);
  EXPECT_TRUE(says(no_ca.failure, "no-such-ca.crt")) << no_ca.failure.message;

  ConnectionOptions not_a_ca = tls_to(*good_);
  not_a_ca.tls.ca_file = file("client.key");  // a key, not certificates
  const Refused junk = refused(not_a_ca);
  EXPECT_EQ(junk.failure.code, errc::config_invalid);
  EXPECT_TRUE(says(junk.failure, "client.key")) << junk.failure.message;

  ConnectionOptions mismatched = tls_to(*mutual_);
  mismatched.tls.cert_file = file("client.crt");
  mismatched.tls.key_file = file("server.key");
  const Refused pair = refused(mismatched);
  EXPECT_EQ(pair.failure.code, errc::config_invalid);
  EXPECT_TRUE(says(pair.failure, "does not match")) << pair.failure.message;
  EXPECT_TRUE(says(pair.failure, "server.key")) << pair.failure.message;

  std::ifstream key_file(file("server.key"));
  std::string line;
  while (std::getline(key_file, line)) {
    if (line.size() > 16 && line.find("-----") == std::string::npos) {
      for (const Failure* f : {&no_ca.failure, &junk.failure, &pair.failure}) {
        EXPECT_EQ(f->describe().find(line.substr(0, 16)), std::string::npos);
      }
    }
  }

  ConnectionOptions half = tls_to(*mutual_);
  half.tls.cert_file = file("client.crt");
  EXPECT_EQ(refused(half).failure.code, errc::config_invalid);
}

#ifdef IDEM_TLS_TEST_ASYNC
AsyncRedisStoreOptions async_options(const ConnectionOptions& connection) {
  AsyncRedisStoreOptions o;
  o.connection = connection;
  o.prefix = unique_prefix("tls-async");
  return o;
}

TEST_F(RedisTlsTest, AsyncRedisStoreConnectsAndIsRefusedSayingWhy) {
  constexpr std::chrono::milliseconds kLease{10'000};
  {
    IoRunner runner;
    AsyncRedisStore store(runner.io().get_executor(), async_options(tls_to(*good_, "localhost")));
    Result<Claim> c = runner.run(store.async_claim(ClaimRequest{"k", {1, 2}, kLease, kLease}));
    ASSERT_TRUE(c.has_value()) << c.failure().describe();
    EXPECT_EQ(c->status, ClaimStatus::acquired);
    const Status done = runner.run(
        store.async_commit(Ticket{"k", c->fence}, Completion{.result = "r", .ttl = kLease}));
    EXPECT_TRUE(done.ok()) << done.failure().describe();
  }
  {
    ConnectionOptions o = tls_to(*mutual_);
    o.tls.cert_file = file("client.crt");
    o.tls.key_file = file("client.key");
    IoRunner runner;
    AsyncRedisStore store(runner.io().get_executor(), async_options(o));
    Result<Claim> c = runner.run(store.async_claim(ClaimRequest{"k", {1, 2}, kLease, kLease}));
    EXPECT_TRUE(c.has_value()) << c.failure().describe();
  }
  const auto refusal = [&](const ConnectionOptions& o) {
    IoRunner runner;
    AsyncRedisStore store(runner.io().get_executor(), async_options(o));
    Result<Claim> c = runner.run(store.async_claim(ClaimRequest{"k", {1, 2}, kLease, kLease}));
    EXPECT_FALSE(c.has_value());
    return c.has_value() ? Failure{} : c.failure();
  };
  const Failure expired = refusal(tls_to(*expired_));
  EXPECT_EQ(expired.code, errc::store_unavailable);
  EXPECT_TRUE(says(expired, "certificate has expired")) << expired.message;

  ConnectionOptions wrong_ca = tls_to(*good_);
  wrong_ca.tls.ca_file = file("other-ca.crt");
  const Failure untrusted = refusal(wrong_ca);
  EXPECT_TRUE(says(untrusted, "certificate was refused")) << untrusted.message;

  ConnectionOptions wrong_name = tls_to(*good_);
  wrong_name.tls.server_name = "redis.example.com";
  EXPECT_TRUE(says(refusal(wrong_name), "hostname mismatch"));

  const Failure to_plain = refusal(tls_to(*plain_));
  EXPECT_EQ(to_plain.code, errc::store_unavailable);
  EXPECT_TRUE(says(to_plain, "TLS")) << to_plain.message;

  ConnectionOptions missing = tls_to(*good_);
  missing.tls.ca_file = file("no-such-ca.crt");
  const Failure no_ca = refusal(missing);
  EXPECT_EQ(no_ca.code, errc::config_invalid);
  EXPECT_TRUE(says(no_ca, "no-such-ca.crt")) << no_ca.message;
}
#endif

}  // namespace
}  // namespace idem::testing
