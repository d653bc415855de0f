#pragma once
// The payments service of the gRPC example, over any record store: Charge runs once per
// idempotency key and tenant, and a repeat gets the same Receipt or the same error status.
// Two forms of one service: PaymentsService (the synchronous API) and PaymentsCallbackService
// (the callback API). The charging itself is a Charger, so tests can count and slow it.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <idem/grpc.hpp>
#include <idem/guard.hpp>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "payments.grpc.pb.h"

namespace payments {

/// Charges a card: the work a retried call must not repeat.
class Charger {
 public:
  /// A card that is always declined: FAILED_PRECONDITION, with a DeclineReason in the status's
  /// details (a google.rpc.Status, gRPC's rich error model).
  static constexpr std::string_view kDeclinedCard = "4000000000000002";
  static constexpr std::string_view kDeclineReasonType =
      "type.googleapis.com/payments.v1.DeclineReason";

  explicit Charger(std::chrono::milliseconds delay = {}) : delay_(delay) {}
  virtual ~Charger() = default;
  Charger(const Charger&) = delete;
  Charger& operator=(const Charger&) = delete;

  virtual grpc::Status charge(const v1::ChargeRequest& request, v1::Receipt& receipt) {
    charges_.fetch_add(1, std::memory_order_relaxed);
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (request.amount_cents() <= 0) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "amount_cents must be positive"};
    }
    if (request.card() == kDeclinedCard) {
      v1::DeclineReason reason;
      reason.set_reason("insufficient_funds");
      return {grpc::StatusCode::FAILED_PRECONDITION, "card declined",
              idem::grpc_status_details(grpc::StatusCode::FAILED_PRECONDITION, "card declined",
                                        kDeclineReasonType, reason.SerializeAsString())};
    }
    receipt.set_payment_id(new_payment_id());
    receipt.set_amount_cents(request.amount_cents());
    receipt.set_currency(request.currency());
    receipt.set_charged_at_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count());
    *receipt.mutable_labels() = request.labels();
    return grpc::Status::OK;
  }

  /// How many times charge() ran.
  std::int64_t charges() const noexcept { return charges_.load(std::memory_order_relaxed); }

 private:
  static std::string new_payment_id() {
    thread_local std::mt19937_64 random{std::random_device{}()};
    static constexpr char kHex[] = "0123456789abcdef";
    std::string id = "pay_";
    std::uint64_t bits = random();
    for (int i = 0; i < 16; ++i, bits >>= 4) id += kHex[bits & 0xfU];
    return id;
  }

  std::chrono::milliseconds delay_;
  std::atomic<std::int64_t> charges_{0};
};

/// The guard and options both forms share: scope "payments.charge", the tenant from "x-tenant".
template <class Store>
struct PaymentsGuard {
  explicit PaymentsGuard(Store& store)
      : guard(store, idem::Options{.scope = "payments.charge"}),
        rpc(guard, idem::GrpcOptions{.principal = idem::principal_from_metadata("x-tenant")}) {}
  idem::IdempotencyGuard<Store> guard;
  idem::GrpcGuard<idem::IdempotencyGuard<Store>> rpc;
};

/// The synchronous API: the handler runs on the call's thread.
template <class Store>
class PaymentsService final : public v1::Payments::Service {
 public:
  PaymentsService(Store& store, Charger& charger) : guarded_(store), charger_(charger) {}

  grpc::Status Charge(grpc::ServerContext* context, const v1::ChargeRequest* request,
                      v1::Receipt* receipt) override {
    return guarded_.rpc.unary(*context, *request, *receipt,
                              [&](v1::Receipt& out) { return charger_.charge(*request, out); });
  }

 private:
  PaymentsGuard<Store> guarded_;
  Charger& charger_;
};

/// The callback API: the call is answered through its PendingCall, here on a thread of its own as
/// a charge that completes in a provider's callback would be.
template <class Store>
class PaymentsCallbackService final : public v1::Payments::CallbackService {
 public:
  PaymentsCallbackService(Store& store, Charger& charger) : guarded_(store), charger_(charger) {}
  ~PaymentsCallbackService() override {
    while (in_flight_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  PaymentsCallbackService(const PaymentsCallbackService&) = delete;
  PaymentsCallbackService& operator=(const PaymentsCallbackService&) = delete;

  grpc::ServerUnaryReactor* Charge(grpc::CallbackServerContext* context,
                                   const v1::ChargeRequest* request,
                                   v1::Receipt* receipt) override {
    using Call =
        typename idem::GrpcGuard<idem::IdempotencyGuard<Store>>::template PendingCall<v1::Receipt>;
    return guarded_.rpc.unary(*context, *request, *receipt, [this, request](Call call) {
      in_flight_.fetch_add(1);
      std::thread([this, request, call = std::move(call)]() mutable {
        call.finish(charger_.charge(*request, call.response()));
        in_flight_.fetch_sub(1);
      }).detach();
    });
  }

 private:
  PaymentsGuard<Store> guarded_;
  Charger& charger_;
  std::atomic<int> in_flight_{0};
};

}  // namespace payments
