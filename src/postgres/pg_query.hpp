#pragma once
// A PostgreSQL statement and its answer on libpq, as both connection cores send and read them:
// the pipelined one (pg_pipeline.hpp) and the blocking one (pg_link.hpp).

#include <libpq-fe.h>

#include <array>
#include <charconv>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/result.hpp"

namespace idem::postgres::detail {

/// Up to kMax parameters held without allocating: views of bytes the caller keeps alive until
/// the reply, and numbers as text.
class Params {
 public:
  static constexpr int kMax = 6;

  void bytes(std::string_view b) { add(b.data(), static_cast<int>(b.size()), 1); }
  void number(std::int64_t v) {
    char* text = numbers_[static_cast<std::size_t>(count_)].data();
    char* end = std::to_chars(text, text + kNumberSize - 1, v).ptr;
    *end = '\0';  // libpq reads text parameters up to their NUL
    add(nullptr, static_cast<int>(end - text), 0);
  }
  int size() const noexcept { return count_; }
  /// The value pointers and lengths for libpq; valid while this object is neither moved nor gone.
  void point(std::array<const char*, kMax>& values) const noexcept {
    for (std::size_t i = 0; i < static_cast<std::size_t>(count_); ++i) {
      values[i] = views_[i] != nullptr ? views_[i] : numbers_[i].data();
    }
  }
  const int* lengths() const noexcept { return lengths_.data(); }
  const int* formats() const noexcept { return formats_.data(); }

 private:
  static constexpr std::size_t kNumberSize = 24;  // an int64's digits, its sign and a NUL

  void add(const char* data, int length, int format) {
    const auto i = static_cast<std::size_t>(count_++);
    views_[i] = data;
    lengths_[i] = length;
    formats_[i] = format;
  }

  int count_ = 0;
  std::array<const char*, kMax> views_{};  // null: the number in numbers_
  std::array<int, kMax> lengths_{};
  std::array<int, kMax> formats_{};
  std::array<std::array<char, kNumberSize>, kMax> numbers_;
};

/// One statement: a prepared one by name, a text, or the preparation of `sql` under `name`; or a
/// script, statements without parameters in one message (not in pipeline mode).
struct Query {
  enum Kind : std::uint8_t { prepared, text, prepare, script } kind = prepared;
  const char* name = "";  // prepared and prepare: a name that outlives the query (a literal)
  std::string sql{};      // text, prepare and script
  std::vector<std::string> values{};  // text parameters handed over...
  Params params{};                    // ...or, with `values` empty, held in place
  bool commit = false;                // a reply lost after it went out: outcome_unknown
};

/// A statement's answer: its result, read in place, and the rows it changed, or why it failed.
struct Reply {
  using Row = std::vector<std::optional<std::string>>;
  struct ClearResult {
    void operator()(PGresult* r) const noexcept { PQclear(r); }
  };

  Failure failure;  // code set: the statement did not answer (or answered an error)
  std::string sqlstate;
  std::unique_ptr<PGresult, ClearResult> result;  // when ok()
  long long affected = 0;

  bool ok() const noexcept { return !failure.code; }
  int row_count() const noexcept { return result ? PQntuples(result.get()) : 0; }
  int column_count() const noexcept { return result ? PQnfields(result.get()) : 0; }
  bool null(int row, int col) const noexcept { return PQgetisnull(result.get(), row, col) != 0; }
  /// A cell as the server sent it (bytea still escaped); empty for NULL.
  std::string_view text(int row, int col) const noexcept {
    return {PQgetvalue(result.get(), row, col),
            static_cast<std::size_t>(PQgetlength(result.get(), row, col))};
  }
  /// A bytea cell's bytes into `out`; false when it is NULL or cannot be decoded.
  bool bytes(int row, int col, std::string& out) const;
  /// A cell as a 64-bit integer, in one pass; false for NULL, out of the result, or not one.
  bool integer(int row, int col, std::int64_t& out) const noexcept;
  /// A row as text cells, bytea decoded to its bytes, nullopt for NULL.
  Row row(int i) const;
};

/// Sends `query` on `conn` (PQsendQueryPrepared, PQsendQueryParams or PQsendPrepare); libpq's 1
/// when it went into the output buffer, else 0.
int send_query(PGconn* conn, const Query& query);

/// The first line of a libpq message (null: empty).
std::string first_line(const char* what);

}  // namespace idem::postgres::detail
