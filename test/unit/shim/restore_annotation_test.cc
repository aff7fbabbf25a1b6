// The restore-by-annotation policy: when an annotation may be followed, and what a checkpointed
// container must share with the new one.
#include "shim/task/restore_annotation.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace nvproxy::shim {
namespace {

using json = nlohmann::json;

const std::string kPinned = "reg.example:5000/ckpt/llm@sha256:" + std::string(64, 'b');

oci::Spec spec_with(const json& annotations) {
  json j{{"ociVersion", "1.0.2"},
         {"root", {{"path", "rootfs"}}},
         {"process", {{"args", {"sh"}}, {"cwd", "/"}}},
         {"annotations", annotations}};
  return oci::Spec::parse(j.dump(), "config.json");
}

checkpoint::CheckpointConfig allowing(std::vector<std::string> registries = {"reg.example:5000/ckpt"}) {
  checkpoint::CheckpointConfig c;
  c.annotation_restore = true;
  c.image_store = "/var/lib/store";
  c.annotation_registries = std::move(registries);
  return c;
}

std::string refusal(const oci::Spec& s, const checkpoint::CheckpointConfig& c) {
  try {
    restore_annotation(s, "id1", c);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    return e.what();
  }
  return "";
}

TEST(RestoreAnnotation, IsKeyedByTheContainersNameAsItsClientGaveIt) {
  auto cri = spec_with({{"io.kubernetes.cri.container-name", "llm"}, {"restore.nvproxy.io/llm", kPinned}});
  auto r = restore_annotation(cri, "3f2a", allowing());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->name, "llm");
  EXPECT_EQ(r->reference, kPinned);
  // A sidecar of the same pod sees the pod's annotation under another name: it starts fresh.
  EXPECT_FALSE(restore_annotation(
      spec_with({{"io.kubernetes.cri.container-name", "metrics"}, {"restore.nvproxy.io/llm", kPinned}}), "9c1d", allowing()));
  EXPECT_EQ(container_name_of(spec_with({{"nerdctl/name", "web"}}), "abc"), "web");
  EXPECT_EQ(container_name_of(spec_with(json::object()), "ctr-id"), "ctr-id");
}

TEST(RestoreAnnotation, IsRefusedUnlessTheNodeAllowsItAndTheImageIsAnAllowedRegistrysPinnedByDigest) {
  auto s = [](const std::string& ref) { return spec_with({{"restore.nvproxy.io/id1", ref}}); };
  auto off = allowing();
  off.annotation_restore = false;
  EXPECT_NE(refusal(s(kPinned), off).find("checkpoint.annotation_restore is off"), std::string::npos);
  auto no_store = allowing();
  no_store.image_store.clear();
  EXPECT_NE(refusal(s(kPinned), no_store).find("checkpoint.image_store"), std::string::npos);
  EXPECT_NE(refusal(s("/var/lib/containerd-shim-nvproxy/images/x"), allowing()).find("never a host path"), std::string::npos);
  EXPECT_NE(refusal(s("reg.example:5000/ckpt/llm:v1"), allowing()).find("pinned by digest"), std::string::npos);
  EXPECT_NE(refusal(s("ckpt/llm@sha256:" + std::string(64, 'b')), allowing()).find("pinned by digest"), std::string::npos);
  EXPECT_NE(refusal(s("reg.example:5000/ckptx/llm@sha256:" + std::string(64, 'b')), allowing())
                .find("not in checkpoint.annotation_registries"),
            std::string::npos);
  EXPECT_NE(refusal(s(kPinned), allowing({})).find("not in checkpoint.annotation_registries"), std::string::npos);
  EXPECT_TRUE(restore_annotation(s(kPinned), "id1", allowing({"reg.example:5000/ckpt/"})));
  EXPECT_TRUE(restore_annotation(s(kPinned), "id1", allowing({"reg.example:5000"})));
}

json with_caps(const std::vector<std::string>& caps) {
  return {{"process", {{"capabilities", {{"bounding", caps}, {"effective", caps}, {"permitted", caps}}}}}};
}

TEST(RestoreMismatches, CapabilitiesBeyondTheNewSpecsAreNamedOnce) {
  auto m = restore_mismatches(with_caps({"CAP_CHOWN", "CAP_KILL", "CAP_SYS_ADMIN"}), json::object(),
                              with_caps({"CAP_CHOWN", "CAP_KILL"}));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_NE(m[0].find("CAP_SYS_ADMIN (bounding, effective, permitted)"), std::string::npos) << m[0];
  EXPECT_TRUE(restore_mismatches(with_caps({"CAP_KILL"}), json::object(), with_caps({"CAP_CHOWN", "CAP_KILL"})).empty());
}

TEST(RestoreMismatches, AnotherUserNamespaceASharedPidNamespaceAMissingMountOrAnotherImageAreRefused) {
  json userns = {
      {"linux",
       {{"namespaces", {{{"type", "user"}}}}, {"uidMappings", {{{"containerID", 0}, {"hostID", 100000}, {"size", 65536}}}}}}};
  json other_map = userns;
  other_map["linux"]["uidMappings"][0]["hostID"] = 200000;
  EXPECT_EQ(restore_mismatches(userns, json::object(), json::object()).size(), 1u);
  EXPECT_EQ(restore_mismatches(userns, json::object(), other_map).size(), 1u);
  EXPECT_TRUE(restore_mismatches(userns, json::object(), userns).empty());

  json shared_pid = {{"linux", {{"namespaces", {{{"type", "pid"}, {"path", "/proc/42/ns/pid"}}}}}}};
  auto m = restore_mismatches(json::object(), json::object(), shared_pid);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_NE(m[0].find("/proc/42/ns/pid"), std::string::npos);

  json mounts_a = {{"mounts", {{{"destination", "/etc/hosts"}}, {{"destination", "/data"}}}}};
  json mounts_b = {{"mounts", {{{"destination", "/etc/hosts"}}, {{"destination", "/dev/nvidia0"}}}}};
  m = restore_mismatches(mounts_a, json::object(), mounts_b);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_NE(m[0].find("mounts at /data "), std::string::npos) << m[0];
  EXPECT_TRUE(restore_mismatches(mounts_b, json::object(), mounts_a).size() == 1u);
  EXPECT_TRUE(restore_mismatches(json::object(), json::object(), mounts_a).empty()) << "more mounts than the image's: fine";

  json image_b = {{"annotations", {{"io.kubernetes.cri.image-name", "reg/app:2"}}}};
  EXPECT_EQ(restore_mismatches(json::object(), {{"rootfsImageName", "reg/app:1"}}, image_b).size(), 1u);
  EXPECT_TRUE(restore_mismatches(json::object(), {{"rootfsImageName", "reg/app:2"}}, image_b).empty());
}

}  // namespace
}  // namespace nvproxy::shim
