
#include "sql/sql_admin.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <limits>
#include <mutex>
#include <utility>

namespace idem::sql {

namespace {

constexpr const char* kColumns =
    "key, state, fp_hi, fp_lo, fence, took_over, lease_until - {now}, expires_at - {now}, "
    "expires_at, COALESCE(length(result), 0), CASE WHEN state = {failed} THEN result END";
constexpr unsigned kBlobColumns = 1u << 0 | 1u << 10;

std::int64_t number(const std::optional<std::string>& cell) {
  std::int64_t v = 0;
  if (!cell) return 0;
  const std::string& s = *cell;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{}) throw std::runtime_error("idem: not an integer: " + s);
  (void)end;
  return v;
}

// admin::State numbers the states as they are stored.
static_assert(int(admin::State::in_progress) == int(State::held) &&
              int(admin::State::completed) == int(State::completed) &&
              int(admin::State::failed) == int(State::failed) &&
              int(admin::State::released) == int(State::released));

std::optional<admin::State> state_of(std::int64_t stored) {
  if (stored < 0 || stored > int(State::released)) return std::nullopt;
  return static_cast<admin::State>(stored);
}

Result<admin::RecordInfo> to_info(const Row& row, std::string_view scope) {
  admin::RecordInfo info;
  const std::string key = row[0].value_or("");
  if (!admin::detail::split_key(key, scope, info.principal, info.id)) info.id = key;
  const std::optional<admin::State> state = state_of(number(row[1]));
  if (!state) {
    return make_failure(
        errc::record_corrupt,
        fmt::format("record has state {}, which idem never writes", number(row[1])));
  }
  info.state = *state;
  info.fingerprint = {std::bit_cast<std::uint64_t>(number(row[2])),
                      std::bit_cast<std::uint64_t>(number(row[3]))};
  info.fence = static_cast<Fence>(number(row[4]));
  info.took_over = number(row[5]) != 0;
  if (info.state == admin::State::in_progress) {
    info.lease_left = std::chrono::milliseconds{std::max<std::int64_t>(number(row[6]), 0)};
  }
  info.expires_in = std::chrono::milliseconds{number(row[7])};
  info.expires_at_ms = number(row[8]);
  if (info.state == admin::State::completed) {
    info.result_size = static_cast<std::size_t>(number(row[9]));
  }
  if (info.state == admin::State::failed)
    info.failure = admin::detail::failure_text(row[10].value_or(""));
  return info;
}

Param bytes(std::string_view b) { return Param{.kind = Param::bytes, .string = b}; }
Param integer(std::int64_t n) { return Param{.kind = Param::integer, .number = n}; }

}  // namespace

SqlAdmin::SqlAdmin(const Dialect& dialect, const std::string& prefix, const char* row_lock,
                   std::unique_ptr<AdminConnection> connection)
    : dialect_(dialect), text_(dialect, prefix), db_(std::move(connection)) {
  auto p = [&](int i) { return fmt::format("{}{}", dialect.param, i); };
  const std::string columns = fmt::format(fmt::runtime(kColumns), fmt::arg("now", dialect.now_ms),
                                          fmt::arg("failed", static_cast<int>(State::failed)));
  select_one_ =
      fmt::format("SELECT {} FROM {} WHERE key = {}{}", columns, text_.records, p(1), row_lock);
  // Oldest first by expiry, then key: (expires_at, key) is the cursor.
  select_page_ = fmt::format(
      "SELECT {0} FROM {1} WHERE state = {2} AND substr(key, 1, {3}) = {4} "
      "AND (expires_at > {5} OR (expires_at = {5} AND key > {6})) "
      "ORDER BY expires_at, key LIMIT {7}",
      columns, text_.records, p(1), p(2), p(3), p(4), p(5), p(6));
  mark_released_ = fmt::format("UPDATE {} SET state = {}, result = NULL WHERE key = {}",
                               text_.records, static_cast<int>(State::released), p(1));
  drop_steps_ = fmt::format("DELETE FROM {} WHERE key = {}", text_.steps, p(1));
  const std::string counts = fmt::format(
      "SELECT state, count(*), sum(CASE WHEN expires_at <= {} THEN 1 ELSE 0 END) FROM {}",
      dialect.now_ms, text_.records);
  count_states_ =
      fmt::format("{} WHERE substr(key, 1, {}) = {} GROUP BY state", counts, p(1), p(2));
  count_all_states_ = counts + " GROUP BY state";
}

