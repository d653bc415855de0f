// The parts of idem::GrpcGuard that depend on neither the guard nor the message types.
#include "idem/grpc.hpp"

#include <grpcpp/security/auth_context.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <stdexcept>

#include "idem/codecs/protobuf.hpp"
#include "idem/engine/engine.hpp"
#include "idem/key_text.hpp"

namespace idem {

// errc_table names gRPC's codes by their numbers, without gRPC's headers.
static_assert(detail::grpc_code::invalid_argument ==
              static_cast<int>(::grpc::StatusCode::INVALID_ARGUMENT));
static_assert(detail::grpc_code::failed_precondition ==
              static_cast<int>(::grpc::StatusCode::FAILED_PRECONDITION));
static_assert(detail::grpc_code::aborted == static_cast<int>(::grpc::StatusCode::ABORTED));
static_assert(detail::grpc_code::internal == static_cast<int>(::grpc::StatusCode::INTERNAL));
static_assert(detail::grpc_code::unavailable == static_cast<int>(::grpc::StatusCode::UNAVAILABLE));
static_assert(detail::grpc_code::data_loss == static_cast<int>(::grpc::StatusCode::DATA_LOSS));

::grpc::StatusCode grpc_status(std::error_code ec) noexcept {
  if (!ec) return ::grpc::StatusCode::OK;
  const ErrcFacts* facts = facts_of(ec);
  return facts ? static_cast<::grpc::StatusCode>(facts->grpc_status) : ::grpc::StatusCode::INTERNAL;
}

bool grpc_retryable(::grpc::StatusCode code) noexcept {
  return code == ::grpc::StatusCode::ABORTED || code == ::grpc::StatusCode::UNAVAILABLE;
}

GrpcPrincipal principal_from_metadata(std::string name) {
  return [name = std::move(name)](const ::grpc::ServerContextBase& context) {
    const auto& metadata = context.client_metadata();
    const auto [first, last] = metadata.equal_range(::grpc::string_ref(name));
    if (first == last) return std::string{};
    // Two entries: one may be the client's own beside the proxy's, so neither is the caller.
    if (std::next(first) != last) {
      throw Error(make_error_code(errc::key_invalid),
                  "the call has two '" + name + "' entries: its principal must be one");
    }
    return std::string(first->second.data(), first->second.size());
  };
}

GrpcPrincipal principal_from_peer_identity() {
  return [](const ::grpc::ServerContextBase& context) {
    const std::shared_ptr<const ::grpc::AuthContext> auth = context.auth_context();
    if (!auth || !auth->IsPeerAuthenticated()) return std::string{};
    return detail::peer_identity_principal(auth->GetPeerIdentity());
  };
}

namespace detail {

std::string peer_identity_principal(const std::vector<::grpc::string_ref>& names) {
  std::string principal;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i != 0) principal += ',';
    for (const char c : names[i]) {
      if (c == ',' || c == '\\') principal += '\\';
      principal += c;
    }
  }
  return principal;
}

namespace {

constexpr std::string_view kBinarySuffix = "-bin";

bool starts_with(const ::grpc::string_ref& s, std::string_view prefix) {
  return s.size() >= prefix.size() && std::string_view(s.data(), prefix.size()) == prefix;
}

::grpc::Status invalid(const std::string& message) {
  return {::grpc::StatusCode::INVALID_ARGUMENT, message};
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffU));
}
std::uint32_t get_u32(std::string_view in) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(in[static_cast<std::size_t>(i)]))
         << (8 * i);
  }
  return v;
}

// A stored status: the tag, code and message length (4 bytes each, little-endian), the message,
// the details.
bool decode_status(std::string_view bytes, ::grpc::Status& status) {
  if (bytes.size() < 9) return false;
  const std::uint32_t code = get_u32(bytes.substr(1, 4));
  const std::uint32_t length = get_u32(bytes.substr(5, 4));
  if (code == 0 || code > static_cast<std::uint32_t>(::grpc::StatusCode::UNAUTHENTICATED) ||
      length > bytes.size() - 9) {
    return false;
  }
  status =
      ::grpc::Status(static_cast<::grpc::StatusCode>(code), std::string(bytes.substr(9, length)),
                     std::string(bytes.substr(9 + length)));
  return true;
}

