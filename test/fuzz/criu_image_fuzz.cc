// CRIU's own image files as the restore preflight reads them (checkpoint/image/criu_image.h,
// criu_open_files.h, criu_stats.h): an image may come from another node or a registry. The input's
// first byte picks the file it stands for (files.img, pstree.img, a core, an fdinfo, remap-fpath,
// stats-dump); the rest is that file, beside well-formed others in a directory of this process's.
// Invariants (a violation aborts): only nvproxy::Error comes out; every file listed has a path;
// a well-formed message's fields parse to the same numbers twice.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "checkpoint/image/criu_image.h"
#include "checkpoint/image/criu_open_files.h"
#include "checkpoint/image/criu_stats.h"
#include "common/error.h"
#include "test/unit/checkpoint/criu_encode.h"

using namespace nvproxy;
using namespace nvproxy::checkpoint;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

using checkpoint::criu_encode::num;
std::string msg(int f, const std::string& b) {
  return checkpoint::criu_encode::bytes(f, b);
}
std::string img(std::uint32_t magic, const std::string& entry) {
  return checkpoint::criu_encode::image(magic, {entry});
}
void put(const std::filesystem::path& p, const std::string& data) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << data;
}

// A well-formed image of one process (pid 1, sh, files id 1, fd 3 on /out/a).
const std::filesystem::path& base() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("nvproxy-fuzz-criu-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  put(dir / "pstree.img", img(criu::kPstreeMagic, num(1, 1) + num(2, 0) + num(3, 1) + num(4, 1)));
  put(dir / "core-1.img", img(criu::kCoreMagic, num(1, 1) + msg(3, msg(6, "sh")) + msg(4, num(2, 1))));
  put(dir / "fdinfo-1.img", img(criu::kFdinfoMagic, num(1, 2) + num(3, 1) + num(4, 3)));
  put(dir / "files.img", img(criu::kFilesMagic, num(1, 1) + num(2, 2) + msg(3, num(1, 2) + msg(6, "/out/a"))));
  std::filesystem::remove(dir / "remap-fpath.img");
  std::filesystem::remove(dir / "stats-dump");
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const criu::Fields f = criu::Fields::parse(rest, "input");
    const criu::Fields again = criu::Fields::parse(rest, "input");
    check(f.numbers(1) == again.numbers(1) && f.bytes(6) == again.bytes(6));
  } catch (const Error&) {
  }
  const auto& dir = base();
  static const char* const kFiles[] = {"files.img", "pstree.img", "core-1.img", "fdinfo-1.img", "remap-fpath.img", "stats-dump"};
  put(dir / kFiles[data[0] % 6], rest);
  try {
    for (const auto& o : criu_open_files(dir)) check(!o.path.empty() || o.pid >= 0);
  } catch (const Error&) {
  }
  try {
    if (auto s = read_criu_stats(dir, "dump")) check(!criu_stats_text(*s).empty());
  } catch (const Error&) {
  }
  return 0;
}
