// A gVisor pod's /dev/shm as a tmpfs inside its sandbox (shim/task/runsc_pod_shm.h): the sandbox
// container's spec carries runsc's mount hint, every container mounts /dev/shm as tmpfs from the
// pod's directory, and what is not a CRI pod's /dev/shm bind is left as it is.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "shim/task/runsc_pod_shm.h"

namespace nvproxy::shim {
namespace {

using json = nlohmann::json;

const std::string kPodShm = "/run/containerd/io.containerd.grpc.v1.cri/sandboxes/sb1/shm";
const std::string kHint = "dev.gvisor.spec.mount.gvisorinternaldevshm";

json shm_bind(const std::string& source, const json& options) {
  return {{"destination", "/dev/shm"}, {"type", "bind"}, {"source", source}, {"options", options}};
}

json spec_of(const std::string& type, const std::vector<json>& mounts) {
  json ann = json::object();
  if (!type.empty()) ann["io.kubernetes.cri.container-type"] = type;
  ann["io.kubernetes.cri.sandbox-id"] = "sb1";
  return {{"ociVersion", "1.0.2"}, {"annotations", ann}, {"mounts", json(mounts)}};
}

TEST(RunscPodShm, TheSandboxGetsThePodsTmpfsHint) {
  json spec = spec_of("sandbox", {{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
                                  shm_bind(kPodShm, {"rbind", "ro", "nosuid", "nodev", "noexec"})});
  auto said = share_pod_shm_in_sandbox(spec);
  ASSERT_TRUE(said);
  EXPECT_NE(said->find(kPodShm), std::string::npos) << *said;
  EXPECT_EQ(spec["annotations"][kHint + ".source"], kPodShm);
  EXPECT_EQ(spec["annotations"][kHint + ".type"], "tmpfs");
  EXPECT_EQ(spec["annotations"][kHint + ".share"], "pod");
  EXPECT_EQ(spec["annotations"][kHint + ".options"], "rw");
  const json& m = spec["mounts"][1];
  EXPECT_EQ(m["type"], "tmpfs");
  EXPECT_EQ(m["source"], kPodShm);  // runsc finds the hint by the mount's source
  EXPECT_EQ(m["options"], json({"ro", "nosuid", "nodev", "noexec"}));
  EXPECT_EQ(spec["mounts"][0]["type"], "proc");
}

TEST(RunscPodShm, AContainerMountsThePodsTmpfsWithoutAHintOfItsOwn) {
  json spec = spec_of("container", {shm_bind(kPodShm, {"rbind", "rprivate", "rw"})});
  spec["mounts"][0]["type"] = "none";  // a bind said by its options only
  ASSERT_TRUE(share_pod_shm_in_sandbox(spec));
  EXPECT_EQ(spec["mounts"][0]["type"], "tmpfs");
  EXPECT_EQ(spec["mounts"][0]["options"], json({"rprivate", "rw"}));
  for (const auto& [key, value] : spec["annotations"].items()) EXPECT_FALSE(key.starts_with("dev.gvisor.")) << key;
}

TEST(RunscPodShm, TheLastMountAtDevShmIsTheOneChanged) {
  json spec =
      spec_of("container", {{{"destination", "/dev/shm"}, {"type", "tmpfs"}, {"source", "shm"}}, shm_bind(kPodShm, {"rbind"})});
  ASSERT_TRUE(share_pod_shm_in_sandbox(spec));
  EXPECT_EQ(spec["mounts"][1]["type"], "tmpfs");
  EXPECT_EQ(spec["mounts"][1]["source"], kPodShm);
}

TEST(RunscPodShm, WhatIsNotAPodsShmBindIsLeftAsItIs) {
  const json cases[] = {
      spec_of("", {shm_bind(kPodShm, {"rbind"})}),              // ctr: a container of its own
      spec_of("sandbox", {shm_bind("/dev/shm", {"rbind"})}),    // host IPC: the host's /dev/shm
      spec_of("sandbox", {shm_bind("/dev//shm/", {"rbind"})}),  // the same, spelled otherwise
      spec_of("container", {}),                                 // no /dev/shm mount
      spec_of("container", {{{"destination", "/dev/shm"}, {"type", "tmpfs"}, {"source", "shm"}}}),  // its own tmpfs
      spec_of("sandbox", {shm_bind("relative/shm", {"rbind"})}),
      json::array(),
  };
  for (const json& c : cases) {
    json spec = c;
    EXPECT_FALSE(share_pod_shm_in_sandbox(spec)) << c.dump();
    EXPECT_EQ(spec, c);
  }
}

TEST(RunscPodShm, AHintOfTheSpecsOwnForTheDirectoryWins) {
  json spec = spec_of("sandbox", {shm_bind(kPodShm, {"rbind"})});
  spec["annotations"]["dev.gvisor.spec.mount.mine.source"] = kPodShm;
  spec["annotations"]["dev.gvisor.spec.mount.mine.type"] = "bind";
  spec["annotations"]["dev.gvisor.spec.mount.mine.share"] = "shared";
  const json before = spec;
  EXPECT_FALSE(share_pod_shm_in_sandbox(spec));
  EXPECT_EQ(spec, before);
}

}  // namespace
}  // namespace nvproxy::shim
