#include "checkpoint/sandbox/sandbox_assembly.h"

namespace nvproxy::checkpoint {

OrchestratorTools sandbox_orchestrator_tools(ProcessLister& lister, HolderScanner& scanner, CudaToggler* toggler,
                                             GpuUsageProbe& probe, CommProbe& comm, FileIdentity& files, MemoryProbe& memory,
                                             HostReservations& reservations) {
  return {.lister = &lister,
          .scanner = &scanner,
          .toggler = toggler,
          .probe = &probe,
          .comm = &comm,
          .hold_unavailable = "gVisor's sandbox processes are not the host's to stop, and runsc checkpoints the sandbox whole",
          .files = &files,
          .release_unavailable = "",
          .release_way = ReleaseWay::InPlace,
          .memory = &memory,
          .reservations = &reservations};
}

SandboxAssembly::SandboxAssembly(const CheckpointConfig& cfg, SandboxTarget t, ProcessRunner& runner, Logger& log)
    : agent_(runner, std::move(t)),
      lister_(agent_),
      scanner_(agent_, cfg.device_globs),
      toggler_(cfg.cuda == "none"
                   ? nullptr
                   : std::make_unique<SandboxCudaToggler>(agent_, std::chrono::milliseconds(cfg.snapshot_timeout_ms))),
      probe_(lister_, scanner_),
      comm_(scanner_),
      files_(agent_, cfg.device_globs),
      host_usage_(make_cuda_helper(cfg, runner)),
      memory_(cfg.host_meminfo),
      reservations_(cfg.staging_account),
      orch_(cfg, sandbox_orchestrator_tools(lister_, scanner_, toggler_.get(), probe_, comm_, files_, memory_, reservations_),
            log) {}

ProcessIdentity SandboxAssembly::identify(pid_t pid) {
  auto pi = scanner_.info(pid);
  return {.host_pid = pid, .pid = pid, .name = pi ? pi->name : std::string()};
}

ReleasePlan SandboxAssembly::release_before_snapshot(const ReleasePlan& plan) {
  if (plan.empty()) return plan;
  drop_in_sandbox(agent_, plan, agent_.target().timeout);
  return {};
}

}  // namespace nvproxy::checkpoint
