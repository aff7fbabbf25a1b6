// `start`: containerd runs this with cwd = bundle; we start (or find) the daemon, write the
// `address` file and answer the address (a BootstrapResult to containerd 2.3+, the bare address to
// older ones). It must return quickly; the daemon outlives it.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <iterator>

#include "common/error.h"
#include "common/fs.h"
#include "common/process.h"
#include "common/validate.h"
#include "oci/spec.h"
#include "shim/kit/address.h"
#include "shim/kit/bootstrap.h"
#include "shim/kit/cli.h"
#include "shim/kit/protobuf_log.h"
#include "shim/kit/shim_cgroup.h"

namespace nvproxy::shim {

namespace {

// Containers of one pod share a shim: the CRI plugin marks them with the sandbox id.
std::string grouping_id(const ShimArgs& a) {
  try {
    auto spec = oci::Spec::load(std::filesystem::current_path());
    if (auto sb = spec.annotation("io.kubernetes.cri.sandbox-id"); sb && !sb->empty()) return *sb;
  } catch (const Error&) {
    // No readable spec here: group by the container id alone.
  }
  return a.id;
}

}  // namespace

int start_main(const ShimArgs& a, const std::string& self_exe, std::istream& in, std::ostream& out) {
  validate_id("container id", a.id);
  if (a.ns.empty()) throw Error(Code::InvalidArgument, "start: -namespace is required");
  // containerd 1.6-2.2 read start's stdout and stderr together as the address: nothing of
  // libprotobuf's may land there.
  route_protobuf_log(nullptr);
  // The runtime options come on stdin (containerd 2.3+: among BootstrapParams' extensions). The
  // daemon gets them again with Create; only shim_cgroup matters here, since the daemon must be
  // moved before it runs.
  std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  StartInput boot = parse_start_input(input, a.id, a.ns);
  std::string shim_cgroup = shim_cgroup_of(boot.options);
  std::string grpc_address = a.address.empty() ? boot.grpc_address : a.address;
  auto answer = [&](const std::string& address) {
    write_file_atomic("address", address);
    out << (boot.bootstrap ? bootstrap_result(address) : address);
  };

  std::string group = grouping_id(a);
  validate_id("sandbox id", group);
  std::string path =
      boot.socket_dir.empty() ? socket_path(grpc_address, a.ns, group) : socket_path(grpc_address, a.ns, group, boot.socket_dir);
  std::string address = "unix://" + path;

  UniqueFd listener;
  if (std::filesystem::exists(path)) {
    if (can_connect(path)) {  // a shim for this pod (or a restarted containerd's task) already runs
      answer(address);
      return 0;
    }
    std::filesystem::remove(path);  // stale socket of a dead shim
  }
  listener = listen_unix(path);

  std::vector<std::string> argv{self_exe, "-namespace", a.ns, "-id", a.id, "-address", grpc_address};
  if (!a.publish_binary.empty()) argv.insert(argv.end(), {"-publish-binary", a.publish_binary});
  if (a.debug || boot.debug) argv.push_back("-debug");
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  pid_t pid;
  try {
    pid = runner.start(
        {.argv = argv, .cwd = std::filesystem::current_path().string(), .extra_fds = {listener.get()}, .new_session = true});
  } catch (...) {
    std::filesystem::remove(path);
    throw;
  }
  if (!shim_cgroup.empty()) {
    try {
      join_shim_cgroup(pid, shim_cgroup);
    } catch (...) {
      ::kill(pid, SIGKILL);
      std::filesystem::remove(path);
      throw;
    }
  }
  write_file_atomic("shim.pid", std::to_string(pid));
  answer(address);
  return 0;
}

}  // namespace nvproxy::shim
