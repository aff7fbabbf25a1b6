// nvproxy-sandbox-agent: run by the shim inside a gVisor sandbox (checkpoint/agent/sandbox_agent.h).
#include <iostream>
#include <string>
#include <vector>

#include "checkpoint/agent/sandbox_agent.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  int rc = nvproxy::checkpoint::sandbox_agent_main(args, std::cout);
  std::cout.flush();
  return rc;
}
