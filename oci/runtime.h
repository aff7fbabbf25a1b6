// Drives an OCI runtime binary (runc, crun, runsc) through its command line. Every call names the
// container in its errors and carries the runtime's own error message (read from its log file).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/process.h"
#include "oci/criu_text.h"
#include "oci/runtime_flavor.h"
#include "oci/runtime_probe.h"

namespace nvproxy {
class Logger;
}

namespace nvproxy::oci {

struct RuntimeConfig {
  std::string binary = "runc";
  std::string root;                     // --root; empty: the runtime's default
  std::vector<std::string> extra_args;  // global flags placed before the command (e.g. runsc --network=none)
  bool systemd_cgroup = false;
  // The CRIU binary for checkpoint and restore (runtime.criu_path); empty: "criu" in PATH. Handed
  // over as the runtime's version takes it (runtime_features.h): runc < 1.2 gets its global
  // --criu flag; newer runc and crun find it through PATH, where a private directory holding a
  // `criu` link to it comes first. runsc has no CRIU.
  std::string criu_path;
  // CRIU options for runc's and crun's checkpoint and restore, as lines of a CRIU configuration
  // file ("link-remap", "ghost-limit 1G"). They are written to WORK_PATH/nvproxy-criu.conf and handed
  // to CRIU through $CRIU_CONFIG_FILE, which `criu swrk` (started by runc and by crun's libcriu)
  // reads when it starts; the runtime's own CRIU configuration file (runc: the org.criu.config
  // annotation, else /etc/criu/runc.conf) is applied after it, so what the operator put there wins.
  // The shim's config sets this from checkpoint.criu_options. runsc has no CRIU.
  std::vector<std::string> criu_options = default_criu_options();
  // The directory of the shim's CRIU plugin (checkpoint/attempt/release.h): CRIU loads it (its "libdir") for
  // a checkpoint that releases forked children's device files, and for the restore of an image
  // that did (one holding nvproxy-criu-released). The shim's config sets it from
  // checkpoint.criu_plugin_dir, else the directory found beside the shim.
  std::string criu_plugin_dir;
  // Where the CRIU has the project's page I/O patch (CriuInfo::page_io): a checkpoint writes each
  // process's pages from a writer process, up to this many at once (0: one after another, as
  // CRIU does alone), and a restore asks for huge pages in the memory it fills. The shim's config
  // sets them from checkpoint.page_writers and checkpoint.restore_huge_pages. Where it also takes
  // --page-readers (CriuInfo::page_readers), a restore reads each process's pages in with up to
  // page_readers threads (0 or 1: the process's own alone), from checkpoint.page_readers.
  unsigned page_writers = 16;
  bool restore_huge_pages = true;
  unsigned page_readers = 8;
  // Where it takes --resumed-fifo (CriuInfo::resumed_fifo), a leave-running checkpoint with page
  // writers runs the processes (and CUDA) again once the writers hold their pages in memory, before
  // they are written (CheckpointFlags::on_resumed), from checkpoint.resume_before_write.
  bool resume_before_write = true;
  // Where it also takes --write-gate (CriuInfo::write_gate), those pages are written only once
  // on_resumed has returned (CUDA resumed), so that the writes do not slow the driver's copy back
  // to the device, from checkpoint.write_after_cuda_resume.
  bool write_after_cuda_resume = true;
  // runsc: a restore whose pages file (pages.img) is mostly not in the page cache reads it with
  // O_DIRECT (runsc restore --direct), for disks that read faster without the cache; from a warm one
  // it reads buffered. Off by default: on a 2-CPU VM's disk it was no faster (bench/runsc_direct.sh). The
  // shim's config sets it from checkpoint.runsc_direct_restore.
  bool runsc_direct_restore = false;
  // Deadlines: no runtime command may hang the shim. On expiry the runtime's whole process group
  // (runc and the CRIU it started) is killed and the call throws DeadlineError. The shim's config
  // sets the first two from checkpoint.snapshot_timeout_ms and checkpoint.restore_timeout_ms.
  std::chrono::milliseconds checkpoint_timeout{kDefaultCheckpointTimeout};  // `checkpoint`
  std::chrono::milliseconds restore_timeout{kDefaultRestoreTimeout};        // `restore`
  std::chrono::milliseconds command_timeout{kDefaultCommandTimeout};        // every other command

  // What Python multiprocessing workloads need: link-remap for POSIX named semaphores that glibc
  // creates under a temporary /dev/shm name, maps, links to their real name and unlinks (CRIU:
  // "Can't create link remap for /dev/shm/sem.X"); ghost-limit for files unlinked while in use that
  // are larger than CRIU's 1 MiB default (shared-memory tensors of torch.multiprocessing workers).
  static std::vector<std::string> default_criu_options() { return {"link-remap", "ghost-limit 1G"}; }

