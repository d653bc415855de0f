#pragma once
// A name no other test or run uses (tables, files, prefixes): concurrent runs never meet.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>

namespace idem::testing {

inline std::string unique_name(const std::string& stem) {
  static std::atomic<int> counter{0};
  return stem + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter.fetch_add(1)) +
         "_" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 100000);
}

}  // namespace idem::testing
