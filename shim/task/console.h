// A process's stdio with a terminal, as containerd's runc shim does it: the runtime (runc, crun,
// runsc) creates the pty inside the container and sends the master to us over a unix socket
// (`--console-socket PATH`, one SCM_RIGHTS message); ConsoleIO then copies between the master and
// containerd's FIFOs.
//
// Wiring (Create / Exec with terminal):
//   ConsoleSocket sock;                                   // before the runtime runs
//   opts.console_socket = sock.path();  runtime->create(id, opts);   // or exec / restore
//   UniqueFd master = sock.receive_master(10s);
//   io = std::make_unique<ConsoleIO>(std::move(master), stdio_paths);
// The runtime's connect+sendmsg completes against the listen backlog, so receiving after the
// runtime command returned is fine (containerd does that). Receiving in another thread while it
// runs works too: start receive_master in std::async before create, and on a create failure call
// sock.cancel() before joining so the receiver does not sit out its timeout.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "common/unique_fd.h"
#include "shim/task/pipe_io.h"

namespace nvproxy::shim {

class ConsoleSocket {
 public:
  // Makes a private 0700 directory under `parent` (created 0700 if missing) holding a 0600
  // listening socket "pty.sock". The parent must be short: a socket path is at most 107 bytes.
  explicit ConsoleSocket(const std::filesystem::path& parent = "/run/nvproxy-console");
  ~ConsoleSocket();  // removes the socket and its directory
  ConsoleSocket(const ConsoleSocket&) = delete;
  ConsoleSocket& operator=(const ConsoleSocket&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }
  // Accepts one connection and returns the terminal fd it carries. Throws Error: DeadlineExceeded
  // on timeout, Cancelled after cancel(), Internal/InvalidArgument when the peer sent no tty.
  UniqueFd receive_master(std::chrono::milliseconds timeout);
  // Wakes a receive_master blocked in another thread (thread-safe; sticky).
  void cancel();

 private:
  std::filesystem::path dir_;
  std::string path_;
  UniqueFd listen_;
  UniqueFd cancel_;  // eventfd
};

// The tty counterpart of PipeIO. Copies master -> stdout FIFO and stdin FIFO -> master in two
// threads started by the constructor. Every wait in those threads polls a stop eventfd, and all
// fds are non-blocking, so the destructor stops and joins them: no thread outlives the object.
class ConsoleIO {
 public:
  // paths.out is opened O_RDWR (never blocks) and paths.in O_RDONLY|O_NONBLOCK; either may be
  // empty (output is then drained and dropped). paths.err is unused: a tty has one output.
  // Throws Error naming the FIFO.
  ConsoleIO(UniqueFd master, const StdioPaths& paths);
  ~ConsoleIO();
  ConsoleIO(const ConsoleIO&) = delete;
  ConsoleIO& operator=(const ConsoleIO&) = delete;

  // ResizePty: TIOCSWINSZ on the master. Throws Error.
  void resize(unsigned width, unsigned height);
  // CloseIO(stdin): stops copying stdin and closes our read end of the stdin FIFO, like
  // containerd's runc shim; the terminal itself stays open (no ^D is injected).
  void close_stdin();
  // True once the master reported EOF/EIO (every slave fd closed) and all output reached the
  // FIFO, which is then closed so the client sees EOF; false on timeout.
  bool wait_output(std::chrono::milliseconds timeout);

 private:
  void copy_out();
  void copy_in();
  // Polls fd for `events` and the stop fds; false when asked to stop.
  bool wait_for(int fd, short events, bool is_stdin);
  bool write_all(int fd, const char* p, size_t n, bool is_stdin);

  UniqueFd master_;
  UniqueFd out_fifo_, in_fifo_;
  UniqueFd stop_, stop_in_;  // eventfds: everything / the stdin copy only
  std::mutex mu_;
  std::condition_variable cv_;
  bool output_done_ = false;
  std::thread out_thread_, in_thread_;
};

}  // namespace nvproxy::shim
