// runc and crun: the one place where a checkpoint's tools are assembled for containers whose
// processes the host sees (host /proc, NVML, the runtime's CRIU). The checkpoint, the restore and
// `diagnose` all get this object, so they cannot be built with different tools: the device-holder
// scan of the configured globs, CUDA through nvproxy-cuda-helper (or the cuda-checkpoint binary),
// the helper's GPU probe and container hold, the collective probe, the file identity of forked
// children, the space probe, pidfd holds, and the checks of the runtime's CRIU (against the kernel,
// io_uring, the network lock, established TCP connections).
#pragma once

#include <optional>
#include <string>

#include "checkpoint/config.h"
#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/preflight/criu_dump_checks.h"
#include "checkpoint/preflight/criu_kernel_check.h"
#include "checkpoint/preflight/space_check.h"
#include "checkpoint/process/file_identity.h"
#include "checkpoint/process/process_holds.h"
#include "checkpoint/process/process_list.h"
#include "checkpoint/programs/cuda_helper_client.h"
#include "checkpoint/session/session_runtime.h"
#include "checkpoint/session/session_tools.h"
#include "checkpoint/shared/comm_probe.h"
#include "checkpoint/shared/holder_scan.h"
#include "checkpoint/staging/host_reservations.h"
#include "checkpoint/staging/memory_limits.h"
#include "common/log.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

// What the host assembly reads of this machine, in one place (tests give another kernel).
struct HostEnvironment {
  std::string kernel;  // uname's release
  std::string path;    // PATH, where CRIU looks for iptables-restore
  static HostEnvironment current();
};

class HostAssembly final : public SessionTools {
 public:
  // list_processes false: no process is listed (a runsc container without GPUs, whose pids host
  // /proc does not describe). Asks the runtime which CRIU it runs (rt.criu()).
  HostAssembly(const CheckpointConfig& cfg, SessionRuntime& rt, bool list_processes, ProcessRunner& runner, Logger& log,
               const HostEnvironment& env = HostEnvironment::current());
  HostAssembly(const HostAssembly&) = delete;
  HostAssembly& operator=(const HostAssembly&) = delete;

  Orchestrator& orchestrator() override { return *orch_; }
  ProcessLister& lister() override { return lister_; }
  HolderScanner& scanner() override { return scanner_; }
  [[nodiscard]] bool toggles_cuda() const override { return cuda_.toggler != nullptr; }
  [[nodiscard]] bool host_view() const override { return true; }
  GpuUsageProbe* host_facts() override { return cuda_.probe.get(); }
  ProcessIdentity identify(pid_t pid) override { return identify_process(pid); }
  pid_t container_pid(pid_t pid) override { return identify_process(pid).pid; }
  [[nodiscard]] std::string label() const override { return ""; }
  [[nodiscard]] bool holds_still() const override { return hold_.has_value(); }
  MemoryProbe* memory() override { return &memory_; }
  HostReservations* reservations() override { return &reservations_; }

 private:
  FunctionLister lister_;
  ProcHolderScanner scanner_;
  CudaTools cuda_;  // toggler and probe, through one nvproxy-cuda-helper started on first use
  ProcCommProbe comm_;
  KcmpFileIdentity files_;
  HostSpaceProbe space_;
  HostMemoryProbe memory_;
  HostReservations reservations_;
  PidfdHolds holds_;
  std::optional<HelperHold> hold_;
  std::optional<CriuKernelCheck> criu_;
  IoUringCheck io_uring_;
  std::optional<NetworkLockCheck> net_lock_;
  std::optional<TcpEstablishedCheck> tcp_;
  SnapshotChecks checks_;
  std::optional<Orchestrator> orch_;  // built last, from everything above
};

}  // namespace nvproxy::checkpoint
