#pragma once
// ThreadedAsyncStore<S>: a blocking idem::Store as an idem::AsyncStore: the calls run one at a
// time on a thread the adapter owns, and each caller resumes on its own executor. Over a
// WakingStore it wakes waiting duplicates too, from a bounded set of wait threads of its own.

#include <atomic>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "idem/asio/async_store.hpp"
#include "idem/asio/detail/wake_op.hpp"
#include "idem/engine/call_timer.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

struct ThreadedStoreOptions {
  /// The longest a call waits behind the calls before it; then it is answered store_unavailable
  /// without running. A call that started is bounded by the store's own timeouts. Positive.
  std::chrono::milliseconds queue_timeout{5000};
  /// Over a WakingStore: the most threads that wait for a holder's end at once (S::await_change
  /// blocks its thread), apart from the store's thread so that waiting duplicates never hold up
  /// claims and commits; started on demand and kept. A duplicate that finds them all busy pauses
  /// for its bound instead (polling). 0: no wait on the store; duplicates poll (default 64).
  std::size_t wait_threads = 64;
};

/// Owns a store S (made from the constructor's arguments) and one thread that runs its calls in
/// arrival order; a call suspends its coroutine until its answer (or S's exception) is posted to
/// the coroutine's executor. S is only called from that thread (and through store()), except
/// S::await_change over a WakingStore, which runs on the wait threads beside it (MemoryStore,
/// SqliteStore and RedisStore allow that; a WakingStore of one's own must too). Destroying the
/// adapter waits for the running call and the running waits (each within its bound); queued
/// calls are answered store_unavailable without running, all before the destructor returns.
template <Store S>
class ThreadedAsyncStore {
 public:
  static constexpr std::string_view kStoreName = detail::store_name_of<S>();  // observers' label

