#pragma once
// Races across processes: forked children, each running the test's body for its index, and the
// parent's check that every one of them ended well.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <vector>

namespace idem::testing {

/// Runs `child(p)` for p in [0, n), each in a forked process that exits 0 when it returns no
/// failures (1 otherwise, also when it throws); the test fails for each child that did not.
inline void expect_children_pass(int n, const std::function<int(int p)>& child) {
  std::vector<pid_t> children;
  for (int p = 0; p < n; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int failures = 1;
      try {
        failures = child(p);
      } catch (...) {
        failures = 1;
      }
      ::_exit(failures == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed: " << status;
  }
}

}  // namespace idem::testing
