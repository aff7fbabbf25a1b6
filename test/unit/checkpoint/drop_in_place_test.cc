// drop_in_place (checkpoint/agent/drop_in_place.h) on real processes: a forked child holding a file at
// a known fd and a shared mapping of it, blocked in read() on a pipe (as a DataLoader worker waits
// for its next index), with a second thread running. After the drop the child answers its next
// request: the fd is /dev/null, the mapping is an inaccessible anonymous one at the same address,
// and its read() went on as if nothing happened.
#include "checkpoint/agent/drop_in_place.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"

namespace fs = std::filesystem;
using nvproxy::checkpoint::drop_in_place;
using nvproxy::checkpoint::mappings_of;
using nvproxy::checkpoint::shared_with;

namespace {

constexpr int kHeldFd = 40;

void* spin(void*) {
  for (;;) ::pause();
  return nullptr;
}

// The child: holds `file` at kHeldFd and mapped; for each byte read from `in` it writes one line to
// `out`: "<readlink of kHeldFd> <the mapping's line in /proc/self/maps>".
[[noreturn]] void child_main(const std::string& file, int in, int out) {
  int fd = ::open(file.c_str(), O_RDWR);
  if (fd < 0 || ::dup2(fd, kHeldFd) != kHeldFd) ::_exit(2);
  ::close(fd);
  void* m = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, kHeldFd, 0);
  if (m == MAP_FAILED) ::_exit(3);
  pthread_t t;
  ::pthread_create(&t, nullptr, spin, nullptr);
  char c;
  while (::read(in, &c, 1) == 1) {
    std::array<char, 256> link{};
    ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(kHeldFd)).c_str(), link.data(), link.size() - 1);
    std::string line = (n > 0 ? std::string(link.data(), static_cast<std::size_t>(n)) : "none") + " ";
    std::ifstream maps("/proc/self/maps");
    char addr[32];
    std::snprintf(addr, sizeof addr, "%lx-", reinterpret_cast<unsigned long>(m));
    for (std::string l; std::getline(maps, l);)
      if (l.rfind(addr, 0) == 0) line += l;
    line += "\n";
    if (::write(out, line.data(), line.size()) < 0) ::_exit(4);
  }
  ::_exit(0);
}

class DropInPlace : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = fs::temp_directory_path() / ("nvproxy-drop-" + std::to_string(::getpid()));
    std::ofstream(file_) << std::string(4096, 'x');
    ASSERT_EQ(::pipe(to_), 0);
    ASSERT_EQ(::pipe(from_), 0);
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::close(to_[1]);
      ::close(from_[0]);
      child_main(file_, to_[0], from_[1]);
    }
    ::close(to_[0]);
    ::close(from_[1]);
  }
  void TearDown() override {
    ::close(to_[1]);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    ::close(from_[0]);
    fs::remove(file_);
  }
  // One request, one answer line.
  std::string ask() {
    EXPECT_EQ(::write(to_[1], "?", 1), 1);
    std::string line;
    char c;
    while (::read(from_[0], &c, 1) == 1 && c != '\n') line += c;
    return line;
  }

  fs::path file_;
  int to_[2]{}, from_[2]{};
  pid_t pid_ = -1;
};

TEST_F(DropInPlace, ReplacesTheFdAndTheMappingAndTheChildRunsOn) {
  std::string before = ask();
  ASSERT_NE(before.find(file_.string() + " "), std::string::npos) << before;
  auto maps = mappings_of(pid_, {file_.string()});
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_EQ(maps[0].end - maps[0].start, 4096u);

  // The child is blocked in read() now; its call is restarted after the drop.
  drop_in_place({.pid = pid_, .fds = {kHeldFd}, .mappings = maps});

  std::string after = ask();
  EXPECT_EQ(after.rfind("/dev/null ", 0), 0u) << after;
  EXPECT_EQ(after.find(file_.string()), std::string::npos) << "the mapping of the file is gone: " << after;
  char addr[32];
  std::snprintf(addr, sizeof addr, "%lx-", static_cast<unsigned long>(maps[0].start));
  EXPECT_NE(after.find(addr), std::string::npos) << "a reservation stays at the same address: " << after;
  EXPECT_NE(after.find(" ---p "), std::string::npos) << "inaccessible: " << after;
  EXPECT_TRUE(mappings_of(pid_, {file_.string()}).empty());
  // And again: the child is still answering.
  EXPECT_EQ(ask().rfind("/dev/null ", 0), 0u);
}

// A mapping whose file was removed reads "PATH (deleted)" in /proc/PID/maps; the holder scan names
// it by PATH, and so must the ranges the drop replaces.
TEST_F(DropInPlace, FindsTheMappingOfARemovedFileByItsPath) {
  ask();
  fs::remove(file_);
  auto maps = mappings_of(pid_, {file_.string()});
  ASSERT_EQ(maps.size(), 1u);
  drop_in_place({.pid = pid_, .fds = {kHeldFd}, .mappings = maps});
  EXPECT_TRUE(mappings_of(pid_, {file_.string()}).empty());
  EXPECT_EQ(ask().rfind("/dev/null ", 0), 0u);
}

TEST_F(DropInPlace, AnFdItDoesNotHoldIsAClearErrorAndTheChildRunsOn) {
  ask();
  try {
    drop_in_place({.pid = pid_, .fds = {kHeldFd, 1000000}});
    FAIL() << "no error";
  } catch (const nvproxy::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fd 1000000"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("pid " + std::to_string(pid_)), std::string::npos) << e.what();
  }
  EXPECT_EQ(ask().rfind("/dev/null ", 0), 0u) << "the child answers after the failed drop";
}

// shared_with tells the open file a child inherited from one it opened itself, where the numbers
// and paths alike cannot: this test process is the "ancestor".
TEST(SharedWith, TellsAnInheritedOpenFileFromOneOpenedAgain) {
  fs::path file = fs::temp_directory_path() / ("nvproxy-shared-" + std::to_string(::getpid()));
  std::ofstream(file) << "x";
  int mine = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(mine, 0);
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(go[1]);
    int own = ::open(file.c_str(), O_RDWR | O_CLOEXEC);  // the same file, a description of its own
    if (own < 0 || ::dup2(own, 50) != 50) ::_exit(2);
    char c;
    ::read(go[0], &c, 1);  // blocked here while it is asked
    ::_exit(0);
  }
  ::close(go[0]);
  // The child has opened its own copy once fd 50 shows up.
  for (int i = 0; i < 2000 && !fs::exists("/proc/" + std::to_string(child) + "/fd/50"); ++i) ::usleep(1000);
  auto pairs = shared_with(child, {mine, 50}, ::getpid(), {mine});
  EXPECT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs.count(mine), 1u);
  EXPECT_EQ(pairs.count(50), 0u) << "the child's own open file is not the parent's";
  EXPECT_EQ(::fcntl(mine, F_GETFL) & O_APPEND, 0) << "the flag flipped for the question is back";
  ::close(go[1]);
  int st = 0;
  ::waitpid(child, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "the child ran on to its end";
  ::close(mine);
  fs::remove(file);
}

TEST(DropInPlaceNoProcess, AGonePidIsNotFound) {
  pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  int st = 0;
  ::waitpid(p, &st, 0);
  EXPECT_THROW(drop_in_place({.pid = p, .fds = {3}}), nvproxy::Error);
}

}  // namespace
