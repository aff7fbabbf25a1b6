#include "oci/replica_cgroup.h"

#include <gtest/gtest.h>

namespace nvproxy::oci {
namespace {

TEST(ReplicaCgroup, RenamesTheLeafNamedAfterTheImagesContainer) {
  EXPECT_EQ(replica_cgroups_path("/gpu/s1", "s1", "s1r1"), "/gpu/s1r1");
  EXPECT_EQ(replica_cgroups_path("/default/origin", "origin", "fan2"), "/default/fan2");
  EXPECT_EQ(replica_cgroups_path("system.slice:nvproxy:origin", "origin", "fan2"), "system.slice:nvproxy:fan2");
}

TEST(ReplicaCgroup, LeavesOtherPathsAlone) {
  // Already this container's (a restore into the container that was checkpointed, or CRI's path).
  EXPECT_EQ(replica_cgroups_path("/gpu/s1", "s1", "s1"), std::nullopt);
  EXPECT_EQ(replica_cgroups_path("kubepods.slice:cri-containerd:abc", "old", "abc"), std::nullopt);
  // A path the user chose, and names that only end alike.
  EXPECT_EQ(replica_cgroups_path("/mine/group", "s1", "s1r1"), std::nullopt);
  EXPECT_EQ(replica_cgroups_path("/gpu/xs1", "s1", "s1r1"), std::nullopt);
  EXPECT_EQ(replica_cgroups_path("system.slice:x/s1", "s1", "r"), std::nullopt);
  // Nothing known about the image's container, or nothing before the name.
  EXPECT_EQ(replica_cgroups_path("/gpu/s1", "", "s1r1"), std::nullopt);
  EXPECT_EQ(replica_cgroups_path("s1", "s1", "s1r1"), std::nullopt);
}

TEST(ReplicaCgroup, CriuIsToldTheCgroupWhereRuncBefore12LeavesItOut) {
  EXPECT_EQ(criu_cgroup_root_line("/gpu/s1r1", true, true), "cgroup-root /gpu/s1r1");
  EXPECT_EQ(criu_cgroup_root_line("/gpu/s1r1", false, true), std::nullopt) << "cgroup v1: runc gives CRIU the roots";
  EXPECT_EQ(criu_cgroup_root_line("/gpu/s1r1", true, false), std::nullopt) << "runc 1.2 and later give them on v2 too";
  EXPECT_EQ(criu_cgroup_root_line("system.slice:nvproxy:s1r1", true, true), std::nullopt) << "systemd's path is not a root";
  EXPECT_EQ(criu_cgroup_root_line("gpu/s1r1", true, true), std::nullopt) << "relative: runc's own cgroup below";
  EXPECT_EQ(criu_cgroup_root_line("", true, true), std::nullopt);
  EXPECT_EQ(criu_cgroup_root_line("/a b", true, true), std::nullopt) << "not a line CRIU's configuration reads as one path";
}

TEST(ReplicaCgroup, EditsTheSpecAndSaysWhat) {
  auto spec = nlohmann::json::parse(R"({"linux": {"cgroupsPath": "/gpu/s1", "namespaces": []}})");
  auto said = give_replica_its_cgroup(spec, "s1", "s1r2");
  ASSERT_TRUE(said);
  EXPECT_EQ(spec["linux"]["cgroupsPath"], "/gpu/s1r2");
  EXPECT_NE(said->find("/gpu/s1 becomes /gpu/s1r2"), std::string::npos) << *said;

  auto none = nlohmann::json::parse(R"({"linux": {"namespaces": []}})");
  EXPECT_FALSE(give_replica_its_cgroup(none, "s1", "s1r2"));
  EXPECT_FALSE(none["linux"].contains("cgroupsPath"));
  auto odd = nlohmann::json::parse(R"({"linux": {"cgroupsPath": 7}})");
  EXPECT_FALSE(give_replica_its_cgroup(odd, "s1", "s1r2"));
  EXPECT_EQ(odd["linux"]["cgroupsPath"], 7);
}

}  // namespace
}  // namespace nvproxy::oci
