#pragma once
// LayeredGuard: the three-tier defence (request-ID cache -> one-time token -> unique-index
// record), each layer an idem::Store; docs/layered.md.

#include <algorithm>
#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "idem/attempt.hpp"
#include "idem/codec.hpp"
#include "idem/context.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/engine/engine.hpp"
#include "idem/engine/failure_record.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/engine/token.hpp"
#include "idem/error.hpp"
#include "idem/guard.hpp"
#include "idem/key.hpp"
#include "idem/observer.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

/// Bytes a LayeredRequest owns, so no field can outlive what it was built from.
class RequestText {
 public:
  RequestText() = default;
  RequestText(std::string text) : text_(std::move(text)) {}  // NOLINT: implicit
  RequestText(std::string_view text) : text_(text) {}        // NOLINT: implicit
  RequestText(const char* text) : text_(text) {}             // NOLINT: implicit

  std::string_view view() const noexcept { return text_; }
  operator std::string_view() const noexcept { return text_; }  // NOLINT: implicit
  bool empty() const noexcept { return text_.empty(); }
  std::size_t size() const noexcept { return text_.size(); }

 private:
  std::string text_;
};

/// One request as a LayeredGuard sees it; each layer derives its key from it, every layer
/// fingerprints the same payload. It owns copies of its bytes.
struct LayeredRequest {
  RequestText request_id{};    // the gateway's request id (an Idempotency-Key header, ...)
  RequestText token{};         // a one-time token from a token store's issue()
  RequestText business_key{};  // the durable intent's key (order number, ...)
  RequestText principal{};     // the caller or tenant: never replays to another principal
  RequestText payload{};       // the request body, fingerprinted by every layer
};

/// What a layer is; decides its key and whether the skip_cache policy may pass it by.
enum class LayerKind : std::uint8_t {
  request_id,  // a response cache keyed by (principal, request id): may be skipped when down
  token,       // a one-time token store keyed by the token: never skipped
  record,      // the durable unique-index record keyed by (principal, business key): never skipped
};

/// How a layer claims: the scope of its effective keys, the lease, how long results replay.
struct LayerSettings {
  std::string name{};  // shown in outcomes and observers
  /// The scope of the layer's effective keys. Over a store with options() (the caches, the token
  /// stores) it is the store's: leave it empty; another one is std::invalid_argument.
  std::string scope{};
  std::chrono::milliseconds lease{std::chrono::seconds{30}};  // holder's time before takeover
  std::chrono::milliseconds ttl{std::chrono::hours{24}};      // how long a result replays
  std::chrono::milliseconds block_for{0};  ///< longest block on a holder (SQL row lock); 0: never
};

namespace detail {
inline LayerSettings settings_from(const Options& o, std::string name) {
  return LayerSettings{std::move(name), o.scope, o.lease, *o.ttl, std::chrono::milliseconds{0}};
}

/// `settings` for a layer over `store`, named `kind` when unnamed; `StoreScope`: the scope rule
/// above (a record layer's scope is its own).
template <bool StoreScope, class S>
LayerSettings settings_over(const S& store, LayerSettings settings, std::string_view kind) {
  if (settings.name.empty()) settings.name = kind;
  if constexpr (StoreScope && requires { store.options().scope; }) {
    const std::string& own = store.options().scope;
    if (settings.scope.empty()) {
      settings.scope = own;
    } else if (settings.scope != own) {
      throw std::invalid_argument("idem: layer '" + settings.name + "': LayerSettings::scope \"" +
                                  settings.scope + "\" is not its store's scope \"" + own +
                                  "\" (leave it empty to use the store's)");
    }
  }
  return settings;
}

/// What every layer is: its store, its settings (checked once) and the key of its kind. Over a
/// store with options() (the caches, the token stores), a request-ID or token layer takes the
/// store's scope, lease and ttl unless given settings; a record layer is always given them.
template <class S, LayerKind Kind>
class LayerBase {
 public:
  using store_type = S;
  static constexpr LayerKind kind = Kind;

  explicit LayerBase(S& store) requires(Kind != LayerKind::record) && requires(S& s) {
    s.options();
  } : LayerBase(store, settings_from(store.options(), std::string(kind_name()))) {
  }
  /// Explicit settings (lease, ttl, name, block_for); the scope rule of LayerSettings::scope.
  LayerBase(S& store, LayerSettings settings)
      : store_(&store),
        settings_(
            settings_over<Kind != LayerKind::record>(store, std::move(settings), kind_name())) {
    static_assert(Store<S>,
                  "idem layer: the store is not an idem::Store (claim/commit/abort/extend, see "
                  "idem/store.hpp)");
  }

