#include "shim/task/task_options.h"

#include "common/error.h"
#include "proto/runc_options.pb.h"
#include "proto/runctypes.pb.h"
#include "proto/runtime_options.pb.h"

namespace nvproxy::shim {

namespace {

template <typename M>
M decode(const wkt::Any& any, const std::string& what) {
  M m;
  if (!m.ParseFromString(any.value())) throw Error(Code::InvalidArgument, what + ": cannot decode " + type_name(any.type_url()));
  return m;
}

template <typename M>
void fill_checkpoint(const M& o, oci::CheckpointFlags& f) {
  f.leave_running = !o.exit();
  f.open_tcp = o.open_tcp();
  f.external_unix_sockets = o.external_unix_sockets();
  f.terminal = o.terminal();
  f.file_locks = o.file_locks();
  f.empty_namespaces.assign(o.empty_namespaces().begin(), o.empty_namespaces().end());
  f.cgroups_mode = o.cgroups_mode();
  if (!o.image_path().empty()) f.image_path = o.image_path();
  f.work_path = o.work_path();
}

// The fields both runc option types carry.
template <typename M>
void fill_common(const M& o, TaskOptions& t) {
  t.no_pivot_root = o.no_pivot_root();
  t.no_new_keyring = o.no_new_keyring();
  t.criu_image_path = o.criu_image_path();
  t.criu_work_path = o.criu_work_path();
  t.io_uid = o.io_uid();
  t.io_gid = o.io_gid();
}

}  // namespace

std::string type_name(const std::string& url) {
  auto slash = url.rfind('/');
  return slash == std::string::npos ? url : url.substr(slash + 1);
}

TaskOptions decode_task_options(const wkt::Any& any, const std::string& what) {
  TaskOptions t;
  std::string name = type_name(any.type_url());
  if (name == "runtimeoptions.v1.Options") {
    t.config_path = decode<runtimeoptions::v1::Options>(any, what).config_path();
  } else if (name == "containerd.runc.v1.Options") {
    auto o = decode<containerd::runc::v1::Options>(any, what);
    fill_common(o, t);
    t.binary_name = o.binary_name();
    t.root = o.root();
    t.criu_path = o.criu_path();
    t.systemd_cgroup = o.systemd_cgroup();
  } else if (name == "containerd.linux.runc.CreateOptions") {
    fill_common(decode<containerd::linux::runc::CreateOptions>(any, what), t);
  }
  return t;
}

void apply_task_options(const TaskOptions& o, oci::RuntimeConfig& rc) {
  if (!o.binary_name.empty()) rc.binary = o.binary_name;
  if (!o.root.empty()) rc.root = o.root;
  if (o.systemd_cgroup) rc.systemd_cgroup = true;
  if (!o.criu_path.empty()) rc.criu_path = o.criu_path;
}

oci::CheckpointFlags decode_checkpoint_options(const wkt::Any* any, const std::string& path, const std::string& id,
                                               bool exit_without_options) {
  oci::CheckpointFlags f;
  f.image_path = path;
  f.leave_running = !exit_without_options;
  std::string what = "checkpoint of container \"" + id + "\"";
  if (any) {
    std::string name = type_name(any->type_url());
    if (name == "containerd.runc.v1.CheckpointOptions")
      fill_checkpoint(decode<containerd::runc::v1::CheckpointOptions>(*any, what), f);
    else if (name == "containerd.linux.runc.CheckpointOptions")
      fill_checkpoint(decode<containerd::linux::runc::CheckpointOptions>(*any, what), f);
    else
      throw Error(Code::InvalidArgument, what + ": unsupported options type " + name);
  }
  if (f.image_path.empty()) throw Error(Code::InvalidArgument, what + ": no image path");
  return f;
}

std::string describe_checkpoint_request(const wkt::Any* any, const oci::CheckpointFlags& f) {
  std::string what = any ? "options " + type_name(any->type_url())
                         : std::string("no options") + (f.leave_running ? "" : " (checkpoint.exit_without_options)");
  return what + (f.leave_running ? ": the task keeps running" : ": exit, the task stops");
}

}  // namespace nvproxy::shim
