#include "shim/task/checkpoint_flow.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "checkpoint/comm_probe.h"
#include "checkpoint/criu_kernel_check.h"
#include "checkpoint/cuda_helper_client.h"
#include "checkpoint/holder_scan.h"
#include "checkpoint/image_record.h"
#include "checkpoint/orchestrator_kit.h"
#include "checkpoint/process_list.h"
#include "checkpoint/restore_preflight.h"
#include "checkpoint/space_check.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "gpu/device_request.h"
#include "gpu/record.h"

namespace nvproxy::shim {

namespace {

// Written into the checkpoint image so that a restore (maybe on another host, by another shim)
// knows whether CUDA state has to be brought back, without touching libcuda otherwise.
// BUNDLE/nvproxy-device-map.json: the GPU pairs the restore preflight chose, for the CUDA restore.
constexpr const char* kDeviceMapFile = "nvproxy-device-map.json";

// The GPUs the restoring container asks for, as the restore preflight's tokens: from the GPU
// layer's record of the request (NVIDIA_VISIBLE_DEVICES, CDI names "nvidia.com/gpu=X"), else the
// spec's NVIDIA_VISIBLE_DEVICES. Empty: no restriction.
std::vector<std::string> requested_gpus(const std::filesystem::path& bundle) {
  auto spec = nlohmann::json::parse(read_file(bundle / "config.json"), nullptr, false);
  if (spec.is_discarded()) return {};
  std::vector<std::string> out;
  if (auto rec = gpu::read_record(spec)) {
    gpu::GpuRequest req = gpu::request_from_record(*rec);
    if (req.visible_all) return {"all"};
    out = req.visible;
    for (const auto& name : req.cdi_names) {
      auto eq = name.find('=');
      if (eq != std::string::npos && name.starts_with("nvidia.com/gpu=")) out.push_back(name.substr(eq + 1));
    }
    return out;
  }
  if (auto env = gpu::env_value(spec, "NVIDIA_VISIBLE_DEVICES")) {
    std::string cur;
    for (char ch : *env + ",") {
      if (ch != ',') {
        cur += ch;
      } else if (!cur.empty()) {
        out.push_back(cur);
        cur.clear();
      }
    }
  }
  return out;
}

std::vector<pid_t> container_pids(CheckpointTarget& c) {
  // runsc's pids live inside the sandbox: host /proc does not describe them, so the host-side
  // scan must not run on them (it would inspect unrelated host processes).
  if (c.runtime->kind() == oci::RuntimeKind::Runsc) {
    if (c.gpu)
      throw Error(Code::FailedPrecondition, "checkpoint of GPU container \"" + c.id +
                                                "\" under runsc: CUDA toggling inside the gVisor sandbox is not supported yet");
    return {};
  }
  std::vector<pid_t> pids;
  for (int p : c.runtime->ps(c.id)) pids.push_back(static_cast<pid_t>(p));
  return pids;
}

// The init's host pid (runc state); 0 when it cannot be had: then processes outside its tree are
// not told apart.
pid_t init_pid_of(CheckpointTarget& c, Logger& log) {
  try {
    return static_cast<pid_t>(c.runtime->state(c.id).pid);
  } catch (const std::exception& e) {
    log.warn("checkpoint of \"" + c.id + "\": the init's pid is unknown (" + e.what() +
             "); processes outside its tree are not looked for");
    return 0;
  }
}

struct Tools : checkpoint::OrchestratorKit {
  Tools(CheckpointTarget& c, const CheckpointEnv& env)
      : OrchestratorKit(c.config.checkpoint, std::make_unique<checkpoint::FunctionLister>([&c] { return container_pids(c); }),
                        env.runner, env.log) {}
};

}  // namespace

// containerd's client pauses a task before it asks for a checkpoint. A frozen CUDA process cannot
// take part in its own lock/checkpoint/restore (the driver needs its threads), so while GPU
// holders exist the container is thawed for the toggles and frozen again on every way out.
class ThawForToggle {
 public:
  ThawForToggle(CheckpointTarget& c, bool paused, bool has_holders, Logger& log)
      : c_(c), log_(log), active_(paused && has_holders) {
    if (!active_) return;
    log_.info("checkpoint of \"" + c_.id + "\": thawing the paused container for the CUDA toggle");
    c_.runtime->resume(c_.id);
  }
  ~ThawForToggle() {
    if (!active_) return;
    try {
      c_.runtime->pause(c_.id);
    } catch (const std::exception& e) {
      log_.error("checkpoint of \"" + c_.id + "\": could not pause it again: " + e.what());
    }
  }
  [[nodiscard]] bool active() const { return active_; }
  ThawForToggle(const ThawForToggle&) = delete;
  ThawForToggle& operator=(const ThawForToggle&) = delete;

