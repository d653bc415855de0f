#pragma once
// One-time tokens: 128 bits from the OS CSPRNG as 22 base64url characters (the token stores).

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#if defined(__linux__) && __has_include(<sys/random.h>)
#include <sys/random.h>
#define IDEM_HAVE_GETRANDOM 1
#endif

#include "idem/observer.hpp"
#include "idem/options.hpp"
#include "idem/result.hpp"

namespace idem::detail {

inline constexpr std::size_t kTokenBytes = 16;
inline constexpr std::size_t kTokenChars = 22;  // ceil(128 / 6)
inline constexpr std::string_view kBase64Url =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Fills `out` from the OS CSPRNG: getrandom(2) where there is one, else /dev/urandom.
inline Status os_random(unsigned char* out, std::size_t n) {
#ifdef IDEM_HAVE_GETRANDOM
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::getrandom(out + got, n - got, 0);
    if (r > 0) {
      got += static_cast<std::size_t>(r);
    } else if (r < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // ENOSYS on old kernels: fall through to /dev/urandom
    }
  }
  if (got == n) return {};
#endif
  std::FILE* f = std::fopen("/dev/urandom", "rb");
  if (f == nullptr) return Status(errc::store_unavailable, "no OS random source for tokens");
  const std::size_t read = std::fread(out, 1, n, f);
  std::fclose(f);
  if (read != n) return Status(errc::store_unavailable, "short read from /dev/urandom");
  return {};
}

/// A fresh token: 16 random bytes as 22 base64url characters, no padding.
inline Result<std::string> random_token() {
  std::array<unsigned char, kTokenBytes> bytes{};
  if (Status s = os_random(bytes.data(), bytes.size()); !s) return s.failure();
  std::string out;
  out.reserve(kTokenChars);
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char b : bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kBase64Url[(acc >> bits) & 0x3f]);
    }
  }
  if (bits > 0) out.push_back(kBase64Url[(acc << (6 - bits)) & 0x3f]);
  return out;
}

/// Whether `token` could have come from random_token(): 22 base64url characters whose last one
/// carries 2 bits (A, Q, g or w). Anything else is refused without asking the store.
inline bool token_shaped(std::string_view token) noexcept {
  if (token.size() != kTokenChars) return false;
  for (char c : token) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  const char last = token.back();
  return last == 'A' || last == 'Q' || last == 'g' || last == 'w';
}

/// The refusal of a malformed token, told to the observer as the guard tells its refusals.
inline Failure malformed_token(const Options& options, std::string_view token) {
  Failure failure =
      make_failure(errc::token_invalid, "token is not one this service issued (malformed)");
  if (options.observer) {
    options.observer->notify(EventInfo{Event::rejected, options.scope, token, 0, failure.code});
  }
  return failure;
}

}  // namespace idem::detail
