#pragma once
// PgPipeline: one libpq connection in pipeline mode on an Asio strand (or none, single_threaded).
// Each query has a sync point of its own, so an error in one never aborts another. A connect is
// bounded by the connect budget, the oldest query in flight by the reply timeout; past either the
// connection drops, its queries fail, and new ones fail at once until the reconnect backoff.

#include <libpq-fe.h>

#include <array>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/resume_here.hpp"
#include "idem/error.hpp"
#include "idem/outcome.hpp"
#include "idem/postgres/options.hpp"
#include "postgres/pg_query.hpp"

namespace idem::postgres::detail {

namespace net = boost::asio;

struct PipelineSettings {
  std::string conninfo;
  std::string where;  // host:port for messages
  std::chrono::milliseconds connect_budget{5000};
  std::chrono::milliseconds reply_timeout{6000};
  std::chrono::milliseconds reconnect_backoff{50};
  std::chrono::milliseconds max_reconnect_backoff{2000};
  /// Every caller runs on the executor's one thread: no strand, replies resume callers in place.
  bool single_threaded = false;
};

/// A pipeline's settings for checked `connection`; `where` names the server in messages.
PipelineSettings pipeline_settings(const ConnectionOptions& connection, std::string where);

class PgPipeline : public std::enable_shared_from_this<PgPipeline> {
 public:
  /// Called on the strand once a new connection is up, in pipeline mode: sends its setup with
  /// send_internal() and, when done, calls open() (or drop()).
  using Setup = std::function<void(PgPipeline&)>;

  PgPipeline(const net::any_io_executor& executor, PipelineSettings settings, Setup setup);
  ~PgPipeline();

  /// Runs `query` as an awaitable answering its Reply; never throws, never cut short.
  net::awaitable<Reply> run(Query query) {
    return net::async_initiate<const net::use_awaitable_t<>&, void(Reply)>(
        [self = shared_from_this(), query = std::move(query)](auto handler) mutable {
          auto op = std::make_unique<HandlerOp<decltype(handler)>>(std::move(handler));
          op->query = std::move(query);
          self->start(std::move(op));
        },
        net::use_awaitable);
  }

  /// Answers `decode(reply, query)`, decoded where the reply is read (no coroutine around
  /// run()). nullopt from `decode` sends `query` again, maybe rewritten, up to `tries` sends in
  /// all, then answers `decode.exhausted()`; `decode` must answer a failed Reply.
  template <class T, class Decode>
  net::awaitable<T> run_decoded(Query query, Decode decode, int tries) {
    return net::async_initiate<const net::use_awaitable_t<>&, void(T)>(
        [self = shared_from_this(), query = std::move(query), decode = std::move(decode),
         tries](auto handler) mutable {
          auto op = std::make_unique<DecodingOp<T, decltype(handler), Decode>>(
              std::move(handler), std::move(decode), tries);
          op->query = std::move(query);
          self->start(std::move(op));
        },
        net::use_awaitable);
  }

  /// For the setup, on the strand: `done` hears the reply (also when the connection drops).
  void send_internal(Query query, std::function<void(Reply&)> done);
  /// The setup is done: the callers' queries waiting for the connection go out.
  void open();
  /// Drops the connection: every query on it or waiting for it fails, `why` in the message.
  void drop(const std::string& why);
  /// Whether `generation` is still the current connection's.
  bool current(std::uint64_t generation) const noexcept {
    return conn_ != nullptr && generation == generation_;
  }
  std::uint64_t generation() const noexcept { return generation_; }

  /// Ends the connection (its queries fail) and stops the watchdog; the store's destructor.
  void close();
  std::uint64_t connections_opened() const noexcept {
    return opened_.load(std::memory_order_relaxed);
  }

