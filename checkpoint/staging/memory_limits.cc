#include "checkpoint/staging/memory_limits.h"

#include "common/error.h"
#include "common/fs.h"
#include "common/number.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

namespace {

// v1 reports "no limit" as the page counter's ceiling, rounded to pages.
constexpr std::uint64_t kV1Unlimited = std::uint64_t{1} << 62;

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::uint64_t parse_limit(const std::string& text, const std::string& what) {
  std::string t = trimmed(text);
  if (t == "max") return kNoLimit;
  const auto v = parse_number<std::uint64_t>(t);
  if (!v) throw Error(Code::Internal, "unexpected limit " + quote_value(t) + " in " + what);
  return *v >= kV1Unlimited ? kNoLimit : *v;
}

fs::path cgroup_relative_path(const std::string& cgroups_path) {
  if (cgroups_path.empty() || cgroups_path.front() == '/') return fs::path(cgroups_path).lexically_normal();
  // systemd: "SLICE:PREFIX:NAME"; a slice "a-b-c.slice" sits in a.slice/a-b.slice.
  auto c1 = cgroups_path.find(':'), c2 = cgroups_path.find(':', c1 == std::string::npos ? c1 : c1 + 1);
  if (c1 == std::string::npos || c2 == std::string::npos)
    throw Error(Code::InvalidArgument, "cgroupsPath \"" + cgroups_path + "\" is neither a path nor slice:prefix:name");
  std::string slice = cgroups_path.substr(0, c1), prefix = cgroups_path.substr(c1 + 1, c2 - c1 - 1),
              name = cgroups_path.substr(c2 + 1);
  if (slice.empty()) slice = "system.slice";
  fs::path out = "/";
  if (slice != "-.slice") {
    std::string stem = slice.substr(0, slice.size() - std::string(".slice").size());
    for (size_t dash = stem.find('-'); dash != std::string::npos; dash = stem.find('-', dash + 1))
      out /= stem.substr(0, dash) + ".slice";
    out /= slice;
  }
  out /= (prefix.empty() ? name : prefix + "-" + name) + ".scope";
  return out;
}

OomBaseline oom_baseline(MemoryProbe& probe, const fs::path& cgroup, const std::vector<fs::path>& above) {
  // A cgroup not made yet (a restore's) starts at 0; counts that cannot be read name no cause later.
  OomBaseline b{.cgroup = cgroup};
  try {
    if (!cgroup.empty()) b.cgroup_kills = probe.oom_kills(cgroup);
  } catch (const std::exception&) {
  }
  for (const auto& a : above) {
    if (a.empty() || a == cgroup) continue;
    try {
      b.above.emplace_back(a, probe.oom_kills(a));
    } catch (const std::exception&) {
    }
  }
  try {
    b.host_kills = probe.host_oom_kills();
  } catch (const std::exception&) {
    b.host_kills = std::numeric_limits<std::uint64_t>::max();
  }
  return b;
}

std::string oom_cause(MemoryProbe& probe, const OomBaseline& before) {
  bool cgroup_gone = false;
  try {
    if (!before.cgroup.empty()) {
      std::uint64_t now = probe.oom_kills(before.cgroup);
      if (now > before.cgroup_kills)
        return "the kernel OOM-killed " + std::to_string(now - before.cgroup_kills) +
               " process(es) of the container at its memory limit during it (oom_kill " + std::to_string(before.cgroup_kills) +
               " -> " + std::to_string(now) + " in " + before.cgroup.string() + ")";
    }
  } catch (const std::exception&) {
    cgroup_gone = true;  // gone with its container (a runtime's failed restore removes it): the ancestors still count
  }
  for (const auto& [cg, kills] : before.above) {
    std::uint64_t now = 0;
    try {
      now = probe.oom_kills(cg);
    } catch (const std::exception&) {
      continue;  // gone too: the next one up may still count
    }
    if (now > kills)
      return "the kernel OOM-killed " + std::to_string(now - kills) + " process(es) in or below " + cg.string() +
             " during it (oom_kill " + std::to_string(kills) + " -> " + std::to_string(now) + ")";
  }
  try {
    std::uint64_t host = probe.host_oom_kills();
    if (before.host_kills != std::numeric_limits<std::uint64_t>::max() && host > before.host_kills && cgroup_gone)
      return "the kernel OOM-killed " + std::to_string(host - before.host_kills) +
             " process(es) on this host during it (oom_kill " + std::to_string(before.host_kills) + " -> " +
             std::to_string(host) + " in /proc/vmstat) and the container's cgroup " + before.cgroup.string() +
             " is gone, with its own count";
    if (before.host_kills != std::numeric_limits<std::uint64_t>::max() && host > before.host_kills)
      return "the kernel's OOM killer ran on the host during it (oom_kill " + std::to_string(before.host_kills) + " -> " +
             std::to_string(host) + " in /proc/vmstat): the host ran out of memory";
  } catch (const std::exception&) {
  }
  return "";
}

}  // namespace nvproxy::checkpoint
