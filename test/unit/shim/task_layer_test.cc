// The task layer in-process: a real TaskService and Containers driven through their RPC methods,
// with a stub runtime (no runc: it writes pid files and records calls), recorded events, and exits
// handed in as the reaper would (TaskService::on_exit). Each test states one lifecycle rule.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/unique_fd.h"
#include "oci/spec.h"
#include "proto/events.pb.h"
#include "proto/runc_options.pb.h"
#include "proto/runctypes.pb.h"
#include "shim/kit/timestamp.h"
#include "shim/task/task_service.h"

namespace nvproxy::shim {
namespace {

namespace task = containerd::task::v2;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Records calls; create/exec/restore write the pid file. `during_start` runs inside create, exec
// and restore, before they return (to deliver an exit before the pid is known).
class StubRuntime final : public oci::Runtime {
 public:
  struct Shared {
    std::mutex mu;
    std::vector<std::string> calls;
    pid_t next_pid = 4000;
    std::function<void(pid_t)> during_start;
    std::function<void()> during_checkpoint;
    bool fail_exec = false;
    bool fail_restore = false;
    std::string fail_resume_state;  // resume fails, and state() answers this status
    int fail_pauses = 0;            // pauses that fail as runc's cgroup v1 freezer does under load
    std::function<void()> during_kill;
    void record(const std::string& c) {
      std::lock_guard lk(mu);
      calls.push_back(c);
    }
    bool called(const std::string& c) {
      std::lock_guard lk(mu);
      return std::find(calls.begin(), calls.end(), c) != calls.end();
    }
    bool called_any(const std::string& verb) {
      std::lock_guard lk(mu);
      return std::any_of(calls.begin(), calls.end(), [&](const std::string& c) { return c.starts_with(verb + " "); });
    }
  };
  StubRuntime(std::shared_ptr<Shared> s, ProcessRunner& r, Logger& log) : oci::Runtime({}, r, log, ""), s_(std::move(s)) {}

  void create(const std::string&, const oci::CreateOptions& o) override { launch("create", o.pid_file); }
  void exec(const std::string& id, const oci::ExecOptions& o) override {
    if (s_->fail_exec) throw Error(Code::Unknown, "runc exec of container \"" + id + "\" failed: no such binary");
    launch("exec", o.pid_file);
  }
  void restore(const std::string& id, const oci::RestoreOptions& o) override {
    if (s_->fail_restore)
      throw Error(Code::Unknown,
                  "runc restore of container \"" + id + "\" failed: criu: " + o.image_path.string() + " holds no image");
    s_->record("cgroup " + oci::Spec::load(o.bundle).cgroups_path());
    launch("restore", o.pid_file);
  }
  void start(const std::string&) override { s_->record("start"); }
  void kill(const std::string&, int sig, bool all) override {
    if (s_->during_kill) s_->during_kill();
    s_->record("kill " + std::to_string(sig) + (all ? " all" : ""));
  }
  void remove(const std::string&, bool) override { s_->record("delete"); }
  void pause(const std::string& id) override {
    if (s_->fail_pauses > 0) {
      --s_->fail_pauses;
      s_->record("pause failed");
      throw Error(Code::Unknown, "runc pause of container \"" + id + "\" failed: unable to freeze");
    }
    s_->record("pause");
  }
  void resume(const std::string& id) override {
    if (!s_->fail_resume_state.empty())
      throw Error(Code::Unknown, "runc resume of container \"" + id + "\" failed: container not paused");
    s_->record("resume");
  }
  oci::RuntimeState state(const std::string& id) override {
    if (s_->fail_resume_state.empty()) return oci::Runtime::state(id);
    oci::RuntimeState st;
    st.status = s_->fail_resume_state;
    return st;
  }
  void checkpoint(const std::string&, const oci::CheckpointFlags& f) override {
    s_->record(f.leave_running ? "checkpoint --leave-running" : "checkpoint");
    if (s_->during_checkpoint) s_->during_checkpoint();
  }
  std::vector<int> ps(const std::string&) override { return {}; }

