// count_zero_pages against a real process: a child whose memory the test changes step by step,
// each step counted again (the rest of the child's memory stays as it was: it waits on a pipe).
#include "checkpoint/process/zero_count.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "common/error.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;

namespace {

constexpr std::size_t kMiB = 1 << 20;

// The child: maps 12 MiB private anonymous memory, then for each byte read from `steps` does one
// step and answers on `done`: 'd' writes 6 MiB of data, 'z' turns 4 MiB of it into zeros, 'r'
// reads the 6 MiB never touched.
[[noreturn]] void child(int steps, int done) {
  auto* m = static_cast<unsigned char*>(::mmap(nullptr, 12 * kMiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (m == MAP_FAILED) ::_exit(2);
  char c;
  unsigned sum = 0;
  while (::read(steps, &c, 1) == 1) {
    if (c == 'd')
      for (std::size_t i = 0; i < 6 * kMiB; ++i) m[i] = static_cast<unsigned char>(i % 251 + 1);
    if (c == 'z') std::memset(m, 0, 4 * kMiB);
    if (c == 'r')
      for (std::size_t i = 6 * kMiB; i < 12 * kMiB; i += 4096) sum += m[i];
    if (::write(done, &c, 1) != 1) ::_exit(3);
  }
  ::_exit(sum == 0 ? 0 : 4);
}

struct Child {
  pid_t pid = -1;
  int steps = -1, done = -1;
  Child() {
    int a[2], b[2];
    if (::pipe(a) != 0 || ::pipe(b) != 0) throw sys_error("pipe");
    pid = ::fork();
    if (pid == 0) {
      ::close(a[1]);
      ::close(b[0]);
      child(a[0], b[1]);
    }
    ::close(a[0]);
    ::close(b[1]);
    steps = a[1];
    done = b[0];
  }
  void step(char c) const {
    char back = 0;
    ASSERT_EQ(::write(steps, &c, 1), 1);
    ASSERT_EQ(::read(done, &back, 1), 1);
  }
  ~Child() {
    ::close(steps);
    ::close(done);
    int st = 0;
    if (pid > 0) ::waitpid(pid, &st, 0);
  }
};

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

TEST(ZeroCount, CountsZeroPagesOfPrivateMemoryNotTheKernelsZeroPage) {
  if (::geteuid() != 0) GTEST_SKIP() << "page frames in the pagemap need CAP_SYS_ADMIN";
  if (kAsan) GTEST_SKIP() << "ASan's shadow mapping spans terabytes: the count would run into its time limit";
  Child c;
  c.step('d');
  ZeroCount data = count_zero_pages(c.pid);
  ASSERT_TRUE(data.complete);
  c.step('z');
  ZeroCount zeroed = count_zero_pages(c.pid, {.threads = 3});
  EXPECT_EQ(zeroed.present, data.present) << "the same pages are present";
  EXPECT_EQ(zeroed.zero - data.zero, 4 * kMiB) << "4 MiB of data became zeros";
  c.step('r');
  ZeroCount read = count_zero_pages(c.pid, {.threads = 1});
  // A kernel that maps its zero page for the reads: nothing new is counted (no RSS counts it);
  // one that allocates a page per read fault (seen on this project's CI machines): 6 MiB more
  // present pages, all zero.
  const std::uint64_t more = read.present - zeroed.present;
  EXPECT_TRUE(more == 0 || more == 6 * kMiB) << more;
  EXPECT_EQ(read.zero - zeroed.zero, more);
}

TEST(ZeroCount, ATimeLimitEndsTheCountAsALowerBound) {
  if (::geteuid() != 0) GTEST_SKIP() << "page frames in the pagemap need CAP_SYS_ADMIN";
  Child c;
  c.step('d');
  ZeroCount none = count_zero_pages(c.pid, {.time_limit = std::chrono::milliseconds(0)});
  EXPECT_FALSE(none.complete);
  EXPECT_EQ(none.zero, 0u);
}

TEST(ZeroCount, AProcessThatIsGoneIsAnErrorNamingIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "page frames in the pagemap need CAP_SYS_ADMIN";
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int st = 0;
  ::waitpid(pid, &st, 0);
  try {
    count_zero_pages(pid);
    FAIL() << "counted a process that is gone";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(pid)), std::string::npos) << e.what();
  }
}
