#include "checkpoint/programs/cuda_helper_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "checkpoint/programs/cuda_checkpoint_bin.h"
#include "checkpoint/programs/shim_files.h"
#include "checkpoint/shared/cuda_helper_wire.h"
#include "common/error.h"
#include "common/ttrpc/client.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

std::string default_cuda_helper_path() {
  std::string p = find_beside_shim("nvproxy-cuda-helper", X_OK);
  return p.empty() ? std::string(kPackagedLibexecDir) + "/nvproxy-cuda-helper" : p;
}

struct CudaHelper::Instance {
  pid_t pid = 0;
  std::unique_ptr<ttrpc::Client> client;  // over our end of the socketpair that is the helper's stdin
  std::thread watcher;                    // reaps the helper and records how it ended
  std::mutex m;
  std::condition_variable cv;
  bool ended = false;
  std::string end_reason;
};

CudaHelper::CudaHelper(ProcessRunner& runner, std::vector<std::string> argv) : runner_(runner), argv_(std::move(argv)) {}

CudaHelper::~CudaHelper() {
  std::vector<std::shared_ptr<Instance>> all = std::move(dead_);
  if (inst_) all.push_back(std::move(inst_));
  for (auto& i : all) stop(i);
}

void CudaHelper::stop(const std::shared_ptr<Instance>& inst) {
  inst->client->close();  // the helper's server sees its only connection end and exits
  {
    std::unique_lock lk(inst->m);
    if (!inst->cv.wait_for(lk, std::chrono::seconds(10), [&] { return inst->ended; })) {
      ::kill(inst->pid, SIGKILL);  // still not reaped (ended is set only after the wait), so still ours
    }
  }
  if (inst->watcher.joinable()) inst->watcher.join();
}

pid_t CudaHelper::pid() {
  std::lock_guard lk(mu_);
  return inst_ ? inst_->pid : 0;
}

std::shared_ptr<CudaHelper::Instance> CudaHelper::running() {
  std::lock_guard lk(mu_);
  if (inst_) {
    std::lock_guard ilk(inst_->m);
    if (!inst_->ended) return inst_;
  }
  if (inst_) dead_.push_back(std::move(inst_));
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    throw Error(Code::Internal, std::string("socketpair for nvproxy-cuda-helper: ") + std::strerror(errno));
  UniqueFd ours(sv[0]), theirs(sv[1]);
  auto inst = std::make_shared<Instance>();
  try {
    inst->pid = runner_.start({.argv = argv_, .stdin_fd = theirs.get(), .stdout_fd = STDERR_FILENO, .stderr_fd = STDERR_FILENO});
  } catch (const Error& e) {
    throw Error(Code::FailedPrecondition, "cannot start the CUDA helper \"" + argv_.front() + "\": " + e.what());
  }
  inst->client = ttrpc::Client::adopt(std::move(ours), "nvproxy-cuda-helper (pid " + std::to_string(inst->pid) + ")");
  inst->watcher = std::thread([this, inst] {
    RunResult r = result_from_status(runner_.wait(inst->pid));
    std::lock_guard lk(inst->m);
    inst->ended = true;
    inst->end_reason = "nvproxy-cuda-helper (pid " + std::to_string(inst->pid) + ") ended: " + r.describe();
    inst->cv.notify_all();
  });
  inst_ = inst;
  return inst;
}

std::string CudaHelper::call(const std::string& method, const std::string& request, std::chrono::milliseconds timeout) {
  std::shared_ptr<Instance> inst = running();
  try {
    return inst->client->call(helper_wire::kService, method, request, {}, timeout);
  } catch (const ttrpc::StatusError& e) {
    if (e.code() != Code::Unavailable) helper_wire::rethrow(e);
    throw_ended(inst, method);
    throw;
  } catch (const Error& e) {  // the request could not be written
    if (e.code() != Code::Unavailable) throw;
    throw_ended(inst, method);
    throw;
  }
}

void CudaHelper::throw_ended(const std::shared_ptr<Instance>& inst, const std::string& method) {
  // The connection broke: the helper died or is dying. Once it has been reaped, say how it ended;
  // the next call then starts a fresh one.
  std::unique_lock lk(inst->m);
  if (inst->cv.wait_for(lk, std::chrono::seconds(5), [&] { return inst->ended; }))
    throw Error(Code::Unavailable, method + ": " + inst->end_reason);
}

namespace {

namespace pb = nvproxy::cuda::v1;

template <typename Msg>
Msg parse_answer(const std::string& method, const std::string& bytes) {
  Msg m;
  if (!m.ParseFromString(bytes)) throw Error(Code::Internal, "nvproxy-cuda-helper sent a malformed " + method + " answer");
  return m;
}

// Calls that only read: NVML and the driver answer these at once.
constexpr std::chrono::milliseconds kQueryTimeout{60000};

}  // namespace

