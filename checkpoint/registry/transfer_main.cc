// nvproxy-image-transfer: checkpoint images to and from OCI registries for containerd-shim-nvproxy-v1
// (transfer_cmd.h). Installed beside the shim's other programs (../libexec/containerd-shim-nvproxy/).
#include <iostream>
#include <string>
#include <vector>

#include "checkpoint/registry/transfer_cmd.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return nvproxy::checkpoint::image_transfer_cmd(args, std::cout, std::cerr);
}
