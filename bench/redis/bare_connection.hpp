#pragma once
// The bare twin's own connection: what a plain hiredis client does (format the command, write
// it, read until a whole reply parses) on a blocking socket, through an OpenSSL session of its
// own with the same certificate settings as the guarded side when `tls.enabled`. hiredis 0.14
// has no TLS, and the twin must not use idem's own socket code, which is what it is measured
// against.

#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "idem/redis/client.hpp"

namespace idem_bench {

class BareConnection {
 public:
  BareConnection(const std::string& host, int port, const idem::redis::TlsOptions& tls) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) fail();
    fd_ = ::socket(found->ai_family, SOCK_STREAM, 0);
    if (fd_ < 0 || ::connect(fd_, found->ai_addr, found->ai_addrlen) != 0) fail();
    ::freeaddrinfo(found);
    const int on = 1;
    (void)::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    reader_ = redisReaderCreate();
    if (!tls.enabled) return;
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(ctx_, tls.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
    if (!tls.ca_file.empty() &&
        SSL_CTX_load_verify_locations(ctx_, tls.ca_file.c_str(), nullptr) != 1) {
      fail();
    }
    if (!tls.cert_file.empty() &&
        (SSL_CTX_use_certificate_chain_file(ctx_, tls.cert_file.c_str()) != 1 ||
         SSL_CTX_use_PrivateKey_file(ctx_, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1)) {
      fail();
    }
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    if (SSL_connect(ssl_) != 1) fail();
  }
  ~BareConnection() {
    redisReaderFree(reader_);
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    ::close(fd_);
  }
  BareConnection(const BareConnection&) = delete;
  BareConnection& operator=(const BareConnection&) = delete;

  /// Sends one command and returns its reply (the caller frees it); aborts on a failure.
  redisReply* command(int argc, const char** argv, const std::size_t* lens) {
    char* formatted = nullptr;
    const int size = redisFormatCommandArgv(&formatted, argc, argv, lens);
    if (size < 0) fail();
    write(std::string_view(formatted, static_cast<std::size_t>(size)));
    std::free(formatted);
    void* reply = nullptr;
    while (redisReaderGetReply(reader_, &reply) == REDIS_OK && reply == nullptr) read_some();
    if (reply == nullptr) fail();
    return static_cast<redisReply*>(reply);
  }

  /// Writes all of `bytes`; aborts on a failure.
  void write(std::string_view bytes) {
    while (!bytes.empty()) {
      const long n = ssl_ != nullptr ? SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()))
                                     : ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) fail();
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  /// Reads until at least one whole reply is in and returns every whole reply read (the caller
  /// frees them); aborts on a failure.
  std::vector<redisReply*> read_replies() {
    std::vector<redisReply*> replies;
    for (;;) {
      void* reply = nullptr;
      if (redisReaderGetReply(reader_, &reply) != REDIS_OK) fail();
      if (reply != nullptr) {
        replies.push_back(static_cast<redisReply*>(reply));
      } else if (replies.empty()) {
        read_some();
      } else {
        return replies;
      }
    }
  }

 private:
  [[noreturn]] static void fail() {
    std::fprintf(stderr, "bare twin: the connection failed\n");
    std::abort();
  }

  void read_some() {
    std::array<char, std::size_t{16} * 1024> buf;
    const long got = ssl_ != nullptr ? SSL_read(ssl_, buf.data(), static_cast<int>(buf.size()))
                                     : ::recv(fd_, buf.data(), buf.size(), 0);
    if (got <= 0 || redisReaderFeed(reader_, buf.data(), static_cast<std::size_t>(got)) != 0) {
      fail();
    }
  }

  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  redisReader* reader_ = nullptr;
};

}  // namespace idem_bench
