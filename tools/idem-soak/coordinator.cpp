#include "coordinator.hpp"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "backend.hpp"
#include "ledger.hpp"
#include "shared_state.hpp"

namespace idem::soak {
namespace {

using namespace std::chrono_literals;
using std::chrono::nanoseconds;

// Workers are this same program. /proc/self/exe still runs it if the file is rebuilt meanwhile.
constexpr const char* kSelf = "/proc/self/exe";

void prepare_store(const SoakOptions& o) {
  with_store(o, [&](auto& store) {
    if constexpr (requires { store.ensure_schema(); }) {
      const Status ready = store.ensure_schema();
      if (!ready) throw std::runtime_error("store not ready: " + ready.failure().describe());
    } else if constexpr (requires { store.store().ensure_schema(); }) {  // group commit
      const Status ready = store.store().ensure_schema();
      if (!ready) throw std::runtime_error("store not ready: " + ready.failure().describe());
    } else {
      const Status up = store.client().ping();
      if (!up) throw std::runtime_error("store not ready: " + up.failure().describe());
    }
    return 0;
  });
  if (o.mode != Mode::lease) Effects::create(o);
}

class Coordinator {
 public:
  Coordinator(const SoakOptions& o, SharedState& shared)
      : o_(o),
        shared_(shared),
        procs_(static_cast<std::size_t>(o.workers)),
        rng_(o.seed ^ 0x5eedc4a05ULL) {}

  ChaosLog run() {
    {
      std::lock_guard lock(mu_);
      for (int s = 0; s < o_.workers; ++s) spawn(s);
    }
    std::thread chaos([this] { chaos_loop(); });
    reap_until_done();
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    chaos.join();
    return std::move(log_);
  }

 private:
  struct Proc {
    pid_t pid = 0;
    bool done = false;
  };

  // Caller holds mu_.
  void spawn(int slot) {
    std::vector<std::string> args = worker_arguments(o_, slot);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    shared_.table().slots[slot].phase.store(static_cast<int>(Phase::idle));
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      // A worker never outlives the coordinator (killed by a test's timeout, say).
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::execv(kSelf, argv.data());
      ::_exit(127);
    }
    procs_[static_cast<std::size_t>(slot)] = Proc{pid, false};
    ++log_.spawned;
  }

  bool work_left(int slot) const {
    const SlotState& s = shared_.table().slots[slot];
    return s.next_op.load() < s.end_op.load() && now_ns() < shared_.table().deadline_ns.load();
  }

  // Waits for each worker by its own pid (never waitpid(-1): the restart command's shell is a
  // child too) and starts a new process in the slot of each one the chaos thread killed.
  void reap_until_done() {
    const std::int64_t give_up =
        shared_.table().deadline_ns.load() + nanoseconds(60s + 4 * o_.lease).count();
    for (;;) {
      bool all_done = true;
      {
        std::lock_guard lock(mu_);
        for (int s = 0; s < o_.workers; ++s) {
          Proc& p = procs_[static_cast<std::size_t>(s)];
          if (p.done) continue;
          all_done = false;
          int status = 0;
          if (::waitpid(p.pid, &status, WNOHANG) != p.pid) continue;
          handle_exit(s, status);
        }
      }
      if (all_done) return;
      if (now_ns() > give_up) {
        std::lock_guard lock(mu_);
        for (int s = 0; s < o_.workers; ++s) {
          Proc& p = procs_[static_cast<std::size_t>(s)];
          if (p.done) continue;
          ::kill(p.pid, SIGKILL);
          ::waitpid(p.pid, nullptr, 0);
          p.done = true;
          log_.violations.push_back("worker " + std::to_string(p.pid) + " (slot " +
                                    std::to_string(s) +
                                    ") hung: still running 60 s after the "
                                    "deadline");
        }
        return;
      }
      std::this_thread::sleep_for(5ms);
    }
  }

