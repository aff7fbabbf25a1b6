#include "gpu/driver_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "gpu/discovery.h"

namespace nvproxy::gpu {

namespace fs = std::filesystem;

const std::vector<std::string>& driver_lib_dirs() {
  static const std::vector<std::string> k = {"usr/lib/x86_64-linux-gnu",
                                             "usr/lib/aarch64-linux-gnu",
                                             "usr/lib64",
                                             "usr/local/nvidia/lib64",
                                             "usr/local/nvidia/lib",
                                             "lib64",
                                             "lib/x86_64-linux-gnu",
                                             "usr/lib",
                                             "lib"};
  return k;
}

const std::vector<std::string>& driver_bin_dirs() {
  static const std::vector<std::string> k = {"usr/bin", "usr/local/nvidia/bin", "usr/local/bin", "usr/sbin", "bin", "sbin"};
  return k;
}

const std::vector<std::string>& driver_mount_options() {
  static const std::vector<std::string> k = {"ro", "nosuid", "nodev", "bind"};
  return k;
}

namespace {

std::string host_path(const std::string& root, const fs::path& in_root) {
  return (fs::path(root) / in_root.relative_path()).lexically_normal().string();
}

bool is_regular(const std::string& root, const fs::path& in_root) {
  std::error_code ec;
  return fs::is_regular_file(fs::symlink_status(host_path(root, in_root), ec));
}

// Orders "580.159.04" after "535.54.03" (numeric per dot-separated part).
bool version_less(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    size_t ie = a.find('.', i), je = b.find('.', j);
    std::string pa = a.substr(i, ie == std::string::npos ? std::string::npos : ie - i);
    std::string pb = b.substr(j, je == std::string::npos ? std::string::npos : je - j);
    if (pa.size() != pb.size()) return pa.size() < pb.size();
    if (pa != pb) return pa < pb;
    i = ie == std::string::npos ? a.size() : ie + 1;
    j = je == std::string::npos ? b.size() : je + 1;
  }
  return false;
}

MountEdit bind_of(const std::string& root, const fs::path& real) {
  return {host_path(root, real), real.string(), "bind", driver_mount_options(), "discovery: " + host_path(root, real)};
}

}  // namespace

bool add_driver_library(const std::string& root, const std::string& stem, const std::string& driver_version,
                        ContainerEdits& edits, std::vector<std::string>& warnings) {
  const std::string prefix = stem + ".so.";
  std::map<std::string, fs::path> real_by_path;  // every hit (file or link) -> its real file
  for (const auto& dir : driver_lib_dirs()) {
    std::error_code ec;
    fs::path in_root = fs::path("/") / dir;
    for (const auto& e : fs::directory_iterator(host_path(root, in_root), ec)) {
      std::string name = e.path().filename().string();
      if (name.rfind(prefix, 0) != 0 && name != stem + ".so") continue;
      auto real = resolve_in_root(root, in_root / name);
      if (real && is_regular(root, *real)) real_by_path[(in_root / name).string()] = *real;
    }
  }
  std::vector<fs::path> reals;
  for (const auto& [p, r] : real_by_path)
    if (std::find(reals.begin(), reals.end(), r) == reals.end()) reals.push_back(r);
  if (reals.empty()) return false;
  auto version_of = [&](const fs::path& p) {
    std::string n = p.filename().string();
    return n.rfind(prefix, 0) == 0 ? n.substr(prefix.size()) : std::string();
  };
  fs::path chosen;
  for (const auto& r : reals)
    if (!driver_version.empty() && version_of(r) == driver_version) chosen = r;
  if (chosen.empty()) {
    chosen = *std::max_element(reals.begin(), reals.end(),
                               [&](const fs::path& a, const fs::path& b) { return version_less(version_of(a), version_of(b)); });
    if (reals.size() > 1)
      warnings.push_back("discovery: several " + stem + " versions under " + root + "; using " + chosen.string());
  }
  edits.mounts.push_back(bind_of(root, chosen));
  for (const auto& [p, r] : real_by_path) {
    if (r != chosen || fs::path(p) == chosen) continue;
    // The link goes next to the real file (a link found in a symlinked dir such as /lib64 -> usr/lib64
    // would otherwise land in a dir the image may not have).
    auto parent = resolve_in_root(root, fs::path(p).parent_path());
    fs::path at = (parent ? *parent : fs::path(p).parent_path()) / fs::path(p).filename();
    if (at == chosen) continue;
    std::string target = at.parent_path() == chosen.parent_path() ? chosen.filename().string() : chosen.string();
    if (std::none_of(edits.symlinks.begin(), edits.symlinks.end(), [&](const SymlinkEdit& s) { return s.path == at.string(); }))
      edits.symlinks.push_back({at.string(), target, "discovery: " + host_path(root, fs::path(p))});
  }
  return true;
}

bool add_driver_tool(const std::string& root, const std::string& name, ContainerEdits& edits) {
  // The first hit in driver_bin_dirs order, except that a "#!" script (a site's wrapper such as
  // /usr/bin/nvidia-smi exec'ing /usr/local/nvidia/bin/nvidia-smi) yields to a real binary found later:
  // bound alone, the wrapper would exec a file the container does not have.
  std::optional<std::pair<std::string, fs::path>> pick, script;
  for (const auto& dir : driver_bin_dirs()) {
    auto real = resolve_in_root(root, fs::path("/") / dir / name);
    if (!real || !is_regular(root, *real)) continue;
    char magic[2] = {};
    std::ifstream(host_path(root, *real), std::ios::binary).read(magic, 2);
    if (magic[0] == '#' && magic[1] == '!') {
      if (!script) script = {dir, *real};
      continue;
    }
    pick = {dir, *real};
    break;
  }
  if (!pick) pick = script;
  if (!pick) return false;
  // Named references, not a structured binding: clang 14 cannot capture bindings in lambdas.
  const auto& dir = pick->first;
  const auto& real = pick->second;
  fs::path in_root = fs::path("/") / dir / name;
  if (std::none_of(edits.mounts.begin(), edits.mounts.end(),
                   [&](const MountEdit& m) { return m.container_path == real.string(); }))
    edits.mounts.push_back(bind_of(root, real));
  if (real != in_root) {
    edits.symlinks.push_back({in_root.string(), real.string(), "discovery: " + host_path(root, in_root)});
  } else if (dir != "usr/bin" && dir != "usr/sbin" && dir != "usr/local/bin" && dir != "bin" && dir != "sbin") {
    // Off the default PATH (drivers installed under /usr/local/nvidia): link it from /usr/bin, where
    // the toolkit puts it, so `nvidia-smi` works in any image.
    edits.symlinks.push_back({"/usr/bin/" + name, real.string(), "discovery: " + host_path(root, real) + " (not on PATH)"});
  }
  return true;
}

}  // namespace nvproxy::gpu
