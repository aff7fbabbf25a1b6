// Test helpers: a temp dir with the fake CUDA driver's protocol files (test/fixtures/fake_cuda),
// fake device files, and fake_cuda_app processes that are killed when the test ends.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/config.h"
#include "common/process.h"

namespace nvproxy::checkpoint::testing {

namespace fs = std::filesystem;

inline fs::path make_temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "nvproxy-ckpt-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

inline void spit(const fs::path& p, const std::string& s) {
  std::ofstream(p) << s;
}

struct Call {
  pid_t pid;
  std::string op;
  long long start, end;
  int rc;
  std::string extra;
};

class FakeGpu {
 public:
  FakeGpu() : dir_(make_temp_dir()) {
    fs::create_directories(dir_ / "dev");
    for (const char* d : {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"}) spit(dir_ / "dev" / d, std::string(4096, 'x'));
    ::setenv("NVPROXY_FAKE_CUDA_DIR", dir_.c_str(), 1);
  }
  ~FakeGpu() {
    for (pid_t p : apps_) ::kill(p, SIGTERM);
    for (pid_t p : apps_) runner_.wait(p);
    ::unsetenv("NVPROXY_FAKE_CUDA_DIR");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  FakeGpu(const FakeGpu&) = delete;
  FakeGpu& operator=(const FakeGpu&) = delete;

  const fs::path& dir() const { return dir_; }
  std::string device(const std::string& name = "nvidia0") const { return (dir_ / "dev" / name).string(); }
  std::string glob() const { return (dir_ / "dev" / "nvidia*").string(); }

  CheckpointConfig config() const {
    CheckpointConfig c;
    c.libcuda = FAKE_LIBCUDA_PATH;
    c.libnvml = FAKE_LIBNVML_PATH;
    c.device_globs = {glob()};
    c.lock_timeout_ms = 1234;
    return c;
  }

  // Starts fake_cuda_app with extra args; returns once it is ready.
  pid_t start_app(std::vector<std::string> extra = {}, const std::string& dev = "nvidia0") {
    std::vector<std::string> argv{FAKE_CUDA_APP_PATH, "--dir", dir_.string(), "--device", device(dev)};
    argv.insert(argv.end(), extra.begin(), extra.end());
    pid_t pid = runner_.start({.argv = argv});
    apps_.push_back(pid);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!fs::exists(file(pid, "ready"))) {
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("fake_cuda_app did not get ready");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return pid;
  }
  std::vector<pid_t> children(pid_t pid) const {
    std::vector<pid_t> out;
    std::istringstream ss(slurp(file(pid, "children")));
    long v;
    while (ss >> v) out.push_back(static_cast<pid_t>(v));
    return out;
  }

  fs::path file(pid_t pid, const std::string& suffix) const { return dir_ / (std::to_string(pid) + "." + suffix); }
  std::string state(pid_t pid) const { return slurp(file(pid, "state")); }
  long counter(pid_t pid) const {
    std::string s = slurp(file(pid, "counter"));
    return s.empty() ? 0 : std::stol(s);
  }
  void fail(const std::string& lines) const { spit(dir_ / "fail", lines); }
  void delay_ms(int ms) const { spit(dir_ / "delay_ms", std::to_string(ms)); }
  void nvml(const std::string& lines) const { spit(dir_ / "nvml", lines); }
  void mark(pid_t pid, const std::string& suffix) const { spit(file(pid, suffix), "1"); }

  std::vector<Call> calls(const std::string& op = "") const {
    std::vector<Call> out;
    std::ifstream in(dir_ / "calls.log");
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      Call c{};
      ls >> c.pid >> c.op >> c.start >> c.end >> c.rc;
      std::getline(ls, c.extra);
      if (!c.extra.empty() && c.extra[0] == ' ') c.extra.erase(0, 1);
      if (op.empty() || c.op == op) out.push_back(c);
    }
    return out;
  }

 private:
  fs::path dir_;
  DirectWaiter waiter_;
  ProcessRunner runner_{waiter_};
  std::vector<pid_t> apps_;
};

}  // namespace nvproxy::checkpoint::testing