  // A 50 GiB process dumps in ~40 s on an H200 host's disk; CRIU writes at disk speed, so a large
  // container on a slow or network disk needs many minutes. Half an hour each way.
  static constexpr std::chrono::milliseconds kDefaultCheckpointTimeout{30 * 60 * 1000};
  static constexpr std::chrono::milliseconds kDefaultRestoreTimeout{30 * 60 * 1000};
  // create (with its hooks), start, exec, state, ps, kill, delete, pause, resume, update, events.
  static constexpr std::chrono::milliseconds kDefaultCommandTimeout{120 * 1000};
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
  // runc/crun: CRIU leaves every restored process stopped (its leave-stopped option), for the
  // caller to hold and continue; runsc has no such step.
  bool leave_stopped = false;
};

struct RuntimeState {
  std::string status;  // created, running, paused, stopped
  int pid = 0;
  std::string bundle;
};

class Runtime {
 public:
  // probe: what the binaries are, learnt once by its owner (the shim); null: this Runtime asks
  // for itself, once.
  Runtime(RuntimeConfig cfg, ProcessRunner& runner, Logger& log, std::filesystem::path log_file, RuntimeProbe* probe = nullptr);
  virtual ~Runtime() = default;

  [[nodiscard]] RuntimeKind kind() const { return kind_; }
  [[nodiscard]] const RuntimeConfig& config() const { return cfg_; }
  // The runtime binary's version and what it supports (asked on first use, then cached).
  RuntimeFeatures features();
  // The CRIU this runtime's checkpoint and restore run (criu_path, else "criu" in PATH) and its
  // version; runsc: nullopt (it has no CRIU).
  std::optional<CriuInfo> criu();
  // runc/crun whose CRIU takes --skip-zero-pages: with CheckpointFlags::exclude_zero_pages the
  // dump leaves zero pages out itself (no punch pass afterwards).
  bool criu_skips_zero_pages();
  bool criu_has_page_io();
  bool criu_has_page_readers();
  bool criu_has_resumed_fifo();
  bool criu_has_write_gate();

  // Runs `create`; the container's init inherits opts.stdio and stays behind (detached).
  virtual void create(const std::string& id, const CreateOptions& opts);
  virtual void start(const std::string& id);
  virtual RuntimeState state(const std::string& id);
  virtual std::vector<int> ps(const std::string& id);
  virtual void kill(const std::string& id, int signal, bool all);
  virtual void remove(const std::string& id, bool force);
  virtual void pause(const std::string& id);
  virtual void resume(const std::string& id);
  virtual void update(const std::string& id, const nlohmann::json& linux_resources);
  virtual void exec(const std::string& id, const ExecOptions& opts);
  // A failure carries CRIU's own error lines from flags.work_path/dump.log (runc keeps CRIU's log
  // there). On expiry of config().checkpoint_timeout: throws DeadlineError naming the killed process group;
  // the container is left as the runtime left it (frozen, if CRIU froze it).
  virtual void checkpoint(const std::string& id, const CheckpointFlags& flags);
  // `events --stats`: the runtime's resource statistics ("data" object of its stats event). crun
  // has no such command (Unimplemented): its containers' statistics come from their cgroup.
  virtual nlohmann::json stats(const std::string& id);
  // A failure carries CRIU's own error lines from opts.work_path/restore.log (and a hint when an
  // option would help). On expiry of config().restore_timeout: kills the runtime's process group,
  // removes the half-restored container (`delete --force`) and throws DeadlineError saying so.
  virtual void restore(const std::string& id, const RestoreOptions& opts);
  // `runsc wait ID` with this runtime's global flags: what waits for a runsc container's own
  // process, which is no child of the shim's (shim/task/sandboxed_exit_wait.h). Not run here: the
  // wait lasts as long as the container.
  [[nodiscard]] std::vector<std::string> wait_argv(const std::string& id) const;

 private:
  std::vector<std::string> base_args(const std::vector<std::string>& extra_global = {}) const;

  // Runs in a process group of its own, under cmd.timeout (0: config().command_timeout); a timeout
  // throws DeadlineError (after on_timeout, whose note is added to the error).
  RunResult run_checked(const std::string& id, const std::string& what, Command cmd,
                        const std::function<std::string()>& on_timeout = {});
  [[nodiscard]] std::string last_log_error() const;
  // `RUNTIME [global flags] VERB ID` under the command deadline: start, state, pause, resume.
  RunResult simple_verb(const std::string& id, const char* verb);
  // f with the switches that config().criu_options name (tcp-established, ext-unix-sk, file-locks).
  [[nodiscard]] CheckpointFlags with_option_switches(CheckpointFlags f) const;
  // runc/crun: writes config().criu_options to WORK/nvproxy-criu.conf and returns the environment
  // that points CRIU at it; nothing for runsc, no options or no work path.
  // plugin_dir: also a "libdir" line, so that CRIU loads the shim's plugin.
  // The CRIU configuration line naming the container's cgroup as the restore's root, where runc
  // leaves it out (oci/replica_cgroup.h); nullopt otherwise.
  std::optional<std::string> criu_cgroup_root(const std::filesystem::path& bundle);
  std::vector<std::string> criu_env(const std::string& id, const std::string& what, const std::filesystem::path& work,
                                    const std::string& plugin_dir = "", const std::vector<std::string>& extra = {});
  // criu_path as this runtime's version takes it: the global flag (appended to `argv`, before the
  // command) or PATH (appended to `env`).
  void hand_over_criu(const std::string& id, const std::string& what, const std::filesystem::path& work,
                      std::vector<std::string>& argv, std::vector<std::string>& env);

  RuntimeConfig cfg_;
  RuntimeKind kind_;
  ProcessRunner& runner_;
  Logger& log_;
  std::filesystem::path log_file_;
  std::unique_ptr<RuntimeProbe> own_probe_;  // when none was given
  RuntimeProbe* probe_;
};

}  // namespace nvproxy::oci
