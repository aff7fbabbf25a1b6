#include "oci/spec.h"

#include <gtest/gtest.h>

#include "common/error.h"

using namespace nvproxy;
using namespace nvproxy::oci;

namespace {
const char* kGood = R"({
  "ociVersion": "1.0.2",
  "process": {"args": ["sh"], "cwd": "/", "env": ["A=1", "NVIDIA_VISIBLE_DEVICES=0", "A=2"]},
  "root": {"path": "rootfs"},
  "annotations": {"io.kubernetes.cri.sandbox-id": "sb1"},
  "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
  "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}], "cgroupsPath": "/default/x"},
  "futureField": {"kept": true}
})";

std::string error_of(const std::string& text) {
  try {
    Spec::parse(text, "config.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Spec, ReadsFields) {
  Spec s = Spec::parse(kGood, "config.json");
  EXPECT_EQ(s.root_path(), "rootfs");
  EXPECT_EQ(s.env("A"), "2");
  EXPECT_EQ(s.env("NVIDIA_VISIBLE_DEVICES"), "0");
  EXPECT_FALSE(s.env("B").has_value());
  EXPECT_EQ(s.annotation("io.kubernetes.cri.sandbox-id"), "sb1");
  EXPECT_TRUE(s.own_pid_namespace());
  EXPECT_EQ(s.cgroups_path(), "/default/x");
  EXPECT_FALSE(s.terminal());
}

TEST(Spec, UnknownFieldsSurviveRoundTrip) {
  Spec s = Spec::parse(kGood, "config.json");
  auto dir = std::filesystem::temp_directory_path() / ("nvproxy-spec-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  s.json()["process"]["env"].push_back("B=3");
  s.save(dir);
  Spec t = Spec::load(dir);
  EXPECT_TRUE(t.json()["futureField"]["kept"].get<bool>());
  EXPECT_EQ(t.env("B"), "3");
  std::filesystem::remove_all(dir);
}

TEST(Spec, JoinedPidNamespaceIsNotOwn) {
  auto j = nlohmann::json::parse(kGood);
  j["linux"]["namespaces"][0]["path"] = "/proc/1/ns/pid";
  EXPECT_FALSE(Spec::parse(j.dump(), "c").own_pid_namespace());
}

TEST(Spec, ErrorsNameOriginAndField) {
  EXPECT_NE(error_of("{not json").find("config.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"root":{"path":"r"}})").find("config.json: ociVersion"), std::string::npos);
  EXPECT_NE(error_of(R"({"ociVersion":"1","root":{}})").find("root.path"), std::string::npos);
  EXPECT_NE(error_of(R"({"ociVersion":"1","root":{"path":"r"},"process":{"args":[]}})").find("process.args"), std::string::npos);
  EXPECT_NE(error_of(R"({"ociVersion":"1","root":{"path":"r"},"process":{"args":["a"],"cwd":"rel"}})").find("process.cwd"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"ociVersion":"1","root":{"path":"r"},"mounts":[{"type":"bind"}]})").find("mounts[0].destination"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"ociVersion":"1","root":{"path":"r"},"linux":{"namespaces":[{"type":"bogus"}]}})")
                .find("linux.namespaces[0].type: unknown namespace type \"bogus\""),
            std::string::npos);
  EXPECT_NE(error_of(R"({"ociVersion":"1","root":{"path":"r"},"annotations":{"a":1}})").find("annotations.a"), std::string::npos);
  EXPECT_NE(error_of("[]").find("must be a JSON object"), std::string::npos);
}

TEST(Spec, ProcessValidation) {
  EXPECT_NO_THROW(validate_process(nlohmann::json::parse(R"({"args":["cat"],"cwd":"/"})"), "exec e1"));
  EXPECT_THROW(validate_process(nlohmann::json::parse(R"({"args":"cat"})"), "exec e1"), Error);
  EXPECT_THROW(validate_process(nlohmann::json::parse(R"({"args":["cat", 1]})"), "exec e1"), Error);
}
