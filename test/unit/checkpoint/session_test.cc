// A whole checkpoint session (checkpoint/session/session.h) against fakes: a runtime that records its verbs
// (SessionRuntime), the fake CUDA driver through the real dlopen binding, real fake_cuda_app
// processes and the real /proc scan. What the task layer's adapter adds is only which runtime.
#include "checkpoint/session/session.h"

#include <gtest/gtest.h>

#include <chrono>

#include <fcntl.h>
#include <unistd.h>

#include "checkpoint/driver/cuda_driver_api.h"
#include "checkpoint/image/image_record.h"
#include "checkpoint/image/image_store.h"
#include "common/unique_fd.h"
#include "fake_gpu.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;
using namespace std::chrono_literals;

namespace {

class FakeRuntime final : public SessionRuntime {
 public:
  std::vector<pid_t> pids;
  std::string state = "running";
  std::vector<std::string> verbs;
  std::function<void()> on_snapshot;
  std::string released;           // the last snapshot's release plan
  std::filesystem::path written;  // where the last snapshot went

  std::vector<pid_t> ps() override { return pids; }
  pid_t init_pid() override { return pids.empty() ? 0 : pids.front(); }
  std::string status() override { return state; }
  void pause() override {
    verbs.push_back("pause");
    state = "paused";
  }
  void resume() override {
    verbs.push_back("resume");
    state = "running";
  }
  void snapshot(const std::filesystem::path& image, const ReleasePlan& release) override {
    released = release.devices_text();
    written = image;
    verbs.push_back("snapshot(" + state + ")");
    if (on_snapshot) on_snapshot();
  }
  void restore(const std::filesystem::path& image, bool leave_stopped, const std::string& from) override {
    verbs.push_back(std::string("restore") + (leave_stopped ? "(stopped)" : ""));
    restored = image;
    taken_from = from;
  }
  std::string remove() override {
    verbs.push_back("remove");
    return "fake delete --force";
  }
  std::optional<Criu> criu() override {
    return criu_version.empty() ? std::nullopt : std::optional<Criu>(Criu{.version = criu_version});
  }
  Identity identity() override { return who; }
  std::string cannot_checkpoint() override { return unsupported; }
  Identity who{"runc", "1.1.5"};
  std::string unsupported;
  std::string criu_version;
  std::string taken_from;
  std::filesystem::path restored;  // what the last restore read
};

// The host variant's shape over the fake driver; host_facts can be switched off (a sandbox's view).
class FakeTools final : public SessionTools {
 public:
  FakeTools(const CheckpointConfig& cfg, FakeRuntime& rt, Logger& log, bool with_facts)
      : lister_([&rt] { return rt.ps(); }),
        scanner_(cfg.device_globs),
        toggler_(FAKE_LIBCUDA_PATH),
        probe_(FAKE_LIBNVML_PATH),
        with_facts_(with_facts),
        orch_(cfg, {.lister = &lister_, .scanner = &scanner_, .toggler = &toggler_, .probe = &probe_}, log) {}
  Orchestrator& orchestrator() override { return orch_; }
  ProcessLister& lister() override { return lister_; }
  HolderScanner& scanner() override { return scanner_; }
  [[nodiscard]] bool toggles_cuda() const override { return true; }
  [[nodiscard]] bool host_view() const override { return true; }
  GpuUsageProbe* host_facts() override { return with_facts_ ? &probe_ : nullptr; }
  ProcessIdentity identify(pid_t pid) override { return identify_process(pid); }
  pid_t container_pid(pid_t pid) override { return identify_process(pid).pid; }
  [[nodiscard]] std::string label() const override { return ""; }

 private:
  FunctionLister lister_;
  ProcHolderScanner scanner_;
  DriverApiToggler toggler_;
  NvmlGpuUsageProbe probe_;
  bool with_facts_;
  Orchestrator orch_;
};

class SessionTest : public ::testing::Test {
 protected:
  FakeGpu gpu;
  CheckpointConfig cfg = gpu.config();
  FakeRuntime rt;
  Logger log{-1};
  fs::path bundle = gpu.dir() / "bundle";
  fs::path image = gpu.dir() / "image";

