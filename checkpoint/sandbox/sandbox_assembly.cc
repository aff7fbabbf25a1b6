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

SandboxContainerTools::SandboxContainerTools(const CheckpointConfig& cfg, SandboxTarget target, ProcessRunner& runner)
    : agent(runner, std::move(target)),
      lister(agent),
      scanner(agent, cfg.device_globs),
      toggler(cfg.cuda == "none"
                  ? nullptr
                  : std::make_unique<SandboxCudaToggler>(agent, std::chrono::milliseconds(cfg.snapshot_timeout_ms))),
      probe(lister, scanner),
      comm(scanner),
      files(agent, cfg.device_globs) {}

SandboxAssembly::SandboxAssembly(const CheckpointConfig& cfg, SandboxTarget t, ProcessRunner& runner, Logger& log)
    : c_(cfg, std::move(t), runner),
      host_usage_(make_cuda_helper(cfg, runner)),
      memory_(cfg.host_meminfo),
      reservations_(cfg.staging_account),
      orch_(cfg,
            sandbox_orchestrator_tools(c_.lister, c_.scanner, c_.toggler.get(), c_.probe, c_.comm, c_.files, memory_,
                                       reservations_),
            log) {}

ProcessIdentity SandboxAssembly::identify(pid_t pid) {
  auto pi = c_.scanner.info(pid);
  return {.host_pid = pid, .pid = pid, .name = pi ? pi->name : std::string()};
}

ReleasePlan SandboxAssembly::release_before_snapshot(const ReleasePlan& plan) {
  if (plan.empty()) return plan;
  drop_in_sandbox(c_.agent, plan, c_.agent.target().timeout);
  return {};
}

}  // namespace nvproxy::checkpoint
