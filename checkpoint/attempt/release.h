// Forked children's inherited GPU device files, released from the image instead of refused.
//
// A process forked from a CUDA process after it opened the GPU (PyTorch's DataLoader and inductor
// compile workers, a multiprocessing fork pool) holds its ancestor's device fds and mappings without
// a CUDA context of its own: the driver's checkpoint of the ancestor cannot release them and CRIU
// cannot dump them. When the classification has shown that a holder's device fds are all its CUDA
// ancestor's own open files (file_identity.h), the checkpoint goes ahead: CRIU, with the shim's
// plugin (criu_release_plugin.c) loaded, leaves those files and mappings out of the image and the
// restore gives them back as /dev/null and empty reservations at the same fds and addresses. The
// running container is never changed by it, so a failed checkpoint leaves it exactly as it was.
// Under runsc the sandbox's checkpoint has no such hook: there the children drop them in place.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/criu_release.h"

namespace nvproxy::checkpoint {

struct ReleasedProcess {
  pid_t pid = 0;                   // host pid
  pid_t from = 0;                  // the CUDA ancestor whose open files it holds
  std::vector<int> fds;            // its inherited device fds
  std::size_t mappings = 0;        // devices it maps
  std::vector<std::string> paths;  // the devices it holds (fds and mappings), for a drop in place
};

// How the snapshot releases them: the runtime's CRIU with the shim's plugin (runc, crun; needs the
// devices' numbers), or the sandbox agent dropping them in the running children just before the
// sandbox's own checkpoint (runsc; drop_in_place.h).
enum class ReleaseWay { CriuPlugin, InPlace };

// What the runtime's snapshot must release; empty: nothing (the plugin is not loaded).
struct ReleasePlan {
  std::vector<ReleasedProcess> processes;
  std::vector<std::uint64_t> devices;  // st_rdev of every device they hold, sorted, unique
  // Leave-running: called (on another thread) where the runtime runs the processes again before it
  // has written the image (runc/crun with the project's CRIU: oci::CheckpointFlags::on_resumed),
  // so that CUDA is resumed while the pages are still being written. Empty: not asked.
  std::function<void()> on_resumed;

  [[nodiscard]] bool empty() const { return processes.empty(); }
  // "195:0,195:255,508:1": the plugin's $NVPROXY_CRIU_RELEASE.
  [[nodiscard]] std::string devices_text() const;
};

inline constexpr const char* kReleasePluginFile = NVPROXY_RELEASE_PLUGIN_FILE;

// Where the plugin is: beside the shim in criu-plugins/ (build tree), then
// ../libexec/containerd-shim-nvproxy/criu-plugins (installed); empty when in neither.
std::string default_criu_plugin_dir();
// checkpoint.criu_plugin_dir, else default_criu_plugin_dir().
struct CheckpointConfig;
std::string criu_plugin_dir(const CheckpointConfig& cfg);
// Why the plugin cannot be loaded from `dir` ("" when it can).
std::string release_plugin_problem(const std::string& dir);

}  // namespace nvproxy::checkpoint
