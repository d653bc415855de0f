#pragma once
// What is behind idem::redis::Client: a router over per-server executors (node.hpp). One server,
// or a Redis Cluster's nodes picked by each key's hash slot. The stores call eval() and nothing
// else: no store borrows a connection. Internal to idem_redis.

#include <memory>
#include <span>
#include <string_view>

#include "cluster.hpp"
#include "idem/redis/client.hpp"
#include "idem/result.hpp"
#include "node.hpp"

namespace idem::redis {

class Client::Impl {
 public:
  explicit Impl(ConnectionOptions options);
  explicit Impl(ClusterOptions options);
  ~Impl();

  /// The stores' single call path: `EVALSHA script 1 key args...` on the server that holds
  /// `key`. With `durability` asking for replicas, a reply that `wrote` accepts is followed by
  /// WAIT on the same connection (Answer::acknowledged). Error replies are failures
  /// (error_reply_failure); I/O failures and timeouts are errc::store_unavailable, or, with
  /// `report_in_doubt` (commits), errc::outcome_unknown once the script went out.
  Result<Answer> eval(const Script& script, std::string_view key,
                      std::span<const std::string_view> args,
                      const Durability* durability = nullptr,
                      bool (*wrote)(const redisReply&) = nullptr, bool report_in_doubt = false);

  /// `EVALSHA script <n> keys... args...` on the server that holds keys[0]; every key must be
  /// in its slot (a batch grouped by key_slot). As eval() otherwise.
  Result<Answer> eval_keys(const Script& script, std::span<const std::string_view> keys,
                           std::span<const std::string_view> args,
                           const Durability* durability = nullptr,
                           bool (*wrote)(const redisReply&) = nullptr,
                           bool report_in_doubt = false);

  /// A blocking command on the server that holds `key` (Call::blocks_for): `first`, then
  /// `blocking`, which blocks up to `blocks_for`, in one write on a connection of the server's
  /// wait pool; the answer is blocking's reply, error replies included.
  Result<Answer> block(std::string_view key, std::span<const std::string_view> first,
                       std::span<const std::string_view> blocking,
                       std::chrono::milliseconds blocks_for);

  /// A command on the server that holds `key`. Error replies come back as replies.
  Result<Answer> command(std::string_view key, std::span<const std::string_view> argv);

  Status ping();
  bool is_cluster() const noexcept { return cluster_ != nullptr; }
  const ConnectionOptions& options() const noexcept;
  std::size_t open_connections() const;
  std::uint64_t dropped() const noexcept;
  StoreStats stats() const;

 private:
  // Sends `call` to the server that holds `key`.
  Result<Answer> route(std::string_view key, const Call& call);

  std::unique_ptr<Node> node_;        // one server
  std::unique_ptr<Cluster> cluster_;  // or a cluster's nodes
};

/// What is behind `client`: for idem's Redis stores only, which is why Client has no public
/// accessor.
inline Client::Impl& impl_of(Client& client) noexcept { return *client.impl_; }

}  // namespace idem::redis
