#pragma once
// What the version and state-machine stores share: identifier checks, the conditional-update
// request their backends answer, the operation's key, and the engine target over a backend.

#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "idem/engine/effective_key.hpp"
#include "idem/error.hpp"
#include "idem/fingerprint.hpp"
#include "idem/key.hpp"
#include "idem/options.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

/// The user's table an entity store works on: its name, the id column and the version (or
/// state) column. Each name must be an identifier of at most 63 bytes (std::invalid_argument
/// when the store is built); names never come from requests.
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

/// The key an entity operation is recorded under: the effective key of (scope, no principal,
/// varint(|entity|) entity varint(|op|) op), so no two triples give the same bytes. Each call of
/// an entity store builds one; it neither moves nor copies, so its view() stays valid for the
/// object's life.
class EntityOpKey {
 public:
  EntityOpKey(std::string_view scope, std::string_view entity, std::string_view op)
      : bytes_(max_size(scope, entity, op)) {
    bytes_.resize(encode(bytes_.data(), scope, entity, op));
  }
  EntityOpKey(const EntityOpKey&) = delete;
  EntityOpKey& operator=(const EntityOpKey&) = delete;
  EntityOpKey(EntityOpKey&&) = delete;
  EntityOpKey& operator=(EntityOpKey&&) = delete;

  std::string_view view() const noexcept { return bytes_.view(); }

  // The most bytes the key of these parts can take (the id's two varints at their largest).
  static constexpr std::size_t max_size(std::string_view scope, std::string_view entity,
                                        std::string_view op) noexcept {
    constexpr std::size_t kMaxVarint = 10;
    return EffectiveKey::max_size(scope, {}, {}) + kMaxVarint * 2 + entity.size() + op.size();
  }
  // Writes the key's bytes to `out` (room for max_size) and returns how many.
  static std::size_t encode(char* out, std::string_view scope, std::string_view entity,
                            std::string_view op) noexcept {
    std::size_t n = EffectiveKey::encode(out, scope, {}, {});
    for (std::string_view part : {entity, op}) {
      n += put_varint(out + n, part.size());
      if (!part.empty()) std::memcpy(out + n, part.data(), part.size());  // within max_size
      n += part.size();
    }
    return n;
  }

 private:
  KeyBytes bytes_;
};

/// EntityOpKey's bytes in a string.
inline std::string entity_op_key(std::string_view scope, std::string_view entity,
                                 std::string_view op) {
  return std::string(EntityOpKey(scope, entity, op).view());
}

/// Reads a varint written by put_varint at `at`, advancing it; nullopt when there is none.
inline std::optional<std::size_t> get_varint(std::string_view in, std::size_t& at) noexcept {
  std::size_t value = 0;
  for (unsigned shift = 0; at < in.size() && shift < 64; shift += 7) {
    const auto byte = static_cast<unsigned char>(in[at++]);
    value |= static_cast<std::size_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return value;
  }
  return std::nullopt;
}

/// A backend whose entities the store creates itself (memory: put()), not the user's table.
template <class Impl>
concept PutsEntities = requires(Impl& impl, std::string_view entity, std::string value) {
  impl.put(entity, std::move(value));
};

/// A backend with a schema of its own to create (SQL: the op log).
template <class Impl>
concept HasEntitySchema = requires(Impl& impl) {
  { impl.ensure_schema() } -> std::same_as<Status>;
};

/// What the engine claims for an entity store: one operation on one entity, as a conditional
/// update of the entity (CasRequest) plus its op-log row; a refusal comes back typed from
/// `refuse(current)`.
template <class Impl, class Refuse>
class EntityTarget {
 public:
  static constexpr bool kRewindable = true;

  EntityTarget(Impl& impl, const Options& options, std::string_view entity, std::string_view op,
               CasRequest shape, std::chrono::milliseconds block_for, Refuse refuse)
      : impl_(&impl),
        options_(&options),
        op_key_(options.scope, entity, op),
        shape_(shape),
        refuse_(std::move(refuse)) {
    shape_.entity = entity;
    shape_.block_for = block_for;
    shape_.lease = options.lease;
    shape_.rewindable = options.remember_failures;
    if (options.observer) entity_.assign(entity);
  }

  Result<Claim> claim() {
    CasRequest cas = shape_;
    cas.op_key = op_key_.view();
    Result<CasAnswer> answer = impl_->claim(cas);
    if (!answer) return std::move(answer).failure();
    CasAnswer& a = answer.value();
    switch (a.refusal) {
      case CasAnswer::Refusal::none:
        return std::move(a.claim);
      case CasAnswer::Refusal::missing:
        return make_failure(errc::key_invalid, "no entity '" + std::string(shape_.entity) + "'");
      case CasAnswer::Refusal::conflict:
        break;
    }
    return refuse_(a.current);
  }
  Status commit(Fence fence, ClaimStatus status, std::string_view bytes) {
    return impl_->commit(ticket(fence), Completion{status, bytes, *options_->ttl});
  }
  Status abort(Fence fence) { return impl_->abort(ticket(fence)); }
  Status extend(Fence fence, std::chrono::milliseconds lease) {
    return impl_->extend(ticket(fence), lease);
  }
  Status rewind(Fence fence) { return impl_->rewind(ticket(fence)); }
  void abandon() noexcept {}

  std::string_view scope() const noexcept { return options_->scope; }
  std::string_view key_id() const noexcept { return entity_; }
  static std::string refusal_message(errc) { return {}; }
  std::chrono::milliseconds lease() const noexcept { return options_->lease; }
  Impl& context_store() const noexcept { return *impl_; }
  /// The operation's key: the backend finds the held operation by it and the fence.
  Ticket ticket(Fence fence) const noexcept { return Ticket{op_key_.view(), fence}; }

 private:
  Impl* impl_;
  const Options* options_;
  EntityOpKey op_key_;
  CasRequest shape_;
  Refuse refuse_;
  std::string entity_;  // for observers, kept only when there is one
};

}  // namespace detail
}  // namespace idem