// Protobuf's wire format, for the few fields of google.rpc.Status written below.
void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80U) {
    out.push_back(static_cast<char>((v & 0x7fU) | 0x80U));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_varint_field(std::string& out, std::uint32_t field, std::uint64_t v) {
  put_varint(out, std::uint64_t{field} << 3U);
  put_varint(out, v);
}
void put_bytes_field(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_varint(out, (std::uint64_t{field} << 3U) | 2U);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// gRPC's rich error model: a google.rpc.Status whose one detail is a RetryInfo of `delay`.
std::string retry_info_status(::grpc::StatusCode code, const std::string& message,
                              std::chrono::milliseconds delay) {
  std::string duration;  // google.protobuf.Duration
  const auto seconds = static_cast<std::uint64_t>(delay.count() / 1000);
  const auto nanos = static_cast<std::uint64_t>(delay.count() % 1000) * 1000000U;
  if (seconds != 0) put_varint_field(duration, 1, seconds);
  if (nanos != 0) put_varint_field(duration, 2, nanos);
  std::string retry_info;
  put_bytes_field(retry_info, 1, duration);
  return grpc_status_details(code, message, kGrpcRetryInfoType, retry_info);
}

}  // namespace

GrpcKey read_grpc_key(const ::grpc::ServerContextBase& context, const GrpcOptions& options) {
  const std::string_view name = options.key_metadata;
  const auto& metadata = context.client_metadata();
  // Sorted by name: the key's entries, then every name it begins, its "-bin" twin among them.
  auto it = metadata.lower_bound(::grpc::string_ref(name.data(), name.size()));
  std::size_t count = 0;
  std::string_view id;
  bool binary = false;
  for (; it != metadata.end() && starts_with(it->first, name); ++it) {
    const std::string_view entry(it->first.data(), it->first.size());
    if (entry.size() == name.size()) {
      ++count;
      id = std::string_view(it->second.data(), it->second.size());
    } else if (entry.substr(name.size()) == kBinarySuffix) {
      binary = true;
    }
  }
  GrpcKey key;
  if (binary) {
    key.refused = invalid("the idempotency key was sent as binary metadata '" + std::string(name) +
                          std::string(kBinarySuffix) + "'; send it as ASCII metadata '" +
                          std::string(name) + "'");
  } else if (count > 1) {
    key.refused = invalid(std::to_string(count) + " '" + std::string(name) +
                          "' metadata entries; send exactly one idempotency key");
  } else if (count == 0 && options.require_key) {
    key.refused = invalid("missing '" + std::string(name) +
                          "' metadata: this method needs an idempotency key");
  } else if (count == 1 && key_text(id).empty()) {
    key.refused = invalid("the '" + std::string(name) + "' metadata is empty or blank");
  } else {
    key.present = count == 1;
    key.id = key_text(id);  // " k", "k " and "k" are one key, as over HTTP
  }
  return key;
}

void check_grpc_options(const GrpcOptions& options) {
  const std::string& name = options.key_metadata;
  const bool legal = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
  });
  if (!legal) {
    throw std::invalid_argument("idem::GrpcOptions::key_metadata '" + name +
                                "' is not a lowercase ASCII metadata name");
  }
  if (name.size() >= kBinarySuffix.size() &&
      std::string_view(name).substr(name.size() - kBinarySuffix.size()) == kBinarySuffix) {
    throw std::invalid_argument("idem::GrpcOptions::key_metadata '" + name +
                                "' names a binary entry; the key is ASCII metadata");
  }
  if (name.rfind("grpc-", 0) == 0) {
    throw std::invalid_argument("idem::GrpcOptions::key_metadata '" + name +
                                "': names starting with grpc- are gRPC's own");
  }
  if (options.deadline_grace.count() < 0 || options.max_lease.count() <= 0) {
    throw std::invalid_argument(
        "idem::GrpcOptions: deadline_grace must not be negative and max_lease must be positive");
  }
}

