#include "shim/task/oom_watcher.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>

#include <condition_variable>
#include <cstring>
#include <fstream>
#include <functional>
#include <thread>

#include "common/log.h"

using namespace nvproxy;
using namespace nvproxy::shim;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> ids;
  std::function<void(const std::string&)> fn() {
    return [this](const std::string& id) {
      std::lock_guard lk(mu);
      ids.push_back(id);
      cv.notify_all();
    };
  }
  bool wait_count(size_t n, std::chrono::milliseconds t) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, t, [&] { return ids.size() >= n; });
  }
  size_t count() {
    std::lock_guard lk(mu);
    return ids.size();
  }
  size_t count(const std::string& id) {
    std::lock_guard lk(mu);
    return static_cast<size_t>(std::count(ids.begin(), ids.end(), id));
  }
  bool wait_id_count(const std::string& id, size_t n, std::chrono::milliseconds t) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, t, [&] { return static_cast<size_t>(std::count(ids.begin(), ids.end(), id)) >= n; });
  }
};

// A Logger writing into a memfd the test reads back.
struct LogCapture {
  UniqueFd fd{::memfd_create("oom-log", MFD_CLOEXEC)};
  Logger log{fd.get(), LogLevel::Debug};
  std::string text() {
    std::string s(65536, '\0');
    ssize_t n = ::pread(fd.get(), s.data(), s.size(), 0);
    s.resize(n > 0 ? static_cast<size_t>(n) : 0);
    return s;
  }
};

bool write_str(const fs::path& p, const std::string& s) {
  std::ofstream f(p);
  f << s;
  f.flush();
  return static_cast<bool>(f);
}

bool unified_host() {
  return fs::exists("/sys/fs/cgroup/cgroup.controllers");
}

// A real memory cgroup limited to 8 MiB (swap included); removed even when the test fails.
struct MemCgroup {
  fs::path dir;
  explicit MemCgroup(const std::string& name) {
    dir = unified_host() ? fs::path("/sys/fs/cgroup") / name : fs::path("/sys/fs/cgroup/memory") / name;
    fs::create_directory(dir);
    const std::string limit = std::to_string(8 << 20);
    if (unified_host()) {
      EXPECT_TRUE(write_str(dir / "memory.max", limit));
      if (fs::exists(dir / "memory.swap.max")) {
        EXPECT_TRUE(write_str(dir / "memory.swap.max", "0"));
      }
    } else {
      EXPECT_TRUE(write_str(dir / "memory.limit_in_bytes", limit));
      if (fs::exists(dir / "memory.memsw.limit_in_bytes")) {
        EXPECT_TRUE(write_str(dir / "memory.memsw.limit_in_bytes", limit));
      }
    }
  }
  ~MemCgroup() {
    for (int i = 0; i < 100 && fs::exists(dir); ++i) {
      std::ifstream procs(dir / "cgroup.procs");
      for (pid_t p; procs >> p;) ::kill(p, SIGKILL);
      if (::rmdir(dir.c_str()) == 0) break;
      std::this_thread::sleep_for(20ms);
    }
  }
  bool enter(pid_t pid) { return write_str(dir / "cgroup.procs", std::to_string(pid)); }
};

// A child that waits on a pipe, then (on 'a') touches 64 MiB; killed and reaped at scope exit.
struct Child {
  pid_t pid = -1;
  UniqueFd go;
  int status = 0;
  Child() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) < 0) return;
    pid = ::fork();
    if (pid == 0) {  // only async-signal-safe calls: the parent has threads
      ::close(p[1]);
      char c = 0;
      if (::read(p[0], &c, 1) != 1 || c != 'a') _exit(0);
      const size_t size = 64 << 20;
      void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) _exit(2);
      std::memset(m, 1, size);
      _exit(3);
    }
    ::close(p[0]);
    go.reset(p[1]);
  }
  void send(char c) { [[maybe_unused]] ssize_t n = ::write(go.get(), &c, 1); }
  bool reap(std::chrono::milliseconds t) {
    for (auto end = std::chrono::steady_clock::now() + t; std::chrono::steady_clock::now() < end;) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return true;
      }
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
  }
};

bool can_make_memory_cgroups() {
  if (::geteuid() != 0) return false;
  return unified_host() ? fs::exists("/sys/fs/cgroup/cgroup.subtree_control")
                        : fs::exists("/sys/fs/cgroup/memory/cgroup.event_control");
}

std::string cg_name(const char* what) {
  return "nvproxy-test-" + std::to_string(::getpid()) + "-" + what;
}

}  // namespace

