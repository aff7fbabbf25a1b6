#include "shim/task/config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>

#include "checkpoint/attempt/release.h"
#include "checkpoint/staging/staging_bill.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/text.h"

namespace nvproxy::shim {

namespace {

template <typename T>
void get(const YAML::Node& n, const char* key, T& out, const std::string& origin, const std::string& section) {
  if (!n[key]) return;
  try {
    out = n[key].as<T>();
  } catch (const YAML::Exception& e) {
    throw Error(Code::InvalidArgument, origin + ": " + section + "." + key + ": " + e.msg);
  }
}

void check_keys(const YAML::Node& n, std::initializer_list<const char*> known, const std::string& origin,
                const std::string& section) {
  if (!n.IsMap()) throw Error(Code::InvalidArgument, origin + ": " + section + ": must be a mapping");
  for (const auto& kv : n) {
    auto k = kv.first.as<std::string>();
    bool ok = false;
    for (const char* c : known) ok = ok || k == c;
    if (ok) continue;
    // An operator's typo is shown as typed; a long or non-UTF-8 key is quoted, cut and escaped.
    const std::string shown = k.size() <= kQuotedPrefix && is_valid_utf8(k) ? k : quote_value(k);
    throw Error(Code::InvalidArgument, origin + ": " + (section.empty() ? "" : section + ".") + shown + ": unknown key");
  }
}

}  // namespace

namespace {
ShimConfig parse_config_unchecked(const std::string& text, const std::string& origin) {
  ShimConfig c;
  c.source = origin;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(Code::InvalidArgument, origin + ": not valid YAML: " + e.what());
  }
  if (root.IsNull()) return c;
  check_keys(root, {"runtime", "gpu", "checkpoint", "log_level"}, origin, "");
  if (auto r = root["runtime"]) {
    check_keys(r, {"binary", "root", "extra_args", "systemd_cgroup", "criu_path"}, origin, "runtime");
    get(r, "binary", c.runtime.binary, origin, "runtime");
    get(r, "root", c.runtime.root, origin, "runtime");
    get(r, "extra_args", c.runtime.extra_args, origin, "runtime");
    get(r, "systemd_cgroup", c.runtime.systemd_cgroup, origin, "runtime");
    get(r, "criu_path", c.runtime.criu_path, origin, "runtime");
  }
  if (auto g = root["gpu"]) c.gpu = gpu::gpu_config_from_yaml(g, origin);
  if (auto k = root["checkpoint"]) {
    check_keys(k,
               {"cuda",
                "cuda_checkpoint_path",
                "cuda_helper",
                "libcuda",
                "libnvml",
                "lock_timeout_ms",
                "toggle_timeout_ms",
                "parallelism",
                "device_globs",
                "allow_unrestorable",
                "snapshot_timeout_ms",
                "restore_timeout_ms",
                "criu_options",
                "page_writers",
                "restore_huge_pages",
                "page_readers",
                "resume_before_write",
                "write_after_cuda_resume",
                "runsc_direct_restore",
                "allow_lost_cuda_processes",
                "check_space",
                "content_store",
                "exit_without_options",
                "release_inherited",
                "hold_still",
                "skip_zero_pages",
                "criu_plugin_dir",
                "image_store",
                "image_store_keep",
                "registry_tls_verify",
                "registry_authfile",
                "registry_timeout_s",
                "registry_streams",
                "registry_chunk_mib",
                "registry_compression",
                "image_transfer",
                "image_transfer_timeout_s",
                "annotation_restore",
                "annotation_registries",
                "staging_memory",
                "staging_margin_mib",
                "host_meminfo",
                "staging_account"},
               origin, "checkpoint");
    get(k, "cuda", c.checkpoint.cuda, origin, "checkpoint");
    get(k, "cuda_checkpoint_path", c.checkpoint.cuda_checkpoint_path, origin, "checkpoint");
    get(k, "cuda_helper", c.checkpoint.cuda_helper, origin, "checkpoint");
    get(k, "libcuda", c.checkpoint.libcuda, origin, "checkpoint");
    get(k, "libnvml", c.checkpoint.libnvml, origin, "checkpoint");
    get(k, "lock_timeout_ms", c.checkpoint.lock_timeout_ms, origin, "checkpoint");
    get(k, "toggle_timeout_ms", c.checkpoint.toggle_timeout_ms, origin, "checkpoint");
    get(k, "parallelism", c.checkpoint.parallelism, origin, "checkpoint");
    get(k, "device_globs", c.checkpoint.device_globs, origin, "checkpoint");
    get(k, "allow_unrestorable", c.checkpoint.allow_unrestorable, origin, "checkpoint");
    get(k, "snapshot_timeout_ms", c.checkpoint.snapshot_timeout_ms, origin, "checkpoint");
    get(k, "restore_timeout_ms", c.checkpoint.restore_timeout_ms, origin, "checkpoint");
    get(k, "allow_lost_cuda_processes", c.checkpoint.allow_lost_cuda_processes, origin, "checkpoint");
    get(k, "check_space", c.checkpoint.check_space, origin, "checkpoint");
    get(k, "content_store", c.checkpoint.content_store, origin, "checkpoint");
    get(k, "exit_without_options", c.checkpoint.exit_without_options, origin, "checkpoint");
    get(k, "release_inherited", c.checkpoint.release_inherited, origin, "checkpoint");
    get(k, "hold_still", c.checkpoint.hold_still, origin, "checkpoint");
    get(k, "skip_zero_pages", c.checkpoint.skip_zero_pages, origin, "checkpoint");
    get(k, "criu_plugin_dir", c.checkpoint.criu_plugin_dir, origin, "checkpoint");
    get(k, "image_store", c.checkpoint.image_store, origin, "checkpoint");
    get(k, "image_store_keep", c.checkpoint.image_store_keep, origin, "checkpoint");
    get(k, "registry_tls_verify", c.checkpoint.registry_tls_verify, origin, "checkpoint");
    get(k, "registry_authfile", c.checkpoint.registry_authfile, origin, "checkpoint");
    get(k, "registry_timeout_s", c.checkpoint.registry_timeout_s, origin, "checkpoint");
    get(k, "registry_streams", c.checkpoint.registry_streams, origin, "checkpoint");
    get(k, "registry_chunk_mib", c.checkpoint.registry_chunk_mib, origin, "checkpoint");
    get(k, "registry_compression", c.checkpoint.registry_compression, origin, "checkpoint");
    get(k, "image_transfer", c.checkpoint.image_transfer, origin, "checkpoint");
    get(k, "image_transfer_timeout_s", c.checkpoint.image_transfer_timeout_s, origin, "checkpoint");
    if (c.checkpoint.image_transfer_timeout_s == 0)
      throw Error(Code::InvalidArgument, origin + ": checkpoint.image_transfer_timeout_s is 0: a pull needs at least one second");
    if (!c.checkpoint.known_registry_compression())
      throw Error(Code::InvalidArgument,
                  origin + ": checkpoint.registry_compression is \"" + c.checkpoint.registry_compression + "\": none or zstd");
    get(k, "annotation_restore", c.checkpoint.annotation_restore, origin, "checkpoint");
    get(k, "annotation_registries", c.checkpoint.annotation_registries, origin, "checkpoint");
    for (const auto& r : c.checkpoint.annotation_registries)
      if (r.empty() || r.find('@') != std::string::npos || r.find("://") != std::string::npos)
        throw Error(Code::InvalidArgument,
                    origin + ": checkpoint.annotation_registries: \"" + r + "\" is not a repository prefix (host[:port][/path])");
    std::string staging = checkpoint::to_string(c.checkpoint.staging_memory);
    get(k, "staging_memory", staging, origin, "checkpoint");
    get(k, "staging_margin_mib", c.checkpoint.staging_margin_mib, origin, "checkpoint");
    get(k, "host_meminfo", c.checkpoint.host_meminfo, origin, "checkpoint");
    get(k, "staging_account", c.checkpoint.staging_account, origin, "checkpoint");
    try {
      c.checkpoint.staging_memory = checkpoint::parse_staging_mode(staging);
    } catch (const Error& e) {
      throw Error(Code::InvalidArgument, origin + ": " + e.what());
    }
    if (!c.checkpoint.image_store.empty() && c.checkpoint.image_store.front() != '/')
      throw Error(Code::InvalidArgument, origin + ": checkpoint.image_store: must be an absolute path");
    // CRIU options travel with the runtime (oci::RuntimeConfig); [] passes none.
    get(k, "criu_options", c.runtime.criu_options, origin, "checkpoint");
    get(k, "page_writers", c.runtime.page_writers, origin, "checkpoint");
    if (c.runtime.page_writers > 1024)
      throw Error(Code::InvalidArgument, origin + ": checkpoint.page_writers is " + std::to_string(c.runtime.page_writers) +
                                             ": at most 1024 (0: CRIU writes each process's pages itself)");
    get(k, "restore_huge_pages", c.runtime.restore_huge_pages, origin, "checkpoint");
    get(k, "page_readers", c.runtime.page_readers, origin, "checkpoint");
    get(k, "resume_before_write", c.runtime.resume_before_write, origin, "checkpoint");
    get(k, "write_after_cuda_resume", c.runtime.write_after_cuda_resume, origin, "checkpoint");
    get(k, "runsc_direct_restore", c.runtime.runsc_direct_restore, origin, "checkpoint");
    if (c.runtime.page_readers > 1024)
      throw Error(Code::InvalidArgument, origin + ": checkpoint.page_readers is " + std::to_string(c.runtime.page_readers) +
                                             ": at most 1024 (0: each restored process reads its pages in alone)");
    try {
      oci::criu_config_text(c.runtime.criu_options);
    } catch (const Error& e) {
      throw Error(Code::InvalidArgument, origin + ": checkpoint.criu_options: " + e.what());
    }
    for (auto [key, v] : {std::pair{"snapshot_timeout_ms", c.checkpoint.snapshot_timeout_ms},
                          std::pair{"restore_timeout_ms", c.checkpoint.restore_timeout_ms}})
      if (v == 0) throw Error(Code::InvalidArgument, origin + ": checkpoint." + key + ": must be greater than 0");
  }
  // CRIU loads the release plugin from there (the checkpoint decides whether it can, the runtime
  // hands it over).
  c.runtime.criu_plugin_dir = checkpoint::criu_plugin_dir(c.checkpoint);
  // The runtime's checkpoint and restore run under these deadlines.
  c.runtime.checkpoint_timeout = std::chrono::milliseconds(c.checkpoint.snapshot_timeout_ms);
  c.runtime.restore_timeout = std::chrono::milliseconds(c.checkpoint.restore_timeout_ms);
  if (root["log_level"]) {
    std::string l;
    get(root, "log_level", l, origin, "");
    c.log_level = parse_log_level(l);
  }
  if (c.runtime.binary.empty()) throw Error(Code::InvalidArgument, origin + ": runtime.binary: must not be empty");
  return c;
}

}  // namespace

ShimConfig parse_config(const std::string& text, const std::string& origin) {
  check_bound(origin, text.size(), kMaxConfigBytes);
  try {
    return parse_config_unchecked(text, origin);
  } catch (const YAML::Exception& e) {
    // Whatever yaml-cpp throws (a key that is a sequence, a bad conversion) stays inside the module.
    throw Error(Code::InvalidArgument, origin + ": " + e.what());
  }
}

ShimConfig load_config(const std::string& explicit_path) {
  std::string path = explicit_path;
  if (path.empty()) {
    const char* env = std::getenv("NVPROXY_SHIM_CONFIG");
    if (env && *env) path = env;
  }
  if (path.empty()) {
    if (!std::filesystem::exists(kDefaultConfigPath)) {
      ShimConfig c;
      c.source = "defaults";
      return c;
    }
    path = kDefaultConfigPath;
  }
  return parse_config(read_file(path, kMaxConfigBytes), path);
}

}  // namespace nvproxy::shim
