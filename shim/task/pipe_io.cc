#include "shim/task/pipe_io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::shim {

namespace {

// O_RDWR on a FIFO never blocks in open (Linux), so a client that is slow to attach cannot hang
// Create. Anything else (a file:// log) is appended to, created if missing.
UniqueFd open_output_fifo(const std::string& path) {
  struct stat st {};
  bool fifo = ::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
  UniqueFd fd(fifo ? ::open(path.c_str(), O_RDWR | O_CLOEXEC)
                   : ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) throw sys_error(std::string("open stdio ") + (fifo ? "fifo " : "file ") + path);
  return fd;
}

// containerd's client opens its end of an output FIFO from a goroutine, which may not have run yet
// when a short process (`ctr task exec ... echo ok`) is done: were our end, the only one open,
// closed now, the kernel would free the FIFO's buffer with the output in it, and the client would
// see an empty stream (found in the leak-cycles test under load: "exec gave [], exit status 0").
// So the end is kept until what was written has been read, within kUnreadLimit (a client that
// never reads loses it then, as before).
constexpr auto kUnreadLimit = std::chrono::seconds(5);

bool is_fifo(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

int unread(int fd) {
  int n = 0;
  return ::ioctl(fd, FIONREAD, &n) == 0 ? n : 0;
}

}  // namespace

void PipeIO::open_output(const std::string& path, OutCopy& c, UniqueFd& child_end) {
  c.to = open_output_fifo(path);
  c.to_fifo = is_fifo(c.to.get());
  make_pipe(c.from, child_end, "container stdio");
}

void PipeIO::wait_until_read(const OutCopy& c, const Shared& s) {
  if (!c.to_fifo) return;
  const auto deadline = std::chrono::steady_clock::now() + kUnreadLimit;
  while (unread(c.to.get()) > 0) {
    if (s.stopping || std::chrono::steady_clock::now() > deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

PipeIO::PipeIO(const StdioPaths& paths) : paths_(paths) {
  if (paths_.in.empty()) null_in_ = open_devnull(O_RDONLY);
  if (paths_.out.empty() || paths_.err.empty()) null_out_ = open_devnull(O_WRONLY);
  if (!paths_.in.empty()) {
    make_pipe(in_r_, s_->in_w, "container stdio");
    s_->wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!s_->wake) throw sys_error("eventfd for stdin of " + paths_.in);
    in_fifo_.reset(::open(paths_.in.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    if (!in_fifo_) throw sys_error("open stdio fifo " + paths_.in);
    // Our own writer keeps the FIFO from reaching EOF when the client closes its end: stdin ends
    // only after CloseIO drops it (and the client is done), as with containerd's runc shim.
    in_hold_.reset(::open(paths_.in.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
    if (!in_hold_) throw sys_error("open stdio fifo " + paths_.in + " for writing");
  }
  if (!paths_.out.empty()) open_output(paths_.out, s_->out, out_w_);
  if (!paths_.err.empty()) open_output(paths_.err, s_->err, err_w_);
  if (s_->out.from || s_->err.from) {
    s_->out_wake.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!s_->out_wake) throw sys_error("eventfd for the output of " + (paths_.out.empty() ? paths_.err : paths_.out));
  }
}

PipeIO::~PipeIO() {
  s_->stopping = true;
  uint64_t one = 1;
  if (s_->wake) (void)::write(s_->wake.get(), &one, sizeof one);
  stop_stdin();
  for (auto& t : threads_) t.detach();  // each holds the shared state it needs
}

oci::Stdio PipeIO::child_stdio() const {
  return {in_r_ ? in_r_.get() : null_in_.get(), out_w_ ? out_w_.get() : null_out_.get(), err_w_ ? err_w_.get() : null_out_.get()};
}

void PipeIO::start_copying() {
  in_r_.reset();
  out_w_.reset();
  err_w_.reset();
  null_in_.reset();
  null_out_.reset();
  std::lock_guard lk(s_->mu);
  for (OutCopy* c : {&s_->out, &s_->err}) {
    if (!c->from) continue;
    ++s_->copies_left;
    c->done = false;
    threads_.emplace_back(copy_out, s_, std::ref(*c));
  }
  if (s_->in_w) threads_.emplace_back(copy_in, s_, std::move(in_fifo_));
}

void PipeIO::copy_out(const std::shared_ptr<Shared>& s, OutCopy& c) {
  char buf[32768];
  bool ending = false;  // end_output was called: wait for EOF until s->end_at only
  while (true) {
    int timeout = -1;
    if (ending) {
      std::chrono::steady_clock::time_point end_at;
      {
        std::lock_guard lk(s->mu);
        end_at = s->end_at;
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(end_at - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        copy_rest(c);
        break;
      }
      timeout = static_cast<int>(left.count());
    }
    // Readable first, then `moving`, then the read: what leaves the pipe is counted as moving
    // until it is in the FIFO, so wait_flushed never misses bytes in between.
    pollfd p[2] = {{c.from.get(), POLLIN, 0}, {ending ? -1 : s->out_wake.get(), POLLIN, 0}};
    if (::poll(p, 2, timeout) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[1].revents != 0) ending = true;  // the eventfd stays readable: polled no more
    if (p[0].revents == 0) continue;
    if (move_once(c, buf, sizeof buf) < 0) break;
  }
  wait_until_read(c, *s);
  {
    std::lock_guard lk(s->mu);
    c.to.reset();  // the client sees EOF
    c.from.reset();
    c.done = true;
    --s->copies_left;
  }
  s->cv.notify_all();
}

ssize_t PipeIO::move_once(OutCopy& c, char* buf, size_t max) {
  c.moving = true;
  const ssize_t n = ::read(c.from.get(), buf, max);
  if (n < 0 && errno == EINTR) {
    c.moving = false;
    return 0;
  }
  const bool ok = n > 0 && write_all(c.to.get(), std::string_view(buf, static_cast<size_t>(n)));
  c.moving = false;
  return ok ? n : -1;
}

void PipeIO::copy_rest(OutCopy& c) {
  // Only what the pipe holds now: a writer that goes on writing cannot keep the copy going.
  char buf[32768];
  for (ssize_t left = unread(c.from.get()); left > 0;) {
    const ssize_t n = move_once(c, buf, std::min(sizeof buf, static_cast<size_t>(left)));
    if (n < 0) return;
    left -= n;
  }
}

void PipeIO::end_output(std::chrono::milliseconds grace) {
  {
    std::lock_guard lk(s_->mu);
    if (s_->ending || !s_->out_wake) return;
    s_->ending = true;
    s_->end_at = std::chrono::steady_clock::now() + grace;
  }
  uint64_t one = 1;
  (void)::write(s_->out_wake.get(), &one, sizeof one);
}

bool PipeIO::flushed_locked(const OutCopy& c) {
  if (c.done) return true;
  // In the order the bytes travel: pipe, copy, FIFO.
  if (unread(c.from.get()) > 0 || c.moving) return false;
  return !c.to_fifo || unread(c.to.get()) == 0;
}

bool PipeIO::wait_flushed(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    {
      std::lock_guard lk(s_->mu);
      if (flushed_locked(s_->out) && flushed_locked(s_->err)) return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void PipeIO::copy_in(const std::shared_ptr<Shared>& s, UniqueFd fifo) {
  char buf[32768];
  while (!s->stopping) {
    pollfd fds[2] = {{fifo.get(), POLLIN, 0}, {s->wake.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents) break;
    if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t n = ::read(fifo.get(), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;  // the client's writer came and went: end of stdin
    std::lock_guard lk(s->mu);
    if (!s->in_w || !write_all(s->in_w.get(), std::string_view(buf, static_cast<size_t>(n)))) break;
  }
  std::lock_guard lk(s->mu);
  s->in_w.reset();
}

void PipeIO::close_stdin() {
  std::lock_guard lk(s_->mu);
  in_hold_.reset();
}

void PipeIO::stop_stdin() {
  std::lock_guard lk(s_->mu);
  in_hold_.reset();
  s_->in_w.reset();
}

bool PipeIO::wait_output(std::chrono::milliseconds timeout) {
  std::unique_lock lk(s_->mu);
  return s_->cv.wait_for(lk, timeout, [&] { return s_->copies_left == 0; });
}

}  // namespace nvproxy::shim