std::string_view SqlAdmin::store_name() const noexcept { return dialect_.name; }

template <class T, class Step>
Result<T> SqlAdmin::run(Step&& step, bool needs_schema) {
  std::lock_guard lock(mutex_);
  try {
    if (needs_schema && !schema_checked_) {
      const admin::SchemaReport found = report();
      if (!found.complete) return make_failure(errc::store_unavailable, found.note);
      schema_checked_ = true;
    }
    return step();
  } catch (...) {
    db_->rollback();
    return db_->failure(std::current_exception());
  }
}

admin::SchemaReport SqlAdmin::report() {
  admin::SchemaReport out;
  out.expected_version = text_.version;
  out.missing = db_->missing(text_);
  const bool has_schema_table =
      std::find(out.missing.begin(), out.missing.end(), text_.schema) == out.missing.end();
  if (has_schema_table) {
    const std::vector<Row> rows =
        db_->query("SELECT max(version), max(fence_floor) FROM " + text_.schema, {}, 0);
    if (!rows.empty()) {
      out.found_version = static_cast<int>(number(rows[0][0]));
      out.fence_floor = number(rows[0][1]);
    }
  }
  out.complete = out.missing.empty() && out.found_version == out.expected_version;
  if (!out.missing.empty()) {
    std::string names;
    for (const std::string& m : out.missing) names += (names.empty() ? "" : ", ") + m;
    out.note = fmt::format("{}: the schema is missing {} (create it: idem schema migrate)",
                           dialect_.name, names);
  } else if (out.found_version == 0) {
    out.note = fmt::format("{}: table {} holds no version (idem schema migrate writes it)",
                           dialect_.name, text_.schema);
  } else if (out.found_version < out.expected_version) {
    out.note = fmt::format(
        "{}: schema version {} is older than this library's {} "
        "(upgrade it: idem schema migrate)",
        dialect_.name, out.found_version, out.expected_version);
  } else if (out.found_version > out.expected_version) {
    out.note =
        fmt::format("{}: schema version {} is newer than this library's {}: use a newer idem",
                    dialect_.name, out.found_version, out.expected_version);
  } else {
    out.note = fmt::format("{}: schema version {} is current", dialect_.name, out.found_version);
  }
  return out;
}

Result<std::optional<admin::RecordInfo>> SqlAdmin::inspect(std::string_view scope, const Key& key) {
  if (key.id.empty()) return make_failure(errc::key_invalid, "the key id is empty");
  const std::string k = admin::detail::effective_key(scope, key);
  return run<std::optional<admin::RecordInfo>>([&]() -> Result<std::optional<admin::RecordInfo>> {
    const std::array params{bytes(k)};
    const std::string sql = select_one_.substr(0, select_one_.find(" FOR UPDATE"));
    const std::vector<Row> rows = db_->query(sql, params, kBlobColumns);
    if (rows.empty()) return std::optional<admin::RecordInfo>{};
    Result<admin::RecordInfo> info = to_info(rows[0], scope);
    if (!info) return info.failure();
    return std::optional<admin::RecordInfo>(std::move(info).value());
  });
}

Result<admin::Page> SqlAdmin::list(std::string_view scope, const admin::ListRequest& request) {
  std::int64_t after_expiry = std::numeric_limits<std::int64_t>::min();
  std::string after_key;
  if (!request.cursor.empty() &&
      !admin::detail::read_cursor(request.cursor, after_expiry, after_key)) {
    return make_failure(errc::key_invalid, "the cursor is not one a listing returned");
  }
  const std::string prefix = admin::detail::scope_prefix(scope);
  const std::size_t limit = std::max<std::size_t>(request.limit, 1);
  return run<admin::Page>([&]() -> Result<admin::Page> {
    const std::array params{integer(static_cast<int>(request.state)),
                            integer(static_cast<std::int64_t>(prefix.size())),
                            bytes(prefix),
                            integer(after_expiry),
                            bytes(after_key),
                            integer(static_cast<std::int64_t>(limit))};
    const std::vector<Row> rows = db_->query(select_page_, params, kBlobColumns);
    admin::Page page;
    page.records.reserve(rows.size());
    for (const Row& row : rows) {
      Result<admin::RecordInfo> info = to_info(row, scope);
      if (!info) return info.failure();
      page.records.push_back(std::move(info).value());
    }
    if (rows.size() == limit) {
      page.next_cursor =
          admin::detail::make_cursor(number(rows.back()[8]), rows.back()[0].value_or(""));
    }
    return page;
  });
}

