#include "shim/task/gpu_checkpoint.h"

#include <nlohmann/json.hpp>

#include "checkpoint/session.h"
#include "common/fs.h"
#include "gpu/device_request.h"
#include "gpu/record.h"
#include "shim/task/sandbox_target.h"

namespace nvproxy::shim {

namespace {

// The session's view of the container's runtime. `flags`: the client's checkpoint options (null
// on restore, where no snapshot is taken).
class ContainerRuntime final : public checkpoint::SessionRuntime {
 public:
  ContainerRuntime(Container& c, const oci::CheckpointFlags* flags) : c_(c), flags_(flags) {}
  std::vector<pid_t> ps() override {
    std::vector<pid_t> pids;
    for (int p : c_.runtime().ps(c_.id())) pids.push_back(static_cast<pid_t>(p));
    return pids;
  }
  pid_t init_pid() override { return static_cast<pid_t>(c_.runtime().state(c_.id()).pid); }
  std::string status() override { return c_.runtime().state(c_.id()).status; }
  void pause() override { c_.runtime().pause(c_.id()); }
  void resume() override { c_.runtime().resume(c_.id()); }
  void snapshot(const checkpoint::ReleasePlan& release) override {
    if (!flags_) throw Error(Code::Internal, "container \"" + c_.id() + "\": no checkpoint was asked for");
    oci::CheckpointFlags f = *flags_;
    f.release_devices = release.devices_text();
    c_.runtime().checkpoint(c_.id(), f);
  }
  std::optional<Criu> criu() override {
    auto info = c_.runtime().criu();
    if (!info) return std::nullopt;
    return Criu{.binary = info->binary,
                .version = info->version,
                .options = c_.runtime().config().criu_options,
                .tcp_established = flags_ && flags_->open_tcp};
  }

 private:
  Container& c_;
  const oci::CheckpointFlags* flags_;
};

// The GPUs the restoring container asks for, as the restore preflight's tokens: from the GPU
// layer's record of the request (NVIDIA_VISIBLE_DEVICES, CDI names "nvidia.com/gpu=X"), else the
// spec's NVIDIA_VISIBLE_DEVICES. Empty: no restriction.
std::vector<std::string> requested_gpus(const std::filesystem::path& bundle) {
  nlohmann::json spec;
  try {
    spec = nlohmann::json::parse(read_file(bundle / "config.json"), nullptr, false);
  } catch (const std::exception&) {
    return {};
  }
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

// One session over the container: the runtime adapter, the tools for where its processes are
// seen, the session itself (members in that order: each refers to the ones before).
struct Wiring {
  Wiring(Container& c, const oci::CheckpointFlags* flags, bool restoring, ProcessRunner& runner, Logger& log)
      : rt(c, flags), tools(tools_for(c, rt, runner, log)), session(target_of(c, restoring), rt, *tools, log) {}

  static std::unique_ptr<checkpoint::SessionTools> tools_for(Container& c, ContainerRuntime& rt, ProcessRunner& runner,
                                                             Logger& log) {
    const checkpoint::CheckpointConfig& cfg = c.config().checkpoint;
    bool runsc = c.runtime().kind() == oci::RuntimeKind::Runsc;
    // A GPU container under gVisor: its processes are seen and toggled inside the sandbox.
    if (runsc && c.gpu())
      return checkpoint::sandbox_session_tools(cfg, sandbox_target(c.runtime().config(), c.id(), c.bundle()), runner, log);
    // runsc's pids live inside the sandbox: host /proc does not describe them, so the host-side
    // scan must not run on them (it would inspect unrelated host processes).
    return checkpoint::host_session_tools(cfg, rt, !runsc, runner, log);
  }
  static checkpoint::SessionTarget target_of(Container& c, bool restoring) {
    checkpoint::SessionTarget t{.id = c.id(), .bundle = c.bundle(), .content_store = c.config().checkpoint.content_store};
    if (restoring) t.requested_gpus = requested_gpus(c.bundle());
    return t;
  }

  ContainerRuntime rt;
  std::unique_ptr<checkpoint::SessionTools> tools;
  checkpoint::CheckpointSession session;
};

}  // namespace

void GpuCheckpointHooks::checkpoint(Container& c, const oci::CheckpointFlags& flags, bool paused) {
  Wiring w(c, &flags, false, runner_, log_);
  w.session.checkpoint({.leave_running = flags.leave_running, .paused = paused, .image_path = flags.image_path});
}

bool GpuCheckpointHooks::before_restore(Container& c, const std::filesystem::path& image) {
  Wiring w(c, nullptr, true, runner_, log_);
  return w.session.before_restore(image);
}

void GpuCheckpointHooks::after_restore(Container& c, const std::filesystem::path& image, bool left_stopped) {
  Wiring w(c, nullptr, true, runner_, log_);
  w.session.after_restore(image, left_stopped);
}

}  // namespace nvproxy::shim
