#include "checkpoint/image/criu_open_files.h"

#include <fcntl.h>

#include <map>
#include <set>

#include "checkpoint/image/criu_image.h"
#include "common/error.h"

namespace nvproxy::checkpoint {

namespace {

using criu::Fields;

// CRIU's field numbers (images/*.proto) for what is read here.
namespace pstree {
constexpr int kPid = 1;
}
namespace core {
constexpr int kTc = 3, kIds = 4;
constexpr int kTcComm = 6;
constexpr int kIdsFilesId = 2;
}  // namespace core
namespace fdinfo {
constexpr int kId = 1, kType = 3, kFd = 4;
}
namespace file {
constexpr int kType = 1, kId = 2, kReg = 3;
constexpr std::uint64_t kTypeReg = 1;
}  // namespace file
namespace reg {
constexpr int kId = 1, kFlags = 2, kPos = 3, kName = 6, kSize = 8, kExt = 9, kMode = 10;
}
namespace remap {
constexpr int kOrigId = 1;
}
constexpr std::uint32_t kRegFilesMagic = 0x50363636;  // reg-files.img, before files.img (CRIU 3.x)
// A pid is a file name part and a table key: bounded as the kernel bounds it.
constexpr std::uint64_t kMaxPid = 4194304;

struct Holder {
  pid_t pid;
  std::string comm;
  int fd;
};

std::string img(const std::filesystem::path& dir, const std::string& name) {
  return (dir / name).string();
}

CriuOpenFile from_reg(const Fields& r) {
  CriuOpenFile f;
  f.path = std::string(r.bytes(reg::kName));
  f.flags = static_cast<std::uint32_t>(r.number(reg::kFlags));
  f.pos = r.number(reg::kPos);
  if (r.has(reg::kSize)) f.size = r.number(reg::kSize);
  if (r.has(reg::kMode)) f.mode = static_cast<std::uint32_t>(r.number(reg::kMode));
  return f;
}

}  // namespace

bool CriuOpenFile::writing() const {
  return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_APPEND | O_TRUNC)) != 0;
}

std::vector<CriuOpenFile> criu_open_files(const std::filesystem::path& dir) {
  // Each process's fd table, once (threads and CLONE_FILES children share one).
  std::map<std::uint32_t, std::vector<Holder>> holders;  // file id -> fds
  std::set<std::uint64_t> tables;
  for (const auto& e : criu::read_entries(dir / "pstree.img", criu::kPstreeMagic)) {
    const Fields p = Fields::parse(e, img(dir, "pstree.img"));
    const std::uint64_t pid = p.number(pstree::kPid);
    if (pid == 0 || pid > kMaxPid)
      throw Error(Code::InvalidArgument, img(dir, "pstree.img") + ": pid " + std::to_string(pid) + " out of range");
    const std::string core_name = "core-" + std::to_string(pid) + ".img";
    const auto core_entries = criu::read_entries(dir / core_name, criu::kCoreMagic);
    if (core_entries.empty()) throw Error(Code::InvalidArgument, img(dir, core_name) + ": empty");
    const Fields c = Fields::parse(core_entries.front(), img(dir, core_name));
    const std::string comm(Fields::parse(c.bytes(core::kTc), img(dir, core_name) + " (tc)").bytes(core::kTcComm));
    std::uint64_t files_id = 0;
    if (c.has(core::kIds)) {
      files_id = Fields::parse(c.bytes(core::kIds), img(dir, core_name) + " (ids)").number(core::kIdsFilesId);
    } else {
      const std::string ids_name = "ids-" + std::to_string(pid) + ".img";
      const auto ids = criu::read_entries(dir / ids_name, criu::kIdsMagic);
      if (ids.empty()) throw Error(Code::InvalidArgument, img(dir, ids_name) + ": empty");
      files_id = Fields::parse(ids.front(), img(dir, ids_name)).number(core::kIdsFilesId);
    }
    if (files_id > 0xffffffffu) throw Error(Code::InvalidArgument, img(dir, core_name) + ": files id out of range");
    if (!tables.insert(files_id).second) continue;
    const std::string fdinfo_name = "fdinfo-" + std::to_string(files_id) + ".img";
    for (const auto& fe : criu::read_entries(dir / fdinfo_name, criu::kFdinfoMagic, true)) {
      const Fields fd = Fields::parse(fe, img(dir, fdinfo_name));
      if (fd.number(fdinfo::kType) != file::kTypeReg) continue;
      holders[static_cast<std::uint32_t>(fd.number(fdinfo::kId))].push_back(
          {static_cast<pid_t>(pid), comm, static_cast<int>(fd.number(fdinfo::kFd))});
    }
  }

  std::set<std::uint64_t> remapped;
  for (const auto& e : criu::read_entries(dir / "remap-fpath.img", criu::kRemapFpathMagic, true))
    remapped.insert(Fields::parse(e, img(dir, "remap-fpath.img")).number(remap::kOrigId));

  // Every regular file by path, from files.img (or reg-files.img of an older CRIU).
  std::vector<std::pair<std::uint32_t, CriuOpenFile>> regs;
  auto take = [&](const Fields& r) {
    if (r.number(reg::kExt) != 0) return;  // an external file: the runtime hands it over
    const auto id = static_cast<std::uint32_t>(r.number(reg::kId));
    if (remapped.count(id) != 0) return;
    regs.emplace_back(id, from_reg(r));
  };
  const bool unified = std::filesystem::exists(dir / "files.img");
  const std::string files_name = unified ? "files.img" : "reg-files.img";
  for (const auto& e : criu::read_entries(dir / files_name, unified ? criu::kFilesMagic : kRegFilesMagic, true)) {
    const Fields f = Fields::parse(e, img(dir, files_name));
    if (!unified) {
      take(f);
      continue;
    }
    if (f.number(file::kType) != file::kTypeReg || !f.has(file::kReg)) continue;
    take(Fields::parse(f.bytes(file::kReg), img(dir, files_name) + " (file " + std::to_string(f.number(file::kId)) + ")"));
  }

  std::vector<CriuOpenFile> out;
  for (auto& [id, f] : regs) {
    auto it = holders.find(id);
    if (it == holders.end()) {
      out.push_back(f);
      continue;
    }
    for (const auto& h : it->second) {
      CriuOpenFile held = f;
      held.pid = h.pid;
      held.comm = h.comm;
      held.fd = h.fd;
      out.push_back(std::move(held));
    }
  }
  return out;
}

}  // namespace nvproxy::checkpoint
