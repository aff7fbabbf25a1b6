#include "checkpoint/cuda_helper_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>

#include "checkpoint/cuda_checkpoint_bin.h"
#include "checkpoint/cuda_helper_protocol.h"
#include "common/error.h"

namespace nvproxy::checkpoint {

using nlohmann::json;
namespace fs = std::filesystem;

std::string default_cuda_helper_path() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path dir = self.parent_path();
    for (const fs::path& p :
         {dir / "nvproxy-cuda-helper", dir.parent_path() / "libexec/containerd-shim-nvproxy/nvproxy-cuda-helper"}) {
      if (::access(p.c_str(), X_OK) == 0) return p.string();
    }
  }
  return "/usr/libexec/containerd-shim-nvproxy/nvproxy-cuda-helper";
}

struct CudaHelper::Instance {
  pid_t pid = 0;
  UniqueFd sock;  // our end of the socketpair that is the helper's stdin and stdout
  std::thread reader;
  std::mutex m;
  std::condition_variable cv;
  bool ended = false;
  std::string end_reason;
  std::map<std::uint64_t, std::promise<json>> pending;
  std::mutex write_mu;
};

CudaHelper::CudaHelper(ProcessRunner& runner, std::vector<std::string> argv) : runner_(runner), argv_(std::move(argv)) {}

CudaHelper::~CudaHelper() {
  std::vector<std::shared_ptr<Instance>> all = std::move(dead_);
  if (inst_) all.push_back(std::move(inst_));
  for (auto& i : all) stop(i);
}

void CudaHelper::stop(const std::shared_ptr<Instance>& inst) {
  ::shutdown(inst->sock.get(), SHUT_WR);  // the helper's EOF: it answers what it has, then exits
  {
    std::unique_lock lk(inst->m);
    if (!inst->cv.wait_for(lk, std::chrono::seconds(10), [&] { return inst->ended; })) {
      ::kill(inst->pid, SIGKILL);  // still not reaped (ended is set only after the wait), so still ours
    }
  }
  if (inst->reader.joinable()) inst->reader.join();
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
    inst->pid = runner_.start({.argv = argv_, .stdin_fd = theirs.get(), .stdout_fd = theirs.get(), .stderr_fd = STDERR_FILENO});
  } catch (const Error& e) {
    throw Error(Code::FailedPrecondition, "cannot start the CUDA helper \"" + argv_.front() + "\": " + e.what());
  }
  inst->sock = std::move(ours);
  inst->reader = std::thread([this, inst] { read_loop(inst); });
  inst_ = inst;
  return inst;
}

void CudaHelper::read_loop(const std::shared_ptr<Instance>& inst) {
  helper_protocol::read_lines(inst->sock.get(), [&](std::string&& line) {
    json resp = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!resp.is_object() || !resp["id"].is_number_unsigned()) return;  // nothing waits for it
    std::lock_guard lk(inst->m);
    auto it = inst->pending.find(resp["id"].get<std::uint64_t>());
    if (it == inst->pending.end()) return;
    it->second.set_value(std::move(resp));
    inst->pending.erase(it);
  });
  // The helper closed its end: it exited (or is about to). Reap it, then fail whatever still waits.
  RunResult r = result_from_status(runner_.wait(inst->pid));
  std::lock_guard lk(inst->m);
  inst->ended = true;
  inst->end_reason = "nvproxy-cuda-helper (pid " + std::to_string(inst->pid) + ") ended: " + r.describe();
  for (auto& [id, p] : inst->pending) p.set_exception(std::make_exception_ptr(Error(Code::Unavailable, inst->end_reason)));
  inst->pending.clear();
  inst->cv.notify_all();
}

json CudaHelper::call(const std::string& op, json args) {
  std::shared_ptr<Instance> inst = running();
  std::uint64_t id;
  {
    std::lock_guard lk(mu_);
    id = next_id_++;
  }
  args["id"] = id;
  args["op"] = op;
  std::future<json> answer;
  {
    std::lock_guard lk(inst->m);
    if (inst->ended) throw Error(Code::Unavailable, inst->end_reason);
    answer = inst->pending[id].get_future();
  }
  std::string line = args.dump() + "\n";
  {
    std::lock_guard lk(inst->write_mu);
    size_t off = 0;
    while (off < line.size()) {
      ssize_t n = ::send(inst->sock.get(), line.data() + off, line.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the helper is gone: the reader fails this call with the reason
      off += static_cast<size_t>(n);
    }
  }
  json resp = answer.get();  // throws the reader's Error if the helper ended first
  if (resp.value("ok", false)) return resp.value("result", json());
  helper_protocol::throw_error(resp.value("error", json::object()));
}

std::string HelperToggler::describe() {
  return helper_->call("describe").get<std::string>() + " via nvproxy-cuda-helper";
}

CudaState HelperToggler::get_state(pid_t pid) {
  int s = helper_->call("get_state", {{"pid", pid}}).get<int>();
  if (s < 0 || s > static_cast<int>(CudaState::Failed))
    throw Error(Code::Internal, "nvproxy-cuda-helper answered an unknown CUDA state " + std::to_string(s));
  return static_cast<CudaState>(s);
}

void HelperToggler::lock(pid_t pid, unsigned timeout_ms) {
  helper_->call("lock", {{"pid", pid}, {"timeout_ms", timeout_ms}});
}
void HelperToggler::checkpoint(pid_t pid) {
  helper_->call("checkpoint", {{"pid", pid}});
}
void HelperToggler::restore(pid_t pid) {
  helper_->call("restore", {{"pid", pid}});
}
void HelperToggler::unlock(pid_t pid) {
  helper_->call("unlock", {{"pid", pid}});
}

std::map<pid_t, std::set<std::string>> HelperGpuUsageProbe::gpus_by_pid() {
  json r = helper_->call("gpus_by_pid");
  std::map<pid_t, std::set<std::string>> out;
  try {
    for (const auto& [pid, gpus] : r.items()) out[static_cast<pid_t>(std::stol(pid))] = gpus.get<std::set<std::string>>();
  } catch (const std::exception& e) {
    throw Error(Code::Internal, std::string("nvproxy-cuda-helper sent a malformed GPU usage answer: ") + e.what());
  }
  return out;
}

GpuHostFacts HelperGpuUsageProbe::host_facts() {
  return host_facts_from_json(helper_->call("host_facts"));
}

CudaTools make_cuda_tools(const CheckpointConfig& cfg, ProcessRunner& runner) {
  CudaTools t;
  std::string prog = cfg.cuda_helper.empty() ? default_cuda_helper_path() : cfg.cuda_helper;
  t.helper =
      std::make_shared<CudaHelper>(runner, std::vector<std::string>{prog, "--libcuda", cfg.libcuda, "--libnvml", cfg.libnvml});
  if (cfg.cuda == "driver-api")
    t.toggler = std::make_unique<HelperToggler>(t.helper);
  else if (cfg.cuda == "cuda-checkpoint")
    t.toggler = std::make_unique<CudaCheckpointBinToggler>(runner, cfg.cuda_checkpoint_path);
  else if (cfg.cuda != "none")  // none: no CUDA toggling, e.g. when the runtime toggles CUDA itself
    throw Error(Code::InvalidArgument, "checkpoint.cuda: \"" + cfg.cuda + "\" is not one of driver-api, cuda-checkpoint, none");
  t.probe = std::make_unique<HelperGpuUsageProbe>(t.helper);
  return t;
}

}  // namespace nvproxy::checkpoint
