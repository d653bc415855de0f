// The gRPC integration: links idem::grpc (gRPC C++ and protobuf) and needs no server: the protobuf
// codec round-trips a message and refuses bytes that are not one, and the status mapping answers.
#include <google/protobuf/wrappers.pb.h>
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <idem/codecs/protobuf.hpp>
#include <idem/grpc.hpp>
#include <string>

int main() {
  google::protobuf::StringValue value;
  value.set_value("receipt-42");
  using Codec = idem::codec<google::protobuf::StringValue>;
  const bool round_trip = Codec::decode(Codec::encode(value)).value() == "receipt-42";
  bool refused = false;
  try {
    (void)Codec::decode(std::string("\xff\xff\xff", 3));
  } catch (const idem::Error& e) {
    refused = e.code() == idem::errc::record_corrupt;
  }
  const bool mapped = idem::grpc_status(idem::errc::in_progress) == grpc::StatusCode::ABORTED;
  const bool ok = round_trip && refused && mapped && !grpc::Version().empty();
  std::printf("idem::grpc consumer (gRPC %s): %s\n", grpc::Version().c_str(), ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
