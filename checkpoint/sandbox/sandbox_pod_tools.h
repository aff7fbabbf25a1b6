// The GPU containers of one gVisor pod seen as one container, so that one orchestrator attempt
// toggles CUDA in all of them: every process of every GPU container locked, then all checkpointed,
// then all verified, before the one `runsc checkpoint` of the sandbox; any failure rolls every one
// back. Each container of a pod has its own pid namespace in the sandbox (its processes are asked
// through its own agent: sandbox_tools.h), so their pids collide: here each container's pids are
// numbered apart (PodPids), and every seam below sends a pid to the container it belongs to, as
// that container knows it. The first container (the session's own) keeps its pids as they are.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/attempt/release.h"
#include "checkpoint/process/file_identity.h"
#include "checkpoint/process/process_list.h"
#include "checkpoint/shared/comm_probe.h"
#include "checkpoint/shared/cuda_toggler.h"
#include "checkpoint/shared/gpu_usage.h"
#include "checkpoint/shared/holder_scan.h"
#include "common/log.h"

namespace nvproxy::checkpoint {

// Container k's pid p is k * kStride + p (k = 0: the session's own container, its pids unchanged).
// A sandbox's pids are far below the stride (gVisor numbers up to 2^16 per namespace).
class PodPids {
 public:
  static constexpr pid_t kStride = 1000000;
  explicit PodPids(std::vector<std::string> names) : names_(std::move(names)) {}
  // Throws Error(Internal) naming the container when p is past the stride.
  [[nodiscard]] pid_t encode(std::size_t member, pid_t p) const;
  [[nodiscard]] std::size_t member(pid_t pid) const { return static_cast<std::size_t>(pid / kStride); }
  [[nodiscard]] pid_t local(pid_t pid) const { return pid % kStride; }
  [[nodiscard]] const std::string& name(std::size_t member) const { return names_.at(member); }
  [[nodiscard]] std::size_t size() const { return names_.size(); }
  // "pid 1 of container \"cuda2\"" for a pid of another container than the first, else "".
  [[nodiscard]] std::string whose(pid_t pid) const;
  // One sentence naming, for each pid given of another container than the first, that container
  // and its pid there ("" when there is none): what a diagnostic of the pod adds under its table.
  [[nodiscard]] std::string legend(const std::vector<pid_t>& pids) const;

 private:
  std::vector<std::string> names_;
};

// One GPU container's seams inside the sandbox, each pid its own.
struct PodMemberTools {
  std::string name;  // its name in the pod
  ProcessLister* lister = nullptr;
  HolderScanner* scanner = nullptr;
  CudaToggler* toggler = nullptr;  // null with checkpoint.cuda: none
  GpuUsageProbe* probe = nullptr;
  CommProbe* comm = nullptr;
  FileIdentity* files = nullptr;
  // Drops released children's inherited device files in place (drop_in_sandbox).
  std::function<void(const ReleasePlan&)> drop;
};

class PodLister final : public ProcessLister {
 public:
  PodLister(const PodPids& ids, const std::vector<PodMemberTools>& m) : ids_(ids), m_(m) {}
  std::vector<pid_t> list() override;
  // Those of `pids` that a listing returned (a report's numbers that are pids).
  [[nodiscard]] std::vector<pid_t> listed(const std::vector<pid_t>& pids) const;

 private:
  const PodPids& ids_;
  const std::vector<PodMemberTools>& m_;
  mutable std::mutex mu_;
  std::set<pid_t> seen_;
};

class PodHolderScanner final : public HolderScanner {
 public:
  PodHolderScanner(const PodPids& ids, const std::vector<PodMemberTools>& m) : ids_(ids), m_(m) {}
  std::vector<Holder> scan(const std::vector<pid_t>& pids) override;
  std::optional<ProcInfo> info(pid_t pid) override;

 private:
  const PodPids& ids_;
  const std::vector<PodMemberTools>& m_;
};

// Each call goes to the container's own toggler; a CudaError comes back with the pod's pid and
// the container named in its detail. Every toggle that succeeded is logged with the container and
// its pid there, so that the log shows the order of the pod's toggles.
class PodCudaToggler final : public CudaToggler {
 public:
  PodCudaToggler(const PodPids& ids, const std::vector<PodMemberTools>& m, std::string who, Logger& log)
      : ids_(ids), m_(m), who_(std::move(who)), log_(log) {}
  std::string describe() override;
  CudaState get_state(pid_t pid) override;
  void lock(pid_t pid, unsigned timeout_ms) override;
  void checkpoint(pid_t pid) override;
  void restore(pid_t pid, const DeviceMap& map) override;
  void unlock(pid_t pid) override;

 private:
  template <class Op>
  auto call(pid_t pid, const char* op, Op&& fn);
  const PodPids& ids_;
  const std::vector<PodMemberTools>& m_;
  std::string who_;
  Logger& log_;
};

class PodGpuProbe final : public GpuUsageProbe {
 public:
  PodGpuProbe(const PodPids& ids, const std::vector<PodMemberTools>& m) : ids_(ids), m_(m) {}
  std::map<pid_t, std::set<std::string>> gpus_by_pid() override;

 private:
  const PodPids& ids_;
  const std::vector<PodMemberTools>& m_;
};

class PodCommProbe final : public CommProbe {
 public:
  PodCommProbe(const PodPids& ids, const std::vector<PodMemberTools>& m) : ids_(ids), m_(m) {}
  std::map<pid_t, CommFinding> scan(const std::vector<pid_t>& pids) override;

 private:
  const PodPids& ids_;
  const std::vector<PodMemberTools>& m_;
};

// Processes of two containers share no open file.
class PodFileIdentity final : public FileIdentity {
 public:
  PodFileIdentity(const PodPids& ids, const std::vector<PodMemberTools>& m) : ids_(ids), m_(m) {}
  bool same_file(pid_t pid_a, int fd_a, pid_t pid_b, int fd_b) override;
  [[nodiscard]] bool stops_processes() const override { return true; }
  std::string unknown_because(pid_t pid_a, pid_t pid_b) override;

 private:
  const PodPids& ids_;
  const std::vector<PodMemberTools>& m_;
};

// The plan's children dropped in place, each through its own container. Throws Error.
void drop_in_pod(const PodPids& ids, const std::vector<PodMemberTools>& m, const ReleasePlan& plan);

}  // namespace nvproxy::checkpoint
