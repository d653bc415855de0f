#pragma once
// Hands a caller its answer in place: right here when its executor is this thread's io_context
// (dispatch without its two type-erased wrappers), else as its executor decides.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <type_traits>
#include <utility>

namespace idem::detail {

template <class Handler, class Value>
void resume_here(Handler& handler, Value&& value) {
  namespace net = boost::asio;
  auto executor = net::get_associated_executor(handler);
  if constexpr (std::is_same_v<decltype(executor), net::any_io_executor>) {
    const auto* io = executor.template target<net::io_context::executor_type>();
    if (io != nullptr && io->running_in_this_thread()) {
      std::move(handler)(std::forward<Value>(value));
      return;
    }
  }
  net::dispatch(executor, net::append(std::move(handler), std::forward<Value>(value)));
}

}  // namespace idem::detail
