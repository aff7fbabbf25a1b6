// The task events as containerd reads them: each function's topic and fields.
#include "shim/task/task_events.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/events.pb.h"
#include "shim/kit/timestamp.h"

namespace nvproxy::shim {
namespace {

namespace events = containerd::events;

class RecordingSink final : public EventSink {
 public:
  void publish(const std::string& topic, const google::protobuf::MessageLite& ev) override {
    topics.push_back(topic);
    bytes.push_back(ev.SerializeAsString());
  }
  template <typename T>
  T last() const {
    T m;
    EXPECT_TRUE(m.ParseFromString(bytes.back()));
    return m;
  }
  std::vector<std::string> topics;
  std::vector<std::string> bytes;
};

class TaskEventsTest : public ::testing::Test {
 protected:
  RecordingSink sink_;
  TaskEvents ev_{sink_, "c1"};
};

TEST_F(TaskEventsTest, CreateCarriesTheBundleRootfsIoCheckpointAndPid) {
  ev_.created("/b/c1", {MountSpec{"overlay", "overlay", "/r", {"lowerdir=/l", "upperdir=/u"}}},
              StdioPaths{"/in", "/out", "/err", true}, "/img", 4000);
  ASSERT_EQ(sink_.topics, std::vector<std::string>{"/tasks/create"});
  auto m = sink_.last<events::TaskCreate>();
  EXPECT_EQ(m.container_id(), "c1");
  EXPECT_EQ(m.bundle(), "/b/c1");
  ASSERT_EQ(m.rootfs_size(), 1);
  EXPECT_EQ(m.rootfs(0).type(), "overlay");
  EXPECT_EQ(m.rootfs(0).source(), "overlay");
  EXPECT_EQ(m.rootfs(0).target(), "/r");
  ASSERT_EQ(m.rootfs(0).options_size(), 2);
  EXPECT_EQ(m.rootfs(0).options(1), "upperdir=/u");
  EXPECT_EQ(m.io().stdin(), "/in");
  EXPECT_EQ(m.io().stdout(), "/out");
  EXPECT_EQ(m.io().stderr(), "/err");
  EXPECT_TRUE(m.io().terminal());
  EXPECT_EQ(m.checkpoint(), "/img");
  EXPECT_EQ(m.pid(), 4000U);
}

TEST_F(TaskEventsTest, StartAndExecEventsNameTheirProcess) {
  ev_.started(4000);
  auto s = sink_.last<events::TaskStart>();
  EXPECT_EQ(s.container_id(), "c1");
  EXPECT_EQ(s.pid(), 4000U);
  ev_.exec_added("e1");
  auto a = sink_.last<events::TaskExecAdded>();
  EXPECT_EQ(a.container_id(), "c1");
  EXPECT_EQ(a.exec_id(), "e1");
  ev_.exec_started("e1", 4001);
  auto es = sink_.last<events::TaskExecStarted>();
  EXPECT_EQ(es.exec_id(), "e1");
  EXPECT_EQ(es.pid(), 4001U);
  EXPECT_EQ(sink_.topics, (std::vector<std::string>{"/tasks/start", "/tasks/exec-added", "/tasks/exec-started"}));
}

TEST_F(TaskEventsTest, ExitAndDeleteCarryTheStatusAndTime) {
  auto at = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  ev_.exited("e1", 4001, ExitInfo{3, at});
  auto x = sink_.last<events::TaskExit>();
  EXPECT_EQ(x.container_id(), "c1");
  EXPECT_EQ(x.id(), "e1");
  EXPECT_EQ(x.pid(), 4001U);
  EXPECT_EQ(x.exit_status(), 3U);
  EXPECT_EQ(x.exited_at().seconds(), 1700000000);
  // An exit without a time (an exec whose start failed) reads as Go's zero time.
  ev_.deleted(4000, ExitInfo{137, {}});
  auto d = sink_.last<events::TaskDelete>();
  EXPECT_EQ(d.container_id(), "c1");
  EXPECT_EQ(d.pid(), 4000U);
  EXPECT_EQ(d.exit_status(), 137U);
  EXPECT_EQ(d.exited_at().seconds(), kGoZeroTimeSeconds);
  EXPECT_EQ(sink_.topics, (std::vector<std::string>{"/tasks/exit", "/tasks/delete"}));
}

TEST_F(TaskEventsTest, ContainerWideEventsNameTheContainer) {
  ev_.paused();
  EXPECT_EQ(sink_.last<events::TaskPaused>().container_id(), "c1");
  ev_.resumed();
  EXPECT_EQ(sink_.last<events::TaskResumed>().container_id(), "c1");
  ev_.checkpointed("/img");
  auto c = sink_.last<events::TaskCheckpointed>();
  EXPECT_EQ(c.container_id(), "c1");
  EXPECT_EQ(c.checkpoint(), "/img");
  ev_.oom();
  EXPECT_EQ(sink_.last<events::TaskOOM>().container_id(), "c1");
  EXPECT_EQ(sink_.topics, (std::vector<std::string>{"/tasks/paused", "/tasks/resumed", "/tasks/checkpointed", "/tasks/oom"}));
}

}  // namespace
}  // namespace nvproxy::shim
