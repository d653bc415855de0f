#pragma once
// LayeredGuard: the three-tier defence (docs/design.md §13): gateway request-ID cache ->
// one-time token -> unique-index record, each layer an idem::Store, driven as one
// claim -> fn -> commit | abort.

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

#include "idem/codec.hpp"
#include "idem/context.hpp"
#include "idem/detail/effective_key.hpp"
#include "idem/detail/failure_record.hpp"
#include "idem/detail/protocol.hpp"
#include "idem/detail/token.hpp"
#include "idem/error.hpp"
#include "idem/guard.hpp"
#include "idem/key.hpp"
#include "idem/observer.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

/// Bytes a LayeredRequest owns: made from a std::string (moved in), a std::string_view or a
/// literal, so that no field can outlive what it was built from (`req.token =
/// tokens.issue(...).value()` keeps the token).
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

/// One request as a LayeredGuard sees it. Each layer derives its key from it: the gateway from
/// (principal, request_id), the token layer from token, the record layer from (principal,
/// business_key). Every layer fingerprints the same payload. It owns copies of its bytes.
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
  std::string name{};                                         // shown in outcomes and observers
  std::string scope{};                                        // must match the store's own scope
  std::chrono::milliseconds lease{std::chrono::seconds{30}};  // holder's time before takeover
  std::chrono::milliseconds ttl{std::chrono::hours{24}};      // how long a result replays
  /// How long a claim may block on a holder (transactional SQL stores' row lock); 0: never.
  std::chrono::milliseconds block_for{0};
};

namespace detail {
template <class S>
inline constexpr bool kLayerStore = Store<S>;

template <class S>
constexpr void check_layer_store() {
  static_assert(kLayerStore<S>,
                "idem layer: the store is not an idem::Store (claim/commit/abort/extend, see "
                "idem/store.hpp)");
}

inline LayerSettings settings_from(const Options& o, std::string name) {
  return LayerSettings{std::move(name), o.scope, o.lease, o.ttl, std::chrono::milliseconds{0}};
}
}  // namespace detail

/// The gateway layer over a request-ID cache (RequestIdCache, MemoryRequestIdCache, or any store
/// with options()). Key: Key{request_id, principal}. Scope, lease and ttl come from the cache's
/// own options, so execute() on the cache and this layer share entries.
template <class S>
class RequestIdLayer {
 public:
  using store_type = S;
  static constexpr LayerKind kind = LayerKind::request_id;

  explicit RequestIdLayer(S& store) requires requires(S& s) {
    s.options();
  } : store_(&store), settings_(detail::settings_from(store.options(), "request_id")) {
    detail::check_layer_store<S>();
  }
  RequestIdLayer(S& store, LayerSettings settings)
      : store_(&store), settings_(std::move(settings)) {
    detail::check_layer_store<S>();
  }
  S& store() const noexcept { return *store_; }
  const LayerSettings& settings() const noexcept { return settings_; }
  static Key key_of(const LayeredRequest& r) noexcept { return Key{r.request_id, r.principal}; }

 private:
  S* store_;
  LayerSettings settings_;
};

/// The one-time token layer over MemoryTokenStore or RedisTokenStore. Key: the token, without
/// principal (tokens are bearer: issue() knows no principal). A malformed token is refused
/// (token_invalid) without a round trip.
template <class S>
class TokenLayer {
 public:
  using store_type = S;
  static constexpr LayerKind kind = LayerKind::token;

  explicit TokenLayer(S& store) requires requires(S& s) {
    s.options();
  } : store_(&store), settings_(detail::settings_from(store.options(), "token")) {
    detail::check_layer_store<S>();
  }
  TokenLayer(S& store, LayerSettings settings) : store_(&store), settings_(std::move(settings)) {
    detail::check_layer_store<S>();
  }
  S& store() const noexcept { return *store_; }
  const LayerSettings& settings() const noexcept { return settings_; }
  static Key key_of(const LayeredRequest& r) noexcept { return Key{r.token.view()}; }

 private:
  S* store_;
  LayerSettings settings_;
};

