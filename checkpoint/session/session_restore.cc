// CheckpointSession::restore: the restore verb (session.h).
#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

#include "checkpoint/image/criu_open_files.h"
#include "checkpoint/image/host_files.h"
#include "checkpoint/image/image_record.h"
#include "checkpoint/image/image_store.h"
#include "checkpoint/preflight/restore_preflight.h"
#include "checkpoint/session/session.h"
#include "checkpoint/staging/restore_staging.h"
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

// "4.2.1" < "4.10": numbers compared one by one; a part that is not a number ends the comparison.
bool older(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string pa, pb;
  while (std::getline(sa, pa, '.') && std::getline(sb, pb, '.')) {
    try {
      const long x = std::stol(pa), y = std::stol(pb);
      if (x != y) return x < y;
    } catch (const std::exception&) {
      return false;
    }
  }
  return false;
}

}  // namespace

void CheckpointSession::check_runtime(const ImageRecord& rec, const std::string& who) {
  if (rec.runtime.empty()) return;  // written before 0.6.0
  SessionRuntime::Identity here;
  try {
    here = rt_.identity();
  } catch (const std::exception& e) {
    log_.warn(who + "cannot tell which runtime restores the image: " + e.what());
    return;
  }
  if (here.name.empty()) return;
  const bool sandbox_image = rec.runtime == "runsc", sandbox_here = here.name == "runsc";
  auto refuse = [&](const std::string& why) {
    log_.warn(who + why);
    throw Error(Code::FailedPrecondition, who + why);
  };
  if (sandbox_image != sandbox_here)
    refuse(
        "the image was written by " + rec.runtime + " and this container runs under " + here.name + ": " +
        (sandbox_image ? "a gVisor sandbox's image restores under runsc only" : "a CRIU image restores under runc or crun only"));
  if (sandbox_image && !rec.runtime_version.empty() && !here.version.empty() && rec.runtime_version != here.version)
    refuse("the image was written by runsc " + rec.runtime_version + " and this host runs runsc " + here.version +
           ": gVisor restores only images of its own release; restore with that runsc (runtime.binary), or checkpoint "
           "again with this one");
  if (!sandbox_image && !rec.criu_version.empty()) {
    std::optional<SessionRuntime::Criu> criu;
    try {
      criu = rt_.criu();
    } catch (const std::exception&) {
    }
    if (criu && !criu->version.empty() && older(criu->version, rec.criu_version))
      log_.warn(who + "the image was written by CRIU " + rec.criu_version + " and this host restores with CRIU " + criu->version +
                ": an older CRIU may not read it");
  }
}

void CheckpointSession::restore(const RestoreRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  auto ms_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  RestorePlan plan;
  const std::filesystem::path image = find_image(req, plan);
  if (req.cuda_later) plan.leave_stopped = false;  // nothing of the sandbox runs before its last container
  check_host_files(image);
  // Billed before anything is created: the staged device memory comes back through host memory.
  RestoreStaging staging;
  // Made for every image of this shim: what is staged is billed, and a restore the kernel kills is
  // named as such whatever it restored.
  if (MemoryProbe* memory = tools_.memory(); memory && plan.record)
    staging = RestoreStaging({.container = t_.id,
                              .bundle = t_.bundle,
                              .image = image,
                              .record = &*plan.record,
                              .mode = t_.staging_mode,
                              .margin = t_.staging_margin},
                             *memory, tools_.reservations(), log_);
  const auto t_runtime = std::chrono::steady_clock::now();
  const double before_runtime = ms_since(t0);
  try {
    rt_.restore(image, plan.leave_stopped, plan.record ? plan.record->container : std::string());
  } catch (const Error& e) {
    std::string oom = staging.oom_cause_now();
    if (oom.empty()) throw;
    throw Error(Code::ResourceExhausted, "restore of \"" + t_.id + "\": " + oom + "; then: " + e.what());
  }
  staging.spec_back();
  // Where the restore's time went, said once it is done (the first moment every process runs).
  const double runtime_ms = ms_since(t_runtime);
  std::vector<PhaseTiming> criu;
  const std::string criu_text = criu_phases(criu, "restore");
  auto said = [&](double cuda_ms) {
    auto ms = [](double v) { return std::to_string(static_cast<long long>(v)) + " ms"; };
    log_.info("restore of \"" + t_.id + "\"" + tools_.label() + " done in " + ms(ms_since(t0)) + ": preflight and staging " +
              ms(before_runtime) + ", the runtime's restore " + ms(runtime_ms) +
              (criu_text.empty() ? "" : " (" + criu_text + ")") +
              (cuda_ms > 0 ? ", CUDA back in every process " + ms(cuda_ms) : std::string()));
  };
  if (!plan.record || !plan.record->has_cuda() || req.cuda_later) {
    said(0);
    if (plan.record && plan.record->has_cuda())
      log_.info("restore of \"" + t_.id + "\": CUDA comes back once the pod's sandbox runs (its last container restored)");
    return;
  }
  try {
    const auto t_cuda = std::chrono::steady_clock::now();
    resume_cuda(*plan.record, plan);
    staging.end();
    said(ms_since(t_cuda));
  } catch (const Error& e) {
    throw_removed(e, staging.oom_cause_now());
  }
}

