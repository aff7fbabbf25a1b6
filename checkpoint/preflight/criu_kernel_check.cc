#include "checkpoint/preflight/criu_kernel_check.h"

#include <sys/utsname.h>

#include "checkpoint/process/inet_sockets.h"
#include "common/version.h"

namespace nvproxy::checkpoint {

std::optional<std::string> criu_kernel_conflict(const std::string& criu_version, const std::string& kernel_release) {
  auto criu = parse_version(criu_version), kernel = parse_version(kernel_release);
  if (!criu || !kernel) return std::nullopt;
  if (*criu >= Version{4, 2, 0} || *kernel < Version{6, 16, 0}) return std::nullopt;
  return "CRIU " + criu_version + " cannot checkpoint inet sockets on kernel " + kernel_release +
         " (kernels >= 6.16 refuse SO_PASSCRED on them, which CRIU < 4.2 reads): install CRIU >= 4.2";
}

std::string kernel_release() {
  struct utsname u {};
  if (::uname(&u) != 0) return "";
  return u.release;
}

std::optional<SnapshotProblem> CriuKernelCheck::check(const std::vector<pid_t>& pids) {
  auto conflict = criu_kernel_conflict(version_, kernel_);
  if (!conflict) return std::nullopt;
  auto sockets = inet_sockets(pids, proc_);
  if (sockets.empty()) return std::nullopt;  // nothing CRIU would trip over
  SnapshotProblem p;
  p.key = "criu";
  nlohmann::json js = nlohmann::json::array();
  for (const auto& s : sockets) {
    js.push_back({{"pid", s.pid}, {"fd", s.fd}, {"proto", s.proto}, {"local", s.local}, {"listening", s.listening}});
    std::string& h = p.hints[s.pid];
    std::string what = s.proto + " " + s.local + (s.listening ? " (listening)" : "") + " on fd " + std::to_string(s.fd);
    h = h.empty() ? "pid " + std::to_string(s.pid) + " holds an inet socket: " + what : h + ", " + what;
  }
  p.reason = "the runtime's snapshot would fail: " + *conflict + " (the container holds " + std::to_string(sockets.size()) +
             (sockets.size() == 1 ? " inet socket)" : " inet sockets)");
  p.details = {{"binary", binary_},
               {"version", version_},
               {"kernel", kernel_},
               {"inet_sockets", js},
               {"fix", "install CRIU >= 4.2 (or name it with runtime.criu_path)"}};
  return p;
}

}  // namespace nvproxy::checkpoint
