// `containerd-shim-nvproxy-v1 diagnose --image DIR [--json]`: what a checkpoint image needs from the
// node that restores it, before anyone tries: the host files its processes held on the container's
// bind mounts (the image's record, image/host_files.h), each checked on this node where the
// checkpoint saw it. A restore checks them again against its own spec's mounts, which may map them
// elsewhere. Exit status: 0 every file is there, 3 a restore here would be refused, 1 error.
#pragma once

#include <filesystem>
#include <ostream>

namespace nvproxy::checkpoint {

int diagnose_image(const std::filesystem::path& image, bool json, std::ostream& out, std::ostream& err);

}  // namespace nvproxy::checkpoint