  void SetUp() override {
    fs::create_directories(bundle);
    fs::create_directories(image);
    spit(gpu.dir() / "nvml_driver", "580.159.04");
  }
  CheckpointSession session(FakeTools& tools) { return {{.id = "c1", .bundle = bundle}, rt, tools, log}; }
  static bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
};

}  // namespace

TEST_F(SessionTest, ThawsAPausedContainerForTheTogglesRecordsTheImageAndPausesItAgain) {
  pid_t a = gpu.start_app({"--children", "1"});
  pid_t child = gpu.children(a).at(0);
  rt.pids = {a, child};
  gpu.nvml(std::to_string(a) + " 0 4813\n" + std::to_string(child) + " 0 100\n");
  rt.state = "paused";  // containerd pauses the task before its checkpoint
  rt.on_snapshot = [&] {
    EXPECT_EQ(gpu.state(a), "checkpointed");
    EXPECT_EQ(gpu.state(child), "checkpointed");
  };
  FakeTools tools(cfg, rt, log, true);
  session(tools).checkpoint({.leave_running = true, .paused = true, .image_path = image});
  EXPECT_EQ(rt.verbs, (std::vector<std::string>{"resume", "snapshot(running)", "pause"}));
  EXPECT_EQ(rt.state, "paused");
  EXPECT_EQ(gpu.state(a), "running");
  EXPECT_EQ(gpu.state(child), "running");

  auto rec = read_image_record(image);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->container, "c1");
  EXPECT_EQ(rec->sandbox, "");
  EXPECT_EQ(rec->cuda_pids, (std::vector<ImageProcess>{{a, "fake_cuda_app"}, {child, "fake_cuda_app"}}));
  ASSERT_TRUE(rec->gpu) << rec->gpu_error;
  EXPECT_EQ(rec->gpu->driver_version, "580.159.04");
  ASSERT_EQ(rec->gpu->processes.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(slurp(bundle / kDiagnosticFile))["verdict"], "done");
}

// Debian 12's crun has no checkpoint command: refused before any toggle, with the runtime's reason.
TEST_F(SessionTest, ARuntimeWithoutCheckpointIsRefusedBeforeAnyToggle) {
  pid_t a = gpu.start_app();
  rt.pids = {a};
  rt.unsupported = "crun 1.8.1 (/usr/bin/crun) is built without CRIU";
  FakeTools tools(cfg, rt, log, true);
  try {
    session(tools).checkpoint({.leave_running = true, .paused = false, .image_path = image});
    FAIL() << "the checkpoint was not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_TRUE(has(e.what(), "checkpoint of \"c1\" refused: crun 1.8.1 (/usr/bin/crun) is built without CRIU")) << e.what();
    EXPECT_TRUE(has(e.what(), "nothing was toggled")) << e.what();
  }
  EXPECT_TRUE(rt.verbs.empty());
  EXPECT_TRUE(gpu.calls("lock").empty());
  EXPECT_EQ(gpu.state(a), "running");
}

TEST_F(SessionTest, APausedContainerWithoutGpuHoldersStaysPaused) {
  rt.pids = {::getpid()};  // holds no fake GPU device
  rt.state = "paused";
  FakeTools tools(cfg, rt, log, true);
  session(tools).checkpoint({.leave_running = true, .paused = true, .image_path = image});
  EXPECT_EQ(rt.verbs, (std::vector<std::string>{"snapshot(paused)"}));
  auto rec = read_image_record(image);
  ASSERT_TRUE(rec);
  EXPECT_FALSE(rec->has_cuda());
}

