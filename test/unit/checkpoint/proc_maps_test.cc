#include "checkpoint/shared/proc_maps.h"

#include <gtest/gtest.h>

#include <fstream>

#include "fake_gpu.h"

using namespace nvproxy::checkpoint;
using namespace nvproxy::checkpoint::testing;

TEST(ProcMaps, ParsesEveryField) {
  auto e = parse_maps_line("7f0000001000-7f0000003000 rw-s 0001a000 00:05 12   /dev/nvidia0");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->start, 0x7f0000001000u);
  EXPECT_EQ(e->end, 0x7f0000003000u);
  EXPECT_EQ(e->perms, "rw-s");
  EXPECT_EQ(e->offset, 0x1a000u);
  EXPECT_EQ(e->dev, "00:05");
  EXPECT_EQ(e->inode, 12u);
  EXPECT_EQ(e->path, "/dev/nvidia0");
  EXPECT_FALSE(e->deleted);
}

TEST(ProcMaps, PathKeepsSpacesAndLosesDeleted) {
  auto e = parse_maps_line("7f00-7f10 rw-s 00000000 00:1a 7 /dev/shm/a b (deleted)");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path, "/dev/shm/a b");
  EXPECT_TRUE(e->deleted);
}

TEST(ProcMaps, AnonymousAndKernelMappings) {
  auto anon = parse_maps_line("7f00-7f10 rw-p 00000000 00:00 0 ");
  ASSERT_TRUE(anon);
  EXPECT_EQ(anon->path, "");
  EXPECT_EQ(anon->inode, 0u);
  auto ring = parse_maps_line("7f00-7f10 rw-s 00000000 00:0f 1234 anon_inode:[io_uring]");
  ASSERT_TRUE(ring);
  EXPECT_EQ(ring->path, "anon_inode:[io_uring]");
}

TEST(ProcMaps, RefusesWhatIsNoMapsLine) {
  EXPECT_FALSE(parse_maps_line(""));
  EXPECT_FALSE(parse_maps_line("7f00-7f10 rw-p 00000000"));
  EXPECT_FALSE(parse_maps_line("7f00 rw-p 00000000 00:00 0"));
  EXPECT_FALSE(parse_maps_line("7f00-zz rw-p 00000000 00:00 0"));
}

TEST(ProcMaps, ReadsAFileAndTellsAMissingOne) {
  fs::path dir = make_temp_dir();
  std::ofstream(dir / "maps") << "7f00-7f10 r-xp 00000000 08:01 5 /usr/lib/libc.so.6\n"
                                 "garbage\n"
                                 "7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]\n";
  auto all = read_maps(dir / "maps");
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].path, "[stack]");
  EXPECT_FALSE(read_maps(dir / "gone"));
  fs::remove_all(dir);
}

TEST(ProcMaps, ReadsOwnMaps) {
  auto own = read_maps("/proc/self/maps");
  ASSERT_TRUE(own);
  EXPECT_FALSE(own->empty());
  for (const auto& e : *own) EXPECT_LT(e.start, e.end);
}
