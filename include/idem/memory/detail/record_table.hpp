#pragma once
// RecordTable: an open-addressing hash table whose records carry their key bytes (and, if asked,
// more bytes after them) in the same allocation (one allocation per new key; lookups compare
// cached hashes in one flat array).

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>
#include <utility>

#include "idem/detail/hashed_key.hpp"

namespace idem::detail {

/// Maps key bytes to records of type V, looked up by a HashedKey. Records never move while in the
/// table (pointers stay valid until erase()). Not thread-safe. Linear probing, at most 3/4 full,
/// backward-shift erase (no tombstones), so lookups stay short however many keys came and went.
template <class V>
class RecordTable {
  // The record, then its key bytes and its trailing bytes in the same allocation.
  struct Node final : V {
    std::size_t hash = 0;
    std::size_t key_size = 0;
    const char* key_bytes() const noexcept { return reinterpret_cast<const char*>(this + 1); }
    char* key_bytes() noexcept { return reinterpret_cast<char*>(this + 1); }
  };

  static_assert(alignof(Node) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                "RecordTable allocates nodes with plain operator new");

  struct Slot {
    std::size_t hash = 0;
    Node* node = nullptr;  // null: empty
  };

 public:
  RecordTable() = default;
  RecordTable(const RecordTable&) = delete;
  RecordTable& operator=(const RecordTable&) = delete;
  ~RecordTable() {
    for (std::size_t i = 0; i < capacity_; ++i) {
      if (slots_[i].node != nullptr) destroy(slots_[i].node);
    }
  }

  std::size_t size() const noexcept { return size_; }

  /// The key a record was inserted under.
  static std::string_view key_of(const V& record) noexcept {
    const Node& node = static_cast<const Node&>(record);
    return {node.key_bytes(), node.key_size};
  }

  /// The first of the bytes reserved after the key of `record` (insert()'s `trailing`).
  static char* trailing_bytes(V& record) noexcept {
    Node& node = static_cast<Node&>(record);
    return node.key_bytes() + node.key_size;
  }
  static const char* trailing_bytes(const V& record) noexcept {
    const Node& node = static_cast<const Node&>(record);
    return node.key_bytes() + node.key_size;
  }

  /// The record of `key`, or null.
  V* find(const HashedKey& key) const noexcept {
    if (size_ == 0) return nullptr;
    for (std::size_t i = key.hash & mask();; i = (i + 1) & mask()) {
      const Slot& slot = slots_[i];
      if (slot.node == nullptr) return nullptr;
      if (slot.hash == key.hash && slot.node->key_size == key.bytes.size() &&
          std::memcmp(slot.node->key_bytes(), key.bytes.data(), key.bytes.size()) == 0) {
        return slot.node;
      }
    }
  }

  /// Adds a value-initialised record for `key`, which must not be in the table, with room for
  /// `trailing` bytes after its key (trailing_bytes(), uninitialised), kept for the record's life.
  V& insert(const HashedKey& key, std::size_t trailing = 0) {
    if ((size_ + 1) * 4 > capacity_ * 3) grow();
    void* memory = ::operator new(sizeof(Node) + key.bytes.size() + trailing);
    Node* node = nullptr;
    try {
      node = ::new (memory) Node();
    } catch (...) {
      ::operator delete(memory);
      throw;
    }
    node->hash = key.hash;
    node->key_size = key.bytes.size();
    if (!key.bytes.empty()) std::memcpy(node->key_bytes(), key.bytes.data(), key.bytes.size());
    place(Slot{key.hash, node});
    ++size_;
    return *node;
  }

  /// Removes and destroys `record`, which must be in the table.
  void erase(V& record) noexcept {
    Node* node = &static_cast<Node&>(record);
    std::size_t hole = node->hash & mask();
    while (slots_[hole].node != node) hole = (hole + 1) & mask();
    // Backward shift: move later records of the same run into the hole when their home slot
    // does not lie cyclically in (hole, i], so every record stays reachable from its home.
    for (std::size_t i = (hole + 1) & mask(); slots_[i].node != nullptr; i = (i + 1) & mask()) {
      const std::size_t home = slots_[i].hash & mask();
      const bool stays = hole <= i ? (hole < home && home <= i) : (hole < home || home <= i);
      if (!stays) {
        slots_[hole] = slots_[i];
        hole = i;
      }
    }
    slots_[hole] = Slot{};
    --size_;
    destroy(node);
  }

 private:
  std::size_t mask() const noexcept { return capacity_ - 1; }

  void place(Slot slot) noexcept {
    std::size_t i = slot.hash & mask();
    while (slots_[i].node != nullptr) i = (i + 1) & mask();
    slots_[i] = slot;
  }

  void grow() {
    const std::size_t old_capacity = capacity_;
    const std::size_t new_capacity = old_capacity == 0 ? 16 : old_capacity * 2;
    // NOLINTNEXTLINE(modernize-avoid-c-arrays): run-time size, like slots_
    auto old = std::exchange(slots_, std::make_unique<Slot[]>(new_capacity));
    capacity_ = new_capacity;
    for (std::size_t i = 0; i < old_capacity; ++i) {
      if (old[i].node != nullptr) place(old[i]);
    }
  }

  static void destroy(Node* node) noexcept {
    node->~Node();
    ::operator delete(node);
  }

  // NOLINTNEXTLINE(modernize-avoid-c-arrays): its size is known at run time only
  std::unique_ptr<Slot[]> slots_;
  std::size_t capacity_ = 0;
  std::size_t size_ = 0;
};

}  // namespace idem::detail