TEST_F(SessionTest, ASnapshotKilledForTimeThawsTheContainerAndRollsCudaBack) {
  pid_t a = gpu.start_app();
  rt.pids = {a};
  rt.on_snapshot = [&] {
    rt.state = "paused";  // CRIU froze the cgroup and was killed before it thawed it
    throw DeadlineError("runc checkpoint", "container \"c1\"", 3000ms, 4242, "killed runc and CRIU (pgid 4242)");
  };
  FakeTools tools(cfg, rt, log, true);
  try {
    session(tools).checkpoint({.leave_running = true, .paused = false, .image_path = image});
    FAIL() << "the checkpoint did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::DeadlineExceeded);
    EXPECT_TRUE(has(e.what(), "did not finish within 3000 ms")) << e.what();
    EXPECT_TRUE(has(e.what(), "container thawed")) << e.what();
    EXPECT_TRUE(has(e.what(), "CUDA restored in pids " + std::to_string(a))) << e.what();
  }
  EXPECT_EQ(rt.verbs, (std::vector<std::string>{"snapshot(running)", "resume"}));
  EXPECT_EQ(rt.state, "running");
  EXPECT_EQ(gpu.state(a), "running");
  EXPECT_FALSE(read_image_record(image));  // no image, no record
}

TEST_F(SessionTest, RestoreNamesARecordedProcessThatIsMissing) {
  pid_t a = gpu.start_app({"--children", "1"});  // the init and its child: both in the init's tree
  pid_t b = gpu.children(a).at(0);
  rt.pids = {a, b};
  FakeTools tools(cfg, rt, log, true);
  session(tools).checkpoint({.leave_running = false, .image_path = image});
  EXPECT_EQ(gpu.state(a), "checkpointed");  // the task exits: nothing resumed
  EXPECT_EQ(gpu.state(b), "checkpointed");

  // The runtime restored only a: b is recorded but missing.
  rt.pids = {a};
  rt.verbs.clear();
  try {
    session(tools).restore({.checkpoint = image});
    FAIL() << "a missing process was not noticed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_TRUE(has(e.what(), "1 of them is missing after the runtime's restore (container pids " + std::to_string(b)))
        << e.what();
    // Nothing of a half-restored task keeps running behind containerd's back.
    EXPECT_TRUE(has(e.what(), "; removed the restored container (fake delete --force)")) << e.what();
  }
  EXPECT_EQ(rt.verbs, (std::vector<std::string>{"restore", "remove"}));
  EXPECT_EQ(gpu.state(a), "running");  // what came back runs (until the runtime's delete ends it)
  EXPECT_EQ(nlohmann::json::parse(slurp(bundle / kDiagnosticFile))["missing"][0]["pid"], b);
}

TEST_F(SessionTest, RestoreOfACompleteImageResumesEveryProcess) {
  pid_t a = gpu.start_app({"--children", "1"});
  pid_t b = gpu.children(a).at(0);
  rt.pids = {a, b};
  FakeTools tools(cfg, rt, log, true);
  session(tools).checkpoint({.leave_running = false, .image_path = image});
  rt.verbs.clear();
  session(tools).restore({.checkpoint = image});
  EXPECT_EQ(rt.verbs, (std::vector<std::string>{"restore"}));
  // The runtime learns which container the image was taken from (a replica's own cgroup).
  EXPECT_EQ(rt.taken_from, read_image_record(image)->container);
  EXPECT_FALSE(rt.taken_from.empty());
  EXPECT_EQ(gpu.state(a), "running");
  EXPECT_EQ(gpu.state(b), "running");
}

