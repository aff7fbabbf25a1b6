#include <dlfcn.h>

#include <vector>

#include "checkpoint/gpu_usage.h"
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
constexpr int kNvmlInsufficientSize = 7;

using InitFn = int (*)();
using CountFn = int (*)(unsigned*);
using HandleFn = int (*)(unsigned, void**);
using ProcsFn = int (*)(void*, unsigned*, ProcessInfo*);
using UuidFn = int (*)(void*, char*, unsigned);
using ErrStrFn = const char* (*)(int);
}  // namespace

std::map<pid_t, std::set<std::string>> NvmlGpuUsageProbe::gpus_by_pid() {
  std::lock_guard lk(mu_);
  // dlopen is reference counted; keep the library for the process lifetime (NVML leaves threads).
  void* h = ::dlopen(lib_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    throw Error(Code::FailedPrecondition, "cannot load NVML \"" + lib_ + "\": " + (e ? e : "unknown error"));
  }
  auto sym = [&](const char* name) {
    void* p = ::dlsym(h, name);
    if (!p) throw Error(Code::FailedPrecondition, "NVML \"" + lib_ + "\" lacks " + name);
    return p;
  };
  auto init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
  auto shutdown = reinterpret_cast<InitFn>(sym("nvmlShutdown"));
  auto count_fn = reinterpret_cast<CountFn>(sym("nvmlDeviceGetCount_v2"));
  auto handle_fn = reinterpret_cast<HandleFn>(sym("nvmlDeviceGetHandleByIndex_v2"));
  auto procs_fn = reinterpret_cast<ProcsFn>(sym("nvmlDeviceGetComputeRunningProcesses_v3"));
  auto uuid_fn = reinterpret_cast<UuidFn>(sym("nvmlDeviceGetUUID"));
  auto errstr = reinterpret_cast<ErrStrFn>(::dlsym(h, "nvmlErrorString"));
  auto fail = [&](const std::string& what, int rc) {
    return Error(Code::FailedPrecondition,
                 "NVML " + what + " failed: " + (errstr ? errstr(rc) : "error") + " (" + std::to_string(rc) + ")");
  };

  if (int rc = init(); rc != 0) throw fail("nvmlInit_v2", rc);
  struct Shutdown {
    InitFn fn;
    ~Shutdown() { fn(); }
  } guard{shutdown};

  unsigned n = 0;
  if (int rc = count_fn(&n); rc != 0) throw fail("nvmlDeviceGetCount_v2", rc);
  std::map<pid_t, std::set<std::string>> out;
  for (unsigned i = 0; i < n; ++i) {
    void* dev = nullptr;
    if (int rc = handle_fn(i, &dev); rc != 0) throw fail("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) + ")", rc);
    char uuid[96] = {};
    if (int rc = uuid_fn(dev, uuid, sizeof uuid); rc != 0) throw fail("nvmlDeviceGetUUID(" + std::to_string(i) + ")", rc);
    std::vector<ProcessInfo> infos(16);
    for (int attempt = 0;; ++attempt) {
      unsigned cnt = static_cast<unsigned>(infos.size());
      int rc = procs_fn(dev, &cnt, infos.data());
      if (rc == kNvmlInsufficientSize && attempt < 4) {
        infos.resize(cnt + 16);  // processes may start between the two calls
        continue;
      }
      if (rc != 0) throw fail("nvmlDeviceGetComputeRunningProcesses_v3(" + std::to_string(i) + ")", rc);
      for (unsigned k = 0; k < cnt; ++k) out[static_cast<pid_t>(infos[k].pid)].insert(uuid);
      break;
    }
  }
  return out;
}

}  // namespace nvproxy::checkpoint
