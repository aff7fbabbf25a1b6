// CheckpointSession::checkpoint: the checkpoint verb (session.h).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "checkpoint/image/criu_stats.h"
#include "checkpoint/image/image_record.h"
#include "checkpoint/image/image_store.h"
#include "checkpoint/image/zero_pages.h"
#include "checkpoint/preflight/space_check.h"
#include "checkpoint/session/session.h"
#include "checkpoint/session/thaw_guard.h"
#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace {

// What the CUDA processes use, asked before anything is toggled: a checkpointed process holds no
// device memory, so NVML can only tell it now. Kept for the image's record (restore preflight).
struct FactsBeforeToggle {
  std::optional<GpuHostFacts> facts;
  std::string error;  // why there are none
  std::map<pid_t, ProcessIdentity> who;

  void take(SessionTools& tools, const std::vector<pid_t>& pids) {
    if (GpuUsageProbe* probe = tools.host_facts()) {
      try {
        facts = probe->host_facts();
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    for (pid_t p : pids) who[p] = tools.identify(p);
  }

  // The image's record: the toggled processes the restore brings back (each by its pid in the
  // container and name) and what they used; those outside the init's tree (allowed by
  // configuration) are listed as not restored and left out of the rest.
  ImageRecord record(SessionTools& tools, const std::string& id, const std::vector<pid_t>& toggled,
                     const std::vector<pid_t>& lost) {
    ImageRecord rec{.container = id, .sandbox = tools.host_view() ? "" : "runsc"};
    std::vector<ProcessIdentity> ids;
    for (pid_t p : toggled) {
      auto it = who.find(p);
      ProcessIdentity pi = it != who.end() ? it->second : tools.identify(p);
      ImageProcess ip{.pid = pi.pid, .name = pi.name};
      if (std::find(lost.begin(), lost.end(), p) != lost.end()) {
        rec.cuda_not_restored.push_back(ip);
        continue;
      }
      rec.cuda_pids.push_back(ip);
      ids.push_back(pi);
    }
    rec.cuda_processes = static_cast<int>(rec.cuda_pids.size());
    if (!rec.has_cuda()) return rec;
    if (!tools.host_view())
      rec.gpu_error = "taken inside a gVisor sandbox: NVML there cannot tell the sandbox's processes apart";
    else if (!facts)
      rec.gpu_error = error.empty() ? "no GPU facts were taken" : error;
    else
      rec.gpu = make_gpu_record(*facts, ids);
    return rec;
  }
};

// Each host pid's device memory over every GPU, as NVML reports it.
std::map<pid_t, std::uint64_t> device_bytes_by_pid(const GpuHostFacts& facts) {
  std::map<pid_t, std::uint64_t> bytes;
  for (const auto& [pid, uses] : facts.processes)
    for (const auto& u : uses) bytes[pid] += u.used_bytes.value_or(0);
  return bytes;
}

// The init's host pid; 0 when it cannot be had: then processes outside its tree are not told apart.
pid_t init_pid_of(SessionRuntime& rt, const std::string& id, Logger& log) {
  try {
    return rt.init_pid();
  } catch (const std::exception& e) {
    log.warn("checkpoint of \"" + id + "\": the init's pid is unknown (" + e.what() +
             "); processes outside its tree are not looked for");
    return 0;
  }
}

// After the snapshot, with the container running again: the image keeps its bytes, loses its zero
// pages' blocks. A failure leaves the image whole: a warning, not a failed checkpoint.
void drop_zero_pages(const std::filesystem::path& image, const std::string& who, Logger& log) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    ZeroPunch z = punch_zero_pages(image);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    if (!z.not_supported.empty()) {
      log.warn(who + ": zero pages kept in the image: " + z.not_supported);
      return;
    }
    if (z.files == 0) return;
    log.info(who + ": " + std::to_string(z.punched >> 20) + " MiB of zero pages punched out of " +
             std::to_string(z.scanned >> 20) + " MiB of page data in " + std::to_string(z.files) + " files (" +
             std::to_string(ms) + " ms)");
  } catch (const Error& e) {
    log.warn(who + ": zero pages kept in the image: " + e.what());
  }
}

