#pragma once
// A worker process (fork + exec) whose stdin and stdout are pipes to the test: the test reads
// the lines it prints (waiting for one, such as "ready" or "inside", or to its end), may write it
// a line (the two-phase workers start at once on one), and checks its exit. Every read has a
// bound. Killed with SIGKILL if still running when the object goes.

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

namespace idem::testing {

class ChildProcess {
 public:
  ChildProcess(const std::string& exe, std::vector<std::string> args) {
    int in[2], out[2];
    if (::pipe(in) != 0) throw std::runtime_error("pipe failed");
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
      std::vector<char*> argv;
      std::string program = exe;
      argv.push_back(program.data());
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(program.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
  }
  ~ChildProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      (void)wait();
    }
    if (to_child_ >= 0) ::close(to_child_);
    if (from_child_ >= 0) ::close(from_child_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// Writes `line` and a newline to the child's stdin.
  bool write_line(const std::string& line) {
    const std::string text = line + "\n";
    return ::write(to_child_, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  }

  /// The next line the child prints, or "" when `timeout` passes or its stdout ends first.
  std::string read_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !fill(left)) return "";
    }
  }

  /// Reads lines until one starts with `prefix` (returns it), or "" when `timeout` passes or the
  /// child's stdout ends first.
  std::string read_until(const std::string& prefix, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      std::string line = read_line(left_until(deadline));
      if (!line.empty() && line.rfind(prefix, 0) == 0) return line;
      if (line.empty() && (eof_ || std::chrono::steady_clock::now() >= deadline)) return "";
    }
  }

  /// Every remaining line up to the end of the child's stdout or `timeout`; with `stop_at`, up to
  /// and with the first line equal to it. The child is not waited for (exited_cleanly() does).
  std::vector<std::string> lines(std::chrono::milliseconds timeout,
                                 const std::string& stop_at = {}) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<std::string> lines;
    for (;;) {
      std::string line = read_line(left_until(deadline));
      if (line.empty() && (eof_ || std::chrono::steady_clock::now() >= deadline)) break;
      lines.push_back(std::move(line));
      if (!stop_at.empty() && lines.back() == stop_at) break;
    }
    return lines;
  }

  /// Kills the child (SIGKILL) and waits for it.
  void kill9() {
    if (pid_ > 0) ::kill(pid_, SIGKILL);
    exit_status_ = wait();
  }

  /// Every remaining line up to the end of the child's stdout (or `timeout`), then its exit.
  std::vector<std::string> finish(std::chrono::milliseconds timeout) {
    std::vector<std::string> remaining = lines(timeout);
    if (!eof_ && pid_ > 0) ::kill(pid_, SIGKILL);  // out of time: the exit status will say so
    exit_status_ = wait();
    return remaining;
  }

  /// True when the child exited by itself with status 0; waits for it if finish() did not.
  bool exited_cleanly() {
    exit_status_ = wait();
    return WIFEXITED(exit_status_) && WEXITSTATUS(exit_status_) == 0;
  }
  int exit_status() const { return exit_status_; }

 private:
  static std::chrono::milliseconds left_until(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    return left.count() > 0 ? left : std::chrono::milliseconds{0};
  }
  bool fill(std::chrono::milliseconds timeout) {
    pollfd p{from_child_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char chunk[4096];
    const ssize_t n = ::read(from_child_, chunk, sizeof chunk);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
  int wait() {
    if (pid_ <= 0) return exit_status_;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  bool eof_ = false;
  int exit_status_ = -1;
  std::string buffer_;
};

}  // namespace idem::testing