  S& store() const noexcept { return *store_; }
  const LayerSettings& settings() const noexcept { return settings_; }
  static Key key_of(const LayeredRequest& r) noexcept {
    if constexpr (Kind == LayerKind::request_id) return Key{r.request_id, r.principal};
    if constexpr (Kind == LayerKind::token) return Key{r.token.view()};  // issued to nobody
    if constexpr (Kind == LayerKind::record) return Key{r.business_key, r.principal};
  }

 private:
  static constexpr std::string_view kind_name() noexcept {
    return Kind == LayerKind::request_id ? "request_id"
           : Kind == LayerKind::token    ? "token"
                                         : "record";
  }

  S* store_;
  LayerSettings settings_;
};
}  // namespace detail

/// The gateway layer over a request-ID cache (or any store with options()): Key{request_id,
/// principal}, with the cache's own scope, lease and ttl, so it shares entries with its execute().
template <class S>
class RequestIdLayer : public detail::LayerBase<S, LayerKind::request_id> {
 public:
  using detail::LayerBase<S, LayerKind::request_id>::LayerBase;
};

/// The one-time token layer over MemoryTokenStore or RedisTokenStore. Key: the token, without
/// principal (a token is issued before anyone presents it). Its fingerprint binds the payload to
/// the principal presenting it, so the token's result replays to that principal only: to another
/// principal the token was used with another payload (token_invalid). A malformed token is
/// token_invalid without a round trip.
template <class S>
class TokenLayer : public detail::LayerBase<S, LayerKind::token> {
 public:
  using detail::LayerBase<S, LayerKind::token>::LayerBase;
};

/// The durable layer over a record store; in transactional mode the handler runs in its
/// transaction. Key: Key{business_key, principal}.
template <class S>
class RecordLayer : public detail::LayerBase<S, LayerKind::record> {
 public:
  using detail::LayerBase<S, LayerKind::record>::LayerBase;
};

// Inherited constructors deduce nothing: RequestIdLayer{cache}, RecordLayer(store, settings).
template <class S, class... A>
RequestIdLayer(S&, A...) -> RequestIdLayer<S>;
template <class S, class... A>
TokenLayer(S&, A...) -> TokenLayer<S>;
template <class S, class... A>
RecordLayer(S&, A...) -> RecordLayer<S>;

/// What a LayeredGuard layer must offer; RequestIdLayer, TokenLayer and RecordLayer do.
template <class L>
concept Layer = requires(const L& layer, const LayeredRequest& request) {
  typename L::store_type;
  requires Store<typename L::store_type>;
  { L::kind } -> std::convertible_to<LayerKind>;
  { layer.store() } -> std::same_as<typename L::store_type&>;
  { layer.settings() } -> std::same_as<const LayerSettings&>;
  { L::key_of(request) } -> std::same_as<Key>;
};

/// What a LayeredGuard does when a layer's store is down (errc::store_unavailable at claim).
enum class LayerDownPolicy : std::uint8_t {
  fail_closed,  // answer store_unavailable (default)
  skip_cache,   // pass a request_id layer by (reported); token and record layers still fail
};

struct LayeredOptions {
  LayerDownPolicy on_layer_down = LayerDownPolicy::fail_closed;  ///< what a layer down does
  /// The policy every guard shares, applied at every layer (docs/layered.md#options). Scope,
  /// lease and ttl are each layer's (LayerSettings): leave them, keep_request and
  /// max_kept_request at their defaults (std::invalid_argument otherwise).
  Options policy{};
};

/// Index of "no layer": the handler ran (LayeredOutcome::layer()).
inline constexpr std::size_t kHandlerLayer = std::numeric_limits<std::size_t>::max();

/// An Outcome plus which layer answered (replayed, refused or was down), or kHandlerLayer.
template <class T>
class [[nodiscard]] LayeredOutcome : public Outcome<T> {
 public:
  LayeredOutcome(Outcome<T> outcome, std::size_t layer, std::string_view layer_name,
                 std::uint32_t skipped)
      : Outcome<T>(std::move(outcome)), layer_(layer), name_(layer_name), skipped_(skipped) {}

