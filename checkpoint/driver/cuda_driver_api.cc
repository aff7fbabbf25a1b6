#include "checkpoint/driver/cuda_driver_api.h"

#include <dlfcn.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

namespace {
// Layouts from cuda.h (12.x). Every args struct is 64 bytes, zeroed: that is what the verified
// reference passes. CUDA 12.8's restore args put a GPU-remap pointer+count in the first bytes;
// zero means "no remapping".
struct LockArgs {
  unsigned int timeoutMs;
  unsigned int reserved0;
  std::uint64_t reserved1[7];
};
struct Args64 {
  std::uint64_t reserved[8];
};
struct GpuPairArg {  // CUcheckpointGpuPair: two CUuuid
  unsigned char from[16];
  unsigned char to[16];
};
struct RestoreArgs {  // CUcheckpointRestoreArgs (R580)
  GpuPairArg* gpuPairs;
  unsigned int gpuPairsCount;
  char reserved[52 - sizeof(void*)];  // 52 - sizeof(CUcheckpointGpuPair*)
  std::uint64_t reserved1;
};
static_assert(sizeof(LockArgs) == 64 && sizeof(Args64) == 64 && sizeof(RestoreArgs) == 64 && sizeof(GpuPairArg) == 32);

// "GPU-79f8d0a3-1c4e-..." -> the 16 bytes of its UUID.
bool parse_gpu_uuid(const std::string& s, unsigned char out[16]) {
  if (!s.starts_with("GPU-")) return false;
  int n = 0;
  for (size_t i = 4; i < s.size(); ++i) {
    char c = s[i];
    if (c == '-') continue;
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (v < 0 || n >= 32) return false;
    if (n % 2 == 0)
      out[n / 2] = static_cast<unsigned char>(v << 4);
    else
      out[n / 2] = static_cast<unsigned char>(out[n / 2] | v);
    ++n;
  }
  return n == 32;
}

using GetStateFn = int (*)(int, int*);
using LockFn = int (*)(int, LockArgs*);
using ArgsFn = int (*)(int, Args64*);
using TidFn = int (*)(int, int*);
using VersionFn = int (*)(int*);
using ErrNameFn = int (*)(int, const char**);
}  // namespace

struct DriverApiToggler::Api {
  void* handle = nullptr;
  GetStateFn get_state = nullptr;
  LockFn lock = nullptr;
  ArgsFn checkpoint = nullptr, restore = nullptr, unlock = nullptr;
  TidFn restore_tid = nullptr;  // optional: only newer drivers
  VersionFn version = nullptr;
  ErrNameFn error_name = nullptr;
};

DriverApiToggler::DriverApiToggler(std::string libcuda) : lib_(std::move(libcuda)) {}

DriverApiToggler::~DriverApiToggler() {
  // The handle stays loaded: libcuda does not support being unloaded while its threads may run.
}

const DriverApiToggler::Api& DriverApiToggler::api() {
  std::call_once(once_, [this] {
    void* h = ::dlopen(lib_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      load_error_ = "cannot load the CUDA driver library \"" + lib_ + "\": " + (e ? e : "unknown error") +
                    " (is the NVIDIA driver installed, and checkpoint.libcuda right?)";
      return;
    }
    auto a = std::make_unique<Api>();
    a->handle = h;
    auto sym = [&](const char* name) { return ::dlsym(h, name); };
    a->version = reinterpret_cast<VersionFn>(sym("cuDriverGetVersion"));
    a->error_name = reinterpret_cast<ErrNameFn>(sym("cuGetErrorName"));
    a->get_state = reinterpret_cast<GetStateFn>(sym("cuCheckpointProcessGetState"));
    a->lock = reinterpret_cast<LockFn>(sym("cuCheckpointProcessLock"));
    a->checkpoint = reinterpret_cast<ArgsFn>(sym("cuCheckpointProcessCheckpoint"));
    a->restore = reinterpret_cast<ArgsFn>(sym("cuCheckpointProcessRestore"));
    a->unlock = reinterpret_cast<ArgsFn>(sym("cuCheckpointProcessUnlock"));
    a->restore_tid = reinterpret_cast<TidFn>(sym("cuCheckpointProcessGetRestoreThreadId"));
    std::string missing;
    const std::pair<const char*, const void*> required[] = {
        {"cuDriverGetVersion", reinterpret_cast<const void*>(a->version)},
        {"cuCheckpointProcessGetState", reinterpret_cast<const void*>(a->get_state)},
        {"cuCheckpointProcessLock", reinterpret_cast<const void*>(a->lock)},
        {"cuCheckpointProcessCheckpoint", reinterpret_cast<const void*>(a->checkpoint)},
        {"cuCheckpointProcessRestore", reinterpret_cast<const void*>(a->restore)},
        {"cuCheckpointProcessUnlock", reinterpret_cast<const void*>(a->unlock)}};
    for (const auto& [name, ptr] : required)
      if (!ptr) missing += std::string(missing.empty() ? "" : ", ") + name;
    if (!missing.empty()) {
      int v = 0;
      if (a->version) a->version(&v);
      load_error_ = "the CUDA driver library \"" + lib_ + "\" (driver API " + std::to_string(v / 1000) + "." +
                    std::to_string(v % 1000 / 10) + ") lacks " + missing + ": CUDA checkpointing needs driver 550 or newer";
      return;  // handle stays loaded; harmless
    }
    api_ = std::move(a);
  });
  if (!api_) throw Error(Code::FailedPrecondition, load_error_);
  return *api_;
}