// Every number in `text` (a report's pids among them).
std::vector<pid_t> numbers_in(const std::string& text) {
  std::vector<pid_t> out;
  for (std::size_t i = 0; i < text.size();) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j - i <= 9) out.push_back(static_cast<pid_t>(std::stol(text.substr(i, j - i))));
    i = j;
  }
  return out;
}

// The report the orchestrator wrote, with `key` added (a warning when it cannot be).
void add_to_diagnostic(const std::filesystem::path& file, const std::string& key, const std::string& value, Logger& log) {
  if (file.empty()) return;
  try {
    auto j = nlohmann::json::parse(read_file(file));
    j[key] = value;
    write_file_atomic(file, j.dump(2) + "\n");
  } catch (const std::exception& e) {
    log.warn("cannot add " + key + " to " + file.string() + ": " + e.what());
  }
}

}  // namespace

std::uint64_t CheckpointSession::sandbox_charge(pid_t sentry) {
  MemoryProbe* memory = tools_.memory();
  if (!memory) return 0;
  try {
    const auto cgroup = memory->memory_cgroup(sentry);
    return cgroup.empty() ? 0 : memory->used(cgroup);
  } catch (const std::exception& e) {
    log_.warn("checkpoint of \"" + t_.id + "\"" + tools_.label() + ": the sandbox's memory charge is unknown (" + e.what() +
              "); a restore bills the image's pages instead");
    return 0;
  }
}

void CheckpointSession::stamp_runtime(ImageRecord& rec) {
  try {
    SessionRuntime::Identity id = rt_.identity();
    rec.runtime = id.name;
    rec.runtime_version = id.version;
    if (auto c = rt_.criu()) rec.criu_version = c->version;
  } catch (const std::exception& e) {
    log_.warn("checkpoint of \"" + t_.id + "\": the image does not record the runtime's version: " + e.what());
  }
}

CheckpointRequest CheckpointSession::request(bool leave_running, const std::filesystem::path& image, bool cuda_holders,
                                             const std::optional<GpuHostFacts>& facts) {
  CheckpointRequest req{.container_id = t_.id, .keep_running = leave_running, .diagnostic_path = t_.bundle / kDiagnosticFile};
  if (tools_.host_view() && cuda_holders && tools_.toggles_cuda()) {
    req.init_pid = init_pid_of(rt_, t_.id, log_);
    req.image_path = image;
    req.zero_pages_left_out = t_.zero_pages_left_out;
    if (containerd_copies_image(req.image_path)) req.content_store = t_.content_store;
    req.lift_record = t_.bundle / kLiftRecordFile;
    if (facts) req.device_bytes = device_bytes_by_pid(*facts);
  } else if (!tools_.host_view() && tools_.toggles_cuda()) {
    // A gVisor sandbox: the driver stages every process's device memory in the sentry's memory
    // (nvproxy's clients' memory is its memory file), charged to the sandbox's memory cgroup, and
    // NVML on the host sees the sentry holding the sandbox's device memory (measured on an H100).
    req.staging_pid = init_pid_of(rt_, t_.id, log_);
    req.lift_record = t_.bundle / kLiftRecordFile;
    if (GpuUsageProbe* usage = tools_.sandbox_usage(); usage && req.staging_pid > 0) try {
        // Not listed: NVML does not know this pid as the sandbox's (the CUDA processes found in it
        // hold device memory), so the bill is unknown rather than empty.
        auto bytes = device_bytes_by_pid(usage->host_facts());
        if (auto it = bytes.find(req.staging_pid); it != bytes.end()) req.device_bytes[req.staging_pid] = it->second;
      } catch (const std::exception& e) {
        log_.warn("checkpoint of \"" + t_.id + "\"" + tools_.label() + ": the sandbox's device memory is unknown (" + e.what() +
                  ")");
      }
  }
  return req;
}

Inspection CheckpointSession::inspect(const std::filesystem::path& image) {
  FactsBeforeToggle facts;
  bool has_holders = !tools_.host_view();
  if (tools_.host_view() && tools_.toggles_cuda()) {
    std::vector<pid_t> pids = tools_.lister().list();
    has_holders = !tools_.scanner().scan(pids).empty();
    if (has_holders) facts.take(tools_, pids);
  }
  CheckpointRequest req = request(true, image, has_holders, facts.facts);
  req.diagnostic_path.clear();  // the last checkpoint's report stays
  Inspection ins = tools_.orchestrator().inspect(req);
  ins.sandbox = tools_.host_view() ? "" : "runsc";
  return ins;
}

