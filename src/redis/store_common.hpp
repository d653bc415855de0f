#pragma once
// What the Redis stores share: key names, argument encoding and reply decoding.

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "client_impl.hpp"
#include "idem/fingerprint.hpp"
#include "idem/store.hpp"

namespace idem::redis {

/// `<prefix>{<16 hex digits of XXH3-64(key)>}<key>`: the tag picks the cluster slot and is
/// brace-free whatever the key holds; the raw bytes after it keep every key distinct.
std::string tagged_key(std::string_view prefix, std::string_view key);

/// The fingerprint as 16 bytes, high half first.
std::array<char, 16> fingerprint_bytes(const Fingerprint& fp) noexcept;

/// Milliseconds as decimal text, at least 1 (Redis refuses PX 0, and PEXPIRE 0 deletes).
std::string_view ms_text(char (&buf)[24], std::chrono::milliseconds ms) noexcept;

/// Decodes a claim script's reply ({code, fence, ...}, see record_claim.lua). Codes 0-4 become
/// a Claim; `code` tells the caller which one came back (5 and 6 are the token script's own).
Result<Claim> decode_claim(const redisReply& reply, std::string_view where, int& code);

/// Decodes a fenced script's reply: 1 is success, 0 is errc::lease_lost.
Status decode_fenced(Result<ReplyPtr> reply, std::string_view where, std::string_view doing);

}  // namespace idem::redis
