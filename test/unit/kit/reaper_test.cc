// The reaper hands our own commands' exits to their waiters and everything else (container
// processes, orphans) to the callback.
#include "shim/kit/reaper.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>

using namespace nvproxy;
using namespace nvproxy::shim;

TEST(Reaper, RoutesExits) {
  Reaper::block_sigchld();
  std::mutex mu;
  std::set<pid_t> others;
  Reaper reaper([&](pid_t pid, int status) {
    std::lock_guard lk(mu);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 4) others.insert(pid);
  });
  ProcessRunner runner(reaper);
  // A run through the runner gets its own status, many times over, while unrelated children exit.
  std::vector<pid_t> strays;
  for (int i = 0; i < 20; ++i) {
    pid_t p = ::fork();
    if (p == 0) ::_exit(4);
    strays.push_back(p);
    auto r = runner.run({.argv = {"sh", "-c", "exit 7"}});
    EXPECT_EQ(r.exit_code, 7);
  }
  for (int i = 0; i < 100; ++i) {
    {
      std::lock_guard lk(mu);
      if (others.size() == strays.size()) break;
    }
    ::usleep(20000);
  }
  std::lock_guard lk(mu);
  EXPECT_EQ(others, std::set<pid_t>(strays.begin(), strays.end()));
}
