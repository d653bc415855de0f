#include "options.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string_view>
#include <utility>

namespace idem::soak {
namespace {

constexpr const char* kUsage = R"(usage: idem-soak --backend sqlite|postgres|redis [options]

  --mode lease|transactional|steps
                               lease (default); transactional: SQLite and PostgreSQL only;
                               steps: lease mode, a handler of steps (SQLite, PostgreSQL)
  --target URI                 PostgreSQL or Redis URI (required for them); SQLite: a file path
                               (default <dir>/store.db)
  --dir PATH                   work folder for the ledger and shared state (required)
  --workers N                  worker processes at once (default 4, at most 64)
  --ops M                      operations in all (default 4000)
  --keys K                     distinct keys (default 300)
  --seconds S                  stop issuing operations after S seconds (default 60)
  --lease-ms MS                the guard's lease (default 400)
  --kill-every-ms MS           mean pause between SIGKILLs of a worker; 0: none (default 400)
  --restart-every-ms MS        mean pause between server restarts; 0: none (default 6000)
  --restart-cmd CMD            shell command that restarts the server and waits until it answers
  --seed N                     seed of every random choice (default 1)
  --group-commit               lease mode, SQLite and PostgreSQL: the store behind a
                               GroupCommitStore (claims and commits written in groups)
  --inject-double-execution    debug: run one handler per worker twice; the checks must fail

Exit status: 0 no violation, 1 violations (listed), 2 usage or setup error.
)";

template <class T>
bool parse_number(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && end == text.data() + text.size();
}

std::optional<SoakOptions> usage_error(const std::string& why) {
  std::fprintf(stderr, "idem-soak: %s\n\n%s", why.c_str(), kUsage);
  return std::nullopt;
}

// The enumerator whose to_string is `text`.
template <class E>
std::optional<E> named(std::string_view text, std::initializer_list<E> all) {
  for (E e : all) {
    if (text == to_string(e)) return e;
  }
  return std::nullopt;
}

}  // namespace

const char* to_string(Backend b) {
  switch (b) {
    case Backend::sqlite:
      return "sqlite";
    case Backend::postgres:
      return "postgres";
    case Backend::redis:
      return "redis";
  }
  return "?";
}

const char* to_string(Mode m) {
  switch (m) {
    case Mode::lease:
      return "lease";
    case Mode::transactional:
      return "transactional";
    case Mode::steps:
      return "steps";
  }
  return "?";
}

std::string SoakOptions::store_prefix() const { return "soak_" + run_id + "_"; }

std::optional<SoakOptions> parse_options(int argc, char** argv) {
  SoakOptions o;
  bool have_backend = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view name = argv[i];
    if (name == "--help" || name == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (name == "--group-commit") {
      o.group_commit = true;
      continue;
    }
    if (name == "--inject-double-execution") {
      o.inject_double_execution = true;
      continue;
    }
    if (i + 1 >= argc) return usage_error("missing value after " + std::string(name));
    const std::string_view value = argv[++i];
    long long n = 0;
    const bool numeric = parse_number(value, n) && n >= 0;
    if (name == "--backend") {
      const auto b = named<Backend>(value, {Backend::sqlite, Backend::postgres, Backend::redis});
      if (!b) return usage_error("unknown backend '" + std::string(value) + "'");
      o.backend = *b;
      have_backend = true;
    } else if (name == "--mode") {
      const auto m = named<Mode>(value, {Mode::lease, Mode::transactional, Mode::steps});
      if (!m) return usage_error("unknown mode '" + std::string(value) + "'");
      o.mode = *m;
    } else if (name == "--target") {
      o.target = value;
    } else if (name == "--dir") {
      o.dir = value;
    } else if (name == "--restart-cmd") {
      o.restart_cmd = value;
    } else if (name == "--run-id") {
      o.run_id = value;
    } else if (!numeric) {
      return usage_error(std::string(name) + " needs a non-negative integer, not '" +
                         std::string(value) + "'");
    } else if (name == "--workers") {
      o.workers = static_cast<int>(n);
    } else if (name == "--ops") {
      o.ops = static_cast<long>(n);
    } else if (name == "--keys") {
      o.keys = static_cast<int>(n);
    } else if (name == "--seconds") {
      o.duration = std::chrono::seconds{n};
    } else if (name == "--lease-ms") {
      o.lease = std::chrono::milliseconds{n};
    } else if (name == "--kill-every-ms") {
      o.kill_every = std::chrono::milliseconds{n};
    } else if (name == "--restart-every-ms") {
      o.restart_every = std::chrono::milliseconds{n};
    } else if (name == "--seed") {
      o.seed = static_cast<std::uint64_t>(n);
    } else if (name == "--worker-slot") {
      o.worker_slot = static_cast<int>(n);
    } else {
      return usage_error("unknown option " + std::string(name));
    }
  }
  if (!have_backend) return usage_error("--backend is required");
  if (o.dir.empty()) return usage_error("--dir is required");
  if (o.backend == Backend::redis && o.mode == Mode::transactional) {
    return usage_error("the Redis store has no transactional mode");
  }
  if (o.backend == Backend::redis && o.mode == Mode::steps) {
    return usage_error("the steps mode needs a SQL store (its atomic phase is a transaction)");
  }
  if (o.backend != Backend::sqlite && o.target.empty()) {
    return usage_error(std::string("--target is required for ") + to_string(o.backend));
  }
  if (o.target.empty()) o.target = o.dir + "/store.db";
  if (o.workers < 1 || o.workers > 64) return usage_error("--workers must be 1..64");
  if (o.keys < 1) return usage_error("--keys must be at least 1");
  if (o.ops < 1) return usage_error("--ops must be at least 1");
  if (o.lease.count() < 50) return usage_error("--lease-ms must be at least 50");
  if (o.group_commit && (o.backend == Backend::redis || o.mode != Mode::lease)) {
    return usage_error("--group-commit needs the SQLite or PostgreSQL store in lease mode");
  }
  return o;
}

std::vector<std::string> worker_arguments(const SoakOptions& o, int slot) {
  // Only what a worker reads: the store, the run's shape and its identity.
  std::vector<std::pair<std::string, std::string>> named = {
      {"--backend", to_string(o.backend)},
      {"--mode", to_string(o.mode)},
      {"--target", o.target},
      {"--dir", o.dir},
      {"--keys", std::to_string(o.keys)},
      {"--lease-ms", std::to_string(o.lease.count())},
      {"--seed", std::to_string(o.seed)},
      {"--run-id", o.run_id},
      {"--worker-slot", std::to_string(slot)},
  };
  std::vector<std::string> argv = {"idem-soak"};
  for (auto& [name, value] : named) {
    argv.push_back(name);
    argv.push_back(value);
  }
  if (o.inject_double_execution) argv.emplace_back("--inject-double-execution");
  if (o.group_commit) argv.emplace_back("--group-commit");
  return argv;
}

}  // namespace idem::soak
