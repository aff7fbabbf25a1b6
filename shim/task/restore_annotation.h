// Restore by annotation: a container whose spec carries restore.nvproxy.io/<its name> = a
// checkpoint image is restored from that image at Start instead of being started fresh. It is
// what Kubernetes has left on containerd 2.4, which removed CRI's restore-by-create: the kubelet
// passes pod annotations into the spec where the runtime's pod_annotations lets them through, and
// one pod annotation per container name restores several containers of a pod (a sidecar without
// one starts fresh). ctr and nerdctl set it with --annotation.
//
// A checkpoint image is process memory that CRIU restores as root, so an annotation is not a way
// in: this file is the policy that decides, from the spec and the shim's configuration alone,
// whether the annotation may be followed, and what an image's recorded container must share with
// the new one before CRIU runs.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "oci/spec.h"

namespace nvproxy::shim {

inline constexpr const char* kRestoreAnnotationPrefix = "restore.nvproxy.io/";
// BUNDLE/<this>: where the image is unpacked at Create (its archive/ is what the kubelet wrote).
inline constexpr const char* kRestoreDir = "restore-by-annotation";

struct AnnotationRestore {
  std::string name;       // the container's name the annotation is keyed by
  std::string reference;  // host[:port]/repo@sha256:<hex>
};

// The container's name as its client gave it: CRI's io.kubernetes.cri.container-name, nerdctl's
// nerdctl/name, else the container's id (ctr).
std::string container_name_of(const oci::Spec& spec, const std::string& id);

// The restore the spec asks for, or none. Throws Error(FailedPrecondition) naming the container,
// the annotation and the configuration key when one is there but may not be followed: restore by
// annotation off, no image store, a reference that is not a registry image pinned by digest (a
// host path, a tag, a store entry), or a repository not in checkpoint.annotation_registries.
std::optional<AnnotationRestore> restore_annotation(const oci::Spec& spec, const std::string& id,
                                                    const checkpoint::CheckpointConfig& cfg);

// Throws Error(FailedPrecondition) starting with `who` when `reference` may not be followed (the
// reasons restore_annotation() gives). Restore of a whole gVisor pod (pod_restore_annotation.h)
// follows the same policy.
void check_restore_reference(const std::string& who, const std::string& reference, const checkpoint::CheckpointConfig& cfg);

// What the checkpointed container (its spec.dump and CRI's config.dump) has that the new one
// (`spec`) does not grant, each a sentence: capabilities beyond the new spec's, another user
// namespace or its mappings, a PID namespace the new container joins instead of owning (CRIU
// restores a process tree into one of its own), a mount destination the new spec lacks, another
// image. Empty: may be restored.
std::vector<std::string> restore_mismatches(const nlohmann::json& checkpointed, const nlohmann::json& config_dump,
                                            const nlohmann::json& spec);

}  // namespace nvproxy::shim
