#pragma once
// The payments service's own tables on PostgreSQL, written and read without blocking the event
// loop: the same payments and outbox tables as the blocking service, on one pipelined libpq
// connection driven by Asio (idem::postgres::AsyncConnection, the connection AsyncPostgresStore
// runs on).
//
// In lease mode the record and the handler's rows are not one transaction: a service killed
// after its rows committed and before its record did leaves the key to be taken over, and the
// handler runs again. So the rows are written by one statement that is idempotent on its own:
// <prefix>payments_insert_once() takes a transaction-scoped advisory lock on (principal, key),
// returns the payment already there if there is one, and otherwise inserts the payment and its
// outbox event. A second run answers the first run's payment, whose body is the same bytes.
//
// The tables and the function are created at start-up (blocking, before the server listens).
// Included by payments_routes.cpp alone.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "idem/postgres/async_connection.hpp"

namespace payments_async {

using json = nlohmann::json;

class PaymentRows {
 public:
  /// Creates the tables and the function if missing; throws std::runtime_error when the
  /// database cannot be reached or refuses.
  PaymentRows(const boost::asio::any_io_executor& executor, const std::string& uri,
              const std::string& prefix)
      : payments_(prefix + "payments"),
        outbox_(prefix + "payments_outbox"),
        insert_once_(prefix + "payments_insert_once"),
        connection_(executor, idem::postgres::ConnectionOptions{.uri = uri}) {
    create_schema(uri);
  }
  PaymentRows(const PaymentRows&) = delete;
  PaymentRows& operator=(const PaymentRows&) = delete;

  /// Records `payment` (id, amount, currency) for (principal, key) with its outbox event, or
  /// finds the payment an earlier run recorded; answers the recorded one. Throws
  /// std::runtime_error when the statement fails (the caller's key is then released).
  boost::asio::awaitable<json> insert_once(const json& payment, const std::string& principal,
                                           const std::string& key) {
    // Built before the co_await: GCC 12 cannot keep a braced list alive across one.
    std::vector<std::string> params{
        payment["id"].get<std::string>(),
        principal,
        key,
        std::to_string(payment["amount"].get<long long>()),
        payment["currency"].get<std::string>(),
        json{{"type", "payment.succeeded"}, {"payment", payment}}.dump()};
    idem::Result<idem::postgres::QueryRows> r =
        co_await connection_.query("SELECT paid_id, paid_amount, paid_currency FROM " +
                                       insert_once_ + "($1, $2, $3, $4, $5, $6)",
                                   std::move(params));
    if (!r) throw std::runtime_error(r.failure().describe());
    if (r->rows.size() != 1) throw std::runtime_error("payments_insert_once answered no row");
    co_return as_payment(r->rows[0]);
  }

  /// The payment `id` if it belongs to `principal`; throws std::runtime_error when the query
  /// fails.
  boost::asio::awaitable<std::optional<json>> find(const std::string& id,
                                                   const std::string& principal) {
    std::vector<std::string> params{id, principal};
    idem::Result<idem::postgres::QueryRows> r = co_await connection_.query(
        "SELECT id, amount, currency FROM " + payments_ + " WHERE id = $1 AND principal = $2",
        std::move(params));
    if (!r) throw std::runtime_error(r.failure().describe());
    if (r->rows.empty()) co_return std::nullopt;
    co_return as_payment(r->rows[0]);
  }

 private:
  static json as_payment(const std::vector<std::optional<std::string>>& row) {
    return json{{"id", row.at(0).value_or("")},
                {"amount", std::stoll(row.at(1).value_or("0"))},
                {"currency", row.at(2).value_or("")},
                {"status", "succeeded"}};
  }

  void create_schema(const std::string& uri) {
    pqxx::connection c(uri);
    pqxx::work w(c);
    // Two services starting at once on one database: one creates, the other waits and finds.
    w.exec("SELECT pg_advisory_xact_lock(hashtext('idem payments schema'))");
    w.exec("CREATE TABLE IF NOT EXISTS " + payments_ +
           " (id TEXT PRIMARY KEY, principal TEXT NOT NULL, idempotency_key TEXT NOT NULL, "
           "amount BIGINT NOT NULL, currency TEXT NOT NULL)");
    w.exec("CREATE TABLE IF NOT EXISTS " + outbox_ +
           " (payment_id TEXT NOT NULL, event TEXT NOT NULL)");
    w.exec("CREATE OR REPLACE FUNCTION " + insert_once_ +
           "(p_id TEXT, p_principal TEXT, p_key TEXT, p_amount BIGINT, p_currency TEXT, "
           "p_event TEXT) RETURNS TABLE (paid_id TEXT, paid_amount BIGINT, paid_currency TEXT) "
           "LANGUAGE plpgsql AS $fn$ BEGIN "
           "PERFORM pg_advisory_xact_lock(hashtextextended(p_principal || ':' || p_key, 0)); "
           "RETURN QUERY SELECT p.id, p.amount, p.currency FROM " +
           payments_ +
           " p WHERE p.principal = p_principal AND p.idempotency_key = p_key LIMIT 1; "
           "IF FOUND THEN RETURN; END IF; "
           "INSERT INTO " +
           payments_ +
           " VALUES (p_id, p_principal, p_key, p_amount, p_currency); "
           "INSERT INTO " +
           outbox_ +
           " VALUES (p_id, p_event); "
           "RETURN QUERY SELECT p_id, p_amount, p_currency; "
           "END $fn$");
    w.commit();
  }

  std::string payments_;
  std::string outbox_;
  std::string insert_once_;
  idem::postgres::AsyncConnection connection_;
};

}  // namespace payments_async
