#pragma once
// Hash tables keyed by effective keys, hashing each key once per call (the in-memory stores).

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "idem/fingerprint.hpp"

namespace idem::detail {

/// A key and its hash, computed once per call for both the shard choice and the table.
struct HashedKey {
  std::string_view bytes;
  std::size_t hash;
};

inline HashedKey hashed(std::string_view key) noexcept {
  return HashedKey{key, static_cast<std::size_t>(hash_bytes(key))};
}

/// A sharded table's shards, a power of two of them (at least one); a key's shard is chosen by
/// the high bits of its hash, since the table inside a shard uses it modulo its bucket count.
template <class Shard>
class Shards {
 public:
  explicit Shards(std::size_t wanted)
      : shards_(std::bit_ceil(wanted == 0 ? std::size_t{1} : wanted)),
        bits_(static_cast<unsigned>(std::countr_zero(shards_.size()))) {}

  Shard& of(const HashedKey& key) noexcept {
    return shards_[bits_ == 0 ? 0
                              : static_cast<std::size_t>(static_cast<std::uint64_t>(key.hash) >>
                                                         (64 - bits_))];
  }
  std::size_t size() const noexcept { return shards_.size(); }
  auto begin() noexcept { return shards_.begin(); }
  auto end() noexcept { return shards_.end(); }
  auto begin() const noexcept { return shards_.begin(); }
  auto end() const noexcept { return shards_.end(); }

  /// The sum of one atomic counter over the shards.
  std::uint64_t sum(std::atomic<std::uint64_t> Shard::*counter) const noexcept {
    std::uint64_t n = 0;
    for (const Shard& shard : shards_) n += (shard.*counter).load(std::memory_order_relaxed);
    return n;
  }
  /// The sum of `count(shard)` over the shards, each read under its `mutex`.
  template <class Count>
  std::size_t sum_locked(Count count) const {
    std::size_t n = 0;
    for (const Shard& shard : shards_) {
      std::lock_guard lock(shard.mutex);
      n += count(shard);
    }
    return n;
  }

 private:
  std::vector<Shard> shards_;
  unsigned bits_;
};

struct HashedKeyHash {
  using is_transparent = void;
  // Deliberately not noexcept: libstdc++ then caches each node's hash, so rehashing and bucket
  // walks never hash a stored key again.
  std::size_t operator()(std::string_view key) const { return hash_bytes(key); }
  std::size_t operator()(const HashedKey& key) const noexcept { return key.hash; }
};

struct HashedKeyEqual {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const noexcept { return a == b; }
  bool operator()(const HashedKey& a, std::string_view b) const noexcept { return a.bytes == b; }
  bool operator()(std::string_view a, const HashedKey& b) const noexcept { return a == b.bytes; }
};

/// std::unordered_map from key bytes to V, looked up by HashedKey or std::string_view.
template <class V>
using HashedKeyMap = std::unordered_map<std::string, V, HashedKeyHash, HashedKeyEqual>;

}  // namespace idem::detail
