#pragma once
// One asynchronous wait for the end of a hold on a PgWaker (AsyncPostgresStore's
// async_await_change): listen first, count the waiter in the record, then wait for the record's
// wake, the listener's loss or stop, or the deadline, on a strand of its own. Nothing blocks the
// event loop: the listener's thread calls back, and a timer keeps the deadline.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "idem/asio/detail/wake_op.hpp"
#include "postgres/pg_waker.hpp"

namespace idem::postgres::detail {

/// Counts the waiter in the record (the store's count_waiter statement): the payload of the wake
/// the end of the hold will send, or nullopt when the hold is over already or the statement
/// failed (no wait then: the caller claims again).
using CountIn = std::function<boost::asio::awaitable<std::optional<std::string>>()>;

/// Starts the wait on a strand of `executor`; done->complete(true) ends it, at the latest at
/// `deadline` (plus count_in's own bound, when the deadline passes during it).
void start_wait(const boost::asio::any_io_executor& executor, std::shared_ptr<PgWaker> waker,
                CountIn count_in, std::chrono::steady_clock::time_point deadline,
                const std::shared_ptr<idem::detail::WaitCompletion>& done);

}  // namespace idem::postgres::detail
