#pragma once
// StreamConsumer: a Redis Streams consumer-group reader that turns at-least-once delivery into
// exactly-once effects through an idempotency guard (docs/consumers.md). Header-only, on
// idem::redis::Client (link idem::redis).

#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/context.hpp"
#include "idem/error.hpp"
#include "idem/key.hpp"
#include "idem/redis/client.hpp"
#include "idem/result.hpp"

namespace idem::redis {

/// One stream entry: its id and its field-value pairs.
struct StreamMessage {
  std::string id;
  std::vector<std::pair<std::string, std::string>> fields;

  /// The value of `name`, or empty when the entry has no such field.
  std::string_view field(std::string_view name) const noexcept {
    for (const auto& [f, v] : fields) {
      if (f == name) return v;
    }
    return {};
  }
  /// Every field and value, length-prefixed: what the guard fingerprints.
  std::string payload() const {
    std::string out;
    for (const auto& [f, v] : fields) {
      out += std::to_string(f.size());
      out += ':';
      out += f;
      out += std::to_string(v.size());
      out += ':';
      out += v;
    }
    return out;
  }
};

struct StreamConsumerOptions {
  std::string stream;    // the stream's key
  std::string group;     // the consumer group
  std::string consumer;  // this consumer's name: keep it across restarts of the same worker
  /// Messages per read.
  std::size_t count = 100;
  /// How long a read of new messages blocks when there are none (below the client's
  /// command_timeout).
  std::chrono::milliseconds block{100};
  /// A message delivered to another consumer and not acknowledged for this long is taken over
  /// (XAUTOCLAIM): that consumer is taken for dead.
  std::chrono::milliseconds reclaim_idle{30'000};
};

/// What one process() call did.
struct PageReport {
  std::size_t read = 0;      // messages in the page
  std::size_t acked = 0;     // acknowledged: effect committed (or replayed), or refused for good
  std::size_t pending = 0;   // left unacknowledged for a later delivery (retryable failures)
  std::size_t rejected = 0;  // acknowledged without an effect: payload_mismatch, key_invalid...
};

/// Reads a stream through a consumer group and runs each message through a guard, keyed by the
/// message id (principal: the stream), acknowledging (XACK) a message only after the guard
/// settled it. With a store whose transaction the handler writes in (SqliteStore or
/// PostgresStore, SqlMode::transactional), the message's effects and its record commit together:
/// a crash before the commit leaves nothing and the message is delivered again; a crash after it
/// and before the XACK delivers it again, and the guard replays instead of running it.
///
/// Each next() returns, in this order: this consumer's own delivered and unacknowledged
/// messages (after a restart under the same name), messages other consumers left idle for
/// reclaim_idle (XAUTOCLAIM), then new ones (XREADGROUP >). Not thread-safe: one per thread.
/// One Redis server (the reads name the stream after other arguments, which Cluster routing by
/// first argument does not follow).
class StreamConsumer {
 public:
  StreamConsumer(std::shared_ptr<Client> client, StreamConsumerOptions options)
      : client_(std::move(client)), options_(std::move(options)) {}

  /// XGROUP CREATE stream group 0 MKSTREAM; a group that exists already is fine.
  Status create_group() {
    Result<Reply> r =
        client_->command({"XGROUP", "CREATE", options_.stream, options_.group, "0", "MKSTREAM"});
    if (!r) return r.failure();
    if (r->type == Reply::Type::error && r->str.rfind("BUSYGROUP", 0) != 0) {
      return Status(errc::store_unavailable, "redis XGROUP CREATE: " + r->str);
    }
    return {};
  }

  /// The next page of messages (maybe empty); store_unavailable while Redis is unreachable.
  Result<std::vector<StreamMessage>> next() {
    const std::string count = std::to_string(options_.count);
    if (!own_pending_read_) {
      Result<std::vector<StreamMessage>> own = read_group("0", count, /*block=*/false);
      if (!own) return own;
      if (!own->empty()) return own;
      own_pending_read_ = true;
    }
    const std::string idle = std::to_string(options_.reclaim_idle.count());
    Result<Reply> claimed =
        client_->command({"XAUTOCLAIM", options_.stream, options_.group, options_.consumer, idle,
                          reclaim_cursor_, "COUNT", count});
    if (!claimed) return claimed.failure();
    if (claimed->type == Reply::Type::error) {
      return make_failure(errc::store_unavailable, "redis XAUTOCLAIM: " + claimed->str);
    }
    if (claimed->type == Reply::Type::array && claimed->elements.size() >= 2) {
      reclaim_cursor_ = claimed->elements[0].str.empty() ? "0-0" : claimed->elements[0].str;
      std::vector<StreamMessage> taken = entries(claimed->elements[1]);
      if (!taken.empty()) return taken;
    }
    return read_group(">", count, /*block=*/true);
  }

