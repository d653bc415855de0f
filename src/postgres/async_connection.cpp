// AsyncConnection: PgPipeline (pg_pipeline.hpp) for an application's own text statements.

#include "idem/postgres/async_connection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "postgres/pg_options.hpp"
#include "postgres/pg_pipeline.hpp"

namespace idem::postgres {

namespace {

ConnectionOptions checked(ConnectionOptions options) {
  detail::check(options, "postgres::AsyncConnection", "", /*tables=*/false);
  return options;
}

}  // namespace

AsyncConnection::AsyncConnection(const boost::asio::any_io_executor& executor,
                                 ConnectionOptions options) {
  const ConnectionOptions c = checked(std::move(options));
  const std::string set_timeout =
      fmt::format("SET statement_timeout = {}", c.statement_timeout.count());
  pipeline_ = std::make_shared<detail::PgPipeline>(
      executor, detail::pipeline_settings(c, "server"), [set_timeout](detail::PgPipeline& p) {
        p.send_internal({.kind = detail::Query::text, .sql = set_timeout}, [](detail::Reply&) {});
        p.open();
      });
}

AsyncConnection::~AsyncConnection() {
  try {
    pipeline_->close();
  } catch (...) {  // out of memory for the message: the connection closes with the pipeline
  }
}

boost::asio::awaitable<Result<QueryRows>> AsyncConnection::query(std::string sql,
                                                                 std::vector<std::string> params) {
  // A named query: GCC 12 destroys a braced temporary in a co_await expression twice.
  detail::Query q{.kind = detail::Query::text, .sql = std::move(sql), .values = std::move(params)};
  const std::shared_ptr<detail::PgPipeline> pipeline = pipeline_;
  detail::Reply r = co_await pipeline->run(std::move(q));
  if (!r.ok()) co_return std::move(r.failure);
  QueryRows answer;
  answer.affected = static_cast<std::uint64_t>(std::max(r.affected, 0LL));
  answer.rows.reserve(static_cast<std::size_t>(r.row_count()));
  for (int i = 0; i < r.row_count(); ++i) answer.rows.push_back(r.row(i));
  co_return answer;
}

}  // namespace idem::postgres