  /// Index (0 = outermost) of the layer that answered; kHandlerLayer when fn ran.
  std::size_t layer() const noexcept { return layer_; }
  /// Its LayerSettings::name, or "handler".
  std::string_view layer_name() const noexcept { return name_; }
  /// Bit i set: layer i was down and skipped under LayerDownPolicy::skip_cache.
  std::uint32_t skipped() const noexcept { return skipped_; }

 private:
  std::size_t layer_;
  std::string_view name_;
  std::uint32_t skipped_;
};

namespace detail {

/// What the engine claims for a LayeredGuard: one key per layer, outermost first, stopping at
/// the first that answers; commit() records the durable (record) layer first, then outward. The
/// record layer's fence, lease and transaction are the holder's.
/// The token layer's fingerprint: the payload's, bound to the principal presenting the token
/// (no principal: the payload's own). A token consumed by one principal then never replays to
/// another, who finds another payload.
inline Fingerprint bound_to_principal(Fingerprint payload, std::string_view principal) noexcept {
  if (principal.empty()) return payload;
  const Fingerprint p = xxh3_128(principal);
  return Fingerprint{payload.high ^ p.high, payload.low ^ p.low};
}

template <class... Layers>
class LayerChain {
  static constexpr std::size_t kLayers = sizeof...(Layers);
  static constexpr std::size_t kRecord = kLayers - 1;
  using RecordStore = typename std::tuple_element_t<kRecord, std::tuple<Layers...>>::store_type;

 public:
  static constexpr bool kRewindable = RewindableStore<RecordStore>;

  LayerChain(const std::tuple<Layers...>& layers, const Policy& policy,
             LayerDownPolicy on_layer_down, const LayeredRequest& request, Fingerprint fingerprint)
      : layers_(&layers),
        policy_(&policy),
        on_layer_down_(on_layer_down),
        request_(&request),
        fingerprint_(fingerprint) {}

  Result<Claim> claim() {
    skipped_ = 0;
    std::optional<Result<Claim>> stopped;
    const auto claim_outermost_first = [&]<std::size_t... I>(std::index_sequence<I...>) {
      // Stops at the first layer that answers: && short-circuits the fold.
      (void)((claim_layer<I>(stopped), !stopped.has_value()) && ...);
    };
    claim_outermost_first(std::make_index_sequence<kLayers>{});
    if (stopped) {
      abort_claimed();
      return std::move(*stopped);
    }
    at_ = kRecord;
    return std::move(record_claim_);
  }

  Status commit(Fence fence, ClaimStatus status, std::string_view bytes) {
    // The durable layer holds the result: now the caches may answer for it.
    const auto commit_outward = [&]<std::size_t... I>(std::index_sequence<I...>) {
      (commit_outer<kRecord - 1 - I>(status, bytes), ...);
    };
    if (IDEM_SIM_MUTATE(22)) commit_outward(std::make_index_sequence<kRecord>{});
    Held& record = held_[kRecord];
    if (record.claimed) {
      Status s = std::get<kRecord>(*layers_).store().commit(
          Ticket{record.key, fence}, Completion{status, bytes, settings(kRecord).ttl});
      if (!s) return s;
      record.claimed = false;
    }
    commit_outward(std::make_index_sequence<kRecord>{});
    return {};
  }
  Status abort(Fence) {
    Status record = abort_layer<kRecord>();
    abort_claimed();
    return record;
  }
  Status extend(Fence fence, std::chrono::milliseconds lease) {
    return std::get<kRecord>(*layers_).store().extend(ticket(fence), lease);
  }
  Status rewind(Fence fence) requires kRewindable {
    return std::get<kRecord>(*layers_).store().rewind(ticket(fence));
  }
  /// Whether the layer that answered the last claim in_progress can wake a waiting caller.
  bool wakes() const noexcept {
    bool out = false;
    const auto find = [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((I == at_
            ? (out =
                   WakingStore<typename std::tuple_element_t<I, std::tuple<Layers...>>::store_type>,
               0)
            : 0),
       ...);
    };
    find(std::make_index_sequence<kLayers>{});
    return out;
  }
  /// Waits on that layer's store for the end of the hold under `holder` (engine: WakingTarget).
  void await_change(Fence holder, std::chrono::milliseconds bound) {
    const auto wait_on = [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((I == at_ ? (await_layer<I>(holder, bound), 0) : 0), ...);
    };
    wait_on(std::make_index_sequence<kLayers>{});
  }
  /// The record's commit failed for good: no cache may answer for a result the record does not
  /// hold, so the outer layers are released (the record is left to its lease).
  void abandon() {
    held_[kRecord].claimed = false;
    abort_claimed();
  }

