#include "oci/criu_resumed_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "common/error.h"

namespace nvproxy::oci {

CriuResumedWatch::CriuResumedWatch(std::filesystem::path fifo, std::function<void()> resumed)
    : fifo_(std::move(fifo)), resumed_(std::move(resumed)) {
  std::error_code ec;
  std::filesystem::remove(fifo_, ec);
  if (::mkfifo(fifo_.c_str(), 0600) != 0)
    throw Error(Code::Internal,
                "cannot make the FIFO " + fifo_.string() + " CRIU tells when the processes run again: " + std::strerror(errno));
  // Non-blocking: the open does not wait for CRIU, and poll() sees no hang-up before it came.
  read_.reset(::open(fifo_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  stop_.reset(::eventfd(0, EFD_CLOEXEC));
  if (!read_ || !stop_) throw Error(Code::Internal, "cannot watch the FIFO " + fifo_.string() + ": " + std::strerror(errno));
  thread_ = std::thread([this] { watch(); });
}

CriuResumedWatch::~CriuResumedWatch() {
  const std::uint64_t one = 1;
  if (::write(stop_.get(), &one, sizeof(one)) != sizeof(one)) {
    // An eventfd write fails only on overflow: the thread is told already.
  }
  thread_.join();
  std::error_code ec;
  std::filesystem::remove(fifo_, ec);
}

void CriuResumedWatch::watch() {
  for (;;) {
    pollfd fds[2] = {{.fd = read_.get(), .events = POLLIN, .revents = 0}, {.fd = stop_.get(), .events = POLLIN, .revents = 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    // The byte first: CRIU wrote it before it ended, so it may be waiting when the destructor's
    // word comes (a small dump ends at once), and the caller is told before the call returns.
    if ((fds[0].revents & POLLIN) != 0) {
      char byte = 0;
      if (::read(read_.get(), &byte, 1) == 1) resumed_();
      return;
    }
    // The destructor's word, or a writer that came and went without a byte: nothing more will come.
    if (fds[1].revents != 0 || (fds[0].revents & (POLLHUP | POLLERR)) != 0) return;
  }
}

}  // namespace nvproxy::oci