TEST_F(SessionTest, RestorePreflightRefusesWhatThisHostCannotTell) {
  pid_t a = gpu.start_app();
  rt.pids = {a};
  gpu.nvml(std::to_string(a) + " 0 4813\n");
  FakeTools with(cfg, rt, log, true);
  session(with).checkpoint({.leave_running = false, .image_path = image});
  ASSERT_TRUE(read_image_record(image)->gpu);
  rt.verbs.clear();

  // Where NVML cannot be had, the recorded GPU processes cannot be placed: refused before the
  // runtime restores anything, named, written.
  FakeTools without(cfg, rt, log, false);
  try {
    session(without).restore({.checkpoint = image});
    FAIL() << "the restore was not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_TRUE(has(e.what(), "pid " + std::to_string(a))) << e.what();
    EXPECT_TRUE(has(e.what(), "cannot see the host's GPUs")) << e.what();
  }
  EXPECT_TRUE(rt.verbs.empty()) << "the runtime restored nothing";
  EXPECT_TRUE(fs::exists(bundle / kDiagnosticFile));
  // The same host with NVML: it gives the process back (these tools hold nothing still: the
  // runtime is not asked to leave it stopped).
  session(with).restore({.checkpoint = image});
  EXPECT_EQ(rt.verbs, (std::vector<std::string>{"restore"}));
  EXPECT_EQ(gpu.state(a), "running");
  EXPECT_FALSE(fs::exists(bundle / kDiagnosticFile));
}

TEST_F(SessionTest, AnImageOfAnotherShimNeedsNothing) {
  FakeTools tools(cfg, rt, log, true);
  session(tools).restore({.checkpoint = image});  // no nvproxy-cuda.json
  EXPECT_EQ(rt.verbs, (std::vector<std::string>{"restore"}));
}

// The image records what wrote it; another node's restore checks it before the runtime runs:
// runsc restores only its own release's images, and an image of one kind no runtime of the other.
TEST_F(SessionTest, RestoreChecksTheRuntimeThatWroteTheImage) {
  FakeTools tools(cfg, rt, log, true);
  rt.who = {"runsc", "release-20260817.0"};
  session(tools).checkpoint({.leave_running = true, .image_path = image});
  auto rec = read_image_record(image);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->runtime, "runsc");
  EXPECT_EQ(rec->runtime_version, "release-20260817.0");

  rt.verbs.clear();
  rt.who = {"runsc", "0.0~20240729.0"};
  try {
    session(tools).restore({.checkpoint = image});
    FAIL() << "an image of another runsc release was restored";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_TRUE(has(e.what(), "written by runsc release-20260817.0 and this host runs runsc 0.0~20240729.0")) << e.what();
  }
  rt.who = {"runc", "1.1.5"};
  try {
    session(tools).restore({.checkpoint = image});
    FAIL() << "a sandbox's image was handed to runc";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "restores under runsc only")) << e.what();
  }
  EXPECT_TRUE(rt.verbs.empty()) << "the runtime restored nothing";
  rt.who = {"runsc", "release-20260817.0"};
  session(tools).restore({.checkpoint = image});
  EXPECT_EQ(rt.verbs, (std::vector<std::string>{"restore"}));
}

TEST_F(SessionTest, ACriuOlderThanTheImagesIsAWarningNotARefusal) {
  FakeTools tools(cfg, rt, log, true);
  rt.criu_version = "4.10";
  session(tools).checkpoint({.leave_running = true, .image_path = image});
  EXPECT_EQ(read_image_record(image)->criu_version, "4.10");
  rt.verbs.clear();
  rt.criu_version = "4.2.1";
  session(tools).restore({.checkpoint = image});  // 4.2.1 < 4.10: warned in the log, restored
  EXPECT_EQ(rt.verbs, (std::vector<std::string>{"restore"}));
}

// checkpoint.image_store: the session holds the image the same way on both verbs. The runtime
// writes into a fresh entry, containerd's directory gets the reference (and the record's copy),
// a failure leaves no entry, and a container keeps its newest image_store_keep entries.
class SessionStoreTest : public SessionTest {
 protected:
  fs::path store = gpu.dir() / "store";
  fs::path log_file = gpu.dir() / "shim.log";
  UniqueFd log_fd{::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)};
  Logger store_log{log_fd.get()};

  CheckpointSession session(FakeTools& tools) { return {{.id = "c1", .bundle = bundle, .ns = "default"}, rt, tools, store_log}; }
  SnapshotRequest into_store(unsigned keep = 3) const {
    return {.leave_running = true, .image_path = image, .image_store = store, .image_store_keep = keep};
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(store / "default" / "c1", ec)) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }
};

