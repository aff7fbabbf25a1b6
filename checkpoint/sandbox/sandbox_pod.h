// runsc, a pod of several GPU containers: the one place where a checkpoint's tools are assembled
// over every GPU container of a gVisor pod, so that one orchestrator attempt toggles CUDA in all of
// their processes (sandbox_pod_tools.h): every lock before any checkpoint, every checkpoint before
// the verify, one `runsc checkpoint` of the sandbox, one rollback of all on any failure, and the
// driver's staging billed once for the sandbox. Each container's processes are asked through its
// own agent (`runsc exec` into it); the first container is the session's own, whose pids the
// records keep as they are. Otherwise as SandboxAssembly.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/programs/cuda_helper_client.h"
#include "checkpoint/sandbox/sandbox_pod_tools.h"
#include "checkpoint/sandbox/sandbox_tools.h"
#include "checkpoint/session/session_tools.h"
#include "checkpoint/staging/host_reservations.h"
#include "checkpoint/staging/memory_limits.h"
#include "common/log.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

struct PodSandboxContainer {
  std::string name;  // its name in the pod
  SandboxTarget target;
};

class PodSandboxAssembly final : public SessionTools {
 public:
  // containers[0]: the session's own; the others the pod's further GPU containers. `who`: the
  // log lines' subject ("checkpoint of \"ID\"").
  PodSandboxAssembly(const CheckpointConfig& cfg, std::vector<PodSandboxContainer> containers, const std::string& who,
                     ProcessRunner& runner, Logger& log);
  ~PodSandboxAssembly() override;
  PodSandboxAssembly(const PodSandboxAssembly&) = delete;
  PodSandboxAssembly& operator=(const PodSandboxAssembly&) = delete;

  Orchestrator& orchestrator() override { return orch_; }
  ProcessLister& lister() override { return lister_; }
  HolderScanner& scanner() override { return scanner_; }
  [[nodiscard]] bool toggles_cuda() const override { return toggler_ != nullptr; }
  [[nodiscard]] bool host_view() const override { return false; }
  GpuUsageProbe* host_facts() override { return nullptr; }
  GpuUsageProbe* sandbox_usage() override { return &host_usage_; }
  MemoryProbe* memory() override { return &memory_; }
  HostReservations* reservations() override { return &reservations_; }
  ProcessIdentity identify(pid_t pid) override;
  pid_t container_pid(pid_t pid) override { return ids_.local(pid); }
  [[nodiscard]] std::string label() const override;
  ReleasePlan release_before_snapshot(const ReleasePlan& plan) override;
  [[nodiscard]] std::string pod_member_of(pid_t pid) const override;
  [[nodiscard]] std::vector<std::string> pod_members() const override;
  [[nodiscard]] std::string pid_legend(const std::vector<pid_t>& pids) const override {
    return ids_.legend(lister_.listed(pids));
  }

 private:
  struct Member;  // one container's agent and seams
  std::vector<std::unique_ptr<Member>> members_;
  PodPids ids_;
  std::vector<PodMemberTools> seams_;
  PodLister lister_;
  PodHolderScanner scanner_;
  std::unique_ptr<PodCudaToggler> toggler_;  // null with checkpoint.cuda: none
  PodGpuProbe probe_;
  PodCommProbe comm_;
  PodFileIdentity files_;
  HelperGpuUsageProbe host_usage_;
  HostMemoryProbe memory_;
  HostReservations reservations_;
  Orchestrator orch_;  // last: it refers to the tools above
};

}  // namespace nvproxy::checkpoint
