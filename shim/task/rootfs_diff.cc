#include "shim/task/rootfs_diff.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "checkpoint/image/layout_blobs.h"
#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::shim {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kWhiteout = ".wh.";
constexpr std::string_view kOpaque = ".wh..wh..opq";

// `rel` under `root`, every directory on the way a real one (no symlink, no ".."): what a
// removal may touch.
fs::path inside(const fs::path& root, const std::string& rel, const std::string& who) {
  fs::path out = root;
  fs::path r = fs::path(rel).relative_path().lexically_normal();
  std::vector<fs::path> parts(r.begin(), r.end());
  if (parts.empty()) throw Error(Code::InvalidArgument, who + "an empty path to remove");
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == "..") throw Error(Code::InvalidArgument, who + "the path \"" + rel + "\" leaves the rootfs");
    out /= parts[i];
    if (i + 1 == parts.size()) break;
    struct stat st {};
    if (::lstat(out.c_str(), &st) != 0) return {};  // nothing there to remove
    if (!S_ISDIR(st.st_mode))
      throw Error(Code::InvalidArgument,
                  who + "the path \"" + rel + "\" goes through " + out.string() + ", which is not a directory");
  }
  return out;
}

std::size_t remove_inside(const fs::path& root, const std::string& rel, bool contents_only, const std::string& who) {
  const fs::path p = inside(root, rel, who);
  if (p.empty()) return 0;
  std::error_code ec;
  if (!contents_only) return fs::remove_all(p, ec) > 0 ? 1 : 0;
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return 0;
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(p, ec)) n += fs::remove_all(e.path(), ec) > 0 ? 1 : 0;
  return n;
}

}  // namespace

RootfsDiffResult apply_rootfs_diff(const fs::path& archive, const fs::path& rootfs, ProcessRunner& runner,
                                   const std::string& who) {
  RootfsDiffResult out;
  const fs::path deleted = archive / "deleted.files";
  if (fs::exists(deleted)) {
    auto list = nlohmann::json::parse(read_file(deleted), nullptr, false);
    if (!list.is_array()) throw Error(Code::InvalidArgument, who + deleted.string() + " is not a JSON list of paths");
    for (const auto& p : list)
      if (p.is_string()) out.removed += remove_inside(rootfs, p.get<std::string>(), false, who);
  }
  const fs::path diff = archive / "rootfs-diff.tar";
  if (!fs::exists(diff)) return out;
  std::istringstream members(checkpoint::run_tar({"-tf", diff.string()}, runner, who + "listing " + diff.string()));
  for (std::string m; std::getline(members, m);) {
    const fs::path p(m);
    const std::string name = p.filename().string();
    if (name == kOpaque)
      out.removed += remove_inside(rootfs, p.parent_path().string(), true, who);
    else if (name.starts_with(kWhiteout))
      out.removed += remove_inside(rootfs, (p.parent_path() / name.substr(kWhiteout.size())).string(), false, who);
    else
      ++out.entries;
  }
  // GNU tar drops a leading "/", refuses ".." in names and makes an archive's symlinks only after
  // its files, so nothing lands outside the rootfs.
  checkpoint::run_tar({"-xf", diff.string(), "-C", rootfs.string(), "--exclude=.wh.*", "--numeric-owner", "--same-permissions"},
                      runner, who + "unpacking " + diff.string());
  return out;
}

}  // namespace nvproxy::shim
