// The driver, its checkpoint API and the GPUs.
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string_view>

#include "checkpoint/facts/gpu_facts.h"
#include "common/unique_fd.h"
#include "common/version.h"
#include "gpu/discovery.h"
#include "shim/node/doctor.h"
#include "shim/node/probe.h"

namespace nvproxy::node {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kCheckpointApi = {"cuCheckpointProcessGetState", "cuCheckpointProcessLock",
                                                 "cuCheckpointProcessCheckpoint", "cuCheckpointProcessRestore",
                                                 "cuCheckpointProcessUnlock"};

// The dynamic string table of a mapped ELF64 file; the whole file where it has no section headers.
std::string_view dynstr(const char* base, std::size_t size) {
  std::string_view all(base, size);
  if (size < sizeof(Elf64_Ehdr) || std::memcmp(base, ELFMAG, SELFMAG) != 0 || base[EI_CLASS] != ELFCLASS64) return all;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
  if (eh->e_shoff == 0 || eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff + eh->e_shnum * sizeof(Elf64_Shdr) > size)
    return all;
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
  for (unsigned i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr& s = sh[sh[i].sh_link];
    if (s.sh_offset + s.sh_size <= size) return {base + s.sh_offset, s.sh_size};
  }
  return all;
}

// Where the dynamic loader would find `name` (a bare soname): the loader's cache through
// `ldconfig -p`, then the usual library directories.
fs::path find_library(DoctorContext& ctx, const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  ProbeResult p = probe(ctx.runner, {"ldconfig", "-p"});
  if (p.ok()) {
    std::istringstream is(p.out);
    // "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1"
    for (std::string line; std::getline(is, line);) {
      std::istringstream ls(line);
      std::string soname;
      ls >> soname;
      const auto arrow = line.find(" => ");
      if (soname == name && arrow != std::string::npos) return line.substr(arrow + 4);
    }
  }
  for (const char* d : {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib", "/lib/x86_64-linux-gnu"}) {
    fs::path c = fs::path(d) / name;
    if (fs::exists(c)) return c;
  }
  return {};
}

// "580.159.04" -> 580; 0 when it has no number.
int driver_branch(const std::string& version) {
  const auto v = parse_version(version);
  return v ? v->major : 0;
}

}  // namespace

std::vector<std::string> missing_symbols(const fs::path& lib, const std::vector<std::string>& symbols) {
  UniqueFd fd(::open(lib.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return symbols;
  const auto size = static_cast<std::size_t>(st.st_size);
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (m == MAP_FAILED) return symbols;
  const std::string_view strs = dynstr(static_cast<const char*>(m), size);
  std::vector<std::string> missing;
  for (const auto& s : symbols) {
    const std::string needle = std::string(1, '\0') + s + std::string(1, '\0');
    if (strs.find(needle) == std::string_view::npos) missing.push_back(s);
  }
  ::munmap(m, size);
  return missing;
}

GpuFacts gpu_facts(DoctorContext& ctx) {
  GpuFacts f;
  f.driver_version = gpu::read_driver_version(ctx.cfg.gpu.proc_driver_root);
  for (const auto& g : gpu::read_host_gpus(ctx.cfg.gpu.proc_driver_root, "/dev"))
    f.gpus.push_back({.name = "", .uuid = g.uuid.empty() ? "nvidia" + std::to_string(g.minor) : g.uuid});
  if (f.driver_version.empty()) return f;
  // Names and memory from nvidia-smi, where it is: the static shim does not load NVML itself.
  ProbeResult p = probe(ctx.runner, {"nvidia-smi", "--query-gpu=uuid,name,memory.total", "--format=csv,noheader,nounits"});
  if (!p.ok()) return f;
  std::istringstream is(p.out);
  for (std::string line; std::getline(is, line);) {
    std::vector<std::string> cols;
    std::istringstream ls(line);
    for (std::string c; std::getline(ls, c, ',');)
      cols.push_back(c.substr(c.find_first_not_of(' ') == std::string::npos ? 0 : c.find_first_not_of(' ')));
    if (cols.size() < 3) continue;
    GpuInfo info{.name = cols[1], .uuid = cols[0], .memory_bytes = std::strtoull(cols[2].c_str(), nullptr, 10) << 20};
    auto it = std::find_if(f.gpus.begin(), f.gpus.end(), [&](const GpuInfo& g) { return g.uuid == info.uuid; });
    if (it != f.gpus.end()) {
      *it = info;
    } else {
      f.gpus.push_back(info);
    }
  }
  return f;
}

std::uint64_t GpuFacts::largest() const {
  std::uint64_t m = 0;
  for (const auto& g : gpus) m = std::max(m, g.memory_bytes);
  return m;
}

std::uint64_t GpuFacts::total() const {
  std::uint64_t t = 0;
  for (const auto& g : gpus) t += g.memory_bytes;
  return t;
}

void gpu_checks(DoctorContext& ctx, const GpuFacts& facts, std::vector<Check>& out) {
  const std::string& proc = ctx.cfg.gpu.proc_driver_root;
  Check drv{.name = "nvidia driver"};
  if (facts.driver_version.empty()) {
    drv.status = Status::Fail;
    drv.detail = "no NVIDIA driver (" + proc + "/version is absent)";
    drv.remedy = "install the NVIDIA driver (R570 or later for checkpoint.cuda: driver-api)";
  } else {
    const int branch = driver_branch(facts.driver_version);
    drv.detail = "driver " + facts.driver_version;
    const bool api = ctx.cfg.checkpoint.cuda == "driver-api";
    if (branch < (api ? 570 : 550)) {
      drv.status = Status::Fail;
      drv.remedy = api ? "the driver API's checkpoint calls need R570 or later (CUDA 12.8); upgrade the driver"
                       : "cuda-checkpoint needs R550 or later; upgrade the driver";
    } else if (branch < 580) {
      drv.status = Status::Warn;
      drv.detail += ": checkpoints work; a restore onto other GPUs (device map) needs R580";
      drv.remedy = "upgrade to R580 or later to restore onto other GPUs than the checkpointed ones";
    } else {
      drv.detail += " (checkpoint API, device map on restore)";
    }
  }
  out.push_back(drv);

  Check lib{.name = "libcuda checkpoint API"};
  if (ctx.cfg.checkpoint.cuda == "cuda-checkpoint") {
    const std::string prog = find_program(ctx.cfg.checkpoint.cuda_checkpoint_path);
    lib.name = "cuda-checkpoint";
    if (prog.empty()) {
      lib.status = Status::Fail;
      lib.detail = ctx.cfg.checkpoint.cuda_checkpoint_path + " not found (checkpoint.cuda: cuda-checkpoint)";
      lib.remedy = "install NVIDIA's cuda-checkpoint, or set checkpoint.cuda: driver-api";
    } else {
      lib.detail = prog;
    }
  } else if (ctx.cfg.checkpoint.cuda == "none") {
    lib.status = Status::Fail;
    lib.detail = "checkpoint.cuda: none: CUDA processes are not checkpointed";
    lib.remedy = "set checkpoint.cuda: driver-api in " + ctx.cfg.source;
  } else {
    const fs::path path = find_library(ctx, ctx.cfg.checkpoint.libcuda);
    if (path.empty() || !fs::exists(path)) {
      lib.status = Status::Fail;
      lib.detail = ctx.cfg.checkpoint.libcuda + " not found";
      lib.remedy = "install the NVIDIA driver's libcuda, or name it in checkpoint.libcuda";
    } else if (auto miss = missing_symbols(path, kCheckpointApi); !miss.empty()) {
      lib.status = Status::Fail;
      lib.detail =
          path.string() + " lacks " + miss.front() + (miss.size() > 1 ? " and " + std::to_string(miss.size() - 1) + " more" : "");
      lib.remedy = "a driver of R570 or later has cuCheckpointProcess*; or use checkpoint.cuda: cuda-checkpoint (R550)";
    } else {
      lib.detail = path.string() + " has cuCheckpointProcess*";
    }
  }
  out.push_back(lib);

  Check gpus{.name = "gpus"};
  if (facts.gpus.empty()) {
    gpus.status = Status::Fail;
    gpus.detail = "no GPU found (" + proc + "/gpus, /dev/nvidia*)";
    gpus.remedy = "a GPU checkpoint needs an NVIDIA GPU with its driver loaded";
  } else {
    bool unknown = false;
    for (std::size_t i = 0; i < facts.gpus.size(); ++i) {
      const auto& g = facts.gpus[i];
      gpus.detail += (i ? "; " : "") + (g.name.empty() ? std::string("GPU") : g.name) + " " + g.uuid;
      if (g.memory_bytes) {
        gpus.detail += " " + checkpoint::format_bytes(g.memory_bytes);
      } else {
        unknown = true;
      }
    }
    if (unknown) {
      gpus.status = Status::Warn;
      gpus.detail += " (memory unknown: no nvidia-smi)";
      gpus.remedy = "install nvidia-smi for the memory checks below";
      gpus.needed = false;
    }
  }
  out.push_back(gpus);

  if (ctx.cfg.runtime.binary.find("runsc") != std::string::npos && !facts.driver_version.empty()) {
    Check nv{.name = "runsc nvproxy"};
    ProbeResult p = probe(ctx.runner, {ctx.cfg.runtime.binary, "nvproxy", "list-supported-drivers"});
    if (!p.ok()) {
      nv.status = Status::Warn;
      nv.needed = false;
      nv.detail = "cannot ask runsc which drivers its nvproxy supports (" + p.problem + ")";
      nv.remedy = "use a runsc release with `runsc nvproxy list-supported-drivers`";
    } else if (p.out.find(facts.driver_version) == std::string::npos) {
      nv.status = Status::Fail;
      nv.detail = "runsc's nvproxy does not list driver " + facts.driver_version;
      nv.remedy = "use a runsc release that supports this driver, or a driver it lists";
    } else {
      nv.detail = "runsc's nvproxy supports driver " + facts.driver_version;
    }
    out.push_back(nv);
  }
}

}  // namespace nvproxy::node
