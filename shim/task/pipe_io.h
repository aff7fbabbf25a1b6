// FIFO (and file://) stdio: pipes between the runtime's process and the FIFOs containerd hands
// over (or a file, appended to), copied by small threads. The FIFO side is closed when the pipe reaches
// EOF so that clients (ctr) see the end of output; Delete waits (bounded) for the copies to finish.
// Where a writer outlives the process (a runsc pod's sandbox), end_output ends them after a grace.
// The stdin FIFO is opened non-blocking up front (the client may remove its FIFOs early, and an
// open must never block on a client that never attaches), and the shim holds a writer of it until
// CloseIO; poll reports POLLHUP once every writer, the client's and ours, has gone: the end of stdin.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/unique_fd.h"
#include "oci/runtime.h"
#include "shim/task/process_io.h"

namespace nvproxy::shim {

class PipeIO final : public ProcessIO {
 public:
  // Opens the FIFOs (stdout/stderr without blocking) and creates the pipes. Throws Error naming the FIFO.
  explicit PipeIO(const StdioPaths& paths);
  ~PipeIO() override;
  PipeIO(const PipeIO&) = delete;
  PipeIO& operator=(const PipeIO&) = delete;

  // The ends the runtime's process gets; /dev/null for a stream the client did not ask for, never
  // -1: the runtime's process must not inherit a pipe that the shim reads until EOF.
  [[nodiscard]] oci::Stdio child_stdio() const override;
  // After the runtime has started the process: drop our copies of its ends, start copying.
  void start_copying() override;
  // CloseIO: drops our hold on the stdin FIFO; the process sees EOF once the client closed its end.
  void close_stdin() override;
  // Waits until stdout and stderr reached EOF and were flushed; false on timeout.
  bool wait_output(std::chrono::milliseconds timeout) override;
  // Until the pipes are empty, no copy is between read and write, and the FIFOs have been read.
  bool wait_flushed(std::chrono::milliseconds timeout) override;
  // After `grace` without EOF, each output copy reads what its pipe holds then and closes.
  void end_output(std::chrono::milliseconds grace) override;

 private:
  void stop_stdin();
  // What the copy threads touch lives here, shared with them: a copy blocked on a stuck client is
  // detached at destruction and must not outlive its data.
  // One output stream: the pipe the process writes and where it goes. The fds are closed only
  // under Shared::mu, so that wait_flushed can look at them while the copy runs.
  struct OutCopy {
    UniqueFd from, to;
    bool to_fifo = false;
    std::atomic<bool> moving{false};  // set before a read, cleared after its write
    bool done = true;                 // under mu
  };
  struct Shared {
    std::mutex mu;
    OutCopy out, err;
    std::condition_variable cv;
    int copies_left = 0;
    UniqueFd in_w;  // we write the child's stdin here
    std::atomic<bool> stopping{false};
    UniqueFd wake;                                 // eventfd: tells the stdin copy to stop
    UniqueFd out_wake;                             // eventfd: tells the output copies that end_output was called
    bool ending = false;                           // under mu
    std::chrono::steady_clock::time_point end_at;  // under mu: when the output copies stop waiting for EOF
  };
  // Before the output FIFO's end is closed: until the client has read what was written (bounded).
  static void wait_until_read(const OutCopy& c, const Shared& s);
  static void open_output(const std::string& path, OutCopy& c, UniqueFd& child_end);
  static void copy_out(const std::shared_ptr<Shared>& s, OutCopy& c);
  // One read from the pipe, written whole to the client's end, counted as moving meanwhile: the
  // bytes moved, 0 when the read was interrupted, -1 at the pipe's end or a failed write.
  static ssize_t move_once(OutCopy& c, char* buf, size_t max);
  // end_output's deadline has passed: what the pipe holds now is copied, no more.
  static void copy_rest(OutCopy& c);
  static bool flushed_locked(const OutCopy& c);
  static void copy_in(const std::shared_ptr<Shared>& s, UniqueFd fifo);

  StdioPaths paths_;
  std::shared_ptr<Shared> s_ = std::make_shared<Shared>();
  UniqueFd in_r_;
  UniqueFd in_fifo_;
  UniqueFd in_hold_;             // a writer of the stdin FIFO, until CloseIO
  UniqueFd out_w_, err_w_;       // the process's ends; the read ends and FIFOs wait in s_->out/err
  UniqueFd null_in_, null_out_;  // /dev/null for absent streams
  std::vector<std::thread> threads_;
};

}  // namespace nvproxy::shim
