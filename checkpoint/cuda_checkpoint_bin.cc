#include "checkpoint/cuda_checkpoint_bin.h"

#include <regex>

namespace nvproxy::checkpoint {

namespace {
std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t b = s.find_first_not_of(" \n");
  return b == std::string::npos ? "" : s.substr(b);
}

// The binary prints the driver's answer in prose; pick out "CUDA_ERROR_X" and/or a number if present.
CudaError error_from(pid_t pid, const std::string& op, const RunResult& r) {
  std::string text = trim(r.err.empty() ? r.out : r.err);
  std::smatch m;
  std::string name;
  int code = -1;
  if (std::regex_search(text, m, std::regex("CUDA_ERROR_[A-Z_]+"))) name = m.str();
  if (std::regex_search(text, m, std::regex("(error|code)[^0-9]{0,4}([0-9]+)", std::regex::icase)))
    code = std::stoi(m.str(2));
  if (name.empty()) name = "cuda-checkpoint " + r.describe();
  return CudaError(pid, op, code, name, text.size() > 300 ? text.substr(0, 300) + "..." : text);
}
}  // namespace

RunResult CudaCheckpointBinToggler::run(pid_t pid, const std::string& op, std::vector<std::string> args) {
  std::vector<std::string> argv{bin_};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--pid", std::to_string(pid)});
  RunResult r;
  try {
    r = runner_.run({.argv = argv});
  } catch (const Error& e) {
    throw Error(Code::FailedPrecondition, "cannot run " + bin_ + " for CUDA " + op + " of pid " +
                                              std::to_string(pid) + ": " + e.what());
  }
  if (!r.ok()) throw error_from(pid, op, r);
  return r;
}

void CudaCheckpointBinToggler::action(pid_t pid, const std::string& op, std::vector<std::string> extra) {
  std::vector<std::string> args{"--action", op};
  args.insert(args.end(), extra.begin(), extra.end());
  run(pid, op, args);
}

void CudaCheckpointBinToggler::lock(pid_t pid, unsigned timeout_ms) {
  action(pid, "lock", {"--timeout", std::to_string(timeout_ms)});
}

CudaState CudaCheckpointBinToggler::get_state(pid_t pid) {
  RunResult r = run(pid, "get-state", {"--get-state"});
  std::string s = trim(r.out);
  for (CudaState st : {CudaState::Running, CudaState::Locked, CudaState::Checkpointed, CudaState::Failed})
    if (s == state_name(st)) return st;
  throw CudaError(pid, "get-state", -1, "unexpected output", s.substr(0, 200));
}

}  // namespace nvproxy::checkpoint
