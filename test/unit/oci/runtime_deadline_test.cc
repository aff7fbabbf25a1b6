// Deadlines of the runtime driver: a runtime command that hangs is killed with its whole process
// group (the stand-in's "CRIU" child too), the call throws DeadlineError naming the command, and a
// killed restore removes the half-restored container.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>

#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "oci/runtime.h"

using namespace nvproxy;
using namespace nvproxy::oci;
using namespace std::chrono_literals;

namespace {

class RuntimeDeadlineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("nvproxy-rtdl-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    script_ = dir_ / "fake-runc";
    // checkpoint and restore start a "CRIU" (a plain sleep) and wait for it; state hangs itself.
    std::ofstream(script_) << "#!/bin/sh\n"
                              "echo \"$@\" >> "
                           << (dir_ / "argv").string()
                           << "\n"
                              "case \" $* \" in\n"
                              "  *\" checkpoint \"*|*\" restore \"*) sleep 1000 & echo $! > "
                           << (dir_ / "criu.pid").string()
                           << "; wait;;\n"
                              "  *\" state \"*) exec sleep 1000;;\n"
                              "esac\n";
    ::chmod(script_.c_str(), 0755);
  }
  void TearDown() override {
    if (pid_t p = criu_pid(); p > 0) ::kill(p, SIGKILL);
    std::filesystem::remove_all(dir_);
  }
  pid_t criu_pid() {
    std::ifstream in(dir_ / "criu.pid");
    pid_t p = 0;
    in >> p;
    return p;
  }
  // Waits on the process's exit itself (a pidfd), up to 10 s.
  static bool gone(pid_t pid) {
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return errno == ESRCH;
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, 10000);
    ::close(fd);
    return r == 1;
  }
  Runtime runtime(std::chrono::milliseconds ckpt, std::chrono::milliseconds restore, std::chrono::milliseconds other) {
    RuntimeConfig rc{.binary = script_.string()};
    rc.checkpoint_timeout = ckpt;
    rc.restore_timeout = restore;
    rc.command_timeout = other;
    return {rc, runner_, log_, dir_ / "log.json"};
  }
  std::string argv() { return read_file(dir_ / "argv"); }

  std::filesystem::path dir_, script_;
  DirectWaiter waiter_;
  ProcessRunner runner_{waiter_};
  Logger log_{-1};
};

}  // namespace

TEST_F(RuntimeDeadlineTest, HungCheckpointIsKilledWithItsCriu) {
  auto rt = runtime(1500ms, 60s, 60s);
  try {
    rt.checkpoint("c1", {.leave_running = true, .image_path = "/img"});
    FAIL() << "the hung checkpoint returned";
  } catch (const DeadlineError& e) {
    EXPECT_EQ(e.code(), Code::DeadlineExceeded);
    std::string m = e.what();
    EXPECT_NE(m.find("runc checkpoint of container \"c1\" did not finish within 1500 ms; killed runc and CRIU (pgid "),
              std::string::npos)
        << m;
    EXPECT_EQ(e.command(), "runc checkpoint");
    EXPECT_EQ(e.timeout(), 1500ms);
    EXPECT_GT(e.pgid(), 0);
  }
  pid_t criu = criu_pid();
  ASSERT_GT(criu, 0) << "the stand-in did not start its CRIU within the deadline";
  EXPECT_TRUE(gone(criu)) << "CRIU (pid " << criu << ") survived the kill";
}

TEST_F(RuntimeDeadlineTest, HungRestoreIsKilledAndTheHalfRestoredContainerRemoved) {
  auto rt = runtime(60s, 1500ms, 60s);
  try {
    rt.restore("c2", {.bundle = dir_, .image_path = "/img", .pid_file = dir_ / "pid"});
    FAIL() << "the hung restore returned";
  } catch (const DeadlineError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("runc restore of container \"c2\" did not finish within 1500 ms; killed runc and CRIU (pgid "),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("; removed the half-restored container (runc delete --force)"), std::string::npos) << m;
  }
  EXPECT_NE(argv().find("delete --force c2\n"), std::string::npos) << argv();
  pid_t criu = criu_pid();
  ASSERT_GT(criu, 0);
  EXPECT_TRUE(gone(criu));
}

TEST_F(RuntimeDeadlineTest, EveryOtherCommandHasABoundedDefault) {
  EXPECT_EQ(RuntimeConfig{}.command_timeout, RuntimeConfig::kDefaultCommandTimeout);
  EXPECT_GE(RuntimeConfig::kDefaultCommandTimeout, 60s);
  EXPECT_LE(RuntimeConfig::kDefaultCommandTimeout, 120s);
  auto rt = runtime(60s, 60s, 300ms);
  try {
    rt.state("c3");
    FAIL();
  } catch (const DeadlineError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("runc state of container \"c3\" did not finish within 300 ms; killed runc (pgid "), std::string::npos) << m;
  }
}

