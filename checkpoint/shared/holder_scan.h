// Which processes hold GPU devices: open fds and memory mappings whose path matches a device glob.
// Driver libraries mapped into a process (libcuda.so, libnvidia-*.so) are not holders: they stay
// mapped after a CUDA checkpoint, and CRIU dumps them like any other file mapping.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

enum class HolderKind { Fd, Mapping };

struct Holder {
  pid_t pid = 0;
  std::string name;     // comm
  std::string cmdline;  // NULs turned into spaces
  HolderKind kind = HolderKind::Fd;
  int fd = -1;       // for kind Fd
  std::string path;  // the device
  // The character device's number (st_rdev), as the CRIU release plugin matches it; 0 when it is no
  // character device or cannot be told (a sandbox's scan).
  std::uint64_t device = 0;
};

// What the hints need to know about a process besides its holders.
struct ProcInfo {
  pid_t pid = 0;
  pid_t ppid = 0;
  std::string name, cmdline, exe;
  bool maps_libcuda = false;  // libcuda.so mapped
  bool maps_libnvml = false;  // libnvidia-ml.so mapped
  // What the driver cannot bring back, as /proc/PID/maps shows it (measured on an H200, driver 580):
  // a process that took part in CUDA IPC (cudaIpcGetMemHandle / cudaIpcOpenMemHandle, e.g. a CUDA
  // tensor passed through torch.multiprocessing), exporter and importer alike, maps the CUDA
  // runtime's /dev/shm/cuda.shm.* file; a plain CUDA process does not.
  std::string cuda_ipc_file;  // the /dev/shm/cuda.shm.* it maps; empty if none
  // Managed memory (cudaMallocManaged) is mapped from /dev/nvidia-uvm: every CUDA process maps one
  // 2 MiB range of it, a managed allocation adds its own (1 GiB allocated: a 1 GiB range).
  std::uint64_t uvm_managed_bytes = 0;
  // A mapped library whose threads touch device memory on their own while the process is
  // CUDA-checkpointed, which kills the process unless it is held still: XLA's (JAX's jaxlib and its
  // CUDA plugin). Measured on the H200: JAX died by SIGSEGV within 5 s, 3 runs of 3; PyTorch, CuPy
  // lived. Empty if none.
  std::string unheld_lib;
};

// A process's name from its /proc/PID directory ("?" when it is gone).
std::string comm_of(const std::filesystem::path& proc_pid_dir);

// The library of a /proc/PID/maps path that runs threads on device memory by itself (see
// ProcInfo::unheld_lib), or empty.
bool runs_device_threads(const std::string& mapped_path);

class HolderScanner {
 public:
  virtual ~HolderScanner() = default;
  // Holders among pids, in pid order. A process that vanished mid-scan is skipped.
  virtual std::vector<Holder> scan(const std::vector<pid_t>& pids) = 0;
  // nullopt if the process is gone.
  virtual std::optional<ProcInfo> info(pid_t pid) = 0;
};

class ProcHolderScanner final : public HolderScanner {
 public:
  // Globs are matched with fnmatch(3) without FNM_PATHNAME, so "/dev/nvidia*" also covers
  // /dev/nvidia-caps/nvidia-cap1.
  explicit ProcHolderScanner(std::vector<std::string> device_globs, std::filesystem::path proc_root = "/proc")
      : globs_(std::move(device_globs)), proc_(std::move(proc_root)) {}
  std::vector<Holder> scan(const std::vector<pid_t>& pids) override;
  std::optional<ProcInfo> info(pid_t pid) override;

  bool matches(const std::string& path) const;

 private:
  std::vector<Holder> scan_one(pid_t pid);
  std::vector<std::string> globs_;
  std::filesystem::path proc_;
};

std::string_view kind_name(HolderKind k);  // "fd" | "mapping"

}  // namespace nvproxy::checkpoint
