// Node B's side of Kubernetes' checkpoint images without CRI's restore-by-create (containerd 2.4
// removed it): the checkpoint image a container's annotation names (the one `image push --kube`
// made, or any with the same form: one layer holding the archive's files and
// org.criu.checkpoint.container.name on the manifest) is pulled and its layer unpacked, by
// nvproxy-image-transfer for the shim (image/image_puller.h). What comes out is the archive as the
// kubelet wrote it (image/kube_archive.h).
#pragma once

#include <filesystem>
#include <string>

#include "checkpoint/image/kube_archive.h"
#include "checkpoint/registry/image_registry.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

// Pulls `reference` (digests checked as it streams) and unpacks its layer into `into`/archive
// (created; `into` is the caller's to remove). Error(InvalidArgument) naming the reference when it
// is not a checkpoint image, or its layer holds no checkpoint/, spec.dump or config.dump.
KubeCheckpoint fetch_kube_checkpoint(const std::string& reference, const std::filesystem::path& into, ImageRegistry& registry,
                                     ProcessRunner& runner);

}  // namespace nvproxy::checkpoint
