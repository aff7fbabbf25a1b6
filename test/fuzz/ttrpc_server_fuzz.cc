// The real ttrpc Server (Boost.Asio, worker pool) over a real unix socket: each input is the byte
// stream of one client connection. The client sends it, half-closes, and reads until the server
// closes. The server must neither crash (ASan/UBSan watch its threads too) nor hang: a connection
// that is not closed within 5 s after EOF aborts the run.
//
// Methods served: fuzz.Svc/Echo (returns the payload), fuzz.Svc/Fail (throws Error),
// fuzz.Svc/Throw (throws std::runtime_error). Anything else is answered Unimplemented.
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "common/ttrpc/server.h"

using namespace nvproxy;

namespace {

struct Fixture {
  Logger log{-1};
  std::unique_ptr<ttrpc::Server> server;
  std::thread io;
  std::string dir, path;

  Fixture() {
    char tmpl[] = "/tmp/nvproxy-fuzz-ttrpc-XXXXXX";
    if (!::mkdtemp(tmpl)) std::abort();
    dir = tmpl;
    path = dir + "/s";
    server = std::make_unique<ttrpc::Server>(log, ttrpc::ServerOptions{.shutdown_grace = std::chrono::milliseconds(100)});
    server->register_method("fuzz.Svc", "Echo", [](const ttrpc::CallContext&, const std::string& p) { return p; });
    server->register_method("fuzz.Svc", "Fail", [](const ttrpc::CallContext&, const std::string& p) -> std::string {
      throw Error(Code::NotFound, "container \"" + p + "\" not found");
    });
    server->register_method("fuzz.Svc", "Throw",
                            [](const ttrpc::CallContext&, const std::string&) -> std::string { throw std::runtime_error("x"); });
    server->listen(path);
    io = std::thread([this] { server->run(1); });
    // The process ends through exit(); the server thread is never joined (libFuzzer's way).
    io.detach();
  }
};

Fixture& fixture() {
  static Fixture* f = new Fixture();  // leaked on purpose: no teardown races at exit
  return *f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Fixture& f = fixture();
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) std::abort();
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, f.path.c_str(), sizeof(a.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    std::perror("connect");
    std::abort();
  }
  // Write and read interleaved: the server may answer before it has read everything.
  std::size_t off = 0;
  bool wr_closed = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  char buf[65536];
  while (true) {
    if (off == size && !wr_closed) {
      ::shutdown(fd, SHUT_WR);
      wr_closed = true;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (wr_closed ? 0 : POLLOUT)), 0};
    int r = ::poll(&p, 1, 100);
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "ttrpc server did not close the connection 5 s after the client's EOF\n");
      std::abort();
    }
    if (r <= 0) continue;
    if (p.revents & POLLIN || p.revents & POLLHUP) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;  // server closed: done
    }
    if (!wr_closed && (p.revents & POLLOUT)) {
      ssize_t n = ::send(fd, data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0)
        off += static_cast<std::size_t>(n);
      else if (n < 0 && errno != EAGAIN)
        break;  // server closed on us
    }
  }
  ::close(fd);
  return 0;
}
