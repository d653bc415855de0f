#pragma once
// What the version and state-machine stores share: the entity key carried through the guard's
// key, the conditional-update request their backends answer, identifier checks, and the claim
// and execute() wrapping around both.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "idem/detail/effective_key.hpp"
#include "idem/error.hpp"
#include "idem/fingerprint.hpp"
#include "idem/key.hpp"
#include "idem/store.hpp"

namespace idem {

/// The user's table an entity store works on: its name, the id column and the version (or
/// state) column. Every name must be an identifier, [A-Za-z_][A-Za-z0-9_]*, at most 63 bytes;
/// anything else is refused with std::invalid_argument when the store is built. Names are never
/// taken from requests.
struct EntityTable {
  std::string table{};
  std::string id_column = "id";
  std::string column{};  // the version or state column; empty: "version" or "state"
};

namespace detail {

/// True for [A-Za-z_][A-Za-z0-9_]{0,62}: safe to paste into SQL as a name.
inline bool is_identifier(std::string_view name) noexcept {
  if (name.empty() || name.size() > 63) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0)) return false;
  }
  return true;
}

inline void check_identifier(std::string_view what, const std::string& name) {
  if (!is_identifier(name)) {
    throw std::invalid_argument("idem: " + std::string(what) + " '" + name +
                                "' is not an identifier ([A-Za-z_][A-Za-z0-9_]*, at most 63 "
                                "bytes)");
  }
}

inline EntityTable with_default_column(EntityTable t, const char* column) {
  if (t.column.empty()) t.column = column;
  return t;
}

inline void check_table(const EntityTable& t) {
  check_identifier("table", t.table);
  check_identifier("id column", t.id_column);
  check_identifier("column", t.column);
}

enum class EntityKind : std::uint8_t { version, state };

/// The conditional update a backend runs as the claim.
struct CasRequest {
  std::string_view op_key;  // names the operation: its repeat replays the stored result
  std::string_view entity;
  Fingerprint fingerprint{};
  std::chrono::milliseconds lease{};
  std::chrono::milliseconds block_for{};
  std::uint64_t expected_version = 0;   // version: bump from this version
  std::span<const std::string> from{};  // state: move from one of these ...
  std::string_view to{};                // ... to this state
  bool rewindable = false;              // ClaimRequest::rewindable
};

/// The backend's answer: a claim (acquired, completed, failed, mismatch, in_progress), or a
/// refusal with the entity's current version (decimal) or state.
struct CasAnswer {
  enum class Refusal : std::uint8_t { none, conflict, missing } refusal = Refusal::none;
  Claim claim{};
  std::string current{};

  // Built through named objects: GCC 12 at -O3 warns falsely (-Wmaybe-uninitialized) on nested
  // designated-initializer temporaries that hold strings.
  static CasAnswer of(Claim claim) {
    CasAnswer a;
    a.claim = std::move(claim);
    return a;
  }
  static CasAnswer refused(Refusal why, std::string current = {}) {
    CasAnswer a;
    a.refusal = why;
    a.current = std::move(current);
    return a;
  }
};

// The guard's key id of an entity operation: varint(|entity|) entity varint(|op|) op tail. The
// op key (scope, principal, entity, op) is then a prefix of the effective key.
inline std::string encode_entity_id(std::string_view entity, std::string_view op,
                                    std::string_view tail) {
  std::string out(20 + entity.size() + op.size() + tail.size(), '\0');
  std::size_t n = put_varint(out.data(), entity.size());
  out.replace(n, entity.size(), entity);
  n += entity.size();
  n += put_varint(out.data() + n, op.size());
  out.replace(n, op.size(), op);
  n += op.size();
  out.replace(n, tail.size(), tail);
  n += tail.size();
  out.resize(n);
  return out;
}

inline std::optional<std::size_t> get_varint(std::string_view in, std::size_t& at) noexcept {
  std::size_t value = 0;
  for (unsigned shift = 0; at < in.size() && shift < 64; shift += 7) {
    const auto byte = static_cast<unsigned char>(in[at++]);
    value |= static_cast<std::size_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return value;
  }
  return std::nullopt;
}

struct EntityKeyParts {
  std::string_view op_key;
  std::string_view entity;
  std::string_view tail;  // version: the expected version in decimal; state: the event
};

/// Splits an effective key built from encode_entity_id(); nullopt when it is not one.
inline std::optional<EntityKeyParts> parse_entity_key(std::string_view key) noexcept {
  std::size_t at = 0;
  auto skip = [&]() -> std::optional<std::string_view> {
    const auto n = get_varint(key, at);
    if (!n || *n > key.size() - at) return std::nullopt;
    const std::string_view part = key.substr(at, *n);
    at += *n;
    return part;
  };
  if (!skip() || !skip()) return std::nullopt;  // scope, principal
  const auto entity = skip();
  if (!entity) return std::nullopt;
  if (!skip()) return std::nullopt;  // op
  return EntityKeyParts{key.substr(0, at), *entity, key.substr(at)};
}

// A refused claim's current version or state, for the execute() on the same thread that called
// the guard (the guard calls claim() synchronously on its caller's thread).
inline std::optional<std::string>& refusal_slot() noexcept {
  thread_local std::optional<std::string> slot;
  return slot;
}

/// Runs `guard` on an entity operation's key id. When the outcome is the `refusal` error,
/// `refused` receives the current version or state that the refused claim reported.
template <class Guard, class Fn>
auto execute_entity_op(Guard& guard, const std::string& id, std::string_view payload, Fn&& fn,
                       errc refusal, std::optional<std::string>& refused) {
  auto& slot = refusal_slot();
  slot.reset();
  auto out = guard.execute(Key{id}, payload, std::forward<Fn>(fn));
  if (out.error() == refusal && slot) refused = std::move(*slot);
  slot.reset();
  return out;
}

/// The CasRequest of a parsed entity key, without the version or transition it asks for.
inline CasRequest cas_request(const EntityKeyParts& parts, const ClaimRequest& request) noexcept {
  return CasRequest{.op_key = parts.op_key,
                    .entity = parts.entity,
                    .fingerprint = request.fingerprint,
                    .lease = request.lease,
                    .block_for = request.block_for,
                    .rewindable = request.rewindable};
}

/// An entity store's claim: the backend's conditional update. A missing entity is
/// errc::key_invalid ("no entity '<entity>' to <verb>"); on a conflict the current version or
/// state goes to refusal_slot() and `conflict(current)` gives the failure.
template <class Impl, class Conflict>
Result<Claim> claim_entity(Impl& impl, const CasRequest& cas, std::string_view verb,
                           Conflict&& conflict) {
  Result<CasAnswer> answer = impl.claim(cas);
  if (!answer) return std::move(answer).failure();
  CasAnswer& a = answer.value();
  switch (a.refusal) {
    case CasAnswer::Refusal::none:
      return std::move(a.claim);
    case CasAnswer::Refusal::missing:
      return make_failure(errc::key_invalid,
                          "no entity '" + std::string(cas.entity) + "' to " + std::string(verb));
    case CasAnswer::Refusal::conflict:
      break;
  }
  refusal_slot() = a.current;
  return conflict(a.current);
}

}  // namespace detail
}  // namespace idem
