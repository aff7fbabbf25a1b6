#include "checkpoint/image/pod_shm.h"

#include <algorithm>

#include "checkpoint/image/layout_blobs.h"
#include "common/error.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<fs::path> pod_shm_source(const json& spec) {
  if (!spec.is_object() || !spec.contains("mounts") || !spec["mounts"].is_array()) return std::nullopt;
  for (const auto& m : spec["mounts"]) {
    if (!m.is_object() || m.value("destination", std::string()) != "/dev/shm") continue;
    bool bind = m.value("type", std::string()) == "bind";
    if (m.contains("options") && m["options"].is_array())
      bind = bind || std::any_of(m["options"].begin(), m["options"].end(),
                                 [](const json& o) { return o.is_string() && (o == "bind" || o == "rbind"); });
    const std::string source = m.value("source", std::string());
    std::error_code ec;
    if (bind && !source.empty() && source.front() == '/' && fs::is_directory(source, ec)) return fs::path(source);
    return std::nullopt;  // the last /dev/shm mount wins; a tmpfs one is the container's own
  }
  return std::nullopt;
}

std::string pod_shm_script(const fs::path& shm, const std::string& tar) {
  auto quoted = [](const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  };
  return "#!/bin/sh\n"
         "# containerd-shim-nvproxy: the pod's /dev/shm into the checkpoint image (checkpoint/image/pod_shm.h)\n"
         "[ \"$CRTOOLS_SCRIPT_ACTION\" = post-dump ] || exit 0\n"
         "exec " +
         quoted(tar) + " -cf \"$CRTOOLS_IMAGE_DIR/" + kPodShmFile + "\" -C " + quoted(shm.string()) + " --sparse .\n";
}

std::uint64_t save_pod_shm(const fs::path& shm, const fs::path& image, ProcessRunner& runner) {
  std::uint64_t bytes = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(shm, ec))
    if (e.is_regular_file(ec)) bytes += e.file_size(ec);
  if (bytes == 0 && fs::is_empty(shm, ec)) return 0;
  run_tar({"-cf", (image / kPodShmFile).string(), "-C", shm.string(), "--sparse", "."}, runner,
          "saving the pod's /dev/shm (" + shm.string() + ") into the image");
  return bytes;
}

bool restore_pod_shm(const fs::path& image, const fs::path& shm, ProcessRunner& runner) {
  const fs::path tar = image / kPodShmFile;
  std::error_code ec;
  if (!fs::is_regular_file(tar, ec)) return false;
  run_tar({"-xf", tar.string(), "-C", shm.string(), "--skip-old-files"}, runner,
          "putting the image's /dev/shm files into the pod's (" + shm.string() + ")");
  return true;
}

}  // namespace nvproxy::checkpoint
