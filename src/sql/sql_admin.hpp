#pragma once
// The admin operations on the SQL record table, over a connection each dialect implements.

#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "idem/admin.hpp"
#include "sql/engine.hpp"
#include "sql/statements.hpp"

namespace idem::sql {

/// One connection an admin owns. Methods throw the database library's exceptions; failure()
/// maps the one in flight.
class AdminConnection {
 public:
  virtual ~AdminConnection() = default;
  /// Every row; integers as decimal text, columns whose bit is set in `blob_columns` as bytes.
  virtual std::vector<Row> query(const std::string& sql, std::span<const Param> params,
                                 unsigned blob_columns) = 0;
  virtual std::int64_t exec(const std::string& sql, std::span<const Param> params) = 0;
  /// A write transaction (SQLite: BEGIN IMMEDIATE).
  virtual void begin() = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;
  /// Which of the schema's objects (tables, indexes, triggers, functions, sequences) are absent.
  virtual std::vector<std::string> missing(const Statements& text) = 0;
  /// The stores' own schema creation.
  virtual void create_schema() = 0;
  virtual Failure failure(std::exception_ptr error) const noexcept = 0;
};

/// The Admin over one AdminConnection. `row_lock`: what a SELECT ends with to lock the rows it
/// reads in a transaction ("" on SQLite, whose write transaction locks the file).
class SqlAdmin final : public admin::Admin {
 public:
  SqlAdmin(const Dialect& dialect, const std::string& prefix, const char* row_lock,
           std::unique_ptr<AdminConnection> connection);

  std::string_view store_name() const noexcept override;
  Result<std::optional<admin::RecordInfo>> inspect(std::string_view scope, const Key& key) override;
  Result<admin::Page> list(std::string_view scope, const admin::ListRequest& request) override;
  Result<admin::Change> release(std::string_view scope, const Key& key, Fence only_fence) override;
  Result<admin::Change> forget(std::string_view scope, const Key& key) override;
  Result<std::size_t> purge_expired(std::size_t max_records) override;
  std::string schema_text() const override;
  Result<admin::SchemaReport> check_schema() override;
  Result<admin::SchemaReport> migrate_schema() override;
  Result<admin::Stats> stats(std::string_view scope, bool all_scopes) override;

 private:
  // Runs `step` under the mutex (one connection), the schema checked first; maps exceptions.
  template <class T, class Step>
  Result<T> run(Step&& step, bool needs_schema = true);
  admin::SchemaReport report();
  // Release or forget: one transaction that reads (locks) the record and releases it.
  Result<admin::Change> mark_released(std::string_view scope, const Key& key, bool only_held,
                                      Fence only_fence);

  const Dialect& dialect_;
  Statements text_;
  std::unique_ptr<AdminConnection> db_;
  std::mutex mutex_;
  bool schema_checked_ = false;
  std::string select_one_, select_page_, mark_released_, drop_steps_, count_states_,
      count_all_states_;
};

}  // namespace idem::sql
