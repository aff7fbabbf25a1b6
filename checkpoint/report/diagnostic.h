// What a checkpoint tells the user: when refused or failed, a text table (the error message
// containerd shows) and the same as JSON (checkpoint-diagnostic.json in the bundle); when done, the
// same JSON with verdict "done", the CUDA processes and the phase timings (tools read this, not logs).
//
//   checkpoint of container "sglang" refused: 2 processes still hold GPU devices after CUDA toggle
//   PID   NAME        CUDA STATE    FD             DEVICE           COMMAND
//   44    python3     running       17,18,21 +9    /dev/nvidiactl   python3 -m sglang.launch_server ...
//   91    nvidia-smi  (no CUDA)     3,map          /dev/nvidia0     nvidia-smi -l 1
// (one row per process and device, whatever number of fds hold it)
//   hint: pid 91 is not a CUDA process (NVML user?); stop it or exclude it before checkpointing
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/shared/holder_scan.h"

namespace nvproxy::checkpoint {

struct ProcessReport {
  pid_t pid = 0;
  std::string name, cmdline;
  std::string cuda_state;  // running | locked | checkpointed | failed | (no CUDA)
  std::vector<Holder> holders;
  std::vector<std::string> gpus;  // GPU UUIDs with compute contexts, when known
  std::string hint;               // one sentence, empty if none
  // A holder without CUDA whose device files are its CUDA ancestor's own open files (forked
  // without exec): that ancestor's pid, and which fds it inherited / opened itself.
  pid_t inherited_from = 0;
  std::vector<int> inherited_fds, own_fds;
};

struct PhaseTiming {
  std::string name;  // scan, classify, preflight, lock, checkpoint, verify, snapshot, resume, rollback
  double ms = 0;
};

// A process the rollback or resume could not bring back to running.
struct StuckProcess {
  pid_t pid = 0;
  std::string state;     // the CUDA state it is left in, as far as known
  std::string detail;    // what the driver answered
  int driver_code = -1;  // its CUresult, where the driver answered one
};

struct Diagnostic {
  std::string container;
  std::string verdict;  // "refused" | "failed" | "done"; empty for the read-only diagnose report
  std::string reason;   // e.g. "2 processes still hold GPU devices after CUDA toggle"
  std::vector<ProcessReport> processes;
  std::vector<PhaseTiming> phases;
  std::vector<pid_t> toggled;      // done: the CUDA processes checkpointed for the snapshot
  std::vector<pid_t> rolled_back;  // toggled pids brought back to running
  std::vector<StuckProcess> stuck;
  std::vector<std::string> warnings;
  nlohmann::json details = nlohmann::json::object();  // further findings, merged into the JSON ("space", ...)
};

// The table's rows of one process: one per device, (FD column, device): "3,5,7,9 +30,map" lists
// the first fds that hold it, how many more, and "map" when it is also mapped.
std::vector<std::pair<std::string, std::string>> group_by_device(const std::vector<Holder>& holders);

// "1 process" / "2 processes".
std::string count_processes(size_t n);
// " scan=46ms lock=1ms ...": the phases for a log line.
std::string phases_text(const std::vector<PhaseTiming>& phases);

std::string render_text(const Diagnostic& d);
nlohmann::json to_json(const Diagnostic& d);
// Atomically (temp + rename). Throws Error naming the file.
void write_json(const Diagnostic& d, const std::filesystem::path& file);

}  // namespace nvproxy::checkpoint