std::chrono::milliseconds grpc_call_lease(const ::grpc::ServerContextBase& context,
                                          const GrpcOptions& options) {
  using std::chrono::milliseconds;
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return milliseconds{0};
  const auto left = deadline - std::chrono::system_clock::now();
  if (left <= decltype(left)::zero()) return milliseconds{-1};
  return std::min(std::chrono::ceil<milliseconds>(left) + options.deadline_grace,
                  options.max_lease);
}

std::string encode_grpc_status(const ::grpc::Status& status) {
  const std::string& message = status.error_message();
  const std::string& details = status.error_details();
  std::string out;
  out.reserve(9 + message.size() + details.size());
  out.push_back(kGrpcStatusTag);
  put_u32(out, static_cast<std::uint32_t>(status.error_code()));
  put_u32(out, static_cast<std::uint32_t>(message.size()));
  out += message;
  out += details;
  return out;
}

void append_grpc_response(const google::protobuf::MessageLite& response, std::string& out) {
  out.push_back(kGrpcResponseTag);
  protobuf::append_deterministic(response, out);
}

::grpc::Status grpc_replay(::grpc::ServerContextBase& context, const std::string& bytes,
                           google::protobuf::MessageLite& response) {
  ::grpc::Status status;
  bool readable = false;
  if (!bytes.empty() && bytes[0] == kGrpcResponseTag) {
    readable = response.ParseFromArray(bytes.data() + 1, static_cast<int>(bytes.size() - 1));
  } else if (!bytes.empty() && bytes[0] == kGrpcStatusTag) {
    readable = decode_status(bytes, status);
  }
  if (!readable) {
    response.Clear();
    return {::grpc::StatusCode::DATA_LOSS, "the stored reply (" + std::to_string(bytes.size()) +
                                               " bytes) is not a " + response.GetTypeName() +
                                               " message or a status"};
  }
  context.AddTrailingMetadata(std::string(kGrpcReplayedMetadata), "true");
  return status;
}

::grpc::Status grpc_refusal(::grpc::ServerContextBase& context, std::error_code error,
                            const std::string& message, std::chrono::milliseconds retry_after,
                            bool replayed) {
  if (replayed) context.AddTrailingMetadata(std::string(kGrpcReplayedMetadata), "true");
  const ::grpc::StatusCode code = grpc_status(error);
  if (error == errc::in_progress && retry_after.count() > 0) {
    const std::string ms = std::to_string(retry_after.count());
    context.AddTrailingMetadata(std::string(kGrpcRetryAfterMetadata), ms);
    // gRPC's own retry policy waits this long before its next attempt (instead of its backoff).
    context.AddTrailingMetadata(std::string(kGrpcRetryPushbackMetadata), ms);
    return {code, message, retry_info_status(code, message, retry_after)};
  }
  return {code, message};
}

std::string exception_text(const std::exception_ptr& error) {
  return exception_message(error, "an exception that is not a std::exception");
}

::grpc::Status grpc_handler_threw(const std::exception_ptr& error, std::error_code settled) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {grpc_status(e.code()), e.what()};
  } catch (...) {
    const ::grpc::StatusCode code = settled ? grpc_status(settled) : ::grpc::StatusCode::INTERNAL;
    return {code, "the handler threw: " + exception_text(error)};
  }
}

bool is_release_code(const GrpcOptions& options, ::grpc::StatusCode code) noexcept {
  return std::find(options.release_codes.begin(), options.release_codes.end(), code) !=
         options.release_codes.end();
}

}  // namespace detail

std::string grpc_status_details(::grpc::StatusCode code, std::string_view message,
                                std::string_view detail_type, std::string_view detail) {
  std::string status;  // google.rpc.Status
  if (code != ::grpc::StatusCode::OK) {
    detail::put_varint_field(status, 1, static_cast<std::uint64_t>(code));
  }
  if (!message.empty()) detail::put_bytes_field(status, 2, message);
  if (!detail_type.empty()) {
    std::string any;  // google.protobuf.Any
    detail::put_bytes_field(any, 1, detail_type);
    if (!detail.empty()) detail::put_bytes_field(any, 2, detail);
    detail::put_bytes_field(status, 3, any);
  }
  return status;
}

}  // namespace idem