  /// Throws what S's constructor throws; std::invalid_argument for a queue_timeout not positive.
  template <class... Args>
  explicit ThreadedAsyncStore(ThreadedStoreOptions options, Args&&... args)
      : store_(std::forward<Args>(args)...),
        queue_timeout_(options.queue_timeout),
        waits_(store_, options.wait_threads) {
    if (queue_timeout_.count() <= 0) {
      throw std::invalid_argument("idem: ThreadedStoreOptions::queue_timeout must be positive");
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~ThreadedAsyncStore() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    wake_.notify_one();
    thread_.join();
    waits_.close();
  }
  ThreadedAsyncStore(const ThreadedAsyncStore&) = delete;
  ThreadedAsyncStore& operator=(const ThreadedAsyncStore&) = delete;

  boost::asio::awaitable<Result<Claim>> async_claim(const ClaimRequest& request) {
    return submit<Result<Claim>>([&request](S& s) { return s.claim(request); });
  }
  boost::asio::awaitable<Status> async_commit(const Ticket& ticket, const Completion& completion) {
    return submit<Status>([&ticket, &completion](S& s) { return s.commit(ticket, completion); });
  }
  boost::asio::awaitable<Status> async_abort(const Ticket& ticket) {
    return submit<Status>([&ticket](S& s) { return s.abort(ticket); });
  }
  boost::asio::awaitable<Status> async_extend(const Ticket& ticket,
                                              std::chrono::milliseconds lease) {
    return submit<Status>([&ticket, lease](S& s) { return s.extend(ticket, lease); });
  }

  /// Over a WakingStore (idem::AsyncWakingStore): whether duplicates wait on the store
  /// (wait_threads above 0).
  bool wakes() const noexcept requires WakingStore<S> { return waits_.enabled(); }
  /// S::await_change(held, bound) on a wait thread; false at once when every wait thread is busy.
  /// The caller's cancellation ends the wait at once; the thread's wait runs on to its bound.
  boost::asio::awaitable<bool> async_await_change(
      const Ticket& held, std::chrono::milliseconds bound) requires WakingStore<S> {
    return detail::async_wait_with(
        [this, wait = std::make_shared<WaitJob>(std::string(held.key), held.fence, bound)](
            const std::shared_ptr<detail::WaitCompletion>& done) mutable {
          wait->done = done;
          if (!waits_.start(wait)) wait->done->complete(/*waited=*/false);
        });
  }

  /// The blocking store, e.g. for a blocking guard in the same process when S is thread-safe.
  S& store() noexcept { return store_; }

 private:
  using Clock = std::chrono::steady_clock;

  struct Job {
    explicit Job(Clock::time_point by) : deadline(by) {}
    virtual ~Job() = default;
    Job(const Job&) = delete;
    Job& operator=(const Job&) = delete;
    virtual void run(S& store) = 0;            // the call, then its answer
    virtual void refuse(std::string why) = 0;  // store_unavailable, without running
    Clock::time_point deadline;                // of its wait in the queue
  };

  template <class T, class Call, class Handler>
  struct CallJob final : Job {
    CallJob(Clock::time_point by, Call c, Handler h)
        : Job(by),
          call(std::move(c)),
          handler(std::move(h)),
          work(boost::asio::make_work_guard(boost::asio::get_associated_executor(handler))) {}

    void run(S& store) override {
      std::optional<T> out;
      std::exception_ptr thrown;
      try {
        out.emplace(call(store));
      } catch (...) {
        thrown = std::current_exception();  // the caller rethrows it; `out` is not looked at
        out.emplace(make_failure(errc::store_unavailable));
      }
      answer(std::move(thrown), std::move(*out));
    }
    void refuse(std::string why) override {
      answer(nullptr, T(make_failure(errc::store_unavailable, std::move(why))));
    }
    // Resumes the caller on its own executor. Once resumed, the caller may destroy its
    // io_context, so every touch of it from this thread (the post's wake-up, the work guard's
    // end) comes first: the answer waits for `posted`, which is set after the last of them.
    void answer(std::exception_ptr thrown, T value) {
      auto posted = std::make_shared<std::atomic<bool>>(false);
      boost::asio::post(work.get_executor(),
                        [h = std::move(handler), posted, thrown = std::move(thrown),
                         v = std::move(value)]() mutable {
                          posted->wait(false);
                          std::move(h)(std::move(thrown), std::move(v));
                        });
      work.reset();
      posted->store(true);
      posted->notify_one();
    }

    Call call;
    Handler handler;
    boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler>> work;
  };

  template <class T, class Call>
  boost::asio::awaitable<T> submit(Call call) {
    return boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&,
                                       void(std::exception_ptr, T)>(
        [this](auto handler, Call c) {
          using Handler = decltype(handler);
          enqueue(std::make_unique<CallJob<T, Call, Handler>>(Clock::now() + queue_timeout_,
                                                              std::move(c), std::move(handler)));
        },
        boost::asio::use_awaitable, std::move(call));
  }

  void enqueue(std::unique_ptr<Job> job) {
    {
      std::lock_guard lock(mutex_);
      if (!closing_) {
        queue_.push_back(std::move(job));
        wake_.notify_one();
        return;
      }
    }
    job->refuse(std::string(kStoreName) + ": the store is closed");
  }

  // The store's thread: takes what is queued, runs each call unless it waited too long or the
  // store is closing; ends once it is closing and nothing is queued.
  void serve() {
    std::deque<std::unique_ptr<Job>> batch;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return closing_ || !queue_.empty(); });
        if (queue_.empty()) return;
        batch.swap(queue_);
      }
      for (auto& job : batch) {
        if (closing_.load()) {
          job->refuse(std::string(kStoreName) + ": the store was closed before the call ran");
        } else if (Clock::now() > job->deadline) {
          job->refuse(std::string(kStoreName) + ": the call waited more than " +
                      std::to_string(queue_timeout_.count()) + " ms for the store's thread");
        } else {
          job->run(store_);
        }
      }
      batch.clear();
    }
  }

  // One wait of a duplicate: what it waits for (the key copied: a cancelled caller's ticket may
  // go before the wait ends) and how it ends.
  struct WaitJob {
    WaitJob(std::string k, Fence f, std::chrono::milliseconds b)
        : key(std::move(k)), fence(f), bound(b) {}
    std::string key;
    Fence fence;
    std::chrono::milliseconds bound;
    std::shared_ptr<detail::WaitCompletion> done;
  };

  // The wait threads: each blocks in S::await_change for one duplicate at a time. Apart from the
  // store's thread, which would otherwise sit in one duplicate's wait while the holder's commit
  // (the very call that ends it) queues behind it; bounded, since each blocks a thread for up to
  // its bound. A wait is handed only to an idle thread or a new one, never queued: so none waits
  // longer than its own bound.
  class WaitThreads {
   public:
    WaitThreads(S& store, std::size_t most) : store_(&store), most_(most) {}
    WaitThreads(const WaitThreads&) = delete;
    WaitThreads& operator=(const WaitThreads&) = delete;
    ~WaitThreads() { close(); }

    bool enabled() const noexcept { return most_ > 0; }

    bool start(const std::shared_ptr<WaitJob>& job) {
      std::lock_guard lock(mutex_);
      if (closing_) return false;
      if (idle_ > jobs_.size()) {
        jobs_.push_back(job);
        ready_.notify_one();
        return true;
      }
      if (threads_.size() >= most_) return false;
      jobs_.push_back(job);
      threads_.emplace_back([this] { serve(); });
      return true;
    }

    // Ends every thread once its wait is over; waits handed over but not begun end at once.
    void close() {
      std::vector<std::thread> threads;
      {
        std::lock_guard lock(mutex_);
        closing_ = true;
        threads.swap(threads_);
      }
      ready_.notify_all();
      for (std::thread& t : threads) t.join();
    }

   private:
    void serve() {
      std::unique_lock lock(mutex_);
      for (;;) {
        if (jobs_.empty()) {
          if (closing_) return;
          ++idle_;
          ready_.wait(lock, [this] { return closing_ || !jobs_.empty(); });
          --idle_;
          continue;
        }
        std::shared_ptr<WaitJob> job = std::move(jobs_.front());
        jobs_.pop_front();
        const bool closing = closing_;
        lock.unlock();
        if (!closing) {
          try {
            store_->await_change(Ticket{job->key, job->fence}, job->bound);
          } catch (...) {
            // A failure to wait is a return (idem::WakingStore): the caller claims again.
          }
        }
        job->done->complete(/*waited=*/true);
        job.reset();
        lock.lock();
      }
    }

    S* store_;
    std::size_t most_;
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::shared_ptr<WaitJob>> jobs_;  // handed to an idle thread, under mutex_
    std::size_t idle_ = 0;                       // threads waiting for a job, under mutex_
    bool closing_ = false;                       // under mutex_
    std::vector<std::thread> threads_;           // under mutex_
  };

  S store_;
  std::chrono::milliseconds queue_timeout_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Job>> queue_;  // under mutex_
  std::atomic<bool> closing_{false};        // written under mutex_
  WaitThreads waits_;
  std::thread thread_;  // last: starts once the rest exists
};

}  // namespace idem
