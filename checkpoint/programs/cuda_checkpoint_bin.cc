#include "checkpoint/programs/cuda_checkpoint_bin.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

namespace nvproxy::checkpoint {

namespace {
std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t b = s.find_first_not_of(" \n");
  return b == std::string::npos ? "" : s.substr(b);
}

// The binary prints the driver's answer in prose; pick out "CUDA_ERROR_X" and/or the number after
// "error" or "code" if present.
CudaError error_from(pid_t pid, const std::string& op, const RunResult& r) {
  std::string text = trim(r.err.empty() ? r.out : r.err);
  std::string name;
  if (size_t at = text.find("CUDA_ERROR_"); at != std::string::npos) {
    size_t end = at;
    while (end < text.size() && (std::isupper(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
    name = text.substr(at, end - at);
  }
  int code = -1;
  std::string lower = text;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* word : {"error", "code"}) {
    for (size_t at = lower.find(word); at != std::string::npos && code < 0; at = lower.find(word, at + 1)) {
      size_t i = at + std::strlen(word), skipped = 0;
      while (i < lower.size() && !std::isdigit(static_cast<unsigned char>(lower[i])) && skipped < 4) ++i, ++skipped;
      if (i < lower.size() && std::isdigit(static_cast<unsigned char>(lower[i])))
        code = static_cast<int>(std::strtol(lower.c_str() + i, nullptr, 10));
    }
  }
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
    throw Error(Code::FailedPrecondition,
                "cannot run " + bin_ + " for CUDA " + op + " of pid " + std::to_string(pid) + ": " + e.what());
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
