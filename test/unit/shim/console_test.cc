#include "shim/task/console.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include "common/error.h"

using namespace nvproxy;
using namespace nvproxy::shim;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

size_t count_fds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "nvproxy-console-XXXXXX").string();
    if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp");
    path = t;
  }
  ~TempDir() { fs::remove_all(path); }
};

// What runc does with --console-socket: connect, send the pty name with the master as SCM_RIGHTS.
void runtime_send(const std::string& socket_path, int fd_to_send, const std::string& name = "/dev/pts/7") {
  UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(s);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  iovec iov{const_cast<char*>(name.data()), name.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
  if (fd_to_send >= 0) {
    msg.msg_control = ctl;
    msg.msg_controllen = sizeof ctl;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd_to_send, sizeof(int));
  }
  ASSERT_EQ(::sendmsg(s.get(), &msg, 0), static_cast<ssize_t>(name.size())) << std::strerror(errno);
}

// Reads fd (non-blocking) until `needle` shows up, EOF, or the timeout; returns what it read.
std::string read_until(int fd, const std::string& needle, std::chrono::milliseconds timeout, bool* eof = nullptr) {
  std::string got;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline && (needle.empty() || got.find(needle) == std::string::npos)) {
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 50);
    char buf[65536];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) got.append(buf, static_cast<size_t>(n));
    if (n == 0 && (p.revents & POLLHUP)) {
      if (eof) *eof = true;
      break;
    }
  }
  return got;
}

void set_nonblock(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// A pty whose master went through a ConsoleSocket, plus containerd-style FIFOs.
struct Rig {
  TempDir dir;
  std::string in = (dir.path / "stdin").string(), out = (dir.path / "stdout").string();
  UniqueFd slave;
  UniqueFd master;  // as received
  UniqueFd out_reader;

  Rig() {
    EXPECT_EQ(::mkfifo(in.c_str(), 0600), 0);
    EXPECT_EQ(::mkfifo(out.c_str(), 0600), 0);
    ConsoleSocket sock(dir.path / "sock");
    int m, s;
    EXPECT_EQ(::openpty(&m, &s, nullptr, nullptr, nullptr), 0);
    UniqueFd runtime_master(m);
    slave.reset(s);
    runtime_send(sock.path(), m);
    runtime_master.reset();  // the runtime closes its copy after sending
    master = sock.receive_master(2s);
    out_reader.reset(::open(out.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    set_nonblock(slave.get());
  }
};

}  // namespace

TEST(ConsoleSocket, DirectoryIsPrivateAndRemoved) {
  TempDir d;
  std::string path;
  fs::path dir;
  {
    ConsoleSocket sock(d.path / "parent");
    path = sock.path();
    dir = fs::path(path).parent_path();
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0600u);
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(dir));
}

TEST(ConsoleSocket, ReceivesWhileRuntimeRunsInAnotherThread) {
  TempDir d;
  ConsoleSocket sock(d.path);
  // Either order works (the connection waits in the listen backlog): no ordering is forced.
  auto master = std::async(std::launch::async, [&] { return sock.receive_master(5s); });
  int m, s;
  ASSERT_EQ(::openpty(&m, &s, nullptr, nullptr, nullptr), 0);
  UniqueFd mm(m), ss(s);
  runtime_send(sock.path(), m);
  UniqueFd got = master.get();
  ASSERT_TRUE(got);
  EXPECT_TRUE(::isatty(got.get()));
  // Same terminal: a size set through the received fd is the slave's size.
  winsize ws{};
  ws.ws_col = 33;
  ws.ws_row = 11;
  ASSERT_EQ(::ioctl(got.get(), TIOCSWINSZ, &ws), 0);
  winsize back{};
  ASSERT_EQ(::ioctl(s, TIOCGWINSZ, &back), 0);
  EXPECT_EQ(back.ws_col, 33);
}

TEST(ConsoleSocket, TimesOut) {
  TempDir d;
  ConsoleSocket sock(d.path);
  auto t0 = std::chrono::steady_clock::now();
  try {
    sock.receive_master(300ms);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::DeadlineExceeded);
    EXPECT_NE(std::string(e.what()).find(sock.path()), std::string::npos) << e.what();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 290ms);
}

TEST(ConsoleSocket, CancelWakesReceiver) {
  TempDir d;
  ConsoleSocket sock(d.path);
  auto t0 = std::chrono::steady_clock::now();
  auto r = std::async(std::launch::async, [&] {
    try {
      sock.receive_master(30s);
    } catch (const Error& e) {
      return e.code();
    }
    return Code::Ok;
  });
  sock.cancel();  // sticky: a receive that starts after it is cancelled too
  EXPECT_EQ(r.get(), Code::Cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(ConsoleSocket, RefusesPeersWithoutATerminalAndLeaksNothing) {
  size_t before = count_fds();
  {
    TempDir d;
    ConsoleSocket sock(d.path);
    runtime_send(sock.path(), -1);
    try {
      sock.receive_master(2s);
      FAIL() << "no exception";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::Internal) << e.what();
    }
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    UniqueFd r(p[0]), w(p[1]);
    runtime_send(sock.path(), p[0]);
    try {
      sock.receive_master(2s);
      FAIL() << "no exception";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::InvalidArgument) << e.what();
    }
  }
  EXPECT_EQ(count_fds(), before);
}

