// The memory limits that bind a container's processes, and what the host has left: what the CUDA
// driver's checkpoint is charged against. The driver stages a process's device memory in that
// process's own anonymous memory (driver 580: no custom storage), so the staging counts against the
// container's memory cgroup, every ancestor's (a Kubernetes pod cgroup has its own limit) and the
// host's RAM. A checkpoint that crosses one of them is OOM-killed mid-way.
//
// HostMemoryProbe reads cgroup v2 (memory.max, memory.high) and v1 (memory.limit_in_bytes, with
// memory.memsw.limit_in_bytes beside it) and /proc/meminfo; tests hand in their own probe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

inline constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();

// One limit of one cgroup, with what is charged there now.
struct MemoryLimit {
  std::filesystem::path cgroup;  // the cgroup's directory
  std::string file;              // memory.max | memory.high | memory.limit_in_bytes
  std::uint64_t limit = kNoLimit;
  std::uint64_t usage = 0;        // memory.current | memory.usage_in_bytes
  std::uint64_t reclaimable = 0;  // inactive page cache, counted as free (as the kubelet does)
  // v1: memory.memsw.limit_in_bytes must stay at or above memory.limit_in_bytes; kNoLimit or absent.
  std::string swap_file;
  std::uint64_t swap_limit = kNoLimit;

  [[nodiscard]] std::uint64_t used() const { return usage > reclaimable ? usage - reclaimable : 0; }
  [[nodiscard]] std::uint64_t headroom() const { return limit > used() ? limit - used() : 0; }
  [[nodiscard]] std::filesystem::path path() const { return cgroup / file; }
};

class MemoryProbe {
 public:
  virtual ~MemoryProbe() = default;
  // Every limit that binds `pid`: its memory cgroup's and each ancestor's that sets one, nearest
  // first. Empty when none does. Throws Error when the cgroup cannot be read.
  virtual std::vector<MemoryLimit> limits_of(pid_t pid) = 0;
  // The memory cgroup's directory of `pid` (empty when it cannot be told).
  virtual std::filesystem::path memory_cgroup(pid_t pid) = 0;
  // The same for a cgroup the runtime is about to create from an OCI cgroupsPath ("/a/b/c", or
  // systemd's "slice:prefix:name"): the limits of its ancestors that exist; `dir` gets where the
  // cgroup itself will be and `file` the name of its limit file. Throws Error.
  virtual std::vector<MemoryLimit> limits_above(const std::string& cgroups_path, std::filesystem::path& dir,
                                                std::string& file) = 0;
  // The host's MemAvailable (/proc/meminfo), in bytes. Throws Error.
  virtual std::uint64_t host_available() = 0;
  // What is charged to `cgroup` now, less its reclaimable cache. Throws Error (cgroup gone: NotFound).
  virtual std::uint64_t used(const std::filesystem::path& cgroup) = 0;
  // Writes a limit (kNoLimit as "max" on v2, -1 on v1). Throws Error (cgroup gone: NotFound).
  virtual void write_limit(const std::filesystem::path& file, std::uint64_t value) = 0;
  // The kernel's OOM kills so far in `cgroup` (memory.events or v1's memory.oom_control "oom_kill")
  // and on the host (/proc/vmstat "oom_kill"): a count that went up during a checkpoint names its
  // cause. 0 when the kernel does not count; Error(NotFound) when the cgroup is gone.
  virtual std::uint64_t oom_kills(const std::filesystem::path& cgroup) = 0;
  virtual std::uint64_t host_oom_kills() = 0;
};

class HostMemoryProbe final : public MemoryProbe {
 public:
  explicit HostMemoryProbe(std::filesystem::path meminfo = "/proc/meminfo", std::filesystem::path cgroup_root = "/sys/fs/cgroup",
                           std::filesystem::path proc_root = "/proc")
      : meminfo_(std::move(meminfo)), cgroup_root_(std::move(cgroup_root)), proc_root_(std::move(proc_root)) {}
  std::vector<MemoryLimit> limits_of(pid_t pid) override;
  std::filesystem::path memory_cgroup(pid_t pid) override;
  std::vector<MemoryLimit> limits_above(const std::string& cgroups_path, std::filesystem::path& dir, std::string& file) override;
  std::uint64_t host_available() override;
  std::uint64_t used(const std::filesystem::path& cgroup) override;
  void write_limit(const std::filesystem::path& file, std::uint64_t value) override;
  std::uint64_t oom_kills(const std::filesystem::path& cgroup) override;
  std::uint64_t host_oom_kills() override;

 private:
  [[nodiscard]] bool v2() const;
  // The memory cgroup's directory of pid and the hierarchy's top; throws Error.
  std::pair<std::filesystem::path, std::filesystem::path> dir_of(pid_t pid, bool unified);
  // The limits set at `dir` and above it, up to `top` (not included), nearest first.
  std::vector<MemoryLimit> limits_from(const std::filesystem::path& dir, const std::filesystem::path& top, bool unified);
  std::filesystem::path meminfo_, cgroup_root_, proc_root_;
};

// "max" and v1's page-counter ceiling (9223372036854771712) are kNoLimit; throws Error otherwise.
std::uint64_t parse_limit(const std::string& text, const std::string& what);
// The OOM kills a checkpoint or restore caused: the counts before it, compared after a failure.
struct OomBaseline {
  std::filesystem::path cgroup;  // empty: the container's cgroup is unknown
  std::uint64_t cgroup_kills = 0, host_kills = 0;
  // The cgroups above it that set a limit (a pod's), nearest first, with their counts: a kill at
  // the pod's limit is counted there (v2 counts a subtree's kills in each ancestor too, and the
  // container's own cgroup may be gone by the time a failure is looked at).
  std::vector<std::pair<std::filesystem::path, std::uint64_t>> above;
};
OomBaseline oom_baseline(MemoryProbe& probe, const std::filesystem::path& cgroup,
                         const std::vector<std::filesystem::path>& above = {});
// "" when no count went up; else the kernel's reason, with the counts and where they were read.
std::string oom_cause(MemoryProbe& probe, const OomBaseline& before);

// An OCI cgroupsPath as a path below the hierarchy's root: "/a/b" as is; systemd's
// "kubepods-burstable-pod1.slice:cri-containerd:ID" as
// "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-ID.scope".
std::filesystem::path cgroup_relative_path(const std::string& cgroups_path);

}  // namespace nvproxy::checkpoint
