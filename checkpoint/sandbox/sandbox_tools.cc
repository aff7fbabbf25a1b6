#include "checkpoint/sandbox/sandbox_tools.h"

#include <elf.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <regex>

#include "checkpoint/agent/sandbox_agent.h"
#include "checkpoint/programs/shim_files.h"
#include "common/error.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

std::string default_sandbox_agent_path() {
  std::string p = find_beside_shim(kSandboxAgentName, X_OK);
  return p.empty() ? std::string(kPackagedLibexecDir) + "/" + kSandboxAgentName : p;
}

namespace {

// The program interpreter (PT_INTERP) of a 64-bit ELF executable.
std::string elf_interpreter(const fs::path& exe) {
  std::ifstream in(exe, std::ios::binary);
  Elf64_Ehdr eh{};
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64)
    throw Error(Code::FailedPrecondition, exe.string() + ": not a 64-bit ELF program");
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    in.seekg(static_cast<std::streamoff>(eh.e_phoff + static_cast<Elf64_Off>(i) * eh.e_phentsize));
    if (!in.read(reinterpret_cast<char*>(&ph), sizeof ph)) break;
    if (ph.p_type != PT_INTERP) continue;
    std::string s(ph.p_filesz, '\0');
    in.seekg(static_cast<std::streamoff>(ph.p_offset));
    if (!in.read(s.data(), static_cast<std::streamsize>(s.size()))) break;
    while (!s.empty() && s.back() == '\0') s.pop_back();
    return s;
  }
  throw Error(Code::FailedPrecondition, exe.string() + ": has no program interpreter (a static program needs no staging)");
}

void copy_in(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec)
    throw Error(Code::FailedPrecondition,
                "staging the sandbox tools: copy " + from.string() + " to " + to.string() + ": " + ec.message());
}

}  // namespace

