#include "shim/kit/cli.h"

#include <gtest/gtest.h>

#include "common/error.h"

using namespace nvproxy;
using namespace nvproxy::shim;

TEST(Cli, ParsesContainerdStyleFlags) {
  auto a = parse_shim_args({"-namespace", "k8s.io", "-address", "/run/containerd/containerd.sock", "-publish-binary",
                            "/usr/bin/containerd", "-id", "abc", "start"});
  EXPECT_EQ(a.ns, "k8s.io");
  EXPECT_EQ(a.address, "/run/containerd/containerd.sock");
  EXPECT_EQ(a.publish_binary, "/usr/bin/containerd");
  EXPECT_EQ(a.id, "abc");
  EXPECT_EQ(a.action, "start");
  auto d = parse_shim_args({"-namespace=ns", "-id", "x", "-bundle", "/b", "-debug", "delete"});
  EXPECT_EQ(d.action, "delete");
  EXPECT_EQ(d.bundle, "/b");
  EXPECT_TRUE(d.debug);
  EXPECT_TRUE(parse_shim_args({"-v"}).version);
  EXPECT_TRUE(parse_shim_args({"--version"}).version);
  EXPECT_TRUE(parse_shim_args({"--help"}).help);
  EXPECT_EQ(parse_shim_args({"-namespace", "n", "-id", "i"}).action, "");
}

TEST(Cli, RejectsUnknownFlagsAndActions) {
  EXPECT_THROW(parse_shim_args({"-bogus", "1"}), Error);
  EXPECT_THROW(parse_shim_args({"-id"}), Error);
  EXPECT_THROW(parse_shim_args({"-id", "x", "explode"}), Error);
  EXPECT_NE(shim_usage().find("start|delete"), std::string::npos);
}