TEST(ConsoleIO, CopiesBothWaysResizesAndEndsWithTheSlave) {
  size_t before = count_fds();
  {
    Rig r;
    ConsoleIO io(std::move(r.master), {r.in, r.out, "", true});

    ASSERT_EQ(::write(r.slave.get(), "hello tty\n", 10), 10);
    EXPECT_NE(read_until(r.out_reader.get(), "hello tty", 3s).find("hello tty"), std::string::npos);

    UniqueFd in_writer(::open(r.in.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));  // ConsoleIO is the reader
    ASSERT_TRUE(in_writer) << std::strerror(errno);
    ASSERT_EQ(::write(in_writer.get(), "typed\n", 6), 6);
    EXPECT_NE(read_until(r.slave.get(), "typed", 3s).find("typed"), std::string::npos);

    io.resize(120, 40);
    winsize ws{};
    ASSERT_EQ(::ioctl(r.slave.get(), TIOCGWINSZ, &ws), 0);
    EXPECT_EQ(ws.ws_col, 120);
    EXPECT_EQ(ws.ws_row, 40);

    EXPECT_FALSE(io.wait_output(200ms));  // the slave is still open
    r.slave.reset();
    EXPECT_TRUE(io.wait_output(5s));
    bool eof = false;
    read_until(r.out_reader.get(), "", 3s, &eof);
    EXPECT_TRUE(eof) << "stdout FIFO not closed after the terminal ended";
  }
  EXPECT_EQ(count_fds(), before);
}

TEST(ConsoleIO, FlushesEverythingWrittenBeforeTheSlaveCloses) {
  Rig r;
  ConsoleIO io(std::move(r.master), {"", r.out, "", true});
  const size_t total = 300 * 1024;  // several times the pty and FIFO buffers
  std::thread writer([&] {
    std::string chunk(4096, 'x');
    int fd = r.slave.get();
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    for (size_t sent = 0; sent < total; sent += chunk.size())
      if (::write(fd, chunk.data(), chunk.size()) != static_cast<ssize_t>(chunk.size())) return;
    r.slave.reset();
  });
  bool eof = false;
  std::string got = read_until(r.out_reader.get(), "", 20s, &eof);
  writer.join();
  EXPECT_TRUE(eof);
  EXPECT_EQ(got.size(), total);
  EXPECT_TRUE(io.wait_output(1s));
}

TEST(ConsoleIO, CloseStdinClosesOnlyTheFifoSide) {
  Rig r;
  ConsoleIO io(std::move(r.master), {r.in, r.out, "", true});
  // The client keeps its writer open: only close_stdin may end the copy.
  UniqueFd client(::open(r.in.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(client) << "stdin FIFO has no reader before close_stdin";
  ASSERT_EQ(::write(client.get(), "before\n", 7), 7);
  EXPECT_NE(read_until(r.slave.get(), "before", 3s).find("before"), std::string::npos);
  io.close_stdin();
  // Our reader goes away: opening a writer without readers fails with ENXIO.
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    UniqueFd w(::open(r.in.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
    closed = !w && errno == ENXIO;
    if (!closed) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(closed);
  // The terminal itself stays up.
  ASSERT_EQ(::write(r.slave.get(), "still here\n", 11), 11);
  EXPECT_NE(read_until(r.out_reader.get(), "still here", 3s).find("still here"), std::string::npos);
  EXPECT_FALSE(io.wait_output(100ms));
}

TEST(ConsoleIO, DestructionWithLiveProcessAndStuckClientReturns) {
  Rig r;
  r.out_reader.reset();  // nobody drains stdout: the copy blocks on a full FIFO
  auto t0 = std::chrono::steady_clock::now();
  {
    ConsoleIO io(std::move(r.master), {r.in, r.out, "", true});
    std::string big(200 * 1024, 'y');
    std::thread([&] {
      for (size_t off = 0; off < big.size();) {
        ssize_t n = ::write(r.slave.get(), big.data() + off, big.size() - off);
        if (n > 0)
          off += static_cast<size_t>(n);
        else if (std::chrono::steady_clock::now() - t0 > 500ms)
          break;
      }
    }).join();
    EXPECT_FALSE(io.wait_output(100ms));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(ConsoleIO, MissingFifoIsNamed) {
  Rig r;
  try {
    ConsoleIO io(std::move(r.master), {"", (r.dir.path / "nope").string(), "", true});
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos) << e.what();
  }
}