void CheckpointSession::resume_cuda(const RestoreRequest& req) {
  RestoreRequest again = req;
  again.cuda_later = false;
  RestorePlan plan;
  const std::filesystem::path image = find_image(again, plan);
  plan.leave_stopped = false;
  if (!plan.record) return;
  // A pod's image: the image's own record is one GPU container's, each other one's is beside it.
  if (plan.record->pod && !req.pod_member.empty())
    if (const PodMember* m = plan.record->pod->by_id(plan.record->container); m && m->name != req.pod_member)
      plan.record = record_of(image / kPodCudaDir / req.pod_member, "restore of \"" + t_.id + "\": ");
  if (!plan.record || !plan.record->has_cuda()) return;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    resume_cuda(*plan.record, plan);
    log_.info("restore of \"" + t_.id + "\"" + tools_.label() + ": CUDA back in every process in " +
              std::to_string(static_cast<long long>(
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count())) +
              " ms, the pod's sandbox running");
  } catch (const Error& e) {
    throw_removed(e, "");
  }
}

void CheckpointSession::throw_removed(const Error& e, const std::string& oom) {
  // The runtime restored the processes but CUDA did not come back in all of them: the task's
  // start fails, so nothing of it may keep running behind containerd's back (Delete would not
  // remove a running container). An OOM kill is read first, while the cgroup is still there, and
  // said first: it is the cause, whatever failed after it (a sandbox killed answers no exec).
  std::string aftermath;
  try {
    aftermath = "removed the restored container (" + rt_.remove() + ")";
  } catch (const std::exception& de) {
    aftermath = "could not remove the restored container: " + std::string(de.what());
  }
  if (!oom.empty())
    throw Error(Code::ResourceExhausted, "restore of \"" + t_.id + "\": " + oom + "; then: " + e.what() + "; " + aftermath);
  throw Error(e.code(), std::string(e.what()) + "; " + aftermath);
}

bool CheckpointSession::host_files_of(const std::filesystem::path& image, std::vector<HostFile>& out) {
  auto spec = [&] {
    if (!t_.spec) throw Error(Code::Internal, "container \"" + t_.id + "\": its spec was not handed to the session");
    return t_.spec();
  };
  if (std::filesystem::exists(image / "pstree.img")) {
    out = on_bind_mounts(criu_open_files(image), spec());
    return true;
  }
  if (!std::filesystem::exists(image / "checkpoint.img")) return false;  // nor runsc's state file
  out = bind_mount_sources(spec());
  return true;
}

void CheckpointSession::check_host_files(const std::filesystem::path& image) {
  const std::string who = "restore of \"" + t_.id + "\"" + tools_.label() + ": ";
  std::vector<HostFile> files;
  try {
    if (!host_files_of(image, files)) return;
  } catch (const Error& e) {
    throw Error(e.code(), who + "cannot list the host files the image needs: " + e.what());
  }
  const HostFileCheck check = check_on_this_node(files);
  for (const auto& w : check.warnings) log_.warn(who + w);
  if (check.refusals.empty()) {
    if (!files.empty())
      log_.info(who + std::to_string(files.size()) + " files on the container's bind mounts are there as the image needs them");
    return;
  }
  std::string text = who + std::to_string(check.refusals.size()) + " of the host files the image's processes held " +
                     (check.refusals.size() == 1 ? "is" : "are") + " not as the restore needs " +
                     (check.refusals.size() == 1 ? "it" : "them") +
                     "; put them back on this node or take the checkpoint again (nothing was started, the image is as it was):";
  for (const auto& r : check.refusals) text += "\n  " + r;
  log_.warn(text);
  throw Error(Code::FailedPrecondition, text);
}

