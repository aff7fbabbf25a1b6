// nvproxy-sandbox-agent: the shim's eyes and hands inside a gVisor sandbox. Host /proc sees only
// the sandbox's sentry, so under runsc the shim runs this program in the container (`runsc exec`,
// from the read-only tools mount /.nvproxy, through the loader that came with it) to list the
// sandbox's processes, scan their device fds and mappings, and move their CUDA state with the
// driver's checkpoint API (libcuda found inside the container). One request per run, one JSON
// object on stdout:
//
//   list                               {"self":P,"pids":[...]}          every process but itself
//   scan [--glob G]... [PID]...        {"holders":[...],"info":[...],"comm":[...]}
//   cuda OP PID [--timeout MS] [--libcuda LIB]
//        OP: get-state|lock|checkpoint|restore|unlock
//                                      {"state":"running"} (get-state) or {"ok":true}
//
// Failures: {"error":{"op","code","name","detail"}} with exit status 3 when the driver refused
// (code: the CUresult, -1 when the library could not be used), status 2 for a bad request.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

inline constexpr int kAgentDriverRefused = 3;
inline constexpr int kAgentBadRequest = 2;

// args: without the program name. Writes the JSON answer to `out`; returns the exit status.
int sandbox_agent_main(const std::vector<std::string>& args, std::ostream& out);

}  // namespace nvproxy::checkpoint
