#include "shim/task/stats.h"

#include <gtest/gtest.h>

#include "proto/cgroups_v1.pb.h"
#include "proto/cgroups_v2.pb.h"

using namespace nvproxy::shim;

static const char* kRuncStats = R"({
  "cpu": {"usage": {"total": 5000000, "percpu": [3000000, 2000000], "kernel": 1000000, "user": 4000000},
          "throttling": {"periods": 7}},
  "memory": {"usage": {"limit": 67108864, "usage": 1048576, "max": 2097152, "failcnt": 1}, "cache": 4096,
             "raw": {"rss": 8192, "anon": 12288, "file": 4096}},
  "pids": {"current": 3, "limit": 100}
})";

TEST(Stats, V1MetricsFromRuntimeStats) {
  auto any = metrics_from_runtime_stats(nlohmann::json::parse(kRuncStats), false);
  EXPECT_EQ(any.type_url(), "io.containerd.cgroups.v1.Metrics");
  io::containerd::cgroups::v1::Metrics m;
  ASSERT_TRUE(m.ParseFromString(any.value()));
  EXPECT_EQ(m.pids().current(), 3U);
  EXPECT_EQ(m.pids().limit(), 100U);
  EXPECT_EQ(m.cpu().usage().total(), 5000000U);
  EXPECT_EQ(m.cpu().usage().per_cpu_size(), 2);
  EXPECT_EQ(m.cpu().throttling().periods(), 7U);
  EXPECT_EQ(m.memory().usage().usage(), 1048576U);
  EXPECT_EQ(m.memory().usage().limit(), 67108864U);
  EXPECT_EQ(m.memory().cache(), 4096U);
  EXPECT_EQ(m.memory().rss(), 8192U);
}

TEST(Stats, V2MetricsFromRuntimeStats) {
  auto any = metrics_from_runtime_stats(nlohmann::json::parse(kRuncStats), true);
  EXPECT_EQ(any.type_url(), "io.containerd.cgroups.v2.Metrics");
  io::containerd::cgroups::v2::Metrics m;
  ASSERT_TRUE(m.ParseFromString(any.value()));
  EXPECT_EQ(m.cpu().usage_usec(), 5000U);
  EXPECT_EQ(m.memory().usage(), 1048576U);
  EXPECT_EQ(m.memory().usage_limit(), 67108864U);
  EXPECT_EQ(m.memory().anon(), 12288U);
  EXPECT_EQ(m.pids().current(), 3U);
}

TEST(Stats, MissingFieldsAreZeroNotErrors) {
  auto any = metrics_from_runtime_stats(nlohmann::json::object(), false);
  io::containerd::cgroups::v1::Metrics m;
  ASSERT_TRUE(m.ParseFromString(any.value()));
  EXPECT_EQ(m.pids().current(), 0U);
}
