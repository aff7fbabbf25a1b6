// nvproxy-cuda-toggle: one CUDA toggle of one process through nvproxy-cuda-helper, the path the shim
// takes (ttrpc over a socketpair to the helper, the driver API in it). For the GPU machine, where a
// step of a checkpoint is checked by hand (e.g. that the driver takes the restore's GPU pairs).
//
//   nvproxy-cuda-toggle --helper PATH [--libcuda PATH] [--libnvml PATH] --pid P
//                       state|lock|checkpoint|restore|unlock|gpus [--device-map OLD=NEW,...]
#include <iostream>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/programs/cuda_helper_client.h"
#include "common/error.h"
#include "common/process.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;

namespace {

DeviceMap parse_map(const std::string& text) {
  DeviceMap m;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string pair = text.substr(start, end - start);
    size_t eq = pair.find('=');
    if (eq == std::string::npos) throw Error(Code::InvalidArgument, "--device-map: \"" + pair + "\" is not OLD=NEW");
    m.push_back({pair.substr(0, eq), pair.substr(eq + 1)});
    start = end + 1;
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  CheckpointConfig cfg;
  pid_t pid = 0;
  std::string action, map_text;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error(Code::InvalidArgument, a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--helper")
        cfg.cuda_helper = value();
      else if (a == "--libcuda")
        cfg.libcuda = value();
      else if (a == "--libnvml")
        cfg.libnvml = value();
      else if (a == "--pid")
        pid = std::stoi(value());
      else if (a == "--device-map")
        map_text = value();
      else
        action = a;
    } catch (const std::exception& e) {
      std::cerr << "nvproxy-cuda-toggle: " << e.what() << "\n";
      return 2;
    }
  }
  try {
    DirectWaiter waiter;
    ProcessRunner runner(waiter);
    CudaTools t = make_cuda_tools(cfg, runner);
    if (action == "state") {
      std::cout << state_name(t.toggler->get_state(pid)) << "\n";
    } else if (action == "lock") {
      t.toggler->lock(pid, cfg.lock_timeout_ms);
    } else if (action == "checkpoint") {
      t.toggler->checkpoint(pid);
    } else if (action == "restore") {
      t.toggler->restore(pid, parse_map(map_text));
    } else if (action == "unlock") {
      t.toggler->unlock(pid);
    } else if (action == "gpus") {
      for (const auto& [p, gpus] : t.probe->gpus_by_pid())
        for (const auto& g : gpus) std::cout << p << " " << g << "\n";
    } else {
      std::cerr << "usage: nvproxy-cuda-toggle --helper PATH --pid P state|lock|checkpoint|restore|unlock|gpus "
                   "[--device-map OLD=NEW,...]\n";
      return 2;
    }
  } catch (const std::exception& e) {
    std::cerr << "nvproxy-cuda-toggle: " << action << " of pid " << pid << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
