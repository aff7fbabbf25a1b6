// ThreadHold (nvproxy-cuda-helper's ptrace hold) against a real forked process with two threads:
// what "held" means is read from /proc (every thread in a tracing stop), what "let run" means from
// counters the threads advance in shared memory.
#include "checkpoint/helper/thread_hold.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;

namespace {

struct Shared {
  std::atomic<long> main_count{0};
  std::atomic<long> second_count{0};
  std::atomic<pid_t> second_tid{0};
};

template <class F>
bool wait_until(F done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

char state_of(pid_t pid, pid_t tid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto close = s.rfind(')');
  return close == std::string::npos || close + 2 >= s.size() ? '?' : s[close + 2];
}

std::vector<pid_t> threads_of(pid_t pid) {
  std::vector<pid_t> out;
  DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') out.push_back(std::stoi(e->d_name));
  ::closedir(d);
  return out;
}

bool all_in(pid_t pid, char state) {
  for (pid_t t : threads_of(pid))
    if (state_of(pid, t) != state) return false;
  return true;
}

class ThreadHoldTest : public ::testing::Test {
 protected:
  void SetUp() override {
    void* m = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    sh = new (m) Shared;
    child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      std::thread second([s = sh] {
        s->second_tid = static_cast<pid_t>(::syscall(SYS_gettid));
        for (;;) ++s->second_count;
      });
      for (;;) ++sh->main_count;
    }
    ASSERT_TRUE(wait_until([&] { return sh->second_tid.load() != 0 && sh->main_count.load() > 0; }));
  }
  void TearDown() override {
    if (child > 0) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
    }
    ::munmap(sh, sizeof(Shared));
  }
  Shared* sh = nullptr;
  pid_t child = -1;
};

}  // namespace

// A process that a restore left stopped (SIGSTOP) is taken into the hold and continued: no longer
// in its group stop, every thread in a tracing stop; the thread let run for a driver call runs
// (the continue's notification trap does not stop it again) while the other stays; after the
// release both run.
TEST_F(ThreadHoldTest, AProcessLeftStoppedIsHeldThenOneThreadLetRunThenAllReleased) {
  ASSERT_EQ(::kill(child, SIGSTOP), 0);
  ASSERT_TRUE(wait_until([&] { return all_in(child, 'T'); }));
  const pid_t second = sh->second_tid;

  ThreadHold hold;
  EXPECT_TRUE(hold.hold_stopped({{.pid = child, .restore_tid = second}}).empty());
  ASSERT_TRUE(wait_until([&] { return all_in(child, 't'); })) << "not every thread is in a tracing stop";
  EXPECT_TRUE(hold.held(child));

  const long main_before = sh->main_count;
  bool ran = false;
  hold.with_restore_thread(child, [&] {
    long at = sh->second_count;
    ran = wait_until([&] { return sh->second_count.load() > at; });
  });
  EXPECT_TRUE(ran) << "the restore thread did not run while let";
  EXPECT_EQ(sh->main_count.load(), main_before) << "the other thread ran while held";
  EXPECT_TRUE(wait_until([&] { return all_in(child, 't'); })) << "the restore thread was not stopped again";

  hold.release();
  EXPECT_TRUE(wait_until([&] { return sh->main_count.load() > main_before; })) << "not running after the release";
  EXPECT_FALSE(all_in(child, 'T')) << "left in its group stop";
}

// One process of several released alone (a checkpoint's newcomer let run to its CUDA init).
TEST_F(ThreadHoldTest, ReleasingOneProcessLeavesTheOthersHeld) {
  pid_t other = ::fork();
  ASSERT_GE(other, 0);
  if (other == 0)
    for (;;) ::pause();
  ThreadHold hold;
  EXPECT_TRUE(hold.hold({{.pid = child}, {.pid = other}}).empty());
  ASSERT_TRUE(wait_until([&] { return all_in(child, 't') && all_in(other, 't'); }));
  const long before = sh->main_count;
  hold.release({child});
  EXPECT_TRUE(wait_until([&] { return sh->main_count.load() > before; })) << "the released one does not run";
  EXPECT_FALSE(hold.held(child));
  EXPECT_TRUE(hold.held(other));
  EXPECT_TRUE(all_in(other, 't')) << "the other one was let go too";
  hold.release();
  ::kill(other, SIGKILL);
  ::waitpid(other, nullptr, 0);
}

