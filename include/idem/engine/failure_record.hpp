#pragma once
// How a failed record's bytes hold the failure it replays: an errc and a message.

#include <cstdint>
#include <string>
#include <string_view>

#include "idem/error.hpp"
#include "idem/result.hpp"

namespace idem::detail {

// One tag byte, then the errc as one byte, then the message. The tag keeps a failed record's
// bytes from ever parsing as something else by accident.
inline constexpr char kFailureTag = 'F';

inline std::string encode_failure(errc code, std::string_view message) {
  std::string out;
  out.reserve(2 + message.size());
  out.push_back(kFailureTag);
  out.push_back(static_cast<char>(static_cast<std::uint8_t>(code)));
  out.append(message);
  return out;
}

/// The failure a failed record replays, or record_corrupt when its bytes are not one.
inline Failure decode_failure(std::string_view bytes) {
  if (bytes.size() < 2 || bytes[0] != kFailureTag) {
    return make_failure(errc::record_corrupt, "failed record does not hold a failure");
  }
  const auto code = static_cast<std::uint8_t>(bytes[1]);
  // Codes after record_corrupt (outcome_unknown) describe a commit, never a recorded failure.
  if (code < static_cast<std::uint8_t>(errc::key_invalid) ||
      code > static_cast<std::uint8_t>(errc::record_corrupt)) {
    return make_failure(errc::record_corrupt, "failed record holds an unknown error code");
  }
  const auto e = static_cast<errc>(code);
  std::string message{make_error_code(e).message()};
  if (bytes.size() > 2) message.append(": ").append(bytes.substr(2));
  return Failure{make_error_code(e), std::move(message)};
}

}  // namespace idem::detail
