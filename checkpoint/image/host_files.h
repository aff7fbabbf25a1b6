// The host's files a checkpoint image depends on: the regular files its processes held (or mapped)
// on the container's bind mounts, which the restore opens again by their path and which no image
// carries. A leave-running checkpoint is often restored after its original went on (a log rotated,
// a temporary file renamed over its target) or on another node; the runtime then fails half way
// through its restore on the first such file. The shim lists them when it checkpoints (the image's
// record, shown by `diagnose --image`) and checks every one before the runtime restores.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/image/criu_open_files.h"

namespace nvproxy::checkpoint {

struct HostFile {
  pid_t pid = 0;  // in the container; 0: mapped, a cwd, an executable, or (runsc) the mount itself
  std::string comm;
  int fd = -1;
  std::string path;       // in the container ("/out/progress.tmp")
  std::string mount;      // the bind mount's destination ("/out")
  std::string source;     // its source on the host ("/srv/out")
  std::string host_path;  // the file on the host ("/srv/out/progress.tmp")
  bool writing = false;
  std::uint64_t pos = 0;
  std::optional<std::uint64_t> size;  // the restore needs exactly this size (CRIU checks files it reads only)
  std::optional<std::uint32_t> mode;  // st_mode: the restore needs the same kind of file

  bool operator==(const HostFile&) const = default;
};

nlohmann::json to_json(const HostFile& f);
// Throws Error(InvalidArgument) naming `where` and the field.
HostFile host_file_from_json(const nlohmann::json& j, const std::string& where);

// The files of `open` that live on a bind mount of `spec` (an OCI spec's JSON: the one the restore
// runs with, whose sources are this node's), each with its host path. Files of the container's own
// rootfs, of tmpfs, proc and other mounts the runtime makes afresh are left out.
std::vector<HostFile> on_bind_mounts(const std::vector<CriuOpenFile>& open, const nlohmann::json& spec);

// The bind mounts of `spec` themselves (a gVisor image is runsc's own: its open files cannot be
// read from it, its mounts' sources can be checked).
std::vector<HostFile> bind_mount_sources(const nlohmann::json& spec);

// What each file is on this node against what the restore needs, one sentence each. Refused: gone,
// now another kind of file, or another size where CRIU checks it (files it had open for reading
// only). Warned: shorter than the offset a process held it at for writing (a log truncated in place:
// the process writes on past the end, as its original would have).
struct HostFileCheck {
  std::vector<std::string> refusals;
  std::vector<std::string> warnings;
};
HostFileCheck check_on_this_node(const std::vector<HostFile>& files);

}  // namespace nvproxy::checkpoint
