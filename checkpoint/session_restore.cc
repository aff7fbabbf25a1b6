// CheckpointSession::before_restore and after_restore: the restore verb (session.h).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "checkpoint/image_record.h"
#include "checkpoint/restore_preflight.h"
#include "checkpoint/session.h"
#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace {

std::optional<ImageRecord> record_of(const std::filesystem::path& image, const std::string& who) {
  try {
    return read_image_record(image);
  } catch (const Error& e) {
    throw Error(e.code(), who + e.what());
  }
}

DeviceMap read_device_map(const std::filesystem::path& file, const std::string& who) {
  DeviceMap map;
  if (!std::filesystem::exists(file)) return map;
  auto m = nlohmann::json::parse(read_file(file), nullptr, false);
  if (!m.is_array()) throw Error(Code::Internal, who + file.string() + " is malformed");
  for (const auto& p : m) map.push_back({p.value("from", ""), p.value("to", "")});
  return map;
}

}  // namespace

bool CheckpointSession::before_restore(const std::filesystem::path& image) {
  const std::string who = "restore of \"" + t_.id + "\": ";
  std::optional<ImageRecord> rec = record_of(image, who);
  if (!rec || !rec->has_cuda()) return false;  // not our image, or no CUDA in it: nothing to check
  const bool hold = tools_.holds_still();
  if (!rec->gpu) {
    log_.info(who + "the image records no GPU facts (" +
              (!rec->gpu_error.empty() ? "not taken at checkpoint: " + rec->gpu_error
                                       : std::string("written by shim 0.2.0 or earlier")) +
              "); restoring without checking this host's GPUs");
    return hold;
  }
  const GpuRecord& gpu = *rec->gpu;
  if (gpu.processes.empty()) return hold;

  std::error_code ec;
  std::filesystem::remove(t_.bundle / kDeviceMapFile, ec);  // one of an earlier restore would mislead
  std::optional<GpuHostFacts> host;
  RestoreCheck check;
  std::string host_error;
  try {
    GpuUsageProbe* probe = tools_.host_facts();
    if (!probe) throw Error(Code::FailedPrecondition, "this runtime's sandbox cannot see the host's GPUs");
    host = probe->host_facts();
    std::vector<std::string> unknown;
    auto visible = visible_gpus(t_.requested_gpus, *host, unknown);
    for (const auto& u : unknown) log_.warn(who + "the container asks for GPU \"" + u + "\", which this host does not have");
    check = check_restore(gpu, *host, visible);
  } catch (const Error& e) {
    host_error = e.what();
    check.refusals.push_back(nvml_unavailable(gpu, host_error));
  }
  for (const auto& w : check.warnings) log_.warn(who + w);
  auto diag_path = t_.bundle / kDiagnosticFile;
  std::filesystem::remove(diag_path, ec);  // a stale one would mislead
  if (check.refusals.empty()) {
    std::string placed;
    for (const auto& [uuid, index] : check.placement) placed += " " + uuid + "->GPU " + std::to_string(index);
    log_.info(who + "this host can give back " + std::to_string(gpu.processes.size()) + " CUDA processes (driver " +
              host->driver_version + ";" + (placed.empty() ? std::string(" no GPU recorded") : placed) + ")" +
              (check.device_map.empty() ? "" : "; onto other GPUs: " + device_map_text(check.device_map)));
    if (!check.device_map.empty()) {
      nlohmann::json m = nlohmann::json::array();
      for (const auto& p : check.device_map) m.push_back({{"from", p.from}, {"to", p.to}});
      write_file_atomic(t_.bundle / kDeviceMapFile, m.dump());
    }
    return hold;
  }
  std::string text = refusal_text(t_.id, check.refusals);
  try {
    write_file_atomic(diag_path, refusal_diagnostic(t_.id, gpu, host ? &*host : nullptr, host_error, check).dump(2) + "\n");
  } catch (const std::exception& e) {
    log_.warn(who + "cannot write the diagnostic: " + e.what());
  }
  log_.warn(text);
  throw Error(Code::FailedPrecondition, text);
}

void CheckpointSession::after_restore(const std::filesystem::path& image, bool left_stopped) {
  const std::string who = "restore of \"" + t_.id + "\"" + tools_.label() + ": ";
  // A failure here fails the task's start, and the task layer removes the restored container,
  // stopped processes included.
  std::optional<ImageRecord> rec = record_of(image, who);
  if (!rec || !rec->has_cuda()) return;
  std::vector<ExpectedProcess> expected;
  for (const auto& p : rec->cuda_pids) expected.push_back({.pid = p.pid, .name = p.name});
  DeviceMap map = read_device_map(t_.bundle / kDeviceMapFile, who);
  auto outcome = tools_.orchestrator().restore_after_runtime_restore(
      t_.id, t_.bundle / kDiagnosticFile, expected, map, [this](pid_t p) { return tools_.container_pid(p); }, left_stopped);
  std::string pids;
  for (pid_t p : outcome.resumed) pids += " " + std::to_string(p);
  log_.info(who + "CUDA resumed in " + std::to_string(outcome.resumed.size()) + " processes (pids" + pids + ");" +
            phases_text(outcome.phases));
  if (!rec->released.empty()) check_released(*rec, outcome.resumed, who);
}

// The forked children whose inherited device files the image left out hold none now: the plugin
// gave them /dev/null (under runsc they dropped them before the checkpoint). One that does (a plugin that did not run) is named
// in the log: it holds a GPU device it did not open itself, which the next checkpoint would stumble on.
void CheckpointSession::check_released(const ImageRecord& rec, const std::vector<pid_t>& cuda, const std::string& who) {
  std::vector<Holder> holders;
  try {
    holders = tools_.scanner().scan(tools_.lister().list());
  } catch (const std::exception& e) {
    log_.warn(who + "cannot scan the restored processes to check the released ones: " + e.what());
    return;
  }
  std::string still;
  for (const auto& h : holders) {
    if (std::find(cuda.begin(), cuda.end(), h.pid) != cuda.end()) continue;
    pid_t in_ct = tools_.container_pid(h.pid);
    for (const auto& r : rec.released)
      if (r.pid == in_ct) still += " " + std::to_string(in_ct) + " (" + h.path + ")";
  }
  if (still.empty())
    log_.info(who + std::to_string(rec.released.size()) +
              " forked processes hold no GPU device (their inherited files are /dev/null)");
  else
    log_.warn(who + "released processes still hold GPU devices:" + still);
}

}  // namespace nvproxy::checkpoint
