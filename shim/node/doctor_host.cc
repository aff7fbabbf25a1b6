// The kernel and the host's memory and disk against what a GPU checkpoint stages and writes.
#include <sys/statvfs.h>

#include <fstream>

#include "checkpoint/facts/gpu_facts.h"
#include "shim/node/doctor.h"

namespace nvproxy::node {

namespace fs = std::filesystem;

namespace {

std::string first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string l;
  std::getline(in, l);
  return l;
}

// A /proc/meminfo field in bytes; 0 when absent.
std::uint64_t meminfo(const fs::path& proc, const std::string& key) {
  std::ifstream in(proc / "meminfo");
  for (std::string k; in >> k;) {
    std::uint64_t kib = 0;
    in >> kib;
    in.ignore(256, '\n');
    if (k == key + ":") return kib << 10;
  }
  return 0;
}

void cgroup_check(DoctorContext& ctx, std::vector<Check>& out) {
  Check c{.name = "cgroups", .needed = false};
  const fs::path root = ctx.sys / "fs/cgroup";
  if (fs::exists(root / "cgroup.controllers")) {
    const std::string ctl = first_line(root / "cgroup.controllers");
    c.detail = "v2, controllers: " + ctl;
    if ((" " + ctl + " ").find(" memory ") == std::string::npos) {
      c.status = Status::Warn;
      c.remedy = "enable the memory controller: the shim bills the staging of device memory against memory limits";
    }
  } else if (fs::exists(root / "memory")) {
    c.detail = "v1";
  } else {
    c.status = Status::Warn;
    c.detail = "no cgroup hierarchy at " + root.string();
    c.remedy = "mount cgroup2 at /sys/fs/cgroup";
  }
  out.push_back(c);
}

void thp_check(DoctorContext& ctx, const GpuFacts& gpus, std::vector<Check>& out) {
  Check c{.name = "transparent huge pages", .needed = false};
  const std::string mode = first_line(ctx.sys / "kernel/mm/transparent_hugepage/enabled");
  const auto open = mode.find('['), close = mode.find(']');
  const std::string cur = open != std::string::npos && close > open ? mode.substr(open + 1, close - open - 1) : mode;
  c.detail = cur.empty() ? "unknown" : cur;
  if (gpus.gpus.empty()) {
    c.detail += " (no GPU here: nothing is staged)";
  } else if (cur != "always") {
    c.status = Status::Warn;
    c.detail +=
        ": the driver stages device memory in 4 KiB pages (checkpoint 1.35x, restore 2x slower than with always, "
        "measured on an H200)";
    c.remedy =
        "echo always > /sys/kernel/mm/transparent_hugepage/enabled (or transparent_hugepage=always on the kernel command line)";
  }
  out.push_back(c);
}

void dirty_check(DoctorContext& ctx, const GpuFacts& gpus, std::vector<Check>& out) {
  Check c{.name = "vm.dirty", .needed = false};
  const std::uint64_t bytes = std::strtoull(first_line(ctx.proc / "sys/vm/dirty_bytes").c_str(), nullptr, 10);
  const std::uint64_t ratio = std::strtoull(first_line(ctx.proc / "sys/vm/dirty_ratio").c_str(), nullptr, 10);
  // The kernel's threshold is a share of reclaimable memory; MemAvailable is near it.
  const std::uint64_t threshold = bytes ? bytes : meminfo(ctx.proc, "MemAvailable") / 100 * ratio;
  c.detail = (bytes ? "vm.dirty_bytes " + checkpoint::format_bytes(bytes)
                    : "vm.dirty_ratio " + std::to_string(ratio) + " (about " + checkpoint::format_bytes(threshold) + ")");
  if (const std::uint64_t big = gpus.largest(); big && threshold < big) {
    c.status = Status::Warn;
    c.detail += ", below the largest GPU's memory (" + checkpoint::format_bytes(big) + "): a full GPU's image waits for the disk";
    c.remedy = "sysctl vm.dirty_bytes=" + std::to_string(big + (big >> 2)) +
               " (the images written at once, with the memory to hold them)";
  }
  out.push_back(c);
}

void ram_check(DoctorContext& ctx, const GpuFacts& gpus, std::vector<Check>& out) {
  Check c{.name = "host memory", .needed = false};
  const std::uint64_t total = meminfo(ctx.proc, "MemTotal"), avail = meminfo(ctx.proc, "MemAvailable");
  c.detail = checkpoint::format_bytes(total) + " (" + checkpoint::format_bytes(avail) + " available)";
  if (const std::uint64_t gpu = gpus.total(); gpu) {
    c.detail += " against " + checkpoint::format_bytes(gpu) + " of GPU memory";
    if (total < gpus.largest()) {
      c.status = Status::Fail;
      c.needed = true;
      c.detail += ": a full GPU's device memory cannot be staged in host memory";
      c.remedy = "a checkpoint stages the device memory in host memory: more RAM, or checkpoint smaller GPU containers";
    } else if (total < gpu) {
      c.status = Status::Warn;
      c.detail += ": not every GPU's memory can be staged at once";
      c.remedy = "checkpoint GPU containers one at a time; the shim refuses a checkpoint without room";
    }
  }
  out.push_back(c);
}

void disk_check(const std::string& what, const fs::path& dir, const GpuFacts& gpus, std::vector<Check>& out) {
  Check c{.name = what};
  fs::path at = dir;
  while (!at.empty() && !fs::exists(at) && at != at.parent_path()) at = at.parent_path();  // the store may not exist yet
  struct statvfs st {};
  if (::statvfs(at.c_str(), &st) != 0) {
    c.status = Status::Warn;
    c.needed = false;
    c.detail = "cannot stat " + dir.string();
    out.push_back(c);
    return;
  }
  const std::uint64_t free = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
  // An image holds the GPU's used memory and the processes' own: the largest GPU, or 1 GiB
  // (a small CUDA process) where the memory is unknown.
  const std::uint64_t need = gpus.largest() ? gpus.largest() : (1ull << 30);
  c.detail = dir.string() + ": " + checkpoint::format_bytes(free) + " free";
  if (free < need) {
    c.status = Status::Fail;
    c.detail += ", less than " + checkpoint::format_bytes(need) +
                (gpus.largest() ? " (the largest GPU's memory)" : " (a small CUDA process's image)");
    c.remedy = "free space at " + dir.string() + " or point checkpoint.image_store at a larger filesystem";
  }
  out.push_back(c);
}

void io_uring_check(DoctorContext& ctx, std::vector<Check>& out) {
  Check c{.name = "io_uring", .needed = false};
  const std::string v = first_line(ctx.proc / "sys/kernel/io_uring_disabled");
  c.detail = v.empty() ? "kernel.io_uring_disabled absent (allowed)" : "kernel.io_uring_disabled = " + v;
  // Informational: CRIU has no dumper for io_uring, and the shim refuses a process holding one
  // before any toggle, naming it; nothing to fix on the node.
  if (v.empty() || v == "0") c.detail += ": a process holding an io_uring instance (libuv makes one) is refused at checkpoint";
  // containerd 2.0 took io_uring_setup/enter/register out of its RuntimeDefault seccomp profile
  // (Docker 25 out of its default); 1.x allows them.
  if (ctx.containerd)
    c.detail += *ctx.containerd >= Version{2, 0, 0}
                    ? "; containerd's RuntimeDefault seccomp profile denies io_uring, so its containers cannot make one"
                    : "; containerd 1.x's RuntimeDefault seccomp profile allows io_uring";
  out.push_back(c);
}

}  // namespace

void host_checks(DoctorContext& ctx, const GpuFacts& gpus, std::vector<Check>& out) {
  cgroup_check(ctx, out);
  io_uring_check(ctx, out);
  thp_check(ctx, gpus, out);
  dirty_check(ctx, gpus, out);
  ram_check(ctx, gpus, out);
  if (!ctx.cfg.checkpoint.image_store.empty()) disk_check("image store", ctx.cfg.checkpoint.image_store, gpus, out);
  disk_check("containerd's store", ctx.cfg.checkpoint.content_store, gpus, out);
}

}  // namespace nvproxy::node
