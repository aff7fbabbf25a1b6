// The containers of a CRI pod as the shim sees them at a checkpoint: containerd's bundles beside
// this one (STATE/NS/ID) whose specs carry the same io.kubernetes.cri.sandbox-id. Under runsc one
// checkpoint saves them all, so the image's record names each (checkpoint/image/pod_record.h).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/image/pod_record.h"
#include "common/log.h"
#include "oci/runtime.h"

namespace nvproxy::shim {

// The pod of the container whose bundle this is, or none (not a CRI pod's container). Throws
// Error naming a bundle of the pod whose spec cannot be read.
std::optional<checkpoint::PodRecord> pod_of(const std::filesystem::path& bundle);

// How many GPUs the container of `bundle` asks for (checkpoint::kAllGpus: all).
int gpu_count(const std::filesystem::path& bundle);

// Whether the container of `bundle` joins its pod's PID namespace (shareProcessNamespace: CRI
// gives its spec the sandbox's namespace by path): then, in a gVisor sandbox, every container of
// the pod sees every process of it. False when the spec cannot be read.
bool joins_pod_pid_namespace(const std::filesystem::path& bundle);

// The pod's containers that ended by themselves (an init container that ran), deleted from the
// sandbox and left out of `pod`: runsc's checkpoint of a sandbox holds every container not deleted,
// and its restore waits for each one and fails on an ended one, so that the image neither needs
// them nor makes the restore wait. containerd's own record of them is left as it is (the runtime's
// later delete finds nothing to delete). Returns the names deleted; throws Error naming the
// container when one cannot be deleted, or when it is `named` (the container the client asked to
// checkpoint); nothing is toggled yet: the pod runs on.
std::vector<std::string> leave_out_ended(checkpoint::PodRecord& pod, oci::Runtime& runtime, const std::string& named, Logger& log,
                                         const std::string& who);

}  // namespace nvproxy::shim
