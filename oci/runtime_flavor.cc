#include "oci/runtime_flavor.h"

#include <filesystem>

namespace nvproxy::oci {

RuntimeKind runtime_kind_from_binary(const std::string& binary) {
  std::string base = std::filesystem::path(binary).filename().string();
  if (base.find("runsc") != std::string::npos) return RuntimeKind::Runsc;
  if (base.find("crun") != std::string::npos) return RuntimeKind::Crun;
  return RuntimeKind::Runc;
}

const char* runtime_kind_name(RuntimeKind k) {
  switch (k) {
    case RuntimeKind::Runc: return "runc";
    case RuntimeKind::Crun: return "crun";
    case RuntimeKind::Runsc: return "runsc";
  }
  return "runc";
}

std::vector<std::string> checkpoint_args(RuntimeKind k, const CheckpointFlags& f, std::vector<std::string>& dropped) {
  std::vector<std::string> a;
  a.push_back("--image-path=" + f.image_path);
  if (k == RuntimeKind::Runsc) {
    // runsc saves the sandbox itself; CRIU-only switches make it fail with "flag provided but not defined".
    if (f.open_tcp) dropped.push_back("--tcp-established");
    if (f.external_unix_sockets) dropped.push_back("--ext-unix-sk");
    if (f.terminal) dropped.push_back("--shell-job");
    if (f.file_locks) dropped.push_back("--file-locks");
    if (!f.empty_namespaces.empty()) dropped.push_back("--empty-ns");
    if (!f.cgroups_mode.empty()) dropped.push_back("--manage-cgroups-mode");
    if (!f.work_path.empty()) dropped.push_back("--work-path");
    if (f.leave_running) a.push_back("--leave-running");
    if (f.exclude_zero_pages) a.push_back("--exclude-committed-zero-pages");
    return a;
  }
  if (!f.work_path.empty()) a.push_back("--work-path=" + f.work_path);
  if (f.leave_running) a.push_back("--leave-running");
  if (f.open_tcp) a.push_back("--tcp-established");
  if (f.external_unix_sockets) a.push_back("--ext-unix-sk");
  if (f.terminal) a.push_back("--shell-job");
  if (f.file_locks) a.push_back("--file-locks");
  for (const auto& ns : f.empty_namespaces) a.push_back("--empty-ns=" + ns);
  if (!f.cgroups_mode.empty()) a.push_back("--manage-cgroups-mode=" + f.cgroups_mode);
  return a;
}

bool supports_json_log(RuntimeKind k) {
  return k != RuntimeKind::Runsc;
}
bool has_events_stats(RuntimeKind k) {
  return k != RuntimeKind::Crun;
}
bool has_update(RuntimeKind k) {
  return k != RuntimeKind::Runsc;
}

}  // namespace nvproxy::oci
