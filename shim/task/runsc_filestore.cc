#include "shim/task/runsc_filestore.h"

#include "common/error.h"

namespace nvproxy::shim {

std::vector<std::string> remove_stale_filestores(const std::filesystem::path& rootfs) {
  std::vector<std::string> removed;
  std::error_code ec;
  std::filesystem::directory_iterator it(rootfs, ec);
  if (ec)
    throw Error(Code::Internal, "cannot list the rootfs " + rootfs.string() + " for stale runsc filestores: " + ec.message());
  for (const auto& entry : it) {
    std::string name = entry.path().filename().string();
    if (name.rfind(kRunscFilestorePrefix, 0) != 0) continue;
    // symlink_status: a link of that name is not runsc's file; leave what is not a plain file alone.
    if (!std::filesystem::is_regular_file(entry.symlink_status(ec))) continue;
    if (!std::filesystem::remove(entry.path(), ec) && ec)
      throw Error(Code::Internal, "cannot remove the stale runsc filestore " + entry.path().string() + ": " + ec.message());
    removed.push_back(name);
  }
  return removed;
}

}  // namespace nvproxy::shim
