// The global flags a gVisor pod's sandbox is restored with: nvproxy on where the image's pod had
// GPU containers, under gpu.nvproxy: auto too.
//
// Under auto, runsc gets --nvproxy for a GPU container only, and a pod's sandbox container (CRI's
// pause) asks for no GPU, so a pod's sandbox boots without nvproxy unless the pod or the runtime
// class says otherwise (docs/install.md). A sandbox restored from a pod whose GPU containers ran
// with nvproxy must boot with it again: runsc restores nvproxy's state only into a sandbox that
// sets it up, and the restore would fail. The image's record says whether they did.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/log.h"
#include "shim/task/container.h"

namespace nvproxy::shim {

// `s.runtime_global`, with runsc's nvproxy flags added for the sandbox container of a pod restored
// whole (s.pod_restore, its name empty) from an image at `image` whose record names a container
// with GPUs, under gpu.nvproxy: auto, where they are not there yet. Logged when added. An
// unreadable record adds nothing (the restore's own check of it says why).
std::vector<std::string> pod_sandbox_restore_flags(const ContainerSetup& s, const std::filesystem::path& image, Logger& log);

}  // namespace nvproxy::shim