void CheckpointSession::fetch(const RestoreRequest& req) {
  RestorePlan plan;
  const std::filesystem::path image = find_image(req, plan);
  log_.info("restore of \"" + t_.id + "\": the image is ready at " + image.string() +
            (plan.record ? "; recorded from container " + plan.record->container : std::string()));
}

std::filesystem::path CheckpointSession::find_image(const RestoreRequest& req, RestorePlan& plan) {
  const std::string who = "restore of \"" + t_.id + "\"" + tools_.label() + ": ";
  std::optional<ImageRef> ref;
  try {
    ref = read_image_ref(req.checkpoint);
  } catch (const Error& e) {
    throw Error(e.code(), who + e.what());
  }
  if (ref && !ref->registry.empty()) {
    if (!req.puller)
      throw Error(Code::FailedPrecondition, who + "the image is in a registry (" + ref->registry + "), and this shim pulls none");
    log_.info(who + "the image is the registry's " + ref->registry + ": its record is checked before it is pulled");
    std::filesystem::path entry;
    try {
      entry = req.puller->pull(ref->registry, req.image_store,
                               [&](const std::optional<ImageRecord>& rec) { plan = plan_restore(rec); });
    } catch (const Error& e) {
      throw Error(e.code(), std::string(e.what()).rfind(who, 0) == 0 ? std::string(e.what()) : who + e.what());
    }
    log_.info(who + "the registry's image is in the store at " + entry.string());
    return entry;
  }
  // An image of the shim's store is read where it is (image_store.h): containerd handed over its
  // reference.
  std::filesystem::path image = resolve_image(req.checkpoint, req.image_store);
  if (image != req.checkpoint) log_.info(who + "the image is the store's " + image.string());
  plan = plan_restore(record_of(image, "restore of \"" + t_.id + "\": "));
  return image;
}

CheckpointSession::RestorePlan CheckpointSession::plan_restore(std::optional<ImageRecord> record) {
  const std::string who = "restore of \"" + t_.id + "\": ";
  RestorePlan plan{.record = std::move(record)};
  if (plan.record) check_runtime(*plan.record, who);
  if (!plan.record || !plan.record->has_cuda()) return plan;  // not our image, or no CUDA in it: nothing to check
  plan.leave_stopped = tools_.holds_still();
  if (!plan.record->gpu) {
    log_.info(who + "the image records no GPU facts (" +
              (!plan.record->gpu_error.empty() ? "not taken at checkpoint: " + plan.record->gpu_error
                                               : std::string("written by shim 0.2.0 or earlier")) +
              "); restoring without checking this host's GPUs");
    return plan;
  }
  const GpuRecord& gpu = *plan.record->gpu;
  if (gpu.processes.empty()) return plan;

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
  std::error_code ec;
  std::filesystem::remove(diag_path, ec);  // a stale one would mislead
  if (check.refusals.empty()) {
    std::string placed;
    for (const auto& [uuid, index] : check.placement) placed += " " + uuid + "->GPU " + std::to_string(index);
    log_.info(who + "this host can give back " + std::to_string(gpu.processes.size()) + " CUDA processes (driver " +
              host->driver_version + ";" + (placed.empty() ? std::string(" no GPU recorded") : placed) + ")" +
              (check.device_map.empty() ? "" : "; onto other GPUs: " + device_map_text(check.device_map)));
    plan.device_map = std::move(check.device_map);
    return plan;
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

void CheckpointSession::resume_cuda(const ImageRecord& rec, const RestorePlan& plan) {
  const std::string who = "restore of \"" + t_.id + "\"" + tools_.label() + ": ";
  std::vector<ExpectedProcess> expected;
  for (const auto& p : rec.cuda_pids) expected.push_back({.pid = p.pid, .name = p.name});
  auto outcome = tools_.orchestrator().restore_after_runtime_restore(
      t_.id, t_.bundle / kDiagnosticFile, expected, plan.device_map, [this](pid_t p) { return tools_.container_pid(p); },
      plan.leave_stopped);
  std::string pids;
  for (pid_t p : outcome.resumed) pids += " " + std::to_string(p);
  log_.info(who + "CUDA resumed in " + std::to_string(outcome.resumed.size()) + " processes (pids" + pids + ");" +
            phases_text(outcome.phases));
  if (!rec.released.empty()) check_released(rec, outcome.resumed, who);
}

// The forked children whose inherited device files the image left out hold none now: the plugin
// gave them /dev/null (under runsc they dropped them before the checkpoint). One that does (a
// plugin that did not run) is named in the log: it holds a GPU device it did not open itself,
// which the next checkpoint would stumble on.
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
