// Kubernetes' checkpoint images between nodes. The kubelet's checkpoint (CRI's ContainerCheckpoint)
// is an archive on node A; Kubernetes moves it as an OCI image whose one layer is the archive's
// files, annotated with the container's name (org.criu.checkpoint.container.name, which containerd's
// CRI looks for), pushed to any registry; node B restores by creating a container from that image.
// With the image store on, the archive holds only a reference to A's store, so the shim makes that
// image itself: the memory is pushed from A's store entry (hard links, no copy) under REFERENCE's
// tag plus ".data", and the layer's checkpoint/ refers to it by digest. On node B the restore pulls
// the data into B's store (image_transfer.h) after checking its record against B.
#pragma once

#include <filesystem>
#include <string>

#include "checkpoint/registry/image_registry.h"
#include "checkpoint/registry/image_transfer.h"
#include "common/process.h"

namespace nvproxy::checkpoint {

// The annotation containerd's CRI reads to tell a checkpoint image from a container image.
inline constexpr const char* kCheckpointNameAnnotation = "org.criu.checkpoint.container.name";

struct KubePushResult {
  PushResult data;        // the memory, pinned by digest
  std::string image;      // the checkpoint image, pinned: what node B's pod spec names
  std::string container;  // its container name, from the archive's config.dump
};

// Node A: the checkpoint archive `archive` (crictl checkpoint --export, the kubelet's checkpoint)
// as a checkpoint image at `reference`. Error naming the archive and the step.
KubePushResult push_kube_checkpoint(const std::filesystem::path& archive, const std::string& reference,
                                    const std::filesystem::path& store, ImageRegistry& registry, ProcessRunner& runner,
                                    const TransferOptions& opts = {});

}  // namespace nvproxy::checkpoint
