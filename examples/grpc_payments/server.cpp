// grpc_payments_server: the payments service of payments.proto on idem::GrpcGuard.
//
//   grpc_payments_server [--port N] [--db FILE | --pg URI | --redis URI] [--callback]
//                        [--delay-ms N]
//
// Records go to SQLite (FILE, default grpc_payments.db) unless --pg or --redis names another
// store. --callback serves the callback API instead of the synchronous one; --delay-ms makes
// every charge take that long (to watch a client's deadline and retry). Port 0 picks a free
// one. Prints "listening on 127.0.0.1:<port>" once it serves, then runs until killed.
#include <grpcpp/grpcpp.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <exception>
#include <idem/postgres/store.hpp>
#include <idem/redis/store.hpp>
#include <idem/sqlite/store.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "payments_service.hpp"

namespace {

struct Config {
  int port = 50051;
  std::string db = "grpc_payments.db";
  std::string pg_uri;
  std::string redis_uri;
  bool callback = false;
  std::chrono::milliseconds delay{0};
};

int to_int(std::string_view flag, std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < 0) {
    throw std::invalid_argument(std::string(flag) + ": not a number: " + std::string(text));
  }
  return value;
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--callback") {
      c.callback = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(std::string(flag) + " needs a value");
    const std::string_view value = argv[++i];
    if (flag == "--port") {
      c.port = to_int(flag, value);
    } else if (flag == "--db") {
      c.db = value;
    } else if (flag == "--pg") {
      c.pg_uri = value;
    } else if (flag == "--redis") {
      c.redis_uri = value;
    } else if (flag == "--delay-ms") {
      c.delay = std::chrono::milliseconds{to_int(flag, value)};
    } else {
      throw std::invalid_argument("unknown option " + std::string(flag));
    }
  }
  if (!c.pg_uri.empty() && !c.redis_uri.empty()) {
    throw std::invalid_argument("--pg and --redis: choose one store");
  }
  return c;
}

template <class Store>
int serve(const Config& config, Store& store) {
  payments::Charger charger(config.delay);
  std::unique_ptr<grpc::Service> service;
  if (config.callback) {
    service = std::make_unique<payments::PaymentsCallbackService<Store>>(store, charger);
  } else {
    service = std::make_unique<payments::PaymentsService<Store>>(store, charger);
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(config.port),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "grpc_payments_server: cannot listen on port %d\n", config.port);
    return 1;
  }
  std::printf("listening on 127.0.0.1:%d\n", port);
  std::fflush(stdout);
  server->Wait();
  return 0;
}

template <class SqlStore>
int serve_sql(const Config& config, SqlStore& store) {
  if (idem::Status s = store.ensure_schema(); !s) {
    std::fprintf(stderr, "grpc_payments_server: %s\n", s.failure().describe().c_str());
    return 1;
  }
  return serve<idem::SqlStore>(config, store);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Config config = parse(argc, argv);
    if (!config.redis_uri.empty()) {
      idem::Result<idem::redis::ConnectionOptions> options =
          idem::redis::ConnectionOptions::from_uri(config.redis_uri);
      if (!options) throw std::invalid_argument("--redis: " + options.failure().describe());
      idem::RedisStore store(std::make_shared<idem::redis::Client>(options.value()),
                             idem::RedisStoreOptions{.prefix = "grpc_payments:"});
      return serve(config, store);
    }
    if (!config.pg_uri.empty()) {
      idem::PostgresStore store(idem::PostgresStoreOptions{
          .connection = {.uri = config.pg_uri, .table_prefix = "grpc_payments_"}});
      return serve_sql(config, store);
    }
    idem::SqliteStore store(idem::SqliteStoreOptions{.path = config.db});
    return serve_sql(config, store);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grpc_payments_server: %s\n", e.what());
    return 2;
  }
}
