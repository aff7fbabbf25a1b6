// A pod's /dev/shm travels with its checkpoint. Under CRI every container of a pod binds the
// sandbox's shm directory at /dev/shm, an external mount whose files CRIU leaves where they are:
// Python's multiprocessing semaphores live there, and CRIU (with link-remap) links the unlinked
// ones back in as link_remap.N files that only a restore on the same node finds (measured on an
// H100: the sglang shape restored on another node failed in CRIU, "Can't link
// dev/shm/link_remap.56 -> dev/shm/sem.tXIsD6"). So after the runtime's checkpoint the directory's
// files go into the image, and before a restore they are put into the new pod's directory, what is
// already there kept (a restore in the same pod).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/process.h"

namespace nvproxy::checkpoint {

inline constexpr const char* kPodShmFile = "nvproxy-pod-shm.tar";

// The host directory bound at /dev/shm in `spec`; nullopt when /dev/shm is the container's own
// tmpfs (CRIU dumps that itself) or not mounted.
std::optional<std::filesystem::path> pod_shm_source(const nlohmann::json& spec);

// The script CRIU runs as its action script (CRTOOLS_SCRIPT_ACTION, CRTOOLS_IMAGE_DIR): at
// post-dump, after the image is whole and while the link_remap files CRIU made in `shm` are still
// there (it removes them next when the container keeps running), the directory into the image.
std::string pod_shm_script(const std::filesystem::path& shm, const std::string& tar);

// The files of `shm` into IMAGE/kPodShmFile (where no script of CRIU's did it); their bytes (0: none, nothing written). Error
// naming the directory and tar's own error.
std::uint64_t save_pod_shm(const std::filesystem::path& shm, const std::filesystem::path& image, ProcessRunner& runner);

// The saved files into `shm`, files already there kept; false when the image saved none.
bool restore_pod_shm(const std::filesystem::path& image, const std::filesystem::path& shm, ProcessRunner& runner);

}  // namespace nvproxy::checkpoint