void DriverApiToggler::check(int rc, pid_t pid, const char* op) {
  if (rc == 0) return;
  const char* name = nullptr;
  if (api_->error_name && api_->error_name(rc, &name) != 0) name = nullptr;
  throw CudaError(pid, op, rc, name ? name : "CUDA_ERROR_" + std::to_string(rc));
}

std::string DriverApiToggler::describe() {
  return "CUDA driver API (" + lib_ + ")";
}

int DriverApiToggler::driver_version() {
  int v = 0;
  const Api& a = api();
  if (int rc = a.version(&v); rc != 0) throw Error(Code::FailedPrecondition, "cuDriverGetVersion failed: " + std::to_string(rc));
  return v;
}

std::optional<int> DriverApiToggler::restore_thread_id(pid_t pid) {
  const Api& a = api();
  if (!a.restore_tid) return std::nullopt;
  int tid = 0;
  check(a.restore_tid(pid, &tid), pid, "get-restore-tid");
  return tid;
}

CudaState DriverApiToggler::get_state(pid_t pid) {
  const Api& a = api();
  int s = -1;
  check(a.get_state(pid, &s), pid, "get-state");
  if (s < 0 || s > 3) throw CudaError(pid, "get-state", -1, "unknown state", std::to_string(s));
  return static_cast<CudaState>(s);
}

void DriverApiToggler::lock(pid_t pid, unsigned timeout_ms) {
  const Api& a = api();
  LockArgs args{};
  args.timeoutMs = timeout_ms;
  check(a.lock(pid, &args), pid, "lock");
}

void DriverApiToggler::checkpoint(pid_t pid) {
  const Api& a = api();
  Args64 args{};
  check(a.checkpoint(pid, &args), pid, "checkpoint");
}

void DriverApiToggler::restore(pid_t pid, const DeviceMap& map) {
  if (map.empty()) {
    const Api& a = api();
    Args64 args{};
    check(a.restore(pid, &args), pid, "restore");
    return;
  }
  std::vector<GpuPairArg> pairs(map.size());
  for (size_t i = 0; i < map.size(); ++i) {
    if (!parse_gpu_uuid(map[i].from, pairs[i].from) || !parse_gpu_uuid(map[i].to, pairs[i].to))
      throw Error(Code::InvalidArgument, "CUDA restore of pid " + std::to_string(pid) + " onto other GPUs: \"" + map[i].from +
                                             "=" + map[i].to + "\" is not a pair of GPU UUIDs");
  }
  const Api& a = api();
  RestoreArgs args{};
  args.gpuPairs = pairs.data();
  args.gpuPairsCount = static_cast<unsigned>(pairs.size());
  check(a.restore(pid, reinterpret_cast<Args64*>(&args)), pid, "restore");
}

void DriverApiToggler::unlock(pid_t pid) {
  const Api& a = api();
  Args64 args{};
  check(a.unlock(pid, &args), pid, "unlock");
}

}  // namespace nvproxy::checkpoint