void CheckpointSession::checkpoint(const SnapshotRequest& sr) {
  if (sr.image_store.empty() || sr.image_path.empty()) {
    snapshot_into(sr, sr.image_path);
    return;
  }
  // The runtime writes into the shim's store; containerd's directory gets the reference. The entry
  // goes with any failure, so that a failed checkpoint leaves nothing in the store.
  ImageStore store(sr.image_store, sr.image_store_keep);
  const std::filesystem::path entry = store.create(t_.ns, t_.id);
  try {
    snapshot_into(sr, entry);
    store.refer(sr.image_path, entry, t_.id);
  } catch (...) {
    store.discard(entry);
    throw;
  }
  log_.info("checkpoint of \"" + t_.id + "\": image in the store at " + entry.string() + ", referred to from " +
            sr.image_path.string());
  // containerd never says when it drops an image: the container's oldest entries go now.
  for (const auto& old : store.retain(t_.ns, t_.id))
    log_.info("image store: removed " + old.string() + " (checkpoint.image_store_keep: " + std::to_string(sr.image_store_keep) +
              ")");
}

void CheckpointSession::snapshot_into(const SnapshotRequest& sr, const std::filesystem::path& image) {
  const std::string who = "checkpoint of \"" + t_.id + "\"" + tools_.label();
  // A runtime that has no checkpoint at all fails only after every toggle and back: refused first.
  if (std::string why = rt_.cannot_checkpoint(); !why.empty())
    throw Error(Code::FailedPrecondition, who + " refused: " + why + "; nothing was toggled, the container runs on");
  FactsBeforeToggle facts;
  // Seen from the host, the holders are known before anything is thawed: a paused container
  // without GPU holders stays paused. A sandbox answers nothing while paused.
  bool has_holders = !tools_.host_view();
  if (tools_.host_view() && (sr.paused || tools_.toggles_cuda())) {
    std::vector<pid_t> pids = tools_.lister().list();
    has_holders = !tools_.scanner().scan(pids).empty();
    if (has_holders && tools_.toggles_cuda()) facts.take(tools_, pids);
  }
  ThawGuard thaw(rt_, t_.id, sr.paused && has_holders, log_);

  CheckpointRequest req = request(sr.leave_running, image, has_holders, facts.facts);
  std::uint64_t sandbox_memory = 0;
  CheckpointOutcome outcome;
  try {
    outcome = tools_.orchestrator().checkpoint_around(req, [&](const ReleasePlan& release) {
      if (req.staging_pid > 0) sandbox_memory = sandbox_charge(req.staging_pid);
      try {
        rt_.snapshot(image, tools_.release_before_snapshot(release));
      } catch (const DeadlineError& e) {
        // Thawed before the orchestrator rolls CUDA back: frozen processes cannot take part. A held
        // container is taken back (held, then thawed) by the orchestrator: nothing of it runs.
        if (tools_.holds_still())
          throw e.with("container thawed for the CUDA rollback, its processes held still until CUDA is back");
        throw e.with(thaw.after_killed_snapshot(sr.paused));
      }
    });
  } catch (const Error& e) {
    // A pod's GPU containers number their processes apart: the report says whose each pid is.
    const std::string legend = tools_.pid_legend(numbers_in(e.what()));
    if (legend.empty()) throw;
    log_.warn(who + ": " + legend);
    add_to_diagnostic(req.diagnostic_path, "pod_pids", legend, log_);
    throw Error(e.code(), std::string(e.what()) + "\n  " + legend);
  }

  if (t_.punch_zero_pages) drop_zero_pages(image, who, log_);
  const std::string criu_text = criu_phases(outcome.phases, "dump");
  const double stopped = sr.leave_running ? stopped_ms(outcome.phases) : 0;

  // The image exists now; note whether its processes carry checkpointed CUDA state, and what
  // they need from a host that restores them. A pod's GPU containers toggled as one: each one's
  // processes in its own record (the others' in IMAGE/pod-cuda/<name>/).
  auto record_of = [&](const std::string& member, const std::string& id) {
    auto theirs = [&](const std::vector<pid_t>& pids) {
      std::vector<pid_t> out;
      for (pid_t p : pids)
        if (tools_.pod_member_of(p) == member) out.push_back(p);
      return out;
    };
    ImageRecord r = facts.record(tools_, id, theirs(outcome.toggled), theirs(outcome.lost));
    for (const auto& rel : outcome.released) {
      if (tools_.pod_member_of(rel.pid) != member) continue;
      ProcessIdentity pi = tools_.identify(rel.pid);
      r.released.push_back({.pid = pi.pid, .name = pi.name, .from = tools_.container_pid(rel.from), .fds = rel.fds});
    }
    stamp_runtime(r);
    if (auto it = req.device_bytes.find(req.staging_pid); req.staging_pid > 0 && it != req.device_bytes.end())
      r.sandbox_device_bytes = it->second;
    r.sandbox_memory_bytes = sandbox_memory;
    for (const auto& ph : outcome.phases) r.checkpoint_phases.emplace_back(ph.name, ph.ms);
    r.stopped_ms = stopped;
    return r;
  };
  ImageRecord rec = record_of("", t_.id);
  try {
    rec.host_files_listed = host_files_of(image, rec.host_files);
  } catch (const std::exception& e) {
    log_.warn(who + ": the image does not list the host files its restore needs: " + e.what());
  }
  rec.pod = t_.pod;
  for (const auto& name : tools_.pod_members()) {
    const PodMember* m = t_.pod ? t_.pod->container(name) : nullptr;
    const std::filesystem::path own = image / kPodCudaDir / name;
    try {
      std::filesystem::create_directories(own);
      write_image_record(own, record_of(name, m ? m->id : name));
    } catch (const std::exception& e) {
      log_.warn(who + ": the record of the pod's container \"" + name + "\": " + e.what());
    }
  }
  if (tools_.host_view() && !rec.gpu_error.empty())
    log_.warn(who + ": the image records no GPU facts for the restore preflight: " + rec.gpu_error);
  try {
    write_image_record(image, rec);
  } catch (const Error& e) {
    log_.warn(who + ": " + e.what());
  }
  for (const auto& w : outcome.warnings) log_.warn(who + ": " + w);
  log_.info(
      who + " done: " + std::to_string(outcome.toggled.size()) + " CUDA processes;" + phases_text(outcome.phases) +
      (stopped > 0 ? "; the workload was stopped " + std::to_string(static_cast<long long>(stopped)) + " ms" : std::string()) +
      (criu_text.empty() ? std::string() : "; " + criu_text));
}

