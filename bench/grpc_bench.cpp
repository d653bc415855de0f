// The gRPC payments example's Charge RPC through idem::GrpcGuard (BM_Grpc_*) beside the same RPC
// without it (BM_Grpc_*_bare), client and servers in this process on 127.0.0.1. Every call sends
// the same metadata (idempotency-key, x-tenant) with a key never used before.
//
//   Memory   the guarded service on a MemoryStore; the bare one charges and answers.
//   Redis    the guarded service on a RedisStore; the bare one sends the same two Redis commands a
//            fresh key costs (the record store's claim and commit scripts, on a hiredis connection
//            per server thread) around the same charge. Needs IDEM_BENCH_REDIS_URI
//            (redis://host:port), else left out.
//
// Times are real time per call; cpu_us_per_call is the whole process's CPU (client and server
// threads) per call, so guarded minus bare is what the wrapper and the store cost in CPU.
//
//   IDEM_BENCH_REDIS_URI=redis://127.0.0.1:6379 build/bench/idem_bench_grpc

#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/test/server_context_test_spouse.h>
#include <hiredis/hiredis.h>

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <string_view>

#include "idem/engine/effective_key.hpp"
#include "idem/memory/store.hpp"
#include "idem/redis/store.hpp"
#include "lua_scripts.hpp"  // the record store's scripts, so the bare twin sends the same bytes
#include "node.hpp"         // to_chars(DecimalText&, n)
#include "payments_service.hpp"
#include "store_common.hpp"  // tagged_key, fingerprint_bytes: the same key names and arguments

namespace {

using namespace std::chrono_literals;
namespace v1 = payments::v1;

constexpr std::chrono::milliseconds kLease = 30s;  // idem::Options' default, as the guard has
constexpr std::chrono::milliseconds kTtl = 24h;
constexpr std::string_view kRedisPrefix = "idembench:grpc:";

idem::redis::ConnectionOptions g_redis;
std::string g_run;  // unique to this run: keys never seen before

// ---- The bare services ------------------------------------------------------------------------

class BareService final : public v1::Payments::Service {
 public:
  explicit BareService(payments::Charger& charger) : charger_(charger) {}
  grpc::Status Charge(grpc::ServerContext*, const v1::ChargeRequest* request,
                      v1::Receipt* receipt) override {
    return charger_.charge(*request, *receipt);
  }

 private:
  payments::Charger& charger_;
};

struct ReplyFree {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

redisContext* bare_connection() {
  thread_local std::unique_ptr<redisContext, void (*)(redisContext*)> c{nullptr, redisFree};
  if (!c) {
    c.reset(redisConnect(g_redis.host.c_str(), g_redis.port));
    if (c == nullptr || c->err != 0) {
      std::fprintf(stderr, "bare twin: cannot connect to Redis\n");
      std::abort();
    }
  }
  return c.get();
}

Reply bare_command(std::initializer_list<std::string_view> argv) {
  std::array<const char*, 10> args{};
  std::array<std::size_t, 10> lens{};
  std::size_t n = 0;
  for (std::string_view a : argv) {
    args[n] = a.data();
    lens[n++] = a.size();
  }
  Reply r(static_cast<redisReply*>(
      redisCommandArgv(bare_connection(), static_cast<int>(n), args.data(), lens.data())));
  if (!r || r->type == REDIS_REPLY_ERROR) {
    std::fprintf(stderr, "bare twin: %s\n", r ? r->str : "connection failed");
    std::abort();
  }
  return r;
}

// The same claim and commit RedisStore sends for a fresh key, around the same charge.
class BareRedisService final : public v1::Payments::Service {
 public:
  explicit BareRedisService(payments::Charger& charger) : charger_(charger) {}
  grpc::Status Charge(grpc::ServerContext* context, const v1::ChargeRequest* request,
                      v1::Receipt* receipt) override {
    const auto& metadata = context->client_metadata();
    const auto id = metadata.find("idempotency-key");
    const auto tenant = metadata.find("x-tenant");
    if (id == metadata.end() || tenant == metadata.end()) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "no key"};
    }
    const idem::detail::EffectiveKey effective("payments.charge",
                                               {tenant->second.data(), tenant->second.size()},
                                               {id->second.data(), id->second.size()});
    const std::string key =
        idem::redis::tagged_key(std::string(kRedisPrefix) + "bare:", effective.view());
    const auto fp = idem::redis::fingerprint_bytes(
        idem::xxh3_128(idem::protobuf::deterministic_bytes(*request)));
    idem::redis::DecimalText lease, ttl, fence;
    Reply claim =
        bare_command({"EVALSHA", idem::redis::script_record_claim.sha, "1", key,
                      std::string_view(fp.data(), fp.size()), idem::redis::ms_text(lease, kLease),
                      idem::redis::ms_text(ttl, kTtl)});
    grpc::Status status = charger_.charge(*request, *receipt);
    std::string bytes(1, 'R');
    idem::protobuf::append_deterministic(*receipt, bytes);
    const long long claimed_fence =
        claim->type == REDIS_REPLY_ARRAY && claim->elements > 1 ? claim->element[1]->integer : 0;
    (void)bare_command({"EVALSHA", idem::redis::script_record_commit.sha, "1", key,
                        idem::redis::to_chars(fence, claimed_fence), "C", bytes,
                        idem::redis::ms_text(ttl, kTtl)});
    return status;
  }