 private:
  struct Op {
    Query query;
    bool went_out = false;  // sent on the connection
    bool answered = false;  // its first result is in `reply`
    bool internal = false;  // the setup's: completed as soon as its reply is read
    Reply reply;
    virtual ~Op() = default;
    virtual bool again() { return false; }  // true: send the query again
    virtual void complete() = 0;            // with `reply`, posted to the caller
    virtual void complete_in_place() { complete(); }
  };
  template <class Handler>
  struct HandlerOp final : Op {
    explicit HandlerOp(Handler&& h) : handler(std::move(h)) {}
    void complete() override {
      auto executor = net::get_associated_executor(handler);
      net::post(executor, net::append(std::move(handler), std::move(reply)));
    }
    void complete_in_place() override { idem::detail::resume_here(handler, std::move(reply)); }
    Handler handler;
  };
  template <class T, class Handler, class Decode>
  struct DecodingOp final : Op {
    DecodingOp(Handler&& h, Decode&& d, int tries)
        : handler(std::move(h)), decode(std::move(d)), tries_left(tries) {}
    bool again() override {
      value = decode(reply, query);
      if (value || --tries_left <= 0) return false;
      went_out = answered = false;
      reply = Reply{};
      return true;
    }
    T answer() {
      if (!value) value = decode(reply, query);  // a failure, or a decode that asked too often
      if (!value) value = decode.exhausted();
      return std::move(*value);
    }
    void complete() override {
      auto executor = net::get_associated_executor(handler);
      net::post(executor, net::append(std::move(handler), answer()));
    }
    void complete_in_place() override { idem::detail::resume_here(handler, answer()); }
    Handler handler;
    Decode decode;
    int tries_left;
    std::optional<T> value;
  };
  struct InternalOp final : Op {
    InternalOp() { internal = true; }
    std::function<void(Reply&)> done;
    void complete() override { done(reply); }
  };
  using Answered = std::vector<std::unique_ptr<Op>>;
  enum class State : std::uint8_t { idle, connecting, setting_up, open };

  void submit(std::unique_ptr<Op> op);
  void start(std::unique_ptr<Op> op) {
    if (settings_.single_threaded) {
      submit(std::move(op));
      return;
    }
    net::dispatch(executor_, [self = shared_from_this(), op = std::move(op)]() mutable {
      self->submit(std::move(op));
    });
  }
  void send(std::unique_ptr<Op> op);
  void start_connect();
  void poll_connect(PostgresPollingStatusType status);
  void connected();
  void watch_socket();  // the descriptor follows PQsocket (it may change while connecting)
  void release_socket();
  void arm_read();
  void arm_write();
  void close_write_socket();
  void on_readable();
  void flush();
  void take_results(Answered& answered);
  void finish_front(Answered& answered);
  void complete_answered(Answered& answered);
  void fail(Op& op, const std::string& why) const;
  void failed_attempt();
  void arm_watchdog();

  PipelineSettings settings_;
  Setup setup_;
  net::any_io_executor executor_;  // a strand of the store's executor, or it (single_threaded)
  net::posix::stream_descriptor socket_;
  net::posix::stream_descriptor write_socket_;  // a duplicate of the socket, while a send waits
  net::steady_timer watchdog_;
  bool watchdog_armed_ = false;
  bool read_armed_ = false;
  bool write_armed_ = false;
  bool flushing_ = false;  // PQflush left data to write

  PGconn* conn_ = nullptr;
  State state_ = State::idle;
  std::uint64_t generation_ = 0;  // of the current connection
  std::deque<std::unique_ptr<Op>> in_flight_;
  std::deque<std::unique_ptr<Op>> waiting_;  // callers' queries before the setup is done
  Answered spare_answered_;                  // on_readable's list, kept between reads
  std::chrono::steady_clock::time_point last_progress_{};
  std::chrono::steady_clock::time_point connect_started_{};
  std::chrono::steady_clock::time_point next_connect_{};
  std::chrono::milliseconds backoff_;
  std::string last_error_;
  std::atomic<std::uint64_t> opened_{0};
};

}  // namespace idem::postgres::detail
