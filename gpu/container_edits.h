// The edits a GPU request turns into, whatever produced them (a CDI spec or host discovery).
// One model for both so there is one code path that applies them to config.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nvproxy::gpu {

// Every edit remembers where it came from ("FILE: FIELD" or "discovery: PATH") so a conflict
// message can name both sides.
struct EnvEdit {
  std::string key, value, origin;
};

struct DeviceNode {
  std::string path;       // in the container
  std::string host_path;  // on the host; empty = same as path
  std::string type;       // "c", "b", "u" or "p"; empty = read from the host node
  std::optional<int64_t> major, minor;
  std::optional<uint32_t> file_mode, uid, gid;
  std::string permissions;  // cgroup access ("rwm" subset); empty = "rwm"
  std::string origin;
};

struct MountEdit {
  std::string host_path, container_path, type;
  std::vector<std::string> options;
  std::string origin;
};

struct HookEdit {
  std::string hook_name;  // createRuntime, createContainer, startContainer, prestart, poststart, poststop
  std::string path;
  std::vector<std::string> args, env;
  std::optional<int64_t> timeout;
  std::string origin;
  bool operator==(const HookEdit& o) const {
    return hook_name == o.hook_name && path == o.path && args == o.args && env == o.env && timeout == o.timeout;
  }
};

// Not a CDI field: a soname link the hook creates in the rootfs because we never bind a symlink.
struct SymlinkEdit {
  std::string path;    // in the container
  std::string target;  // link text (relative to path's directory, or absolute in the container)
  std::string origin;
};

struct ContainerEdits {
  std::vector<EnvEdit> env;
  std::vector<DeviceNode> device_nodes;
  std::vector<MountEdit> mounts;
  std::vector<HookEdit> hooks;
  std::vector<uint32_t> additional_gids;
  std::vector<SymlinkEdit> symlinks;
  [[nodiscard]] bool empty() const {
    return env.empty() && device_nodes.empty() && mounts.empty() && hooks.empty() && additional_gids.empty() && symlinks.empty();
  }
};

// Appends `from` to `into`. Two edits for the same target that disagree (env key with another value,
// device path with another host node, mount destination with another source) throw
// Error(FailedPrecondition) naming both origins; exact repeats are dropped.
void merge_edits(ContainerEdits& into, const ContainerEdits& from);

// Host facts the spec needs: fills missing type/major/minor/fileMode of device nodes by stat(2) on
// the host node (a host path under /dev is looked up under dev_root, so a relocated /dev works),
// replaces a mount of a symlink by a mount of the real file at the real name plus a SymlinkEdit,
// and turns "rbind" into "bind" (a recursive bind can pull in submounts CRIU cannot restore).
// Throws Error naming the edit's origin when a node without major/minor cannot be read.
void fill_host_info(ContainerEdits& edits, const std::string& dev_root, std::vector<std::string>& warnings);

}  // namespace nvproxy::gpu