 private:
  void launch(const std::string& what, const fs::path& pid_file) {
    pid_t pid;
    {
      std::lock_guard lk(s_->mu);
      pid = s_->next_pid++;
      s_->calls.push_back(what + " " + std::to_string(pid));
    }
    write_file_atomic(pid_file, std::to_string(pid));
    if (s_->during_start) s_->during_start(pid);
  }
  std::shared_ptr<Shared> s_;
};

class RecordingEvents final : public EventSink {
 public:
  void publish(const std::string& topic, const google::protobuf::MessageLite& ev) override {
    std::lock_guard lk(mu_);
    std::string what = topic;
    if (topic == "/tasks/exit") {
      containerd::events::TaskExit e;
      e.ParseFromString(ev.SerializeAsString());
      what += " " + e.id();
    }
    topics_.push_back(what);
  }
  std::vector<std::string> topics() {
    std::lock_guard lk(mu_);
    return topics_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> topics_;
};

class StubCheckpoints final : public CheckpointHooks {
 public:
  void checkpoint(Container& c, const oci::CheckpointFlags& f, bool) override {
    checkpointed_into = f.image_path;
    c.runtime().checkpoint(c.id(), f);
  }
  // The session's shape: the runtime's restore, then CUDA (which may fail).
  void restore(Container&, const fs::path& checkpoint, const RuntimeRestore& run) override {
    restored_from = checkpoint.string();
    run(checkpoint, false, taken_from);
    if (fail_after_restore) throw Error(Code::FailedPrecondition, "CUDA could not be restored in pid 42");
  }
  // A restore by annotation: the archive made here, as the fetch would unpack it.
  fs::path fetch_for_restore(Container& c, const std::string& reference, const fs::path& into) override {
    fetched = reference;
    fetched_for = c.id();
    if (!refuse_fetch.empty()) throw Error(Code::FailedPrecondition, refuse_fetch);
    fs::create_directories(into / "archive" / "checkpoint");
    if (!rootfs_diff.empty()) fs::copy_file(rootfs_diff, into / "archive" / "rootfs-diff.tar");
    return into / "archive";
  }
  std::string fetched, fetched_for, refuse_fetch;
  fs::path rootfs_diff;           // a tar for the archive's rootfs-diff.tar; none when empty
  std::string checkpointed_into;  // the image path the hook was handed
  std::string restored_from;
  std::string taken_from;  // the image's container, as the session reads it from the record
  bool fail_after_restore = false;
};

class TaskLayer : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = (fs::temp_directory_path() / "task-layer-XXXXXX").string();
    dir_ = ::mkdtemp(t.data());
    svc_ = std::make_unique<TaskService>(
        ServiceDeps{.ns = "test",
                    .self_binary = "/nonexistent",
                    .log = log_,
                    .runner = runner_,
                    .events = events_,
                    .checkpoints = hooks_,
                    .make_runtime = [this](const oci::RuntimeConfig&,
                                           const fs::path&) { return std::make_unique<StubRuntime>(rt_, runner_, log_); },
                    .load_config = [this](const std::string&) { return config_; },
                    .shutdown = [] {}});
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string cgroups_path_;                               // the bundles' linux.cgroupsPath; none when empty
  nlohmann::json annotations_ = nlohmann::json::object();  // the bundles' annotations

  // A bundle whose spec has its own pid namespace (or shares the host's).
  std::string bundle(const std::string& id, bool own_pid_ns = true) {
    auto b = dir_ / id;
    fs::create_directories(b / "rootfs");
    nlohmann::json spec{{"ociVersion", "1.0.2"}, {"root", {{"path", "rootfs"}}}, {"process", {{"args", {"sh"}}, {"cwd", "/"}}}};
    spec["linux"]["namespaces"] = nlohmann::json::array();
    if (own_pid_ns) spec["linux"]["namespaces"].push_back({{"type", "pid"}});
    if (!cgroups_path_.empty()) spec["linux"]["cgroupsPath"] = cgroups_path_;
    if (!annotations_.empty()) spec["annotations"] = annotations_;
    std::ofstream(b / "config.json") << spec.dump();
    return b.string();
  }
  pid_t create(const std::string& id, bool own_pid_ns = true, const std::string& checkpoint = "") {
    task::CreateTaskRequest r;
    r.set_id(id);
    r.set_bundle(bundle(id, own_pid_ns));
    r.set_checkpoint(checkpoint);
    return static_cast<pid_t>(svc_->create(r).pid());
  }
  pid_t start(const std::string& id, const std::string& exec_id = "") {
    task::StartRequest r;
    r.set_id(id);
    r.set_exec_id(exec_id);
    return static_cast<pid_t>(svc_->start(r).pid());
  }
  void add_exec(const std::string& id, const std::string& exec_id) {
    task::ExecProcessRequest r;
    r.set_id(id);
    r.set_exec_id(exec_id);
    r.mutable_spec()->set_value(R"({"args":["true"],"cwd":"/"})");
    svc_->exec(r);
  }
  task::StateResponse state(const std::string& id, const std::string& exec_id = "") {
    task::StateRequest r;
    r.set_id(id);
    r.set_exec_id(exec_id);
    return svc_->state(r);
  }
  task::DeleteResponse remove(const std::string& id, const std::string& exec_id = "") {
    task::DeleteRequest r;
    r.set_id(id);
    r.set_exec_id(exec_id);
    return svc_->remove(r);
  }
  void kill(const std::string& id, int sig, const std::string& exec_id = "", bool all = false) {
    task::KillRequest r;
    r.set_id(id);
    r.set_exec_id(exec_id);
    r.set_signal(static_cast<uint32_t>(sig));
    r.set_all(all);
    svc_->kill(r);
  }
  static int status_exited(int code) { return code << 8; }  // a wait(2) status
  // Checkpoint as containerd's client does it: pause, checkpoint (options packed as `type_url`,
  // none when empty), resume (refused once the task stopped; the client ignores that).
  void client_checkpoint(const std::string& id, const google::protobuf::MessageLite* o, const std::string& type_url) {
    task::PauseRequest p;
    p.set_id(id);
    svc_->pause(p);
    task::CheckpointTaskRequest r;
    r.set_id(id);
    r.set_path((dir_ / "image").string());
    if (o) {
      r.mutable_options()->set_type_url(type_url);
      r.mutable_options()->set_value(o->SerializeAsString());
    }
    svc_->checkpoint(r);
    task::ResumeRequest rr;
    rr.set_id(id);
    code_of([&] { svc_->resume(rr); });
  }
  bool exit_published(const std::string& id) {
    auto t = events_.topics();
    return std::find(t.begin(), t.end(), "/tasks/exit " + id) != t.end();
  }

