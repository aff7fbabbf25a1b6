#include "gpu/container_edits.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "common/error.h"

namespace nvproxy::gpu {

namespace {

std::string host_of(const DeviceNode& n) {
  return n.host_path.empty() ? n.path : n.host_path;
}

[[noreturn]] void conflict(const std::string& what, const std::string& a, const std::string& b) {
  throw Error(Code::FailedPrecondition, "conflicting GPU edits for " + what + ": " + a + " vs " + b);
}

}  // namespace

void merge_edits(ContainerEdits& into, const ContainerEdits& from) {
  for (const auto& e : from.env) {
    auto it = std::find_if(into.env.begin(), into.env.end(), [&](const EnvEdit& x) { return x.key == e.key; });
    if (it == into.env.end()) {
      into.env.push_back(e);
      continue;
    }
    if (it->value != e.value)
      conflict("env " + e.key, it->origin + " sets \"" + it->value + "\"", e.origin + " sets \"" + e.value + "\"");
  }
  for (const auto& n : from.device_nodes) {
    auto it =
        std::find_if(into.device_nodes.begin(), into.device_nodes.end(), [&](const DeviceNode& x) { return x.path == n.path; });
    if (it == into.device_nodes.end()) {
      into.device_nodes.push_back(n);
      continue;
    }
    bool same = host_of(*it) == host_of(n) && (!it->major || !n.major || *it->major == *n.major) &&
                (!it->minor || !n.minor || *it->minor == *n.minor);
    if (!same)
      conflict("device node " + n.path, it->origin + " (host " + host_of(*it) + ")", n.origin + " (host " + host_of(n) + ")");
  }
  for (const auto& m : from.mounts) {
    auto it = std::find_if(into.mounts.begin(), into.mounts.end(),
                           [&](const MountEdit& x) { return x.container_path == m.container_path; });
    if (it == into.mounts.end()) {
      into.mounts.push_back(m);
      continue;
    }
    if (it->host_path != m.host_path)
      conflict("mount " + m.container_path, it->origin + " (source " + it->host_path + ")",
               m.origin + " (source " + m.host_path + ")");
  }
  for (const auto& h : from.hooks)
    if (std::find(into.hooks.begin(), into.hooks.end(), h) == into.hooks.end()) into.hooks.push_back(h);
  for (auto g : from.additional_gids)
    if (std::find(into.additional_gids.begin(), into.additional_gids.end(), g) == into.additional_gids.end())
      into.additional_gids.push_back(g);
  for (const auto& s : from.symlinks) {
    auto it = std::find_if(into.symlinks.begin(), into.symlinks.end(), [&](const SymlinkEdit& x) { return x.path == s.path; });
    if (it == into.symlinks.end()) {
      into.symlinks.push_back(s);
      continue;
    }
    if (it->target != s.target)
      conflict("symlink " + s.path, it->origin + " (-> " + it->target + ")", s.origin + " (-> " + s.target + ")");
  }
}

namespace {

// A host path under /dev is looked up under dev_root (the same host node when dev_root is /dev).
std::string stat_path_for(const std::string& host, const std::string& dev_root) {
  if (dev_root.empty() || dev_root == "/dev") return host;
  if (host.rfind("/dev/", 0) == 0) return (std::filesystem::path(dev_root) / host.substr(5)).string();
  return host;
}

void fill_node(DeviceNode& n, const std::string& dev_root) {
  if (!n.type.empty() && n.type == "p") return;  // a FIFO has no major/minor
  if (!n.type.empty() && n.major && n.minor) return;
  std::string p = stat_path_for(host_of(n), dev_root);
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0)
    throw Error(Code::NotFound,
                n.origin + ": no major/minor given and host device node " + p + " cannot be read: " + std::strerror(errno));
  std::string t = S_ISCHR(st.st_mode) ? "c" : S_ISBLK(st.st_mode) ? "b" : S_ISFIFO(st.st_mode) ? "p" : "";
  if (t.empty()) throw Error(Code::InvalidArgument, n.origin + ": host path " + p + " is not a device node");
  if (n.type.empty()) n.type = t;
  if (!n.major) n.major = static_cast<int64_t>(major(st.st_rdev));
  if (!n.minor) n.minor = static_cast<int64_t>(minor(st.st_rdev));
  if (!n.file_mode) n.file_mode = st.st_mode & 07777;
}

void fix_mount(MountEdit& m, ContainerEdits& edits, std::vector<std::string>& warnings) {
  bool has_bind = false;
  for (auto& o : m.options) {
    if (o == "rbind") {
      o = "bind";
      warnings.push_back(m.origin + ": \"rbind\" of " + m.host_path + " changed to \"bind\" (submounts break checkpoint)");
    }
    if (o == "bind") has_bind = true;
  }
  if (m.type.empty()) m.type = "bind";
  if (m.type == "bind" && !has_bind) m.options.push_back("bind");
  std::error_code ec;
  auto st = std::filesystem::symlink_status(m.host_path, ec);
  if (ec || !std::filesystem::exists(st)) {
    warnings.push_back(m.origin + ": mount source " + m.host_path + " does not exist on this host");
    return;
  }
  if (!std::filesystem::is_symlink(st)) return;
  // Never bind a symlink: the bind would follow it once and CRIU restores the target path, not the
  // link; mount the real file at its real name and let the hook recreate the link.
  auto real = std::filesystem::canonical(m.host_path, ec);
  if (ec) throw Error(Code::NotFound, m.origin + ": mount source " + m.host_path + " is a dangling symlink");
  std::filesystem::path dest(m.container_path);
  std::string link_name = dest.filename().string();
  m.host_path = real.string();
  if (real.filename().string() != link_name) {
    m.container_path = (dest.parent_path() / real.filename()).string();
    edits.symlinks.push_back({dest.string(), real.filename().string(), m.origin});
  }
}

}  // namespace

void fill_host_info(ContainerEdits& edits, const std::string& dev_root, std::vector<std::string>& warnings) {
  for (auto& n : edits.device_nodes) fill_node(n, dev_root);
  // fix_mount may append symlinks, never mounts, so iterating by index over mounts is stable.
  for (size_t i = 0; i < edits.mounts.size(); ++i) fix_mount(edits.mounts[i], edits, warnings);
}

}  // namespace nvproxy::gpu
