#include "request_identity.hpp"

#include <openssl/evp.h>

#include <array>
#include <stdexcept>
#include <string_view>

namespace idem::proxy {

namespace {

std::string sha256_hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("idem-proxy: SHA-256 failed");
  }
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string out;
  out.reserve(std::size_t{2} * size);
  for (unsigned int i = 0; i < size; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

// The length in decimal, a colon, then the bytes: "5:hello".
void append_field(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out.push_back(':');
  out.append(field);
}

}  // namespace

std::string principal_of(const ProxyRequest& request, const PrincipalConfig& config) {
  switch (config.from) {
    case PrincipalSource::none:
      return {};
    case PrincipalSource::header: {
      const auto values = request.values(config.header);
      if (values.empty()) return {};
      std::string joined;
      for (const std::string_view v : values) append_field(joined, v);
      return "h:" + sha256_hex(joined);
    }
    case PrincipalSource::client_certificate:
      return request.client_subject.empty() ? std::string{}
                                            : "c:" + sha256_hex(request.client_subject);
  }
  return {};
}

std::string payload_of(const ProxyRequest& request, const std::vector<std::string>& headers) {
  std::string out;
  out.reserve(request.body.size() + request.target.size() + 64);
  append_field(out, request.method);
  append_field(out, request.path);
  append_field(out, request.query);
  out += std::to_string(headers.size());
  out.push_back('h');
  for (const std::string& name : headers) {
    const auto values = request.values(name);
    out += std::to_string(values.size());
    out.push_back('v');
    for (const std::string_view v : values) append_field(out, v);
  }
  append_field(out, request.body);
  return out;
}

}  // namespace idem::proxy
