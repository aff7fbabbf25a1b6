// Running another program to ask it something (containerd --version, criu check), always under a
// deadline: a command that hangs costs the asker its deadline, never more.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/process.h"

namespace nvproxy::node {

struct ProbeResult {
  bool ran = false;    // it was found and started
  int exit_code = -1;  // its exit code (-1: killed or not run)
  std::string out, err;
  std::string problem;  // why it gave no answer ("not found in PATH", "did not finish within 10 s"); "" when it exited 0
  [[nodiscard]] bool ok() const { return ran && exit_code == 0; }
};

inline constexpr std::chrono::milliseconds kProbeDeadline{10 * 1000};

// argv[0] is looked up in PATH unless it has a '/'. `env_add`: "KEY=VALUE" for the child.
ProbeResult probe(ProcessRunner& runner, std::vector<std::string> argv, std::chrono::milliseconds deadline = kProbeDeadline,
                  std::vector<std::string> env_add = {});

}  // namespace nvproxy::node
