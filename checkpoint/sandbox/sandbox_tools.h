// The checkpoint seams for a gVisor sandbox (runsc). Host /proc sees only the sentry there, so every
// question about the container's processes is asked INSIDE the sandbox: the shim runs
// nvproxy-sandbox-agent (checkpoint/agent/sandbox_agent.h) with `runsc exec`, under a deadline, from the
// read-only tools mount that Create gave the container (/.nvproxy: the agent, the host's dynamic
// loader and its libc, so that the agent runs in any image, busybox included). Pids are the
// sandbox's own; reports name them. The same Orchestrator drives these as the host tools under runc.
//
//   SandboxLister          `agent list`              every process of the sandbox
//   SandboxHolderScanner   `agent scan --glob ...`   device fds and mappings, names, command lines
//   SandboxCudaToggler     `agent cuda OP PID`       the driver's checkpoint API, libcuda.so.1 of
//                                                    the container (the device layer put it there)
//   SandboxGpuProbe        GPU device files held     /dev/nvidiaN per process: NVML inside gVisor
//                                                    cannot tell sandbox pids apart
//   SandboxCommProbe       `agent scan`              NCCL / IPC signals from the sandbox's /proc
// The scan's process facts carry the CUDA IPC file (/dev/shm/cuda.shm.*) too, so the IPC refusal
// decides on the sandbox's view. Not the managed-memory size: how gVisor lays out /dev/nvidia-uvm
// ranges in its maps is not measured, and a wrong size would refuse plain CUDA processes; a managed
// allocation under runsc fails its toggle instead (rolled back, named).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/attempt/release.h"
#include "checkpoint/config.h"
#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/process/file_identity.h"
#include "checkpoint/process/process_list.h"
#include "checkpoint/shared/comm_probe.h"
#include "checkpoint/shared/cuda_toggler.h"
#include "checkpoint/shared/gpu_usage.h"
#include "checkpoint/shared/holder_scan.h"
#include "common/log.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

// Where the container sees the tools.
inline constexpr const char* kSandboxToolsMount = "/.nvproxy";
inline constexpr const char* kSandboxAgentName = "nvproxy-sandbox-agent";

// The agent beside the running binary, then ../libexec/containerd-shim-nvproxy/.
std::string default_sandbox_agent_path();

// Fills `dir` (made if missing) with the agent, the host's dynamic loader (dir/ld.so) and the
// libraries the agent and libcuda need from the C library (dir/lib/). Throws Error naming the file.
void stage_sandbox_tools(const std::filesystem::path& dir, const std::string& agent);

// The OCI mount of `dir` at kSandboxToolsMount, read-only.
nlohmann::json sandbox_tools_mount(const std::filesystem::path& dir);

// How to reach the agent of one container.
struct SandboxTarget {
  std::vector<std::string> runsc;  // the runtime binary and its global flags (--root=...)
  std::string container_id;
  std::vector<std::string> lib_dirs;  // the container's driver library dirs (the device layer's ldDirs)
  std::chrono::milliseconds timeout{60000};
};

class SandboxAgent {
 public:
  SandboxAgent(ProcessRunner& runner, SandboxTarget t) : runner_(runner), t_(std::move(t)) {}
  // The argv that runs the agent with `args` in the sandbox; `exec_flags` go to `runsc exec`.
  [[nodiscard]] std::vector<std::string> argv(const std::vector<std::string>& args,
                                              const std::vector<std::string>& exec_flags = {}) const;
  // Runs the agent; returns its JSON answer. A driver refusal (exit 3 with an "error" object) is
  // returned as is; anything else that is not a clean answer throws Error naming the container
  // and the request; a run past `timeout` (0: the target's) throws DeadlineError.
  nlohmann::json call(const std::vector<std::string>& args, std::chrono::milliseconds timeout = {},
                      const std::vector<std::string>& exec_flags = {});
  [[nodiscard]] const SandboxTarget& target() const { return t_; }

 private:
  ProcessRunner& runner_;
  SandboxTarget t_;
};