 private:
  CheckpointTarget& c_;
  Logger& log_;
  bool active_;
};

namespace {

// After the runtime's checkpoint was killed for running out of time: CRIU may have frozen the
// container (cgroup freezer) and nobody thaws it any more. It is thawed unless the client had
// paused it and no CUDA rollback needs it running (then it stays paused, as the client left it).
// Returns what was done, for the error message.
std::string thaw_after_killed_snapshot(CheckpointTarget& c, bool client_paused, bool thawed_for_toggle, Logger& log) {
  std::string status;
  try {
    status = c.runtime->state(c.id).status;
  } catch (const std::exception& e) {
    log.error("checkpoint of \"" + c.id + "\": after the killed snapshot: " + e.what());
    return std::string("container state unknown, not thawed: ") + e.what();
  }
  if (status != "paused") return "container was not frozen (" + status + ")";
  if (client_paused && !thawed_for_toggle) return "container left paused, as the client had paused it";
  try {
    c.runtime->resume(c.id);
  } catch (const std::exception& e) {
    log.error("checkpoint of \"" + c.id + "\": cannot thaw it after the killed snapshot: " + e.what());
    return std::string("container is still FROZEN, thawing failed: ") + e.what();
  }
  log.info("checkpoint of \"" + c.id + "\": thawed after the killed snapshot");
  // With the client's pause, ThawForToggle freezes it again once CUDA is rolled back.
  return client_paused ? "container thawed for the CUDA rollback (then paused again, as the client had paused it)"
                       : "container thawed";
}

}  // namespace

namespace {

// What the CUDA processes use, asked before anything is toggled: a checkpointed process holds no
// device memory, so NVML can only tell it now. Kept for the image's record (restore preflight).
struct GpuFactsAtCheckpoint {
  std::optional<checkpoint::GpuHostFacts> facts;
  std::string error;  // why there are none
  std::map<pid_t, checkpoint::ProcessIdentity> who;

  void take(Tools& t, const std::vector<pid_t>& pids) {
    try {
      facts = t.cuda.probe->host_facts();
    } catch (const std::exception& e) {
      error = e.what();
    }
    for (pid_t p : pids) who[p] = checkpoint::identify_process(p);
  }