 private:
  payments::Charger& charger_;
};

// ---- Servers, started once --------------------------------------------------------------------

class Server {
 public:
  explicit Server(grpc::Service& service) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service);
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) {
      std::fprintf(stderr, "idem_bench_grpc: a server did not start\n");
      std::abort();
    }
    stub_ = v1::Payments::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                                      grpc::InsecureChannelCredentials()));
  }
  v1::Payments::Stub& stub() { return *stub_; }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Payments::Stub> stub_;
};

payments::Charger& charger() {
  static payments::Charger c;
  return c;
}

Server& memory_guarded() {
  static idem::MemoryStore store;
  static payments::PaymentsService<idem::MemoryStore> service(store, charger());
  static Server server(service);
  return server;
}
Server& memory_bare() {
  static BareService service(charger());
  static Server server(service);
  return server;
}
Server& redis_guarded() {
  static idem::RedisStore store(
      std::make_shared<idem::redis::Client>(g_redis),
      idem::RedisStoreOptions{.prefix = std::string(kRedisPrefix) + "g:"});
  static payments::PaymentsService<idem::RedisStore> service(store, charger());
  static Server server(service);
  return server;
}
Server& redis_bare() {
  static BareRedisService service(charger());
  static Server server(service);
  return server;
}

// ---- The calls ----------------------------------------------------------------------------------

std::atomic<std::uint64_t> g_next_key{0};

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Every call carries a deadline, as clients in production set one: the guarded service then
// claims for the deadline's time (GrpcOptions::deadline_grace), in the claim itself.
void with_deadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds{10});
}

