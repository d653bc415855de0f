#pragma once
// Key: what a record store deduplicates on: an id chosen by the client, and who sent it.

#include <string>
#include <string_view>

namespace idem {

/// The idempotency key of one business intent. Both parts are opaque bytes: NUL and non-UTF-8
/// bytes are kept exactly. The same id from two principals names two intents.
struct Key {
  std::string_view id;         // the client's key ("order-42", a header value, ...)
  std::string_view principal;  // the caller or tenant; empty when there is none

  Key(std::string_view key_id, std::string_view key_principal = {})  // NOLINT: implicit
      : id(key_id), principal(key_principal) {}
  Key(const std::string& key_id) : id(key_id) {}  // NOLINT: implicit
  Key(const char* key_id) : id(key_id) {}         // NOLINT: implicit

  friend bool operator==(const Key&, const Key&) = default;
};

}  // namespace idem
