// The writable layer's changes of a checkpointed container, put back onto the new container's
// rootfs before the restore (CRIU reopens the files the processes had open there): the archive's
// rootfs-diff.tar (containerd's diff, OCI whiteouts for what was deleted; gzip or plain) and
// deleted.files (CRI-O's list of deleted paths, JSON).
#pragma once

#include <filesystem>
#include <string>

#include "common/process.h"

namespace nvproxy::shim {

struct RootfsDiffResult {
  std::size_t entries = 0;  // members extracted
  std::size_t removed = 0;  // paths whiteouts and deleted.files removed
};

// Applies ARCHIVE/rootfs-diff.tar and ARCHIVE/deleted.files (each optional) to `rootfs`: first the
// removals (a whiteout ".wh.NAME" removes NAME, ".wh..wh..opq" empties its directory), then the
// members. A removal never leaves `rootfs`: a path with ".." or through a symlink is an error.
// Error naming the container, the file and tar's own message.
RootfsDiffResult apply_rootfs_diff(const std::filesystem::path& archive, const std::filesystem::path& rootfs,
                                   ProcessRunner& runner, const std::string& who);

}  // namespace nvproxy::shim
