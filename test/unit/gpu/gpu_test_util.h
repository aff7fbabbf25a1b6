// Shared test scaffolding: temp dirs, a fake GPU host (char device nodes with NVIDIA majors made by
// mknod, a /proc/driver/nvidia tree, a driver root with real files and soname links), spec builders.
#pragma once

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "gpu/gpu_config.h"

namespace nvproxy::gpu::testing {

namespace fs = std::filesystem;

inline std::string fixture(const std::string& rel) {
  return std::string(NVPROXY_CDI_FIXTURES) + "/" + rel;
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "nvproxy-gpu-XXXXXX").string();
    if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp");
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

inline void write(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << content;
}

inline void make_char(const fs::path& p, unsigned maj, unsigned min) {
  fs::create_directories(p.parent_path());
  if (::mknod(p.c_str(), S_IFCHR | 0666, makedev(maj, min)) != 0) throw std::runtime_error("mknod " + p.string());
}

inline void link(const fs::path& p, const std::string& target) {
  fs::create_directories(p.parent_path());
  fs::create_symlink(target, p);
}

inline constexpr const char* kUuidA = "GPU-4a1b2c3d-0000-1111-2222-333344445555";  // bus 3b, minor 1
inline constexpr const char* kUuidB = "GPU-9f8e7d6c-0000-1111-2222-333344446666";  // bus 86, minor 0

// Two GPUs whose PCI order differs from their minor order, so index->minor mapping is exercised:
// index 0 = bus 0000:3b = /dev/nvidia1, index 1 = bus 0000:86 = /dev/nvidia0.
struct FakeHost {
  TempDir tmp;
  fs::path dev = tmp.path / "dev", proc = tmp.path / "proc", driver = tmp.path / "driver", cdi = tmp.path / "cdi";

  FakeHost() {
    make_char(dev / "nvidiactl", 195, 255);
    make_char(dev / "nvidia-modeset", 195, 254);
    make_char(dev / "nvidia0", 195, 0);
    make_char(dev / "nvidia1", 195, 1);
    make_char(dev / "nvidia-uvm", 238, 0);
    make_char(dev / "nvidia-uvm-tools", 238, 1);
    make_char(dev / "nvidia-caps/nvidia-cap1", 241, 1);
    make_char(dev / "nvidia-caps/nvidia-cap2", 241, 2);
    write(proc / "gpus/0000:3b:00.0/information",
          std::string("Model: \t\t NVIDIA H200\nIRQ:   \t\t 86\nGPU UUID: \t ") + kUuidA + "\nDevice Minor: \t 1\n");
    write(proc / "gpus/0000:86:00.0/information",
          std::string("Model: \t\t NVIDIA H200\nGPU UUID: \t ") + kUuidB + "\nDevice Minor: \t 0\n");
    write(proc / "version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.0  Release Build\nGCC version:  gcc 12\n");
    fs::path lib = driver / "usr/lib/x86_64-linux-gnu";
    write(lib / "libcuda.so.580.0", "cuda");
    link(lib / "libcuda.so.1", "libcuda.so.580.0");
    link(lib / "libcuda.so", "libcuda.so.1");
    write(lib / "libcuda.so.535.1", "old cuda");  // a leftover older driver: must not be chosen
    write(lib / "libnvidia-ml.so.580.0", "nvml");
    link(lib / "libnvidia-ml.so.1", "libnvidia-ml.so.580.0");
    write(lib / "libnvidia-ptxjitcompiler.so.580.0", "ptx");
    link(lib / "libnvidia-ptxjitcompiler.so.1", "libnvidia-ptxjitcompiler.so.580.0");
    write(lib / "libnvcuvid.so.580.0", "video");
    // The GPU operator's layout: an absolute link inside the driver root.
    link(driver / "usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.580.0");
    write(driver / "usr/lib/nvidia/nvidia-smi", "smi");
    link(driver / "usr/bin/nvidia-smi", "../lib/nvidia/nvidia-smi");
    write(driver / "usr/bin/nvidia-debugdump", "dd");
    fs::create_directories(cdi);
  }

  [[nodiscard]] GpuConfig config() const {
    GpuConfig c;
    c.cdi_spec_dirs = {cdi.string()};
    c.driver_root = driver.string();
    c.dev_root = dev.string();
    c.proc_driver_root = proc.string();
    return c;
  }
  void add_cdi(const std::string& fixture_rel, const std::string& as = "") const {
    fs::copy_file(fixture(fixture_rel), cdi / (as.empty() ? fs::path(fixture_rel).filename().string() : as));
  }
};

inline nlohmann::json base_spec(const std::vector<std::string>& env = {}) {
  nlohmann::json s = {{"ociVersion", "1.1.0"},
                      {"process", {{"args", {"sh"}}, {"cwd", "/"}, {"env", {"PATH=/usr/bin:/bin"}}}},
                      {"root", {{"path", "rootfs"}}},
                      {"mounts", {{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}}}},
                      {"linux", {{"resources", {{"devices", {{{"allow", false}, {"access", "rwm"}}}}}}}}};
  for (const auto& e : env) s["process"]["env"].push_back(e);
  return s;
}

// Entries of spec[a][b] (or spec[a]) whose `key` equals `value`.
inline size_t count_where(const nlohmann::json& list, const std::string& key, const nlohmann::json& value) {
  size_t n = 0;
  for (const auto& x : list)
    if (x.is_object() && x.contains(key) && x[key] == value) ++n;
  return n;
}

}  // namespace nvproxy::gpu::testing
