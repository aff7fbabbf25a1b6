// binary:// stdio: a logging binary started by the shim reads the process's stdout and stderr
// (fds 3 and 4) and closes or writes fd 5 once it is ready; the process starts only then. At
// Delete the binary gets EOF and SIGTERM, and is killed if it has not finished in time.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "shim/task/process_io.h"

namespace nvproxy::shim {

struct BinaryUri {
  std::string path;
  std::vector<std::string> args;  // query pairs, in order: key, value, key, value ...
};
// Parses "binary:///path?key=value&flag"; throws InvalidArgument.
BinaryUri parse_binary_uri(const std::string& uri);

class BinaryIO final : public ProcessIO {
 public:
  BinaryIO(const std::string& uri, const IoOwner& owner);
  ~BinaryIO() override;
  BinaryIO(const BinaryIO&) = delete;
  BinaryIO& operator=(const BinaryIO&) = delete;

  [[nodiscard]] oci::Stdio child_stdio() const override;
  void start_copying() override {}
  void close_stdin() override {}
  bool wait_output(std::chrono::milliseconds timeout) override;

 private:
  struct Exit {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  pid_t pid_ = 0;
  std::shared_ptr<Exit> exit_ = std::make_shared<Exit>();
  UniqueFd null_in_, out_w_, err_w_;
  bool finished_ = false;
};

}  // namespace nvproxy::shim
