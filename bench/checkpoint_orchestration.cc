// Benchmark: the checkpoint orchestrator's own cost, and parallel against sequential toggling.
//
// Drives the real Orchestrator (checkpoint/orchestrator/orchestrator.h) as the shim does: through
// nvproxy-cuda-helper (started by the first call, inside the timed window, as in a real checkpoint),
// the real /proc holder scan and real processes: the fake driver
// (test/fixtures/fake_cuda/fake_libcuda.c) and N fake_cuda_app processes, each holding a fake device
// file. The fake driver sleeps delay_ms in every Checkpoint and Restore (the time a real driver spends
// copying GPU memory) and logs every call with CLOCK_MONOTONIC start/end to DIR/calls.log, so
//
//   shim's own time = wall time of the orchestration - time during which at least one driver call ran
//
// is what the shim adds (scan, classify, thread start/join, verify rescan, coordination).
//
// Per N (default 1, 8, 64):
//   parallel    Orchestrator::checkpoint_around with parallelism 0 (the default), keep_running: lock all,
//               checkpoint all, verify, a no-op snapshot, restore+unlock all.
//   sequential  the same with checkpoint.parallelism = 1.
//   per-pid     no orchestrator, no helper: for each pid one after another lock, checkpoint, restore,
//               unlock in-process (what toggling each process on its own, e.g. `cuda-checkpoint
//               --toggle`, costs).
//
// Usage: checkpoint_orchestration [--delay-ms 50] [--counts 1,8,64] [--reps 5] [--seq-reps 3] [--in-process]
//   --in-process: the orchestrator calls the driver in this process (as the shim did before 0.2.0)
//                 instead of through nvproxy-cuda-helper, to see what the helper costs.
// Prints markdown tables (bench/README.md). No GPU, no root needed.
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/driver/cuda_driver_api.h"
#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/process/process_list.h"
#include "checkpoint/programs/cuda_helper_client.h"
#include "checkpoint/shared/holder_scan.h"
#include "common/log.h"
#include "common/process.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
namespace fs = std::filesystem;