/// The durable layer over a record store (SqliteStore, PostgresStore, RedisStore, MemoryStore).
/// Key: Key{business_key, principal}. In transactional mode the handler runs in its transaction.
template <class S>
class RecordLayer {
 public:
  using store_type = S;
  static constexpr LayerKind kind = LayerKind::record;

  RecordLayer(S& store, LayerSettings settings) : store_(&store), settings_(std::move(settings)) {
    detail::check_layer_store<S>();
    if (settings_.name.empty()) settings_.name = "record";
  }
  S& store() const noexcept { return *store_; }
  const LayerSettings& settings() const noexcept { return settings_; }
  static Key key_of(const LayeredRequest& r) noexcept { return Key{r.business_key, r.principal}; }

 private:
  S* store_;
  LayerSettings settings_;
};

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
  /// What a layer that is down does to the call (default: fail closed).
  LayerDownPolicy on_layer_down = LayerDownPolicy::fail_closed;
  /// Longest key id and principal, in bytes, at every layer.
  std::size_t max_key_size = 256;
  /// Largest encoded result, in bytes; larger ones are errc::result_too_large.
  std::size_t max_result_size = std::size_t{1} << 20;
  /// Payload fingerprint function (default XXH3-128).
  PayloadHash hash = &xxh3_128;
  /// Events per layer, with the layer's scope (default: none).
  std::shared_ptr<Observer> observer = nullptr;
  /// Retries of the record layer's commit (the outer layers' commits are tried once).
  CommitRetry commit_retry{};
  /// Time source for commit backoff (default: steady clock).
  std::shared_ptr<Clock> clock = nullptr;
};

/// Index of "no layer": the handler ran (LayeredOutcome::layer()).
inline constexpr std::size_t kHandlerLayer = std::numeric_limits<std::size_t>::max();

/// An Outcome plus which layer answered: the one that replayed, refused or was down, or
/// kHandlerLayer ("handler") when fn ran. skipped() lists cache layers passed by while down.
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

/// Runs fn once per business intent behind several layers, outermost first. For each layer in
/// order: claim its key; a replay answers from that layer, a refusal (in_progress,
/// payload_mismatch, token_invalid, ...) stops the chain, a layer that is down fails the call
/// (or is skipped, for a request_id layer under skip_cache). When every layer has claimed, fn runs
/// once (in the record layer's transaction in transactional mode); its result is committed
/// innermost first (the durable record before the caches), then outward. Whenever the chain stops
/// or fn throws, the layers already claimed are aborted innermost first, outermost last, so a
/// retry finds every layer free again (a token returns to pending).
///
/// Cost: a fresh call is one claim and one commit per layer; a replay at layer i is i + 1 claims
/// and i aborts. Thread-safe when the stores are. Holds references to the stores.
template <class... Layers>
class LayeredGuard {
  static_assert(sizeof...(Layers) >= 1, "idem::LayeredGuard needs at least one layer");
  static_assert(sizeof...(Layers) <= 32, "idem::LayeredGuard: at most 32 layers");
  static_assert((Layer<Layers> && ...),
                "idem::LayeredGuard<Layers...>: every layer must be an idem::Layer "
                "(RequestIdLayer<S>, TokenLayer<S> or RecordLayer<S> over an idem::Store)");
  static constexpr std::size_t N = sizeof...(Layers);
  static constexpr std::array<LayerKind, N> kKinds{Layers::kind...};
  static_assert(kKinds[N - 1] == LayerKind::record,
                "idem::LayeredGuard: the innermost (last) layer must be a RecordLayer: the "
                "durable record is what the chain commits first");
  static_assert(((Layers::kind == LayerKind::record ? 1 : 0) + ...) == 1,
                "idem::LayeredGuard: exactly one RecordLayer, the last one");

 public:
  /// Throws std::invalid_argument when a layer's lease or ttl is not positive or the commit retry
  /// is out of range.
  explicit LayeredGuard(Layers... layers) : LayeredGuard(LayeredOptions{}, std::move(layers)...) {}
  LayeredGuard(LayeredOptions options, Layers... layers)
      : layers_(std::move(layers)...), options_(std::move(options)) {
    std::apply([](const auto&... l) { (check(l.settings()), ...); }, layers_);
    if (options_.hash == nullptr) throw std::invalid_argument("idem: LayeredOptions::hash");
    detail::check_commit_retry(options_.commit_retry, "LayeredOptions");
    if (!options_.clock) options_.clock = steady_clock();
  }

