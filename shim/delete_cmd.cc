// `delete`: containerd's cleanup after a shim died (or never started). Works with no daemon: the
// runtime settings come from the record the daemon left in the bundle.
#include <signal.h>

#include <chrono>
#include <iostream>

#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/validate.h"
#include "proto/shim_task.pb.h"
#include "shim/address.h"
#include "shim/cli.h"
#include "shim/config.h"
#include "shim/task/rootfs.h"
#include "shim/task/runtime_record.h"
#include "shim/timestamp.h"

namespace nvproxy::shim {

int delete_main(const ShimArgs& a, std::ostream& out) {
  validate_id("container id", a.id);
  std::filesystem::path bundle = a.bundle.empty() ? std::filesystem::current_path() : std::filesystem::path(a.bundle);
  Logger log(2);
  oci::RuntimeConfig rc;
  if (auto rec = read_runtime_record(bundle)) {
    rc = *rec;
  } else {
    rc = load_config("").runtime;
    if (!rc.root.empty()) rc.root += "/" + a.ns;
  }
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  oci::Runtime rt(rc, runner, log, bundle / "log.json");
  try {
    rt.remove(a.id, true);
  } catch (const Error& e) {
    if (e.code() != Code::NotFound) log.warn(std::string("delete: ") + e.what());
  }
  unmount_all(bundle / "rootfs");
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
