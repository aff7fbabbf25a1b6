#include "checkpoint/agent/sandbox_agent.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "checkpoint/agent/drop_in_place.h"
#include "checkpoint/driver/cuda_driver_api.h"
#include "checkpoint/shared/comm_probe.h"
#include "checkpoint/shared/holder_scan.h"
#include "common/error.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A process that has exited and waits for its parent's wait (a job runner's finished worker whose
// parent is locked): it holds no files and no CUDA, and is no longer among the container's processes.
bool is_zombie(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && (stat[close + 2] == 'Z' || stat[close + 2] == 'X');
}

std::vector<pid_t> all_pids_but_self() {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string n = e.path().filename().string();
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) continue;
    auto p = static_cast<pid_t>(std::strtol(n.c_str(), nullptr, 10));
    if (p != ::getpid() && !is_zombie(n)) pids.push_back(p);
  }
  if (ec) throw Error(Code::Internal, "cannot list /proc in the sandbox: " + ec.message());
  std::sort(pids.begin(), pids.end());
  return pids;
}

// A decimal number of at least `min`; `what` names it in the error ("pid", "fd").
long parse_number(const std::string& s, long min, const char* what) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != 0 || errno != 0 || v < min || v > INT32_MAX)
    throw Error(Code::InvalidArgument, std::string("not a ") + what + ": \"" + s + "\"");
  return v;
}

pid_t parse_pid(const std::string& s) {
  return static_cast<pid_t>(parse_number(s, 1, "pid"));
}

// "--glob G" pairs (default: every NVIDIA device) and the other arguments, in order.
struct GlobArgs {
  std::vector<std::string> globs;
  std::vector<std::string> rest;
};
GlobArgs split_globs(const std::vector<std::string>& args) {
  GlobArgs g;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--glob" && i + 1 < args.size())
      g.globs.push_back(args[++i]);
    else
      g.rest.push_back(args[i]);
  }
  if (g.globs.empty()) g.globs.emplace_back("/dev/nvidia*");
  return g;
}

json scan(const std::vector<std::string>& args) {
  GlobArgs a = split_globs(args);
  std::vector<pid_t> pids;
  for (const auto& p : a.rest) pids.push_back(parse_pid(p));
  ProcHolderScanner scanner(a.globs);
  json holders = json::array(), info = json::array(), comm = json::array();
  for (const Holder& h : scanner.scan(pids))
    holders.push_back({{"pid", h.pid},
                       {"name", h.name},
                       {"cmdline", h.cmdline},
                       {"kind", std::string(kind_name(h.kind))},
                       {"fd", h.fd},
                       {"path", h.path}});
  for (pid_t p : pids)
    if (auto pi = scanner.info(p))
      info.push_back({{"pid", pi->pid},
                      {"ppid", pi->ppid},
                      {"name", pi->name},
                      {"cmdline", pi->cmdline},
                      {"exe", pi->exe},
                      {"maps_libcuda", pi->maps_libcuda},
                      {"maps_libnvml", pi->maps_libnvml},
                      {"cuda_ipc_file", pi->cuda_ipc_file},
                      {"unheld_lib", pi->unheld_lib}});
  ProcCommProbe probe;
  for (const auto& [pid, f] : probe.scan(pids))
    comm.push_back({{"pid", pid}, {"evidence", f.evidence}, {"tcp_peers", f.tcp_peers}, {"nccl", f.nccl}});
  return {{"holders", holders}, {"info", info}, {"comm", comm}};
}

int cuda(const std::vector<std::string>& args, std::ostream& out) {
  if (args.size() < 2) throw Error(Code::InvalidArgument, "usage: cuda OP PID [--timeout MS] [--libcuda LIB]");
  const std::string& op = args[0];
  pid_t pid = parse_pid(args[1]);
  unsigned timeout_ms = 10000;
  std::string lib = "libcuda.so.1";
  for (size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "--timeout" && i + 1 < args.size())
      timeout_ms = static_cast<unsigned>(std::strtoul(args[++i].c_str(), nullptr, 10));
    else if (args[i] == "--libcuda" && i + 1 < args.size())
      lib = args[++i];
    else
      throw Error(Code::InvalidArgument, "cuda: unknown argument \"" + args[i] + "\"");
  }
  DriverApiToggler t(lib);
  try {
    if (op == "get-state") {
      out << json{{"state", std::string(state_name(t.get_state(pid)))}}.dump() << "\n";
      return 0;
    }
    if (op == "lock")
      t.lock(pid, timeout_ms);
    else if (op == "checkpoint")
      t.checkpoint(pid);
    else if (op == "restore")
      t.restore(pid, {});
    else if (op == "unlock")
      t.unlock(pid);
    else
      throw Error(Code::InvalidArgument, "cuda: unknown operation \"" + op + "\"");
  } catch (const CudaError& e) {
    out << json{{"error", {{"op", op}, {"code", e.driver_code()}, {"name", e.driver_name()}, {"detail", e.detail()}}}}.dump()
        << "\n";
    return kAgentDriverRefused;
  }
  out << json{{"ok", true}}.dump() << "\n";
  return 0;
}

