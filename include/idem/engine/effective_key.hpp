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

/// Bytes written once and read through view(): on the stack up to 256, on the heap beyond.
/// Moving copies inline bytes and moves a heap buffer, so a view taken before a move dangles.
class KeyBytes {
 public:
  // Room for at most `most` bytes; write them to data(), then say how many with resize().
  explicit KeyBytes(std::size_t most) {
    if (most > inline_.size()) {
      heap_ = std::make_unique<char[]>(most);  // NOLINT(modernize-avoid-c-arrays): run-time size
      data_ = heap_.get();
    } else {
      data_ = inline_.data();
    }
  }
  KeyBytes(const KeyBytes&) = delete;
  KeyBytes& operator=(const KeyBytes&) = delete;
  KeyBytes(KeyBytes&& other) noexcept : heap_(std::move(other.heap_)), size_(other.size_) {
    if (heap_) {
      data_ = heap_.get();
    } else {
      if (size_ != 0) std::memcpy(inline_.data(), other.data_, size_);
      data_ = inline_.data();
    }
  }
  KeyBytes& operator=(KeyBytes&&) = delete;

  char* data() noexcept { return data_; }
  void resize(std::size_t n) noexcept { size_ = n; }
  std::string_view view() const noexcept { return {data_, size_}; }

 private:
  std::array<char, 256> inline_;
  // NOLINTNEXTLINE(modernize-avoid-c-arrays): its size is known at run time only
  std::unique_ptr<char[]> heap_;
  char* data_ = nullptr;
  std::size_t size_ = 0;
};

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

  EffectiveKey(std::string_view scope, std::string_view principal, std::string_view id)
      : bytes_(max_size(scope, principal, id)) {
    bytes_.resize(encode(bytes_.data(), scope, principal, id));
  }
  // Moved with the claim it names (idem::Attempt).
  EffectiveKey(EffectiveKey&&) noexcept = default;

  std::string_view view() const noexcept { return bytes_.view(); }

 private:
  static void append(char* out, std::size_t& n, std::string_view part) noexcept {
    if (!part.empty()) std::memcpy(out + n, part.data(), part.size());
    n += part.size();
  }

  KeyBytes bytes_;
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
