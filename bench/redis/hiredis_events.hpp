#pragma once
// hiredis's event hooks on Asio, for one redisAsyncContext: read readiness through async_wait on
// the socket, and writes flushed at the end of a read (for the commands its callers sent) or of
// a turn of the executor (a post), instead of after a wait for write readiness. The socket is
// nearly always writable, and that wait costs an epoll round and two more system calls per
// command on a quiet connection; gathering also sends many commands in one write, as
// AsyncRedisStore's own connection (src/redis/async_link.cpp) does. The bare twin's plumbing.

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <functional>
#include <memory>
#include <utility>

namespace idem::redis::detail {

class HiredisEvents : public std::enable_shared_from_this<HiredisEvents> {
 public:
  /// Takes over `ac`'s event hooks, its handlers running on `executor`. `after_read` runs after
  /// each read hiredis handled (its reply callbacks done), once the next read is waited for.
  /// The hooks live until hiredis's cleanup (the context freed) and their pending waits.
  static void attach(redisAsyncContext* ac, const boost::asio::any_io_executor& executor,
                     std::function<void()> after_read = {}) {
    auto events = std::make_shared<HiredisEvents>(ac, executor, std::move(after_read));
    events->keep_ = events;
    ac->ev.data = events.get();
    ac->ev.addRead = &HiredisEvents::add_read;
    ac->ev.delRead = &HiredisEvents::del_read;
    ac->ev.addWrite = &HiredisEvents::add_write;
    ac->ev.delWrite = &HiredisEvents::del_write;
    ac->ev.cleanup = &HiredisEvents::cleanup;
  }

  HiredisEvents(redisAsyncContext* ac, const boost::asio::any_io_executor& executor,
                std::function<void()> after_read)
      : ac_(ac), socket_(executor, ac->c.fd), after_read_(std::move(after_read)) {}

 private:
  using Socket = boost::asio::posix::stream_descriptor;

  void arm(bool read) {
    bool& armed = read ? read_armed_ : write_armed_;
    if (armed || ac_ == nullptr) return;
    armed = true;
    socket_.async_wait(read ? Socket::wait_read : Socket::wait_write,
                       [self = shared_from_this(), read](boost::system::error_code ec) {
                         (read ? self->read_armed_ : self->write_armed_) = false;
                         if (ec || self->ac_ == nullptr) return;
                         if (read ? !self->reading_ : !self->writing_) return;
                         if (read) {
                           self->read();
                         } else {
                           redisAsyncHandleWrite(self->ac_);
                           if (self->ac_ != nullptr && self->writing_) self->arm(false);
                         }
                       });
  }

  // A read, then after_read_: the commands its callers send meanwhile go out in one write at
  // its end, without a post.
  void read() {
    struct Scope {
      HiredisEvents& events;
      explicit Scope(HiredisEvents& e) : events(e) { events.in_read_ = true; }
      Scope(const Scope&) = delete;
      Scope& operator=(const Scope&) = delete;
      ~Scope() {
        events.in_read_ = false;
        if (std::exchange(events.write_after_read_, false)) events.flush_now();
      }
    } scope(*this);
    redisAsyncHandleRead(ac_);
    // The context may be gone now (cleanup ran).
    if (ac_ != nullptr && reading_) arm(true);
    if (after_read_) after_read_();
  }

  // Writes what hiredis holds now; what the socket does not take waits for write readiness.
  void flush_now() {
    if (ac_ == nullptr || !writing_ || write_armed_) return;
    flushing_ = true;
    redisAsyncHandleWrite(ac_);
    flushing_ = false;
  }

  // Writes what hiredis holds at the end of this turn of the executor.
  void flush_soon() {
    if (flush_posted_ || write_armed_) return;
    flush_posted_ = true;
    boost::asio::post(socket_.get_executor(), [self = shared_from_this()] {
      self->flush_posted_ = false;
      self->flush_now();
    });
  }

  static void add_read(void* p) {
    auto* e = static_cast<HiredisEvents*>(p);
    e->reading_ = true;
    e->arm(true);
  }
  static void del_read(void* p) { static_cast<HiredisEvents*>(p)->reading_ = false; }
  static void add_write(void* p) {
    auto* e = static_cast<HiredisEvents*>(p);
    e->writing_ = true;
    // While connecting (the first write tells the connect is done) or once a flush left bytes
    // behind (the socket's buffer is full): wait until the socket is writable.
    if (e->flushing_ || (e->ac_->c.flags & REDIS_CONNECTED) == 0) {
      e->arm(false);
    } else if (e->in_read_) {
      e->write_after_read_ = true;
    } else {
      e->flush_soon();
    }
  }
  static void del_write(void* p) { static_cast<HiredisEvents*>(p)->writing_ = false; }
  // The context is being freed: hiredis closes the socket; stop watching it.
  static void cleanup(void* p) {
    auto* e = static_cast<HiredisEvents*>(p);
    e->ac_ = nullptr;
    e->reading_ = e->writing_ = false;
    boost::system::error_code ignored;
    e->socket_.cancel(ignored);
    (void)e->socket_.release();
    e->keep_.reset();  // the pending waits and flush hold their own references
  }

  redisAsyncContext* ac_;
  Socket socket_;
  std::function<void()> after_read_;
  bool reading_ = false, writing_ = false, read_armed_ = false, write_armed_ = false;
  bool flush_posted_ = false, flushing_ = false;
  bool in_read_ = false, write_after_read_ = false;
  std::shared_ptr<HiredisEvents> keep_;  // the context's reference, until cleanup
};

}  // namespace idem::redis::detail
