// Learns once what a runtime binary and a CRIU binary are (runtime_features.h), by running their
// `--version` (and `runc features`) under a deadline. One RuntimeProbe is owned by whoever builds
// the Runtimes (the shim: one per shim process) and answers from its cache afterwards; it is
// thread-safe. A probe that fails (missing binary, non-zero exit, deadline) is cached too, with
// its error: the caller then behaves as for an unknown version.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "common/process.h"
#include "oci/runtime_features.h"

namespace nvproxy {
class Logger;
}

namespace nvproxy::oci {

class RuntimeProbe {
 public:
  static constexpr std::chrono::milliseconds kDefaultDeadline{10 * 1000};
  RuntimeProbe(ProcessRunner& runner, Logger& log, std::chrono::milliseconds deadline = kDefaultDeadline)
      : runner_(runner), log_(log), deadline_(deadline) {}

  // `binary`: as the shim runs it (a path, or a name looked up in PATH).
  RuntimeFeatures runtime(const std::string& binary);
  // `criu_path`: runtime.criu_path; empty: "criu" as PATH finds it (what the runtime would run).
  CriuInfo criu(const std::string& criu_path);

 private:
  // stdout of `argv`; throws Error naming the command when it cannot run, fails or runs too long.
  std::string output_of(const std::vector<std::string>& argv);

  ProcessRunner& runner_;
  Logger& log_;
  std::chrono::milliseconds deadline_;
  std::mutex mu_;
  std::map<std::string, RuntimeFeatures> runtimes_;
  std::map<std::string, CriuInfo> criu_;
};

}  // namespace nvproxy::oci