  template <typename Fn>
  static Code code_of(Fn fn, std::string* msg = nullptr) {
    try {
      fn();
    } catch (const Error& e) {
      if (msg) *msg = e.what();
      return e.code();
    }
    return Code::Ok;
  }

  fs::path dir_;
  Logger log_{-1};
  DirectWaiter waiter_;
  ProcessRunner runner_{waiter_};
  RecordingEvents events_;
  StubCheckpoints hooks_;
  std::shared_ptr<StubRuntime::Shared> rt_ = std::make_shared<StubRuntime::Shared>();
  ShimConfig config_;  // what load_config gives a Create
  std::unique_ptr<TaskService> svc_;
};

TEST_F(TaskLayer, AnExecThatExitsBeforeItsPidIsKnownIsMatchedAndReportedAfterItsStart) {
  create("c1");
  start("c1");
  add_exec("c1", "e1");
  rt_->during_start = [this](pid_t pid) { svc_->on_exit(pid, status_exited(3)); };
  pid_t pid = start("c1", "e1");
  auto s = state("c1", "e1");
  EXPECT_EQ(s.status(), containerd::v1::types::STOPPED);
  EXPECT_EQ(s.exit_status(), 3u);
  EXPECT_EQ(s.pid(), static_cast<uint32_t>(pid));
  auto t = events_.topics();
  auto started = std::find(t.begin(), t.end(), "/tasks/exec-started");
  auto exited = std::find(t.begin(), t.end(), "/tasks/exit e1");
  ASSERT_NE(started, t.end());
  ASSERT_NE(exited, t.end());
  EXPECT_LT(started - t.begin(), exited - t.begin()) << "the exit went out before the start";
}

TEST_F(TaskLayer, WaitSurvivesTheDeleteOfItsExec) {
  pid_t init = create("c1");
  start("c1");
  add_exec("c1", "e1");
  pid_t pid = start("c1", "e1");
  auto waited = std::async(std::launch::async, [&] {
    task::WaitRequest r;
    r.set_id("c1");
    r.set_exec_id("e1");
    return svc_->wait(r);
  });
  auto proc = svc_->container("c1")->process("e1");
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (proc->waiters() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(proc->waiters(), 1) << "Wait never blocked";
  proc.reset();
  svc_->on_exit(pid, status_exited(7));
  remove("c1", "e1");
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(waited.get().exit_status(), 7u);
  EXPECT_EQ(code_of([&] { state("c1", "e1"); }), Code::NotFound);
  svc_->on_exit(init, status_exited(0));
}

TEST_F(TaskLayer, KillWhileARestoreIsPendingIsRefusedWithoutTouchingTheRuntime) {
  EXPECT_EQ(create("c1", true, "/images/ckpt"), 0);
  EXPECT_EQ(code_of([&] { kill("c1", SIGTERM); }), Code::NotFound);
  EXPECT_FALSE(rt_->called("kill 15"));
  EXPECT_EQ(code_of([&] { add_exec("c1", "e1"); }), Code::Unknown);
  pid_t pid = start("c1");
  EXPECT_GT(pid, 0);
  EXPECT_TRUE(rt_->called("restore " + std::to_string(pid)));
  EXPECT_EQ(hooks_.restored_from, "/images/ckpt");
  EXPECT_EQ(state("c1").status(), containerd::v1::types::RUNNING);
  kill("c1", SIGTERM);
  EXPECT_TRUE(rt_->called("kill 15"));
}

// ctr restores an image into a new container with the image's spec: its cgroup is named after the
// container the image was taken from. The replica runs in a cgroup named after itself.
TEST_F(TaskLayer, AReplicaRestoredFromAnotherContainersImageGetsItsOwnCgroup) {
  cgroups_path_ = "/default/origin";
  hooks_.taken_from = "origin";
  create("fan1", true, "/images/ckpt");
  pid_t pid = start("fan1");
  EXPECT_TRUE(rt_->called("cgroup /default/fan1"));
  EXPECT_EQ(oci::Spec::load(dir_ / "fan1").cgroups_path(), "/default/fan1");
  kill("fan1", SIGKILL);
  svc_->on_exit(pid, status_exited(137));

  // The container that was checkpointed, restored under its own name: its path stays.
  create("origin", true, "/images/ckpt");
  pid = start("origin");
  EXPECT_TRUE(rt_->called("cgroup /default/origin"));
  kill("origin", SIGKILL);
  svc_->on_exit(pid, status_exited(137));
}

// The restore failed before anything ran: the task ends as a process that ended (exit event,
// stopped), so that a force delete (Wait, Kill with all, Delete: the Go client's WithProcessKill,
// `ctr task rm -f`, CRI's cleanup) finishes instead of waiting for an exit that never comes.
TEST_F(TaskLayer, AFailedRestoreEndsTheTaskWithAnExitSoThatAForceDeleteFinishes) {
  EXPECT_EQ(create("c1", true, "/images/corrupt"), 0);
  auto waited = std::async(std::launch::async, [&] {
    task::WaitRequest r;
    r.set_id("c1");
    return svc_->wait(r);
  });
  rt_->fail_restore = true;
  std::string msg;
  EXPECT_EQ(code_of([&] { start("c1"); }, &msg), Code::Unknown);
  EXPECT_NE(msg.find("/images/corrupt holds no image"), std::string::npos) << msg;
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready) << "Wait hangs on a task whose restore failed";
  auto w = waited.get();
  EXPECT_EQ(w.exit_status(), 255u);
  EXPECT_GT(w.exited_at().seconds(), 0) << "an exit time, as for a process that ended";
  auto s = state("c1");
  EXPECT_EQ(s.status(), containerd::v1::types::STOPPED);
  EXPECT_EQ(s.exit_status(), 255u);
  EXPECT_EQ(events_.topics(), (std::vector<std::string>{"/tasks/create", "/tasks/exit c1"}));

  // Kill answers as for a stopped task; with `all` it goes to the runtime (which knows nothing).
  EXPECT_EQ(code_of([&] { kill("c1", SIGKILL); }), Code::NotFound);
  EXPECT_FALSE(rt_->called("kill 9"));
  EXPECT_EQ(code_of([&] { kill("c1", SIGKILL, "", true); }), Code::Ok);
  EXPECT_EQ(code_of([&] { add_exec("c1", "e1"); }), Code::Unknown);
  EXPECT_EQ(code_of([&] { start("c1"); }), Code::Unknown) << "a stopped task does not start again";
  auto d = remove("c1");
  EXPECT_EQ(d.exit_status(), 255u);
  EXPECT_TRUE(rt_->called("delete"));
  EXPECT_EQ(events_.topics().back(), "/tasks/delete");
}

// CUDA failed after the runtime restored the processes: they were removed, and their exit (through
// the reaper) ends the task; until then it is running, so that a kill reaches what may still run.
TEST_F(TaskLayer, ARestoreWhoseCudaFailsEndsWithTheExitOfTheRestoredProcesses) {
  EXPECT_EQ(create("c1", true, "/images/ckpt"), 0);
  hooks_.fail_after_restore = true;
  EXPECT_EQ(code_of([&] { start("c1"); }), Code::FailedPrecondition);
  EXPECT_EQ(state("c1").status(), containerd::v1::types::RUNNING);
  kill("c1", SIGKILL);
  EXPECT_TRUE(rt_->called("kill 9"));
  pid_t pid = static_cast<pid_t>(state("c1").pid());
  ASSERT_GT(pid, 0);
  svc_->on_exit(pid, SIGKILL);  // a wait(2) status: killed by SIGKILL
  auto s = state("c1");
  EXPECT_EQ(s.status(), containerd::v1::types::STOPPED);
  EXPECT_EQ(s.exit_status(), 128u + SIGKILL);
  EXPECT_EQ(events_.topics().back(), "/tasks/exit c1");
  EXPECT_EQ(remove("c1").exit_status(), 128u + SIGKILL);
}

// A caller that found the exec just before its Delete (State, Kill, ResizePty and Start look it up
// before they lock it) answers as the exec table answers afterwards.
TEST_F(TaskLayer, AnExecFoundBeforeItsDeleteAnswersNotFoundAfterIt) {
  pid_t init = create("c1");
  start("c1");
  add_exec("c1", "e1");
  auto proc = svc_->container("c1")->process("e1");
  remove("c1", "e1");
  std::string msg;
  EXPECT_EQ(code_of([&] { (void)proc->status(); }, &msg), Code::NotFound);
  EXPECT_EQ(msg, "exec \"e1\" of container \"c1\" not found");
  EXPECT_EQ(code_of([&] { proc->start(); }), Code::NotFound);
  EXPECT_FALSE(proc->exit()) << "a refused start leaves the exec as it was";
  EXPECT_EQ(code_of([&] { proc->kill(SIGTERM, false); }), Code::NotFound);
  EXPECT_EQ(code_of([&] { proc->resize(80, 24); }), Code::NotFound);
  EXPECT_EQ(code_of([&] { proc->remove(); }), Code::NotFound);
  EXPECT_FALSE(rt_->called("exec 4001"));
  svc_->on_exit(init, status_exited(0));
}

TEST_F(TaskLayer, ExecExitsGoOutBeforeTheInitExitOfTheSameContainer) {
  pid_t init = create("c1");
  start("c1");
  add_exec("c1", "e1");
  pid_t exec_pid = start("c1", "e1");
  svc_->on_exit(init, status_exited(137));
  // The init's exit is held while its exec runs: still running, Wait does not return yet.
  EXPECT_EQ(state("c1").status(), containerd::v1::types::RUNNING);
  auto waited = std::async(std::launch::async, [&] {
    task::WaitRequest r;
    r.set_id("c1");
    return svc_->wait(r);
  });
  EXPECT_EQ(waited.wait_for(50ms), std::future_status::timeout);
  svc_->on_exit(exec_pid, status_exited(137));
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(waited.get().exit_status(), 137u);
  auto t = events_.topics();
  auto e1 = std::find(t.begin(), t.end(), "/tasks/exit e1");
  auto c1 = std::find(t.begin(), t.end(), "/tasks/exit c1");
  ASSERT_NE(e1, t.end());
  ASSERT_NE(c1, t.end());
  EXPECT_LT(e1 - t.begin(), c1 - t.begin());
}

TEST_F(TaskLayer, IllegalTransitionsAreRefusedByState) {
  pid_t init = create("c1");
  EXPECT_EQ(code_of([&] { svc_->pause({}); }), Code::NotFound);
  task::PauseRequest pr;
  pr.set_id("c1");
  EXPECT_EQ(code_of([&] { svc_->pause(pr); }), Code::Unknown) << "created";
  start("c1");
  EXPECT_EQ(code_of([&] { start("c1"); }), Code::Unknown) << "started twice";
  EXPECT_EQ(code_of([&] { remove("c1"); }), Code::FailedPrecondition) << "deleted while running";
  task::ResumeRequest rr;
  rr.set_id("c1");
  EXPECT_EQ(code_of([&] { svc_->resume(rr); }), Code::Unknown) << "resumed while running";
  svc_->pause(pr);
  EXPECT_EQ(state("c1").status(), containerd::v1::types::PAUSED);
  svc_->resume(rr);
  svc_->on_exit(init, status_exited(0));
  EXPECT_EQ(state("c1").status(), containerd::v1::types::STOPPED);
  EXPECT_EQ(code_of([&] { kill("c1", SIGKILL); }), Code::NotFound) << "signal to a finished init";
  EXPECT_EQ(code_of([&] { add_exec("c1", "late"); }), Code::Unknown);
  auto d = remove("c1");
  EXPECT_EQ(d.exit_status(), 0u);
  EXPECT_EQ(code_of([&] { state("c1"); }), Code::NotFound);
}

// A checkpoint thawed the paused container for its CUDA toggles and could not freeze it again
// (runc's "unable to freeze" under load): the client's resume then finds it running. The runtime's
// state decides: running is resumed; anything else keeps the resume's error.
TEST_F(TaskLayer, AResumeOfAContainerTheRuntimeSaysRunsSucceeds) {
  create("c1");
  start("c1");
  task::PauseRequest pr;
  pr.set_id("c1");
  svc_->pause(pr);
  task::ResumeRequest rr;
  rr.set_id("c1");
  rt_->fail_resume_state = "paused";
  EXPECT_EQ(code_of([&] { svc_->resume(rr); }), Code::Unknown) << "resumed though the runtime says paused";
  EXPECT_EQ(state("c1").status(), containerd::v1::types::PAUSED);
  rt_->fail_resume_state = "running";
  EXPECT_EQ(code_of([&] { svc_->resume(rr); }), Code::Ok);
  EXPECT_EQ(state("c1").status(), containerd::v1::types::RUNNING);
}

// runc's cgroup v1 freezer gives up under load ("unable to freeze", the container left running):
// the client's Pause tries again, three times in all, and then answers the runtime's error with the
// task still running.
TEST_F(TaskLayer, APauseTheFreezerGaveUpOnIsTriedAgain) {
  create("c1");
  start("c1");
  task::PauseRequest pr;
  pr.set_id("c1");
  rt_->fail_pauses = 2;
  EXPECT_EQ(code_of([&] { svc_->pause(pr); }), Code::Ok);
  EXPECT_EQ(state("c1").status(), containerd::v1::types::PAUSED);
  EXPECT_TRUE(rt_->called("pause"));
  task::ResumeRequest rr;
  rr.set_id("c1");
  svc_->resume(rr);
  rt_->fail_pauses = 3;
  EXPECT_EQ(code_of([&] { svc_->pause(pr); }), Code::Unknown);
  EXPECT_EQ(state("c1").status(), containerd::v1::types::RUNNING);
  EXPECT_EQ(rt_->fail_pauses, 0) << "three tries in all";
}

TEST_F(TaskLayer, AnInitSharingTheHostPidNamespaceTakesTheRestWithIt) {
  pid_t init = create("c1", false);
  start("c1");
  svc_->on_exit(init, status_exited(0));
  // The kill runs off the reaper's thread and the exit goes out once it returned: wait for the
  // stopped state (not for the kill's call, which the runtime records before it returns).
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (state("c1").status() != containerd::v1::types::STOPPED && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  ASSERT_EQ(state("c1").status(), containerd::v1::types::STOPPED);
  EXPECT_TRUE(rt_->called("kill 9 all"));
  std::weak_ptr<Container> held = svc_->container("c1");
  remove("c1");
  // The kill's thread lets go of the container too (before the fixture goes).
  deadline = std::chrono::steady_clock::now() + 10s;
  while (!held.expired() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(held.expired());
}

// The kill of the rest after a host-pid-ns init exits runs on its own thread; the container (and
// its runtime) must outlive it even when Delete drops the container meanwhile (ASan would report a
// use after free otherwise).
// Without its own pid namespace, what is left of the container is killed before the init's exit
// goes out (containerd's runc shim does so: a client that waits for the exit finds nothing left):
// while the kill --all runs, the task still reads as running and no exit event is out; the kill's
// thread holds the container meanwhile.
TEST_F(TaskLayer, TheExitOfAnInitWithoutItsOwnPidNamespaceWaitsForTheKillAll) {
  std::promise<void> entered, release;
  auto released = release.get_future().share();
  rt_->during_kill = [&, released] {
    entered.set_value();
    released.wait();
  };
  pid_t init = create("c1", false);
  start("c1");
  svc_->on_exit(init, status_exited(0));
  ASSERT_EQ(entered.get_future().wait_for(10s), std::future_status::ready) << "no kill --all after the init's exit";
  std::weak_ptr<Container> held = svc_->container("c1");
  EXPECT_EQ(state("c1").status(), containerd::v1::types::RUNNING) << "the exit went out before the kill --all returned";
  for (const auto& t : events_.topics()) EXPECT_NE(t, "/tasks/exit c1");
  release.set_value();
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (state("c1").status() != containerd::v1::types::STOPPED && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(state("c1").status(), containerd::v1::types::STOPPED);
  EXPECT_TRUE(rt_->called("kill 9 all"));
  EXPECT_EQ(events_.topics().back(), "/tasks/exit c1");
  remove("c1");
  deadline = std::chrono::steady_clock::now() + 10s;
  while (!held.expired() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(held.expired()) << "the container outlived its last user";
}

TEST_F(TaskLayer, DeleteOfANeverStartedContainerReportsSigkillAndEvents) {
  create("c1");
  auto d = remove("c1");
  EXPECT_EQ(d.exit_status(), 128u + SIGKILL);
  EXPECT_TRUE(rt_->called("delete"));
  auto t = events_.topics();
  ASSERT_GE(t.size(), 2u);
  EXPECT_EQ(t.front(), "/tasks/create");
  EXPECT_EQ(t.back(), "/tasks/delete");
}

TEST_F(TaskLayer, AnExecWhoseStartFailedReleasesItsWaiters) {
  pid_t init = create("c1");
  start("c1");
  add_exec("c1", "bad");
  auto waited = std::async(std::launch::async, [&] {
    task::WaitRequest r;
    r.set_id("c1");
    r.set_exec_id("bad");
    return svc_->wait(r);
  });
  rt_->fail_exec = true;
  EXPECT_EQ(code_of([&] { start("c1", "bad"); }), Code::Unknown);
  ASSERT_EQ(waited.wait_for(10s), std::future_status::ready) << "Wait hangs on an exec that never ran";
  auto w = waited.get();
  EXPECT_EQ(w.exit_status(), 0u);
  EXPECT_EQ(w.exited_at().seconds(), kGoZeroTimeSeconds) << "no exit time: Go's zero time, as the runc shim";
  EXPECT_EQ(state("c1", "bad").exited_at().seconds(), kGoZeroTimeSeconds);
  remove("c1", "bad");
  svc_->on_exit(init, status_exited(0));
}

TEST_F(TaskLayer, AFailedExecStartLetsGoOfTheClientsFifos) {
  pid_t init = create("c1");
  start("c1");
  auto fifo = dir_ / "exec-stdout";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  UniqueFd reader(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));  // the client's end
  ASSERT_TRUE(reader);
  task::ExecProcessRequest r;
  r.set_id("c1");
  r.set_exec_id("bad");
  r.set_stdout(fifo.string());
  r.mutable_spec()->set_value(R"({"args":["true"],"cwd":"/"})");
  svc_->exec(r);
  rt_->fail_exec = true;
  EXPECT_EQ(code_of([&] { start("c1", "bad"); }), Code::Unknown);
  // No writer is left: the client's read sees the end (EAGAIN would mean the shim still holds it).
  char c;
  EXPECT_EQ(::read(reader.get(), &c, 1), 0) << "errno " << errno;
  remove("c1", "bad");
  svc_->on_exit(init, status_exited(0));
}

TEST_F(TaskLayer, ASecondCreateOfTheSameIdFailsAndLeavesTheFirst) {
  create("c1");
  EXPECT_EQ(code_of([&] { create("c1"); }), Code::AlreadyExists);
  EXPECT_EQ(state("c1").status(), containerd::v1::types::CREATED);
}

// exit: true under both option types (containerd.runc.v1 is what docker sends for a runc v2
// runtime, containerd.linux.runc what containerd's client picks for other runtime names): the
// runtime checkpoints without --leave-running, the init's end stops the task, and a Create from the
// image restores it. Without exit the task keeps running.
TEST_F(TaskLayer, CheckpointWithExitStopsTheTaskUnderBothOptionTypesAndRestores) {
  containerd::runc::v1::CheckpointOptions v1;
  v1.set_exit(true);
  containerd::linux::runc::CheckpointOptions legacy;
  legacy.set_exit(true);
  struct Case {
    std::string id, type_url;
    const google::protobuf::MessageLite* options;
  };
  std::vector<Case> cases{{"runc-v1", "types.containerd.io/containerd.runc.v1.CheckpointOptions", &v1},
                          {"legacy", "types.containerd.io/containerd.linux.runc.CheckpointOptions", &legacy}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.id);
    rt_->calls.clear();
    pid_t init = create(c.id);
    start(c.id);
    client_checkpoint(c.id, c.options, c.type_url);
    EXPECT_TRUE(rt_->called("checkpoint"));
    EXPECT_FALSE(rt_->called("checkpoint --leave-running"));
    svc_->on_exit(init, SIGKILL);  // runc ends the container after the dump
    EXPECT_EQ(state(c.id).status(), containerd::v1::types::STOPPED);
    EXPECT_TRUE(exit_published(c.id));
    remove(c.id);
    EXPECT_EQ(create(c.id, true, (dir_ / "image").string()), 0);  // the restore runs at Start
    pid_t restored = start(c.id);
    EXPECT_TRUE(rt_->called("restore " + std::to_string(restored)));
    EXPECT_EQ(state(c.id).status(), containerd::v1::types::RUNNING);
    EXPECT_EQ(hooks_.restored_from, (dir_ / "image").string());
    svc_->on_exit(restored, SIGKILL);
    remove(c.id);
  }
}

// checkpoint.image_store is the checkpoint session's to use, as on restore: the task layer hands
// over containerd's directory as it came and makes no store entry.
TEST_F(TaskLayer, WithAnImageStoreTheHookGetsContainerdsDirectory) {
  config_.checkpoint.image_store = (dir_ / "store").string();
  create("c1");
  start("c1");
  client_checkpoint("c1", nullptr, "");
  EXPECT_EQ(hooks_.checkpointed_into, (dir_ / "image").string());
  EXPECT_FALSE(fs::exists(dir_ / "store"));
}

TEST_F(TaskLayer, CheckpointWithoutOptionsKeepsRunningUnlessExitWithoutOptionsIsSet) {
  create("c1");
  start("c1");
  client_checkpoint("c1", nullptr, "");
  EXPECT_TRUE(rt_->called("checkpoint --leave-running"));
  EXPECT_EQ(state("c1").status(), containerd::v1::types::RUNNING) << "resumed after the checkpoint";

  config_.checkpoint.exit_without_options = true;  // read at Create
  create("c2");
  start("c2");
  rt_->calls.clear();
  client_checkpoint("c2", nullptr, "");
  EXPECT_TRUE(rt_->called("checkpoint"));
  EXPECT_FALSE(rt_->called("checkpoint --leave-running"));
  // Options that came still rule: exit unset keeps it running.
  create("c3");
  start("c3");
  rt_->calls.clear();
  containerd::linux::runc::CheckpointOptions keep;
  client_checkpoint("c3", &keep, "containerd.linux.runc.CheckpointOptions");
  EXPECT_TRUE(rt_->called("checkpoint --leave-running"));
}

// Restore by annotation (restore_annotation.h): the create fetches the image into the bundle and
// puts the writable layer's changes on the rootfs; the start restores from what was fetched.
class RestoreByAnnotation : public TaskLayer {
 protected:
  const std::string ref = "reg.example:5000/ckpt/app@sha256:" + std::string(64, 'a');
  void SetUp() override {
    TaskLayer::SetUp();
    config_.checkpoint.image_store = (dir_ / "store").string();
    config_.checkpoint.annotation_restore = true;
    config_.checkpoint.annotation_registries = {"reg.example:5000/ckpt"};
    annotations_["restore.nvproxy.io/c1"] = ref;
  }
};

TEST_F(RestoreByAnnotation, TheCreateFetchesTheImageAndTheStartRestoresFromIt) {
  fs::create_directories(dir_ / "layer");
  std::ofstream(dir_ / "layer" / "written") << "from node A";
  hooks_.rootfs_diff = dir_ / "diff.tar";
  ASSERT_EQ(std::system(("tar -cf " + hooks_.rootfs_diff.string() + " -C " + (dir_ / "layer").string() + " written").c_str()), 0);
  EXPECT_EQ(create("c1"), 0);
  EXPECT_EQ(hooks_.fetched, ref);
  EXPECT_EQ(hooks_.fetched_for, "c1");
  EXPECT_EQ(read_file(dir_ / "c1" / "rootfs" / "written"), "from node A");
  EXPECT_FALSE(rt_->called_any("create"));
  pid_t pid = start("c1");
  EXPECT_TRUE(rt_->called("restore " + std::to_string(pid)));
  EXPECT_EQ(hooks_.restored_from, (dir_ / "c1" / "restore-by-annotation" / "archive" / "checkpoint").string());
  kill("c1", SIGKILL);
  svc_->on_exit(pid, status_exited(137));
}

TEST_F(RestoreByAnnotation, OffInTheConfigTheCreateIsRefusedAndNothingIsFetched) {
  config_.checkpoint.annotation_restore = false;
  EXPECT_EQ(code_of([&] { create("c1"); }), Code::FailedPrecondition);
  EXPECT_TRUE(hooks_.fetched.empty());
  EXPECT_EQ(code_of([&] { state("c1"); }), Code::NotFound);
}

TEST_F(RestoreByAnnotation, ARefusedFetchLeavesNoContainerAndNothingInTheBundle) {
  hooks_.refuse_fetch = "this host's GPUs cannot give the image back";
  EXPECT_EQ(code_of([&] { create("c1"); }), Code::FailedPrecondition);
  EXPECT_EQ(hooks_.fetched, ref);
  EXPECT_EQ(code_of([&] { state("c1"); }), Code::NotFound);
  EXPECT_FALSE(fs::exists(dir_ / "c1" / "restore-by-annotation"));
  EXPECT_FALSE(rt_->called_any("create"));
}

TEST_F(RestoreByAnnotation, AContainerNamedOtherwiseStartsFresh) {
  EXPECT_GT(create("sidecar"), 0);
  EXPECT_TRUE(hooks_.fetched.empty());
  EXPECT_TRUE(rt_->called_any("create"));
}
// gVisor restores whole sandboxes from its own state file, which a CRI image of one container
// does not hold: refused at create, with the reason.
TEST_F(RestoreByAnnotation, UnderRunscTheCreateIsRefusedWithTheReason) {
  config_.runtime.binary = "runsc";
  std::string msg;
  EXPECT_EQ(code_of([&] { create("c1"); }, &msg), Code::FailedPrecondition);
  EXPECT_NE(msg.find("not possible under runsc"), std::string::npos) << msg;
  EXPECT_TRUE(hooks_.fetched.empty());
}

// A gVisor pod restored whole (pod_restore_annotation.h): the sandbox container's create takes the
// pod's annotations, each container of the pod created afterwards is restored from the same image
// under its name, one the annotations do not name is refused and the waiting sandbox ended.
class PodRestoredWhole : public RestoreByAnnotation {
 protected:
  void SetUp() override {
    RestoreByAnnotation::SetUp();
    config_.runtime.binary = "/usr/local/bin/runsc";
    annotations_ = {
        {"io.kubernetes.cri.sandbox-id", "sb"}, {"restore.nvproxy.io/cuda", ref}, {"restore.nvproxy.io/counter", ref}};
  }
  void create_in_pod(const std::string& id, const std::string& type, const std::string& name = "") {
    annotations_["io.kubernetes.cri.container-type"] = type;
    if (!name.empty()) annotations_["io.kubernetes.cri.container-name"] = name;
    create(id);
  }
};

TEST_F(PodRestoredWhole, TheSandboxAndEachContainerAreRestoredFromThePodsImage) {
  create_in_pod("sb", "sandbox");
  EXPECT_EQ(hooks_.fetched_for, "sb");
  EXPECT_EQ(hooks_.fetched, ref);
  pid_t pid = start("sb");
  EXPECT_TRUE(rt_->called("restore " + std::to_string(pid)));
  create_in_pod("k1", "container", "cuda");
  EXPECT_EQ(hooks_.fetched_for, "k1");
  EXPECT_FALSE(rt_->called_any("create"));
  start("k1");
  EXPECT_EQ(hooks_.restored_from, (dir_ / "k1" / "restore-by-annotation" / "archive" / "checkpoint").string());
}

TEST_F(PodRestoredWhole, AContainerTheAnnotationsDoNotNameIsRefusedAndTheSandboxEnded) {
  create_in_pod("sb", "sandbox");
  start("sb");
  std::string msg;
  EXPECT_EQ(code_of([&] { create_in_pod("m1", "container", "metrics"); }, &msg), Code::FailedPrecondition);
  EXPECT_NE(msg.find("cannot start fresh inside a restored sandbox"), std::string::npos) << msg;
  EXPECT_EQ(hooks_.fetched_for, "sb");  // nothing fetched for it
  EXPECT_TRUE(rt_->called("kill 9 all"));
  EXPECT_EQ(code_of([&] { state("m1"); }), Code::NotFound);
}

TEST_F(PodRestoredWhole, AnnotationsNamingTwoImagesAreRefusedAtTheSandboxsCreate) {
  annotations_["restore.nvproxy.io/counter"] = "reg.example:5000/ckpt/app@sha256:" + std::string(64, 'b');
  std::string msg;
  EXPECT_EQ(code_of([&] { create_in_pod("sb", "sandbox"); }, &msg), Code::FailedPrecondition);
  EXPECT_NE(msg.find("name different images"), std::string::npos) << msg;
  EXPECT_TRUE(hooks_.fetched.empty());
}

}  // namespace
}  // namespace nvproxy::shim
