// A gVisor pod restored whole: the annotations its sandbox's create reads (one image for every
// container, the restore-by-annotation policy), the pod a checkpoint records from containerd's
// bundles, and the wait for the pod's last container before what needs the sandbox running.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "common/process.h"
#include "oci/runtime.h"
#include "shim/task/pod_members.h"
#include "shim/task/pod_restore_annotation.h"
#include "shim/task/pod_restore_progress.h"

namespace nvproxy::shim {
namespace {

using json = nlohmann::json;

const std::string kPod = "reg.example:5000/ckpt/pod@sha256:" + std::string(64, 'c');

json spec_json(const json& annotations, const json& env = json::array()) {
  return {{"ociVersion", "1.0.2"},
          {"root", {{"path", "rootfs"}}},
          {"process", {{"args", {"sh"}}, {"cwd", "/"}, {"env", env}}},
          {"annotations", annotations}};
}

oci::Spec spec_with(const json& annotations) {
  return oci::Spec::parse(spec_json(annotations).dump(), "config.json");
}

checkpoint::CheckpointConfig allowing() {
  checkpoint::CheckpointConfig c;
  c.annotation_restore = true;
  c.image_store = "/var/lib/store";
  c.annotation_registries = {"reg.example:5000/ckpt"};
  return c;
}

std::string refusal(const json& annotations, const checkpoint::CheckpointConfig& cfg) {
  try {
    pod_restore_annotation(spec_with(annotations), "sb1", cfg);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    return e.what();
  }
  return "";
}

TEST(PodRestoreAnnotation, TheSandboxReadsEveryContainersAnnotationOfOneImage) {
  json a{{"io.kubernetes.cri.container-type", "sandbox"},
         {"restore.nvproxy.io/cuda", kPod},
         {"restore.nvproxy.io/counter", kPod},
         {"io.kubernetes.cri.sandbox-name", "llm"}};
  EXPECT_TRUE(is_cri_sandbox(spec_with(a)));
  auto ask = pod_restore_annotation(spec_with(a), "sb1", allowing());
  ASSERT_TRUE(ask);
  EXPECT_EQ(ask->reference, kPod);
  EXPECT_EQ(ask->names, (std::vector<std::string>{"counter", "cuda"}));
  EXPECT_FALSE(pod_restore_annotation(spec_with({{"io.kubernetes.cri.container-type", "sandbox"}}), "sb1", allowing()));
  EXPECT_FALSE(is_cri_sandbox(spec_with({{"io.kubernetes.cri.container-type", "container"}})));
}

TEST(PodRestoreAnnotation, IsRefusedForTwoImagesOrWhatTheRestorePolicyRefuses) {
  const std::string other = "reg.example:5000/ckpt/pod@sha256:" + std::string(64, 'd');
  EXPECT_NE(refusal({{"restore.nvproxy.io/cuda", kPod}, {"restore.nvproxy.io/counter", other}}, allowing())
                .find("name different images"),
            std::string::npos);
  auto off = allowing();
  off.annotation_restore = false;
  auto why = refusal({{"restore.nvproxy.io/cuda", kPod}}, off);
  EXPECT_NE(why.find("create of pod sandbox \"sb1\""), std::string::npos) << why;
  EXPECT_NE(why.find("checkpoint.annotation_restore is off"), std::string::npos) << why;
  EXPECT_NE(refusal({{"restore.nvproxy.io/cuda", "reg.example:5000/ckpt/pod:v1"}}, allowing()).find("pinned by digest"),
            std::string::npos);
  EXPECT_NE(refusal({{"restore.nvproxy.io/cuda", "reg.example:5000/other/pod@sha256:" + std::string(64, 'c')}}, allowing())
                .find("not in checkpoint.annotation_registries"),
            std::string::npos);
}

TEST(PodRestoreProgress, WhatWaitsRunsOnceWithThePodsLastContainer) {
  PodRestoreProgress p;
  const std::vector<std::string> names{"counter", "cuda"};
  int ran = 0;
  EXPECT_FALSE(p.waiting("sb"));
  p.begin("sb");
  EXPECT_TRUE(p.waiting("sb"));
  EXPECT_TRUE(p.restored("sb", names, "", {}).empty());  // the sandbox container first
  EXPECT_TRUE(p.restored("sb", names, "cuda", [&] { ++ran; }).empty());
  EXPECT_EQ(p.count("sb"), 2u);
  auto now = p.restored("sb", names, "counter", {});
  ASSERT_EQ(now.size(), 1u);
  now.front()();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(p.count("sb"), 0u);  // done: forgotten
  EXPECT_FALSE(p.waiting("sb"));
  // A pod that failed drops what waited; another pod is its own.
  EXPECT_TRUE(p.restored("sb2", names, "cuda", [&] { ++ran; }).empty());
  p.forget("sb2");
  EXPECT_TRUE(p.restored("sb2", names, "counter", {}).empty());
  EXPECT_EQ(ran, 1);
}

class PodMembers : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("nvproxy-pod-members-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path bundle(const std::string& id, const json& annotations, const json& env = json::array()) {
    auto b = dir_ / id;
    std::filesystem::create_directories(b);
    std::ofstream(b / "config.json") << spec_json(annotations, env).dump();
    return b;
  }
  std::filesystem::path dir_;
};

TEST_F(PodMembers, ACheckpointRecordsEveryContainerOfThePodByNameWithItsGpus) {
  const std::string sb(64, 'e');
  bundle(sb, {{"io.kubernetes.cri.container-type", "sandbox"},
              {"io.kubernetes.cri.sandbox-id", sb},
              {"io.kubernetes.cri.sandbox-name", "llm"}});
  auto cuda = bundle("k1",
                     {{"io.kubernetes.cri.container-type", "container"},
                      {"io.kubernetes.cri.sandbox-id", sb},
                      {"io.kubernetes.cri.container-name", "cuda"},
                      {"io.kubernetes.cri.image-name", "busybox:x"}},
                     {"NVIDIA_VISIBLE_DEVICES=0"});
  bundle("w1", {{"io.kubernetes.cri.container-type", "container"},
                {"io.kubernetes.cri.sandbox-id", sb},
                {"io.kubernetes.cri.container-name", "counter"}});
  bundle("other", {{"io.kubernetes.cri.container-type", "container"},
                   {"io.kubernetes.cri.sandbox-id", std::string(64, 'f')},
                   {"io.kubernetes.cri.container-name", "elsewhere"}});
  auto pod = pod_of(cuda);
  ASSERT_TRUE(pod);
  EXPECT_EQ(pod->sandbox_id, sb);
  EXPECT_EQ(pod->sandbox_name, "llm");
  ASSERT_EQ(pod->containers.size(), 3u);
  EXPECT_TRUE(pod->containers[0].sandbox);
  EXPECT_EQ(pod->names(), (std::vector<std::string>{"counter", "cuda"}));
  EXPECT_EQ(pod->container("cuda")->gpus, 1);
  EXPECT_EQ(pod->container("cuda")->image, "busybox:x");
  EXPECT_EQ(pod->container("counter")->gpus, 0);
  // ctr's container is no pod's.
  EXPECT_FALSE(pod_of(bundle("ctr1", json::object())));
}

TEST_F(PodMembers, AContainerJoiningThePodsPidNamespaceIsTold) {
  auto joined = dir_ / "joined";
  std::filesystem::create_directories(joined);
  json spec = spec_json(json::object());
  spec["linux"] = {{"namespaces", {{{"type", "pid"}, {"path", "/proc/42/ns/pid"}}, {{"type", "mount"}}}}};
  std::ofstream(joined / "config.json") << spec.dump();
  EXPECT_TRUE(joins_pod_pid_namespace(joined));
  auto own = dir_ / "own";
  std::filesystem::create_directories(own);
  spec["linux"] = {{"namespaces", {{{"type", "pid"}}, {{"type", "ipc"}, {"path", "/proc/42/ns/ipc"}}}}};
  std::ofstream(own / "config.json") << spec.dump();
  EXPECT_FALSE(joins_pod_pid_namespace(own));
  EXPECT_FALSE(joins_pod_pid_namespace(dir_ / "missing"));
}

// The pod's runtime as leave_out_ended asks it: each container's status, and the deletes.
class EndedRuntime final : public oci::Runtime {
 public:
  EndedRuntime(ProcessRunner& r, Logger& log) : oci::Runtime({}, r, log, "") {}
  std::map<std::string, std::string> status;
  std::vector<std::string> removed;
  bool fail_remove = false;
  oci::RuntimeState state(const std::string& id) override {
    if (!status.contains(id)) throw Error(Code::NotFound, "container \"" + id + "\" does not exist");
    return {.status = status.at(id)};
  }
  void remove(const std::string& id, bool) override {
    if (fail_remove) throw Error(Code::Unknown, "runsc delete failed");
    removed.push_back(id);
  }
};

class PodEnded : public ::testing::Test {
 protected:
  DirectWaiter waiter;
  ProcessRunner runner{waiter};
  Logger log{-1};
  EndedRuntime rt{runner, log};
  checkpoint::PodRecord pod{.sandbox_id = "sb",
                            .containers = {{.id = "sb", .sandbox = true},
                                           {.name = "cuda", .id = "k1", .gpus = 1},
                                           {.name = "init", .id = "i1"},
                                           {.name = "counter", .id = "w1"}}};
};

TEST_F(PodEnded, AnEndedContainerIsDeletedFromTheSandboxAndLeftOutOfTheImage) {
  rt.status = {{"sb", "running"}, {"k1", "running"}, {"i1", "stopped"}, {"w1", "running"}};
  EXPECT_EQ(leave_out_ended(pod, rt, "w1", log, "checkpoint of \"w1\""), (std::vector<std::string>{"init"}));
  EXPECT_EQ(rt.removed, (std::vector<std::string>{"i1"}));
  EXPECT_EQ(pod.names(), (std::vector<std::string>{"counter", "cuda"}));
  EXPECT_TRUE(pod.containers[0].sandbox);
}

TEST_F(PodEnded, NothingEndedLeavesThePodAsItIs) {
  rt.status = {{"sb", "running"}, {"k1", "running"}, {"w1", "running"}};  // i1 unknown to the runtime: left as it is
  EXPECT_TRUE(leave_out_ended(pod, rt, "w1", log, "checkpoint").empty());
  EXPECT_TRUE(rt.removed.empty());
  EXPECT_EQ(pod.names(), (std::vector<std::string>{"counter", "cuda", "init"}));
}

TEST_F(PodEnded, AnEndedContainerThatCannotBeDeletedOrWasNamedRefusesTheCheckpoint) {
  rt.status = {{"sb", "running"}, {"k1", "running"}, {"i1", "stopped"}, {"w1", "running"}};
  rt.fail_remove = true;
  try {
    leave_out_ended(pod, rt, "w1", log, "checkpoint of \"w1\"");
    FAIL() << "not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    EXPECT_NE(std::string(e.what()).find("container \"init\" (i1) has ended"), std::string::npos) << e.what();
  }
  rt.fail_remove = false;
  EXPECT_THROW(leave_out_ended(pod, rt, "i1", log, "checkpoint of \"i1\""), Error);
  EXPECT_TRUE(rt.removed.empty());
}

}  // namespace
}  // namespace nvproxy::shim
