// nvproxy-shim-client: calls a shim's Task service directly over ttrpc, for tests of what ctr
// cannot ask (ctr 1.6 and 1.7 have no `task update`).
//   nvproxy-shim-client SOCKET NAMESPACE update ID RESOURCES_JSON
//   nvproxy-shim-client SOCKET NAMESPACE state ID
#include <iostream>

#include "common/error.h"
#include "common/ttrpc/client.h"
#include "proto/shim_task.pb.h"
#include "shim/kit/address.h"

int main(int argc, char** argv) {
  using namespace nvproxy;
  if (argc < 5) {
    std::cerr << "usage: nvproxy-shim-client SOCKET NAMESPACE update ID RESOURCES_JSON | state ID\n";
    return 2;
  }
  std::string sock = shim::strip_unix_scheme(argv[1]), ns = argv[2], op = argv[3], id = argv[4];
  try {
    auto client = ttrpc::Client::connect(sock);
    ttrpc::Metadata md{{std::string(ttrpc::kNamespaceKey), ns}};
    if (op == "update" && argc == 6) {
      containerd::task::v2::UpdateTaskRequest r;
      r.set_id(id);
      r.mutable_resources()->set_type_url("types.containerd.io/opencontainers/runtime-spec/1/LinuxResources");
      r.mutable_resources()->set_value(argv[5]);
      client->call("containerd.task.v2.Task", "Update", r.SerializeAsString(), md, std::chrono::seconds(30));
      return 0;
    }
    if (op == "state") {
      containerd::task::v2::StateRequest r;
      r.set_id(id);
      containerd::task::v2::StateResponse s;
      s.ParseFromString(client->call("containerd.task.v2.Task", "State", r.SerializeAsString(), md, std::chrono::seconds(30)));
      std::cout << s.pid() << " " << containerd::v1::types::Status_Name(s.status()) << "\n";
      return 0;
    }
    std::cerr << "unknown operation " << op << "\n";
    return 2;
  } catch (const Error& e) {
    std::cerr << "nvproxy-shim-client: " << code_name(e.code()) << ": " << e.what() << "\n";
    return 1;
  }
}
