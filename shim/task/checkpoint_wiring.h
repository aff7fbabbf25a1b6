// One checkpoint session over one container: the runtime's verbs the session may use (an adapter
// over oci::Runtime), the assembly for where the container's processes are seen (the host's tools
// under runc and crun, the sandbox's under runsc with GPUs), and the session itself. The Checkpoint
// and Restore RPCs and `diagnose` all build their session here, so a diagnosis is the decision a
// checkpoint would reach.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/image/pod_record.h"
#include "checkpoint/session/session.h"
#include "checkpoint/session/session_runtime.h"
#include "checkpoint/session/session_tools.h"
#include "common/log.h"
#include "common/process.h"
#include "oci/runtime.h"

namespace nvproxy::shim {

struct SessionSubject {
  oci::Runtime& runtime;
  std::string id;
  std::filesystem::path bundle;
  std::string ns;    // containerd's namespace (the image store's entries are kept apart by it)
  bool gpu = false;  // the device layer gave it GPUs: under runsc, its processes are asked inside the sandbox
  checkpoint::CheckpointConfig cfg;
  std::string content_store;  // containerd's root (space check)
  std::vector<pid_t> pids;    // `diagnose --pid`: these host pids instead of the runtime's ps
  // The runtime's restore as the task layer runs it (a restore only).
  std::function<void(const std::filesystem::path& image, bool leave_stopped, const std::string& taken_from)> run_restore;
  // The pod whose sandbox a runsc checkpoint saves whole, recorded in the image (a checkpoint only).
  std::optional<checkpoint::PodRecord> pod;
  // The container the client named, when the session runs on another container of its pod (the
  // pod's GPU container): its state is what the client paused, so pause, resume and status go to
  // it. Empty: `id`.
  std::string client_id;
  // A runsc pod of several GPU containers, checkpointed in one attempt over all of their processes
  // (checkpoint/sandbox/sandbox_pod.h): this container's name in the pod and the pod's further GPU
  // containers (their bundles beside this one's). Empty: this container's processes alone.
  std::string pod_name;
  std::vector<checkpoint::PodMember> pod_gpus;
};

class SessionWiring {
 public:
  // flags: the client's checkpoint options as they came (null on restore and inspection: no
  // snapshot is taken); the snapshot's own choices are made here, once (CRIU's work directory in the
  // bundle when the client names none, checkpoint.skip_zero_pages, the pod's /dev/shm).
  // restoring: the restore preflight needs the GPUs the container asks for (from its bundle).
  SessionWiring(const SessionSubject& s, const oci::CheckpointFlags* flags, bool restoring, ProcessRunner& runner, Logger& log);
  ~SessionWiring();
  SessionWiring(const SessionWiring&) = delete;
  SessionWiring& operator=(const SessionWiring&) = delete;

  checkpoint::CheckpointSession& session() { return *session_; }

 private:
  std::unique_ptr<checkpoint::SessionRuntime> rt_;
  std::unique_ptr<checkpoint::SessionTools> tools_;
  std::unique_ptr<checkpoint::CheckpointSession> session_;
};

// The GPUs a container asks for, as the restore preflight's tokens ("0", "GPU-...", "all"): from
// the GPU layer's record of the request, else the spec's NVIDIA_VISIBLE_DEVICES. Empty: no restriction.
std::vector<std::string> requested_gpus(const std::filesystem::path& bundle);

}  // namespace nvproxy::shim
