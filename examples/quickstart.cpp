// Quick start: make a card charge idempotent with an in-memory store.
//
// The same request is sent three times under one idempotency key, as a client that retries
// would: the first call charges the card, the second replays the stored receipt without
// charging again, and the third, which reuses the key for a different amount, is refused as
// misuse (payload_mismatch, HTTP 422). Exits 0 only if all three outcomes are the expected ones.

#include <fmt/core.h>

#include <charconv>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include "idem/idem.hpp"

// What the handler returns, and what repeats of its key replay.
struct Receipt {
  std::string charge_id;
  std::int64_t amount_cents = 0;
  std::string currency;

  friend bool operator==(const Receipt&, const Receipt&) = default;
};

// How a Receipt crosses the store: "r1;<amount_cents>;<currency>;<charge_id>". The charge id goes
// last so that it may hold any byte; the version tag lets a later format read old records.
template <>
struct idem::codec<Receipt> {
  static std::string encode(const Receipt& r) {
    std::string out = "r1;";
    out.append(std::to_string(r.amount_cents)).append(";");
    out.append(r.currency).append(";");
    out.append(r.charge_id);
    return out;
  }

  static Receipt decode(std::string_view bytes) {
    constexpr std::string_view kTag = "r1;";
    if (!bytes.starts_with(kTag)) bad("not a version 1 receipt");
    bytes.remove_prefix(kTag.size());

    Receipt r;
    const auto [end, ec] =
        std::from_chars(bytes.data(), bytes.data() + bytes.size(), r.amount_cents);
    if (ec != std::errc{} || end == bytes.data() + bytes.size() || *end != ';') {
      bad("receipt amount is unreadable");
    }
    bytes.remove_prefix(static_cast<std::size_t>(end - bytes.data()) + 1);

    const auto semicolon = bytes.find(';');
    if (semicolon == std::string_view::npos) bad("receipt has no charge id");
    r.currency = std::string(bytes.substr(0, semicolon));
    r.charge_id = std::string(bytes.substr(semicolon + 1));
    return r;
  }

 private:
  [[noreturn]] static void bad(const char* what) {
    throw idem::Error(make_error_code(idem::errc::record_corrupt), what);
  }
};

// A stand-in for the payment provider: every call is a real charge, so running it twice for one
// intent would bill the customer twice.
class PaymentProvider {
 public:
  Receipt charge(std::string_view card, std::int64_t amount_cents, std::string_view currency) {
    ++charges_;
    fmt::print("  [provider] charging {} cents {} to card ending {}\n", amount_cents, currency,
               card.substr(card.size() - 4));
    return Receipt{fmt::format("ch_{:04}", charges_), amount_cents, std::string(currency)};
  }
  int charges() const noexcept { return charges_; }

 private:
  int charges_ = 0;
};

struct ChargeRequest {
  std::string card;
  std::int64_t amount_cents;
  std::string currency;

  // The request as the client sent it: what the key's fingerprint is taken over.
  std::string payload() const {
    return fmt::format("card={}&amount={}&currency={}", card, amount_cents, currency);
  }
};

int main() {
  idem::MemoryStore store;
  auto observer = std::make_shared<idem::Observer>();
  idem::IdempotencyGuard guard{store,
                               idem::Options{.scope = "payments.charge", .observer = observer}};
  PaymentProvider provider;

  // The client's idempotency key (an Idempotency-Key header) and the tenant that sent it.
  const idem::Key key{"order-42-attempt", "tenant-7"};

  auto charge = [&](const ChargeRequest& request) {
    return guard.execute(key, request.payload(), [&] {
      return provider.charge(request.card, request.amount_cents, request.currency);
    });
  };

  const ChargeRequest request{"4242424242424242", 1999, "EUR"};
  bool ok = true;
  auto expect = [&ok](bool condition, std::string_view what) {
    if (!condition) {
      fmt::print("  UNEXPECTED: {}\n", what);
      ok = false;
    }
  };

  fmt::print("1. first request\n");
  const idem::Outcome<Receipt> first = charge(request);
  if (first) {
    fmt::print("   executed={} recorded={} -> receipt {} for {} cents {}\n", first.executed(),
               first.recorded(), first.value().charge_id, first.value().amount_cents,
               first.value().currency);
  }
  expect(first.has_value() && first.executed() && first.recorded(),
         "the first request should run the handler and record its receipt");

  fmt::print("2. the client retries the same request\n");
  const idem::Outcome<Receipt> second = charge(request);
  if (second) {
    fmt::print("   replayed={} -> receipt {} for {} cents {}\n", second.replayed(),
               second.value().charge_id, second.value().amount_cents, second.value().currency);
  }
  expect(second.has_value() && second.replayed(), "the retry should replay the stored receipt");
  expect(second.has_value() && first.has_value() && second.value() == first.value(),
         "the replayed receipt should equal the first one");

  fmt::print("3. the same key is reused for another amount\n");
  const idem::Outcome<Receipt> third = charge(ChargeRequest{"4242424242424242", 2999, "EUR"});
  const std::error_code error = third.error();
  fmt::print("   has_value={} error={}:{} (\"{}\") http_status={}\n   message: {}\n",
             third.has_value(), error.category().name(), error.value(), error.message(),
             idem::http_status(error), third.message());
  expect(!third.has_value() && error == idem::errc::payload_mismatch,
         "reusing the key with another payload should be payload_mismatch");
  expect(idem::http_status(error) == 422, "payload_mismatch should map to HTTP 422");

  const idem::Counters counters = observer->counters();
  fmt::print("provider charges: {}; observer: executed={} replayed={} mismatched={}\n",
             provider.charges(), counters.executed, counters.replayed, counters.mismatched);
  expect(provider.charges() == 1, "the card should be charged exactly once");
  expect(counters.executed == 1 && counters.replayed == 1 && counters.mismatched == 1,
         "the observer should count one execution, one replay and one mismatch");

  fmt::print("{}\n", ok ? "OK: charged once, replayed once, misuse refused"
                        : "FAILED: see UNEXPECTED above");
  return ok ? 0 : 1;
}
