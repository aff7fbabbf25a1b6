// The Task service's request decoding, through the real TaskService where no daemon is needed.
//
// Input: byte 0 picks the method (as the ttrpc method name would), the rest is its protobuf payload.
// The request is decoded as task_rpc.cc does and handed to a real TaskService that has no container:
// every method then stops at its lookup (NotFound) except
//   - Create: id validation, bundle check and the runtime options (runtimeoptions.v1.Options and
//     containerd.runc.v1.Options decoded, the config file read and parsed). To keep the fuzzer off
//     the host's files, an absolute bundle is redirected to a path that does not exist (Create stops
//     at config.json: NotFound) and a ConfigPath is redirected to a scratch file that holds the
//     ConfigPath's own text, so the shim config parser is fuzzed through the real path too;
//   - Connect and Shutdown, which answer without a container.
// What the service does with a decoded request after its container lookup is replayed here with the
// same public functions: exec ids and process specs (validate_id, validate_process), Update's resources
// JSON, Checkpoint's options (containerd.runc.v1.CheckpointOptions).
// Only nvproxy::Error may come out of the service (conventions.md); anything else aborts.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "common/error.h"
#include "common/log.h"
#include "common/process.h"
#include "common/validate.h"
#include "oci/spec.h"
#include "proto/runc_options.pb.h"
#include "proto/runtime_options.pb.h"
#include "proto/shim_task.pb.h"
#include "shim/kit/events.h"
#include "shim/task/config.h"
#include "shim/task/gpu_checkpoint.h"
#include "shim/task/task_service.h"

using namespace nvproxy;
namespace task = containerd::task::v2;

namespace {

struct Fixture {
  Logger log{-1};
  DirectWaiter waiter;
  ProcessRunner runner{waiter};
  shim::EventPublisher events{"", "fuzz", log};  // no address: publishing is off
  shim::GpuCheckpointHooks hooks{log, runner};
  shim::TaskService svc{shim::ServiceDeps{
      .ns = "fuzz",
      .self_binary = "/nonexistent/containerd-shim-nvproxy-v1",
      .log = log,
      .runner = runner,
      .events = events,
      .checkpoints = hooks,
      .make_runtime = [this](const oci::RuntimeConfig& rc,
                             const std::filesystem::path& f) { return std::make_unique<oci::Runtime>(rc, runner, log, f); },
      .load_config = [](const std::string& path) { return shim::load_config(path); },
      .shutdown = [] {}}};
  std::string config_file;
  Fixture() {
    char tmpl[] = "/tmp/nvproxy-fuzz-task-XXXXXX";
    if (!::mkdtemp(tmpl)) std::abort();
    config_file = std::string(tmpl) + "/config.yaml";
    ::setenv("NVPROXY_SHIM_CONFIG", (std::string(tmpl) + "/absent.yaml").c_str(), 1);
  }
};

Fixture& fixture() {
  static Fixture* f = new Fixture();
  return *f;
}

std::string type_name(const std::string& url) {
  auto slash = url.rfind('/');
  return slash == std::string::npos ? url : url.substr(slash + 1);
}

template <typename Req>
bool decode(Req& r, const std::string& payload) {
  return r.ParseFromString(payload);  // task_rpc.cc: a failure answers InvalidArgument
}

template <typename Fn>
void expect_only_errors(Fn fn) {
  try {
    fn();
  } catch (const Error&) {
  }
}

void fuzz_create(Fixture& f, const std::string& payload) {
  task::CreateTaskRequest r;
  if (!decode(r, payload)) return;
  if (!r.bundle().empty() && r.bundle()[0] == '/') r.set_bundle("/nonexistent/nvproxy-fuzz/bundle");
  if (r.has_options() && type_name(r.options().type_url()) == "runtimeoptions.v1.Options") {
    runtimeoptions::v1::Options o;
    if (o.ParseFromString(r.options().value()) && !o.config_path().empty()) {
      std::ofstream(f.config_file, std::ios::trunc | std::ios::binary) << o.config_path();
      o.set_config_path(f.config_file);
      r.mutable_options()->set_value(o.SerializeAsString());
    }
  }
  expect_only_errors([&] { f.svc.create(r); });
}

void fuzz_exec(Fixture& f, const std::string& payload) {
  task::ExecProcessRequest r;
  if (!decode(r, payload)) return;
  expect_only_errors([&] { f.svc.exec(r); });
  // After the container lookup:
  expect_only_errors([&] {
    validate_id("exec id", r.exec_id());
    auto spec = nlohmann::json::parse(r.spec().value(), nullptr, false);
    if (spec.is_discarded()) return;
    oci::validate_process(spec, "exec \"" + r.exec_id() + "\"");
  });
}

void fuzz_update(Fixture& f, const std::string& payload) {
  task::UpdateTaskRequest r;
  if (!decode(r, payload)) return;
  expect_only_errors([&] { f.svc.update(r); });
  auto res = nlohmann::json::parse(r.resources().value(), nullptr, false);
  if (!res.is_discarded() && res.is_object()) (void)res.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void fuzz_checkpoint(Fixture& f, const std::string& payload) {
  task::CheckpointTaskRequest r;
  if (!decode(r, payload)) return;
  expect_only_errors([&] { f.svc.checkpoint(r); });
  if (r.has_options() && type_name(r.options().type_url()) == "containerd.runc.v1.CheckpointOptions") {
    containerd::runc::v1::CheckpointOptions o;
    if (o.ParseFromString(r.options().value())) {
      std::vector<std::string> ns(o.empty_namespaces().begin(), o.empty_namespaces().end());
      (void)ns;
    }
  }
}

template <typename Req, typename Call>
void simple(const std::string& payload, Call call) {
  Req r;
  if (!decode(r, payload)) return;
  expect_only_errors([&] { call(r); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  Fixture& f = fixture();
  std::string payload(reinterpret_cast<const char*>(data + 1), size - 1);
  auto& s = f.svc;
  switch (data[0] % 17) {
    case 0: fuzz_create(f, payload); break;
    case 1: simple<task::StartRequest>(payload, [&](auto& r) { s.start(r); }); break;
    case 2: simple<task::StateRequest>(payload, [&](auto& r) { s.state(r); }); break;
    case 3: simple<task::DeleteRequest>(payload, [&](auto& r) { s.remove(r); }); break;
    case 4: simple<task::PidsRequest>(payload, [&](auto& r) { s.pids(r); }); break;
    case 5: simple<task::WaitRequest>(payload, [&](auto& r) { s.wait(r); }); break;
    case 6: simple<task::StatsRequest>(payload, [&](auto& r) { s.stats(r); }); break;
    case 7: simple<task::ConnectRequest>(payload, [&](auto& r) { s.connect(r); }); break;
    case 8: simple<task::KillRequest>(payload, [&](auto& r) { s.kill(r); }); break;
    case 9: fuzz_exec(f, payload); break;
    case 10: simple<task::PauseRequest>(payload, [&](auto& r) { s.pause(r); }); break;
    case 11: simple<task::ResumeRequest>(payload, [&](auto& r) { s.resume(r); }); break;
    case 12: simple<task::CloseIORequest>(payload, [&](auto& r) { s.close_io(r); }); break;
    case 13: simple<task::ResizePtyRequest>(payload, [&](auto& r) { s.resize_pty(r); }); break;
    case 14: fuzz_update(f, payload); break;
    case 15: fuzz_checkpoint(f, payload); break;
    case 16: simple<task::ShutdownRequest>(payload, [&](auto& r) { s.shutdown(r); }); break;
  }
  return 0;
}
