// Does the checkpoint fit? Asked before any CUDA process is toggled: a checkpoint that runs out of
// disk fails only after the toggles and a long dump (a 49 GiB process filled a 64 GiB disk after
// 130 s), so it is refused up front with the numbers.
//
// Where the dump leaves zero pages out (CRIU with --skip-zero-pages, runsc), an image that does not
// fit as allocated is counted again once the driver has staged device memory in host memory: what
// will be written is the processes' memory less its zero pages (zero_count.h). Only then is it
// refused, with CUDA rolled back (a preallocated pool: 20 GiB allocated, 1 GiB written).
//
// The image holds what CRIU dumps of each process (its anonymous and shared memory; file pages are
// not dumped) plus, for a CUDA process, its device memory, which the driver's checkpoint moves into
// the process's host memory. The runtime writes the image where the client asked (`--image-path`)
// or, when no path was given, into a temporary directory of containerd's ("ctrd-checkpoint*"; 1.6:
// "ctd-checkpoint*"), which
// containerd then copies into its content store: twice the space, on one filesystem or two.
// containerd 1.7 passes a client's `--image-path` on only for runtimes named io.containerd.runc.*:
// for ours it uses its temporary directory and copies all the same (seen on the H200).
//
// The time it takes: the runtime's writes land in the page cache until the kernel's dirty-page
// threshold (vm.dirty_bytes or vm.dirty_ratio of reclaimable memory) is reached; beyond it every
// writer waits on writeback at the disk's rate. An image larger than that threshold is therefore
// dumped at the disk's speed, and several checkpoints at once share it (measured on the H200: three
// 12 GiB checkpoints at once 1.5x the rate of one under the default ratio, 2.5x with the threshold
// above their images). The check says so, as a warning, when the image alone exceeds it.
//
// The driver's checkpoint stages device memory in the process's anonymous memory, and its restore
// reads it back from there (pages the dump left out as zeros are faulted in then). With transparent
// huge pages "always" the kernel backs that memory with 2 MiB pages; under "madvise" (Debian's and
// Ubuntu's default) with 4 KiB ones. Measured on an H200 (1 GiB written + a 20 GiB pool): the
// driver's checkpoint 8.6-8.8 s against 11.8-12.0 s, the restore 3.7 s against 7.4-8.6 s. A host
// setting, not the shim's to change: the check names it, as a warning, when much device memory is
// staged.
//
// Header-only: the probe reads statvfs(3), statfs(2), /proc and /sys; tests hand in their own.
#pragma once

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/facts/gpu_facts.h"
#include "checkpoint/process/zero_count.h"
#include "common/error.h"

namespace nvproxy::checkpoint {

struct FsSpace {
  std::uint64_t available = 0;  // bytes an unprivileged writer may still use (f_bavail)
  std::uint64_t device = 0;     // st_dev: two paths on one filesystem share its space
  std::filesystem::path at;     // the existing directory that was asked
  bool writeback = true;        // false on tmpfs/ramfs: its pages are never written back
};

class SpaceProbe {
 public:
  virtual ~SpaceProbe() = default;
  // The filesystem that holds `dir` (or its nearest existing parent). Throws Error.
  virtual FsSpace space(const std::filesystem::path& dir) = 0;
  // What CRIU dumps of the process: RssAnon + RssShmem + VmSwap of /proc/PID/status; 0 when gone.
  virtual std::uint64_t process_bytes(pid_t pid) = 0;
  // The kernel's dirty-page threshold now, in bytes (0: unknown).
  virtual std::uint64_t dirty_threshold() { return 0; }
  // The host's transparent huge page mode ("always", "madvise", "never"); empty when unknown.
  virtual std::string huge_pages() { return ""; }
  // Bytes of the process's memory that hold only zeros and that a dump leaving zero pages out does
  // not write (zero_count.h). Asked with its device memory staged in host memory, the process
  // stopped. Throws Error when it cannot be told.
  virtual std::uint64_t zero_bytes(pid_t pid) {
    throw Error(Code::Unimplemented, "zero pages of pid " + std::to_string(pid) + ": not counted by this probe");
  }
};

// The bracketed word of /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise] never");
// empty when there is none.
inline std::string selected_word(const std::string& text) {
  auto open = text.find('[');
  auto close = open == std::string::npos ? open : text.find(']', open);
  if (close == std::string::npos) return "";
  return text.substr(open + 1, close - open - 1);
}

class HostSpaceProbe final : public SpaceProbe {
 public:
  explicit HostSpaceProbe(std::filesystem::path proc_root = "/proc", std::filesystem::path sys_root = "/sys")
      : proc_(std::move(proc_root)), sys_(std::move(sys_root)) {}

