#include "checkpoint/session_tools.h"

#include <cstdlib>
#include <optional>

#include "checkpoint/criu_dump_checks.h"
#include "checkpoint/criu_kernel_check.h"
#include "checkpoint/orchestrator_kit.h"
#include "checkpoint/process_holds.h"
#include "checkpoint/space_check.h"

namespace nvproxy::checkpoint {

namespace {

class HostTools final : public SessionTools {
 public:
  HostTools(const CheckpointConfig& cfg, SessionRuntime& rt, bool list_processes, ProcessRunner& runner, Logger& log)
      : kit_(cfg,
             std::make_unique<FunctionLister>([&rt, list_processes] { return list_processes ? rt.ps() : std::vector<pid_t>{}; }),
             runner, log) {
    kit_.orch.set_space_probe(&space_);
    kit_.orch.set_process_holds(&holds_);
    // The helper toggles and holds alike: it is the tracer that lets a restore thread run.
    if (cfg.hold_still && cfg.cuda == "driver-api" && kit_.cuda.helper) {
      hold_.emplace(
          kit_.cuda.helper, [&rt] { rt.pause(); }, [&rt] { rt.resume(); });
      kit_.orch.set_container_hold(&*hold_);
    } else if (cfg.hold_still) {
      kit_.orch.set_hold_unavailable(cfg.cuda != "driver-api" ? "checkpoint.cuda is \"" + cfg.cuda + "\", not driver-api"
                                                              : "no nvproxy-cuda-helper");
    }
    if (auto criu = rt.criu()) {
      criu_.emplace(criu->binary, criu->version, kernel_release());
      const char* path = std::getenv("PATH");
      const bool tcp = criu->tcp_established || has_criu_option(criu->options, "tcp-established");
      net_lock_.emplace(criu->options, path ? path : "", tcp);
      tcp_.emplace(tcp);
      checks_.add(&*criu_);
      checks_.add(&io_uring_);
      checks_.add(&*net_lock_);
      checks_.add(&*tcp_);
      kit_.orch.set_snapshot_check(&checks_);
    } else {
      kit_.orch.set_release("the runtime has no CRIU to leave them out of its image");
    }
  }
  Orchestrator& orchestrator() override { return kit_.orch; }
  ProcessLister& lister() override { return *kit_.lister; }
  HolderScanner& scanner() override { return kit_.scanner; }
  [[nodiscard]] bool toggles_cuda() const override { return kit_.cuda.toggler != nullptr; }
  [[nodiscard]] bool host_view() const override { return true; }
  GpuUsageProbe* host_facts() override { return kit_.cuda.probe.get(); }
  ProcessIdentity identify(pid_t pid) override { return identify_process(pid); }
  pid_t container_pid(pid_t pid) override { return identify_process(pid).pid; }
  [[nodiscard]] std::string label() const override { return ""; }
  [[nodiscard]] bool holds_still() const override { return hold_.has_value(); }

 private:
  OrchestratorKit kit_;
  std::optional<HelperHold> hold_;
  HostSpaceProbe space_;
  PidfdHolds holds_;
  std::optional<CriuKernelCheck> criu_;
  IoUringCheck io_uring_;
  std::optional<NetworkLockCheck> net_lock_;
  std::optional<TcpEstablishedCheck> tcp_;
  SnapshotChecks checks_;
};

class SandboxSessionTools final : public SessionTools {
 public:
  SandboxSessionTools(const CheckpointConfig& cfg, SandboxTarget t, ProcessRunner& runner, Logger& log)
      : kit_(cfg, std::move(t), runner, log) {
    kit_.orch.set_release("", ReleaseWay::InPlace);
    kit_.orch.set_hold_unavailable(
        "gVisor's sandbox processes are not the host's to stop, and runsc checkpoints the sandbox whole");
  }
  Orchestrator& orchestrator() override { return kit_.orch; }
  ProcessLister& lister() override { return kit_.lister; }
  HolderScanner& scanner() override { return kit_.scanner; }
  [[nodiscard]] bool toggles_cuda() const override { return kit_.toggler != nullptr; }
  [[nodiscard]] bool host_view() const override { return false; }
  GpuUsageProbe* host_facts() override { return nullptr; }
  ProcessIdentity identify(pid_t pid) override {
    auto pi = kit_.scanner.info(pid);
    return {.host_pid = pid, .pid = pid, .name = pi ? pi->name : std::string()};
  }
  pid_t container_pid(pid_t pid) override { return pid; }  // sandbox pids survive `runsc restore`
  [[nodiscard]] std::string label() const override { return " (runsc sandbox)"; }
  // runsc's checkpoint saves every open file: the children drop theirs first (drop_in_place.h).
  ReleasePlan release_before_snapshot(const ReleasePlan& plan) override {
    if (plan.empty()) return plan;
    drop_in_sandbox(kit_.agent, plan, kit_.agent.target().timeout);
    return {};
  }

 private:
  SandboxKit kit_;
};

}  // namespace

std::unique_ptr<SessionTools> host_session_tools(const CheckpointConfig& cfg, SessionRuntime& rt, bool list_processes,
                                                 ProcessRunner& runner, Logger& log) {
  return std::make_unique<HostTools>(cfg, rt, list_processes, runner, log);
}

std::unique_ptr<SessionTools> sandbox_session_tools(const CheckpointConfig& cfg, SandboxTarget target, ProcessRunner& runner,
                                                    Logger& log) {
  return std::make_unique<SandboxSessionTools>(cfg, std::move(target), runner, log);
}

}  // namespace nvproxy::checkpoint
