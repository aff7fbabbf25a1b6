// What the staging bill, the host-wide reservation and the lift add to a checkpoint (issue 45):
// each step timed over many repetitions against this host's real cgroup files and /proc, root
// only. A memory cgroup of its own is made (v1 or v2) with a limit, this process moves in, and
// each repetition reads the limits over it and MemAvailable, reserves in a private account, lifts
// the limit, puts it back and lets the reservation go: the shim's whole added path around the
// driver's checkpoint, which takes seconds.
//   staging_overhead [--reps N]      prints a markdown table (median and p90 per step, microseconds)
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/staging/host_reservations.h"
#include "checkpoint/staging/limit_lift.h"
#include "checkpoint/staging/memory_limits.h"
#include "checkpoint/staging/staging_bill.h"

namespace fs = std::filesystem;
using namespace nvproxy;
using namespace nvproxy::checkpoint;
using Clock = std::chrono::steady_clock;

namespace {

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

struct Series {
  std::string name;
  std::vector<double> us;
  [[nodiscard]] double pct(double p) const {
    std::vector<double> s = us;
    std::sort(s.begin(), s.end());
    return s[static_cast<size_t>(p * static_cast<double>(s.size() - 1))];
  }
};

void put(const fs::path& p, const std::string& v) {
  std::ofstream o(p);
  o << v;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 200;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  if (::geteuid() != 0) {
    std::fprintf(stderr, "staging_overhead: needs root (it makes a memory cgroup)\n");
    return 77;
  }
  const bool v2 = fs::exists("/sys/fs/cgroup/cgroup.controllers");
  const fs::path base = v2 ? fs::path("/sys/fs/cgroup") : fs::path("/sys/fs/cgroup/memory");
  const fs::path cg = base / ("nvproxy-bench-staging-" + std::to_string(::getpid()));
  const std::string limit_file = v2 ? "memory.max" : "memory.limit_in_bytes";
  fs::path home;  // where this process was, to go back before the cgroup is removed
  {
    std::ifstream in("/proc/self/cgroup");
    for (std::string l; std::getline(in, l);) {
      if (v2 && l.rfind("0::", 0) == 0) home = base / fs::path(l.substr(3)).relative_path();
      if (!v2 && l.find(":memory:") != std::string::npos) home = base / fs::path(l.substr(l.rfind(':') + 1)).relative_path();
    }
  }
  fs::create_directories(cg);
  put(cg / limit_file, std::to_string(std::uint64_t{1} << 30));
  put(cg / "cgroup.procs", std::to_string(::getpid()));
  const fs::path account = fs::temp_directory_path() / ("nvproxy-bench-staging-" + std::to_string(::getpid()) + ".json");
  const fs::path record = fs::temp_directory_path() / ("nvproxy-bench-lift-" + std::to_string(::getpid()) + ".json");

  HostMemoryProbe probe;
  HostReservations acc(account);
  Logger log(0);
  Series bill{"bill: limits over the cgroup + MemAvailable + the account's others"}, plan{"plan (policy, no I/O)"},
      reserve{"reserve in the host account (flock, read, write)"}, lift{"lift: record + write the limit"},
      back{"put back: usage read + write + record removed"}, release{"reservation let go"}, total{"all of the above"};
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    StagingBill b;
    b.staged[::getpid()] = std::uint64_t{2} << 30;  // 2 GiB against a 1 GiB limit: a lift every time
    b.margin = std::uint64_t{256} << 20;
    b.limits = probe.limits_of(::getpid());
    b.host_available = probe.host_available();
    for (const auto& o : acc.others("bench")) b.reserved_by_others += o.bytes;
    bill.us.push_back(us_since(t0));
    auto t1 = Clock::now();
    StagingPlan p = plan_staging(b, StagingMode::Lift, "checkpoint");
    plan.us.push_back(us_since(t1));
    if (p.refused || p.lifts.empty()) {
      std::fprintf(stderr, "staging_overhead: unexpected plan: %s\n", p.reason.c_str());
      break;
    }
    auto t2 = Clock::now();
    auto held = acc.reserve("bench", "checkpoint", [&](std::uint64_t, const auto&) { return std::optional(p.reserve); });
    reserve.us.push_back(us_since(t2));
    auto t3 = Clock::now();
    LimitLift l(probe, p.lifts, record, log, "bench");
    lift.us.push_back(us_since(t3));
    auto t4 = Clock::now();
    l.put_back();
    back.us.push_back(us_since(t4));
    auto t5 = Clock::now();
    held.release();
    release.us.push_back(us_since(t5));
    total.us.push_back(us_since(t0));
  }
  if (!home.empty()) put(home / "cgroup.procs", std::to_string(::getpid()));
  ::rmdir(cg.c_str());
  std::error_code ec;
  fs::remove(account, ec);
  fs::path lock = account;
  lock += ".lock";
  fs::remove(lock, ec);
  std::printf("cgroup %s, %d repetitions\n\n| step | median us | p90 us |\n| --- | ---: | ---: |\n", v2 ? "v2" : "v1", reps);
  for (const Series* s : {&bill, &plan, &reserve, &lift, &back, &release, &total})
    if (!s->us.empty()) std::printf("| %s | %.1f | %.1f |\n", s->name.c_str(), s->pct(0.5), s->pct(0.9));
  return 0;
}
