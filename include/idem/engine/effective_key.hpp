#pragma once
// The effective key: scope, principal and id joined so that no two triples give the same bytes.

#include <array>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace idem::detail {

/// Appends `n` as LEB128 (7 bits a byte, high bit = more follows). Returns bytes written.
inline std::size_t put_varint(char* out, std::size_t n) noexcept {
  std::size_t i = 0;
  do {
    auto byte = static_cast<unsigned char>(n & 0x7f);
    n >>= 7;
    if (n != 0) byte |= 0x80;
    out[i++] = static_cast<char>(byte);
  } while (n != 0);
  return i;
}

/// varint(|scope|) scope varint(|principal|) principal id. Lengths prefix every part but the
/// last, which runs to the end, so the join is unambiguous. Short keys live on the stack.
class EffectiveKey {
 public:
  // The most bytes the key of these parts can take (the lengths' varints at their largest).
  static constexpr std::size_t max_size(std::string_view scope, std::string_view principal,
                                        std::string_view id) noexcept {
    constexpr std::size_t kMaxVarint = 10;
    return kMaxVarint * 2 + scope.size() + principal.size() + id.size();
  }
  // Writes the key's bytes to `out` (room for max_size) and returns how many.
  static std::size_t encode(char* out, std::string_view scope, std::string_view principal,
                            std::string_view id) noexcept {
    std::size_t n = put_varint(out, scope.size());
    append(out, n, scope);
    n += put_varint(out + n, principal.size());
    append(out, n, principal);
    append(out, n, id);
    return n;
  }

  EffectiveKey(std::string_view scope, std::string_view principal, std::string_view id) {
    size_ = max_size(scope, principal, id);
    char* out = inline_.data();
    if (size_ > inline_.size()) {
      heap_ = std::make_unique<char[]>(size_);  // NOLINT(modernize-avoid-c-arrays): run-time size
      out = heap_.get();
    }
    data_ = out;
    size_ = encode(out, scope, principal, id);
  }

  EffectiveKey(const EffectiveKey&) = delete;
  EffectiveKey& operator=(const EffectiveKey&) = delete;
  // Moved with the claim it names (idem::Attempt): inline bytes are copied, a heap buffer moves.
  EffectiveKey(EffectiveKey&& other) noexcept : heap_(std::move(other.heap_)), size_(other.size_) {
    if (heap_) {
      data_ = heap_.get();
    } else {
      if (size_ != 0) std::memcpy(inline_.data(), other.data_, size_);
      data_ = inline_.data();
    }
  }
  EffectiveKey& operator=(EffectiveKey&&) = delete;

  std::string_view view() const noexcept { return {data_, size_}; }

 private:
  static void append(char* out, std::size_t& n, std::string_view part) noexcept {
    if (!part.empty()) std::memcpy(out + n, part.data(), part.size());
    n += part.size();
  }

  std::array<char, 256> inline_;
  // NOLINTNEXTLINE(modernize-avoid-c-arrays): its size is known at run time only
  std::unique_ptr<char[]> heap_;
  const char* data_ = nullptr;
  std::size_t size_ = 0;
};

/// The effective key in a string, for what keeps it in a heap frame anyway (the async engine's
/// coroutines), where EffectiveKey's inline buffer would only make the frame larger.
inline std::string effective_key_string(std::string_view scope, std::string_view principal,
                                        std::string_view id) {
  std::string out(EffectiveKey::max_size(scope, principal, id), '\0');
  out.resize(EffectiveKey::encode(out.data(), scope, principal, id));
  return out;
}

}  // namespace idem::detail
