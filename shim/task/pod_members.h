// The containers of a CRI pod as the shim sees them at a checkpoint: containerd's bundles beside
// this one (STATE/NS/ID) whose specs carry the same io.kubernetes.cri.sandbox-id. Under runsc one
// checkpoint saves them all, so the image's record names each (checkpoint/image/pod_record.h).
#pragma once

#include <filesystem>
#include <optional>

#include "checkpoint/image/pod_record.h"

namespace nvproxy::shim {

// The pod of the container whose bundle this is, or none (not a CRI pod's container). Throws
// Error naming a bundle of the pod whose spec cannot be read.
std::optional<checkpoint::PodRecord> pod_of(const std::filesystem::path& bundle);

// How many GPUs the container of `bundle` asks for (checkpoint::kAllGpus: all).
int gpu_count(const std::filesystem::path& bundle);

}  // namespace nvproxy::shim
