#include "hooks/gpu_setup.h"

#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>

#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "gpu/record.h"
#include "hooks/rootfs_ops.h"

namespace nvproxy::hooks {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_config(const std::string& bundle) {
  fs::path p = fs::path(bundle) / "config.json";
  try {
    return json::parse(read_file(p));
  } catch (const json::exception& e) {
    throw Error(Code::InvalidArgument, p.string() + ": not valid JSON: " + e.what());
  }
}

std::string rootfs_of(const json& config, const std::string& bundle) {
  std::string root;
  if (config.contains("root") && config["root"].is_object()) root = config["root"].value("path", "");
  if (root.empty()) throw Error(Code::InvalidArgument, bundle + "/config.json: root.path is missing");
  return fs::path(root).is_absolute() ? root : (fs::path(bundle) / root).string();
}

// The device files runsc's gofer binds into the rootfs for nvproxy (gVisor's own rule).
bool runsc_passes_through(const std::string& path) {
  static const std::regex gpu("^/dev/nvidia[0-9]+$");
  return path == "/dev/nvidiactl" || path == "/dev/nvidia-uvm" || std::regex_match(path, gpu);
}

void check_nodes(const RootDir& root, const json& record, bool runsc) {
  for (const auto& n : record.value("nodes", json::array())) {
    std::string path = n.value("path", "");
    if (runsc && !runsc_passes_through(path)) continue;
    auto st = root.stat(path);
    if (!st) throw Error(Code::FailedPrecondition, "GPU device node " + path + " is missing in the container");
    if (n.value("type", "c") != "c") continue;
    if (!S_ISCHR(st->st_mode))
      throw Error(Code::FailedPrecondition, "GPU device node " + path + " in the container is not a char device");
    if (n.contains("major") &&
        (major(st->st_rdev) != n["major"].get<unsigned>() || minor(st->st_rdev) != n["minor"].get<unsigned>()))
      throw Error(Code::FailedPrecondition, "GPU device node " + path + " in the container is " +
                                                std::to_string(major(st->st_rdev)) + ":" + std::to_string(minor(st->st_rdev)) +
                                                ", expected " + std::to_string(n["major"].get<unsigned>()) + ":" +
                                                std::to_string(n["minor"].get<unsigned>()));
  }
}

std::string find_ldconfig(const GpuSetupOptions& opts) {
  if (!opts.ldconfig.empty()) return ::access(opts.ldconfig.c_str(), X_OK) == 0 ? opts.ldconfig : "";
  for (const char* p : {"/sbin/ldconfig", "/usr/sbin/ldconfig"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

void refresh_ld_cache(const RootDir& root, const std::vector<std::string>& dirs, const GpuSetupOptions& opts, std::ostream& err) {
  if (dirs.empty()) return;
  auto etc = root.stat("/etc");
  if (etc && S_ISDIR(etc->st_mode)) {
    std::string conf = "# written by containerd-shim-nvproxy: NVIDIA driver libraries\n";
    for (const auto& d : dirs) conf += d + "\n";
    root.mkdirs("/etc/ld.so.conf.d");
    root.write_file("/etc/ld.so.conf.d/nvproxy.conf", conf);
  }
  if (!opts.run_ldconfig) return;
  std::string ldconfig = find_ldconfig(opts);
  if (ldconfig.empty()) {
    err << "warning: no host ldconfig; relying on the soname links in " << dirs.front() << "\n";
    return;
  }
  // The host's ldconfig, chrooted by -r: the image's own ldconfig is not trusted to run as root.
  // The dirs are named explicitly too, for images whose ld.so.conf lacks the conf.d include.
  Command cmd{.argv = {ldconfig, "-r", root.path()}, .timeout = std::chrono::seconds(30)};
  cmd.argv.insert(cmd.argv.end(), dirs.begin(), dirs.end());
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  RunResult r = runner.run(cmd);
  if (!r.ok()) err << "warning: " << ldconfig << " -r " << root.path() << ": " << r.describe() << "\n";
}

}  // namespace

void run_gpu_setup(const json& state, const GpuSetupOptions& opts, std::ostream& err) {
  std::string bundle = state.value("bundle", "");
  if (bundle.empty()) throw Error(Code::InvalidArgument, "OCI state has no bundle");
  json config = read_config(bundle);
  auto record = gpu::read_record_annotations(state.value("annotations", json::object()));
  if (!record) record = gpu::read_record(config);
  if (!record) return;  // not a GPU container of ours: nothing to do
  RootDir root(rootfs_of(config, bundle));
  check_nodes(root, *record, opts.runsc);
  for (const auto& s : record->value("symlinks", json::array())) {
    std::string path = s.value("path", ""), target = s.value("target", "");
    // A link we cannot make is not fatal: ldconfig below makes the soname links it needs.
    try {
      if (!root.symlink(path, target)) err << "warning: " << path << " exists in the image; link to " << target << " not made\n";
    } catch (const Error& e) {
      err << "warning: link " << path << " -> " << target << " not made: " << e.what() << "\n";
    }
  }
  refresh_ld_cache(root, record->value("ldDirs", std::vector<std::string>{}), opts, err);
}

}  // namespace nvproxy::hooks
