#pragma once
// The bare twins' libpqxx calls, the same on libpqxx 6 and 7 (7.10 and 8 run a prepared
// statement through exec(pqxx::prepped, pqxx::params)).

#include <cstddef>
#include <pqxx/pqxx>
#include <pqxx/version>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#define IDEM_BENCH_PQXX_PREPPED \
  (PQXX_VERSION_MAJOR > 7 || (PQXX_VERSION_MAJOR == 7 && PQXX_VERSION_MINOR >= 10))

namespace idem_bench::pqxx_calls {

/// `b` as a bytea parameter (binary format), viewing `b`: use it before `b` goes.
inline auto bytes_param(std::string_view b) {
#if PQXX_VERSION_MAJOR == 6
  return pqxx::binarystring(b.data(), b.size());
#else
  return pqxx::binary_cast(b.data(), b.size());
#endif
}

/// A bytea field's bytes; empty for NULL.
template <class Field>
std::string field_bytes(const Field& f) {
  if (f.is_null()) return {};
#if PQXX_VERSION_MAJOR == 6
  return pqxx::binarystring(f).str();
#else
#if PQXX_VERSION_MAJOR == 7 && PQXX_VERSION_MINOR < 9
  using Bytes = std::basic_string<std::byte>;  // pqxx::bytes from 7.9
  const auto b = f.template as<Bytes>();
#else
  const auto b = f.template as<pqxx::bytes>();
#endif
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
#endif
}

#if PQXX_VERSION_MAJOR != 6
// Integers as text and C strings as views: params' own append inlines a std::variant that g++ 12
// takes for maybe uninitialised (a false positive no pragma here reaches).
template <class T>
void append_param(pqxx::params& p, T&& value) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_integral_v<U> && !std::is_same_v<U, bool>) {
    p.append(std::to_string(value));
  } else if constexpr (std::is_convertible_v<T, const char*>) {
    p.append(pqxx::zview(value));  // a C string, alive for the call
  } else {
    p.append(std::forward<T>(value));
  }
}

template <class... Args>
pqxx::params make_params(Args&&... args) {
  pqxx::params p;
  p.reserve(sizeof...(args));
  (append_param(p, std::forward<Args>(args)), ...);
  return p;
}
#endif

/// Prepares `sql` under `name` on the server at once (6 would wait for the first use).
template <class Connection>
void prepare(Connection& c, const std::string& name, const std::string& sql) {
  c.prepare(name, sql);
#if PQXX_VERSION_MAJOR == 6
  c.prepare_now(name);
#endif
}

template <class... Args>
pqxx::result exec_prepared(pqxx::transaction_base& tx, const std::string& name, Args&&... args) {
#if IDEM_BENCH_PQXX_PREPPED
  return tx.exec(pqxx::prepped{name}, make_params(std::forward<Args>(args)...));
#elif PQXX_VERSION_MAJOR == 7
  return tx.exec_prepared(name, make_params(std::forward<Args>(args)...));
#else
  return tx.exec_prepared(name, std::forward<Args>(args)...);
#endif
}

}  // namespace idem_bench::pqxx_calls
