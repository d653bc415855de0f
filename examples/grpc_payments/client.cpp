// grpc_payments_client: charges a card through grpc_payments_server, retrying with the same
// idempotency key until the call has an answer, so the card is charged once however many
// attempts it takes.
//
//   grpc_payments_client [--target HOST:PORT] [--key KEY] [--tenant T] [--card N] [--amount C]
//                        [--deadline-ms N] [--attempts N]
//
// A deadline that fires, UNAVAILABLE and ABORTED (another attempt of the key is still running)
// are retried, after the server's retry-after-ms when it sent one. Exits 0 with the receipt, 1
// with the final error status.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <exception>
#include <idem/grpc.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "payments.grpc.pb.h"

namespace {

struct Config {
  std::string target = "127.0.0.1:50051";
  std::string key;
  std::string tenant = "tenant-1";
  std::string card = "4242424242424242";
  long long amount = 1999;
  int deadline_ms = 1000;
  int attempts = 8;
};

long long to_number(std::string_view flag, std::string_view text) {
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size()) {
    throw std::invalid_argument(std::string(flag) + ": not a number: " + std::string(text));
  }
  return value;
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; i += 2) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(std::string(flag) + " needs a value");
    const std::string_view value = argv[i + 1];
    if (flag == "--target") {
      c.target = value;
    } else if (flag == "--key") {
      c.key = value;
    } else if (flag == "--tenant") {
      c.tenant = value;
    } else if (flag == "--card") {
      c.card = value;
    } else if (flag == "--amount") {
      c.amount = to_number(flag, value);
    } else if (flag == "--deadline-ms") {
      c.deadline_ms = static_cast<int>(to_number(flag, value));
    } else if (flag == "--attempts") {
      c.attempts = static_cast<int>(to_number(flag, value));
    } else {
      throw std::invalid_argument("unknown option " + std::string(flag));
    }
  }
  if (c.key.empty()) c.key = "charge-" + std::to_string(std::random_device{}());
  return c;
}

// The value of a trailing metadata entry, or "".
std::string trailer(const grpc::ClientContext& context, std::string_view name) {
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto it = trailers.find(grpc::string_ref(name.data(), name.size()));
  return it == trailers.end() ? std::string{} : std::string(it->second.data(), it->second.size());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Config config = parse(argc, argv);
    auto stub = payments::v1::Payments::NewStub(
        grpc::CreateChannel(config.target, grpc::InsecureChannelCredentials()));
    payments::v1::ChargeRequest request;
    request.set_card(config.card);
    request.set_amount_cents(config.amount);
    request.set_currency("EUR");
    (*request.mutable_labels())["order"] = config.key;

    std::chrono::milliseconds backoff{50};
    grpc::Status status;
    for (int attempt = 1; attempt <= config.attempts; ++attempt) {
      grpc::ClientContext context;
      context.AddMetadata(std::string(idem::kGrpcKeyMetadata), config.key);  // the same each time
      context.AddMetadata("x-tenant", config.tenant);
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::milliseconds{config.deadline_ms});
      payments::v1::Receipt receipt;
      status = stub->Charge(&context, request, &receipt);
      const bool replayed = trailer(context, idem::kGrpcReplayedMetadata) == "true";
      std::printf("attempt %d (key %s): %s%s\n", attempt, config.key.c_str(),
                  status.ok() ? "OK" : status.error_message().c_str(),
                  replayed ? " [replayed]" : "");
      if (status.ok()) {
        std::printf("receipt %s: %lld cents %s\n", receipt.payment_id().c_str(),
                    static_cast<long long>(receipt.amount_cents()), receipt.currency().c_str());
        return 0;
      }
      if (!idem::grpc_retryable(status.error_code()) &&
          status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
        break;  // the key's answer: retrying replays it
      }
      const std::string retry_after = trailer(context, idem::kGrpcRetryAfterMetadata);
      std::chrono::milliseconds wait = backoff;
      if (!retry_after.empty()) {
        wait = std::chrono::milliseconds{to_number("retry-after-ms", retry_after)};
      }
      std::this_thread::sleep_for(std::min(wait, std::chrono::milliseconds{2000}));
      backoff = std::min(backoff * 2, std::chrono::milliseconds{1000});
    }
    std::printf("failed: code %d: %s\n", static_cast<int>(status.error_code()),
                status.error_message().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grpc_payments_client: %s\n", e.what());
    return 2;
  }
}