  FsSpace space(const std::filesystem::path& dir) override {
    std::filesystem::path p = dir.empty() ? std::filesystem::current_path() : std::filesystem::absolute(dir);
    std::error_code ec;
    while (!std::filesystem::is_directory(p, ec) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
    struct statvfs vfs {};
    struct statfs sfs {};
    struct stat st {};
    if (::statvfs(p.c_str(), &vfs) != 0 || ::statfs(p.c_str(), &sfs) != 0 || ::stat(p.c_str(), &st) != 0)
      throw sys_error("free space of " + p.string() + " (for " + dir.string() + ")");
    bool in_memory = sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC;
    return {.available = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize,
            .device = st.st_dev,
            .at = p,
            .writeback = !in_memory};
  }

  std::uint64_t dirty_threshold() override {
    std::ifstream in(proc_ / "vmstat");
    for (std::string key; in >> key;) {
      std::uint64_t pages = 0;
      in >> pages;
      if (key == "nr_dirty_threshold") return pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    }
    return 0;
  }

  std::uint64_t zero_bytes(pid_t pid) override { return count_zero_pages(pid, {.proc = proc_}).zero; }

  std::string huge_pages() override {
    std::ifstream in(sys_ / "kernel/mm/transparent_hugepage/enabled");
    std::string text;
    std::getline(in, text);
    return selected_word(text);
  }

  std::uint64_t process_bytes(pid_t pid) override {
    std::ifstream in(proc_ / std::to_string(pid) / "status");
    std::uint64_t total = 0;
    for (std::string line; std::getline(in, line);) {
      for (const char* key : {"RssAnon:", "RssShmem:", "VmSwap:"}) {
        if (line.rfind(key, 0) != 0) continue;
        total += std::strtoull(line.c_str() + std::char_traits<char>::length(key), nullptr, 10) * 1024;  // kB
      }
    }
    return total;
  }

 private:
  std::filesystem::path proc_, sys_;
};

// containerd's temporary image directory: it copies what the runtime wrote there into its content
// store afterwards (containerd's tasks service, when the client gave no image path).
// The name: "ctd-checkpoint*" (containerd 1.6), "ctrd-checkpoint*" (1.7 and 2.x).
inline bool containerd_copies_image(const std::filesystem::path& image_path) {
  std::string name = image_path.filename().string();
  return name.rfind("ctrd-checkpoint", 0) == 0 || name.rfind("ctd-checkpoint", 0) == 0;
}

struct SpaceNeed {
  std::uint64_t process_bytes = 0;    // every process of the container, CRIU's share
  std::uint64_t device_bytes = 0;     // CUDA processes' device memory (NVML)
  std::vector<pid_t> device_unknown;  // CUDA processes whose device memory NVML could not tell
  [[nodiscard]] std::uint64_t image() const { return process_bytes + device_bytes; }
};

// Device memory from which the staging's page size is worth a warning.
inline constexpr std::uint64_t kStagingHintBytes = std::uint64_t{4} << 30;

struct SpaceVerdict {
  bool fits = true;
  std::string reason;       // when it does not: the numbers
  std::string slow;         // when it fits but the dump will run at the disk's rate: why (a warning)
  std::string small_pages;  // much device memory to be staged in 4 KiB pages: the host setting (a warning)
  nlohmann::json json;      // the diagnostic's "space" object, either way
};

// `content_store`: containerd's root when it copies the image (empty: no copy).
// `path`: which way the image goes, for the report ("image store", "containerd's content store
// copy", "image path").
inline SpaceVerdict check_space(const SpaceNeed& need, const std::filesystem::path& image_dir,
                                const std::filesystem::path& content_store, SpaceProbe& probe, const std::string& path = "") {
  SpaceVerdict v;
  FsSpace img = probe.space(image_dir);
  std::uint64_t image = need.image();
  v.json = {{"path", !path.empty()           ? path
                     : content_store.empty() ? "image path"
                                             : "containerd's content store copy"},
            {"copies", content_store.empty() ? 1 : 2},
            {"image_path", image_dir.string()},
            {"image_bytes", image},
            {"process_bytes", need.process_bytes},
            {"device_bytes", need.device_bytes},
            {"image_fs_available", img.available}};
  if (!need.device_unknown.empty()) v.json["device_memory_unknown_pids"] = need.device_unknown;
  std::string what = format_bytes(image) + " (device memory " + format_bytes(need.device_bytes) + " + process memory " +
                     format_bytes(need.process_bytes) + ")";
  if (std::uint64_t dirty = probe.dirty_threshold(); dirty > 0) {
    v.json["dirty_threshold_bytes"] = dirty;
    if (img.writeback && image > dirty)
      v.slow = "the checkpoint image (" + format_bytes(image) + ") is larger than the kernel's dirty-page threshold (" +
               format_bytes(dirty) + ", nr_dirty_threshold in /proc/vmstat): the dump's writes beyond it wait on " +
               "writeback at the disk's rate; set vm.dirty_bytes above the images written at once to let the page " +
               "cache take them";
  }
  if (std::string thp = probe.huge_pages(); !thp.empty()) {
    v.json["transparent_hugepage"] = thp;
    if (thp != "always" && need.device_bytes >= kStagingHintBytes)
      v.small_pages = "the driver stages " + format_bytes(need.device_bytes) +
                      " of device memory in the processes' memory in 4 KiB pages: transparent huge pages are \"" + thp +
                      "\" on this host (/sys/kernel/mm/transparent_hugepage/enabled); with \"always\" the "
                      "driver's checkpoint and restore of it run faster (1.35x and 2x on an H200)";
  }
  auto short_of = [&](std::uint64_t needed, const FsSpace& fs) { return needed > fs.available; };
  if (content_store.empty()) {
    if (short_of(image, img)) {
      v.fits = false;
      v.reason = "the checkpoint image needs about " + what + " at " + image_dir.string() + ", but only " +
                 format_bytes(img.available) + " are free there (" + img.at.string() + ")";
    }
    return v;
  }
  FsSpace store = probe.space(content_store);
  v.json["content_store"] = content_store.string();
  v.json["content_store_available"] = store.available;
  v.json["same_filesystem"] = store.device == img.device;
  if (store.device == img.device) {
    if (short_of(2 * image, img)) {
      v.fits = false;
      v.reason = "the checkpoint image needs about " + what + " at " + image_dir.string() +
                 " and as much again when containerd copies it into its content store (" + content_store.string() +
                 ", same filesystem): " + format_bytes(2 * image) + ", but only " + format_bytes(img.available) +
                 " are free; with checkpoint.image_store the image is written once, in the store, on every path; "
                 "containerd 2.x also makes no copy with `ctr task checkpoint --image-path DIR` (containerd 1.7 "
                 "takes an image path only from runtimes named io.containerd.runc.*)";
    }
    return v;
  }
  std::vector<std::string> short_where;
  if (short_of(image, img)) short_where.push_back(format_bytes(img.available) + " free at " + image_dir.string());
  if (short_of(image, store))
    short_where.push_back(format_bytes(store.available) + " free in containerd's content store " + content_store.string());
  if (!short_where.empty()) {
    v.fits = false;
    v.reason = "the checkpoint image needs about " + what + " at " + image_dir.string() +
               " and again in containerd's content store (" + content_store.string() + "), but only ";
    for (size_t i = 0; i < short_where.size(); ++i) v.reason += (i ? " and " : "") + short_where[i];
    v.reason += "; with checkpoint.image_store the image is written once, in the store";
  }
  return v;
}

}  // namespace nvproxy::checkpoint