std::string HelperToggler::describe() {
  auto r =
      parse_answer<pb::DescribeResponse>("Describe", helper_->call("Describe", pb::Empty().SerializeAsString(), kQueryTimeout));
  return r.toggler() + " via nvproxy-cuda-helper";
}

CudaState HelperToggler::get_state(pid_t pid) {
  pb::ProcessRequest req;
  req.set_pid(pid);
  auto r = parse_answer<pb::StateResponse>("GetState", helper_->call("GetState", req.SerializeAsString(), kQueryTimeout));
  return helper_wire::state_from_wire(r.state());
}

void HelperToggler::transition(const char* method, pid_t pid, unsigned lock_timeout_ms, std::chrono::milliseconds deadline,
                               const DeviceMap& map) {
  pb::ProcessRequest req;
  req.set_pid(pid);
  req.set_timeout_ms(lock_timeout_ms);
  for (const auto& p : map) {
    auto* o = req.add_device_map();
    o->set_from(p.from);
    o->set_to(p.to);
  }
  parse_answer<pb::Empty>(method, helper_->call(method, req.SerializeAsString(), deadline));
}

void HelperToggler::lock(pid_t pid, unsigned timeout_ms) {
  // The driver gives up on its own at timeout_ms; the margin covers the helper's start.
  transition("Lock", pid, timeout_ms, std::chrono::milliseconds(timeout_ms) + kQueryTimeout);
}
void HelperToggler::checkpoint(pid_t pid) {
  transition("Checkpoint", pid, 0, toggle_timeout_);
}
void HelperToggler::restore(pid_t pid, const DeviceMap& map) {
  transition("Restore", pid, 0, toggle_timeout_, map);
}
void HelperToggler::unlock(pid_t pid) {
  transition("Unlock", pid, 0, kQueryTimeout);
}

std::vector<pid_t> HelperHold::call_hold(const std::vector<pid_t>& pids, Mode mode) {
  pb::HoldRequest req;
  for (pid_t p : pids) req.add_pids(p);
  req.set_frozen(mode == Mode::Frozen);
  req.set_stopped(mode == Mode::Stopped);
  req.set_settle(mode == Mode::Settle);
  // Stopping a thread takes microseconds, unless it is in an uninterruptible wait: the helper gives
  // up on one after 10 s.
  auto r = parse_answer<pb::HoldResponse>("Hold", helper_->call("Hold", req.SerializeAsString(), std::chrono::seconds(30)));
  return {r.ended().begin(), r.ended().end()};
}

void HelperHold::release() {
  release(std::vector<pid_t>{});
}

void HelperHold::release(const std::vector<pid_t>& pids) {
  pb::ReleaseRequest req;
  for (pid_t p : pids) req.add_pids(p);
  parse_answer<pb::Empty>("Release", helper_->call("Release", req.SerializeAsString(), kQueryTimeout));
}

std::map<pid_t, std::set<std::string>> HelperGpuUsageProbe::gpus_by_pid() {
  auto r = parse_answer<pb::GpusByPidResponse>("GpusByPid",
                                               helper_->call("GpusByPid", pb::Empty().SerializeAsString(), kQueryTimeout));
  std::map<pid_t, std::set<std::string>> out;
  for (const auto& [pid, list] : r.gpus()) out[pid] = std::set<std::string>(list.uuids().begin(), list.uuids().end());
  return out;
}

GpuHostFacts HelperGpuUsageProbe::host_facts() {
  return helper_wire::from_wire(
      parse_answer<pb::HostFacts>("HostFacts", helper_->call("HostFacts", pb::Empty().SerializeAsString(), kQueryTimeout)));
}

std::shared_ptr<CudaHelper> make_cuda_helper(const CheckpointConfig& cfg, ProcessRunner& runner) {
  std::string prog = cfg.cuda_helper.empty() ? default_cuda_helper_path() : cfg.cuda_helper;
  return std::make_shared<CudaHelper>(runner, std::vector<std::string>{prog, "--libcuda", cfg.libcuda, "--libnvml", cfg.libnvml});
}

CudaTools make_cuda_tools(const CheckpointConfig& cfg, ProcessRunner& runner) {
  CudaTools t;
  t.helper = make_cuda_helper(cfg, runner);
  if (cfg.cuda == "driver-api")
    t.toggler = std::make_unique<HelperToggler>(t.helper, std::chrono::milliseconds(cfg.toggle_timeout_ms));
  else if (cfg.cuda == "cuda-checkpoint")
    t.toggler = std::make_unique<CudaCheckpointBinToggler>(runner, cfg.cuda_checkpoint_path);
  else if (cfg.cuda != "none")  // none: no CUDA toggling, e.g. when the runtime toggles CUDA itself
    throw Error(Code::InvalidArgument, "checkpoint.cuda: \"" + cfg.cuda + "\" is not one of driver-api, cuda-checkpoint, none");
  t.probe = std::make_unique<HelperGpuUsageProbe>(t.helper);
  return t;
}

}  // namespace nvproxy::checkpoint
