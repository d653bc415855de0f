// idem-sim: the deterministic simulator of the whole protocol (docs/simulation.md).
//
//   idem-sim --seeds N [--from S] [--jobs J]   run seeds S..S+N-1; stop at the first failure
//   idem-sim --seed S [--trace]                one seed: its scenario, its schedule
//   idem-sim --replay 'TEXT' [--trace]         the scenario a failure printed
//   idem-sim --shrink S                        cut seed S's failing scenario down
//   idem-sim --mutants [--seeds N]             each defect of tests/sim/mutants.hpp is caught
//   idem-sim --mutant NAME ...                 any of the above with one defect put back
//   idem-sim --determinism N                   each of N seeds twice: the same schedule
//   idem-sim --regressions FILE                each case passes; its mutant still fails it
//
// Exit status: 0 when nothing failed (for --mutants: when every mutant was caught).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "sim/mutants.hpp"
#include "sim/runner.hpp"
#include "sim/scenario.hpp"
#include "sim/world.hpp"

namespace {

using namespace idem::sim;

struct Args {
  std::optional<std::uint64_t> seeds;
  std::uint64_t from = 1;
  unsigned jobs = 1;
  std::optional<std::uint64_t> seed;
  std::optional<std::string> replay;
  std::optional<std::uint64_t> shrink;
  bool mutants = false;
  std::string mutant;
  std::optional<std::uint64_t> determinism;
  std::optional<std::string> regressions;
  bool trace = false;
  bool quiet = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "idem-sim: %s\n", why);
  std::fprintf(stderr,
               "usage: idem-sim --seeds N [--from S] [--jobs J] | --seed S [--trace] | "
               "--replay TEXT [--trace] | --shrink S | --mutants [--seeds N] | --determinism N "
               "[--mutant NAME]\n");
  std::exit(2);
}

std::uint64_t number(const char* text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0') usage("expected a number");
  return v;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage("missing a value");
      return argv[++i];
    };
    if (arg == "--seeds") {
      a.seeds = number(value());
    } else if (arg == "--from") {
      a.from = number(value());
    } else if (arg == "--jobs") {
      a.jobs = static_cast<unsigned>(number(value()));
    } else if (arg == "--seed") {
      a.seed = number(value());
    } else if (arg == "--replay") {
      a.replay = value();
    } else if (arg == "--shrink") {
      a.shrink = number(value());
    } else if (arg == "--mutants") {
      a.mutants = true;
    } else if (arg == "--mutant") {
      a.mutant = value();
    } else if (arg == "--determinism") {
      a.determinism = number(value());
    } else if (arg == "--regressions") {
      a.regressions = value();
    } else if (arg == "--trace") {
      a.trace = true;
    } else if (arg == "--quiet") {
      a.quiet = true;
    } else {
      usage("unknown argument");
    }
  }
  if (a.jobs == 0) a.jobs = std::max(1u, std::thread::hardware_concurrency());
  return a;
}

const Mutant* mutant_named(std::string_view name) {
  for (const Mutant& m : kMutants) {
    if (m.name == name || std::to_string(m.id) == name) return &m;
  }
  return nullptr;
}

void print_failure(const Failure& f) {
  std::printf("FAILED seed %llu: %s\n  promise: %s\n  %s\n",
              static_cast<unsigned long long>(f.seed), std::string(name(f.violation.check)).c_str(),
              std::string(promise(f.violation.check)).c_str(), f.violation.what.c_str());
  std::printf("  scenario: %s\n", to_text(f.scenario).c_str());
  // The schedule: the same seed again, every step of it told (a run is a function of its seed).
  RunOptions traced;
  traced.trace = true;
  const RunReport again = run(f.scenario, traced);
  std::printf("  schedule (%llu steps):\n", static_cast<unsigned long long>(again.steps));
  for (const std::string& line : again.trace) std::printf("    %s\n", line.c_str());
  std::printf("  replay:   idem-sim --seed %llu --trace    (shrink: --shrink %llu)\n",
              static_cast<unsigned long long>(f.seed), static_cast<unsigned long long>(f.seed));
}

