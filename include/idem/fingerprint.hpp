#pragma once
// Fingerprint: a 128-bit hash of a request payload, stored at claim to tell replays from misuse.
// XXH3 is compiled once in idem::idem, so no xxhash configuration macro reaches the includer.

#include <xxhash.h>

#include <cstdint>
#include <string_view>

namespace idem {

struct Fingerprint {
  std::uint64_t high = 0;
  std::uint64_t low = 0;

  friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
};

/// How a payload becomes a fingerprint. Any 128-bit hash with good collision resistance serves.
using PayloadHash = Fingerprint (*)(std::string_view payload);

/// The default payload hash: XXH3-128, tens of GB/s and no allocation.
inline Fingerprint xxh3_128(std::string_view payload) noexcept {
  const XXH128_hash_t h = XXH3_128bits(payload.data(), payload.size());
  return Fingerprint{h.high64, h.low64};
}

namespace detail {
/// 64-bit hash of a key, used for shard choice and hash tables.
inline std::uint64_t hash_bytes(std::string_view bytes) noexcept {
  return XXH3_64bits(bytes.data(), bytes.size());
}
}  // namespace detail

}  // namespace idem
