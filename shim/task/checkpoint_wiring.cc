#include "shim/task/checkpoint_wiring.h"

#include <nlohmann/json.hpp>

#include "checkpoint/image/pod_shm.h"
#include "checkpoint/sandbox/sandbox_assembly.h"
#include "checkpoint/sandbox/sandbox_pod.h"
#include "checkpoint/session/host_assembly.h"
#include "common/error.h"
#include "common/fs.h"
#include "gpu/device_request.h"
#include "gpu/record.h"
#include "oci/spec.h"
#include "shim/task/sandbox_target.h"

namespace nvproxy::shim {

namespace {

// The session's view of the container's runtime.
class RuntimeVerbs final : public checkpoint::SessionRuntime {
 public:
  RuntimeVerbs(const SessionSubject& s, const oci::CheckpointFlags* flags, ProcessRunner& runner, Logger& log)
      : rt_(s.runtime),
        id_(s.id),
        client_id_(s.client_id.empty() ? s.id : s.client_id),
        bundle_(s.bundle),
        pids_(s.pids),
        run_restore_(s.run_restore),
        runner_(runner),
        log_(log) {
    if (!flags) return;
    // The snapshot's own choices, made here once: CRIU's work directory (runc, crun: its log stays
    // in the bundle, where a failure's message quotes it from, since the image directory may go
    // with a failed request) and whether zero pages stay out of the image.
    flags_ = *flags;
    if (flags_->work_path.empty() && rt_.kind() != oci::RuntimeKind::Runsc) {
      flags_->work_path = (bundle_ / "criu-work").string();
      std::error_code ec;
      std::filesystem::create_directories(flags_->work_path, ec);
    }
    flags_->exclude_zero_pages = s.cfg.skip_zero_pages;
  }
  std::vector<pid_t> ps() override {
    if (!pids_.empty()) return pids_;
    std::vector<pid_t> pids;
    for (int p : rt_.ps(id_)) pids.push_back(static_cast<pid_t>(p));
    return pids;
  }
  pid_t init_pid() override {
    if (!pids_.empty()) throw Error(Code::NotFound, "pids were given, not a container");
    return static_cast<pid_t>(rt_.state(id_).pid);
  }
  std::string status() override { return rt_.state(client_id_).status; }
  void pause() override { rt_.pause(client_id_); }
  void resume() override { rt_.resume(client_id_); }
  void snapshot(const std::filesystem::path& image, const checkpoint::ReleasePlan& release) override {
    if (!flags_) throw Error(Code::Internal, "container \"" + id_ + "\": no checkpoint was asked for");
    oci::CheckpointFlags f = *flags_;
    f.image_path = image.string();
    f.release_devices = release.devices_text();
    f.on_resumed = release.on_resumed;
    const auto shm = pod_shm();
    if (const std::string tar = find_program("tar"); shm && !tar.empty()) {
      // CRIU's own post-dump action saves it while its link_remap files are there.
      const std::filesystem::path script = bundle_ / "nvproxy-pod-shm.sh";
      write_file_atomic(script, checkpoint::pod_shm_script(*shm, tar), 0700);
      f.post_dump_script = script.string();
    }
    rt_.checkpoint(id_, f);
    if (!shm) return;
    std::error_code ec;
    if (auto size = std::filesystem::file_size(image / checkpoint::kPodShmFile, ec); !ec) {
      log_.info("checkpoint of \"" + id_ + "\": the pod's /dev/shm (" + shm->string() + ") is in the image (" +
                std::to_string(size) + " bytes of tar), with the link_remap files CRIU made there");
      return;
    }
    // No CRIU action ran (no work directory for CRIU's options): the files as they are now, without
    // link_remap files; an image that then restores only on this node is said, not failed.
    try {
      if (std::uint64_t bytes = checkpoint::save_pod_shm(*shm, image, runner_); bytes > 0)
        log_.warn("checkpoint of \"" + id_ + "\": the pod's /dev/shm (" + shm->string() + ", " + std::to_string(bytes) +
                  " bytes) saved after CRIU, without the link_remap files it may have made: a restore on another node can fail");
    } catch (const std::exception& e) {
      log_.warn("checkpoint of \"" + id_ + "\": the image restores only on this node: " + e.what());
    }
  }
  void restore(const std::filesystem::path& image, bool leave_stopped, const std::string& taken_from) override {
    if (!run_restore_) throw Error(Code::Internal, "container \"" + id_ + "\": no restore was asked for");
    if (auto shm = pod_shm(); shm && checkpoint::restore_pod_shm(image, *shm, runner_))
      log_.info("restore of \"" + id_ + "\": the image's /dev/shm files are in the pod's " + shm->string());
    run_restore_(image, leave_stopped, taken_from);
  }
  std::string remove() override {
    rt_.remove(id_, true);
    return std::string(oci::runtime_kind_name(rt_.kind())) + " delete --force";
  }
  Identity identity() override { return {oci::runtime_kind_name(rt_.kind()), rt_.features().version}; }
  std::string cannot_checkpoint() override { return oci::checkpoint_unsupported(rt_.features(), rt_.config().binary); }
  std::optional<Criu> criu() override {
    auto info = rt_.criu();
    if (!info) return std::nullopt;
    return Criu{
        .binary = info->binary,
        .version = info->version,
        .options = rt_.config().criu_options,
        .tcp_established = flags_ && flags_->open_tcp,
        .work_dir = flags_ && !flags_->work_path.empty() ? std::filesystem::path(flags_->work_path) : bundle_ / "criu-work"};
  }

