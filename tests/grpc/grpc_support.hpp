#pragma once
// What the gRPC tests share: a payments server in this process (synchronous or callback API, on
// a MemoryStore that counts its calls, a counting Charger), one call with chosen metadata, and the
// example's server as a child process.

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <idem/idem.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "payments_service.hpp"
#include "support/counting_store.hpp"

extern char** environ;  // NOLINT: POSIX

namespace grpc_test {

namespace v1 = payments::v1;
using Metadata = std::vector<std::pair<std::string, std::string>>;

enum class Api { sync, callback };

/// A payments server on 127.0.0.1 (a port the system picks) over a MemoryStore (counted).
class InProcessServer {
 public:
  explicit InProcessServer(Api api, std::chrono::milliseconds delay = {}) : charger_(delay) {
    if (api == Api::sync) {
      service_ = std::make_unique<payments::PaymentsService<Store>>(store_, charger_);
    } else {
      service_ = std::make_unique<payments::PaymentsCallbackService<Store>>(store_, charger_);
    }
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    if (!server_ || port_ == 0) throw std::runtime_error("the test server did not start");
  }
  ~InProcessServer() { server_->Shutdown(std::chrono::system_clock::now()); }
  InProcessServer(const InProcessServer&) = delete;
  InProcessServer& operator=(const InProcessServer&) = delete;

  using Store = idem::testing::CountingStore;

  int port() const { return port_; }
  std::int64_t charges() const { return charger_.charges(); }
  Store& store() { return store_; }

 private:
  Store store_;
  payments::Charger charger_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

inline std::unique_ptr<v1::Payments::Stub> stub_for(int port) {
  return v1::Payments::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
}

/// One Charge call and what came back.
struct Answer {
  grpc::Status status;
  v1::Receipt receipt;
  bool replayed = false;
  std::string retry_after_ms;  // "" when not sent
  std::string bytes() const { return idem::protobuf::deterministic_bytes(receipt); }
};

inline std::string trailer(const grpc::ClientContext& context, std::string_view name) {
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto it = trailers.find(grpc::string_ref(name.data(), name.size()));
  return it == trailers.end() ? std::string{} : std::string(it->second.data(), it->second.size());
}

inline Answer charge(v1::Payments::Stub& stub, const v1::ChargeRequest& request,
                     const Metadata& metadata,
                     std::chrono::milliseconds deadline = std::chrono::seconds{20}) {
  grpc::ClientContext context;
  for (const auto& [name, value] : metadata) context.AddMetadata(name, value);
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  Answer a;
  a.status = stub.Charge(&context, request, &a.receipt);
  a.replayed = trailer(context, idem::kGrpcReplayedMetadata) == "true";
  a.retry_after_ms = trailer(context, idem::kGrpcRetryAfterMetadata);
  return a;
}

inline Metadata keyed(const std::string& key, const std::string& tenant = "tenant-1") {
  return {{"idempotency-key", key}, {"x-tenant", tenant}};
}

inline v1::ChargeRequest request_of(long long cents, std::string card = "4242424242424242") {
  v1::ChargeRequest r;
  r.set_card(std::move(card));
  r.set_amount_cents(cents);
  r.set_currency("EUR");
  (*r.mutable_labels())["order"] = "o-" + std::to_string(cents);
  (*r.mutable_labels())["channel"] = "test";
  return r;
}

/// The example's server (IDEM_GRPC_PAYMENTS_SERVER) as a child process; its first stdout line
/// names its port.
class ChildServer {
 public:
  explicit ChildServer(std::vector<std::string> args) {
    args.insert(args.begin(), {IDEM_GRPC_PAYMENTS_SERVER, "--port", "0"});
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    posix_spawn_file_actions_addclose(&actions, out[1]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int spawned = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    if (spawned != 0) {
      ::close(out[0]);
      throw std::runtime_error("cannot start grpc_payments_server");
    }
    FILE* f = ::fdopen(out[0], "r");
    char line[256] = {};
    const bool read = std::fgets(line, sizeof line, f) != nullptr;
    std::fclose(f);
    if (!read) {
      stop(SIGKILL);
      throw std::runtime_error("grpc_payments_server did not start");
    }
    const std::string s(line);
    port_ = std::stoi(s.substr(s.rfind(':') + 1));
  }
  ~ChildServer() { stop(SIGTERM); }
  ChildServer(const ChildServer&) = delete;
  ChildServer& operator=(const ChildServer&) = delete;

  int port() const { return port_; }
  void stop(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace grpc_test
