#include "shim/task/console.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "common/error.h"

namespace nvproxy::shim {

namespace {

using Clock = std::chrono::steady_clock;

UniqueFd make_eventfd(const std::string& what) {
  UniqueFd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!fd) throw sys_error("eventfd for " + what);
  return fd;
}

void signal_eventfd(int fd) {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof one);
}

// Polls fd for `events` plus the wake fds until `deadline`; returns the fd's revents, 0 on
// timeout, -1 when a wake fd fired.
int poll_until(int fd, short events, std::initializer_list<int> wake, Clock::time_point deadline) {
  pollfd p[3] = {{fd, events, 0}, {-1, POLLIN, 0}, {-1, POLLIN, 0}};
  size_t n = 1;
  for (int w : wake) p[n++].fd = w;
  while (true) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    int timeout = deadline == Clock::time_point::max() ? -1 : static_cast<int>(std::clamp<int64_t>(left, 0, INT32_MAX));
    int r = ::poll(p, n, timeout);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw sys_error("poll");
    for (size_t i = 1; i < n; ++i)
      if (p[i].revents) return -1;
    if (r == 0) return 0;
    return p[0].revents;
  }
}

}  // namespace

// ---- ConsoleSocket ----

ConsoleSocket::ConsoleSocket(const std::filesystem::path& parent) {
  if (::mkdir(parent.c_str(), 0700) < 0 && errno != EEXIST) throw sys_error("create console socket parent " + parent.string());
  std::string tmpl = (parent / "pty-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw sys_error("create console socket directory under " + parent.string());
  dir_ = tmpl;
  path_ = (dir_ / "pty.sock").string();
  try {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path_.size() >= sizeof addr.sun_path)
      throw Error(Code::InvalidArgument, "console socket path " + path_ + " is longer than a unix socket allows");
    std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
    listen_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!listen_) throw sys_error("socket for console socket " + path_);
    if (::bind(listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0)
      throw sys_error("bind console socket " + path_);
    if (::chmod(path_.c_str(), 0600) < 0) throw sys_error("chmod console socket " + path_);
    if (::listen(listen_.get(), 4) < 0) throw sys_error("listen on console socket " + path_);
    cancel_ = make_eventfd("console socket " + path_);
  } catch (...) {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
    throw;
  }
}

ConsoleSocket::~ConsoleSocket() {
  listen_.reset();
  ::unlink(path_.c_str());
  ::rmdir(dir_.c_str());
}

void ConsoleSocket::cancel() {
  signal_eventfd(cancel_.get());
}

UniqueFd ConsoleSocket::receive_master(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  auto wait = [&](int fd) {
    int r = poll_until(fd, POLLIN, {cancel_.get()}, deadline);
    if (r < 0) throw Error(Code::Cancelled, "console socket " + path_ + ": receive cancelled");
    if (r == 0)
      throw Error(Code::DeadlineExceeded,
                  "console socket " + path_ + ": no terminal from the runtime within " + std::to_string(timeout.count()) + " ms");
  };
  UniqueFd conn;
  while (!conn) {
    wait(listen_.get());
    conn.reset(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn && errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) throw sys_error("accept on console socket " + path_);
  }
  // runc sends the pty name as data with the fd as SCM_RIGHTS; the name is of no use to us.
  char data[4096];
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * 4)];
  while (true) {
    wait(conn.get());
    iovec iov{data, sizeof data};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl;
    msg.msg_controllen = sizeof ctl;
    ssize_t n = ::recvmsg(conn.get(), &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) throw sys_error("receive on console socket " + path_);
    // Own every fd that arrived before judging the message, so that none leaks.
    std::vector<UniqueFd> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.emplace_back(fd);
      }
    }
    if (fds.size() != 1)
      throw Error(Code::Internal, "console socket " + path_ + ": the runtime sent " + std::to_string(fds.size()) +
                                      " fds instead of one terminal");
    if (!::isatty(fds[0].get()))
      throw Error(Code::InvalidArgument, "console socket " + path_ + ": the runtime sent an fd that is not a terminal");
    return std::move(fds[0]);
  }
}