// drop PID [--fd N]... [--path DEVICE]...: the forked child's inherited fds and its mappings of
// those devices replaced in place (drop_in_place.h).
json drop(const std::vector<std::string>& args) {
  if (args.empty()) throw Error(Code::InvalidArgument, "usage: drop PID [--fd N]... [--path DEVICE]...");
  DropRequest req{.pid = parse_pid(args[0])};
  std::vector<std::string> paths;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--fd" && i + 1 < args.size())
      req.fds.push_back(static_cast<int>(parse_number(args[++i], 0, "fd")));
    else if (args[i] == "--path" && i + 1 < args.size())
      paths.push_back(args[++i]);
    else
      throw Error(Code::InvalidArgument, "drop: unknown argument \"" + args[i] + "\"");
  }
  if (!paths.empty()) req.mappings = mappings_of(req.pid, paths);
  drop_in_place(req);
  return {{"ok", true}, {"pid", req.pid}, {"fds", req.fds}, {"mappings", req.mappings.size()}};
}

// shared PID OTHER [--glob G]...: which of PID's device fds are OTHER's open files (shared_with).
json shared(const std::vector<std::string>& args) {
  GlobArgs a = split_globs(args);
  if (a.rest.size() != 2) throw Error(Code::InvalidArgument, "usage: shared PID OTHER [--glob G]...");
  pid_t pid = parse_pid(a.rest[0]), other = parse_pid(a.rest[1]);
  std::map<pid_t, std::vector<int>> fds;
  for (const Holder& h : ProcHolderScanner(a.globs).scan({pid, other}))
    if (h.kind == HolderKind::Fd) fds[h.pid].push_back(h.fd);
  json pairs = json::array();
  for (const auto& [mine, theirs] : shared_with(pid, fds[pid], other, fds[other])) pairs.push_back({mine, theirs});
  return {{"pid", pid}, {"other", other}, {"shared", pairs}};
}

}  // namespace

int sandbox_agent_main(const std::vector<std::string>& args, std::ostream& out) {
  try {
    if (args.empty())
      throw Error(Code::InvalidArgument, "usage: nvproxy-sandbox-agent list | scan ... | cuda ... | shared ... | drop ...");
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (args[0] == "list") {
      out << json{{"self", ::getpid()}, {"pids", all_pids_but_self()}}.dump() << "\n";
      return 0;
    }
    if (args[0] == "scan") {
      out << scan(rest).dump() << "\n";
      return 0;
    }
    if (args[0] == "cuda") return cuda(rest, out);
    if (args[0] == "shared") {
      out << shared(rest).dump() << "\n";
      return 0;
    }
    if (args[0] == "drop") {
      out << drop(rest).dump() << "\n";
      return 0;
    }
    throw Error(Code::InvalidArgument, "unknown request \"" + args[0] + "\"");
  } catch (const CudaError& e) {
    // The library could not be used at all (get-state of a non-CUDA process lands here too).
    out << json{{"error", {{"op", e.op()}, {"code", e.driver_code()}, {"name", e.driver_name()}, {"detail", e.detail()}}}}.dump()
        << "\n";
    return kAgentDriverRefused;
  } catch (const Error& e) {
    bool bad = e.code() == Code::InvalidArgument;
    out << json{{"error",
                 {{"op", args.empty() ? "" : args[0]},
                  {"code", -1},
                  {"name", bad ? "bad request" : "agent error"},
                  {"detail", e.what()}}}}
               .dump()
        << "\n";
    return bad ? kAgentBadRequest : kAgentDriverRefused;
  }
}

}  // namespace nvproxy::checkpoint
