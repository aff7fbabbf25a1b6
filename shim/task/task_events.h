// Every task event the shim publishes, one function each: the message containerd expects on its
// topic, built here and nowhere else, so that a field or a topic changes in one place. The callers
// decide when (with the container's lock held, so that events leave in the order their state
// changes happened, see container.h).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "shim/kit/event_sink.h"
#include "shim/task/process.h"
#include "shim/task/rootfs.h"

namespace nvproxy::shim {

// The events of one container.
class TaskEvents {
 public:
  TaskEvents(EventSink& sink, std::string container_id) : sink_(sink), id_(std::move(container_id)) {}

  void created(const std::filesystem::path& bundle, const std::vector<MountSpec>& rootfs, const StdioPaths& stdio,
               const std::string& checkpoint, pid_t pid);
  void started(pid_t pid);
  void exec_added(const std::string& exec_id);
  void exec_started(const std::string& exec_id, pid_t pid);
  // `process_id`: the container's id for the init, the exec id for an exec (containerd's TaskExit.id).
  void exited(const std::string& process_id, pid_t pid, const ExitInfo& e);
  void deleted(pid_t pid, const ExitInfo& e);
  void paused();
  void resumed();
  void checkpointed(const std::string& image);
  void oom();

 private:
  EventSink& sink_;
  const std::string id_;
};

}  // namespace nvproxy::shim