int run_one(const Scenario& scenario, bool trace) {
  RunOptions options;
  options.trace = trace;
  const RunReport report = run(scenario, options);
  std::printf("scenario: %s\n", to_text(scenario).c_str());
  for (const std::string& line : report.trace) std::printf("  %s\n", line.c_str());
  std::printf("%llu steps, schedule digest %016llx\n",
              static_cast<unsigned long long>(report.steps),
              static_cast<unsigned long long>(report.digest));
  if (!report.failed) {
    std::printf("passed\n");
    return 0;
  }
  std::printf("FAILED: %s\n  promise: %s\n  %s\n",
              std::string(name(report.violation.check)).c_str(),
              std::string(promise(report.violation.check)).c_str(), report.violation.what.c_str());
  return 1;
}

int run_seeds(const Args& a) {
  Sweep s;
  s.first = a.from;
  s.count = *a.seeds;
  s.jobs = a.jobs;
  s.progress = !a.quiet;
  const SweepResult r = sweep(s);
  std::printf("%llu seeds in %.1f s (%.0f seeds/s, %u jobs)\n",
              static_cast<unsigned long long>(r.ran), r.seconds,
              static_cast<double>(r.ran) / r.seconds, a.jobs);
  if (!a.quiet) {
    std::printf("explored:\n  %-18s %llu\n%s", "schedule steps",
                static_cast<unsigned long long>(r.stats.steps), r.stats.summary().c_str());
  }
  if (r.failure) {
    print_failure(*r.failure);
    return 1;
  }
  std::printf("passed\n");
  return 0;
}

