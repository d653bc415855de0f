// The floor under a lone call: one byte to an echo thread over loopback TCP and back, with
// nothing else around it. `BM_Async_Loopback_RoundTrip/epoll` waits as an event loop does (write,
// epoll_wait, read); `/blocking` with a blocking read. Its CPU column is what the kernel alone
// costs the caller per round trip on this machine, the least a client that sleeps while it waits
// can spend: compare it with BM_Async_Redis_*/in_flight:1 (docs/async.md, Figures). Needs no
// server, so it always runs.

#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "async_bench.hpp"

namespace idem_bench_async {
namespace {

// A loopback TCP connection to a thread that echoes every byte it reads, until the connection
// closes.
class EchoPeer {
 public:
  EchoPeer() {
    const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    auto* raw = reinterpret_cast<sockaddr*>(&address);  // NOLINT: the sockets API
    ok_ = listener >= 0 && ::bind(listener, raw, length) == 0 && ::listen(listener, 1) == 0 &&
          ::getsockname(listener, raw, &length) == 0;
    if (ok_) {
      echo_ = std::thread([listener] {
        const int peer = ::accept(listener, nullptr, nullptr);
        ::close(listener);
        no_delay(peer);
        char byte = 0;
        while (::read(peer, &byte, 1) == 1 && ::write(peer, &byte, 1) == 1) {
        }
        ::close(peer);
      });
      fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
      ok_ = fd_ >= 0 && ::connect(fd_, raw, length) == 0;
      no_delay(fd_);
      if (!ok_) ::shutdown(listener, SHUT_RDWR);  // the echo thread's accept returns
    } else if (listener >= 0) {
      ::close(listener);
    }
  }
  EchoPeer(const EchoPeer&) = delete;
  EchoPeer& operator=(const EchoPeer&) = delete;
  ~EchoPeer() {
    if (fd_ >= 0) ::close(fd_);
    if (echo_.joinable()) echo_.join();
  }

  bool ok() const noexcept { return ok_; }
  int fd() const noexcept { return fd_; }

 private:
  static void no_delay(int fd) {
    const int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }

  bool ok_ = false;
  int fd_ = -1;
  std::thread echo_;
};

void BM_Async_Loopback_RoundTrip(benchmark::State& state, bool epoll) {
  EchoPeer peer;
  const int poller = ::epoll_create1(0);
  epoll_event interest{};
  interest.events = EPOLLIN | EPOLLET;
  if (!peer.ok() || poller < 0 || ::epoll_ctl(poller, EPOLL_CTL_ADD, peer.fd(), &interest) != 0) {
    state.SkipWithError("cannot open a loopback connection");
    if (poller >= 0) ::close(poller);
    return;
  }
  char byte = 'x';
  for (auto _ : state) {
    bool ok = ::write(peer.fd(), &byte, 1) == 1;
    if (epoll) {
      epoll_event ready{};
      ok = ok && ::epoll_wait(poller, &ready, 1, -1) == 1;
    }
    ok = ok && ::read(peer.fd(), &byte, 1) == 1;
    if (!ok) {
      state.SkipWithError("the echo failed");
      break;
    }
  }
  ::close(poller);
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

void register_floor_benchmarks() {
  benchmark::RegisterBenchmark("BM_Async_Loopback_RoundTrip/epoll", BM_Async_Loopback_RoundTrip,
                               true)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_Async_Loopback_RoundTrip/blocking", BM_Async_Loopback_RoundTrip,
                               false)
      ->UseRealTime();
}

}  // namespace idem_bench_async