 private:
  // CRI's sandbox shm bound at /dev/shm (pod_shm.h); runsc keeps the sandbox's files itself.
  std::optional<std::filesystem::path> pod_shm() {
    if (rt_.kind() == oci::RuntimeKind::Runsc) return std::nullopt;
    try {
      return checkpoint::pod_shm_source(nlohmann::json::parse(read_file(bundle_ / "config.json"), nullptr, false));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  oci::Runtime& rt_;
  std::string id_;
  std::string client_id_;  // whose state the client paused (SessionSubject::client_id)
  std::filesystem::path bundle_;
  std::optional<oci::CheckpointFlags> flags_;  // the client's options, completed; none: no snapshot is taken
  std::vector<pid_t> pids_;
  std::function<void(const std::filesystem::path&, bool, const std::string&)> run_restore_;
  ProcessRunner& runner_;
  Logger& log_;
};

std::unique_ptr<checkpoint::SessionTools> assembly_for(const SessionSubject& s, checkpoint::SessionRuntime& rt,
                                                       ProcessRunner& runner, Logger& log) {
  const bool runsc = s.runtime.kind() == oci::RuntimeKind::Runsc;
  // A GPU container under gVisor: its processes are seen and toggled inside the sandbox; with its
  // pod's further GPU containers, theirs with them.
  if (runsc && s.gpu && s.pids.empty() && !s.pod_gpus.empty()) {
    std::vector<checkpoint::PodSandboxContainer> cs{
        {.name = s.pod_name, .target = sandbox_target(s.runtime.config(), s.id, s.bundle)}};
    for (const auto& m : s.pod_gpus)
      cs.push_back({.name = m.name, .target = sandbox_target(s.runtime.config(), m.id, s.bundle.parent_path() / m.id)});
    return std::make_unique<checkpoint::PodSandboxAssembly>(s.cfg, std::move(cs), "checkpoint of \"" + s.id + "\"", runner, log);
  }
  if (runsc && s.gpu && s.pids.empty())
    return std::make_unique<checkpoint::SandboxAssembly>(s.cfg, sandbox_target(s.runtime.config(), s.id, s.bundle), runner, log);
  // runsc's pids live inside the sandbox: host /proc does not describe them, so the host-side
  // scan must not run on them (it would inspect unrelated host processes).
  return std::make_unique<checkpoint::HostAssembly>(s.cfg, rt, !runsc || !s.pids.empty(), runner, log);
}

}  // namespace

std::vector<std::string> requested_gpus(const std::filesystem::path& bundle) {
  nlohmann::json spec;
  try {
    spec = nlohmann::json::parse(read_file(bundle / "config.json"), nullptr, false);
  } catch (const std::exception&) {
    return {};
  }
  if (spec.is_discarded()) return {};
  gpu::GpuRequest req;
  try {
    auto rec = gpu::read_record(spec);
    req = rec ? gpu::request_from_record(*rec) : gpu::parse_request(spec);
  } catch (const Error&) {
    return {};  // a request Create would have refused: nothing to restrict by
  }
  if (req.visible_all) return {"all"};
  std::vector<std::string> out = req.visible;
  for (const auto& name : req.cdi_names) {
    auto eq = name.find('=');
    if (eq != std::string::npos && name.starts_with("nvidia.com/gpu=")) out.push_back(name.substr(eq + 1));
  }
  return out;
}

SessionWiring::SessionWiring(const SessionSubject& s, const oci::CheckpointFlags* flags, bool restoring, ProcessRunner& runner,
                             Logger& log)
    : rt_(std::make_unique<RuntimeVerbs>(s, flags, runner, log)), tools_(assembly_for(s, *rt_, runner, log)) {
  // runc/crun: CRIU leaves zero pages out where it has --skip-zero-pages, else they are punched after.
  const bool criu_files = s.cfg.skip_zero_pages && s.runtime.kind() != oci::RuntimeKind::Runsc;
  const bool criu_skips = criu_files && s.runtime.criu_skips_zero_pages();
  checkpoint::SessionTarget t{.id = s.id,
                              .bundle = s.bundle,
                              .ns = s.ns,
                              .content_store = s.content_store,
                              .punch_zero_pages = criu_files && !criu_skips,
                              .zero_pages_left_out = criu_skips,
                              .staging_mode = s.cfg.staging_memory,
                              .staging_margin = std::uint64_t{s.cfg.staging_margin_mib} << 20};
  if (restoring) t.requested_gpus = requested_gpus(s.bundle);
  t.pod = s.pod;
  t.spec = [bundle = s.bundle] { return oci::Spec::load(bundle).json(); };
  session_ = std::make_unique<checkpoint::CheckpointSession>(std::move(t), *rt_, *tools_, log);
}

SessionWiring::~SessionWiring() = default;

}  // namespace nvproxy::shim
