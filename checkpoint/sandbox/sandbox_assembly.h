// runsc: the one place where a checkpoint's tools are assembled for a GPU container inside a
// gVisor sandbox, where every question is asked of nvproxy-sandbox-agent through `runsc exec`
// (sandbox_tools.h) and pids are the sandbox's own. The checkpoint, the restore and `diagnose` all
// get this object: forked children's inherited device files are released in place by the agent
// before runsc's snapshot (drop_in_place.h), and nothing holds the sandbox's processes still. The
// driver's staging is billed from the host: the sentry's device memory (NVML, through
// nvproxy-cuda-helper) against the memory limits over the sentry and the host's memory.
#pragma once

#include <memory>
#include <string>

#include "checkpoint/config.h"
#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/programs/cuda_helper_client.h"
#include "checkpoint/sandbox/sandbox_tools.h"
#include "checkpoint/session/session_tools.h"
#include "checkpoint/staging/host_reservations.h"
#include "checkpoint/staging/memory_limits.h"
#include "common/log.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

// The orchestrator's tools over a gVisor sandbox, one container's (SandboxAssembly) or a pod's
// (sandbox_pod.h): nothing holds the sandbox's processes still, since runsc checkpoints it whole,
// and forked children's inherited device files are released in place.
OrchestratorTools sandbox_orchestrator_tools(ProcessLister& lister, HolderScanner& scanner, CudaToggler* toggler,
                                             GpuUsageProbe& probe, CommProbe& comm, FileIdentity& files, MemoryProbe& memory,
                                             HostReservations& reservations);

// One container's questions inside a gVisor sandbox, each asked of its agent: what SandboxAssembly
// asks of its container, and a pod's assembly of each of its GPU containers (sandbox_pod.h). The
// seams refer to the agent and to each other, so the set stays where it was made.
struct SandboxContainerTools {
  SandboxContainerTools(const CheckpointConfig& cfg, SandboxTarget target, ProcessRunner& runner);
  SandboxContainerTools(const SandboxContainerTools&) = delete;
  SandboxContainerTools& operator=(const SandboxContainerTools&) = delete;

  SandboxAgent agent;
  SandboxLister lister;
  SandboxHolderScanner scanner;
  std::unique_ptr<SandboxCudaToggler> toggler;  // null with checkpoint.cuda: none
  SandboxGpuProbe probe;
  SandboxCommProbe comm;
  SandboxFileIdentity files;
};

class SandboxAssembly final : public SessionTools {
 public:
  SandboxAssembly(const CheckpointConfig& cfg, SandboxTarget target, ProcessRunner& runner, Logger& log);
  SandboxAssembly(const SandboxAssembly&) = delete;
  SandboxAssembly& operator=(const SandboxAssembly&) = delete;

  Orchestrator& orchestrator() override { return orch_; }
  ProcessLister& lister() override { return c_.lister; }
  HolderScanner& scanner() override { return c_.scanner; }
  [[nodiscard]] bool toggles_cuda() const override { return c_.toggler != nullptr; }
  [[nodiscard]] bool host_view() const override { return false; }
  GpuUsageProbe* host_facts() override { return nullptr; }  // NVML's pids are not the sandbox's
  GpuUsageProbe* sandbox_usage() override { return &host_usage_; }
  MemoryProbe* memory() override { return &memory_; }
  HostReservations* reservations() override { return &reservations_; }
  ProcessIdentity identify(pid_t pid) override;
  pid_t container_pid(pid_t pid) override { return pid; }  // sandbox pids survive `runsc restore`
  [[nodiscard]] std::string label() const override { return " (runsc sandbox)"; }
  // runsc's checkpoint saves every open file: the children drop theirs first (drop_in_place.h).
  ReleasePlan release_before_snapshot(const ReleasePlan& plan) override;

 private:
  SandboxContainerTools c_;
  HelperGpuUsageProbe host_usage_;  // the host's NVML, where the sentry holds the sandbox's device memory
  HostMemoryProbe memory_;
  HostReservations reservations_;
  Orchestrator orch_;  // last: it refers to the tools above
};

}  // namespace nvproxy::checkpoint
