#include "checkpoint/cuda_helper_protocol.h"

#include <unistd.h>

#include <cerrno>

namespace nvproxy::checkpoint::helper_protocol {

void read_lines(int fd, const std::function<void(std::string&&)>& on_line) {
  std::string buf;
  char chunk[4096];
  while (true) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    buf.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buf.find('\n')) != std::string::npos;) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      on_line(std::move(line));
    }
  }
}

nlohmann::json error_to_json(const Error& e) {
  nlohmann::json j{{"code", static_cast<int>(e.code())}, {"message", e.what()}};
  if (const auto* ce = dynamic_cast<const CudaError*>(&e)) {
    j["cuda"] = {{"pid", ce->pid()},
                 {"op", ce->op()},
                 {"driver_code", ce->driver_code()},
                 {"driver_name", ce->driver_name()},
                 {"detail", ce->detail()}};
  }
  return j;
}

void throw_error(const nlohmann::json& err) {
  // Whatever the helper sent, the caller gets an Error: a malformed answer is an Internal one.
  try {
    if (err.contains("cuda")) {
      const auto& c = err.at("cuda");
      throw CudaError(c.at("pid").get<pid_t>(), c.at("op").get<std::string>(), c.at("driver_code").get<int>(),
                      c.at("driver_name").get<std::string>(), c.value("detail", std::string()));
    }
    int code = err.at("code").get<int>();
    if (code <= 0 || code > static_cast<int>(Code::Unauthenticated)) code = static_cast<int>(Code::Unknown);
    throw Error(static_cast<Code>(code), err.at("message").get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw Error(Code::Internal, std::string("nvproxy-cuda-helper sent a malformed error: ") + e.what());
  }
}

}  // namespace nvproxy::checkpoint::helper_protocol
