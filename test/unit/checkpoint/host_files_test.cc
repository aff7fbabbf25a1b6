// The host files a CRIU image depends on: CRIU's image files read by hand (criu_image.h), the open
// files of its processes (criu_open_files.h), mapped onto a spec's bind mounts and checked on this
// node (host_files.h). The images are written here in CRIU's format: the magic pair, then each
// message's size and its protobuf bytes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/image/criu_image.h"
#include "checkpoint/image/criu_open_files.h"
#include "checkpoint/image/criu_stats.h"
#include "checkpoint/image/host_files.h"
#include "checkpoint/image/image_record.h"
#include "checkpoint/session/session.h"
#include "common/error.h"
#include "common/scratch_dir.h"
#include "test/unit/checkpoint/criu_encode.h"

namespace nvproxy::checkpoint {
namespace {

ScratchDir scratch(const std::string& name) {
  return ScratchDir(std::filesystem::temp_directory_path() / ("nvproxy-" + name + "-" + std::to_string(::getpid())));
}

using criu_encode::bytes;
using criu_encode::le32;
using criu_encode::num;
using criu_encode::varint;

void write_img(const std::filesystem::path& p, std::uint32_t magic, const std::vector<std::string>& entries) {
  std::ofstream(p, std::ios::binary) << criu_encode::image(magic, entries);
}
// reg_file_entry: id 1, flags 2, pos 3, name 6, size 8, mode 10.
std::string reg(std::uint32_t id, const std::string& name, std::uint32_t flags, std::uint64_t pos, std::uint32_t mode,
                std::optional<std::uint64_t> size = std::nullopt) {
  std::string r = num(1, id) + num(2, flags) + num(3, pos) + bytes(5, "") + bytes(6, name) + num(10, mode);
  if (size) r += num(8, *size);
  return r;
}
std::string file_entry(std::uint32_t id, const std::string& reg_bytes) {
  return num(1, 1) + num(2, id) + bytes(3, reg_bytes);
}
std::string core(const std::string& comm, std::uint32_t files_id) {
  return num(1, 1) + bytes(3, num(1, 1) + num(2, 0) + num(3, 0) + num(4, 0) + num(5, 0) + bytes(6, comm)) +
         bytes(4, num(1, 1) + num(2, files_id) + num(3, 1) + num(4, 1));
}
std::string fdinfo(std::uint32_t id, std::uint32_t fd, std::uint32_t type = 1) {
  return num(1, id) + num(2, 0) + num(3, type) + num(4, fd);
}

// Two processes: pid 1 (sh) with its own table, pid 7 (python3) with another; a file with a space
// and a newline in its name, one remapped (a ghost: left out), a library mapped by no fd.
void write_image(const std::filesystem::path& d) {
  write_img(d / "pstree.img", criu::kPstreeMagic,
            {num(1, 1) + num(2, 0) + num(3, 1) + num(4, 1), num(1, 7) + num(2, 1) + num(3, 1) + num(4, 1)});
  write_img(d / "core-1.img", criu::kCoreMagic, {core("sh", 10)});
  write_img(d / "core-7.img", criu::kCoreMagic, {core("python3", 11)});
  write_img(d / "fdinfo-10.img", criu::kFdinfoMagic, {fdinfo(2, 1), fdinfo(9, 0, 11)});
  write_img(d / "fdinfo-11.img", criu::kFdinfoMagic, {fdinfo(3, 9), fdinfo(4, 4), fdinfo(2, 5)});
  write_img(d / "files.img", criu::kFilesMagic,
            {file_entry(2, reg(2, "/out/log file\nwith newline", O_WRONLY | O_APPEND, 10, S_IFREG | 0644)),
             file_entry(3, reg(3, "/out/progress.tmp", O_WRONLY | O_CREAT, 54, S_IFREG | 0644)),
             file_entry(4, reg(4, "/out/gone (deleted)", O_RDWR, 0, S_IFREG | 0644)),
             file_entry(5, reg(5, "/usr/lib/libpython.so", O_RDONLY, 0, S_IFREG | 0755, 4096)),
             num(1, 5) + num(2, 6)});  // an eventfd: not a regular file
  write_img(d / "remap-fpath.img", criu::kRemapFpathMagic, {num(1, 4) + num(2, 99) + num(3, 1)});
}

TEST(CriuImage, FieldsReadEveryWireTypeAndRefuseTruncation) {
  const std::string m = num(1, 300) + bytes(2, "ab") + num(1, 5);
  auto f = criu::Fields::parse(m, "x");
  EXPECT_EQ(300u, f.number(1));
  EXPECT_EQ((std::vector<std::uint64_t>{300, 5}), f.numbers(1));
  EXPECT_EQ("ab", f.bytes(2));
  EXPECT_FALSE(f.has(3));
  EXPECT_THROW(criu::Fields::parse(m.substr(0, m.size() - 1), "x"), Error);     // a varint cut
  EXPECT_THROW(criu::Fields::parse(bytes(2, "abc").substr(0, 3), "x"), Error);  // a length past the end
  EXPECT_THROW(criu::Fields::parse(varint((1 << 3) | 3), "x"), Error);          // a group: not CRIU's
  EXPECT_THROW(criu::Fields::parse(std::string(11, '\xff'), "x"), Error);       // a varint that never ends
}

TEST(CriuOpenFiles, ListsEachProcessesRegularFilesButRemappedOnes) {
  ScratchDir d = scratch("criu-open");
  write_image(d.path());
  auto files = criu_open_files(d.path());
  ASSERT_EQ(4u, files.size());
  // By files.img's order, each holder of a file once.
  EXPECT_EQ("/out/log file\nwith newline", files[0].path);
  EXPECT_EQ(1, files[0].pid);
  EXPECT_EQ("sh", files[0].comm);
  EXPECT_TRUE(files[0].writing());
  EXPECT_EQ(7, files[1].pid);
  EXPECT_EQ(5, files[1].fd);
  EXPECT_EQ("/out/progress.tmp", files[2].path);
  EXPECT_EQ(7, files[2].pid);
  EXPECT_EQ("python3", files[2].comm);
  EXPECT_EQ(9, files[2].fd);
  EXPECT_EQ(54u, files[2].pos);
  EXPECT_EQ("/usr/lib/libpython.so", files[3].path);
  EXPECT_EQ(0, files[3].pid);  // mapped only
  EXPECT_FALSE(files[3].writing());
  EXPECT_EQ(4096u, files[3].size.value());
}

TEST(CriuOpenFiles, TruncatedOrHostileImagesAreErrorsNamingTheFile) {
  ScratchDir d = scratch("criu-hostile");
  EXPECT_THROW(criu_open_files(d.path()), Error);  // no pstree.img: not a CRIU image
  write_image(d.path());
  auto expect_error = [&](const std::string& file) {
    try {
      criu_open_files(d.path());
      ADD_FAILURE() << "no error for " << file;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
    }
  };
  // files.img cut inside its last entry.
  std::string data;
  {
    std::ifstream in(d.path() / "files.img", std::ios::binary);
    data.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(d.path() / "files.img", std::ios::binary) << data.substr(0, data.size() - 3);
  expect_error("files.img");
  // An entry that claims 4 GiB.
  std::ofstream(d.path() / "files.img", std::ios::binary) << le32(0x54564319) + le32(criu::kFilesMagic) + le32(0xffffffffu) + "x";
  expect_error("files.img");
  // Another image's magic.
  write_img(d.path() / "files.img", criu::kPstreeMagic, {});
  expect_error("files.img");
  // A pid past the kernel's range in pstree.img.
  write_image(d.path());
  write_img(d.path() / "pstree.img", criu::kPstreeMagic, {num(1, 1ull << 40)});
  expect_error("pstree.img");
  // A process whose core image is missing, and a directory where a file was.
  write_image(d.path());
  std::filesystem::remove(d.path() / "core-7.img");
  expect_error("core-7.img");
  std::filesystem::create_directory(d.path() / "core-7.img");
  expect_error("core-7.img");
  // A link out of the image is not followed, even to a regular file.
  std::filesystem::remove(d.path() / "core-7.img");
  std::filesystem::create_symlink(d.path() / "core-1.img", d.path() / "core-7.img");
  expect_error("core-7.img");
}

nlohmann::json spec_with(const std::filesystem::path& out, const std::filesystem::path& lib) {
  return {{"mounts",
           {{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
            {{"destination", "/out/"}, {"type", "bind"}, {"source", out.string()}, {"options", {"rbind", "rw"}}},
            {{"destination", "/usr/lib/libpython.so"}, {"source", lib.string()}, {"options", {"bind", "ro"}}}}}};
}

TEST(HostFiles, MapsOpenFilesOntoTheSpecsBindMountsAndChecksThem) {
  ScratchDir img = scratch("criu-img");
  ScratchDir host = scratch("criu-host");
  write_image(img.path());
  const auto out = host.path() / "out";
  std::filesystem::create_directory(out);
  std::ofstream(out / "log file\nwith newline") << "0123456789";
  std::ofstream(out / "progress.tmp") << std::string(54, 'x');
  const auto lib = host.path() / "libpython.so";
  std::ofstream(lib) << std::string(4096, 'l');

  auto files = on_bind_mounts(criu_open_files(img.path()), spec_with(out, lib));
  ASSERT_EQ(4u, files.size());
  EXPECT_EQ("/out", files[2].mount);
  EXPECT_EQ((out / "progress.tmp").string(), files[2].host_path);
  EXPECT_EQ(lib.string(), files[3].host_path);  // a file bind-mounted on its own
  auto ok = check_on_this_node(files);
  EXPECT_TRUE(ok.refusals.empty()) << ok.refusals.front();
  EXPECT_TRUE(ok.warnings.empty());

  // The record round trip keeps every field.
  ImageRecord rec{.container = "mp", .host_files = files, .host_files_listed = true};
  auto back = image_record_from_json(to_json(rec));
  EXPECT_TRUE(back.host_files_listed);
  EXPECT_EQ(files, back.host_files);

  // Renamed away, replaced by a directory, resized, truncated below an offset.
  std::filesystem::rename(out / "progress.tmp", out / "progress");
  std::filesystem::remove(out / "log file\nwith newline");
  std::filesystem::create_directory(out / "log file\nwith newline");
  std::ofstream(lib) << "short";
  auto bad = check_on_this_node(files);
  ASSERT_EQ(4u, bad.refusals.size());
  EXPECT_NE(bad.refusals[2].find("pid 7 (python3) held /out/progress.tmp on the bind mount " + out.string() +
                                 " -> /out open for writing at the checkpoint; it is gone on this node"),
            std::string::npos)
      << bad.refusals[2];
  EXPECT_NE(bad.refusals[0].find("was a regular file and is now a directory"), std::string::npos) << bad.refusals[0];
  EXPECT_NE(bad.refusals[3].find("was 4096 bytes and is 5 now"), std::string::npos) << bad.refusals[3];

  std::filesystem::rename(out / "progress", out / "progress.tmp");
  std::filesystem::resize_file(out / "progress.tmp", 10);
  auto shrunk = check_on_this_node({files[2]});
  EXPECT_TRUE(shrunk.refusals.empty());
  ASSERT_EQ(1u, shrunk.warnings.size());
  EXPECT_NE(shrunk.warnings[0].find("shorter than the offset 54"), std::string::npos) << shrunk.warnings[0];
}

TEST(HostFiles, FilesOffBindMountsAreNotTheHostsToCheck) {
  std::vector<CriuOpenFile> open{{.pid = 1, .comm = "sh", .fd = 3, .path = "/tmp/counter.new"},
                                 {.pid = 1, .comm = "sh", .fd = 4, .path = "/proc/self/status"},
                                 {.pid = 1, .comm = "sh", .fd = 5, .path = "/outside/x"}};
  EXPECT_TRUE(on_bind_mounts(open, spec_with("/srv/out", "/srv/lib")).empty());
  EXPECT_TRUE(on_bind_mounts(open, nlohmann::json::object()).empty());
  EXPECT_TRUE(on_bind_mounts(open, {{"mounts", "not a list"}}).empty());
}

TEST(HostFiles, ASandboxsBindMountSourcesAreChecked) {
  ScratchDir host = scratch("sandbox-host");
  auto mounts = bind_mount_sources(spec_with(host.path() / "out", host.path()));
  ASSERT_EQ(2u, mounts.size());
  auto check = check_on_this_node(mounts);
  ASSERT_EQ(1u, check.refusals.size());
  EXPECT_NE(check.refusals[0].find("the bind mount " + (host.path() / "out").string() + " -> /out; it is gone on this node"),
            std::string::npos)
      << check.refusals[0];
}

void write_service_img(const std::filesystem::path& p, std::uint32_t magic, const std::string& entry) {
  std::ofstream(p, std::ios::binary) << criu_encode::image(magic, {entry}, criu_encode::kServiceMagic);
}
TEST(CriuStats, DumpAndRestoreStatsAreReadFromTheWorkDirectory) {
  ScratchDir w = scratch("criu-stats");
  EXPECT_FALSE(read_criu_stats(w.path(), "dump"));  // none: a runtime without CRIU
  // dump_stats_entry: freezing 12 ms, frozen 3.1 s, memdump 2.0 s, memwrite 1.0 s (microseconds),
  // 1048576 pages scanned, 262144 written (1 GiB).
  write_service_img(w.path() / "stats-dump", criu::kStatsMagic,
                    bytes(1, num(1, 12000) + num(2, 3100000) + num(3, 2000000) + num(4, 1000000) + num(5, 1048576) + num(6, 0) +
                                 num(7, 262144) + num(9, 0)));
  auto d = read_criu_stats(w.path(), "dump");
  ASSERT_TRUE(d);
  ASSERT_EQ(4u, d->timings.size());
  EXPECT_EQ("criu_frozen", d->timings[1].name);
  EXPECT_DOUBLE_EQ(3100.0, d->timings[1].ms);
  EXPECT_EQ(262144u, d->pages_written);
  EXPECT_EQ(
      "CRIU: frozen 3.1 s (freezing 12 ms), memory dump 2.0 s, page write 1.0 s: 1.00 GiB written of 4.00 GiB scanned, "
      "written at 1.00 GiB/s",
      criu_stats_text(*d));
  write_service_img(w.path() / "stats-restore", criu::kStatsMagic,
                    bytes(2, num(1, 0) + num(2, 0) + num(3, 20000) + num(4, 3000000) + num(5, 1048576)));
  auto r = read_criu_stats(w.path(), "restore");
  ASSERT_TRUE(r);
  EXPECT_EQ("CRIU: restore 3.0 s (forking 20 ms), 4.00 GiB of pages", criu_stats_text(*r));
  // A cut file is an error naming it, not a crash.
  write_service_img(w.path() / "stats-dump", criu::kStatsMagic, bytes(1, num(1, 12000)).substr(0, 3));
  EXPECT_THROW(read_criu_stats(w.path(), "dump"), Error);
}

TEST(CriuStats, TheWorkloadIsStoppedFromTheFirstLockToTheLastUnlock) {
  std::vector<PhaseTiming> cuda{{"scan", 5},        {"lock", 10},          {"checkpoint", 900}, {"verify", 3},
                                {"snapshot", 2000}, {"criu_frozen", 1800}, {"resume", 700}};
  EXPECT_DOUBLE_EQ(3613.0, stopped_ms(cuda));
  std::vector<PhaseTiming> plain{{"scan", 5}, {"snapshot", 2000}, {"criu_frozen", 1800}};
  EXPECT_DOUBLE_EQ(1800.0, stopped_ms(plain));
  EXPECT_DOUBLE_EQ(0.0, stopped_ms({{"scan", 5}}));
}

}  // namespace
}  // namespace nvproxy::checkpoint
