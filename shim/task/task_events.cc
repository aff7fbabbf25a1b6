#include "shim/task/task_events.h"

#include "proto/events.pb.h"
#include "shim/kit/timestamp.h"

namespace nvproxy::shim {

namespace events = containerd::events;

void TaskEvents::created(const std::filesystem::path& bundle, const std::vector<MountSpec>& rootfs, const StdioPaths& stdio,
                         const std::string& checkpoint, pid_t pid) {
  events::TaskCreate ev;
  ev.set_container_id(id_);
  ev.set_bundle(bundle.string());
  for (const auto& m : rootfs) {
    auto* pm = ev.add_rootfs();
    pm->set_type(m.type);
    pm->set_source(m.source);
    pm->set_target(m.target);
    for (const auto& o : m.options) pm->add_options(o);
  }
  ev.mutable_io()->set_stdin(stdio.in);
  ev.mutable_io()->set_stdout(stdio.out);
  ev.mutable_io()->set_stderr(stdio.err);
  ev.mutable_io()->set_terminal(stdio.terminal);
  ev.set_checkpoint(checkpoint);
  ev.set_pid(static_cast<uint32_t>(pid));
  sink_.publish("/tasks/create", ev);
}

void TaskEvents::started(pid_t pid) {
  events::TaskStart ev;
  ev.set_container_id(id_);
  ev.set_pid(static_cast<uint32_t>(pid));
  sink_.publish("/tasks/start", ev);
}

void TaskEvents::exec_added(const std::string& exec_id) {
  events::TaskExecAdded ev;
  ev.set_container_id(id_);
  ev.set_exec_id(exec_id);
  sink_.publish("/tasks/exec-added", ev);
}

void TaskEvents::exec_started(const std::string& exec_id, pid_t pid) {
  events::TaskExecStarted ev;
  ev.set_container_id(id_);
  ev.set_exec_id(exec_id);
  ev.set_pid(static_cast<uint32_t>(pid));
  sink_.publish("/tasks/exec-started", ev);
}

void TaskEvents::exited(const std::string& process_id, pid_t pid, const ExitInfo& e) {
  events::TaskExit ev;
  ev.set_container_id(id_);
  ev.set_id(process_id);
  ev.set_pid(static_cast<uint32_t>(pid));
  ev.set_exit_status(e.status);
  set_time(ev.mutable_exited_at(), e.at);
  sink_.publish("/tasks/exit", ev);
}

void TaskEvents::deleted(pid_t pid, const ExitInfo& e) {
  events::TaskDelete ev;
  ev.set_container_id(id_);
  ev.set_pid(static_cast<uint32_t>(pid));
  ev.set_exit_status(e.status);
  set_time(ev.mutable_exited_at(), e.at);
  sink_.publish("/tasks/delete", ev);
}

void TaskEvents::paused() {
  events::TaskPaused ev;
  ev.set_container_id(id_);
  sink_.publish("/tasks/paused", ev);
}

void TaskEvents::resumed() {
  events::TaskResumed ev;
  ev.set_container_id(id_);
  sink_.publish("/tasks/resumed", ev);
}

void TaskEvents::checkpointed(const std::string& image) {
  events::TaskCheckpointed ev;
  ev.set_container_id(id_);
  ev.set_checkpoint(image);
  sink_.publish("/tasks/checkpointed", ev);
}

void TaskEvents::oom() {
  events::TaskOOM ev;
  ev.set_container_id(id_);
  sink_.publish("/tasks/oom", ev);
}

}  // namespace nvproxy::shim
