// Two-phase use of the guard in an event loop: begin() on the request, commit() or fail() in the
// callback that finishes the work, with no handler lambda wrapped around the work.
//
// A single-threaded loop runs the tasks it is posted; a payment provider answers charges in a
// later task, as an asynchronous client would. Requests arrive while earlier ones are still in
// flight:
//
//   1. charge k-1                 -> begin() acquires; the charge starts
//   2. the client retries k-1     -> in progress: 409 with Retry-After from retry_after()
//   3. (the charge of 1 answers)  -> commit(): 201
//   4. the client retries k-1     -> replays 201 with the same receipt; no second charge
//   5. charge k-2                 -> the card is declined: fail() releases the key, 402
//   6. the client retries k-2     -> acquires again; charged: 201
//   7. charge k-3                 -> the provider drops the callback: the Attempt is destroyed
//                                    unsettled, which releases the key
//   8. the client retries k-3     -> acquires again; charged: 201
//
// Exits 0 only if every response and the number of charges are the expected ones.

#include <fmt/core.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "idem/idem.hpp"

namespace {

// Runs posted tasks in order until none is left; a task may post more.
class EventLoop {
 public:
  void post(std::function<void()> task) { tasks_.push_back(std::move(task)); }
  void run() {
    while (!tasks_.empty()) {
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      task();
    }
  }

 private:
  std::deque<std::function<void()>> tasks_;
};

struct ChargeResult {
  bool ok = false;
  std::string charge_id;  // ok
  std::string error;      // !ok
};

// An asynchronous payment provider: charge() returns at once and calls `done` from a later task.
class PaymentProvider {
 public:
  explicit PaymentProvider(EventLoop& loop) : loop_(loop) {}

  void charge(std::string_view card, std::function<void(ChargeResult)> done) {
    if (drop_next_) {  // a lost connection: the callback is destroyed, never called
      drop_next_ = false;
      return;
    }
    if (decline_next_) {
      decline_next_ = false;
      loop_.post([done = std::move(done)] { done({false, "", "card declined"}); });
      return;
    }
    ++charges_;
    std::string id = fmt::format("ch_{:04}_{}", charges_, card.substr(card.size() - 4));
    loop_.post([done = std::move(done), id = std::move(id)] { done({true, id, ""}); });
  }

  void decline_next() { decline_next_ = true; }
  void drop_next() { drop_next_ = true; }
  int charges() const { return charges_; }

 private:
  EventLoop& loop_;
  int charges_ = 0;
  bool decline_next_ = false;
  bool drop_next_ = false;
};

struct Response {
  int status = 0;
  std::string body;
  std::string retry_after;  // seconds, for 409
};

using Guard = idem::IdempotencyGuard<idem::MemoryStore>;
using ChargeAttempt = Guard::Attempt<std::string>;

// The request handler: never blocks on the charge; the Attempt travels with the callback.
class PaymentsService {
 public:
  PaymentsService(Guard& guard, PaymentProvider& provider) : guard_(guard), provider_(provider) {}

  void on_charge(std::string_view idempotency_key, std::string_view tenant, std::string_view card,
                 std::function<void(Response)> reply) {
    ChargeAttempt attempt = guard_.begin<std::string>(idem::Key{idempotency_key, tenant}, card);
    if (!attempt.acquired()) {
      reply(answer(attempt.outcome()));
      return;
    }
    // Held: start the work. The Attempt moves into the callback (a shared_ptr, because
    // std::function wants a copyable callable); exactly one of the paths below settles it.
    auto held = std::make_shared<ChargeAttempt>(std::move(attempt));
    provider_.charge(card, [held, reply = std::move(reply)](ChargeResult result) {
      if (!result.ok) {
        held->fail(result.error);  // released: a retry charges again
        reply({402, result.error, ""});
        return;
      }
      idem::Outcome<std::string> out = held->commit(result.charge_id);
      reply(out ? Response{201, out.value(), ""}
                : Response{idem::http_status(out.error()), out.message(), ""});
    });
  }

 private:
  // A key this request did not acquire: a replay, or a refusal.
  static Response answer(const idem::Outcome<std::string>& out) {
    if (out) return {201, out.value(), ""};
    if (out.error() == idem::errc::in_progress) {
      // Retry-After in whole seconds, rounded up: the earliest the holder's lease can end.
      const auto wait = std::chrono::ceil<std::chrono::seconds>(out.retry_after());
      return {409, out.message(), std::to_string(std::max<long long>(wait.count(), 1))};
    }
    return {idem::http_status(out.error()), out.message(), ""};
  }

  Guard& guard_;
  PaymentProvider& provider_;
};

}  // namespace

int main() {
  EventLoop loop;
  PaymentProvider provider(loop);
  idem::MemoryStore store;
  Guard guard{store, idem::Options{.scope = "payments.charge", .lease = std::chrono::seconds{30}}};
  PaymentsService service(guard, provider);

  std::map<int, Response> responses;
  auto request = [&](int n, std::string_view key) {
    fmt::print("{}. request for {}\n", n, key);
    service.on_charge(key, "tenant-7", "4242424242424242", [&responses, n](Response r) {
      fmt::print("   response to {}: {} {}{}\n", n, r.status, r.body,
                 r.retry_after.empty() ? "" : " (Retry-After: " + r.retry_after + ")");
      responses[n] = std::move(r);
    });
  };

  loop.post([&] { request(1, "k-1"); });
  loop.post([&] { request(2, "k-1"); });  // while 1's charge is in flight
  loop.run();
  loop.post([&] { request(4, "k-1"); });
  loop.post([&] {
    provider.decline_next();
    request(5, "k-2");
  });
  loop.run();
  loop.post([&] { request(6, "k-2"); });
  loop.post([&] {
    provider.drop_next();
    request(7, "k-3");
  });
  loop.run();
  loop.post([&] { request(8, "k-3"); });
  loop.run();

  bool ok = true;
  auto expect = [&ok](bool condition, std::string_view what) {
    if (!condition) {
      fmt::print("UNEXPECTED: {}\n", what);
      ok = false;
    }
  };
  expect(responses[1].status == 201, "the first request is charged");
  expect(responses[2].status == 409 && !responses[2].retry_after.empty() &&
             std::stoi(responses[2].retry_after) <= 30,
         "a retry during the charge is refused with a Retry-After within the lease");
  expect(responses[4].status == 201 && responses[4].body == responses[1].body,
         "a retry after the charge replays its receipt");
  expect(responses[5].status == 402, "a declined card fails the attempt");
  expect(responses[6].status == 201, "the retry after a failure charges again");
  expect(!responses.contains(7), "a dropped callback answers nothing");
  expect(responses[8].status == 201, "the retry after a dropped attempt charges again");
  expect(provider.charges() == 3, "three charges: k-1 once, k-2 once, k-3 once");
  fmt::print("{} (charges: {})\n", ok ? "OK" : "FAILED", provider.charges());
  return ok ? 0 : 1;
}