std::string CheckpointSession::criu_phases(std::vector<PhaseTiming>& phases, const std::string& what) {
  std::optional<SessionRuntime::Criu> criu;
  try {
    criu = rt_.criu();
  } catch (const std::exception&) {
    return "";
  }
  if (!criu || criu->work_dir.empty()) return "";
  try {
    auto stats = read_criu_stats(criu->work_dir, what);
    if (!stats) return "";
    for (const auto& t : stats->timings) phases.push_back({.name = t.name, .ms = t.ms});
    return criu_stats_text(*stats);
  } catch (const Error& e) {
    log_.warn(what + " of \"" + t_.id + "\": CRIU's stats are unreadable: " + e.what());
    return "";
  }
}

double stopped_ms(const std::vector<PhaseTiming>& phases) {
  // With CUDA: from the first lock to the last unlock, the phases in between (each runs after the
  // last). Without: CRIU's frozen time, the only stop.
  double cuda = 0, frozen = 0;
  for (const auto& ph : phases) {
    if (ph.name == "lock" || ph.name == "checkpoint" || ph.name == "verify" || ph.name == "snapshot" || ph.name == "resume")
      cuda += ph.ms;
    if (ph.name == "criu_frozen") frozen = ph.ms;
  }
  bool locked = false;
  for (const auto& ph : phases) locked = locked || ph.name == "lock";
  return locked ? cuda : frozen;
}

}  // namespace nvproxy::checkpoint