  std::string_view scope() const noexcept { return settings(at_).scope; }
  std::string_view key_id() const noexcept { return held_[at_].id; }
  std::string refusal_message(errc e) const {
    const std::string& name = settings(at_).name;
    if (e == errc::in_progress) {
      return "layer '" + name + "': another request with this key is in progress";
    }
    return "layer '" + name + "': key was first used with another payload";
  }
  std::chrono::milliseconds lease() const noexcept { return settings(kRecord).lease; }
  RecordStore& context_store() const noexcept { return std::get<kRecord>(*layers_).store(); }
  Ticket ticket(Fence fence) const noexcept { return Ticket{held_[kRecord].key, fence}; }
  HandlerStart& handler_start() const noexcept { return handler_start_; }

  /// The layer that answered (the record layer once every layer is held).
  std::size_t answered() const noexcept { return at_; }
  /// Bit i: layer i was down and passed by (LayerDownPolicy::skip_cache).
  std::uint32_t skipped() const noexcept { return skipped_; }

 private:
  struct Held {
    bool claimed = false;
    Fence fence = 0;
    std::string key;  // the effective key, owned: tickets view it
    std::string id;   // the key's id, for observers (kept only when there is one)
  };

  const LayerSettings& settings(std::size_t i) const noexcept {
    const LayerSettings* out = nullptr;
    const auto find = [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((I == i ? (out = &std::get<I>(*layers_).settings(), 0) : 0), ...);
    };
    find(std::make_index_sequence<kLayers>{});
    return *out;
  }

  void notify_layer(std::size_t i, Event event, Fence fence, std::error_code error) const {
    if (policy_->observer) {
      policy_->observer->notify(
          EventInfo{event, settings(i).scope, held_[i].id, fence, error, policy_->store_name});
    }
  }

  template <std::size_t I>
  void claim_layer(std::optional<Result<Claim>>& stopped) {
    using L = std::tuple_element_t<I, std::tuple<Layers...>>;
    const L& layer = std::get<I>(*layers_);
    const LayerSettings& s = layer.settings();
    const Key key = L::key_of(*request_);
    Held& h = held_[I];
    at_ = I;
    if (policy_->observer) h.id.assign(key.id);

    if (key.id.empty() || key.id.size() > policy_->max_key_size ||
        key.principal.size() > policy_->max_key_size) {
      const errc code = L::kind == LayerKind::token ? errc::token_invalid : errc::key_invalid;
      stopped.emplace(make_failure(code, "layer '" + s.name + "': key is empty or longer than " +
                                             std::to_string(policy_->max_key_size) + " bytes"));
      return;
    }
    if constexpr (L::kind == LayerKind::token) {
      if (!token_shaped(key.id)) {
        stopped.emplace(
            make_failure(errc::token_invalid, "token is not one this service issued (malformed)"));
        return;
      }
    }

    const EffectiveKey effective(s.scope, key.principal, key.id);
    const Fingerprint fingerprint = L::kind == LayerKind::token
                                        ? bound_to_principal(fingerprint_, request_->principal)
                                        : fingerprint_;
    Result<Claim> claimed = layer.store().claim(
        ClaimRequest{effective.view(), fingerprint, s.lease, held_retention(s.ttl, s.lease),
                     std::max(s.block_for, policy_->block_for()),
                     /*rewindable=*/L::kind == LayerKind::record && policy_->remember_failures});
    if (!claimed) {
      const std::error_code e = claimed.error();
      if (e == errc::store_unavailable && L::kind == LayerKind::request_id &&
          on_layer_down_ == LayerDownPolicy::skip_cache) {
        notify_layer(I, Event::store_error, 0, e);
        skipped_ |= std::uint32_t{1} << I;
        return;
      }
      Failure f = std::move(claimed).failure();
      f.message = "layer '" + s.name + "': " + f.describe();
      stopped.emplace(std::move(f));
      return;
    }
    Claim& c = claimed.value();
    if (c.status != ClaimStatus::acquired) {
      if (c.status == ClaimStatus::in_progress && policy_->wait() != nullptr) {
        busy_key_.assign(effective.view());  // what await_change waits on
      }
      stopped.emplace(std::move(claimed));
      return;
    }
    h.claimed = true;
    h.fence = c.fence;
    h.key.assign(effective.view());
    if constexpr (I == kRecord) {
      record_claim_ = std::move(claimed);
    } else if (c.took_over) {
      notify_layer(I, Event::took_over, c.fence, {});
    }
  }

