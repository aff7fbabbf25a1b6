#include "shim/task/runsc_checkpoint.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "checkpoint/image_record.h"
#include "checkpoint/sandbox_tools.h"
#include "common/error.h"
#include "common/fs.h"
#include "gpu/record.h"

namespace nvproxy::shim {

namespace {

checkpoint::SandboxTarget sandbox_of(CheckpointTarget& c) {
  const oci::RuntimeConfig& rc = c.runtime->config();
  checkpoint::SandboxTarget t;
  t.runsc.push_back(rc.binary);
  if (!rc.root.empty()) t.runsc.push_back("--root=" + rc.root);
  t.runsc.insert(t.runsc.end(), rc.extra_args.begin(), rc.extra_args.end());
  t.container_id = c.id;
  // The driver library dirs the device layer recorded, for the agent's loader.
  try {
    auto spec = nlohmann::json::parse(read_file(c.bundle / "config.json"));
    if (auto rec = gpu::read_record(spec)) t.lib_dirs = rec->value("ldDirs", std::vector<std::string>{});
  } catch (const std::exception&) {
    // Without them the loader searches the image's cache and default dirs.
  }
  return t;
}

// containerd pauses the task before its checkpoint; frozen processes cannot take part in their
// own CUDA toggles, so a paused sandbox is resumed for them and paused again on every way out.
class ThawSandbox {
 public:
  ThawSandbox(CheckpointTarget& c, bool active, Logger& log) : c_(c), log_(log), active_(active) {
    if (!active_) return;
    log_.info("checkpoint of \"" + c_.id + "\": resuming the paused sandbox for the CUDA toggles");
    c_.runtime->resume(c_.id);
  }
  ~ThawSandbox() {
    if (!active_) return;
    try {
      c_.runtime->pause(c_.id);
    } catch (const std::exception& e) {
      log_.error("checkpoint of \"" + c_.id + "\": could not pause it again: " + e.what());
    }
  }
  ThawSandbox(const ThawSandbox&) = delete;
  ThawSandbox& operator=(const ThawSandbox&) = delete;

 private:
  CheckpointTarget& c_;
  Logger& log_;
  bool active_;
};

std::string phases_text(const std::vector<checkpoint::PhaseTiming>& phases) {
  std::string s;
  for (const auto& p : phases) s += " " + p.name + "=" + std::to_string(static_cast<long>(p.ms)) + "ms";
  return s;
}

}  // namespace

void run_sandbox_checkpoint(CheckpointTarget& c, const oci::CheckpointFlags& flags, bool paused, const CheckpointEnv& env) {
  checkpoint::SandboxKit kit(c.config.checkpoint, sandbox_of(c), env.runner, env.log);
  // A paused sandbox answers no `runsc exec`: resume it before the first question.
  ThawSandbox thaw(c, paused, env.log);
  checkpoint::CheckpointRequest req{
      .container_id = c.id, .keep_running = flags.leave_running, .diagnostic_path = c.bundle / "checkpoint-diagnostic.json"};
  auto outcome = kit.orch.checkpoint(req, [&] { c.runtime->checkpoint(c.id, flags); });
  // The sandbox's pids (a runsc restore keeps them) and names, each looked for after the restore.
  checkpoint::ImageRecord rec{.container = c.id, .sandbox = "runsc", .cuda_processes = static_cast<int>(outcome.toggled.size())};
  for (pid_t p : outcome.toggled) {
    auto pi = kit.scanner.info(p);
    rec.cuda_pids.push_back({.pid = p, .name = pi ? pi->name : std::string()});
  }
  if (rec.has_cuda()) rec.gpu_error = "taken inside a gVisor sandbox: NVML there cannot tell the sandbox's processes apart";
  try {
    checkpoint::write_image_record(flags.image_path, rec);
  } catch (const Error& e) {
    env.log.warn("checkpoint of \"" + c.id + "\": " + e.what());
  }
  for (const auto& w : outcome.warnings) env.log.warn("checkpoint of \"" + c.id + "\": " + w);
  env.log.info("checkpoint of \"" + c.id + "\" (runsc sandbox) done: " + std::to_string(outcome.toggled.size()) +
               " CUDA processes;" + phases_text(outcome.phases));
}

void restore_sandbox_cuda(CheckpointTarget& c, const CheckpointEnv& env) {
  std::optional<checkpoint::ImageRecord> rec;
  try {
    rec = checkpoint::read_image_record(c.restore_from);
  } catch (const Error& e) {
    throw Error(e.code(), "restore of \"" + c.id + "\" (runsc sandbox): " + e.what());
  }
  if (!rec || !rec->has_cuda()) return;
  checkpoint::SandboxKit kit(c.config.checkpoint, sandbox_of(c), env.runner, env.log);
  auto outcome = kit.orch.restore_after_runtime_restore(c.id, c.bundle / "checkpoint-diagnostic.json");
  std::string pids, missing;
  for (pid_t p : outcome.resumed) pids += " " + std::to_string(p);
  // Every process the checkpoint toggled must have come back CUDA-checkpointed and been resumed.
  for (const auto& e : rec->cuda_pids)
    if (std::find(outcome.resumed.begin(), outcome.resumed.end(), e.pid) == outcome.resumed.end())
      missing += (missing.empty() ? "" : ", ") + std::to_string(e.pid) + " (" + e.name + ")";
  if (!missing.empty())
    throw Error(Code::FailedPrecondition, "restore of \"" + c.id + "\" (runsc sandbox): the checkpoint recorded " +
                                              std::to_string(rec->cuda_processes) +
                                              " CUDA processes; not brought back (sandbox pid, name): " + missing);
  env.log.info("restore of \"" + c.id + "\" (runsc sandbox): CUDA resumed in " + std::to_string(outcome.resumed.size()) +
               " processes (sandbox pids" + pids + ");" + phases_text(outcome.phases));
}

}  // namespace nvproxy::shim