  // The image's record: the toggled processes the restore brings back (each by its pid in the
  // container and name) and what they used; those outside the init's tree (allowed by
  // configuration) are listed as not restored and left out of the rest.
  checkpoint::ImageRecord record(const std::string& id, const std::vector<pid_t>& all_toggled,
                                 const std::vector<pid_t>& lost) const {
    checkpoint::ImageRecord rec{.container = id};
    std::vector<checkpoint::ProcessIdentity> ids;
    for (pid_t p : all_toggled) {
      auto it = who.find(p);
      checkpoint::ProcessIdentity pi = it != who.end() ? it->second : checkpoint::identify_process(p);
      checkpoint::ImageProcess ip{.pid = pi.pid, .name = pi.name};
      if (std::find(lost.begin(), lost.end(), p) != lost.end()) {
        rec.cuda_not_restored.push_back(ip);
        continue;
      }
      rec.cuda_pids.push_back(ip);
      ids.push_back(pi);
    }
    rec.cuda_processes = static_cast<int>(rec.cuda_pids.size());
    if (!rec.has_cuda()) return rec;
    if (!facts)
      rec.gpu_error = error.empty() ? "no GPU facts were taken" : error;
    else
      rec.gpu = checkpoint::make_gpu_record(*facts, ids);
    return rec;
  }
};

}  // namespace

void run_checkpoint(CheckpointTarget& c, const oci::CheckpointFlags& flags, bool paused, const CheckpointEnv& env) {
  Tools t(c, env);
  GpuFactsAtCheckpoint gpu;
  bool has_holders = false;
  if (paused || t.cuda.toggler) {
    std::vector<pid_t> pids = t.lister->list();
    has_holders = !t.scanner.scan(pids).empty();
    if (has_holders && t.cuda.toggler) gpu.take(t, pids);
  }
  ThawForToggle thaw(c, paused, has_holders, env.log);
  checkpoint::CheckpointRequest req{
      .container_id = c.id, .keep_running = flags.leave_running, .diagnostic_path = c.bundle / "checkpoint-diagnostic.json"};
  if (has_holders && t.cuda.toggler) {
    req.init_pid = init_pid_of(c, env.log);
    req.image_path = flags.image_path;
    if (checkpoint::containerd_copies_image(req.image_path)) req.content_store = c.config.checkpoint.content_store;
    if (gpu.facts)
      for (const auto& [pid, uses] : gpu.facts->processes)
        for (const auto& u : uses) req.device_bytes[pid] += u.used_bytes.value_or(0);
  }
  checkpoint::HostSpaceProbe space;
  t.orch.set_space_probe(&space);
  // The CRIU the runtime will run, against this kernel (runsc has no CRIU: nothing to check).
  std::optional<checkpoint::CriuKernelCheck> criu_check;
  if (auto criu = c.runtime->criu()) {
    criu_check.emplace(criu->binary, criu->version, checkpoint::kernel_release());
    t.orch.set_snapshot_check(&*criu_check);
  }
  auto outcome = t.orch.checkpoint(req, [&] {
    try {
      c.runtime->checkpoint(c.id, flags);
    } catch (const DeadlineError& e) {
      // Thawed before the orchestrator rolls CUDA back: frozen processes cannot take part.
      throw e.with(thaw_after_killed_snapshot(c, paused, thaw.active(), env.log));
    }
  });
  // The image exists now; note whether its processes carry checkpointed CUDA state, and what
  // they need from a host that restores them.
  checkpoint::ImageRecord rec = gpu.record(c.id, outcome.toggled, outcome.lost);
  if (!rec.gpu_error.empty())
    env.log.warn("checkpoint of \"" + c.id + "\": the image records no GPU facts for the restore preflight: " + rec.gpu_error);
  try {
    checkpoint::write_image_record(flags.image_path, rec);
  } catch (const Error& e) {
    env.log.warn("checkpoint of \"" + c.id + "\": " + e.what());
  }
  for (const auto& w : outcome.warnings) env.log.warn("checkpoint of \"" + c.id + "\": " + w);
  std::string phases;
  for (const auto& p : outcome.phases) phases += " " + p.name + "=" + std::to_string(static_cast<long>(p.ms)) + "ms";
  env.log.info("checkpoint of \"" + c.id + "\" done: " + std::to_string(outcome.toggled.size()) + " CUDA processes;" + phases);
}

void check_restore_host(CheckpointTarget& c, const CheckpointEnv& env) {
  const std::string who = "restore of \"" + c.id + "\": ";
  std::optional<checkpoint::ImageRecord> rec;
  try {
    rec = checkpoint::read_image_record(c.restore_from);
  } catch (const Error& e) {
    throw Error(e.code(), who + e.what());
  }
  if (!rec || !rec->has_cuda()) return;  // not our image, or no CUDA in it: nothing to check
  if (!rec->gpu) {
    env.log.info(who + "the image records no GPU facts (" +
                 (!rec->gpu_error.empty() ? "not taken at checkpoint: " + rec->gpu_error
                                          : std::string("written by shim 0.2.0 or earlier")) +
                 "); restoring without checking this host's GPUs");
    return;
  }
  const checkpoint::GpuRecord& gpu = *rec->gpu;
  if (gpu.processes.empty()) return;

  std::error_code rm_ec;
  std::filesystem::remove(c.bundle / kDeviceMapFile, rm_ec);  // one of an earlier restore would mislead
  checkpoint::CudaTools tools = checkpoint::make_cuda_tools(c.config.checkpoint, env.runner);
  std::optional<checkpoint::GpuHostFacts> host;
  checkpoint::RestoreCheck check;
  std::string host_error;
  try {
    host = tools.probe->host_facts();
    std::vector<std::string> unknown;
    auto visible = checkpoint::visible_gpus(requested_gpus(c.bundle), *host, unknown);
    for (const auto& u : unknown) env.log.warn(who + "the container asks for GPU \"" + u + "\", which this host does not have");
    check = checkpoint::check_restore(gpu, *host, visible);
  } catch (const Error& e) {
    host_error = e.what();
    check.refusals.push_back(checkpoint::nvml_unavailable(gpu, host_error));
  }
  for (const auto& w : check.warnings) env.log.warn(who + w);
  auto diag_path = c.bundle / "checkpoint-diagnostic.json";
  std::error_code ec;
  std::filesystem::remove(diag_path, ec);  // a stale one would mislead
  if (check.refusals.empty()) {
    std::string placed;
    for (const auto& [uuid, index] : check.placement) placed += " " + uuid + "->GPU " + std::to_string(index);
    env.log.info(who + "this host can give back " + std::to_string(gpu.processes.size()) + " CUDA processes (driver " +
                 host->driver_version + ";" + (placed.empty() ? std::string(" no GPU recorded") : placed) + ")" +
                 (check.device_map.empty() ? "" : "; onto other GPUs: " + checkpoint::device_map_text(check.device_map)));
    if (!check.device_map.empty()) {
      nlohmann::json m = nlohmann::json::array();
      for (const auto& p : check.device_map) m.push_back({{"from", p.from}, {"to", p.to}});
      write_file_atomic(c.bundle / kDeviceMapFile, m.dump());
    }
    return;
  }
  std::string text = checkpoint::refusal_text(c.id, check.refusals);
  try {
    write_file_atomic(diag_path,
                      checkpoint::refusal_diagnostic(c.id, gpu, host ? &*host : nullptr, host_error, check).dump(2) + "\n");
  } catch (const std::exception& e) {
    env.log.warn(who + "cannot write the diagnostic: " + e.what());
  }
  env.log.warn(text);
  throw Error(Code::FailedPrecondition, text);
}

void restore_cuda_after_runtime_restore(CheckpointTarget& c, const CheckpointEnv& env) {
  std::optional<checkpoint::ImageRecord> rec;
  try {
    rec = checkpoint::read_image_record(c.restore_from);
  } catch (const Error& e) {
    throw Error(e.code(), "restore of \"" + c.id + "\": " + e.what());
  }
  if (!rec || !rec->has_cuda()) return;
  std::vector<checkpoint::ExpectedProcess> expected;
  for (const auto& p : rec->cuda_pids) expected.push_back({.pid = p.pid, .name = p.name});
  checkpoint::DeviceMap map;
  if (auto mtext = std::filesystem::path(c.bundle / kDeviceMapFile); std::filesystem::exists(mtext)) {
    auto m = nlohmann::json::parse(read_file(mtext), nullptr, false);
    if (!m.is_array()) throw Error(Code::Internal, "restore of \"" + c.id + "\": " + mtext.string() + " is malformed");
    for (const auto& p : m) map.push_back({p.value("from", ""), p.value("to", "")});
  }
  Tools t(c, env);
  auto outcome = t.orch.restore_after_runtime_restore(c.id, c.bundle / "checkpoint-diagnostic.json", expected, map);
  env.log.info("restore of \"" + c.id + "\": CUDA resumed in " + std::to_string(outcome.resumed.size()) + " processes");
}

}  // namespace nvproxy::shim
