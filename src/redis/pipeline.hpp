#pragma once
// Automatic pipelining: concurrent callers share a few connections to one server, and their
// commands travel together; the callers do the I/O themselves (one writer, one reader holding
// the read turn at a time). docs/redis.md, "Pipelining", tells the protocol and its failures.
// Internal to idem_redis.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idem/result.hpp"
#include "node.hpp"
#include "socket.hpp"

namespace idem::redis {

/// Opens one connection, authenticated and on its database.
using Connector = std::function<Result<Socket>()>;

class Pipeline {
 public:
  /// `lanes` shared connections (at least 1), opened on first use. `where` names the server in
  /// messages.
  Pipeline(std::size_t lanes, std::chrono::milliseconds command_timeout, std::string where,
           Connector connect);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  /// Most commands in one batch.
  static constexpr std::size_t kMaxBatch = 4;
  using Replies = std::array<ReplyPtr, kMaxBatch>;

  /// Sends `commands` (1 to kMaxBatch) back to back on one shared connection, among other
  /// threads' commands, and returns their replies in order. Nothing comes between them on the
  /// wire (ASKING stays next to its command). Error replies come back as replies; a timeout
  /// (command_timeout, or `deadline` if sooner), an I/O error or an unreachable server is
  /// errc::store_unavailable. `report_in_doubt`: such a failure once the commands were handed to
  /// the socket is errc::outcome_unknown (the server may have run them).
  Result<Replies> run(
      std::span<const std::span<const std::string_view>> commands,
      std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max(),
      bool report_in_doubt = false);

  /// One command (see run).
  Result<ReplyPtr> command(std::span<const std::string_view> argv,
                           std::chrono::steady_clock::time_point deadline =
                               std::chrono::steady_clock::time_point::max());

  /// Connections open now.
  std::size_t open_connections() const;
  /// Connections broken (timeout, I/O error, closed by the server) since construction.
  std::uint64_t dropped_connections() const noexcept {
    return dropped_.load(std::memory_order_relaxed);
  }

 private:
  class Lane;
  std::string where_;
  Connector connect_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::atomic<std::size_t> next_lane_{0};
  std::atomic<std::uint64_t> dropped_{0};
};

}  // namespace idem::redis
