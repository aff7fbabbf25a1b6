// Mounting the snapshot containerd hands over (CreateTaskRequest.rootfs) at <bundle>/rootfs, and
// taking it down at Delete.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace nvproxy::shim {

struct MountSpec {
  std::string type, source, target;
  std::vector<std::string> options;
};

struct MountArgs {
  unsigned long flags = 0;
  std::string data;                // comma-joined filesystem options
  bool read_only_remount = false;  // a bind with "ro" needs a second, remounting call
};
// Splits mount(8)-style options into flags and data.
MountArgs parse_mount_options(const std::vector<std::string>& options, const std::string& type);

void mount_rootfs(const std::vector<MountSpec>& mounts, const std::filesystem::path& rootfs);
// Unmounts everything at or below rootfs (lazily, deepest first); ignores what is not mounted.
void unmount_all(const std::filesystem::path& rootfs);

// Owns the container's rootfs mount: mounted on construction (nothing when `mounts` is empty),
// unmounted on destruction, whichever way the container goes (failed Create, Delete).
class RootfsMount {
 public:
  RootfsMount(const std::vector<MountSpec>& mounts, std::filesystem::path rootfs);
  ~RootfsMount();
  RootfsMount(const RootfsMount&) = delete;
  RootfsMount& operator=(const RootfsMount&) = delete;

 private:
  std::filesystem::path rootfs_;
  bool mounted_ = false;
};

}  // namespace nvproxy::shim
