#include "checkpoint/cuda_helper_server.h"

#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/cuda_helper_protocol.h"

namespace nvproxy::checkpoint {

using nlohmann::json;

json handle_helper_request(const json& req, CudaToggler& t, GpuUsageProbe& probe) {
  json id = req.is_object() && req.contains("id") ? req["id"] : json(nullptr);
  try {
    if (!req.is_object()) throw Error(Code::InvalidArgument, "request is not a JSON object");
    const std::string op = req.value("op", std::string());
    auto pid = [&] {
      auto it = req.find("pid");
      if (it == req.end() || !it->is_number_integer() || it->get<long long>() <= 0 || it->get<long long>() > 0x7fffffff)
        throw Error(Code::InvalidArgument, "request \"" + op + "\" needs a positive pid");
      return static_cast<pid_t>(it->get<long long>());
    };
    json result;
    if (op == "describe") {
      result = t.describe();
    } else if (op == "get_state") {
      result = static_cast<int>(t.get_state(pid()));
    } else if (op == "lock") {
      auto it = req.find("timeout_ms");
      unsigned timeout = it != req.end() && it->is_number_unsigned() ? it->get<unsigned>() : 0;
      t.lock(pid(), timeout);
    } else if (op == "checkpoint") {
      t.checkpoint(pid());
    } else if (op == "restore") {
      t.restore(pid());
    } else if (op == "unlock") {
      t.unlock(pid());
    } else if (op == "gpus_by_pid") {
      result = json::object();
      for (const auto& [p, gpus] : probe.gpus_by_pid()) result[std::to_string(p)] = gpus;
    } else if (op == "host_facts") {
      result = to_json(probe.host_facts());
    } else {
      throw Error(Code::Unimplemented, "unknown request \"" + op + "\"");
    }
    return {{"id", id}, {"ok", true}, {"result", result}};
  } catch (const Error& e) {
    return {{"id", id}, {"ok", false}, {"error", helper_protocol::error_to_json(e)}};
  } catch (const std::exception& e) {
    return {{"id", id}, {"ok", false}, {"error", {{"code", static_cast<int>(Code::Internal)}, {"message", e.what()}}}};
  }
}

namespace {

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int serve_cuda_helper(int in_fd, int out_fd, CudaToggler& toggler, GpuUsageProbe& probe) {
  std::mutex out_mu;
  bool out_failed = false;
  std::vector<std::thread> workers;
  auto answer = [&](const json& resp) {
    std::string line = resp.dump() + "\n";
    std::lock_guard lk(out_mu);
    if (!out_failed && !write_all(out_fd, line)) out_failed = true;
  };
  helper_protocol::read_lines(in_fd, [&](std::string&& line) {
    if (line.empty()) return;
    json req = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (req.is_discarded()) {
      answer({{"id", nullptr},
              {"ok", false},
              {"error", {{"code", static_cast<int>(Code::InvalidArgument)}, {"message", "request is not JSON"}}}});
      return;
    }
    // One thread per request: a lock that waits for the driver must not hold up the others.
    workers.emplace_back([&, req = std::move(req)] { answer(handle_helper_request(req, toggler, probe)); });
  });
  for (auto& w : workers) w.join();
  return out_failed ? 1 : 0;
}

}  // namespace nvproxy::checkpoint
