#pragma once
// LruList: the intrusive list of a shard's entries, oldest first (the in-memory stores' eviction
// order); an entry carries its own `prev` and `next`.

namespace idem::detail {

template <class Entry>
struct LruList {
  Entry* head = nullptr;  // the oldest
  Entry* tail = nullptr;

  void push_back(Entry* e) noexcept {
    e->prev = tail;
    e->next = nullptr;
    (tail != nullptr ? tail->next : head) = e;
    tail = e;
  }
  void unlink(Entry* e) noexcept {
    (e->prev != nullptr ? e->prev->next : head) = e->next;
    (e->next != nullptr ? e->next->prev : tail) = e->prev;
  }
  void move_to_back(Entry* e) noexcept {
    if (e == tail) return;
    unlink(e);
    push_back(e);
  }
};

}  // namespace idem::detail
