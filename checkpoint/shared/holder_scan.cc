#include "checkpoint/shared/holder_scan.h"

#include <dirent.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "checkpoint/shared/proc_maps.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

namespace {

std::optional<std::string> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string cmdline_of(const fs::path& dir) {
  auto s = slurp(dir / "cmdline");
  if (!s) return "";
  while (!s->empty() && s->back() == '\0') s->pop_back();
  std::replace(s->begin(), s->end(), '\0', ' ');
  return *s;
}

std::uint64_t char_device(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return 0;
  return st.st_rdev;
}

std::string basename_of(const std::string& p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

}  // namespace

std::string_view kind_name(HolderKind k) {
  return k == HolderKind::Fd ? "fd" : "mapping";
}

bool ProcHolderScanner::matches(const std::string& path) const {
  return std::any_of(globs_.begin(), globs_.end(),
                     [&](const std::string& g) { return ::fnmatch(g.c_str(), path.c_str(), 0) == 0; });
}

std::vector<Holder> ProcHolderScanner::scan_one(pid_t pid) {
  fs::path dir = proc_ / std::to_string(pid);
  std::vector<Holder> out;
  // fds in numeric order, so diagnostics are stable.
  std::vector<int> fds;
  if (DIR* d = ::opendir((dir / "fd").c_str())) {
    while (dirent* e = ::readdir(d)) {
      char* end;
      long n = std::strtol(e->d_name, &end, 10);
      if (*end == 0 && end != e->d_name) fds.push_back(static_cast<int>(n));
    }
    ::closedir(d);
  }
  std::sort(fds.begin(), fds.end());
  for (int fd : fds) {
    std::error_code ec;
    fs::path target = fs::read_symlink(dir / "fd" / std::to_string(fd), ec);
    if (ec) continue;  // closed meanwhile
    std::string t = target.string();
    if (matches(t))
      out.push_back(
          {.pid = pid, .kind = HolderKind::Fd, .fd = fd, .path = t, .device = char_device(dir / "fd" / std::to_string(fd))});
  }
  // Mappings: one holder per device, however many ranges map it.
  if (auto maps = read_maps(dir / "maps")) {
    std::set<std::string> seen;
    for (const MapsEntry& m : *maps) {
      const std::string& p = m.path;
      if (p.empty() || p[0] != '/' || !matches(p) || !seen.insert(p).second) continue;
      // The path is the container's: its node is found through the process's root.
      out.push_back({.pid = pid, .kind = HolderKind::Mapping, .path = p, .device = char_device(dir / "root" / p.substr(1))});
    }
  }
  if (out.empty()) return out;
  std::string name = comm_of(dir), cmd = cmdline_of(dir);
  for (auto& h : out) {
    h.name = name;
    h.cmdline = cmd;
  }
  return out;
}

std::vector<Holder> ProcHolderScanner::scan(const std::vector<pid_t>& pids) {
  std::vector<pid_t> sorted = pids;
  std::sort(sorted.begin(), sorted.end());
  std::vector<Holder> all;
  for (pid_t pid : sorted) {
    auto hs = scan_one(pid);  // a vanished process simply yields nothing
    all.insert(all.end(), hs.begin(), hs.end());
  }
  return all;
}

std::optional<ProcInfo> ProcHolderScanner::info(pid_t pid) {
  fs::path dir = proc_ / std::to_string(pid);
  auto status = slurp(dir / "status");
  if (!status) return std::nullopt;
  ProcInfo pi{.pid = pid, .name = comm_of(dir), .cmdline = cmdline_of(dir)};
  std::istringstream ss(*status);
  std::string line;
  while (std::getline(ss, line))
    if (line.rfind("PPid:", 0) == 0) pi.ppid = static_cast<pid_t>(std::strtol(line.c_str() + 5, nullptr, 10));
  std::error_code ec;
  pi.exe = fs::read_symlink(dir / "exe", ec).string();
  if (auto maps = read_maps(dir / "maps")) {
    std::vector<std::uint64_t> uvm;  // sizes of the /dev/nvidia-uvm ranges
    for (const MapsEntry& m : *maps) {
      const std::string& path = m.path;
      std::string b = basename_of(path);
      if (b.rfind("libcuda.so", 0) == 0) pi.maps_libcuda = true;
      if (b.rfind("libnvidia-ml.so", 0) == 0) pi.maps_libnvml = true;
      if (path.rfind("/dev/shm/cuda.shm.", 0) == 0 && pi.cuda_ipc_file.empty()) pi.cuda_ipc_file = path;
      if (pi.unheld_lib.empty() && runs_device_threads(path)) pi.unheld_lib = path;
      if (path == "/dev/nvidia-uvm" && m.end > m.start) uvm.push_back(m.end - m.start);
    }
    // The driver's own 2 MiB range is not managed memory; everything beyond it is.
    constexpr std::uint64_t kDriverRange = 2ULL << 20;
    auto own = std::find(uvm.begin(), uvm.end(), kDriverRange);
    if (own != uvm.end()) uvm.erase(own);
    for (auto b : uvm) pi.uvm_managed_bytes += b;
  }
  return pi;
}

std::string comm_of(const fs::path& dir) {
  auto s = slurp(dir / "comm");
  if (!s) return "?";
  while (!s->empty() && s->back() == '\n') s->pop_back();
  return *s;
}

bool runs_device_threads(const std::string& path) {
  if (path.size() < 4 || path.compare(path.size() - 3, 3, ".so") != 0) return false;
  // jaxlib's runtime (xla_extension.so before jaxlib 0.5, _jax.so and friends after) and the CUDA
  // plugin wheels (jax_plugins/xla_cuda12, xla_cuda13).
  return path.find("/jaxlib/") != std::string::npos || path.find("/jax_plugins/") != std::string::npos ||
         path.find("xla_extension") != std::string::npos;
}

}  // namespace nvproxy::checkpoint