namespace {

long long now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // the clock the fake driver stamps calls.log with
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

void spit(const fs::path& p, const std::string& s) {
  std::ofstream(p) << s;
}

struct Call {
  std::string op;
  long long start = 0, end = 0;
  int rc = 0;
};

// Union length (ns) of the intervals, clipped to [lo, hi].
long long busy_ns(std::vector<std::pair<long long, long long>> iv, long long lo, long long hi) {
  std::sort(iv.begin(), iv.end());
  long long total = 0, cs = -1, ce = -1;
  for (auto [s, e] : iv) {
    s = std::max(s, lo);
    e = std::min(e, hi);
    if (e <= s) continue;
    if (s > ce) {
      if (ce > cs) total += ce - cs;
      cs = s;
      ce = e;
    } else {
      ce = std::max(ce, e);
    }
  }
  if (ce > cs) total += ce - cs;
  return total;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string f1(double v) {
  char b[32];
  std::snprintf(b, sizeof b, v < 10 ? "%.2f" : "%.1f", v);
  return b;
}

class FakeGpu {
 public:
  explicit FakeGpu(int delay_ms) {
    std::string tmpl = (fs::temp_directory_path() / "nvproxy-bench-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    fs::create_directories(dir_ / "dev");
    spit(dir_ / "dev" / "nvidia0", std::string(4096, 'x'));
    spit(dir_ / "delay_ms", std::to_string(delay_ms));
    ::setenv("NVPROXY_FAKE_CUDA_DIR", dir_.c_str(), 1);
  }
  ~FakeGpu() {
    stop_apps();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const fs::path& dir() const { return dir_; }
  std::string glob() const { return (dir_ / "dev" / "nvidia*").string(); }

  // Starts n fake_cuda_app processes (each opens and maps the fake device) and waits until ready.
  std::vector<pid_t> start_apps(int n) {
    std::vector<pid_t> pids;
    for (int i = 0; i < n; ++i) {
      pid_t p = runner_.start(
          {.argv = {FAKE_CUDA_APP_PATH, "--dir", dir_.string(), "--device", (dir_ / "dev" / "nvidia0").string(), "--map"}});
      apps_.push_back(p);
      pids.push_back(p);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (pid_t p : pids)
      while (!fs::exists(dir_ / (std::to_string(p) + ".ready"))) {
        if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("fake_cuda_app did not get ready");
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    std::sort(pids.begin(), pids.end());
    return pids;
  }
  void stop_apps() {
    for (pid_t p : apps_) ::kill(p, SIGTERM);
    for (pid_t p : apps_) runner_.wait(p);
    apps_.clear();
  }
  void clear_calls() {
    std::error_code ec;
    fs::remove(dir_ / "calls.log", ec);
  }
  std::vector<Call> calls() const {
    std::vector<Call> out;
    std::ifstream in(dir_ / "calls.log");
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      long pid;
      Call c;
      ls >> pid >> c.op >> c.start >> c.end >> c.rc;
      out.push_back(c);
    }
    return out;
  }

 private:
  fs::path dir_;
  DirectWaiter waiter_;
  ProcessRunner runner_{waiter_};
  std::vector<pid_t> apps_;
};

struct Run {
  double wall_ms = 0;
  double driver_busy_ms = 0;  // union of all driver calls in the window
  double driver_sum_ms = 0;   // sum of driver call durations (what one-at-a-time would cost)
  double shim_ms = 0;         // wall - driver busy
  std::map<std::string, double> phase;
  double classify_driver_ms = 0;  // get-state calls during classify
  size_t calls = 0;
  size_t failed_calls = 0;
};

Run measure(FakeGpu& gpu, long long t0, long long t1) {
  Run r;
  r.wall_ms = (t1 - t0) / 1e6;
  std::vector<std::pair<long long, long long>> all, cls;
  long long first_lock = t1;
  auto cs = gpu.calls();
  for (const auto& c : cs)
    if (c.op == "lock") first_lock = std::min(first_lock, c.start);
  for (const auto& c : cs) {
    all.emplace_back(c.start, c.end);
    r.driver_sum_ms += (c.end - c.start) / 1e6;
    if (c.op == "get-state" && c.end <= first_lock) cls.emplace_back(c.start, c.end);
    ++r.calls;
    if (c.rc != 0) ++r.failed_calls;
  }
  r.driver_busy_ms = busy_ns(all, t0, t1) / 1e6;
  r.classify_driver_ms = busy_ns(cls, t0, t1) / 1e6;
  r.shim_ms = r.wall_ms - r.driver_busy_ms;
  return r;
}

// in_process: the driver loaded into this process (the shim before 0.2.0), for comparison.
Run orchestrate(FakeGpu& gpu, const std::vector<pid_t>& pids, unsigned parallelism, bool in_process) {
  CheckpointConfig cfg;
  cfg.libcuda = FAKE_LIBCUDA_PATH;
  cfg.device_globs = {gpu.glob()};
  cfg.parallelism = parallelism;
  cfg.cuda_helper = CUDA_HELPER_PATH;
  FunctionLister lister(pids);
  ProcHolderScanner scanner(cfg.device_globs);
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  // As in the shim: the helper is started (and loads the driver) by the first CUDA call.
  CudaTools cuda = make_cuda_tools(cfg, runner);
  DriverApiToggler direct(FAKE_LIBCUDA_PATH);
  if (in_process) direct.driver_version();  // dlopen outside the timed window
  Logger log(-1);
  Orchestrator o(cfg, {.lister = &lister, .scanner = &scanner, .toggler = in_process ? &direct : cuda.toggler.get()}, log);
  gpu.clear_calls();
  long long t0 = now_ns();
  auto out = o.checkpoint_around({.container_id = "bench", .keep_running = true}, [] {});
  long long t1 = now_ns();
  if (out.toggled.size() != pids.size())
    throw std::runtime_error("toggled " + std::to_string(out.toggled.size()) + " of " + std::to_string(pids.size()));
  Run r = measure(gpu, t0, t1);
  for (const auto& p : out.phases) r.phase[p.name] += p.ms;
  return r;
}

Run per_pid(FakeGpu& gpu, const std::vector<pid_t>& pids) {
  DriverApiToggler t(FAKE_LIBCUDA_PATH);
  t.driver_version();
  gpu.clear_calls();
  long long t0 = now_ns();
  for (pid_t p : pids) {
    t.lock(p, 10000);
    t.checkpoint(p);
    t.restore(p, {});
    t.unlock(p);
  }
  long long t1 = now_ns();
  return measure(gpu, t0, t1);
}

template <class F>
std::vector<Run> repeat(int n, F&& f) {
  std::vector<Run> v;
  for (int i = 0; i < n; ++i) {
    v.push_back(f());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return v;
}

template <class Get>
double med(const std::vector<Run>& v, Get g) {
  std::vector<double> x;
  for (const auto& r : v) x.push_back(g(r));
  return median(x);
}

std::vector<int> parse_counts(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoi(item));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int delay_ms = 50, reps = 5, seq_reps = 3;
  bool in_process = false;
  std::vector<int> counts{1, 8, 64};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--delay-ms")
      delay_ms = std::stoi(next());
    else if (a == "--counts")
      counts = parse_counts(next());
    else if (a == "--reps")
      reps = std::stoi(next());
    else if (a == "--seq-reps")
      seq_reps = std::stoi(next());
    else if (a == "--in-process")
      in_process = true;
    else {
      std::cerr << "usage: checkpoint_orchestration [--delay-ms MS] [--counts 1,8,64] [--reps N] [--seq-reps N] [--in-process]\n";
      return 2;
    }
  }
  // 64 apps + 64 worker threads stay far below the defaults, but fd limits can be tight in CI.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }

  struct Row {
    int n;
    std::vector<Run> par, seq, pp;
  };
  std::vector<Row> rows;
  auto bench_start = std::chrono::steady_clock::now();
  try {
    for (int n : counts) {
      FakeGpu gpu(delay_ms);
      auto pids = gpu.start_apps(n);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      Row row{n, {}, {}, {}};
      orchestrate(gpu, pids, 0, in_process);  // warm-up (page cache, first thread start)
      row.par = repeat(reps, [&] { return orchestrate(gpu, pids, 0, in_process); });
      int sr = n >= 32 ? seq_reps : reps;
      row.seq = repeat(sr, [&] { return orchestrate(gpu, pids, 1, in_process); });
      row.pp = repeat(sr, [&] { return per_pid(gpu, pids); });
      for (const auto* set : {&row.par, &row.seq, &row.pp})
        for (const auto& r : *set)
          if (r.failed_calls) throw std::runtime_error(std::to_string(r.failed_calls) + " driver calls failed");
      std::cerr << "N=" << n << " done (" << row.par.size() << "+" << row.seq.size() << "+" << row.pp.size() << " runs)\n";
      rows.push_back(std::move(row));
      gpu.stop_apps();
    }
  } catch (const std::exception& e) {
    std::cerr << "checkpoint_orchestration: " << e.what() << "\n";
    return 1;
  }
  double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - bench_start).count();

  utsname u{};
  uname(&u);
  std::cout << "checkpoint_orchestration (driver " << (in_process ? "in-process" : "through nvproxy-cuda-helper")
            << "): fake driver delay " << delay_ms << " ms per Checkpoint and per Restore; "
            << std::thread::hardware_concurrency() << " CPUs; kernel " << u.release << "; medians of " << reps
            << " runs (sequential and per-pid at N>=32: " << seq_reps << "); whole benchmark " << f1(total_s) << " s\n\n";

  std::cout << "Shim's own time, parallel orchestration (checkpoint.parallelism 0): lock + checkpoint + verify + "
               "no-op snapshot + restore/unlock, ms\n\n";
  std::cout << "| processes | wall | fake driver busy | shim's own (wall - driver) | per process | scan | classify "
               "(of which GetState) | verify | share of wall |\n";
  std::cout << "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& r : rows) {
    double wall = med(r.par, [](const Run& x) { return x.wall_ms; });
    double shim = med(r.par, [](const Run& x) { return x.shim_ms; });
    std::cout << "| " << r.n << " | " << f1(wall) << " | " << f1(med(r.par, [](const Run& x) { return x.driver_busy_ms; }))
              << " | " << f1(shim) << " | " << f1(shim / r.n) << " | "
              << f1(med(r.par, [](const Run& x) { return x.phase.count("scan") ? x.phase.at("scan") : 0.0; })) << " | "
              << f1(med(r.par, [](const Run& x) { return x.phase.count("classify") ? x.phase.at("classify") : 0.0; })) << " ("
              << f1(med(r.par, [](const Run& x) { return x.classify_driver_ms; })) << ") | "
              << f1(med(r.par, [](const Run& x) { return x.phase.count("verify") ? x.phase.at("verify") : 0.0; })) << " | "
              << f1(100.0 * shim / wall) << "% |\n";
  }

  std::cout << "\nParallel against sequential: wall time of the whole lock + checkpoint + verify + restore, ms\n\n";
  std::cout << "| processes | parallel (parallelism 0) | sequential (parallelism 1) | per-pid toggles one after "
               "another | sum of driver call times | speed-up vs parallelism 1 | vs per-pid |\n";
  std::cout << "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& r : rows) {
    double par = med(r.par, [](const Run& x) { return x.wall_ms; });
    double seq = med(r.seq, [](const Run& x) { return x.wall_ms; });
    double pp = med(r.pp, [](const Run& x) { return x.wall_ms; });
    double sum = med(r.pp, [](const Run& x) { return x.driver_sum_ms; });
    std::cout << "| " << r.n << " | " << f1(par) << " | " << f1(seq) << " | " << f1(pp) << " | " << f1(sum) << " | "
              << f1(seq / par) << "x | " << f1(pp / par) << "x |\n";
  }
  std::cout << "\nSequential runs, shim's own time (wall - driver busy), ms: ";
  for (const auto& r : rows) std::cout << "N=" << r.n << " " << f1(med(r.seq, [](const Run& x) { return x.shim_ms; })) << "; ";
  std::cout << "\n";
  return 0;
}
