#pragma once
// codec<M> for every protobuf message type M, part of idem::grpc: protobuf's deterministic
// serialisation, so one message always gives the same bytes (a result or a payload compares byte
// for byte). decode() throws idem::Error(errc::record_corrupt), naming M, on bytes that are not M.

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/message_lite.h>

#include <climits>
#include <string>
#include <string_view>
#include <type_traits>

#include "idem/codec.hpp"
#include "idem/error.hpp"

namespace idem::protobuf {

/// Appends the deterministic serialisation of `message` to `out`. Throws idem::Error:
/// result_too_large past protobuf's 2 GiB, record_corrupt missing a proto2 required field.
inline void append_deterministic(const google::protobuf::MessageLite& message, std::string& out) {
  const std::size_t size = message.ByteSizeLong();
  if (size > static_cast<std::size_t>(INT_MAX)) {
    throw Error(make_error_code(errc::result_too_large), message.GetTypeName() + " is " +
                                                             std::to_string(size) +
                                                             " bytes, over protobuf's 2 GiB limit");
  }
  if (!message.IsInitialized()) {
    throw Error(
        make_error_code(errc::record_corrupt),
        message.GetTypeName() + " misses required fields: " + message.InitializationErrorString());
  }
  const std::size_t start = out.size();
  out.resize(start + size);
  google::protobuf::io::ArrayOutputStream array(out.data() + start, static_cast<int>(size));
  google::protobuf::io::CodedOutputStream coded(&array);
  coded.SetSerializationDeterministic(true);
  message.SerializeWithCachedSizes(&coded);  // the sizes ByteSizeLong() just cached
}

/// The deterministic serialisation of `message`: the same message, the same bytes.
inline std::string deterministic_bytes(const google::protobuf::MessageLite& message) {
  std::string out;
  append_deterministic(message, out);
  return out;
}

/// Parses `bytes` into `message` (cleared first); throws idem::Error(errc::record_corrupt)
/// naming the message type when they are not one.
inline void parse_or_throw(std::string_view bytes, google::protobuf::MessageLite& message) {
  if (bytes.size() > static_cast<std::size_t>(INT_MAX) ||
      !message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    throw Error(make_error_code(errc::record_corrupt),
                "stored bytes (" + std::to_string(bytes.size()) + ") are not a valid " +
                    message.GetTypeName() + " message");
  }
}

}  // namespace idem::protobuf

namespace idem {

/// Any protobuf message, full or lite.
template <class M>
struct codec<M, std::enable_if_t<std::is_base_of_v<google::protobuf::MessageLite, M>>> {
  static std::string encode(const M& message) { return protobuf::deterministic_bytes(message); }
  static M decode(std::string_view bytes) {
    M message;
    protobuf::parse_or_throw(bytes, message);
    return message;
  }
};

}  // namespace idem
