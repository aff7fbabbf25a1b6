// A gVisor pod's record in its image: what it names, how it travels in nvproxy-cuda.json, and the
// matching that refuses a pod that is not the image's before runsc runs.
#include "checkpoint/image/pod_record.h"

#include <gtest/gtest.h>

#include "checkpoint/image/image_record.h"
#include "common/error.h"

namespace nvproxy::checkpoint {
namespace {

PodRecord two_containers() {
  return {.sandbox_id = std::string(64, 'a'),
          .sandbox_name = "llm",
          .containers = {{.name = "", .id = std::string(64, 'a'), .sandbox = true},
                         {.name = "counter", .id = "c2", .image = "docker.io/library/busybox:x", .gpus = 0},
                         {.name = "cuda", .id = "c1", .image = "docker.io/library/busybox:x", .gpus = 1}}};
}

TEST(PodRecord, TravelsInTheImagesRecordAndReadsBackTheSame) {
  ImageRecord rec{.container = "c1", .sandbox = "runsc", .runtime = "runsc"};
  rec.pod = two_containers();
  const ImageRecord back = image_record_from_json(to_json(rec));
  ASSERT_TRUE(back.pod);
  EXPECT_EQ(*back.pod, *rec.pod);
  EXPECT_TRUE(to_json(rec)["pod"]["containers"][0]["sandbox"].get<bool>());
  // One container's image has none, and says nothing of a pod.
  EXPECT_FALSE(to_json(ImageRecord{.container = "x"}).contains("pod"));
  EXPECT_FALSE(image_record_from_json(to_json(ImageRecord{.container = "x"})).pod);
}

TEST(PodRecord, NamesItsContainersButNotTheSandboxContainer) {
  const PodRecord pod = two_containers();
  EXPECT_EQ(pod.names(), (std::vector<std::string>{"counter", "cuda"}));
  ASSERT_NE(pod.container("cuda"), nullptr);
  EXPECT_EQ(pod.container("cuda")->id, "c1");
  EXPECT_EQ(pod.container(""), nullptr);  // the sandbox container is not one of them
  ASSERT_NE(pod.by_id("c2"), nullptr);
  EXPECT_EQ(pod.by_id("c2")->name, "counter");
}

TEST(PodRecord, APodOfOtherContainersIsRefusedNamingWhatIsMissingAndWhatIsExtra) {
  const PodRecord pod = two_containers();
  EXPECT_TRUE(pod_name_mismatches(pod, {"counter", "cuda"}).empty());
  auto missing = pod_name_mismatches(pod, {"cuda"});
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].find("\"counter\" that this pod does not name"), std::string::npos) << missing[0];
  auto extra = pod_name_mismatches(pod, {"counter", "cuda", "metrics"});
  ASSERT_EQ(extra.size(), 1u);
  EXPECT_NE(extra[0].find("\"metrics\" that the image does not hold"), std::string::npos) << extra[0];
  EXPECT_NE(extra[0].find("cannot start fresh inside a restored sandbox"), std::string::npos);
  EXPECT_EQ(pod_name_mismatches(pod, {"metrics"}).size(), 2u);
}

TEST(PodRecord, AContainerIsRestoredOnlyUnderItsNameWithAsManyGpus) {
  const PodRecord pod = two_containers();
  EXPECT_FALSE(pod_member_mismatch(pod, "cuda", 1));
  EXPECT_FALSE(pod_member_mismatch(pod, "counter", 0));
  auto gpus = pod_member_mismatch(pod, "cuda", 2);
  ASSERT_TRUE(gpus);
  EXPECT_NE(gpus->find("checkpointed with 1 GPU and asks for 2 GPUs"), std::string::npos) << *gpus;
  auto all = pod_member_mismatch(pod, "counter", kAllGpus);
  ASSERT_TRUE(all);
  EXPECT_NE(all->find("with no GPU and asks for every GPU"), std::string::npos) << *all;
  auto stranger = pod_member_mismatch(pod, "metrics", 0);
  ASSERT_TRUE(stranger);
  EXPECT_NE(stranger->find("no container named \"metrics\" (it holds: counter, cuda)"), std::string::npos) << *stranger;
}

TEST(PodRecord, AMalformedPodIsRefusedNamingTheField) {
  auto bad = [](const nlohmann::json& pod) {
    nlohmann::json j = to_json(ImageRecord{.container = "x"});
    j["pod"] = pod;
    try {
      image_record_from_json(j);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::InvalidArgument);
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(bad("pod").find("\"pod\" is not an object"), std::string::npos);
  EXPECT_NE(bad({{"sandbox_id", "s"}}).find("\"pod.containers\" is not a list"), std::string::npos);
  EXPECT_NE(bad({{"containers", {{{"id", "c"}}}}}).find("has no name"), std::string::npos);
  EXPECT_NE(bad({{"containers", {{{"name", "c"}, {"gpus", "two"}}}}}).find("malformed field of \"pod\""), std::string::npos);
}

}  // namespace
}  // namespace nvproxy::checkpoint
