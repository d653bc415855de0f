#pragma once
// A few PostgreSQL connections for the service's own statements (reads, and the bare twin's
// inserts), shared by the request threads: take() waits for a free one and opens connections
// lazily; one that broke is dropped when it comes back.

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <string>
#include <utility>
#include <vector>

namespace payments {

class PgPool {
 public:
  PgPool(std::string uri, std::size_t size) : uri_(std::move(uri)), free_slots_(size) {}

  class Lease {
   public:
    Lease(PgPool& pool, std::unique_ptr<pqxx::connection> c) : pool_(pool), c_(std::move(c)) {}
    Lease(const Lease&) = delete;
    ~Lease() { pool_.give_back(std::move(c_)); }
    pqxx::connection& operator*() { return *c_; }

   private:
    PgPool& pool_;
    std::unique_ptr<pqxx::connection> c_;
  };

  Lease take() {
    std::unique_ptr<pqxx::connection> c;
    {
      std::unique_lock lock(mutex_);
      returned_.wait(lock, [&] { return !idle_.empty() || free_slots_ > 0; });
      if (!idle_.empty()) {
        c = std::move(idle_.back());
        idle_.pop_back();
      } else {
        --free_slots_;
      }
    }
    if (!c) {
      try {
        c = std::make_unique<pqxx::connection>(uri_);
      } catch (...) {
        give_back(nullptr);
        throw;
      }
    }
    return Lease(*this, std::move(c));
  }

 private:
  void give_back(std::unique_ptr<pqxx::connection> c) {
    {
      std::lock_guard lock(mutex_);
      if (c && c->is_open()) {
        idle_.push_back(std::move(c));
      } else {
        ++free_slots_;
      }
    }
    returned_.notify_one();
  }

  std::string uri_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<pqxx::connection>> idle_;
  std::size_t free_slots_;
};

}  // namespace payments
