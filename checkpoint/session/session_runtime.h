// The OCI runtime as the checkpoint use case sees it: the few verbs a checkpoint and a restore
// need, implemented by the task layer over runc, crun or runsc. Narrow on purpose: the session is
// driven in tests by a fake one, and checkpoint/ stays below oci/ (it never links the runtime
// wrapper). Questions inside a gVisor sandbox go through the sandbox tools (runsc exec), not here.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/attempt/release.h"

namespace nvproxy::checkpoint {

class SessionRuntime {
 public:
  virtual ~SessionRuntime() = default;
  // Host pids of the container's processes (`runc ps`). Throws Error.
  virtual std::vector<pid_t> ps() = 0;
  // The init's host pid (`runc state`). Throws Error when it cannot be had.
  virtual pid_t init_pid() = 0;
  // The runtime's word for the container's state: "running", "paused", ... Throws Error.
  virtual std::string status() = 0;
  virtual void pause() = 0;
  virtual void resume() = 0;
  // The runtime's own checkpoint into `image` (`runc checkpoint`, `runsc checkpoint`): the client's
  // directory, or the image store's entry the session made for it. Throws Error; a DeadlineError
  // when it ran out of time and was killed. A non-empty plan: CRIU leaves those processes'
  // inherited device files out of the image (release.h).
  virtual void snapshot(const std::filesystem::path& image, const ReleasePlan& release) = 0;

  // The runtime's restore of `image` (`runc restore`, `runsc restore`): the task's process runs
  // from it when this returns. leave_stopped: CRIU leaves the restored processes stopped (runsc
  // ignores it). taken_from: the container the image was taken from (its record; empty when
  // unknown), so that a replica restored into a new container gets a cgroup of its own. Throws Error.
  virtual void restore(const std::filesystem::path& image, bool leave_stopped, const std::string& taken_from) = 0;
  // Removes the container, whatever runs in it (`delete --force`); returns what it ran, for the
  // error that follows ("runc delete --force"). Throws Error.
  virtual std::string remove() = 0;

  // The CRIU the snapshot will run; nullopt when the runtime has none (runsc).
  struct Criu {
    std::string binary;
    std::string version;               // "4.2.1"; empty: unknown
    std::vector<std::string> options;  // what the runtime hands it (checkpoint.criu_options)
    bool tcp_established = false;      // the request asks it to dump established connections
    std::filesystem::path work_dir;    // where it leaves its logs and stats-dump / stats-restore
  };
  virtual std::optional<Criu> criu() = 0;

  // The runtime's kind ("runc", "crun", "runsc") and its version as it prints it (empty: unknown),
  // recorded in the image and compared at a restore.
  struct Identity {
    std::string name, version;
  };
  virtual Identity identity() = 0;
  // Why the runtime cannot checkpoint at all, as it says itself (crun built without CRIU); empty
  // when it can or does not say.
  virtual std::string cannot_checkpoint() { return ""; }
};

}  // namespace nvproxy::checkpoint
