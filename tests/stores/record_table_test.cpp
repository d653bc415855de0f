// detail::RecordTable, the open-addressing table under MemoryStore: every key stays reachable
// through growth and through erases that shift records back into the holes, including when many
// keys share a home slot and runs wrap around the end of the array.

#include "idem/memory/detail/record_table.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <random>
#include <string>

namespace idem::detail {
namespace {

struct Value {
  int n = 0;
};

// Compares every key the model holds, and some it does not, with the table.
void expect_same(const RecordTable<Value>& table,
                 const std::map<std::string, std::pair<std::size_t, int>>& model,
                 std::size_t key_space, std::size_t (*hash_of)(std::size_t)) {
  ASSERT_EQ(table.size(), model.size());
  for (std::size_t i = 0; i < key_space; ++i) {
    const std::string key = "key-" + std::to_string(i);
    const Value* found = table.find(HashedKey{key, hash_of(i)});
    const auto it = model.find(key);
    if (it == model.end()) {
      EXPECT_EQ(found, nullptr) << key;
    } else {
      ASSERT_NE(found, nullptr) << key;
      EXPECT_EQ(found->n, it->second.second) << key;
      EXPECT_EQ(RecordTable<Value>::key_of(*found), key);
    }
  }
}

void churn(std::size_t (*hash_of)(std::size_t)) {
  constexpr std::size_t kKeySpace = 600;
  RecordTable<Value> table;
  std::map<std::string, std::pair<std::size_t, int>> model;
  std::mt19937 random(42);
  for (int step = 0; step < 6000; ++step) {
    const std::size_t i = random() % kKeySpace;
    const std::string key = "key-" + std::to_string(i);
    const HashedKey hashed{key, hash_of(i)};
    if (Value* found = table.find(hashed)) {
      table.erase(*found);
      model.erase(key);
    } else {
      table.insert(hashed).n = step;
      model[key] = {i, step};
    }
    if (step % 500 == 0) expect_same(table, model, kKeySpace, hash_of);
  }
  expect_same(table, model, kKeySpace, hash_of);
}

TEST(RecordTableTest, KeysStayReachableThroughGrowthAndErase) {
  churn([](std::size_t i) {
    return static_cast<std::size_t>(hash_bytes("key-" + std::to_string(i)));
  });
}

TEST(RecordTableTest, CollidingHashesAndWrappingRunsSurviveErase) {
  // Eight home slots for all keys, some near the top of the array, so runs are long and wrap.
  churn([](std::size_t i) { return (i % 8) * (std::size_t{1} << 60) + (i % 8 < 4 ? 1023 : 0); });
}

TEST(RecordTableTest, EqualHashesAreToldApartByTheirBytes) {
  RecordTable<Value> table;
  table.insert(HashedKey{"a", 7}).n = 1;
  table.insert(HashedKey{"b", 7}).n = 2;
  table.insert(HashedKey{"", 7}).n = 3;
  ASSERT_NE(table.find(HashedKey{"b", 7}), nullptr);
  EXPECT_EQ(table.find(HashedKey{"b", 7})->n, 2);
  EXPECT_EQ(table.find(HashedKey{"", 7})->n, 3);
  EXPECT_EQ(table.find(HashedKey{"c", 7}), nullptr);
  table.erase(*table.find(HashedKey{"a", 7}));
  EXPECT_EQ(table.find(HashedKey{"a", 7}), nullptr);
  EXPECT_EQ(table.find(HashedKey{"b", 7})->n, 2);
  EXPECT_EQ(table.find(HashedKey{"", 7})->n, 3);
  EXPECT_EQ(table.size(), 2u);
}

}  // namespace
}  // namespace idem::detail
