// Synchronous ttrpc client (unary calls), e.g. for containerd's events service.
//
// Thread-safe: calls from several threads share one connection; each gets its own odd stream
// id and a reader thread hands every response to the call waiting on that id. Blocking
// POSIX I/O on one dedicated thread keeps this simple: the client needs no io_context.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/ttrpc/call_context.h"
#include "common/ttrpc/status_error.h"
#include "common/unique_fd.h"

namespace nvproxy::ttrpc {

class Client {
 public:
  // path: a unix socket path, optionally "unix://"-prefixed; a leading '@' names an abstract
  // socket. Throws Error(Unavailable) when nobody listens there.
  static std::unique_ptr<Client> connect(const std::string& path);
  // Talks over an already connected socket (a socketpair to a child); peer names it in errors.
  static std::unique_ptr<Client> adopt(UniqueFd connected, std::string peer);

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();  // fails pending calls with Unavailable and joins the reader

  // Returns the response payload. Throws StatusError with the server's status code, message and
  // details;
  // Unavailable when the connection is (or gets) broken; DeadlineExceeded after timeout
  // (zero: wait as long as the connection lives). The timeout also travels to the server.
  std::string call(const std::string& service, const std::string& method, const std::string& payload,
                   const Metadata& metadata = {}, std::chrono::nanoseconds timeout = std::chrono::nanoseconds::zero());

  // Closes the connection; later calls throw Unavailable.
  void close();

 private:
  struct Pending {
    bool done = false;
    Code code = Code::Ok;
    std::string message;
    std::string payload;
    std::vector<StatusDetail> details;
  };

  Client(UniqueFd fd, std::string address);
  void reader_loop();
  void fail_all_locked(const std::string& why);  // mu_ held
  void write_all(const std::string& frame);      // wmu_ held

  const std::string address_;
  UniqueFd fd_;
  std::mutex wmu_;  // one frame at a time on the wire

  std::mutex mu_;
  std::condition_variable cv_;
  std::uint32_t next_id_ = 1;
  std::map<std::uint32_t, std::shared_ptr<Pending>> pending_;
  std::optional<std::string> broken_;  // why the connection is unusable

  std::thread reader_;
};

}  // namespace nvproxy::ttrpc