void run_calls(benchmark::State& state, Server& server) {
  v1::ChargeRequest request;
  request.set_card("4242424242424242");
  request.set_amount_cents(1999);
  request.set_currency("EUR");
  (*request.mutable_labels())["order"] = "bench";
  const std::string prefix = g_run + std::to_string(state.thread_index()) + "-";
  const double cpu_before = state.thread_index() == 0 ? process_cpu_seconds() : 0.0;
  for (auto _ : state) {
    grpc::ClientContext context;
    with_deadline(context);
    context.AddMetadata("idempotency-key", prefix + std::to_string(g_next_key.fetch_add(
                                                        1, std::memory_order_relaxed)));
    context.AddMetadata("x-tenant", "tenant-1");
    v1::Receipt receipt;
    const grpc::Status status = server.stub().Charge(&context, request, &receipt);
    if (!status.ok()) {
      state.SkipWithError(status.error_message().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    // The process's CPU over the run, per call of all threads (thread 0 starts and stops last
    // among equals: a close bound).
    const double calls = static_cast<double>(state.iterations()) * state.threads();
    state.counters["cpu_us_per_call"] = (process_cpu_seconds() - cpu_before) * 1e6 / calls;
  }
}

// Guarded and bare calls alternating on every thread, each timed: the two sides see the same
// machine at the same moment, so the ratio holds up on a loaded host where separate runs drift.
void run_paired(benchmark::State& state, Server& guarded, Server& bare) {
  v1::ChargeRequest request;
  request.set_card("4242424242424242");
  request.set_amount_cents(1999);
  request.set_currency("EUR");
  (*request.mutable_labels())["order"] = "bench";
  const std::string prefix = g_run + "p" + std::to_string(state.thread_index()) + "-";
  std::chrono::steady_clock::duration spent[2]{};
  for (auto _ : state) {
    for (int side = 0; side < 2; ++side) {
      grpc::ClientContext context;
      with_deadline(context);
      context.AddMetadata("idempotency-key", prefix + std::to_string(g_next_key.fetch_add(
                                                          1, std::memory_order_relaxed)));
      context.AddMetadata("x-tenant", "tenant-1");
      v1::Receipt receipt;
      const auto start = std::chrono::steady_clock::now();
      const grpc::Status status =
          (side == 0 ? guarded : bare).stub().Charge(&context, request, &receipt);
      spent[side] += std::chrono::steady_clock::now() - start;
      if (!status.ok()) {
        state.SkipWithError(status.error_message().c_str());
        return;
      }
    }
  }
  const auto us = [&](int side) {
    return std::chrono::duration<double, std::micro>(spent[side]).count() /
           static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  };
  state.counters["guarded_us"] = benchmark::Counter(us(0), benchmark::Counter::kAvgThreads);
  state.counters["bare_us"] = benchmark::Counter(us(1), benchmark::Counter::kAvgThreads);
  state.counters["ratio"] = benchmark::Counter(us(0) / us(1), benchmark::Counter::kAvgThreads);
}

void BM_Grpc_Memory_Fresh(benchmark::State& state) { run_calls(state, memory_guarded()); }
void BM_Grpc_Memory_Paired(benchmark::State& state) {
  run_paired(state, memory_guarded(), memory_bare());
}
void BM_Grpc_Redis_Paired(benchmark::State& state) {
  run_paired(state, redis_guarded(), redis_bare());
}
void BM_Grpc_Memory_Fresh_bare(benchmark::State& state) { run_calls(state, memory_bare()); }
void BM_Grpc_Redis_Fresh(benchmark::State& state) { run_calls(state, redis_guarded()); }
void BM_Grpc_Redis_Fresh_bare(benchmark::State& state) { run_calls(state, redis_bare()); }

// ---- The wrapper alone, without the network
// ------------------------------------------------------ GrpcGuard::unary on a ServerContext made
// here (gRPC's test spouse sets its metadata), on a MemoryStore, beside the handler called alone on
// the same context: the difference is the wrapper's own CPU per call (reading the key, serialising
// the request and the response, the guard's claim and commit on memory).

void wrapper_calls(benchmark::State& state, bool guarded) {
  static idem::MemoryStore store;
  static idem::IdempotencyGuard<idem::MemoryStore> guard(store,
                                                         idem::Options{.scope = "payments.charge"});
  static idem::GrpcGuard<idem::IdempotencyGuard<idem::MemoryStore>> rpc(
      guard, idem::GrpcOptions{.principal = idem::principal_from_metadata("x-tenant")});
  v1::ChargeRequest request;
  request.set_card("4242424242424242");
  request.set_amount_cents(1999);
  request.set_currency("EUR");
  (*request.mutable_labels())["order"] = "bench";
  const std::string prefix = g_run + "w" + std::to_string(state.thread_index()) + "-";
  payments::Charger& c = charger();
  for (auto _ : state) {
    grpc::ServerContext context;
    grpc::testing::ServerContextTestSpouse spouse(&context);
    spouse.AddClientMetadata("idempotency-key", prefix + std::to_string(g_next_key.fetch_add(
                                                             1, std::memory_order_relaxed)));
    spouse.AddClientMetadata("x-tenant", "tenant-1");
    v1::Receipt receipt;
    const grpc::Status status =
        guarded ? rpc.unary(context, request, receipt,
                            [&](v1::Receipt& out) { return c.charge(request, out); })
                : c.charge(request, receipt);
    if (!status.ok()) {
      state.SkipWithError(status.error_message().c_str());
      break;
    }
    benchmark::DoNotOptimize(receipt);
  }
  state.SetItemsProcessed(state.iterations());
}
void BM_Grpc_Wrapper_Memory_Fresh(benchmark::State& state) { wrapper_calls(state, true); }
void BM_Grpc_Wrapper_Memory_Fresh_bare(benchmark::State& state) { wrapper_calls(state, false); }

}  // namespace

int main(int argc, char** argv) {
  std::random_device rd;
  g_run = std::to_string(rd()) + ":";
  benchmark::RegisterBenchmark("BM_Grpc_Wrapper_Memory_Fresh", &BM_Grpc_Wrapper_Memory_Fresh);
  benchmark::RegisterBenchmark("BM_Grpc_Wrapper_Memory_Fresh_bare",
                               &BM_Grpc_Wrapper_Memory_Fresh_bare);
  benchmark::RegisterBenchmark("BM_Grpc_Memory_Fresh", &BM_Grpc_Memory_Fresh)
      ->Threads(1)
      ->Threads(8)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_Grpc_Memory_Fresh_bare", &BM_Grpc_Memory_Fresh_bare)
      ->Threads(1)
      ->Threads(8)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_Grpc_Memory_Paired", &BM_Grpc_Memory_Paired)
      ->Threads(1)
      ->Threads(8)
      ->UseRealTime();
  if (const char* uri = std::getenv("IDEM_BENCH_REDIS_URI"); uri != nullptr && *uri != '\0') {
    auto options = idem::redis::ConnectionOptions::from_uri(uri);
    if (!options) {
      std::fprintf(stderr, "idem_bench_grpc: %s\n", options.failure().describe().c_str());
      return 1;
    }
    g_redis = options.value();
    g_redis.pool_size = 64;
    // IDEM_BENCH_REDIS_PIPELINE=N: the guarded client's pipelined connections (0: a pooled
    // connection per call, as the bare twin has one per server thread).
    if (const char* lanes = std::getenv("IDEM_BENCH_REDIS_PIPELINE"); lanes != nullptr && *lanes) {
      g_redis.pipeline_connections = std::strtoul(lanes, nullptr, 10);
    }
    for (const idem::redis::Script* s :
         {&idem::redis::script_record_claim, &idem::redis::script_record_commit}) {
      (void)bare_command({"SCRIPT", "LOAD", s->source});
    }
    benchmark::RegisterBenchmark("BM_Grpc_Redis_Fresh", &BM_Grpc_Redis_Fresh)
        ->Threads(1)
        ->Threads(8)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_Grpc_Redis_Fresh_bare", &BM_Grpc_Redis_Fresh_bare)
        ->Threads(1)
        ->Threads(8)
        ->UseRealTime();
    benchmark::RegisterBenchmark("BM_Grpc_Redis_Paired", &BM_Grpc_Redis_Paired)
        ->Threads(1)
        ->Threads(8)
        ->UseRealTime();
  } else {
    std::puts("idem_bench_grpc: IDEM_BENCH_REDIS_URI is not set; the Redis pair is left out");
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