  // Caller holds mu_.
  void handle_exit(int slot, int status) {
    Proc& p = procs_[static_cast<std::size_t>(slot)];
    const bool ours = killed_.count(p.pid) != 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      p.done = true;
      return;
    }
    const std::string who =
        "worker " + std::to_string(p.pid) + " (slot " + std::to_string(slot) + ")";
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && ours) {
      // killed by the chaos thread: expected
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
      log_.harness_errors.push_back(who + " could not write the ledger (message above)");
      p.done = true;
      return;
    } else if (WIFSIGNALED(status)) {
      log_.violations.push_back(who + " crashed: signal " + std::to_string(WTERMSIG(status)));
    } else {
      log_.violations.push_back(who + " exited with status " + std::to_string(WEXITSTATUS(status)));
    }
    if (work_left(slot)) {
      spawn(slot);
    } else {
      p.done = true;
    }
  }

  nanoseconds jitter(std::chrono::milliseconds mean) {
    // Uniform in [mean/2, 3*mean/2]: irregular, but with the mean the options ask for.
    std::uniform_real_distribution<double> f(0.5, 1.5);
    return std::chrono::duration_cast<nanoseconds>(mean * f(rng_));
  }

  void chaos_loop() {
    constexpr std::int64_t never = INT64_MAX;
    const bool kills = o_.kill_every.count() > 0;
    const bool restarts = o_.restart_every.count() > 0 && !o_.restart_cmd.empty();
    std::int64_t next_kill = kills ? now_ns() + jitter(o_.kill_every).count() : never;
    std::int64_t next_restart = restarts ? now_ns() + jitter(o_.restart_every).count() : never;
    std::unique_lock lock(mu_);
    while (!stop_) {
      const std::int64_t until = std::min(next_kill, next_restart);
      if (until == never) {
        wake_.wait(lock, [&] { return stop_; });
        break;
      }
      wake_.wait_for(lock, nanoseconds(std::max<std::int64_t>(0, until - now_ns())),
                     [&] { return stop_; });
      if (stop_) break;
      lock.unlock();
      if (now_ns() >= next_restart) {
        restart_server();
        next_restart = now_ns() + jitter(o_.restart_every).count();
      }
      if (now_ns() >= next_kill) {
        kill_one();
        next_kill = now_ns() + jitter(o_.kill_every).count();
      }
      lock.lock();
    }
  }

  void restart_server() {
    const std::int64_t start = now_ns();
    const int status = std::system(o_.restart_cmd.c_str());
    std::lock_guard lock(mu_);
    log_.restarts.push_back({start, now_ns() - start, status});
    if (status != 0) {
      log_.harness_errors.push_back("restart command failed (status " + std::to_string(status) +
                                    "): " + o_.restart_cmd);
    }
  }

  // SIGKILLs one worker, aiming at a chosen phase: mid-handler, between handler and commit, or
  // wherever it happens to be.
  void kill_one() {
    std::vector<int> live;
    {
      std::lock_guard lock(mu_);
      for (int s = 0; s < o_.workers; ++s) {
        if (!procs_[static_cast<std::size_t>(s)].done) live.push_back(s);
      }
    }
    if (live.empty()) return;
    const int slot = live[std::uniform_int_distribution<std::size_t>(0, live.size() - 1)(rng_)];
    const double aim = std::uniform_real_distribution<double>(0, 1)(rng_);
    // 40 % mid-handler, 35 % between handler and commit, 25 % wherever the worker is.
    std::optional<Phase> wanted;
    if (aim < 0.4)
      wanted = Phase::in_handler;
    else if (aim < 0.75)
      wanted = Phase::before_commit;
    std::atomic<int>& phase = shared_.table().slots[slot].phase;
    if (wanted) {
      const std::int64_t give_up = now_ns() + nanoseconds(300ms).count();
      while (phase.load() != static_cast<int>(*wanted) && now_ns() < give_up) {
        std::this_thread::sleep_for(100us);
      }
    }
    std::lock_guard lock(mu_);
    Proc& p = procs_[static_cast<std::size_t>(slot)];
    if (p.done) return;
    const Phase at = static_cast<Phase>(phase.load());
    if (::kill(p.pid, SIGKILL) == 0) {
      killed_.insert(p.pid);
      log_.kills.push_back({p.pid, slot, now_ns(), at});
    }
  }

  const SoakOptions& o_;
  SharedState& shared_;
  std::mutex mu_;  // procs_, killed_, log_, stop_
  std::condition_variable wake_;
  std::vector<Proc> procs_;
  std::set<pid_t> killed_;
  ChaosLog log_;
  bool stop_ = false;
  std::mt19937_64 rng_;  // chaos thread only
};

}  // namespace

ChaosLog run_workers(SoakOptions& o) {
  std::filesystem::create_directories(o.dir);
  if (o.run_id.empty()) {
    std::random_device entropy;
    char id[9];
    std::snprintf(id, sizeof id, "%08x", entropy());
    o.run_id = id;
  }
  for (const char* suffix : {"", "-wal", "-shm", "-fences"}) {
    std::filesystem::remove(o.ledger_path() + suffix);
    // The default SQLite store lives in the work folder: start it afresh too.
    if (o.backend == Backend::sqlite && o.target == o.dir + "/store.db") {
      std::filesystem::remove(o.target + suffix);
    }
  }
  Ledger::create(o.ledger_path());
  prepare_store(o);

  SharedState shared(o.shared_path(), true);
  SharedTable& t = shared.table();
  t.deadline_ns.store(now_ns() + nanoseconds(o.duration).count());
  for (int s = 0; s < o.workers; ++s) {
    t.slots[s].next_op.store(o.ops * s / o.workers);
    t.slots[s].end_op.store(o.ops * (s + 1) / o.workers);
  }
  return Coordinator(o, shared).run();
}

}  // namespace idem::soak