namespace {

// A failed checkpoint quotes CRIU's own error lines from the work path's dump.log.
TEST(RuntimeCriuLog, AFailedCheckpointCarriesCriusErrorLines) {
  auto dir = std::filesystem::temp_directory_path() / ("nvproxy-criulog-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "work");
  auto script = dir / "fake-runc";
  std::ofstream(script) << "#!/bin/sh\n"
                           "for a in \"$@\"; do case $a in --work-path=*) w=${a#--work-path=};; esac; done\n"
                           "printf '(00.01) Dumping\\n(00.12) Error (criu/files-reg.c:1287): cannot create link remap for "
                           "/dev/shm/sem.x. Use link-remap option.\\n(00.13) Error (criu/cr-dump.c:2000): Dumping FAILED.\\n' > "
                           "\"$w/dump.log\"\n"
                           "echo 'criu failed: type NOTIFY errno 0' >&2\nexit 1\n";
  ::chmod(script.c_str(), 0755);
  Logger log(-1);
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  Runtime rt({.binary = script.string()}, runner, log, dir / "log.json");
  CheckpointFlags f;
  f.image_path = (dir / "img").string();
  f.work_path = (dir / "work").string();
  try {
    rt.checkpoint("c1", f);
    FAIL() << "the checkpoint did not fail";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("cannot create link remap for /dev/shm/sem.x"), std::string::npos) << m;
    EXPECT_NE(m.find("Dumping FAILED"), std::string::npos) << m;
    EXPECT_EQ(m.find("(00.01) Dumping\n"), std::string::npos) << "only the Error lines: " << m;
  }
  EXPECT_EQ(criu_errors(dir / "none.log"), "");
  std::filesystem::remove_all(dir);
}

// Issue 33: the cause comes first, not the RLIMIT_NOFILE line every CRIU run prints, and a long
// cascade keeps both ends.
TEST(RuntimeCriuLog, TheCauseIsQuotedFirstAndTheNoiseNotAtAll) {
  auto log = std::filesystem::temp_directory_path() / ("nvproxy-criulog-c-" + std::to_string(::getpid()) + ".log");
  {
    std::ofstream out(log);
    out << "(00.00) Error (criu/util.c:1534): rlimit: Can't setup RLIMIT_NOFILE for self: Operation not permitted\n"
        << "(00.10) Error (criu/files.c:560): Unknown shit 600 (anon_inode:[io_uring])\n";
    for (int i = 0; i < 6; ++i) out << "(00.1" << i << ") Error (criu/cr-dump.c:1): step " << i << " failed\n";
    out << "(00.20) Error (criu/cr-dump.c:2000): Dumping FAILED.\n";
  }
  std::string e = criu_errors(log, 4);
  std::filesystem::remove(log);
  EXPECT_EQ(e.find("RLIMIT_NOFILE"), std::string::npos) << e;
  EXPECT_EQ(e.rfind("  (00.10) Error (criu/files.c:560): Unknown shit 600 (anon_inode:[io_uring])\n  ...\n", 0), 0u) << e;
  EXPECT_NE(e.find("step 5 failed"), std::string::npos) << e;
  EXPECT_NE(e.find("Dumping FAILED."), std::string::npos) << e;
  EXPECT_EQ(e.find("step 3 failed"), std::string::npos) << "at most 4 lines: " << e;
}

// A failed restore quotes CRIU's restore.log from the work path, and a hint; a stale restore.log of
// an earlier attempt is not quoted.
TEST(RuntimeCriuLog, AFailedRestoreCarriesCriusErrorLines) {
  auto dir = std::filesystem::temp_directory_path() / ("nvproxy-criulog-r-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "work");
  auto script = dir / "fake-runc";
  std::ofstream(script) << "#!/bin/sh\n"
                           "w=; prev=; for a in \"$@\"; do [ \"$prev\" = --work-path ] && w=$a; prev=$a; done\n"
                           "[ -e "
                        << (dir / "quiet").string()
                        << " ] && exit 1\n"
                           "printf '(00.01) Restoring\\n(00.20) Error (criu/files-reg.c:2120): Can\\047t open file "
                           "dev/shm/sem.y: No such file or directory. Use link-remap option.\\n(00.21) Error "
                           "(criu/cr-restore.c:2530): Restoring FAILED.\\n' > \"$w/restore.log\"\n"
                           "echo 'criu failed: type RESTORE errno 0' >&2\nexit 1\n";
  ::chmod(script.c_str(), 0755);
  Logger log(-1);
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  Runtime rt({.binary = script.string()}, runner, log, dir / "log.json");
  RestoreOptions o{.bundle = dir, .image_path = dir / "img", .work_path = dir / "work", .pid_file = dir / "pid"};
  std::string m;
  try {
    rt.restore("b2", o);
    FAIL() << "the restore did not fail";
  } catch (const Error& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("restore of container \"b2\" failed: "), std::string::npos) << m;
  EXPECT_NE(m.find("CRIU (" + (dir / "work" / "restore.log").string() + "):\n"), std::string::npos) << m;
  EXPECT_NE(m.find("Can't open file dev/shm/sem.y"), std::string::npos) << m;
  EXPECT_NE(m.find("Restoring FAILED"), std::string::npos) << m;
  EXPECT_EQ(m.find("(00.01) Restoring"), std::string::npos) << "only the Error lines: " << m;
  EXPECT_NE(m.find("hint: "), std::string::npos) << m;

  std::ofstream(dir / "quiet") << "";  // fails without writing a log: the previous one is not this restore's
  try {
    rt.restore("b2", o);
    FAIL() << "the restore did not fail";
  } catch (const Error& e) {
    m = e.what();
  }
  EXPECT_EQ(m.find("Restoring FAILED"), std::string::npos) << m;
  std::filesystem::remove_all(dir);
}

}  // namespace
