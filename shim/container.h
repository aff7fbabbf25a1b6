// A container the shim serves: its bundle, runtime and processes.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "oci/runtime.h"
#include "shim/config.h"
#include "shim/process.h"
#include "shim/task_options.h"

namespace nvproxy::shim {

struct Container {
  std::string id;
  std::filesystem::path bundle;
  ShimConfig config;
  TaskOptions options;  // what the client sent with Create
  std::unique_ptr<oci::Runtime> runtime;
  Process init;
  std::map<std::string, std::shared_ptr<Process>> execs;
  bool own_pid_ns = true;
  bool rootfs_mounted = false;
  bool gpu = false;                         // the device layer gave it GPUs
  std::string restore_from;                 // checkpoint image to restore at Start
  std::vector<std::string> runtime_global;  // per-container runtime flags (runsc --nvproxy)
  std::mutex op_mu;                         // one runtime operation at a time (checkpoint vs kill ...)
};

}  // namespace nvproxy::shim