// ---- ConsoleIO ----

ConsoleIO::ConsoleIO(UniqueFd master, const StdioPaths& paths) : master_(std::move(master)) {
  // Non-blocking master and FIFOs: the copy threads wait only in poll, where stop can reach them.
  int fl = ::fcntl(master_.get(), F_GETFL);
  if (fl < 0 || ::fcntl(master_.get(), F_SETFL, fl | O_NONBLOCK) < 0) throw sys_error("set console master non-blocking");
  if (!paths.out.empty()) {
    out_fifo_.reset(::open(paths.out.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
    if (!out_fifo_) throw sys_error("open stdout fifo " + paths.out);
  }
  if (!paths.in.empty()) {
    // A reader's open never blocks with O_NONBLOCK; poll waits for the client's writer.
    in_fifo_.reset(::open(paths.in.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    if (!in_fifo_) throw sys_error("open stdin fifo " + paths.in);
  }
  stop_ = make_eventfd("console copy");
  stop_in_ = make_eventfd("console stdin copy");
  out_thread_ = std::thread([this] { copy_out(); });
  try {
    if (in_fifo_) in_thread_ = std::thread([this] { copy_in(); });
  } catch (...) {  // no destructor runs for a throwing constructor: stop the first thread here
    signal_eventfd(stop_.get());
    out_thread_.join();
    throw;
  }
}

ConsoleIO::~ConsoleIO() {
  signal_eventfd(stop_.get());
  if (out_thread_.joinable()) out_thread_.join();
  if (in_thread_.joinable()) in_thread_.join();
}

bool ConsoleIO::wait_for(int fd, short events, bool is_stdin) {
  int r = is_stdin ? poll_until(fd, events, {stop_.get(), stop_in_.get()}, Clock::time_point::max())
                   : poll_until(fd, events, {stop_.get()}, Clock::time_point::max());
  return r > 0;
}

bool ConsoleIO::write_all(int fd, const char* p, size_t n, bool is_stdin) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_for(fd, POLLOUT, is_stdin)) return false;
      continue;
    }
    if (w < 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void ConsoleIO::copy_out() {
  char buf[32768];
  try {
    while (wait_for(master_.get(), POLLIN, false)) {
      ssize_t n = ::read(master_.get(), buf, sizeof buf);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) break;  // EIO: every slave fd is closed
      // Without a stdout FIFO the output is still drained, or the process would block on a full tty.
      if (out_fifo_ && !write_all(out_fifo_.get(), buf, static_cast<size_t>(n), false)) break;
    }
  } catch (const Error&) {  // poll failed: nobody to tell, end the copy
  }
  out_fifo_.reset();  // the client sees EOF
  {
    std::lock_guard lk(mu_);
    output_done_ = true;
  }
  cv_.notify_all();
}

void ConsoleIO::copy_in() {
  char buf[32768];
  try {
    while (wait_for(in_fifo_.get(), POLLIN, true)) {
      ssize_t n = ::read(in_fifo_.get(), buf, sizeof buf);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n <= 0) break;  // the client closed its end
      if (!write_all(master_.get(), buf, static_cast<size_t>(n), true)) break;
    }
  } catch (const Error&) {
  }
  in_fifo_.reset();
}

void ConsoleIO::resize(unsigned width, unsigned height) {
  winsize ws{};
  ws.ws_col = static_cast<unsigned short>(width);
  ws.ws_row = static_cast<unsigned short>(height);
  if (::ioctl(master_.get(), TIOCSWINSZ, &ws) < 0)
    throw sys_error("resize console to " + std::to_string(width) + "x" + std::to_string(height));
}

void ConsoleIO::close_stdin() {
  signal_eventfd(stop_in_.get());
}

bool ConsoleIO::wait_output(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  return cv_.wait_for(lk, timeout, [&] { return output_done_; });
}

}  // namespace nvproxy::shim
