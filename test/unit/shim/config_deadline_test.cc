// checkpoint.snapshot_timeout_ms and checkpoint.restore_timeout_ms: parsed, checked, and handed to
// the runtime driver, whose built-in defaults they must equal.
#include <gtest/gtest.h>

#include "common/error.h"
#include "shim/task/config.h"

using namespace nvproxy;
using namespace nvproxy::shim;

TEST(ConfigDeadline, DefaultsAgreeWithTheRuntimeDriver) {
  for (const ShimConfig& c : {parse_config("", "c.yaml"), ShimConfig{}}) {
    EXPECT_EQ(c.runtime.checkpoint_timeout, oci::RuntimeConfig::kDefaultCheckpointTimeout);
    EXPECT_EQ(c.runtime.restore_timeout, oci::RuntimeConfig::kDefaultRestoreTimeout);
    EXPECT_EQ(c.runtime.command_timeout, oci::RuntimeConfig::kDefaultCommandTimeout);
  }
  checkpoint::CheckpointConfig k;
  EXPECT_EQ(std::chrono::milliseconds(k.snapshot_timeout_ms), oci::RuntimeConfig::kDefaultCheckpointTimeout);
  EXPECT_EQ(std::chrono::milliseconds(k.restore_timeout_ms), oci::RuntimeConfig::kDefaultRestoreTimeout);
  EXPECT_EQ(oci::RuntimeConfig::kDefaultCheckpointTimeout, std::chrono::minutes(30));
}

TEST(ConfigDeadline, KeysReachTheRuntime) {
  auto c = parse_config("checkpoint: {snapshot_timeout_ms: 3000, restore_timeout_ms: 4000}\n", "c.yaml");
  EXPECT_EQ(c.checkpoint.snapshot_timeout_ms, 3000U);
  EXPECT_EQ(c.checkpoint.restore_timeout_ms, 4000U);
  EXPECT_EQ(c.runtime.checkpoint_timeout, std::chrono::milliseconds(3000));
  EXPECT_EQ(c.runtime.restore_timeout, std::chrono::milliseconds(4000));
}

TEST(ConfigDeadline, ZeroAndNonNumbersAreRefusedNamingTheKey) {
  for (const char* yaml : {"checkpoint: {snapshot_timeout_ms: 0}", "checkpoint: {restore_timeout_ms: soon}"}) {
    try {
      parse_config(yaml, "c.yaml");
      ADD_FAILURE() << yaml;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::InvalidArgument);
      std::string m = e.what();
      EXPECT_NE(m.find("c.yaml: checkpoint."), std::string::npos) << m;
      EXPECT_NE(m.find("_timeout_ms"), std::string::npos) << m;
    }
  }
}