  /// Runs fn once for the request's intent; see the class comment. fn may take an
  /// idem::Context& (the record layer's fence, lease and transaction). If fn throws, every
  /// claimed layer is aborted and the exception propagates.
  template <class Fn>
  [[nodiscard]] LayeredOutcome<handler_result_t<Fn>> execute(const LayeredRequest& request,
                                                             Fn&& fn) {
    using R = handler_result_t<Fn>;
    static_assert(std::is_void_v<R> || Codable<R>,
                  "idem: the handler's result type has no idem::codec<T> (see idem/codec.hpp)");
    Call call(request, options_.hash(request.payload));
    std::optional<LayeredOutcome<R>> stopped;
    claim_all<R>(call, stopped, std::make_index_sequence<N>{});
    if (stopped) {
      abort_claimed(call);
      return std::move(*stopped);
    }
    return run<R>(call, std::forward<Fn>(fn));
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
  struct Held {
    bool claimed = false;
    bool skipped = false;
    Fence fence = 0;
    std::string key;  // the effective key, owned: tickets view it
  };
  struct Call {
    Call(const LayeredRequest& r, Fingerprint f) : request(r), fingerprint(f) {}
    const LayeredRequest& request;
    Fingerprint fingerprint;
    std::array<Held, N> held{};
    NativeTransaction transaction{};
    std::uint32_t skipped = 0;
  };

  static void check(const LayerSettings& s) {
    if (s.lease.count() <= 0 || s.ttl.count() <= 0 || s.block_for.count() < 0) {
      throw std::invalid_argument("idem: layer '" + s.name +
                                  "' needs lease > 0, ttl > 0 and block_for >= 0");
    }
  }

  template <class F>
  void for_each_layer(F&& f) const {
    [&]<std::size_t... I>(std::index_sequence<I...>) { (f(I, std::get<I>(layers_)), ...); }
    (std::make_index_sequence<N>{});
  }

  template <class R, std::size_t... I>
  void claim_all(Call& call, std::optional<LayeredOutcome<R>>& stopped, std::index_sequence<I...>) {
    // Stops at the first layer that answers: && short-circuits the fold.
    (void)((claim_one<R, I>(call, stopped), !stopped.has_value()) && ...);
  }

  template <class R>
  LayeredOutcome<R> answer(Outcome<R> out, std::size_t i, const Call& call) const {
    return LayeredOutcome<R>(std::move(out), i, layer_name(i), call.skipped);
  }

  template <class R, std::size_t I>
  void claim_one(Call& call, std::optional<LayeredOutcome<R>>& stopped) {
    using L = std::tuple_element_t<I, std::tuple<Layers...>>;
    const L& layer = std::get<I>(layers_);
    const LayerSettings& s = layer.settings();
    const Key key = L::key_of(call.request);
    auto refuse = [&](Failure f, bool replayed = false) {
      stopped.emplace(answer<R>(Outcome<R>::failed(std::move(f), replayed), I, call));
    };

    if (key.id.empty() || key.id.size() > options_.max_key_size ||
        key.principal.size() > options_.max_key_size) {
      const errc code = L::kind == LayerKind::token ? errc::token_invalid : errc::key_invalid;
      notify(Event::rejected, s, key, 0, make_error_code(code));
      return refuse(make_failure(code, "layer '" + s.name + "': key is empty or longer than " +
                                           std::to_string(options_.max_key_size) + " bytes"));
    }
    if constexpr (L::kind == LayerKind::token) {
      if (!detail::token_shaped(key.id)) {
        notify(Event::rejected, s, key, 0, make_error_code(errc::token_invalid));
        return refuse(
            make_failure(errc::token_invalid, "token is not one this service issued (malformed)"));
      }
    }

    const detail::EffectiveKey effective(s.scope, key.principal, key.id);
    const ClaimRequest claim_request{effective.view(), call.fingerprint, s.lease,
                                     std::max(s.ttl, s.lease), s.block_for};
    Result<Claim> claimed = layer.store().claim(claim_request);
    if (!claimed) {
      const std::error_code e = claimed.error();
      if (e == errc::store_unavailable && L::kind == LayerKind::request_id &&
          options_.on_layer_down == LayerDownPolicy::skip_cache) {
        notify(Event::store_error, s, key, 0, e);
        call.held[I].skipped = true;
        call.skipped |= std::uint32_t{1} << I;
        return;
      }
      const bool refused =
          e == errc::token_invalid || e == errc::invalid_transition || e == errc::version_conflict;
      notify(refused ? Event::rejected : Event::store_error, s, key, 0, e);
      Failure f = std::move(claimed).failure();
      f.message = "layer '" + s.name + "': " + f.describe();
      return refuse(std::move(f));
    }
    Claim& c = claimed.value();
    switch (c.status) {
      case ClaimStatus::acquired:
        call.held[I].claimed = true;
        call.held[I].fence = c.fence;
        call.held[I].key.assign(effective.view());
        if (c.took_over) notify(Event::took_over, s, key, c.fence, {});
        if constexpr (L::kind == LayerKind::record) call.transaction = c.transaction;
        return;
      case ClaimStatus::completed:
        stopped.emplace(answer<R>(replay<R>(std::move(c.result), s, key, c.fence), I, call));
        return;
      case ClaimStatus::failed: {
        Failure failure = detail::decode_failure(c.result);
        const bool corrupt = failure.code == errc::record_corrupt;
        notify(corrupt ? Event::store_error : Event::replayed, s, key, c.fence, failure.code);
        return refuse(std::move(failure), !corrupt);
      }
      case ClaimStatus::mismatch:
        notify(Event::mismatched, s, key, c.fence, make_error_code(errc::payload_mismatch));
        return refuse(make_failure(errc::payload_mismatch, "layer '" + s.name +
                                                               "': key was first used with another "
                                                               "payload"));
      case ClaimStatus::in_progress:
        notify(Event::in_progress, s, key, c.fence, make_error_code(errc::in_progress));
        return refuse(make_failure(errc::in_progress, "layer '" + s.name +
                                                          "': another request with this key is "
                                                          "in progress"));
    }
  }

  template <class R>
  Outcome<R> replay(std::string&& bytes, const LayerSettings& s, const Key& key, Fence fence) {
    Outcome<R> out = detail::decode_replay<R>(std::move(bytes));
    notify(out ? Event::replayed : Event::store_error, s, key, fence, out.error());
    return out;
  }

  // Aborts every claimed layer, innermost first, outermost last. Failures are reported only.
  void abort_claimed(Call& call) {
    [&]<std::size_t... I>(std::index_sequence<I...>) { (abort_one<N - 1 - I>(call), ...); }
    (std::make_index_sequence<N>{});
  }

  template <std::size_t I>
  void abort_one(Call& call) {
    Held& h = call.held[I];
    if (!h.claimed) return;
    h.claimed = false;
    const auto& layer = std::get<I>(layers_);
    const Key key = layer.key_of(call.request);
    Status s = layer.store().abort(Ticket{h.key, h.fence});
    notify(Event::aborted, layer.settings(), key, h.fence, {});
    if (!s) report(s, layer.settings(), key, h.fence);
  }

  template <class R, class Fn>
  LayeredOutcome<R> run(Call& call, Fn&& fn) {
    using Stored = std::conditional_t<std::is_void_v<R>, std::monostate, R>;
    constexpr std::size_t kRecord = N - 1;
    auto& record = std::get<kRecord>(layers_);
    const Held& rh = call.held[kRecord];
    std::optional<Stored> value;
    std::string encoded;
    try {
      Context context(record.store(), Ticket{rh.key, rh.fence}, record.settings().lease,
                      call.transaction);
      if constexpr (std::is_void_v<R>) {
        invoke(fn, context);
        value.emplace();
      } else {
        value.emplace(invoke(fn, context));
      }
    } catch (...) {
      abort_claimed(call);
      throw;
    }
    if constexpr (!std::is_void_v<R>) {
      try {
        encoded = codec<R>::encode(*value);
      } catch (...) {
        // fn's effect happened: remember the failure so a retry cannot run it a second time.
        const std::string failure = detail::encode_failure(
            errc::handler_failed, detail::exception_message(std::current_exception()));
        (void)commit_all(call, Completion{ClaimStatus::failed, failure, {}});
        throw;
      }
    }
    notify(Event::executed, record.settings(), record.key_of(call.request), rh.fence, {});

    if (encoded.size() > options_.max_result_size) {
      // fn's effect happened: every layer remembers result_too_large so no repeat runs it again.
      Failure too_large =
          make_failure(errc::result_too_large, "result is " + std::to_string(encoded.size()) +
                                                   " bytes; the limit is " +
                                                   std::to_string(options_.max_result_size));
      const std::string failure = detail::encode_failure(errc::result_too_large, too_large.message);
      (void)commit_all(call, Completion{ClaimStatus::failed, failure, {}});
      return LayeredOutcome<R>(Outcome<R>::fresh(std::move(*value), std::move(too_large)),
                               kHandlerLayer, "handler", call.skipped);
    }
    Status committed = commit_all(call, Completion{ClaimStatus::completed, encoded, {}});
    return LayeredOutcome<R>(Outcome<R>::fresh(std::move(*value), committed.failure()),
                             kHandlerLayer, "handler", call.skipped);
  }

  // Commits the record first (with retries), then the outer layers from the inside out. If the
  // record's commit fails, the outer layers are aborted instead: no cache may answer for a
  // result the durable layer does not hold. Returns the record's commit status.
  Status commit_all(Call& call, Completion completion) {
    constexpr std::size_t kRecord = N - 1;
    auto& record = std::get<kRecord>(layers_);
    Held& rh = call.held[kRecord];
    completion.ttl = record.settings().ttl;
    Status status = commit_record(record, rh, call, completion);
    rh.claimed = false;
    if (!status) {
      notify(Event::result_unrecorded, record.settings(), record.key_of(call.request), rh.fence,
             status.error());
      abort_claimed(call);
      return status;
    }
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (commit_outer<kRecord - 1 - I>(call, completion), ...);
    }
    (std::make_index_sequence<kRecord>{});
    return status;
  }

