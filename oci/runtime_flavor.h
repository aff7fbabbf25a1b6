// What differs between the OCI runtimes we drive (runc, crun, runsc): one place per runtime, so the
// driver itself has one code path.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace nvproxy::oci {

enum class RuntimeKind { Runc, Crun, Runsc };

// Decided from the binary's file name ("runsc", "/usr/bin/crun", ...); unknown names behave as runc.
RuntimeKind runtime_kind_from_binary(const std::string& binary);
const char* runtime_kind_name(RuntimeKind k);

struct CheckpointFlags {
  bool leave_running = false;  // containerd's exit=false
  bool open_tcp = false;
  bool external_unix_sockets = false;
  bool terminal = false;
  bool file_locks = false;
  std::vector<std::string> empty_namespaces;
  std::string cgroups_mode;
  std::string image_path;
  std::string work_path;
  // Devices ("195:0,195:255") whose fds and mappings in forked children CRIU leaves out of the image
  // with the shim's plugin (checkpoint/attempt/release.h); empty: none, the plugin is not loaded.
  std::string release_devices;
  // runc/crun: a script CRIU runs at its post-dump action, after the image is whole and before it
  // removes the link_remap files it made (CRIU's action-script); empty: none.
  std::string post_dump_script;
  // Leave zero pages out of the image: runsc's --exclude-committed-zero-pages; runc/crun: CRIU's
  // --skip-zero-pages where the CRIU has it (the project's patch; Runtime::criu_skips_zero_pages),
  // else the shim punches them out of the page files afterwards (checkpoint/image/zero_pages.h).
  bool exclude_zero_pages = false;
  // runc/crun with leave_running, whose CRIU takes --resumed-fifo and has page writers: called
  // once, on another thread, when CRIU runs the processes again while it still writes their pages
  // (oci/criu_resumed_watch.h). Not called otherwise: they run again when checkpoint() returns.
  std::function<void()> on_resumed;
};

// Translates containerd's checkpoint options into this runtime's `checkpoint` arguments.
// runsc has no CRIU: it rejects runc's CRIU flags and has no --leave-running before 2024 releases,
// so those are dropped (and reported in `dropped` for the log).
std::vector<std::string> checkpoint_args(RuntimeKind k, const CheckpointFlags& f, std::vector<std::string>& dropped);

// Whether the runtime understands `--log-format json` (runc and crun do; runsc logs text).
bool supports_json_log(RuntimeKind k);
// crun has no `events` command: the task layer reads its statistics from the cgroup.
bool has_events_stats(RuntimeKind k);
// runsc has no `update` command: resources cannot change while a sandbox runs.
bool has_update(RuntimeKind k);

}  // namespace nvproxy::oci
