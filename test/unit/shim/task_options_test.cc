// Options as containerd's Go client encodes them for a runtime that is not io.containerd.runc.*:
// the legacy containerd.linux.runc types, whose field numbers differ from containerd.runc.v1's.
#include "shim/task/task_options.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "proto/runc_options.pb.h"
#include "proto/runctypes.pb.h"
#include "proto/runtime_options.pb.h"

namespace nvproxy::shim {
namespace {

template <typename M>
wkt::Any pack(const M& m, const std::string& name) {
  wkt::Any a;
  a.set_type_url(name);
  a.set_value(m.SerializeAsString());
  return a;
}

TEST(TaskOptions, LegacyCheckpointOptionsKeepImageAndWorkPathApart) {
  containerd::linux::runc::CheckpointOptions o;
  o.set_exit(true);
  o.set_file_locks(true);
  o.set_image_path("/img");
  o.set_work_path("/work");
  auto a = pack(o, "containerd.linux.runc.CheckpointOptions");
  auto f = decode_checkpoint_options(&a, "/req", "c1", false);
  EXPECT_FALSE(f.leave_running);
  EXPECT_TRUE(f.file_locks);
  EXPECT_EQ(f.image_path, "/img");
  EXPECT_EQ(f.work_path, "/work");
}

TEST(TaskOptions, RuncV1CheckpointOptionsAndNoOptions) {
  containerd::runc::v1::CheckpointOptions o;
  o.set_open_tcp(true);
  auto a = pack(o, "types.containerd.io/containerd.runc.v1.CheckpointOptions");
  auto f = decode_checkpoint_options(&a, "/req", "c1", false);
  EXPECT_TRUE(f.leave_running);
  EXPECT_TRUE(f.open_tcp);
  EXPECT_EQ(f.image_path, "/req");
  auto none = decode_checkpoint_options(nullptr, "/req", "c1", false);
  EXPECT_TRUE(none.leave_running);
  EXPECT_EQ(none.image_path, "/req");
}

// Docker 26 sends no options to our runtime type, for `checkpoint create` and `--leave-running` alike:
// checkpoint.exit_without_options makes such a request stop the task; options that came still rule.
TEST(TaskOptions, ExitWithoutOptionsStopsOnlyRequestsWithoutOptions) {
  auto none = decode_checkpoint_options(nullptr, "/req", "c1", true);
  EXPECT_FALSE(none.leave_running);
  EXPECT_EQ(none.image_path, "/req");
  EXPECT_NE(describe_checkpoint_request(nullptr, none).find("no options (checkpoint.exit_without_options): exit"),
            std::string::npos);
  containerd::linux::runc::CheckpointOptions o;
  auto a = pack(o, "containerd.linux.runc.CheckpointOptions");
  auto f = decode_checkpoint_options(&a, "/req", "c1", true);
  EXPECT_TRUE(f.leave_running);
  EXPECT_EQ(describe_checkpoint_request(&a, f), "options containerd.linux.runc.CheckpointOptions: the task keeps running");
}

TEST(TaskOptions, CheckpointRefusesUnknownTypesAndMissingPath) {
  wkt::Any a;
  a.set_type_url("x.y.Other");
  try {
    decode_checkpoint_options(&a, "/req", "c1", false);
    FAIL() << "accepted an unknown type";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("x.y.Other"), std::string::npos);
  }
  EXPECT_THROW(decode_checkpoint_options(nullptr, "", "c1", false), Error);
}

TEST(TaskOptions, LegacyCreateOptionsCarryTheRestorePath) {
  containerd::linux::runc::CreateOptions o;
  o.set_shim_cgroup("/pods/p1");
  o.set_criu_image_path("/img");
  o.set_no_pivot_root(true);
  auto t = decode_task_options(pack(o, "containerd.linux.runc.CreateOptions"), "create");
  EXPECT_EQ(t.criu_image_path, "/img");
  EXPECT_TRUE(t.no_pivot_root);
}

TEST(TaskOptions, RuncV1OptionsOverrideTheRuntime) {
  containerd::runc::v1::Options o;
  o.set_binary_name("crun");
  o.set_root("/r");
  o.set_shim_cgroup("/s");
  auto t = decode_task_options(pack(o, "containerd.runc.v1.Options"), "create");
  oci::RuntimeConfig rc;
  apply_task_options(t, rc);
  EXPECT_EQ(rc.binary, "crun");
  EXPECT_EQ(rc.root, "/r");
}

TEST(TaskOptions, CriConfigPathAndGarbage) {
  runtimeoptions::v1::Options o;
  o.set_config_path("/etc/x.yaml");
  EXPECT_EQ(decode_task_options(pack(o, "runtimeoptions.v1.Options"), "create").config_path, "/etc/x.yaml");
  wkt::Any bad;
  bad.set_type_url("containerd.runc.v1.Options");
  bad.set_value(std::string("\xff\xff\xff", 3));
  EXPECT_THROW(decode_task_options(bad, "create"), Error);
  wkt::Any unknown;
  unknown.set_type_url("some.Other");
  EXPECT_TRUE(decode_task_options(unknown, "create").config_path.empty());
}

}  // namespace
}  // namespace nvproxy::shim
