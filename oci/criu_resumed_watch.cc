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

namespace {

void make_fifo(const std::filesystem::path& p, const char* what) {
  std::error_code ec;
  std::filesystem::remove(p, ec);
  if (::mkfifo(p.c_str(), 0600) != 0)
    throw Error(Code::Internal, "cannot make the FIFO " + p.string() + " " + what + ": " + std::strerror(errno));
}

}  // namespace

CriuResumedWatch::CriuResumedWatch(std::filesystem::path fifo, std::filesystem::path gate, std::function<void()> resumed)
    : fifo_(std::move(fifo)), gate_path_(std::move(gate)), resumed_(std::move(resumed)) {
  make_fifo(fifo_, "CRIU tells when the processes run again");
  // Non-blocking: the open does not wait for CRIU, and poll() sees no hang-up before it came.
  read_.reset(::open(fifo_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  stop_.reset(::eventfd(0, EFD_CLOEXEC));
  if (!read_ || !stop_) throw Error(Code::Internal, "cannot watch the FIFO " + fifo_.string() + ": " + std::strerror(errno));
  if (!gate_path_.empty()) {
    make_fifo(gate_path_, "that lets CRIU write the pages");
    gate_.reset(::open(gate_path_.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC));
    if (!gate_) throw Error(Code::Internal, "cannot open the FIFO " + gate_path_.string() + ": " + std::strerror(errno));
  }
  thread_ = std::thread([this] { watch(); });
}

CriuResumedWatch::~CriuResumedWatch() {
  const std::uint64_t one = 1;
  if (::write(stop_.get(), &one, sizeof(one)) != sizeof(one)) {
    // An eventfd write fails only on overflow: the thread is told already.
  }
  thread_.join();
  gate_.reset();
  std::error_code ec;
  std::filesystem::remove(fifo_, ec);
  if (!gate_path_.empty()) std::filesystem::remove(gate_path_, ec);
}

void CriuResumedWatch::open_gate() {
  if (!gate_) return;
  if (::write(gate_.get(), "w", 1) != 1) gate_.reset();  // then the hang-up opens it
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
      if (::read(read_.get(), &byte, 1) == 1) {
        // The gate opens whatever `resumed` did: the image is written either way.
        struct GateOpener {
          CriuResumedWatch* w;
          ~GateOpener() { w->open_gate(); }
        } opener{this};
        resumed_();
      }
      return;
    }
    // The destructor's word, or a writer that came and went without a byte: nothing more will come.
    if (fds[1].revents != 0 || (fds[0].revents & (POLLHUP | POLLERR)) != 0) return;
  }
}

}  // namespace nvproxy::oci
