// Redis Cluster routing without I/O (slot_routing.hpp): key slots, redirections, slot maps.

#include "slot_routing.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace idem::redis {

namespace {

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), Redis Cluster's key hash.
constexpr std::array<std::uint16_t, 256> kCrc16 = [] {
  std::array<std::uint16_t, 256> table{};
  for (unsigned i = 0; i < 256; ++i) {
    auto crc = static_cast<std::uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit) {
      crc = static_cast<std::uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    table[i] = crc;
  }
  return table;
}();

std::uint16_t crc16(std::string_view bytes) noexcept {
  std::uint16_t crc = 0;
  for (const char c : bytes) {
    crc = static_cast<std::uint16_t>((crc << 8) ^
                                     kCrc16[((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xff]);
  }
  return crc;
}

}  // namespace

std::uint16_t key_slot(std::string_view key) noexcept {
  const auto open = key.find('{');
  if (open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<std::uint16_t>(crc16(key) & (kSlots - 1));
}

std::string node_address(std::string_view host, int port) {
  return host.find(':') != std::string_view::npos ? fmt::format("[{}]:{}", host, port)
                                                  : fmt::format("{}:{}", host, port);
}

std::optional<std::vector<SlotRange>> parse_cluster_slots(const redisReply& r,
                                                          std::string_view from_host) {
  if (r.type != REDIS_REPLY_ARRAY) return std::nullopt;
  std::vector<SlotRange> ranges;
  ranges.reserve(r.elements);
  for (std::size_t i = 0; i < r.elements; ++i) {
    const redisReply& range = *r.element[i];
    if (range.type != REDIS_REPLY_ARRAY || range.elements < 3 ||
        range.element[0]->type != REDIS_REPLY_INTEGER ||
        range.element[1]->type != REDIS_REPLY_INTEGER ||
        range.element[2]->type != REDIS_REPLY_ARRAY || range.element[2]->elements < 2) {
      return std::nullopt;
    }
    const long long first = range.element[0]->integer;
    const long long last = range.element[1]->integer;
    const redisReply& primary = *range.element[2];
    if (first < 0 || last < first || last >= static_cast<long long>(kSlots) ||
        primary.element[1]->type != REDIS_REPLY_INTEGER) {
      return std::nullopt;
    }
    std::string host = primary.element[0]->type == REDIS_REPLY_STRING
                           ? std::string(text(*primary.element[0]))
                           : std::string{};
    if (host.empty() || host == "?") host = std::string(from_host);
    ranges.push_back(SlotRange{.first = static_cast<std::uint16_t>(first),
                               .last = static_cast<std::uint16_t>(last),
                               .host = std::move(host),
                               .port = static_cast<int>(primary.element[1]->integer)});
  }
  return ranges;
}

std::optional<Redirect> parse_redirect(const redisReply& reply) {
  Redirect r;
  std::string_view rest;
  if (is_error(reply, "MOVED ")) {
    rest = text(reply).substr(6);
  } else if (is_error(reply, "ASK ")) {
    r.ask = true;
    rest = text(reply).substr(4);
  } else {
    return std::nullopt;
  }
  const auto space = rest.find(' ');
  const auto colon = rest.rfind(':');
  if (space == std::string_view::npos || colon == std::string_view::npos || colon < space) {
    return std::nullopt;
  }
  unsigned slot = 0;
  const std::string_view slot_text = rest.substr(0, space);
  const std::string_view port_text = rest.substr(colon + 1);
  if (std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), slot).ec !=
          std::errc{} ||
      slot >= kSlots ||
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), r.port).ec !=
          std::errc{}) {
    return std::nullopt;
  }
  r.slot = static_cast<std::uint16_t>(slot);
  std::string_view host = rest.substr(space + 1, colon - space - 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  r.host = std::string(host);
  return r;
}

std::vector<ConnectionOptions> cluster_seeds(const ConnectionOptions& node,
                                             std::span<const std::string> seeds,
                                             const OptionNames& names) {
  const auto refuse = [&](std::string_view why) {
    return std::invalid_argument(fmt::format("idem::{}: a cluster {}", names.owner, why));
  };
  if (node.db != 0) throw refuse(fmt::format("has only database 0 ({}.db)", names.node));
  if (!node.unix_socket.empty()) {
    throw refuse(fmt::format("is reached over TCP ({}.unix_socket must be empty)", names.node));
  }
  if (seeds.empty()) throw refuse(fmt::format("needs seed nodes ({} is empty)", names.seeds));
  std::vector<ConnectionOptions> out;
  for (const std::string& seed : seeds) {
    Result<ConnectionOptions> parsed = ConnectionOptions::from_uri("redis://" + seed);
    if (!parsed || parsed->db != 0) throw refuse(fmt::format("seed '{}' is not host:port", seed));
    out.push_back(std::move(parsed).value());
  }
  return out;
}

}  // namespace idem::redis
