// runsc's default overlay (--overlay2=root:self) keeps the container's writes in a file named
// `.gvisor.filestore.<sandbox id>` at the top of the rootfs, on the host. The sandbox's checkpoint
// holds those writes itself, but the file is in the snapshot's upper layer, so a `--rw` checkpoint
// (ctr) and every CRI checkpoint archive carry a stale copy into the restored rootfs, where
// `runsc restore` refuses to create its own ("mount source already has a filestore file").
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace nvproxy::shim {

inline constexpr const char* kRunscFilestorePrefix = ".gvisor.filestore.";

// Removes the regular files named kRunscFilestorePrefix* at the top of `rootfs` and returns their
// names. Only for a rootfs that is this container's own snapshot: no running sandbox can hold a
// file there, so each is a leftover of the sandbox that was checkpointed. Throws (naming the file
// and the cause) when one cannot be removed.
std::vector<std::string> remove_stale_filestores(const std::filesystem::path& rootfs);

}  // namespace nvproxy::shim
