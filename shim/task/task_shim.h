// The product's side of the shim process: the Task service with its OOM watch and GPU-aware
// checkpoints, hosted by the generic daemon (shim/kit/daemon.h); and the cleanup `delete` runs
// after a shim died.
#pragma once

#include <memory>

#include "shim/kit/cli.h"
#include "shim/kit/daemon.h"

namespace nvproxy::shim {

std::unique_ptr<ShimService> make_task_shim(DaemonContext& ctx);

// The runtime's `delete --force` for the container and the rootfs unmount, with the runtime the
// container was created with (runtime_locator.h).
void cleanup_dead_task(const ShimArgs& a, const std::filesystem::path& bundle);

}  // namespace nvproxy::shim
