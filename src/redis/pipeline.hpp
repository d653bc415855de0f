#pragma once
// Automatic pipelining: concurrent callers share a few connections to one server, and their
// commands travel together. Internal to idem_redis.
//
// A call appends its command to a lane's output buffer and its slot to the lane's FIFO of calls
// awaiting a reply. There is no background thread: the callers do the I/O themselves.
// - Writing: the first caller that finds no write in progress becomes the writer and sends
//   everything queued in one send(); commands queued meanwhile go out in its next send().
// - Reading: one caller at a time holds the read turn. It reads replies and hands each to the
//   call at the head of the FIFO (Redis answers one connection's commands in order), until its
//   own reply has come; then it passes the turn to the oldest call still waiting.
// - Waiting: a caller whose reply another reads first yields the CPU a few times (sched_yield)
//   before it sleeps, so that on busy cores it finds its reply in its turn instead of waiting
//   for the scheduler once more after the reader's wakeup.
// A single caller therefore writes and reads its own command like a plain blocking client, and
// under load one send() and one read() serve many callers.
//
// Failure: command_timeout bounds every wait. When the oldest call's reply is late, a read or
// write fails, or the reply stream cannot be parsed, the connection is broken: shut down, and
// every call in its FIFO fails with errc::store_unavailable (none waits on, none can receive
// another's reply), or errc::outcome_unknown for a call that asked (report_in_doubt) whose
// commands had gone out. The next call opens a new connection.

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