  template <std::size_t I>
  void await_layer(Fence holder, std::chrono::milliseconds bound) {
    using S = typename std::tuple_element_t<I, std::tuple<Layers...>>::store_type;
    if constexpr (WakingStore<S>) {
      std::get<I>(*layers_).store().await_change(Ticket{busy_key_, holder}, bound);
    }
  }

  // Aborts every claimed layer, innermost first, outermost last. Failures are reported only.
  void abort_claimed() {
    const auto abort_innermost_first = [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((void)abort_layer<kLayers - 1 - I>(), ...);
    };
    abort_innermost_first(std::make_index_sequence<kLayers>{});
  }

  template <std::size_t I>
  Status abort_layer() {
    Held& h = held_[I];
    if (!h.claimed) return {};
    h.claimed = false;
    Status s = std::get<I>(*layers_).store().abort(Ticket{h.key, h.fence});
    if (I != kRecord) {  // the engine reports the record layer's own abort
      notify_layer(I, Event::aborted, h.fence, {});
      if (!s) report_layer(I, s, h.fence);
    }
    return s;
  }

  template <std::size_t I>
  void commit_outer(ClaimStatus status, std::string_view bytes) {
    Held& h = held_[I];
    if (!h.claimed) return;
    h.claimed = false;
    Status s = std::get<I>(*layers_).store().commit(Ticket{h.key, h.fence},
                                                    Completion{status, bytes, settings(I).ttl});
    if (!s) report_layer(I, s, h.fence);
  }

  void report_layer(std::size_t i, const Status& s, Fence fence) const {
    notify_layer(i, s.error() == errc::lease_lost ? Event::lease_lost : Event::store_error, fence,
                 s.error());
  }

  const std::tuple<Layers...>* layers_;
  const Policy* policy_;
  LayerDownPolicy on_layer_down_;
  const LayeredRequest* request_;  // read by claim() only, while begin() runs
  Fingerprint fingerprint_;
  std::array<Held, kLayers> held_{};
  Result<Claim> record_claim_{Claim{}};
  std::string busy_key_;  // the effective key of the layer that answered in_progress
  std::size_t at_ = 0;
  std::uint32_t skipped_ = 0;
  mutable HandlerStart handler_start_;
};

}  // namespace detail

/// Runs fn once per business intent behind several layers, outermost first: a layer's replay or
/// refusal answers, a layer that is down fails the call (or is passed by under skip_cache); fn's
/// result is committed innermost first, and a stopped chain or a throwing fn aborts the claimed
/// layers innermost first (docs/layered.md). begin<T>(request) is the two-phase form.
/// Cost: a fresh call is one claim and one commit per layer; a replay at layer i is i + 1 claims
/// and i aborts. Thread-safe when the stores are. Holds references to the stores.
template <class... Layers>
class LayeredGuard {
  static_assert(sizeof...(Layers) >= 1, "idem::LayeredGuard needs at least one layer");
  static_assert(sizeof...(Layers) <= 32, "idem::LayeredGuard: at most 32 layers");
  static_assert((Layer<Layers> && ...),
                "idem::LayeredGuard<Layers...>: every layer must be an idem::Layer "
                "(RequestIdLayer<S>, TokenLayer<S> or RecordLayer<S> over an idem::Store)");
  static constexpr std::size_t kLayers = sizeof...(Layers);
  static constexpr std::array<LayerKind, kLayers> kKinds{Layers::kind...};
  static_assert(kKinds[kLayers - 1] == LayerKind::record,
                "idem::LayeredGuard: the innermost (last) layer must be a RecordLayer: the "
                "durable record is what the chain commits first");
  static_assert(((Layers::kind == LayerKind::record ? 1 : 0) + ...) == 1,
                "idem::LayeredGuard: exactly one RecordLayer, the last one");
  using Chain = detail::LayerChain<Layers...>;

 public:
  /// The two-phase handle of this guard (see idem::Attempt).
  template <class T>
  using Attempt = idem::Attempt<T, Chain>;

