#pragma once
// The bare twin of the client's pipelining: a few connections shared by all threads, each
// caller appending its command to a connection's output and awaiting its reply in the order
// the commands went out. As in the client there is no background thread: one caller at a time
// leads a connection (writes what is queued, reads and hands out replies until its own is in,
// then passes the lead to the oldest call still waiting). It uses no idem code: hiredis formats
// and parses, and the bytes go through a plain socket or an OpenSSL session (bare_connection.hpp).
// No deadlines and no failure handling: a failure aborts the benchmark.

#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bare_connection.hpp"

namespace idem_bench {

class BarePipeline {
 public:
  /// `connections` shared connections to host:port, over TLS with `tls.enabled`.
  BarePipeline(std::size_t connections, const std::string& host, int port,
               const idem::redis::TlsOptions& tls) {
    for (std::size_t i = 0; i < std::max<std::size_t>(connections, 1); ++i) {
      lanes_.push_back(std::make_unique<Lane>(host, port, tls));
    }
  }

  /// Sends one command among the other threads' and returns its reply (the caller frees it).
  redisReply* command(int argc, const char** argv, const std::size_t* lens) {
    // Each thread keeps to one connection, picked round robin, as the client's callers spread.
    thread_local const std::size_t mine = next_.fetch_add(1, std::memory_order_relaxed);
    return lanes_[mine % lanes_.size()]->command(argc, argv, lens);
  }

 private:
  struct Call {
    redisReply* reply = nullptr;
    bool done = false;
    bool lead = false;  // handed the lead while waiting
    std::condition_variable wake;
  };

  class Lane {
   public:
    Lane(const std::string& host, int port, const idem::redis::TlsOptions& tls)
        : connection_(host, port, tls) {}

    redisReply* command(int argc, const char** argv, const std::size_t* lens) {
      char* formatted = nullptr;
      const int size = redisFormatCommandArgv(&formatted, argc, argv, lens);
      if (size < 0) std::abort();
      Call call;
      std::unique_lock lock(mutex_);
      out_.append(formatted, static_cast<std::size_t>(size));
      std::free(formatted);
      fifo_.push_back(&call);
      if (leading_) {
        call.wake.wait(lock, [&] { return call.done || call.lead; });
        if (call.done) return call.reply;
      }
      leading_ = true;
      lead(lock, call);
      return call.reply;
    }

   private:
    // Writes what is queued and reads replies until `mine` has its own; the lane's mutex is
    // held on entry and on return, released around the I/O.
    void lead(std::unique_lock<std::mutex>& lock, Call& mine) {
      std::string batch;
      while (!mine.done) {
        batch.clear();
        batch.swap(out_);
        lock.unlock();
        if (!batch.empty()) connection_.write(batch);
        std::vector<redisReply*> replies = connection_.read_replies();
        lock.lock();
        for (redisReply* reply : replies) {
          Call* call = fifo_.front();
          fifo_.pop_front();
          call->reply = reply;
          call->done = true;
          if (call != &mine) call->wake.notify_one();
        }
      }
      leading_ = false;
      if (!fifo_.empty()) {
        leading_ = true;
        fifo_.front()->lead = true;
        fifo_.front()->wake.notify_one();
      }
    }

    BareConnection connection_;
    std::mutex mutex_;
    std::string out_;         // commands not written yet
    std::deque<Call*> fifo_;  // calls awaiting replies, in the order of their commands
    bool leading_ = false;    // a caller leads the connection
  };

  std::vector<std::unique_ptr<Lane>> lanes_;
  std::atomic<std::size_t> next_{0};
};

}  // namespace idem_bench
