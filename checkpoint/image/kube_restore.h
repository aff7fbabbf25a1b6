// Node B's side of Kubernetes' checkpoint images without CRI's restore-by-create (containerd 2.4
// removed it): the shim itself pulls the checkpoint image a container's annotation names (the one
// `image push --kube` made, or any with the same form: one layer holding the archive's files and
// org.criu.checkpoint.container.name on the manifest) and unpacks its layer. What comes out is the
// archive as the kubelet wrote it: checkpoint/ (with the image store, a registry reference to the
// memory, which the restore pulls into the store), spec.dump and config.dump (what the container
// was), rootfs-diff.tar and deleted.files (its writable layer's changes).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/image/image_registry.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

struct KubeCheckpoint {
  std::filesystem::path dir;  // the archive's files, unpacked
  std::string container;      // the manifest's org.criu.checkpoint.container.name
  nlohmann::json spec;        // spec.dump: the checkpointed container's OCI spec
  nlohmann::json config;      // config.dump: CRI's metadata of it (image name, ...)
  std::filesystem::path checkpoint() const { return dir / "checkpoint"; }
};

// Where fetch_kube_checkpoint unpacks the archive below `into`.
inline std::filesystem::path kube_archive_in(const std::filesystem::path& into) {
  return into / "archive";
}

// Pulls `reference` (digests checked as it streams) and unpacks its layer into `into`/archive
// (created; `into` is the caller's to remove). Error(InvalidArgument) naming the reference when it
// is not a checkpoint image, or its layer holds no checkpoint/, spec.dump or config.dump.
KubeCheckpoint fetch_kube_checkpoint(const std::string& reference, const std::filesystem::path& into, ImageRegistry& registry,
                                     ProcessRunner& runner);

}  // namespace nvproxy::checkpoint