class SandboxLister final : public ProcessLister {
 public:
  explicit SandboxLister(SandboxAgent& a) : a_(a) {}
  std::vector<pid_t> list() override;

 private:
  SandboxAgent& a_;
};

class SandboxHolderScanner final : public HolderScanner {
 public:
  SandboxHolderScanner(SandboxAgent& a, std::vector<std::string> globs) : a_(a), globs_(std::move(globs)) {}
  std::vector<Holder> scan(const std::vector<pid_t>& pids) override;
  // From the last scan when it covered pid, else asked anew.
  std::optional<ProcInfo> info(pid_t pid) override;
  // The last scan's answer for the probes below (nullopt before the first scan).
  std::optional<nlohmann::json> last() const;
  nlohmann::json scan_json(const std::vector<pid_t>& pids);

 private:
  SandboxAgent& a_;
  std::vector<std::string> globs_;
  mutable std::mutex mu_;
  std::optional<nlohmann::json> last_;
  std::map<pid_t, ProcInfo> infos_;
};

class SandboxCudaToggler final : public CudaToggler {
 public:
  SandboxCudaToggler(SandboxAgent& a, std::chrono::milliseconds long_op_timeout) : a_(a), long_(long_op_timeout) {}
  std::string describe() override;
  CudaState get_state(pid_t pid) override;
  void lock(pid_t pid, unsigned timeout_ms) override;
  void checkpoint(pid_t pid) override;
  // No remapping inside a sandbox: nvproxy has no device map.
  void restore(pid_t pid, const DeviceMap& map) override;
  void unlock(pid_t pid) override;

 private:
  nlohmann::json op(pid_t pid, const std::string& name, std::vector<std::string> extra, std::chrono::milliseconds timeout);
  SandboxAgent& a_;
  std::chrono::milliseconds long_;
};

// GPUs by the /dev/nvidiaN files each process holds (conservative: a process holding two GPU device
// files counts as using both).
class SandboxGpuProbe final : public GpuUsageProbe {
 public:
  SandboxGpuProbe(SandboxLister& l, SandboxHolderScanner& s) : l_(l), s_(s) {}
  std::map<pid_t, std::set<std::string>> gpus_by_pid() override;

 private:
  SandboxLister& l_;
  SandboxHolderScanner& s_;
};

// gVisor has no kcmp. The agent asks the kernel another way (drop_in_place.h, shared_with): the
// child flips a status flag on its fd and the ancestor's fd that flips with it is the same open
// file. One `runsc exec` per (child, ancestor) pair, answered for all their fds at once. The child
// is stopped by ptrace meanwhile, so it is asked only of processes without CUDA.
class SandboxFileIdentity final : public FileIdentity {
 public:
  SandboxFileIdentity(SandboxAgent& a, std::vector<std::string> globs) : a_(a), globs_(std::move(globs)) {}
  bool same_file(pid_t pid_a, int fd_a, pid_t pid_b, int fd_b) override;
  [[nodiscard]] bool stops_processes() const override { return true; }
  std::string unknown_because(pid_t pid_a, pid_t pid_b) override;

 private:
  SandboxAgent& a_;
  std::vector<std::string> globs_;
  std::mutex mu_;
  std::map<std::pair<pid_t, pid_t>, std::map<int, int>> asked_;  // (child, ancestor) -> child fd: ancestor fd
  std::map<std::pair<pid_t, pid_t>, std::string> failed_;        // (child, ancestor) -> the agent's error
};

// The released children's inherited device files dropped in place by the agent (drop_in_place.h),
// one `runsc exec` per child, with CAP_SYS_PTRACE for it. Throws Error naming the child.
void drop_in_sandbox(SandboxAgent& agent, const ReleasePlan& plan, std::chrono::milliseconds timeout);

class SandboxCommProbe final : public CommProbe {
 public:
  explicit SandboxCommProbe(SandboxHolderScanner& s) : s_(s) {}
  std::map<pid_t, CommFinding> scan(const std::vector<pid_t>& pids) override;

 private:
  SandboxHolderScanner& s_;
};

}  // namespace nvproxy::checkpoint
