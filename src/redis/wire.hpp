#pragma once
// One Redis connection's traffic without I/O, the core under both faces (the blocking Node and
// Pipeline, the Asio Link): the commands encoded and not yet written, the FIFO of commands
// awaiting their replies, and the reader that parses what comes back. A face moves the bytes.
// Internal to idem_redis.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "protocol.hpp"

namespace idem::redis {

/// `Entry`: what awaits one command's reply (a caller, a request, nothing).
template <class Entry>
class Wire {
 public:
  /// Encodes `argv`; its reply goes to `entry`.
  void queue(std::span<const std::string_view> argv, Entry entry) {
    append_command(out_, argv);
    expect(std::move(entry));
  }
  /// The encoding buffer, for a command written in parts (append_array_header, append_bulk);
  /// expect() then names its reply's entry.
  std::string& out() noexcept { return out_; }
  void expect(Entry entry) {
    awaiting_.push_back(std::move(entry));
    ++unwritten_;
  }

  bool has_output() const noexcept { return !out_.empty(); }
  /// Moves the encoded bytes into `batch` (emptied first) for a write: from here the server may
  /// run their commands.
  void take_output(std::string& batch) {
    batch.clear();
    batch.swap(out_);
    unwritten_ = 0;
  }
  /// Whether the i-th awaiting command was handed to a write (a reply lost after that leaves
  /// its outcome in doubt).
  bool written(std::size_t i) const noexcept { return i + unwritten_ < awaiting_.size(); }

  /// Bytes read. false: the stream is not RESP (error() says why).
  bool feed(const char* bytes, std::size_t n) { return reader_.feed(bytes, n); }

  enum class Got : std::uint8_t { reply, more, broken, stray };
  /// The next whole reply with the entry that awaited it; `stray`: a reply for no command (the
  /// stream is out of step); `broken`: not RESP.
  Got next(ReplyPtr& reply, Entry& entry) {
    switch (parse(reply)) {
      case ReplyReader::Got::more:
        return Got::more;
      case ReplyReader::Got::broken:
        return Got::broken;
      case ReplyReader::Got::reply:
        break;
    }
    return match(entry) ? Got::reply : Got::stray;
  }
  /// next() in two steps, for a face that parses and matches under different locks: the next
  /// whole reply, then the entry that awaited it (false: none did).
  ReplyReader::Got parse(ReplyPtr& reply) { return reader_.next(reply); }
  bool match(Entry& entry) {
    if (awaiting_.empty()) return false;
    entry = std::move(awaiting_.front());
    awaiting_.pop_front();
    return true;
  }
  std::string error() const { return reader_.error(); }

  std::size_t awaiting() const noexcept { return awaiting_.size(); }
  /// Commands handed to a write whose replies are still due.
  std::size_t in_flight() const noexcept {
    return awaiting_.size() - std::min(unwritten_, awaiting_.size());
  }
  const Entry& oldest() const { return awaiting_.front(); }

  /// Ends the connection's traffic: `fail(entry, written)` for each command awaiting its reply,
  /// oldest first; the unwritten bytes go.
  template <class Fail>
  void fail_all(Fail&& fail) {
    std::deque<Entry> awaiting = std::exchange(awaiting_, {});
    const std::size_t written = awaiting.size() - std::min(unwritten_, awaiting.size());
    out_.clear();
    unwritten_ = 0;
    for (std::size_t i = 0; i < awaiting.size(); ++i) fail(awaiting[i], i < written);
  }

 private:
  ReplyReader reader_;
  std::string out_;
  std::deque<Entry> awaiting_;
  std::size_t unwritten_ = 0;  // the last entries of `awaiting_` whose bytes are still in `out_`
};

}  // namespace idem::redis
