#include "shim/node/docker_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace nvproxy::node {
namespace {

using Json = nlohmann::ordered_json;

TEST(DockerConfig, EmptyFileGetsBothRuntimes) {
  JsonEdit e = edit_docker_config("", "daemon.json", {});
  ASSERT_TRUE(e.changed);
  const Json j = Json::parse(e.after);
  EXPECT_EQ(j["runtimes"]["nvproxy"]["runtimeType"], "io.containerd.nvproxy.v1");
  EXPECT_FALSE(j["runtimes"]["nvproxy"].contains("options"));
  EXPECT_EQ(j["runtimes"]["nvproxy-exit"]["runtimeType"], "io.containerd.nvproxy.v1");
  EXPECT_EQ(j["runtimes"]["nvproxy-exit"]["options"]["ConfigPath"], "/etc/containerd-shim-nvproxy/exit.yaml");
  EXPECT_FALSE(e.notes.empty()) << "says that checkpoints need experimental";
}

TEST(DockerConfig, KeepsEveryOtherKeyInItsOrderAndIsIdempotent) {
  const std::string text = R"({"log-driver": "journald", "data-root": "/srv/docker",
    "runtimes": {"runsc": {"path": "/usr/bin/runsc"}}, "experimental": true})";
  DockerEntry entry{.shim_config = "/etc/a.yaml", .set_as_default = true};
  JsonEdit e = edit_docker_config(text, "daemon.json", entry);
  ASSERT_TRUE(e.changed);
  const Json j = Json::parse(e.after);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"log-driver", "data-root", "runtimes", "experimental", "default-runtime"}));
  EXPECT_EQ(j["runtimes"]["runsc"]["path"], "/usr/bin/runsc");
  EXPECT_EQ(j["runtimes"]["nvproxy"]["options"]["ConfigPath"], "/etc/a.yaml");
  EXPECT_EQ(j["default-runtime"], "nvproxy");
  EXPECT_TRUE(e.notes.empty());
  JsonEdit again = edit_docker_config(e.after, "daemon.json", entry);
  EXPECT_FALSE(again.changed);
  EXPECT_EQ(again.after, e.after);
}

TEST(DockerConfig, NoExitRuntimeWhenNotWanted) {
  DockerEntry entry;
  entry.exit_config.clear();
  const Json j = Json::parse(edit_docker_config("{}", "d.json", entry).after);
  EXPECT_FALSE(j["runtimes"].contains("nvproxy-exit"));
}

TEST(DockerConfig, MalformedNamesLineAndColumn) {
  try {
    edit_docker_config("{\n  \"a\": 1,\n  \"b\": ,\n}\n", "/etc/docker/daemon.json", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("/etc/docker/daemon.json:3:", 0), 0u) << e.what();
  }
  EXPECT_THROW(edit_docker_config("[1]", "d.json", {}), Error);
  EXPECT_THROW(edit_docker_config(R"({"runtimes": []})", "d.json", {}), Error);
  EXPECT_THROW(edit_docker_config(R"({"runtimes": {"nvproxy": "x"}})", "d.json", {}), Error);
}

TEST(DockerConfig, ExitShimConfigKeepsTheBaseAndSetsExit) {
  const std::string y = exit_shim_config("runtime:\n  binary: runc\ncheckpoint:\n  image_store: /srv/img\n", "config.yaml");
  EXPECT_TRUE(exits_without_options(y));
  EXPECT_NE(y.find("image_store: /srv/img"), std::string::npos) << y;
  EXPECT_NE(y.find("binary: runc"), std::string::npos) << y;
  EXPECT_TRUE(exits_without_options(exit_shim_config("", "none")));
  EXPECT_FALSE(exits_without_options("checkpoint:\n  exit_without_options: false\n"));
  EXPECT_THROW(exit_shim_config("checkpoint: [1\n", "bad.yaml"), Error);
}

}  // namespace
}  // namespace nvproxy::node
