#include "gpu/discovery.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"
#include "common/number.h"
#include "common/text.h"
#include "gpu/driver_files.h"

namespace nvproxy::gpu {

namespace fs = std::filesystem;

std::optional<fs::path> resolve_in_root(const fs::path& root, const fs::path& path) {
  std::vector<std::string> todo;  // components still to walk, next one at the back
  auto push_all = [&](const fs::path& p) {
    std::vector<std::string> parts;
    for (const auto& c : p.relative_path()) parts.push_back(c.string());
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push_all(path);
  fs::path cur = "/";
  int hops = 0;
  while (!todo.empty()) {
    std::string c = todo.back();
    todo.pop_back();
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      cur = cur.parent_path();
      continue;
    }
    fs::path next = cur / c;
    std::error_code ec;
    fs::path host = root / next.relative_path();
    auto st = fs::symlink_status(host, ec);
    if (ec || !fs::exists(st)) return std::nullopt;
    if (!fs::is_symlink(st)) {
      cur = next;
      continue;
    }
    if (++hops > 40) return std::nullopt;
    fs::path target = fs::read_symlink(host, ec);
    if (ec) return std::nullopt;
    if (target.is_absolute()) cur = "/";
    push_all(target);
  }
  return cur;
}

namespace {

std::string field_of(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::string v = line.substr(key.size());
    v.erase(0, v.find_first_not_of(" \t"));
    v.erase(v.find_last_not_of(" \t\r") + 1);
    return v;
  }
  return "";
}

}  // namespace

std::vector<HostGpu> read_host_gpus(const std::string& proc_driver_root, const std::string& dev_root) {
  std::vector<HostGpu> gpus;
  std::error_code ec;
  fs::path dir = fs::path(proc_driver_root) / "gpus";
  if (fs::is_directory(dir, ec)) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      fs::path info = e.path() / "information";
      if (!fs::exists(info, ec)) continue;
      std::string text = read_file(info);
      std::string minor = field_of(text, "Device Minor:");
      HostGpu g{e.path().filename().string(), 0, field_of(text, "GPU UUID:")};
      auto m = parse_number<unsigned>(minor);
      if (!m) throw Error(Code::InvalidArgument, info.string() + ": \"Device Minor:\" line missing or not a number");
      g.minor = *m;
      gpus.push_back(g);
    }
    std::sort(gpus.begin(), gpus.end(), [](const HostGpu& a, const HostGpu& b) { return a.bus_id < b.bus_id; });
    if (!gpus.empty()) return gpus;
  }
  for (const auto& e : fs::directory_iterator(dev_root, ec)) {
    std::string n = e.path().filename().string();
    if (n.size() > 6 && n.rfind("nvidia", 0) == 0) {
      if (auto minor = parse_number<unsigned>(std::string_view(n).substr(6))) gpus.push_back({"", *minor, ""});
    }
  }
  std::sort(gpus.begin(), gpus.end(), [](const HostGpu& a, const HostGpu& b) { return a.minor < b.minor; });
  return gpus;
}

std::string read_driver_version(const std::string& proc_driver_root) {
  std::error_code ec;
  fs::path p = fs::path(proc_driver_root) / "version";
  if (!fs::exists(p, ec)) return "";
  std::istringstream in(field_of(read_file(p), "NVRM version:"));
  std::string word, last;
  while (in >> word) {  // the version is the first word that looks like N.N...
    if (!word.empty() && std::isdigit(static_cast<unsigned char>(word[0])) && word.find('.') != std::string::npos) return word;
  }
  return "";
}

