#include "shim/node/probe.h"

namespace nvproxy::node {

ProbeResult probe(ProcessRunner& runner, std::vector<std::string> argv, std::chrono::milliseconds deadline,
                  std::vector<std::string> env_add) {
  ProbeResult r;
  const std::string path = find_program(argv.at(0));
  if (path.empty()) {
    r.problem = argv[0] + " not found in PATH";
    return r;
  }
  argv[0] = path;
  try {
    RunResult rr =
        runner.run(Command{.argv = argv, .env_add = std::move(env_add), .new_process_group = true, .timeout = deadline});
    r.ran = true;
    r.exit_code = rr.exit_code;
    r.out = std::move(rr.out);
    r.err = std::move(rr.err);
    if (rr.timed_out) {
      r.problem = path + " did not finish within " + std::to_string(deadline.count() / 1000) + " s (killed)";
    } else if (!rr.ok()) {
      r.problem = path + ": " + rr.describe();
    }
  } catch (const std::exception& e) {
    r.problem = path + ": " + e.what();
  }
  return r;
}

}  // namespace nvproxy::node
