// Drives an OCI runtime binary (runc, crun, runsc) through its command line. Every call names the
// container in its errors and carries the runtime's own error message (read from its log file).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/process.h"
#include "oci/runtime_flavor.h"

namespace nvproxy {
class Logger;
}

namespace nvproxy::oci {

struct RuntimeConfig {
  std::string binary = "runc";
  std::string root;                     // --root; empty: the runtime's default
  std::vector<std::string> extra_args;  // global flags placed before the command (e.g. runsc --network=none)
  bool systemd_cgroup = false;
  std::string criu_path;  // runc --criu
};

struct Stdio {
  int in = -1, out = -1, err = -1;  // borrowed; -1: /dev/null
};

struct CreateOptions {
  std::filesystem::path bundle;
  std::filesystem::path pid_file;
  std::string console_socket;             // path; empty: no terminal
  std::vector<std::string> extra_global;  // per-container global flags (runsc --nvproxy)
  bool no_pivot = false;
  bool no_new_keyring = false;
  Stdio stdio;
};

struct ExecOptions {
  std::filesystem::path process_json;  // file holding the process spec
  std::filesystem::path pid_file;
  std::string console_socket;
  Stdio stdio;
};

struct RestoreOptions {
  std::filesystem::path bundle;
  std::filesystem::path image_path;
  std::filesystem::path work_path;
  std::filesystem::path pid_file;
  std::string console_socket;
  std::vector<std::string> extra_global;
  bool no_pivot = false;
  Stdio stdio;
};

struct RuntimeState {
  std::string status;  // created, running, paused, stopped
  int pid = 0;
  std::string bundle;
};

class Runtime {
 public:
  Runtime(RuntimeConfig cfg, ProcessRunner& runner, Logger& log, std::filesystem::path log_file);
  virtual ~Runtime() = default;

  [[nodiscard]] RuntimeKind kind() const { return kind_; }
  [[nodiscard]] const RuntimeConfig& config() const { return cfg_; }

  // Runs `create`; the container's init inherits opts.stdio and stays behind (detached).
  void create(const std::string& id, const CreateOptions& opts);
  void start(const std::string& id);
  RuntimeState state(const std::string& id);
  std::vector<int> ps(const std::string& id);
  void kill(const std::string& id, int signal, bool all);
  void remove(const std::string& id, bool force);
  void pause(const std::string& id);
  void resume(const std::string& id);
  void update(const std::string& id, const nlohmann::json& linux_resources);
  void exec(const std::string& id, const ExecOptions& opts);
  void checkpoint(const std::string& id, const CheckpointFlags& flags);
  // `events --stats`: the runtime's resource statistics ("data" object of its stats event).
  nlohmann::json stats(const std::string& id);
  void restore(const std::string& id, const RestoreOptions& opts);

 private:
  std::vector<std::string> base_args(const std::vector<std::string>& extra_global = {}) const;
  RunResult run_checked(const std::string& id, const std::string& what, Command cmd);
  [[nodiscard]] std::string last_log_error() const;

  RuntimeConfig cfg_;
  RuntimeKind kind_;
  ProcessRunner& runner_;
  Logger& log_;
  std::filesystem::path log_file_;
};

}  // namespace nvproxy::oci
