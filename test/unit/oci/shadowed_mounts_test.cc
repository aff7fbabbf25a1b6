#include "oci/shadowed_mounts.h"

#include <gtest/gtest.h>

namespace nvproxy::oci {
namespace {

nlohmann::json mount(const std::string& dst, const std::string& type, const std::string& src) {
  return {{"destination", dst}, {"type", type}, {"source", src}, {"options", {"nosuid"}}};
}

TEST(ShadowedMounts, DropsTheEarlierOfTwoAtOneDestinationAndNamesBoth) {
  // containerd's default /dev/shm, then a user's bigger one (ctr run --mount type=tmpfs,...,dst=/dev/shm).
  nlohmann::json spec = {{"mounts",
                          {mount("/proc", "proc", "proc"), mount("/dev/shm", "tmpfs", "shm"), mount("/etc/hosts", "bind", "/h"),
                           mount("/dev/shm/", "tmpfs", "tmpfs")}}};
  auto dropped = drop_shadowed_mounts(spec);
  ASSERT_EQ(1U, dropped.size());
  EXPECT_EQ("mount 1 (tmpfs shm at /dev/shm) is shadowed by mount 3 (tmpfs at /dev/shm/)", dropped[0]);
  ASSERT_EQ(3U, spec["mounts"].size());
  EXPECT_EQ("/proc", spec["mounts"][0]["destination"]);
  EXPECT_EQ("/etc/hosts", spec["mounts"][1]["destination"]);
  // The one the container sees stays, with its options.
  EXPECT_EQ("tmpfs", spec["mounts"][2]["source"]);
  EXPECT_EQ(nlohmann::json::array({"nosuid"}), spec["mounts"][2]["options"]);
}

TEST(ShadowedMounts, ThreeAtOneDestinationKeepTheLast) {
  nlohmann::json spec = {{"mounts", {mount("/data", "bind", "/a"), mount("/data", "tmpfs", "t"), mount("//data", "bind", "/c")}}};
  auto dropped = drop_shadowed_mounts(spec);
  ASSERT_EQ(2U, dropped.size());
  EXPECT_EQ("mount 0 (bind /a at /data) is shadowed by mount 2 (bind /c at //data)", dropped[0]);
  EXPECT_EQ("mount 1 (tmpfs t at /data) is shadowed by mount 2 (bind /c at //data)", dropped[1]);
  ASSERT_EQ(1U, spec["mounts"].size());
  EXPECT_EQ("/c", spec["mounts"][0]["source"]);
}

TEST(ShadowedMounts, NestedDestinationsAreNotShadows) {
  nlohmann::json spec = {{"mounts", {mount("/dev", "tmpfs", "tmpfs"), mount("/dev/shm", "tmpfs", "shm")}}};
  const nlohmann::json before = spec;
  EXPECT_TRUE(drop_shadowed_mounts(spec).empty());
  EXPECT_EQ(before, spec);
}

TEST(ShadowedMounts, MalformedOrMissingMountsAreLeftForTheRuntime) {
  nlohmann::json none = {{"process", {{"args", {"sh"}}}}};
  EXPECT_TRUE(drop_shadowed_mounts(none).empty());
  EXPECT_FALSE(none.contains("mounts"));
  nlohmann::json bad = {{"mounts", {mount("/x", "tmpfs", "a"), {{"type", "tmpfs"}}, mount("/x", "tmpfs", "b")}}};
  const nlohmann::json before = bad;
  EXPECT_TRUE(drop_shadowed_mounts(bad).empty());
  EXPECT_EQ(before, bad);
}

TEST(ShadowedMounts, NormalizesDestinations) {
  EXPECT_EQ("/dev/shm", normalize_destination("/dev/shm/"));
  EXPECT_EQ("/dev/shm", normalize_destination("/dev//shm"));
  EXPECT_EQ("/dev/shm", normalize_destination("/dev/./shm"));
  EXPECT_EQ("/", normalize_destination("/"));
}

}  // namespace
}  // namespace nvproxy::oci
