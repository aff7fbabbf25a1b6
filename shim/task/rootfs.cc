#include "shim/task/rootfs.h"

#include <sys/mount.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::shim {

MountArgs parse_mount_options(const std::vector<std::string>& options, const std::string& type) {
  static const std::map<std::string, std::pair<bool, unsigned long>> kFlags = {
      {"ro", {false, MS_RDONLY}},
      {"rw", {true, MS_RDONLY}},
      {"nosuid", {false, MS_NOSUID}},
      {"suid", {true, MS_NOSUID}},
      {"nodev", {false, MS_NODEV}},
      {"dev", {true, MS_NODEV}},
      {"noexec", {false, MS_NOEXEC}},
      {"exec", {true, MS_NOEXEC}},
      {"sync", {false, MS_SYNCHRONOUS}},
      {"async", {true, MS_SYNCHRONOUS}},
      {"noatime", {false, MS_NOATIME}},
      {"atime", {true, MS_NOATIME}},
      {"nodiratime", {false, MS_NODIRATIME}},
      {"relatime", {false, MS_RELATIME}},
      {"strictatime", {false, MS_STRICTATIME}},
      {"bind", {false, MS_BIND}},
      {"rbind", {false, MS_BIND | MS_REC}},
      {"remount", {false, MS_REMOUNT}},
      {"defaults", {false, 0}},
  };
  MountArgs a;
  for (const auto& o : options) {
    auto it = kFlags.find(o);
    if (it == kFlags.end()) {
      a.data += (a.data.empty() ? "" : ",") + o;
      continue;
    }
    if (it->second.first)
      a.flags &= ~it->second.second;
    else
      a.flags |= it->second.second;
  }
  if (type == "bind") a.flags |= MS_BIND;
  if ((a.flags & MS_BIND) && (a.flags & MS_RDONLY)) a.read_only_remount = true;
  return a;
}

void mount_rootfs(const std::vector<MountSpec>& mounts, const std::filesystem::path& rootfs) {
  std::error_code ec;
  std::filesystem::create_directories(rootfs, ec);
  if (ec) throw Error(Code::Internal, "create " + rootfs.string() + ": " + ec.message());
  for (const auto& m : mounts) {
    MountArgs a = parse_mount_options(m.options, m.type);
    std::filesystem::path target = m.target.empty() ? rootfs : join_within(rootfs, m.target);
    std::string fstype = m.type == "bind" ? "none" : m.type;
    // A bind ignores MS_RDONLY on the first call; read-only is applied by the remount below.
    unsigned long flags = a.read_only_remount ? (a.flags & ~static_cast<unsigned long>(MS_RDONLY)) : a.flags;
    if (::mount(m.source.c_str(), target.c_str(), fstype.c_str(), flags, a.data.c_str()) < 0) {
      int e = errno;
      unmount_all(rootfs);
      throw sys_error("mount " + m.type + " " + m.source + " on " + target.string() + " (options " + a.data + ")", e);
    }
    if (a.read_only_remount &&
        ::mount("", target.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | (a.flags & MS_REC), nullptr) < 0) {
      int e = errno;
      unmount_all(rootfs);
      throw sys_error("remount read-only " + target.string(), e);
    }
  }
}

void unmount_all(const std::filesystem::path& rootfs) {
  std::string root = rootfs.lexically_normal().string();
  while (!root.empty() && root.back() == '/') root.pop_back();
  for (int round = 0; round < 32; ++round) {
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    std::vector<std::string> targets;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string id, parent, devno, fsroot, mp;
      ls >> id >> parent >> devno >> fsroot >> mp;
      if (mp == root || (mp.size() > root.size() && mp.compare(0, root.size(), root) == 0 && mp[root.size()] == '/'))
        targets.push_back(mp);
    }
    if (targets.empty()) return;
    std::sort(targets.begin(), targets.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
    for (const auto& t : targets) ::umount2(t.c_str(), MNT_DETACH);
  }
}

RootfsMount::RootfsMount(const std::vector<MountSpec>& mounts, std::filesystem::path rootfs) : rootfs_(std::move(rootfs)) {
  if (mounts.empty()) return;
  mount_rootfs(mounts, rootfs_);
  mounted_ = true;
}

RootfsMount::~RootfsMount() {
  if (mounted_) unmount_all(rootfs_);
}

}  // namespace nvproxy::shim
