#pragma once
// The two-phase API across processes: helper processes (idem_two_phase_worker), started at one
// instant, each begin() the same keys on one store; the one that acquires a key does the work
// (a side effect the backend can count: a business row, an INCR) and commits. Exactly one
// process commits each key, the others replay its value or are refused, and the side effect
// happened once.
//
// The backend type B adds to two_phase_cases.hpp's:
//   std::vector<std::string> worker_args();       <backend> <location> <prefix> <mode>
//   void prepare_side_effects();                   creates what the work writes to
//   long long side_effects(scope, key);            how often the work ran for the key

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "support/child_process.hpp"
#include "two_phase/two_phase_cases.hpp"

#ifndef IDEM_TWO_PHASE_WORKER
#error "IDEM_TWO_PHASE_WORKER must name the idem_two_phase_worker binary"
#endif

namespace idem::testing {

template <class B>
class TwoPhaseProcessTest : public TwoPhaseTest<B> {};

TYPED_TEST_SUITE_P(TwoPhaseProcessTest);

TYPED_TEST_P(TwoPhaseProcessTest, ProcessesRacingOnOneKeyCommitItOnce) {
  constexpr int kProcesses = 4;
  constexpr int kKeys = 6;
  const std::string scope = "race";
  this->backend_.prepare_side_effects();

  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int p = 0; p < kProcesses; ++p) {
    std::vector<std::string> args = this->backend_.worker_args();
    for (const std::string& a : {scope, std::to_string(kKeys), std::string("20")}) {
      args.push_back(a);
    }
    workers.push_back(std::make_unique<ChildProcess>(IDEM_TWO_PHASE_WORKER, args));
  }
  for (auto& w : workers) ASSERT_EQ(w->read_line(seconds{60}), "ready");
  for (auto& w : workers) ASSERT_TRUE(w->write_line("go"));

  std::map<std::string, std::vector<std::string>> committed, replayed;
  std::map<std::string, int> refused;
  for (auto& w : workers) {
    for (const std::string& line : w->finish(seconds{120})) {
      std::istringstream in(line);
      std::string what, key, value;
      in >> what >> key >> value;
      if (what == "committed") {
        committed[key].push_back(value);
      } else if (what == "replayed") {
        replayed[key].push_back(value);
      } else if (what == "refused") {
        ++refused[key];
      } else {
        ADD_FAILURE() << line;
      }
    }
    EXPECT_TRUE(w->exited_cleanly()) << "worker exit status " << w->exit_status();
  }
  for (int k = 0; k < kKeys; ++k) {
    const std::string key = "key-" + std::to_string(k);
    ASSERT_EQ(committed[key].size(), 1u) << key << ": one process commits";
    EXPECT_EQ(this->backend_.side_effects(scope, key), 1) << key << ": the work ran once";
    for (const std::string& v : replayed[key]) EXPECT_EQ(v, committed[key].front()) << key;
    EXPECT_EQ(static_cast<int>(replayed[key].size()) + refused[key], kProcesses - 1) << key;
  }
}

REGISTER_TYPED_TEST_SUITE_P(TwoPhaseProcessTest, ProcessesRacingOnOneKeyCommitItOnce);

}  // namespace idem::testing
