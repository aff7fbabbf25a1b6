// Restore of a whole gVisor pod by annotation. Under runsc a pod is one sandbox (every container
// in one sentry) and runsc restores a checkpoint only as a whole sandbox: its root container (CRI's
// sandbox container) first, then each container of the pod by its name in the pod, and the sandbox
// runs once the last one is restored. So a pod is restored from a pod's image (a runsc checkpoint
// with its pod record, checkpoint/image/pod_record.h) when its sandbox is created, and each of its
// containers when CRI creates it.
//
// The pod says so as a pod under runc does, one pod annotation per container
// (restore.nvproxy.io/<container name>), every one naming the same image: CRI passes pod
// annotations (through pod_annotations) into the sandbox container's spec too, so the sandbox's
// create knows every container the pod will restore and refuses a pod that is not the image's
// before runsc runs. The policy is restore by annotation's (check_restore_reference).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "oci/spec.h"

namespace nvproxy::shim {

struct PodRestoreAsk {
  std::string reference;           // the pod's image, host[:port]/repo@sha256:<64 hex>
  std::vector<std::string> names;  // the containers the pod restores from it, sorted
};

// CRI's sandbox container of a pod: io.kubernetes.cri.container-type = sandbox.
bool is_cri_sandbox(const oci::Spec& spec);

// The restore of the whole pod that the sandbox container's spec asks for, or none. Throws
// Error(FailedPrecondition) naming the sandbox when it may not be followed: the annotations name
// different images (a gVisor pod restores from one), or the image may not be (the policy).
std::optional<PodRestoreAsk> pod_restore_annotation(const oci::Spec& spec, const std::string& id,
                                                    const checkpoint::CheckpointConfig& cfg);

}  // namespace nvproxy::shim