TEST(OomWatcher, ReportsARealOomKillAndNothingAfterRemove) {
  if (!can_make_memory_cgroups()) GTEST_SKIP() << "needs root and a writable memory cgroup";
  Recorder rec;
  LogCapture cap;
  OomWatcher w(cap.log, rec.fn());
  MemCgroup cg(cg_name("oom"));

  {
    Child c;
    ASSERT_GT(c.pid, 0);
    ASSERT_TRUE(cg.enter(c.pid));
    w.add("ctr-oom", c.pid);
    ASSERT_EQ(w.watched(), 1u) << cap.text();
    c.send('a');
    ASSERT_TRUE(c.reap(10s));
    ASSERT_TRUE(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGKILL) << "child was not OOM-killed, status " << c.status;
    ASSERT_TRUE(rec.wait_count(1, 5s)) << cap.text();
  }
  std::this_thread::sleep_for(300ms);  // let repeated signals of the same OOM arrive
  size_t seen = rec.count();
  {
    std::lock_guard lk(rec.mu);
    for (const auto& id : rec.ids) EXPECT_EQ(id, "ctr-oom");
  }

  w.remove("ctr-oom");
  EXPECT_EQ(w.watched(), 0u);
  Child c2;
  ASSERT_TRUE(cg.enter(c2.pid));
  c2.send('a');
  ASSERT_TRUE(c2.reap(10s));
  ASSERT_TRUE(WIFSIGNALED(c2.status)) << "second child was not OOM-killed";
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(rec.count(), seen) << "on_oom called after remove()";
}

TEST(OomWatcher, CgroupRemovalIsNotAnOom) {
  if (!can_make_memory_cgroups()) GTEST_SKIP() << "needs root and a writable memory cgroup";
  Recorder rec;
  LogCapture cap;
  OomWatcher w(cap.log, rec.fn());
  {
    MemCgroup cg(cg_name("rm"));
    Child c;
    ASSERT_TRUE(cg.enter(c.pid));
    w.add("ctr-rm", c.pid);
    ASSERT_EQ(w.watched(), 1u) << cap.text();
    c.send('q');  // exits normally
    ASSERT_TRUE(c.reap(5s));
  }  // rmdir
  // v1 signals the eventfd on removal; the watcher must drop the entry without a report.
  if (!unified_host()) {
    for (int i = 0; i < 100 && w.watched() != 0; ++i) std::this_thread::sleep_for(20ms);
    EXPECT_EQ(w.watched(), 0u) << cap.text();
  }
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(rec.count(), 0u);
}

TEST(OomWatcher, VanishedPidIsLoggedNotThrown) {
  Recorder rec;
  LogCapture cap;
  OomWatcher w(cap.log, rec.fn());
  pid_t pid = ::fork();
  if (pid == 0) _exit(0);
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
  EXPECT_NO_THROW(w.add("ctr-gone", pid));
  EXPECT_EQ(w.watched(), 0u);
  std::string log = cap.text();
  EXPECT_NE(log.find("ctr-gone"), std::string::npos) << log;
  EXPECT_NE(log.find("level=warning"), std::string::npos) << log;
  EXPECT_NO_THROW(w.remove("ctr-gone"));  // removing what was never added is harmless
}