  /// Throws std::invalid_argument when a layer's lease or ttl is not positive or a policy is out
  /// of range.
  explicit LayeredGuard(Layers... layers) : LayeredGuard(LayeredOptions{}, std::move(layers)...) {}
  LayeredGuard(LayeredOptions options, Layers... layers)
      : layers_(std::move(layers)...),
        options_(std::move(options)),
        policy_(detail::shared_policy(options_.policy, "LayeredOptions::policy")) {
    std::apply([](const auto&... l) { (check(l.settings()), ...); }, layers_);
    check_layered(options_.policy);
    options_.policy.clock = policy_.clock;
    policy_.store_name = "layered";  // observers' label; the layer is in the event's scope
  }
  // Every Attempt refers to the guard's layers and policy: the guard stays where it is.
  LayeredGuard(const LayeredGuard&) = delete;
  LayeredGuard& operator=(const LayeredGuard&) = delete;

  /// Runs fn once for the request's intent; fn may take an idem::Context& (the record layer's).
  /// If fn throws, the claimed layers are aborted (or record the failure under
  /// remember_failures) and the exception propagates.
  template <class Fn>
  [[nodiscard]] LayeredOutcome<handler_result_t<Fn>> execute(const LayeredRequest& request,
                                                             Fn&& fn) {
    using R = handler_result_t<Fn>;
    detail::require_codable<R>();
    Chain chain(layers_, policy_, options_.on_layer_down, request, policy_.hash(request.payload));
    Outcome<R> out = detail::execute_on<R>(policy_, chain, fn);
    if (out.executed()) {
      return LayeredOutcome<R>(std::move(out), kHandlerLayer, "handler", chain.skipped());
    }
    const std::size_t at = chain.answered();
    return LayeredOutcome<R>(std::move(out), at, layer_name(at), chain.skipped());
  }

  /// The two-phase form: an Attempt that answers (the first layer that answered is named in the
  /// message) or holds every layer until commit(value) or fail(message). The guard and its
  /// stores must outlive it.
  template <class T>
  [[nodiscard]] Attempt<T> begin(const LayeredRequest& request) {
    detail::require_codable<T>();
    return Attempt<T>(policy_, Chain(layers_, policy_, options_.on_layer_down, request,
                                     policy_.hash(request.payload)));
  }

  /// The answer of an Attempt from begin() that did not acquire, as execute() gives it. Throws
  /// std::logic_error, as Attempt::outcome() does, while the attempt holds the layers.
  template <class T>
  [[nodiscard]] LayeredOutcome<T> answer(Attempt<T>&& attempt) const {
    const std::size_t at = attempt.target().answered();
    const std::uint32_t skipped = attempt.target().skipped();
    return LayeredOutcome<T>(std::move(attempt).outcome(), at, layer_name(at), skipped);
  }

  /// Layer i's name.
  std::string_view layer_name(std::size_t i) const noexcept {
    std::string_view out;
    for_each_layer([&](std::size_t j, const auto& l) {
      if (j == i) out = l.settings().name;
    });
    return out;
  }
  const LayeredOptions& options() const noexcept { return options_; }

 private:
  static void check(const LayerSettings& s) {
    if (s.lease.count() <= 0 || s.ttl.count() <= 0 || s.block_for.count() < 0) {
      throw std::invalid_argument("idem: layer '" + s.name +
                                  "' needs lease > 0, ttl > 0 and block_for >= 0");
    }
  }

  // The guard's own fields of Options are the layers' here; set, they would be ignored.
  static void check_layered(const Options& o) {
    if (!o.scope.empty() || o.ttl || o.lease != Options{}.lease || o.keep_request ||
        o.max_kept_request != Options{}.max_kept_request) {
      throw std::invalid_argument(
          "idem: LayeredOptions::policy sets scope, lease, ttl or keep_request; each layer has "
          "its own scope, lease and ttl (LayerSettings), and a LayeredGuard keeps no request");
    }
  }

  template <class F>
  void for_each_layer(F&& f) const {
    const auto each = [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(I, std::get<I>(layers_)), ...);
    };
    each(std::make_index_sequence<kLayers>{});
  }

  std::tuple<Layers...> layers_;
  LayeredOptions options_;
  detail::Policy policy_;
};

/// The classic chain: gateway request-ID cache -> one-time token -> durable record.
template <class Cache, class Tokens, class Records>
using ThreeTierGuard =
    LayeredGuard<RequestIdLayer<Cache>, TokenLayer<Tokens>, RecordLayer<Records>>;

}  // namespace idem
