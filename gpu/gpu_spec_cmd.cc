#include "gpu/gpu_spec_cmd.h"

#include <yaml-cpp/yaml.h>

#include <boost/program_options.hpp>
#include <cstdlib>
#include <filesystem>

#include "common/error.h"
#include "common/fs.h"
#include "gpu/device_layer.h"

namespace nvproxy::gpu {

namespace po = boost::program_options;

namespace {

constexpr const char* kDefaultConfig = "/etc/containerd-shim-nvproxy/config.yaml";

GpuConfig load_config(const std::string& explicit_path) {
  std::string path = explicit_path;
  if (path.empty()) {
    const char* env = std::getenv("NVPROXY_SHIM_CONFIG");
    if (env && *env)
      path = env;
    else if (std::filesystem::exists(kDefaultConfig))
      path = kDefaultConfig;
  }
  if (path.empty()) return GpuConfig{};
  try {
    YAML::Node root = YAML::Load(read_file(path));
    return gpu_config_from_yaml(root.IsMap() ? root["gpu"] : YAML::Node(), path);
  } catch (const YAML::Exception& e) {
    throw Error(Code::InvalidArgument, path + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

}  // namespace

int gpu_spec_main(const std::vector<std::string>& args_in, std::ostream& out, std::ostream& err) {
  std::vector<std::string> args = args_in;
  if (!args.empty() && args.front() == "gpu-spec") args.erase(args.begin());
  po::options_description desc("usage: containerd-shim-nvproxy-v1 gpu-spec (--bundle DIR | --spec FILE) [options]");
  std::string bundle, spec_file, config, mode, driver_root, dev_root, proc_root, hook, driver_version;
  std::vector<std::string> cdi_dirs;
  desc.add_options()("help,h", "this help")("bundle", po::value(&bundle), "bundle dir holding config.json")(
      "spec", po::value(&spec_file), "config.json path")("config", po::value(&config), "shim config.yaml")(
      "mode", po::value(&mode), "auto|cdi|legacy|off")("cdi-spec-dir", po::value(&cdi_dirs), "CDI spec dir (repeatable)")(
      "driver-root", po::value(&driver_root), "driver root")("dev-root", po::value(&dev_root), "device root")(
      "proc-driver-root", po::value(&proc_root), "/proc/driver/nvidia")("hook-binary", po::value(&hook), "hook binary")(
      "nvproxy-driver-version", po::value(&driver_version), "runsc --nvproxy-driver-version")("json", "JSON output");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    err << "error: " << e.what() << "\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    out << desc;
    return 0;
  }
  if (bundle.empty() == spec_file.empty()) {
    err << "error: exactly one of --bundle or --spec is required\n" << desc;
    return 2;
  }
  try {
    GpuConfig cfg = load_config(config);
    if (!mode.empty()) cfg.mode = mode;
    if (!cdi_dirs.empty()) cfg.cdi_spec_dirs = cdi_dirs;
    if (!driver_root.empty()) cfg.driver_root = driver_root;
    if (!dev_root.empty()) cfg.dev_root = dev_root;
    if (!proc_root.empty()) cfg.proc_driver_root = proc_root;
    if (!hook.empty()) cfg.hook_binary = hook;
    if (!driver_version.empty()) cfg.nvproxy_driver_version = driver_version;
    std::string path = spec_file.empty() ? (std::filesystem::path(bundle) / "config.json").string() : spec_file;
    nlohmann::json spec;
    try {
      spec = nlohmann::json::parse(read_file(path));
    } catch (const nlohmann::json::exception& e) {
      throw Error(Code::InvalidArgument, path + ": not valid JSON: " + e.what());
    }
    out << describe_edits(spec, cfg, vm.count("json") != 0);
    return 0;
  } catch (const std::exception& e) {
    err << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace nvproxy::gpu