namespace {
// The v2 layout faked: /proc/4242/cgroup with a "0::" line, a unified root, and memory.events.
struct FakeUnified {
  fs::path root;
  fs::path events;
  FakeUnified() {
    char tmpl[] = "/tmp/nvproxy-oomv2-XXXXXX";
    root = ::mkdtemp(tmpl) ? tmpl : "";
    fs::create_directories(root / "proc/4242");
    fs::create_directories(root / "cg/pod/ctr");
    write_str(root / "proc/4242/cgroup", "0::/pod/ctr\n");
    write_str(root / "cg/cgroup.controllers", "cpu memory pids\n");
    events = root / "cg/pod/ctr/memory.events";
    set("0", "0");
  }
  ~FakeUnified() { fs::remove_all(root); }
  OomWatcher::Paths paths() const { return {root / "proc", root / "cg"}; }
  // A second watched container (pid 4343) whose reports mark how far the watcher has got: the
  // watcher reads its fds in one thread, so once two sentinel reports arrived after a change,
  // whatever that change triggered has been handled.
  fs::path sentinel_events() const { return root / "cg/pod/sentinel/memory.events"; }
  void add_sentinel(OomWatcher& w) {
    fs::create_directories(root / "proc/4343");
    fs::create_directories(root / "cg/pod/sentinel");
    write_str(root / "proc/4343/cgroup", "0::/pod/sentinel\n");
    bump_sentinel();
    w.add("sentinel", 4343);
  }
  void bump_sentinel() {
    ++sentinel_ooms;
    std::string n = std::to_string(sentinel_ooms);
    write_str(sentinel_events(), "oom " + n + "\noom_kill " + n + "\n");
  }
  int sentinel_ooms = -1;
  // Same-length rewrites in place, as the kernel's counters change.
  bool set(const char* oom, const char* kill) {
    std::string s = std::string("low 0\nhigh 0\nmax 7\noom ") + oom + "\noom_kill " + kill + "\n";
    UniqueFd fd(::open(events.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    return ::pwrite(fd.get(), s.data(), s.size(), 0) == static_cast<ssize_t>(s.size());
  }
};
}  // namespace

// Waits until the watcher has handled everything before this call (two sentinel reports).
bool settle(FakeUnified& f, Recorder& rec) {
  for (int i = 0; i < 2; ++i) {
    f.bump_sentinel();
    if (!rec.wait_id_count("sentinel", static_cast<size_t>(f.sentinel_ooms), 3s)) return false;
  }
  return true;
}

TEST(OomWatcher, UnifiedReportsOnlyWhenAnOomCounterGrows) {
  FakeUnified f;
  auto set = [&](const char* oom, const char* kill) { return f.set(oom, kill); };
  auto events = f.events;
  Recorder rec;
  LogCapture cap;
  OomWatcher w(cap.log, rec.fn(), f.paths());
  w.add("ctr-v2", 4242);
  f.add_sentinel(w);
  ASSERT_EQ(w.watched(), 2u) << cap.text();

  ASSERT_TRUE(set("0", "0"));  // modified, no growth
  ASSERT_TRUE(settle(f, rec)) << cap.text();
  EXPECT_EQ(rec.count("ctr-v2"), 0u);

  ASSERT_TRUE(set("1", "1"));
  ASSERT_TRUE(rec.wait_id_count("ctr-v2", 1, 3s)) << cap.text();
  ASSERT_TRUE(set("1", "1"));
  ASSERT_TRUE(settle(f, rec)) << cap.text();
  EXPECT_EQ(rec.count("ctr-v2"), 1u);

  ASSERT_TRUE(set("2", "1"));  // an OOM without a kill counts too (v1 reports those)
  ASSERT_TRUE(rec.wait_id_count("ctr-v2", 2, 3s)) << cap.text();

  fs::remove(events);  // the cgroup went away: the watch ends quietly
  for (int i = 0; i < 100 && w.watched() != 1; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(w.watched(), 1u);
  ASSERT_TRUE(settle(f, rec)) << cap.text();
  EXPECT_EQ(rec.count("ctr-v2"), 2u);
}

namespace {
// A watcher whose callback removes the container it reports, then records the report.
class SelfRemovingWatcher : public ::testing::Test {
 protected:
  FakeUnified f;
  LogCapture cap;
  Recorder rec;
  std::function<void(const std::string&)> record = rec.fn();
  OomWatcher w{cap.log,
               [this](const std::string& id) {
                 w.remove(id);
                 record(id);
               },
               f.paths()};
};
}  // namespace

TEST_F(SelfRemovingWatcher, RemoveFromInsideTheCallbackDoesNotDeadlock) {
  w.add("ctr-self", 4242);
  ASSERT_TRUE(f.set("1", "1"));
  ASSERT_TRUE(rec.wait_id_count("ctr-self", 1, 3s)) << cap.text();
  EXPECT_EQ(w.watched(), 0u);
  // The sentinel's own callback removes it too: add it again after each report.
  ASSERT_TRUE(f.set("2", "2"));
  for (int i = 1; i <= 2; ++i) {
    f.add_sentinel(w);
    f.bump_sentinel();
    ASSERT_TRUE(rec.wait_id_count("sentinel", static_cast<size_t>(i), 3s)) << cap.text();
  }
  EXPECT_EQ(rec.count("ctr-self"), 1u);
}

// The init's exit polls before it goes out: an OOM the kernel signalled is reported by the time
// poll returns, whether the watcher's thread or the poll took the signal, and only once.
TEST(OomWatcher, PollReportsASignalledOomBeforeItReturnsAndOnlyOnce) {
  FakeUnified f;
  Recorder rec;
  LogCapture cap;
  OomWatcher w(cap.log, rec.fn(), f.paths());
  w.add("ctr-v2", 4242);
  f.add_sentinel(w);
  ASSERT_EQ(w.watched(), 2u) << cap.text();
  for (int i = 1; i <= 20; ++i) {
    std::string n = std::to_string(i);
    ASSERT_TRUE(f.set(n.c_str(), n.c_str()));
    w.poll("ctr-v2");
    ASSERT_EQ(rec.count("ctr-v2"), static_cast<size_t>(i)) << "OOM " << i << " not reported when poll returned";
  }
  ASSERT_TRUE(settle(f, rec)) << cap.text();
  EXPECT_EQ(rec.count("ctr-v2"), 20u) << "an OOM reported twice";
  w.poll("ctr-v2");  // nothing new: nothing reported
  EXPECT_EQ(rec.count("ctr-v2"), 20u);
}

TEST_F(SelfRemovingWatcher, RemoveFromInsideTheCallbackOfAPollDoesNotDeadlock) {
  w.add("ctr-self", 4242);
  // The watcher's thread may take the signal first: poll then waits for its delivery.
  ASSERT_TRUE(f.set("1", "1"));
  w.poll("ctr-self");
  EXPECT_EQ(rec.count("ctr-self"), 1u);
  EXPECT_EQ(w.watched(), 0u);
}
