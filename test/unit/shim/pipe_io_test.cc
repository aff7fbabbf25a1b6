// PipeIO against real FIFOs: what a short process wrote reaches a client that opens its end late.
#include "shim/task/pipe_io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

using namespace nvproxy;
using namespace nvproxy::shim;
namespace fs = std::filesystem;

namespace {

std::string read_until_eof(int fd, std::chrono::milliseconds limit) {
  std::string out;
  auto end = std::chrono::steady_clock::now() + limit;
  char buf[256];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) break;  // every writer gone
  }
  return out;
}

}  // namespace

// containerd's client opens its end of the FIFO from a goroutine that may run after the process
// ended (the leak-cycles e2e lost `echo ok` so under load): the output waits in the FIFO for it.
TEST(PipeIO, OutputOfAShortProcessWaitsForAClientThatOpensLate) {
  fs::path dir = fs::temp_directory_path() / ("nvproxy-pipeio-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path out = dir / "out";
  ASSERT_EQ(::mkfifo(out.c_str(), 0600), 0);
  {
    PipeIO io(StdioPaths{.out = out.string()});
    ASSERT_EQ(::write(io.child_stdio().out, "ok\n", 3), 3);
    io.start_copying();  // our copy of the write end goes: the copy reaches EOF after "ok"
    EXPECT_FALSE(io.wait_output(std::chrono::milliseconds(300))) << "the FIFO was closed before anyone read it";
    int r = ::open(out.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(r, 0);
    EXPECT_EQ(read_until_eof(r, std::chrono::seconds(10)), "ok\n");
    EXPECT_TRUE(io.wait_output(std::chrono::seconds(5)));
    ::close(r);
  }
  fs::remove_all(dir);
}

// The exit of a process goes out only once what it wrote has been read: ctr stops opening its
// FIFOs when it hears of the exit (a runsc `ctr run --rm ... echo hello` printed nothing so).
// A background child that keeps the pipe open must not hold the exit back once the bytes are read.
TEST(PipeIO, ExitWaitsUntilWhatWasWrittenIsReadNotForTheEndOfTheStream) {
  fs::path dir = fs::temp_directory_path() / ("nvproxy-pipeio-flush-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path out = dir / "out";
  ASSERT_EQ(::mkfifo(out.c_str(), 0600), 0);
  {
    PipeIO io(StdioPaths{.out = out.string()});
    int background = ::dup(io.child_stdio().out);  // a child that outlives the process
    ASSERT_GE(background, 0);
    io.start_copying();
    EXPECT_TRUE(io.wait_flushed(std::chrono::milliseconds(0))) << "nothing written, nothing to wait for";
    ASSERT_EQ(::write(background, "hello\n", 6), 6);
    EXPECT_FALSE(io.wait_flushed(std::chrono::milliseconds(200))) << "no client has read it yet";
    int r = ::open(out.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(r, 0);
    std::string got;
    char buf[16];
    for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         got.size() < 6 && std::chrono::steady_clock::now() < end;) {
      pollfd p{r, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      if (ssize_t n = ::read(r, buf, sizeof buf); n > 0) got.append(buf, static_cast<size_t>(n));
    }
    EXPECT_EQ(got, "hello\n");
    EXPECT_TRUE(io.wait_flushed(std::chrono::seconds(5))) << "read, while the stream is still open";
    EXPECT_FALSE(io.wait_output(std::chrono::milliseconds(0))) << "the stream has not ended";
    ::close(background);
    EXPECT_TRUE(io.wait_output(std::chrono::seconds(5)));
    ::close(r);
  }
  fs::remove_all(dir);
}

// A runsc pod's sandbox holds a container's pipe ends past the container's end (after a restore,
// those no restored process took): once the exit is known the output ends after the grace, what
// was written until then delivered, so that containerd's wait for the output returns.
TEST(PipeIO, EndOutputClosesTheClientsEndsAfterTheGraceThoughAWriterLivesOn) {
  fs::path dir = fs::temp_directory_path() / ("nvproxy-pipeio-end-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path out = dir / "out", err = dir / "err";
  ASSERT_EQ(::mkfifo(out.c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo(err.c_str(), 0600), 0);
  {
    PipeIO io(StdioPaths{.out = out.string(), .err = err.string()});
    int holder_out = ::dup(io.child_stdio().out);  // the sandbox's copies, never closed
    int holder_err = ::dup(io.child_stdio().err);
    ASSERT_GE(holder_out, 0);
    ASSERT_GE(holder_err, 0);
    io.start_copying();
    int r = ::open(out.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    int re = ::open(err.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(r, 0);
    ASSERT_GE(re, 0);
    ASSERT_EQ(::write(holder_out, "before\n", 7), 7);
    const auto t0 = std::chrono::steady_clock::now();
    io.end_output(std::chrono::milliseconds(400));
    ASSERT_EQ(::write(holder_out, "within\n", 7), 7);  // still copied: the grace has not passed
    EXPECT_EQ(read_until_eof(r, std::chrono::seconds(10)), "before\nwithin\n");
    EXPECT_EQ(read_until_eof(re, std::chrono::seconds(10)), "");
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(took, std::chrono::milliseconds(350)) << "ended before the grace";
    EXPECT_LT(took, std::chrono::seconds(5));
    EXPECT_TRUE(io.wait_output(std::chrono::seconds(5)));
    ::close(r);
    ::close(re);
    ::close(holder_out);
    ::close(holder_err);
  }
  fs::remove_all(dir);
}

// Where the writers go within the grace (every fresh container's pipes), the output ends with
// them, not at the grace's end.
TEST(PipeIO, EndOutputEndsWithTheStreamWhenItEndsFirst) {
  fs::path dir = fs::temp_directory_path() / ("nvproxy-pipeio-end-eof-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path out = dir / "out";
  ASSERT_EQ(::mkfifo(out.c_str(), 0600), 0);
  {
    PipeIO io(StdioPaths{.out = out.string()});
    int writer = ::dup(io.child_stdio().out);
    ASSERT_GE(writer, 0);
    io.start_copying();
    int r = ::open(out.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(r, 0);
    const auto t0 = std::chrono::steady_clock::now();
    io.end_output(std::chrono::seconds(30));
    ASSERT_EQ(::write(writer, "bye\n", 4), 4);
    ::close(writer);
    EXPECT_EQ(read_until_eof(r, std::chrono::seconds(10)), "bye\n");
    EXPECT_TRUE(io.wait_output(std::chrono::seconds(5)));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    ::close(r);
  }
  fs::remove_all(dir);
}
