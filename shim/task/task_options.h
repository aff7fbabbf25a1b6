// Decoding what containerd sends as options: the runtime/task options of Create (and of `start`'s
// stdin), and the checkpoint options. Three encodings reach a shim: containerd.runc.v1 (runtime
// names io.containerd.runc.*), containerd.linux.runc (the client's choice for every other runtime
// name, ours included) and runtimeoptions.v1 (CRI's ConfigPath for non-runc runtimes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "oci/runtime.h"
#include "proto/wkt.pb.h"

namespace nvproxy::shim {

struct TaskOptions {
  std::string config_path;  // runtimeoptions.v1's ConfigPath: the shim's config file
  // runc-style overrides of the runtime configuration (empty/false: keep the configured value).
  std::string binary_name, root, criu_path;
  bool systemd_cgroup = false;
  bool no_pivot_root = false, no_new_keyring = false;
  // shim_cgroup is not here: `start` joins it from the options on its stdin, before any task.
  std::string criu_image_path, criu_work_path;
  uint32_t io_uid = 0, io_gid = 0;
};

// The message name of a type URL ("types.containerd.io/x.y.Z" or "x.y.Z" -> "x.y.Z").
std::string type_name(const std::string& type_url);

// Throws InvalidArgument naming `what` when a known type does not decode; unknown types give
// empty options (containerd's runc shim ignores them too).
TaskOptions decode_task_options(const wkt::Any& any, const std::string& what);
// Applies the runc-style overrides.
void apply_task_options(const TaskOptions& o, oci::RuntimeConfig& rc);

// containerd's checkpoint options; `path` is the request's image directory. No options: the task
// keeps running (what containerd's client asks for by default), or stops with `exit_without_options`
// (checkpoint.exit_without_options).
oci::CheckpointFlags decode_checkpoint_options(const wkt::Any* any, const std::string& path, const std::string& container_id,
                                               bool exit_without_options);
// What a checkpoint request asked for, for the log: its options' type (or none) and whether the
// task stops. Clients differ here (docker 26 sends none to a runtime other than runc's).
std::string describe_checkpoint_request(const wkt::Any* any, const oci::CheckpointFlags& f);

}  // namespace nvproxy::shim
