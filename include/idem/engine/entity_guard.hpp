#pragma once
// What VersionStore and StateMachineStore share: the entity table, the guard's options and policy,
// and the run of one operation through the protocol engine.

#include <string>
#include <string_view>
#include <utility>

#include "idem/engine/engine.hpp"
#include "idem/engine/entity.hpp"
#include "idem/error.hpp"
#include "idem/guard.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store_stats.hpp"

namespace idem::detail {

template <class Backend>
class EntityGuard : public GuardBase {
 public:
  /// SQL backends: creates the op log if absent (the first claim does it), reading first so that
  /// it waits for nobody; call it to fail early at start-up.
  Status ensure_schema() requires HasEntitySchema<typename Backend::Impl> {
    return impl_.ensure_schema();
  }

  /// The store's own figures (idem/store_stats.hpp): SQL backends, their name ("sqlite",
  /// "postgres") and connection pool; memory, its name. No round trip.
  StoreStats stats() const noexcept { return impl_.stats(); }

 protected:
  /// Throws std::invalid_argument for a table or column name that is not an identifier, a bad
  /// table prefix, or guard options out of range.
  EntityGuard(const typename Backend::Options& backend, EntityKind kind, const EntityTable& table,
              Options guard, const OptionDefaults& defaults)
      : GuardBase(std::move(guard), defaults, {}), impl_(Backend::open(backend, kind, table)) {
    policy_.store_name = impl_.stats().store;  // observers' label: the backend's kStoreName
  }

  /// The operation's id in the op log: 'o' and the caller's operation id, or, when it gave none,
  /// `tag` and what the key implies (the expected version, the event). Built by append: GCC 12
  /// warns falsely (-Wrestrict) on "literal" + std::string.
  static std::string op_id(std::string_view operation, char tag, std::string_view implied) {
    std::string op(1, operation.empty() ? tag : 'o');
    op.append(operation.empty() ? implied : operation);
    return op;
  }

  /// errc::key_invalid when the entity and the operation id do not fit Options::max_key_size;
  /// otherwise no failure (no code).
  Failure check_length(std::string_view entity, std::string_view op) const {
    if (entity.size() + op.size() <= options_.max_key_size) return {};
    return make_failure(errc::key_invalid, "entity and operation are longer than " +
                                               std::to_string(options_.max_key_size) + " bytes");
  }

  /// Runs fn once as operation `op` on `entity`: claims the conditional update `shape` (its
  /// fingerprint taken of `payload`), refused through `refuse(current)`.
  template <class R, class Refuse, class Fn>
  Outcome<R> run(std::string_view entity, std::string_view op, CasRequest shape,
                 std::string_view payload, Refuse refuse, Fn& fn) {
    shape.fingerprint = options_.hash(payload);
    EntityTarget<typename Backend::Impl, Refuse> target(impl_, options_, entity, op, shape,
                                                        policy_.block_for(), std::move(refuse));
    return execute_on<R>(policy_, target, fn);
  }

  typename Backend::Impl impl_;
};

}  // namespace idem::detail
