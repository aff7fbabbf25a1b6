#include "checkpoint/staging/restore_staging.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "checkpoint/facts/gpu_facts.h"
#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

std::uint64_t image_page_bytes(const fs::path& image) {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(image, ec)) {
    std::string name = e.path().filename().string();
    if ((name.rfind("pages-", 0) == 0 && e.path().extension() == ".img") || name == "pages.img") total += e.file_size(ec);
  }
  return total;
}

RestoreStaging::RestoreStaging(const RestoreStagingInput& in, MemoryProbe& probe, HostReservations* reservations, Logger& log) {
  const std::string who = "restore of \"" + in.container + "\"";
  StagingBill bill;
  bill.margin = in.margin;
  if (in.record && in.record->gpu)
    for (const auto& p : in.record->gpu->processes)
      for (const auto& u : p.gpus) bill.staged[p.id.pid] += u.used_bytes.value_or(0);
  // A sandbox's image: the sentry's memory it restores holds the staging of every process.
  if (in.record && !in.record->gpu && in.record->sandbox_device_bytes > 0) {
    bill.staged[StagingBill::kSandboxToCome] = in.record->sandbox_device_bytes;
    bill.in_sandbox = true;
  }
  std::uint64_t pages = image_page_bytes(in.image);
  // A sandbox's memory file may live inside runsc's state file, compressed: what its cgroup held at
  // the checkpoint, staging included, is what the new sentry will hold.
  if (bill.in_sandbox) pages = std::max(pages, in.record->sandbox_memory_bytes);
  bill.resident = pages > bill.total() ? pages - bill.total() : 0;

  spec_ = in.bundle / "config.json";
  std::string spec_text;
  nlohmann::json spec;
  try {
    spec_text = read_file(spec_);
    spec = nlohmann::json::parse(spec_text);
  } catch (const std::exception& e) {
    if (bill.total() > 0) throw Error(Code::InvalidArgument, who + ": " + spec_.string() + " cannot be read: " + e.what());
    return;  // nothing to bill, and the runtime will say what is wrong with the spec
  }
  fs::path dir;
  std::string file;
  const std::string cgroups_path = spec.value("/linux/cgroupsPath"_json_pointer, std::string());
  std::optional<std::int64_t> own_limit, own_swap;
  try {
    if (!cgroups_path.empty()) bill.limits = probe.limits_above(cgroups_path, dir, file);
    bill.host_available = probe.host_available();
  } catch (const std::exception& e) {
    if (bill.total() > 0)
      log.warn(who + ": the memory limits over the container or the host's memory cannot be read (" + e.what() +
               "): the driver's staging of " + format_bytes(bill.total()) + " is not billed");
    return;
  }
  // The OOM counts, billed or not: a restore the kernel kills says so first. The container's own
  // cgroup counts from 0 once the runtime made it; its ancestors' (a pod's) from now.
  probe_ = &probe;
  sandbox_ = in.record && (in.record->runtime == "runsc" || !in.record->sandbox.empty());
  // Every ancestor, nearest first: those with a limit (a pod's) count the kills at it, and under
  // cgroup v2 each counts its subtree's, the container's own included once that is gone.
  std::vector<fs::path> above;
  for (fs::path p = dir.parent_path(); !p.empty() && p != p.root_path() && above.size() < 16; p = p.parent_path())
    above.push_back(p);
  oom_ = oom_baseline(probe, dir, above);
  if (bill.total() == 0) {  // nothing staged: the restore is the container's own business
    billed_ = "nothing: the image records no staged device memory";
    return;
  }
  if (std::string w = bill_reservations(bill, reservations, in.container); !w.empty()) log.warn(who + ": " + w);
  const auto limit_ptr = "/linux/resources/memory/limit"_json_pointer, swap_ptr = "/linux/resources/memory/swap"_json_pointer;
  if (spec.contains(limit_ptr) && spec[limit_ptr].is_number() && spec[limit_ptr].get<std::int64_t>() > 0) {
    own_limit = spec[limit_ptr].get<std::int64_t>();
    if (spec.contains(swap_ptr) && spec[swap_ptr].is_number() && spec[swap_ptr].get<std::int64_t>() > 0)
      own_swap = spec[swap_ptr].get<std::int64_t>();
    // The cgroup is new: nothing is charged there before CRIU writes the pages.
    bill.limits.insert(bill.limits.begin(),
                       MemoryLimit{.cgroup = dir, .file = file, .limit = static_cast<std::uint64_t>(*own_limit)});
  }
  StagingPlan plan = plan_staging(bill, in.mode, "restore");
  if (plan.refused) {
    log.warn(who + " refused: " + plan.reason);
    throw Error(Code::FailedPrecondition, who + " refused: " + plan.reason);
  }
  bool edited = false;
  for (auto& c : plan.lifts) {
    if (c.cgroup != dir || dir.empty() || !own_limit) continue;
    c.preset = edited = true;
    spec[limit_ptr] = static_cast<std::int64_t>(c.to);
    if (own_swap) spec[swap_ptr] = *own_swap + static_cast<std::int64_t>(c.to - c.from);
  }
  if (edited) {
    spec_text_ = spec_text;
    write_file_atomic(spec_, spec.dump(), 0644);
  }
  try {
    hold_ = hold_staging(plan, bill, {.probe = &probe, .reservations = reservations, .record = in.bundle / kLiftRecordFile},
                         in.container, "restore", log);
  } catch (...) {
    spec_back();
    throw;
  }
  billed_ = format_bytes(bill.need()) + " (" + staged_text(bill.staged, bill.in_sandbox) + ", " + format_bytes(bill.resident) +
            " of restored memory besides, a margin of " + format_bytes(bill.margin) + ")";
  for (const auto& c : plan.lifts)
    billed_ += "; " + c.file.string() + " lifted " + format_bytes(c.from) + " -> " + format_bytes(c.to);
}

std::string RestoreStaging::oom_cause_now() const {
  if (!probe_) return "";
  std::string cause = oom_cause(*probe_, oom_);
  if (cause.empty()) return "";
  return std::string(sandbox_ ? "the sandbox was OOM-killed during its restore: " : "the restore was OOM-killed: ") + cause +
         "; the restore was billed " + billed_;
}

void RestoreStaging::spec_back() noexcept {
  if (spec_text_.empty()) return;
  try {
    write_file_atomic(spec_, spec_text_, 0644);
  } catch (const std::exception&) {
    // The spec's lifted limit stays on disk; the cgroup's own goes back with the lift.
  }
  spec_text_.clear();
}

}  // namespace nvproxy::checkpoint
