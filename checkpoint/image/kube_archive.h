// A Kubernetes checkpoint archive as the kubelet wrote it, unpacked on this node (from the
// checkpoint image an annotation names: registry/kube_restore.h pulls and unpacks it):
// checkpoint/ (with the image store, a registry reference to the memory, which the restore pulls
// into the store), spec.dump and config.dump (what the container was), rootfs-diff.tar and
// deleted.files (its writable layer's changes).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace nvproxy::checkpoint {

struct KubeCheckpoint {
  std::filesystem::path dir;  // the archive's files, unpacked
  std::string container;      // the manifest's org.criu.checkpoint.container.name
  nlohmann::json spec;        // spec.dump: the checkpointed container's OCI spec
  nlohmann::json config;      // config.dump: CRI's metadata of it (image name, ...)
  std::filesystem::path checkpoint() const { return dir / "checkpoint"; }
};

// Where an archive pulled for `into` is unpacked.
inline std::filesystem::path kube_archive_in(const std::filesystem::path& into) {
  return into / "archive";
}

// `file` read as a JSON object; Error(InvalidArgument) starting with `what` naming the file when it
// is not one.
nlohmann::json read_json_object(const std::filesystem::path& file, const std::string& what);

// The archive unpacked in `dir`, of the container `container`. Error(InvalidArgument) starting
// with `what` when it has no spec.dump, config.dump or checkpoint/, or they are not JSON objects.
KubeCheckpoint read_kube_archive(const std::filesystem::path& dir, std::string container, const std::string& what);

}  // namespace nvproxy::checkpoint