Result<admin::Change> SqlAdmin::mark_released(std::string_view scope, const Key& key,
                                              bool only_held, Fence only_fence) {
  if (key.id.empty()) return make_failure(errc::key_invalid, "the key id is empty");
  const std::string k = admin::detail::effective_key(scope, key);
  return run<admin::Change>([&]() -> Result<admin::Change> {
    const std::array params{bytes(k)};
    admin::Change change;
    db_->begin();
    const std::vector<Row> rows = db_->query(select_one_, params, kBlobColumns);
    if (rows.empty()) {
      db_->rollback();
      return change;
    }
    Result<admin::RecordInfo> info = to_info(rows[0], scope);
    if (!info) {
      db_->rollback();
      return info.failure();
    }
    change.before = info.value();
    const bool held = info->state == admin::State::in_progress;
    const bool matches = only_fence == 0 || info->fence == only_fence;
    if ((only_held && !held) || !matches) {
      db_->rollback();
      return change;
    }
    change.changed = db_->exec(mark_released_, params) == 1;
    // A release keeps the run's steps (the run goes on, as after an abort); a forget drops them.
    if (!only_held) db_->exec(drop_steps_, params);
    db_->commit();
    return change;
  });
}

Result<admin::Change> SqlAdmin::release(std::string_view scope, const Key& key, Fence only_fence) {
  return mark_released(scope, key, /*only_held=*/true, only_fence);
}

Result<admin::Change> SqlAdmin::forget(std::string_view scope, const Key& key) {
  return mark_released(scope, key, /*only_held=*/false, 0);
}

Result<std::size_t> SqlAdmin::purge_expired(std::size_t max_records) {
  return run<std::size_t>([&]() -> Result<std::size_t> {
    const std::array limit{
        integer(static_cast<std::int64_t>(std::max<std::size_t>(max_records, 1)))};
    db_->begin();
    const std::vector<Row> fences = db_->query(text_.purge, limit, 0);
    std::int64_t floor = 0;
    for (const Row& row : fences) floor = std::max(floor, number(row[0]));
    if (!fences.empty()) {
      const std::array raise{integer(floor)};
      db_->exec(text_.raise_floor, raise);
    }
    db_->commit();
    return fences.size();
  });
}

std::string SqlAdmin::schema_text() const {
  std::string out;
  for (const std::string& ddl : text_.schema_ddl) out += ddl + ";\n";
  return out;
}

Result<admin::SchemaReport> SqlAdmin::check_schema() {
  return run<admin::SchemaReport>([&]() -> Result<admin::SchemaReport> { return report(); },
                                  /*needs_schema=*/false);
}

Result<admin::SchemaReport> SqlAdmin::migrate_schema() {
  return run<admin::SchemaReport>(
      [&]() -> Result<admin::SchemaReport> {
        try {
          const admin::SchemaReport before = report();
          if (before.found_version > before.expected_version) {
            return make_failure(errc::store_unavailable, before.note);
          }
        } catch (...) {
          db_->rollback();  // no database yet (a new SQLite file): created below
        }
        // The stores' own creation also raises an earlier version, in the same transaction.
        db_->create_schema();
        schema_checked_ = false;
        return report();
      },
      /*needs_schema=*/false);
}

Result<admin::Stats> SqlAdmin::stats(std::string_view scope, bool all_scopes) {
  const std::string prefix = admin::detail::scope_prefix(scope);
  return run<admin::Stats>([&]() -> Result<admin::Stats> {
    const std::array params{integer(static_cast<std::int64_t>(prefix.size())), bytes(prefix)};
    const std::vector<Row> rows =
        all_scopes ? db_->query(count_all_states_, {}, 0) : db_->query(count_states_, params, 0);
    admin::Stats out;
    out.store = dialect_.name;
    for (const Row& row : rows) {
      const auto n = static_cast<std::uint64_t>(number(row[1]));
      out.expired += static_cast<std::uint64_t>(number(row[2]));
      admin::detail::count(out, state_of(number(row[0])).value_or(admin::State::released), n);
    }
    return out;
  });
}

}  // namespace idem::sql
