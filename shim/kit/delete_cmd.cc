// `delete`: containerd's cleanup after a shim died (or never started). Works with no daemon.
#include <signal.h>

#include <chrono>
#include <iostream>

#include "common/error.h"
#include "common/fs.h"
#include "common/validate.h"
#include "proto/shim_task.pb.h"
#include "shim/kit/address.h"
#include "shim/kit/cli.h"
#include "shim/kit/timestamp.h"

namespace nvproxy::shim {

int delete_main(const ShimArgs& a, std::ostream& out, const DeadShimCleanup& cleanup) {
  validate_id("container id", a.id);
  std::filesystem::path bundle = a.bundle.empty() ? std::filesystem::current_path() : std::filesystem::path(a.bundle);
  cleanup(a, bundle);
  // A shim that died (kill -9) left its socket behind: remove it unless a shim still answers there
  // (containers of a pod share one).
  try {
    std::string sock = strip_unix_scheme(read_file(bundle / "address"));
    if (!sock.empty() && !can_connect(sock)) std::filesystem::remove(sock);
  } catch (const Error&) {
    // No address file: the shim never started.
  }

  containerd::task::v2::DeleteResponse resp;
  resp.set_exit_status(128 + SIGKILL);
  set_time(resp.mutable_exited_at(), std::chrono::system_clock::now());
  out << resp.SerializeAsString();
  return 0;
}

}  // namespace nvproxy::shim