TEST_F(SessionStoreTest, TheSnapshotGoesIntoAStoreEntryThatTheClientsDirectoryRefersTo) {
  pid_t a = gpu.start_app();
  rt.pids = {a};
  gpu.nvml(std::to_string(a) + " 0 4813\n");
  FakeTools tools(cfg, rt, log, true);
  SnapshotRequest req = into_store();
  req.leave_running = false;  // the task exits: its CUDA state stays checkpointed for the restore
  session(tools).checkpoint(req);

  ASSERT_EQ(entries().size(), 1u);
  const fs::path entry = entries().front();
  EXPECT_EQ(rt.written, entry);
  auto rec = read_image_record(entry);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->cuda_pids, (std::vector<ImageProcess>{{a, "fake_cuda_app"}}));
  auto ref = read_image_ref(image);
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->store, store.string());
  EXPECT_EQ(ref->entry, fs::relative(entry, store).string());
  EXPECT_EQ(ref->container, "c1");
  EXPECT_EQ(read_image_record(image)->cuda_pids, rec->cuda_pids);  // the record's copy beside the reference
  EXPECT_TRUE(has(slurp(log_file), "image in the store at " + entry.string() + ", referred to from " + image.string()))
      << slurp(log_file);

  // The restore of what containerd kept reads the entry.
  rt.verbs.clear();
  session(tools).restore({.checkpoint = image, .image_store = store});
  EXPECT_EQ(rt.verbs, (std::vector<std::string>{"restore"}));
  EXPECT_EQ(rt.restored, entry);
  EXPECT_EQ(gpu.state(a), "running");
}

TEST_F(SessionStoreTest, AFailedCheckpointLeavesNoEntryAndNoReference) {
  rt.pids = {::getpid()};  // no GPU holders: the runtime's snapshot alone
  rt.on_snapshot = [&] {
    spit(rt.written / "pages-1.img", "half an image");
    throw Error(Code::Internal, "criu failed");
  };
  FakeTools tools(cfg, rt, log, true);
  EXPECT_THROW(session(tools).checkpoint(into_store()), Error);
  EXPECT_TRUE(rt.written.string().starts_with(store.string())) << rt.written;
  EXPECT_FALSE(fs::exists(rt.written));
  EXPECT_TRUE(entries().empty());
  EXPECT_FALSE(read_image_ref(image));

  // Refused before any snapshot: the entry made for it goes too.
  rt.on_snapshot = nullptr;
  rt.unsupported = "crun 1.8.1 (/usr/bin/crun) is built without CRIU";
  EXPECT_THROW(session(tools).checkpoint(into_store()), Error);
  EXPECT_TRUE(entries().empty());
  EXPECT_FALSE(read_image_ref(image));
}

TEST_F(SessionStoreTest, ACheckpointRemovesTheContainersEntriesBeyondTheKeep) {
  rt.pids = {::getpid()};
  FakeTools tools(cfg, rt, log, true);
  std::vector<fs::path> written;
  for (int i = 0; i < 3; ++i) {
    session(tools).checkpoint(into_store(2));
    written.push_back(rt.written);
  }
  EXPECT_EQ(entries(), (std::vector<fs::path>{written[1], written[2]}));
  EXPECT_EQ(read_image_ref(image)->entry, fs::relative(written[2], store).string());
  EXPECT_TRUE(has(slurp(log_file), "image store: removed " + written[0].string() + " (checkpoint.image_store_keep: 2)"))
      << slurp(log_file);
}

TEST_F(SessionStoreTest, WithoutAStoreTheSnapshotGoesIntoTheClientsDirectory) {
  rt.pids = {::getpid()};
  FakeTools tools(cfg, rt, log, true);
  session(tools).checkpoint({.leave_running = true, .image_path = image});
  EXPECT_EQ(rt.written, image);
  EXPECT_TRUE(read_image_record(image));
  EXPECT_FALSE(read_image_ref(image));
  EXPECT_FALSE(fs::exists(store));
}
