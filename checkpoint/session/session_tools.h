// Where a checkpoint session's questions go. The one thing that differs between runc/crun and runsc
// is where the container's processes are seen: from the host (host /proc, NVML, CRIU) or inside a
// gVisor sandbox (nvproxy-sandbox-agent through `runsc exec`, sandbox pids). Each variant is
// assembled in one place (host_assembly.h, sandbox_assembly.h) with the same Orchestrator over its
// own tools; the session asks this interface and never which runtime it is. Tests implement it
// over fakes.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "checkpoint/attempt/release.h"
#include "checkpoint/config.h"
#include "checkpoint/orchestrator/orchestrator.h"
#include "checkpoint/preflight/restore_preflight.h"
#include "checkpoint/process/process_list.h"
#include "checkpoint/session/session_runtime.h"
#include "checkpoint/shared/gpu_usage.h"
#include "checkpoint/shared/holder_scan.h"
#include "common/log.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

class SessionTools {
 public:
  virtual ~SessionTools() = default;
  virtual Orchestrator& orchestrator() = 0;
  virtual ProcessLister& lister() = 0;
  virtual HolderScanner& scanner() = 0;
  // false with checkpoint.cuda: none.
  [[nodiscard]] virtual bool toggles_cuda() const = 0;
  // true: pids are host pids, so a scan can run before anything is thawed and NVML's facts apply.
  // false (a sandbox): every question needs the sandbox running.
  [[nodiscard]] virtual bool host_view() const = 0;
  // NVML's view of this host (GPUs, driver, each process's device memory), for the image's record
  // and the restore preflight; nullptr where NVML's pids are not the container's (a sandbox).
  virtual GpuUsageProbe* host_facts() = 0;
  // A sandbox: NVML's view from the host, where the sandbox's device memory is its sentry's (the
  // host pid that bears the driver's staging, CheckpointRequest::staging_pid); nullptr elsewhere.
  virtual GpuUsageProbe* sandbox_usage() { return nullptr; }
  // A process as the image records it: its pid in the container's (or sandbox's) namespace, which
  // a restore keeps, and its name.
  virtual ProcessIdentity identify(pid_t pid) = 0;
  // Just the pid in the container's (or sandbox's) namespace.
  virtual pid_t container_pid(pid_t pid) = 0;
  // For log lines: "" or " (runsc sandbox)".
  [[nodiscard]] virtual std::string label() const = 0;
  // Called with the orchestrator's release plan right before the runtime's snapshot; returns what
  // the snapshot itself must still release. The host's CRIU does it all (the plan unchanged); a
  // sandbox's children drop their inherited files in place first (nothing left). Throws Error.
  virtual ReleasePlan release_before_snapshot(const ReleasePlan& plan) { return plan; }
  // The orchestrator holds the container still around the snapshot (container_hold.h): after a
  // snapshot killed for its deadline, it thaws the container itself, once the processes are held.
  [[nodiscard]] virtual bool holds_still() const { return false; }
  // The memory limits and the host's memory against which a restore's staging is billed
  // (restore_staging.h), and the host-wide account of staging in flight; null: not billed.
  virtual MemoryProbe* memory() { return nullptr; }
  virtual HostReservations* reservations() { return nullptr; }
  // A gVisor pod's GPU containers toggled in one attempt (sandbox_pod.h): the name in the pod of
  // the container a pid belongs to ("" for the session's own container), the other GPU containers'
  // names, and one sentence naming each pid's container and its pid there, for a diagnostic (""
  // when every pid is the session's own container's).
  [[nodiscard]] virtual std::string pod_member_of(pid_t) const { return ""; }
  [[nodiscard]] virtual std::vector<std::string> pod_members() const { return {}; }
  [[nodiscard]] virtual std::string pid_legend(const std::vector<pid_t>&) const { return ""; }
};

}  // namespace nvproxy::checkpoint
