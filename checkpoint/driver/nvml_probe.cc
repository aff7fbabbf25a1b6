#include <dlfcn.h>

#include <vector>

#include "checkpoint/shared/gpu_usage.h"
#include "common/error.h"

namespace nvproxy::checkpoint {

namespace {
// nvmlProcessInfo_t as nvmlDeviceGetComputeRunningProcesses_v3 fills it (nvml.h 12.x).
struct ProcessInfo {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
// nvmlMemory_t (v1) as nvmlDeviceGetMemoryInfo fills it.
struct MemoryInfo {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr int kNvmlInsufficientSize = 7;
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;  // usedGpuMemory NVML cannot see (no permission, MIG)

using InitFn = int (*)();
using CountFn = int (*)(unsigned*);
using HandleFn = int (*)(unsigned, void**);
using ProcsFn = int (*)(void*, unsigned*, ProcessInfo*);
using StrFn = int (*)(void*, char*, unsigned);
using DriverFn = int (*)(char*, unsigned);
using MemFn = int (*)(void*, MemoryInfo*);
using ErrStrFn = const char* (*)(int);

// One initialised NVML: nvmlInit_v2 on construction, nvmlShutdown at the end.
class NvmlSession {
 public:
  explicit NvmlSession(const std::string& lib) : lib_(lib) {
    // dlopen is reference counted; keep the library for the process lifetime (NVML leaves threads).
    h_ = ::dlopen(lib_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h_) {
      const char* e = ::dlerror();
      throw Error(Code::FailedPrecondition, "cannot load NVML \"" + lib_ + "\": " + (e ? e : "unknown error"));
    }
    auto init = sym<InitFn>("nvmlInit_v2");
    shutdown_ = sym<InitFn>("nvmlShutdown");
    errstr_ = reinterpret_cast<ErrStrFn>(::dlsym(h_, "nvmlErrorString"));
    if (int rc = init(); rc != 0) throw fail("nvmlInit_v2", rc);
  }
  ~NvmlSession() { shutdown_(); }
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;

  template <typename Fn>
  Fn sym(const char* name) {
    void* p = ::dlsym(h_, name);
    if (!p) throw Error(Code::FailedPrecondition, "NVML \"" + lib_ + "\" lacks " + name);
    return reinterpret_cast<Fn>(p);
  }
  [[nodiscard]] Error fail(const std::string& what, int rc) const {
    return Error(Code::FailedPrecondition,
                 "NVML " + what + " failed: " + (errstr_ ? errstr_(rc) : "error") + " (" + std::to_string(rc) + ")");
  }

  unsigned count() {
    unsigned n = 0;
    if (int rc = sym<CountFn>("nvmlDeviceGetCount_v2")(&n); rc != 0) throw fail("nvmlDeviceGetCount_v2", rc);
    return n;
  }
  void* device(unsigned i) {
    void* dev = nullptr;
    if (int rc = sym<HandleFn>("nvmlDeviceGetHandleByIndex_v2")(i, &dev); rc != 0)
      throw fail("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) + ")", rc);
    return dev;
  }
  std::string text(const char* fn, void* dev, unsigned i) {
    char buf[256] = {};
    if (int rc = sym<StrFn>(fn)(dev, buf, sizeof buf); rc != 0) throw fail(std::string(fn) + "(" + std::to_string(i) + ")", rc);
    return buf;
  }
  std::vector<ProcessInfo> processes(void* dev, unsigned i) {
    auto procs_fn = sym<ProcsFn>("nvmlDeviceGetComputeRunningProcesses_v3");
    std::vector<ProcessInfo> infos(16);
    for (int attempt = 0;; ++attempt) {
      unsigned cnt = static_cast<unsigned>(infos.size());
      int rc = procs_fn(dev, &cnt, infos.data());
      if (rc == kNvmlInsufficientSize && attempt < 4) {
        infos.resize(cnt + 16);  // processes may start between the two calls
        continue;
      }
      if (rc != 0) throw fail("nvmlDeviceGetComputeRunningProcesses_v3(" + std::to_string(i) + ")", rc);
      infos.resize(cnt);
      return infos;
    }
  }

 private:
  std::string lib_;
  void* h_ = nullptr;
  InitFn shutdown_ = nullptr;
  ErrStrFn errstr_ = nullptr;
};

}  // namespace

std::map<pid_t, std::set<std::string>> NvmlGpuUsageProbe::gpus_by_pid() {
  std::lock_guard lk(mu_);
  NvmlSession nvml(lib_);
  std::map<pid_t, std::set<std::string>> out;
  for (unsigned i = 0, n = nvml.count(); i < n; ++i) {
    void* dev = nvml.device(i);
    std::string uuid = nvml.text("nvmlDeviceGetUUID", dev, i);
    for (const auto& p : nvml.processes(dev, i)) out[static_cast<pid_t>(p.pid)].insert(uuid);
  }
  return out;
}

GpuHostFacts NvmlGpuUsageProbe::host_facts() {
  std::lock_guard lk(mu_);
  NvmlSession nvml(lib_);
  GpuHostFacts f;
  char version[96] = {};
  if (int rc = nvml.sym<DriverFn>("nvmlSystemGetDriverVersion")(version, sizeof version); rc != 0)
    throw nvml.fail("nvmlSystemGetDriverVersion", rc);
  f.driver_version = version;
  auto mem_fn = nvml.sym<MemFn>("nvmlDeviceGetMemoryInfo");
  for (unsigned i = 0, n = nvml.count(); i < n; ++i) {
    void* dev = nvml.device(i);
    GpuDeviceFacts d{.index = i, .uuid = nvml.text("nvmlDeviceGetUUID", dev, i), .name = nvml.text("nvmlDeviceGetName", dev, i)};
    MemoryInfo mem{};
    if (int rc = mem_fn(dev, &mem); rc != 0) throw nvml.fail("nvmlDeviceGetMemoryInfo(" + std::to_string(i) + ")", rc);
    d.memory_total = mem.total;
    d.memory_free = mem.free;
    d.memory_used = mem.used;
    for (const auto& p : nvml.processes(dev, i)) {
      GpuProcessUse use{.uuid = d.uuid};
      if (p.usedGpuMemory != kNvmlValueNotAvailable) use.used_bytes = p.usedGpuMemory;
      f.processes[static_cast<pid_t>(p.pid)].push_back(std::move(use));
    }
    f.devices.push_back(std::move(d));
  }
  return f;
}

}  // namespace nvproxy::checkpoint