int run_mutants(const Args& a) {
  const std::uint64_t budget = a.seeds.value_or(20'000);
  int missed = 0;
  std::printf("%-30s %-28s %-28s %s\n", "mutant", "expected check", "caught by", "seeds");
  for (const Mutant& m : kMutants) {
    idem::detail::sim_mutant = m.id;
    Sweep s;
    s.first = a.from;
    s.count = budget;
    s.jobs = a.jobs;
    const SweepResult r = sweep(s);
    if (!r.failure) {
      ++missed;
      std::printf("%-30s %-28s %-28s not caught in %llu\n", std::string(m.name).c_str(),
                  std::string(name(m.expected)).c_str(), "-",
                  static_cast<unsigned long long>(r.ran));
    } else {
      const Check got = r.failure->violation.check;
      std::printf("%-30s %-28s %-28s %llu%s\n", std::string(m.name).c_str(),
                  std::string(name(m.expected)).c_str(), std::string(name(got)).c_str(),
                  static_cast<unsigned long long>(r.failure->seed - a.from + 1),
                  got == m.expected ? "" : "  (another check first)");
    }
    std::fflush(stdout);
  }
  idem::detail::sim_mutant = 0;
  std::printf("%d of %zu mutants caught\n", static_cast<int>(std::size(kMutants)) - missed,
              std::size(kMutants));
  return missed == 0 ? 0 : 1;
}

int run_determinism(const Args& a) {
  for (std::uint64_t seed = a.from; seed < a.from + *a.determinism; ++seed) {
    const Scenario scenario = generate(seed);
    const RunReport first = run(scenario);
    const RunReport second = run(scenario);
    if (first.digest != second.digest || first.failed != second.failed) {
      std::printf("seed %llu ran two ways: digests %016llx and %016llx\n",
                  static_cast<unsigned long long>(seed),
                  static_cast<unsigned long long>(first.digest),
                  static_cast<unsigned long long>(second.digest));
      return 1;
    }
    std::string error;
    const auto reread = parse(to_text(scenario), error);
    if (!reread || to_text(*reread) != to_text(scenario)) {
      std::printf("seed %llu: its scenario does not read back from its text (%s)\n",
                  static_cast<unsigned long long>(seed), error.c_str());
      return 1;
    }
  }
  std::printf("%llu seeds ran the same way twice\n",
              static_cast<unsigned long long>(*a.determinism));
  return 0;
}

// Each line of `path`: "name | mutant | scenario". The scenario must pass under every one of
// kSchedules schedules, and fail under at least one with its mutant put back: the case still
// reaches the defect it was found with.
int run_regressions(const std::string& path) {
  constexpr int kSchedules = 300;
  std::FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) usage("cannot read the regressions file");
  int failed = 0;
  int cases = 0;
  char buffer[8192];
  while (std::fgets(buffer, sizeof buffer, file) != nullptr) {
    std::string line(buffer);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::size_t bar1 = line.find('|');
    const std::size_t bar2 = bar1 == std::string::npos ? bar1 : line.find('|', bar1 + 1);
    if (bar2 == std::string::npos) usage("a regression is: name | mutant | scenario");
    auto trim = [](std::string t) {
      while (!t.empty() && t.front() == ' ') t.erase(t.begin());
      while (!t.empty() && t.back() == ' ') t.pop_back();
      return t;
    };
    const std::string name = trim(line.substr(0, bar1));
    const std::string mutant = trim(line.substr(bar1 + 1, bar2 - bar1 - 1));
    std::string error;
    const auto scenario = parse(line.substr(bar2 + 1), error);
    const Mutant* m = mutant_named(mutant);
    if (!scenario || m == nullptr) {
      std::printf("%s: cannot read it (%s)\n", name.c_str(), !scenario ? error.c_str() : "mutant");
      ++failed;
      continue;
    }
    ++cases;
    int passes = 0;
    int caught = 0;
    for (int i = 0; i < kSchedules; ++i) {
      Scenario s = *scenario;
      s.seed = i == 0 ? scenario->seed : mix(scenario->seed, static_cast<std::uint64_t>(i));
      idem::detail::sim_mutant = 0;
      const RunReport fixed = run(s);
      if (!fixed.failed) {
        ++passes;
      } else if (passes == i) {
        std::printf("%s: FAILED under schedule %d: %s: %s\n", name.c_str(), i,
                    std::string(idem::sim::name(fixed.violation.check)).c_str(),
                    fixed.violation.what.c_str());
      }
      idem::detail::sim_mutant = m->id;
      if (run(s).failed) ++caught;
    }
    idem::detail::sim_mutant = 0;
    const bool ok = passes == kSchedules && caught > 0;
    if (!ok) ++failed;
    std::printf("%-36s %s: passes %d of %d schedules; its mutant fails %d\n", name.c_str(),
                ok ? "ok" : "FAILED", passes, kSchedules, caught);
  }
  std::fclose(file);
  std::printf("%d of %d regression cases pass\n", cases - failed, cases);
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  if (!a.mutant.empty()) {
    const Mutant* m = mutant_named(a.mutant);
    if (m == nullptr) usage("no such mutant (see tests/sim/mutants.hpp)");
    idem::detail::sim_mutant = m->id;
  }
  if (a.mutants) return run_mutants(a);
  if (a.regressions) return run_regressions(*a.regressions);
  if (a.determinism) return run_determinism(a);
  if (a.seed) return run_one(generate(*a.seed), a.trace || true);
  if (a.replay) {
    std::string error;
    const auto scenario = parse(*a.replay, error);
    if (!scenario) usage(error.c_str());
    return run_one(*scenario, a.trace);
  }
  if (a.shrink) {
    const Scenario scenario = generate(*a.shrink);
    const RunReport report = run(scenario);
    if (!report.failed) {
      std::printf("seed %llu passes: nothing to shrink\n",
                  static_cast<unsigned long long>(*a.shrink));
      return 0;
    }
    std::printf("seed %llu fails %s with %zu operations; shrinking\n",
                static_cast<unsigned long long>(*a.shrink),
                std::string(name(report.violation.check)).c_str(), scenario.size());
    const Scenario small = shrink(scenario, report.violation.check, [](const std::string& line) {
      std::printf("%s\n", line.c_str());
    });
    std::printf("shrunk to %zu operations:\n  idem-sim --replay '%s' --trace\n", small.size(),
                to_text(small).c_str());
    return run_one(small, true);
  }
  if (a.seeds) return run_seeds(a);
  usage("nothing to do");
}
