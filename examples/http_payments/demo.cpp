// example_http_payments_demo: starts the payments service in-process on a free port (SQLite in a
// temporary file), sends a few requests and checks the answers. Exits 0 when all are right.

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "payments_app.hpp"
#include "transport/bounded_server.hpp"

namespace {
int failures = 0;
void check(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}
}  // namespace

int main() {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("idem_http_demo_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  {
    payments::App app(payments::Config{.sqlite_path = (dir / "payments.db").string()});
    transport::BoundedServer server(transport::TransportSettings{});
    app.mount(server);
    const int port = server.bind("127.0.0.1", 0);
    std::thread listener([&] { server.listen_after_bind(); });
    while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));

    httplib::Client client("127.0.0.1", port);
    const httplib::Headers alice{{"Authorization", "Bearer alice"}, {"Idempotency-Key", "k-1"}};
    const std::string body = R"({"amount": 1250, "currency": "EUR"})";
    auto first = client.Post("/payments", alice, body, "application/json");
    check(first && first->status == 201, "POST /payments -> 201");
    auto again = client.Post("/payments", alice, body, "application/json");
    check(again && again->status == 201 && again->body == first->body &&
              again->get_header_value("Idempotent-Replayed") == "true",
          "the repeat replays the same body with Idempotent-Replayed: true");
    auto other =
        client.Post("/payments", alice, R"({"amount": 99, "currency": "EUR"})", "application/json");
    check(other && other->status == 422, "same key, another body -> 422");
    auto no_key = client.Post("/payments", httplib::Headers{{"Authorization", "Bearer alice"}},
                              body, "application/json");
    check(no_key && no_key->status == 400 &&
              no_key->get_header_value("Content-Type") == "application/problem+json",
          "no Idempotency-Key -> 400 problem+json");
    const httplib::Headers bob{{"Authorization", "Bearer bob"}, {"Idempotency-Key", "k-1"}};
    auto bobs = client.Post("/payments", bob, body, "application/json");
    check(bobs && bobs->status == 201 && bobs->body != first->body,
          "another principal with the same key gets its own payment");
    if (first) {
      const std::string id = payments::json::parse(first->body)["id"];
      auto got = client.Get("/payments/" + id, alice);
      check(got && got->status == 200, "GET /payments/{id} -> 200 for its owner");
      auto hidden = client.Get("/payments/" + id, bob);
      check(hidden && hidden->status == 404, "GET /payments/{id} -> 404 for another principal");
    }
    auto token = client.Get("/tokens");
    check(token && token->status == 201, "GET /tokens -> 201");
    if (token) {
      httplib::Headers with_token = alice;
      with_token.erase("Idempotency-Key");
      with_token.emplace("Idempotency-Key", "k-2");
      with_token.emplace("Payment-Token", payments::json::parse(token->body)["token"]);
      auto paid = client.Post("/payments", with_token, body, "application/json");
      check(paid && paid->status == 201, "POST with a one-time token -> 201");
    }
    server.stop();
    listener.join();
  }
  std::filesystem::remove_all(dir);
  std::printf("%s\n", failures == 0 ? "all checks passed" : "some checks failed");
  return failures == 0 ? 0 : 1;
}
