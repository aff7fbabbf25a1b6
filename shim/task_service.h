// The shim v2 Task service: containers (one, or several of a pod) and their processes, driven
// through the OCI runtime. RPC decoding lives in task_rpc.cc; this class speaks protobuf types.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/log.h"
#include "common/process.h"
#include "oci/runtime.h"
#include "proto/shim_task.pb.h"
#include "shim/config.h"
#include "shim/events.h"
#include "shim/oom_watcher.h"
#include "shim/process.h"

namespace nvproxy::shim {

struct Container;

struct ServiceEnv {
  std::string ns;           // containerd namespace
  std::string self_binary;  // our own executable (for OCI hooks)
  Logger& log;
  ProcessRunner& runner;
  EventPublisher& events;
  std::function<void()> shutdown;  // ends the daemon (Shutdown RPC once no container is left)
};

class TaskService {
 public:
  explicit TaskService(ServiceEnv env);
  ~TaskService();

  containerd::task::v2::CreateTaskResponse create(const containerd::task::v2::CreateTaskRequest& r);
  containerd::task::v2::StartResponse start(const containerd::task::v2::StartRequest& r);
  containerd::task::v2::StateResponse state(const containerd::task::v2::StateRequest& r);
  containerd::task::v2::DeleteResponse remove(const containerd::task::v2::DeleteRequest& r);
  containerd::task::v2::PidsResponse pids(const containerd::task::v2::PidsRequest& r);
  void kill(const containerd::task::v2::KillRequest& r);
  void exec(const containerd::task::v2::ExecProcessRequest& r);
  containerd::task::v2::WaitResponse wait(const containerd::task::v2::WaitRequest& r);
  void pause(const containerd::task::v2::PauseRequest& r);
  void resume(const containerd::task::v2::ResumeRequest& r);
  void close_io(const containerd::task::v2::CloseIORequest& r);
  void resize_pty(const containerd::task::v2::ResizePtyRequest& r);
  void update(const containerd::task::v2::UpdateTaskRequest& r);
  void checkpoint(const containerd::task::v2::CheckpointTaskRequest& r);
  containerd::task::v2::StatsResponse stats(const containerd::task::v2::StatsRequest& r);
  containerd::task::v2::ConnectResponse connect(const containerd::task::v2::ConnectRequest& r);
  void shutdown(const containerd::task::v2::ShutdownRequest& r);

  // Called by the reaper for every child that is not one of our own commands.
  void on_exit(pid_t pid, int wait_status);

 private:
  std::shared_ptr<Container> find(const std::string& id);
  Process& find_process(Container& c, const std::string& exec_id);  // mu_ held
  pid_t start_process_locked_out(Container& c, Process& p, const std::function<void()>& run_runtime,
                                 const std::filesystem::path& pid_file);
  // Runs a runtime command that starts `p`, with a console socket when `p` has a terminal.
  void start_with_stdio(Container& c, Process& p, const std::filesystem::path& pid_file,
                        const std::function<void(const std::string& console_socket, const oci::Stdio& stdio)>& run_runtime);
  void watch_oom(const Container& c);
  void record_exit(Container& c, Process& p, int wait_status);  // mu_ held
  void publish_exit(const Container& c, const Process& p);
  void cuda_restore_after_start(Container& c);

  ServiceEnv env_;
  std::mutex mu_;  // guards containers_, every Process, early_exits_
  std::condition_variable exit_cv_;
  std::map<std::string, std::shared_ptr<Container>> containers_;
  // Exits that arrive while a runtime create/exec/restore is still running (the pid is not known
  // yet); matched once the pid file is read.
  int starting_ = 0;
  std::map<pid_t, int> early_exits_;
  // Last: destroyed first, so its callback never sees a half-destroyed service.
  std::unique_ptr<OomWatcher> oom_;
};

}  // namespace nvproxy::shim