  /// XACK of `ids`.
  Status ack(std::span<const std::string> ids) {
    if (ids.empty()) return {};
    std::vector<std::string_view> argv{"XACK", options_.stream, options_.group};
    for (const std::string& id : ids) argv.push_back(id);
    Result<Reply> r = client_->command(argv);
    if (!r) return r.failure();
    if (r->type == Reply::Type::error) {
      return Status(errc::store_unavailable, "redis XACK: " + r->str);
    }
    return {};
  }

  /// Reads a page (next()) and runs each message through `guard`: `fn(const StreamMessage&,
  /// idem::Context&)` returns the message's result (any type the guard can store). Acknowledges
  /// the messages the guard settled: a fresh result it recorded, a replay, or a refusal no retry
  /// can change (payload_mismatch, key_invalid, a remembered handler_failed or
  /// result_too_large), counted as rejected. The others stay
  /// pending and come back on a later next() (this consumer's, or another's by XAUTOCLAIM): a
  /// handler that threw, a commit that failed, a key another consumer holds, a store that is
  /// down.
  template <class Guard, class Fn>
  Result<PageReport> process(Guard& guard, Fn&& fn) {
    Result<std::vector<StreamMessage>> page = next();
    if (!page) return page.failure();
    PageReport report;
    report.read = page->size();
    std::vector<std::string> settled;
    for (const StreamMessage& m : page.value()) {
      std::error_code error;
      bool ok = false;
      try {
        auto out = guard.execute(Key{m.id, options_.stream}, m.payload(),
                                 [&](Context& ctx) { return fn(m, ctx); });
        ok = out.has_value() && (out.replayed() || out.recorded());
        error = out.error();
      } catch (...) {
        // The handler threw: the guard released the key; the message is delivered again.
      }
      if (ok) {
        settled.push_back(m.id);
      } else if (error && !is_retryable(error)) {
        settled.push_back(m.id);
        ++report.rejected;
      } else {
        ++report.pending;
      }
    }
    if (Status acked = ack(settled); !acked) return acked.failure();
    report.acked = settled.size();
    // Left pending: look at this consumer's own pending messages again next time.
    if (report.pending > 0) own_pending_read_ = false;
    return report;
  }

  const StreamConsumerOptions& options() const noexcept { return options_; }

 private:
  Result<std::vector<StreamMessage>> read_group(std::string_view from, const std::string& count,
                                                bool block) {
    const std::string block_ms = std::to_string(options_.block.count());
    std::vector<std::string_view> argv{"XREADGROUP",      "GROUP", options_.group,
                                       options_.consumer, "COUNT", count};
    if (block) {
      argv.emplace_back("BLOCK");
      argv.emplace_back(block_ms);
    }
    argv.emplace_back("STREAMS");
    argv.emplace_back(options_.stream);
    argv.emplace_back(from);
    Result<Reply> r = client_->command(argv);
    if (!r) return r.failure();
    if (r->type == Reply::Type::error) {
      return make_failure(errc::store_unavailable, "redis XREADGROUP: " + r->str);
    }
    std::vector<StreamMessage> out;
    if (r->type != Reply::Type::array) return out;  // nil: nothing new within `block`
    for (const Reply& stream : r->elements) {
      if (stream.type == Reply::Type::array && stream.elements.size() == 2) {
        std::vector<StreamMessage> got = entries(stream.elements[1]);
        out.insert(out.end(), std::make_move_iterator(got.begin()),
                   std::make_move_iterator(got.end()));
      }
    }
    return out;
  }

  // [[id, [field, value, ...]], ...]; an entry deleted since its delivery (nil fields) is
  // acknowledged and skipped.
  std::vector<StreamMessage> entries(const Reply& list) {
    std::vector<StreamMessage> out;
    std::vector<std::string> gone;
    if (list.type != Reply::Type::array) return out;
    for (const Reply& e : list.elements) {
      if (e.type != Reply::Type::array || e.elements.size() != 2) continue;
      if (e.elements[1].type != Reply::Type::array) {
        gone.push_back(e.elements[0].str);
        continue;
      }
      StreamMessage m{e.elements[0].str, {}};
      const auto& kv = e.elements[1].elements;
      for (std::size_t i = 0; i + 1 < kv.size(); i += 2)
        m.fields.emplace_back(kv[i].str, kv[i + 1].str);
      out.push_back(std::move(m));
    }
    (void)ack(gone);
    return out;
  }

  std::shared_ptr<Client> client_;
  StreamConsumerOptions options_;
  bool own_pending_read_ = false;
  std::string reclaim_cursor_ = "0-0";
};

}  // namespace idem::redis
