#include "oci/runtime_flavor.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace nvproxy::oci;

static bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(RuntimeFlavor, KindFromBinary) {
  EXPECT_EQ(runtime_kind_from_binary("runc"), RuntimeKind::Runc);
  EXPECT_EQ(runtime_kind_from_binary("/usr/bin/crun"), RuntimeKind::Crun);
  EXPECT_EQ(runtime_kind_from_binary("/opt/x/runsc"), RuntimeKind::Runsc);
  EXPECT_EQ(runtime_kind_from_binary("my-runtime"), RuntimeKind::Runc);
}

TEST(RuntimeFlavor, RuncGetsCriuFlags) {
  CheckpointFlags f{.leave_running = true,
                    .open_tcp = true,
                    .file_locks = true,
                    .empty_namespaces = {"network"},
                    .image_path = "/img",
                    .work_path = "/work"};
  std::vector<std::string> dropped;
  auto a = checkpoint_args(RuntimeKind::Runc, f, dropped);
  EXPECT_TRUE(has(a, "--image-path=/img"));
  EXPECT_TRUE(has(a, "--work-path=/work"));
  EXPECT_TRUE(has(a, "--leave-running"));
  EXPECT_TRUE(has(a, "--tcp-established"));
  EXPECT_TRUE(has(a, "--file-locks"));
  EXPECT_TRUE(has(a, "--empty-ns=network"));
  EXPECT_TRUE(dropped.empty());
}

TEST(RuntimeFlavor, RunscDropsCriuOnlyFlags) {
  CheckpointFlags f{.open_tcp = true, .external_unix_sockets = true, .terminal = true, .file_locks = true, .image_path = "/img"};
  std::vector<std::string> dropped;
  auto a = checkpoint_args(RuntimeKind::Runsc, f, dropped);
  EXPECT_EQ(a, std::vector<std::string>{"--image-path=/img"});
  EXPECT_TRUE(has(dropped, "--file-locks"));
  EXPECT_TRUE(has(dropped, "--tcp-established"));
  EXPECT_TRUE(has(dropped, "--ext-unix-sk"));
  EXPECT_TRUE(has(dropped, "--shell-job"));
}

// Zero pages out of the image: runsc's own switch; CRIU has none (the shim punches its page files).
TEST(RuntimeFlavor, ZeroPagesAreRunscsSwitchOnly) {
  CheckpointFlags f{.image_path = "/img", .exclude_zero_pages = true};
  std::vector<std::string> dropped;
  EXPECT_TRUE(has(checkpoint_args(RuntimeKind::Runsc, f, dropped), "--exclude-committed-zero-pages"));
  for (auto k : {RuntimeKind::Runc, RuntimeKind::Crun})
    EXPECT_FALSE(has(checkpoint_args(k, f, dropped), "--exclude-committed-zero-pages"));
  EXPECT_TRUE(dropped.empty());
}