// A job runner's child that has exited but is not reaped yet (a zombie) cannot be seized: it is
// reported as ended with the rest held, not a failed checkpoint.
TEST_F(ThreadHoldTest, AnExitedUnreapedChildIsEndedNotAFailure) {
  pid_t zombie = ::fork();
  ASSERT_GE(zombie, 0);
  if (zombie == 0) ::_exit(0);
  ASSERT_TRUE(wait_until([&] { return state_of(zombie, zombie) == 'Z'; }));
  ThreadHold hold;
  std::vector<pid_t> ended;
  ASSERT_NO_THROW(ended = hold.hold({{.pid = child}, {.pid = zombie}}));
  EXPECT_EQ(ended, std::vector<pid_t>{zombie});
  EXPECT_TRUE(hold.held(child));
  EXPECT_FALSE(hold.held(zombie));
  hold.release();
  ::waitpid(zombie, nullptr, 0);
}

// A process another tracer holds (a debugger) is refused with that tracer named.
TEST_F(ThreadHoldTest, AProcessAnotherTracerHoldsIsRefusedNamingTheTracer) {
  ASSERT_EQ(::ptrace(PTRACE_SEIZE, child, nullptr, nullptr), 0);
  const auto me = static_cast<pid_t>(::syscall(SYS_gettid));
  ThreadHold hold;
  try {
    hold.hold({{.pid = child}});
    ADD_FAILURE() << "a traced process was held";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_NE(std::string(e.what()).find("already traced by pid " + std::to_string(me)), std::string::npos) << e.what();
  }
  hold.release();  // what was seized before the refusal goes with the rest
  EXPECT_FALSE(hold.held(child));
}

// The driver call waits for another thread of the held process (measured on the H200: a job
// runner's worker whose CUDA checkpoint never ended while the worker was held): once the restore
// thread has slept on a futex for the patience, the rest of the process runs until the call
// returns, and is held again afterwards.
TEST(ThreadHoldStall, ACallWhoseRestoreThreadWaitsForAHeldThreadLetsTheProcessRun) {
  void* m = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  Shared* sh = new (m) Shared;
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The main thread (the "restore thread") sleeps in a join: a futex wait on the second thread.
    std::thread second([sh] {
      sh->second_tid = static_cast<pid_t>(::syscall(SYS_gettid));
      for (;;) {
        ++sh->second_count;
        ::usleep(1000);
      }
    });
    second.join();
    ::_exit(0);
  }
  ASSERT_TRUE(wait_until([&] { return sh->second_tid.load() != 0 && sh->second_count.load() > 0; }));
  {
    ThreadHold hold(std::chrono::milliseconds(300));
    ASSERT_TRUE(hold.hold({{.pid = child, .restore_tid = child}}).empty());
    ASSERT_TRUE(wait_until([&] { return all_in(child, 't'); }));
    bool advanced = false;
    hold.with_restore_thread(child, [&] {
      // What the driver would wait for: the second thread doing something.
      long c0 = sh->second_count.load();
      advanced = wait_until([&] { return sh->second_count.load() > c0 + 5; }, std::chrono::seconds(10));
    });
    EXPECT_TRUE(advanced) << "the held thread never ran for the call that waited on it";
    EXPECT_EQ(hold.stalls(), 1);
    EXPECT_TRUE(wait_until([&] { return all_in(child, 't'); })) << "held again after the call";
    long c1 = sh->second_count.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(sh->second_count.load(), c1) << "the second thread runs after the call";
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::munmap(sh, sizeof(Shared));
}

// A call whose restore thread is busy (not asleep on a futex) is never turned into a run of the
// whole process, however long it takes: a JAX process must stay held through a long checkpoint.
TEST_F(ThreadHoldTest, ALongCallWithABusyRestoreThreadKeepsTheRestHeld) {
  ThreadHold hold(std::chrono::milliseconds(200));
  ASSERT_TRUE(hold.hold({{.pid = child, .restore_tid = child}}).empty());
  ASSERT_TRUE(wait_until([&] { return all_in(child, 't'); }));
  long second = sh->second_count.load();
  hold.with_restore_thread(child, [&] { std::this_thread::sleep_for(std::chrono::milliseconds(800)); });
  EXPECT_EQ(hold.stalls(), 0);
  EXPECT_EQ(sh->second_count.load(), second) << "the held thread ran during a long call";
}
