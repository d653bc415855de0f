#pragma once
// Key: what a record store deduplicates on: an id chosen by the client, and who sent it.

#include <string>
#include <string_view>
#include <utility>

namespace idem {

/// The idempotency key of one business intent: opaque bytes (NUL and non-UTF-8 kept exactly);
/// the same id from two principals names two intents. It views bytes the caller keeps alive,
/// except an id given as a temporary std::string, which the Key keeps itself.
class Key {
 public:
  Key(std::string_view key_id, std::string_view key_principal = {})  // NOLINT: implicit
      : id(key_id), principal(key_principal) {}
  Key(const char* key_id, std::string_view key_principal = {})  // NOLINT: implicit
      : id(key_id), principal(key_principal) {}
  Key(const std::string& key_id, std::string_view key_principal = {})  // NOLINT: implicit
      : id(key_id), principal(key_principal) {}
  Key(std::string&& key_id, std::string_view key_principal = {})  // NOLINT: implicit
      : kept_(std::move(key_id)), owns_id_(true), id(kept_), principal(key_principal) {}

  Key(const Key& other) : kept_(other.kept_), owns_id_(other.owns_id_), principal(other.principal) {
    id = owns_id_ ? std::string_view(kept_) : other.id;
  }
  Key(Key&& other) noexcept
      : kept_(std::move(other.kept_)), owns_id_(other.owns_id_), principal(other.principal) {
    id = owns_id_ ? std::string_view(kept_) : other.id;
  }
  Key& operator=(const Key& other) {
    if (this != &other) *this = Key(other);
    return *this;
  }
  Key& operator=(Key&& other) noexcept {
    kept_ = std::move(other.kept_);
    owns_id_ = other.owns_id_;
    id = owns_id_ ? std::string_view(kept_) : other.id;
    principal = other.principal;
    return *this;
  }
  ~Key() = default;

  friend bool operator==(const Key& a, const Key& b) noexcept {
    return a.id == b.id && a.principal == b.principal;
  }

 private:
  std::string kept_{};  // a temporary id's bytes (see the class comment)
  bool owns_id_ = false;

 public:
  std::string_view id;         // the client's key ("order-42", a header value, ...)
  std::string_view principal;  // the caller or tenant; empty when there is none
};

}  // namespace idem