namespace {

bool is_char_dev(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

void add_node(const std::string& dev_root, const std::string& rel, ContainerEdits& edits) {
  fs::path host = fs::path(dev_root) / rel;
  edits.device_nodes.push_back({"/dev/" + rel, host.string(), "", std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                                std::nullopt, "rwm", "discovery: " + host.string()});
}

std::vector<HostGpu> select_gpus(const GpuRequest& req, const std::vector<HostGpu>& gpus) {
  if (req.visible_all) return gpus;
  std::vector<HostGpu> out;
  for (const auto& v : req.visible) {
    const HostGpu* hit = nullptr;
    if (v.rfind("MIG-", 0) == 0)
      throw Error(Code::Unimplemented,
                  "NVIDIA_VISIBLE_DEVICES: MIG device " + quote_value(v) + " needs a CDI spec (nvidia-ctk cdi generate)");
    if (v.rfind("GPU-", 0) == 0) {
      for (const auto& g : gpus)
        if (g.uuid == v) hit = &g;
    } else {
      const auto i = parse_number_or_throw<std::size_t>(v, "env NVIDIA_VISIBLE_DEVICES: GPU index");
      if (i < gpus.size()) hit = &gpus[i];
    }
    if (!hit)
      throw Error(Code::NotFound, "NVIDIA_VISIBLE_DEVICES: GPU " + quote_value(v) + " not found (host has " +
                                      std::to_string(gpus.size()) + " GPUs)");
    if (std::none_of(out.begin(), out.end(), [&](const HostGpu& g) { return g.minor == hit->minor; })) out.push_back(*hit);
  }
  return out;
}

struct CapabilityFiles {
  std::vector<std::string> libs, required_libs, tools;
};

const std::map<std::string, CapabilityFiles>& capability_files() {
  static const std::map<std::string, CapabilityFiles> k = {
      {"utility", {{"libnvidia-cfg"}, {"libnvidia-ml"}, {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced"}}},
      {"compute",
       {{"libcudadebugger", "libnvidia-ptxjitcompiler", "libnvidia-nvvm", "libnvidia-opencl", "libnvidia-gpucomp"},
        {"libcuda"},
        {"nvidia-cuda-mps-control", "nvidia-cuda-mps-server", "cuda-checkpoint"}}},
      {"video", {{"libnvcuvid", "libnvidia-encode", "libnvidia-opticalflow", "libvdpau_nvidia"}, {}, {}}},
      {"graphics",
       {{"libnvidia-eglcore", "libnvidia-glcore", "libnvidia-tls", "libnvidia-glsi", "libnvidia-rtcore", "libnvoptix",
         "libGLX_nvidia", "libEGL_nvidia", "libGLESv2_nvidia", "libGLESv1_CM_nvidia", "libnvidia-glvkspirv"},
        {},
        {}}},
      {"ngx", {{"libnvidia-ngx"}, {}, {}}},
  };
  return k;
}

}  // namespace

Discovered discover(const GpuRequest& req, const GpuConfig& cfg) {
  Discovered d;
  fs::path dev(cfg.dev_root);
  if (!is_char_dev(dev / "nvidiactl"))
    throw Error(Code::FailedPrecondition, "GPU discovery: " + (dev / "nvidiactl").string() +
                                              " is missing: is the NVIDIA driver loaded? (or configure gpu.cdi_spec_dirs)");
  add_node(cfg.dev_root, "nvidiactl", d.edits);
  for (const char* n : {"nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}) {
    if (is_char_dev(dev / n))
      add_node(cfg.dev_root, n, d.edits);
    else if (std::string(n) != "nvidia-modeset" && req.capabilities.count("compute"))
      d.warnings.push_back("GPU discovery: " + (dev / n).string() + " missing (CUDA needs it; run nvidia-modprobe -u -c=0)");
  }
  std::error_code ec;
  std::vector<std::string> caps;
  for (const auto& e : fs::directory_iterator(dev / "nvidia-caps", ec))
    if (is_char_dev(e.path())) caps.push_back("nvidia-caps/" + e.path().filename().string());
  std::sort(caps.begin(), caps.end());
  for (const auto& c : caps) add_node(cfg.dev_root, c, d.edits);

  for (const auto& g : select_gpus(req, read_host_gpus(cfg.proc_driver_root, cfg.dev_root))) {
    std::string rel = "nvidia" + std::to_string(g.minor);
    if (!is_char_dev(dev / rel))
      throw Error(Code::FailedPrecondition, "GPU discovery: " + (dev / rel).string() + " (GPU " +
                                                (g.uuid.empty() ? rel : g.uuid) + ") is missing or not a char device");
    add_node(cfg.dev_root, rel, d.edits);
    d.devices.push_back(g.uuid.empty() ? rel : g.uuid);
  }

  std::string version = read_driver_version(cfg.proc_driver_root);
  for (const auto& cap : req.capabilities) {
    auto it = capability_files().find(cap);
    if (it == capability_files().end()) continue;
    for (const auto& lib : it->second.required_libs)
      if (!add_driver_library(cfg.driver_root, lib, version, d.edits, d.warnings))
        throw Error(Code::FailedPrecondition,
                    "GPU discovery: " + lib + ".so.* (capability " + cap + ") not found under driver root " + cfg.driver_root);
    for (const auto& lib : it->second.libs) add_driver_library(cfg.driver_root, lib, version, d.edits, d.warnings);
    for (const auto& tool : it->second.tools) add_driver_tool(cfg.driver_root, tool, d.edits);
  }
  return d;
}

}  // namespace nvproxy::gpu