  template <class L>
  Status commit_record(L& record, const Held& h, Call& call, const Completion& completion) {
    const Key key = L::key_of(call.request);
    Status status = detail::commit_with_retry(
        options_.commit_retry, *options_.clock,
        [&] {
          return record.store().commit(Ticket{h.key, h.fence}, completion);
        },
        [&](const Status& failed) {
          notify(Event::commit_retried, record.settings(), key, h.fence, failed.error());
        });
    if (!status) report(status, record.settings(), key, h.fence);
    return status;
  }

  template <std::size_t I>
  void commit_outer(Call& call, Completion completion) {
    Held& h = call.held[I];
    if (!h.claimed) return;
    h.claimed = false;
    const auto& layer = std::get<I>(layers_);
    completion.ttl = layer.settings().ttl;
    Status s = layer.store().commit(Ticket{h.key, h.fence}, completion);
    if (!s) report(s, layer.settings(), layer.key_of(call.request), h.fence);
  }

  template <class Fn>
  static decltype(auto) invoke(Fn& fn, Context& context) {
    if constexpr (detail::kTakesContext<Fn>) {
      return std::invoke(fn, context);
    } else {
      return std::invoke(fn);
    }
  }

  void report(const Status& status, const LayerSettings& s, const Key& key, Fence fence) {
    notify(status.error() == errc::lease_lost ? Event::lease_lost : Event::store_error, s, key,
           fence, status.error());
  }

  void notify(Event event, const LayerSettings& s, const Key& key, Fence fence,
              std::error_code error) {
    if (options_.observer)
      options_.observer->notify(EventInfo{event, s.scope, key.id, fence, error});
  }

  std::tuple<Layers...> layers_;
  LayeredOptions options_;
};

/// The classic chain: gateway request-ID cache -> one-time token -> durable record.
template <class Cache, class Tokens, class Records>
using ThreeTierGuard =
    LayeredGuard<RequestIdLayer<Cache>, TokenLayer<Tokens>, RecordLayer<Records>>;

}  // namespace idem