void stage_sandbox_tools(const fs::path& dir, const std::string& agent) {
  if (::access(agent.c_str(), X_OK) != 0)
    throw Error(Code::FailedPrecondition,
                "sandbox agent " + agent + " is not an executable (needed for GPU checkpoints under runsc)");
  std::error_code ec;
  fs::create_directories(dir / "lib", ec);
  if (ec)
    throw Error(Code::FailedPrecondition, "staging the sandbox tools: mkdir " + (dir / "lib").string() + ": " + ec.message());
  fs::path interp = fs::canonical(elf_interpreter(agent), ec);
  if (ec) throw Error(Code::FailedPrecondition, "the loader of " + agent + ": " + ec.message());
  copy_in(interp, dir / "ld.so");
  copy_in(agent, dir / kSandboxAgentName);
  // The C library family, from the loader's own directory: the agent needs libc; libcuda and
  // libnvidia-ml also link libm, libdl, libpthread and librt (stubs since glibc 2.34, but an
  // image's older copies must not be mixed with this libc).
  fs::path libdir = interp.parent_path();
  for (const char* n : {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libgcc_s.so.1"}) {
    fs::path p = libdir / n;
    if (!fs::exists(p)) {
      if (std::string(n) == "libc.so.6") throw Error(Code::FailedPrecondition, "staging the sandbox tools: no " + p.string());
      continue;
    }
    copy_in(fs::canonical(p), dir / "lib" / n);
  }
}

json sandbox_tools_mount(const fs::path& dir) {
  return {{"destination", kSandboxToolsMount}, {"type", "bind"}, {"source", dir.string()}, {"options", {"rbind", "ro"}}};
}

std::vector<std::string> SandboxAgent::argv(const std::vector<std::string>& args,
                                            const std::vector<std::string>& exec_flags) const {
  const std::string m = kSandboxToolsMount;
  std::string libpath = m + "/lib";
  for (const auto& d : t_.lib_dirs) libpath += ":" + d;
  std::vector<std::string> a = t_.runsc;
  // Root in the sandbox: reading other processes' fds and the driver's checkpoint calls need it.
  a.insert(a.end(), {"exec", "--user=0:0"});
  a.insert(a.end(), exec_flags.begin(), exec_flags.end());
  a.insert(a.end(), {t_.container_id, m + "/ld.so", "--library-path", libpath, m + "/" + kSandboxAgentName});
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

json SandboxAgent::call(const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                        const std::vector<std::string>& exec_flags) {
  if (timeout.count() == 0) timeout = t_.timeout;
  const std::string what = "nvproxy-sandbox-agent " + (args.empty() ? std::string() : args[0]) + " in container \"" +
                           t_.container_id + "\" (runsc exec)";
  RunResult r;
  try {
    r = runner_.run({.argv = argv(args, exec_flags), .new_process_group = true, .timeout = timeout});
  } catch (const Error& e) {
    throw Error(Code::FailedPrecondition, "cannot run " + what + ": " + e.what());
  }
  if (r.timed_out)
    throw DeadlineError("runsc exec " + std::string(kSandboxAgentName) + (args.empty() ? "" : " " + args[0]),
                        "container \"" + t_.container_id + "\"", timeout, r.killed_pgid,
                        "killed runsc exec (pgid " + std::to_string(r.killed_pgid) + ")");
  json j = json::parse(r.out, nullptr, false);
  if (j.is_object() && (r.ok() || (r.exit_code == kAgentDriverRefused && j.contains("error")))) return j;
  if (j.is_object() && j.contains("error"))
    throw Error(Code::FailedPrecondition, what + ": " + j["error"].value("detail", j["error"].dump()));
  throw Error(Code::FailedPrecondition, what + ": " + r.describe() + (r.out.empty() ? "" : "; stdout: " + r.out.substr(0, 300)));
}

std::vector<pid_t> SandboxLister::list() {
  json j = a_.call({"list"});
  std::vector<pid_t> pids;
  for (const auto& p : j.value("pids", json::array())) pids.push_back(p.get<pid_t>());
  return pids;
}

json SandboxHolderScanner::scan_json(const std::vector<pid_t>& pids) {
  std::vector<std::string> args{"scan"};
  for (const auto& g : globs_) args.insert(args.end(), {"--glob", g});
  for (pid_t p : pids) args.push_back(std::to_string(p));
  json j = a_.call(args);
  if (j.contains("error"))
    throw Error(Code::FailedPrecondition, "scan in container \"" + a_.target().container_id + "\": " + j["error"].dump());
  std::lock_guard lk(mu_);
  last_ = j;
  for (const auto& i : j.value("info", json::array()))
    infos_[i.at("pid").get<pid_t>()] = ProcInfo{.pid = i.at("pid").get<pid_t>(),
                                                .ppid = i.value("ppid", 0),
                                                .name = i.value("name", ""),
                                                .cmdline = i.value("cmdline", ""),
                                                .exe = i.value("exe", ""),
                                                .maps_libcuda = i.value("maps_libcuda", false),
                                                .maps_libnvml = i.value("maps_libnvml", false),
                                                .cuda_ipc_file = i.value("cuda_ipc_file", ""),
                                                .unheld_lib = i.value("unheld_lib", "")};
  return j;
}

std::vector<Holder> SandboxHolderScanner::scan(const std::vector<pid_t>& pids) {
  json j = scan_json(pids);
  std::vector<Holder> out;
  for (const auto& h : j.value("holders", json::array()))
    out.push_back(Holder{.pid = h.at("pid").get<pid_t>(),
                         .name = h.value("name", ""),
                         .cmdline = h.value("cmdline", ""),
                         .kind = h.value("kind", "fd") == "mapping" ? HolderKind::Mapping : HolderKind::Fd,
                         .fd = h.value("fd", -1),
                         .path = h.value("path", "")});
  return out;
}

std::optional<ProcInfo> SandboxHolderScanner::info(pid_t pid) {
  {
    std::lock_guard lk(mu_);
    if (auto it = infos_.find(pid); it != infos_.end()) return it->second;
  }
  scan_json({pid});
  std::lock_guard lk(mu_);
  if (auto it = infos_.find(pid); it != infos_.end()) return it->second;
  return std::nullopt;
}

std::optional<json> SandboxHolderScanner::last() const {
  std::lock_guard lk(mu_);
  return last_;
}

std::string SandboxCudaToggler::describe() {
  return "driver API inside the gVisor sandbox (" + std::string(kSandboxToolsMount) + "/" + kSandboxAgentName + ", libcuda.so.1)";
}

json SandboxCudaToggler::op(pid_t pid, const std::string& name, std::vector<std::string> extra,
                            std::chrono::milliseconds timeout) {
  std::vector<std::string> args{"cuda", name, std::to_string(pid)};
  args.insert(args.end(), extra.begin(), extra.end());
  json j = a_.call(args, timeout);
  if (j.contains("error")) {
    const json& e = j["error"];
    throw CudaError(pid, name, e.value("code", -1), e.value("name", "unknown"), e.value("detail", ""));
  }
  return j;
}

CudaState SandboxCudaToggler::get_state(pid_t pid) {
  json j = op(pid, "get-state", {}, {});
  std::string s = j.value("state", "");
  for (CudaState st : {CudaState::Running, CudaState::Locked, CudaState::Checkpointed, CudaState::Failed})
    if (s == state_name(st)) return st;
  throw CudaError(pid, "get-state", -1, "unexpected answer", j.dump());
}

void SandboxCudaToggler::lock(pid_t pid, unsigned timeout_ms) {
  op(pid, "lock", {"--timeout", std::to_string(timeout_ms)}, std::chrono::milliseconds(timeout_ms) + a_.target().timeout);
}
void SandboxCudaToggler::checkpoint(pid_t pid) {
  op(pid, "checkpoint", {}, long_);
}
void SandboxCudaToggler::restore(pid_t pid, const DeviceMap& map) {
  if (!map.empty()) throw Error(Code::Unimplemented, describe() + " cannot restore onto other GPUs");
  op(pid, "restore", {}, long_);
}
void SandboxCudaToggler::unlock(pid_t pid) {
  op(pid, "unlock", {}, {});
}

std::map<pid_t, std::set<std::string>> SandboxGpuProbe::gpus_by_pid() {
  std::optional<json> j = s_.last();
  if (!j) j = s_.scan_json(l_.list());
  static const std::regex gpu_dev("^/dev/nvidia[0-9]+$");
  std::map<pid_t, std::set<std::string>> out;
  for (const auto& h : j->value("holders", json::array())) {
    std::string path = h.value("path", "");
    if (std::regex_match(path, gpu_dev)) out[h.at("pid").get<pid_t>()].insert(path);
  }
  return out;
}

bool SandboxFileIdentity::same_file(pid_t pid_a, int fd_a, pid_t pid_b, int fd_b) {
  std::lock_guard lk(mu_);
  auto key = std::make_pair(pid_a, pid_b);
  auto it = asked_.find(key);
  if (it == asked_.end()) {
    std::map<int, int> pairs;
    std::vector<std::string> args{"shared", std::to_string(pid_a), std::to_string(pid_b)};
    for (const auto& g : globs_) args.insert(args.end(), {"--glob", g});
    // An answer that cannot be had counts as "not the same": the holder is refused, and the
    // refusal names the agent's error (unknown_because).
    try {
      json j = a_.call(args, {}, {"--cap=CAP_SYS_PTRACE"});
      if (j.contains("error")) failed_[key] = "nvproxy-sandbox-agent shared: " + j["error"].value("detail", j["error"].dump());
      for (const auto& p : j.value("shared", json::array())) pairs[p.at(0).get<int>()] = p.at(1).get<int>();
    } catch (const Error& e) {
      failed_[key] = e.what();
    }
    it = asked_.emplace(key, std::move(pairs)).first;
  }
  auto m = it->second.find(fd_a);
  return m != it->second.end() && m->second == fd_b;
}

std::string SandboxFileIdentity::unknown_because(pid_t pid_a, pid_t pid_b) {
  std::lock_guard lk(mu_);
  auto it = failed_.find({pid_a, pid_b});
  return it == failed_.end() ? std::string() : it->second;
}

void drop_in_sandbox(SandboxAgent& agent, const ReleasePlan& plan, std::chrono::milliseconds timeout) {
  for (const auto& p : plan.processes) {
    std::vector<std::string> args{"drop", std::to_string(p.pid)};
    for (int fd : p.fds) args.insert(args.end(), {"--fd", std::to_string(fd)});
    for (const auto& path : p.paths) args.insert(args.end(), {"--path", path});
    // Not an ancestor of the child: ptrace needs the capability (gVisor applies Yama's scope 1).
    json j = agent.call(args, timeout, {"--cap=CAP_SYS_PTRACE"});
    if (!j.value("ok", false))
      throw Error(Code::FailedPrecondition, "dropping the inherited GPU device files of pid " + std::to_string(p.pid) +
                                                " in container \"" + agent.target().container_id + "\": " + j.dump());
  }
}

std::map<pid_t, CommFinding> SandboxCommProbe::scan(const std::vector<pid_t>& pids) {
  json j = s_.scan_json(pids);
  std::map<pid_t, CommFinding> out;
  for (const auto& c : j.value("comm", json::array())) {
    CommFinding f;
    f.evidence = c.value("evidence", std::vector<std::string>{});
    for (const auto& p : c.value("tcp_peers", json::array())) f.tcp_peers.insert(p.get<pid_t>());
    f.nccl = c.value("nccl", false);
    out[c.at("pid").get<pid_t>()] = f;
  }
  return out;
}

}  // namespace nvproxy::checkpoint
