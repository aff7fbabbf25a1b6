#include "shim/node/containerd_config.h"

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <map>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::node {
namespace {

std::string data(const std::string& name) {
  return read_file(std::string(NODE_TEST_DATA) + "/" + name);
}

const char* kV2 = "io.containerd.grpc.v1.cri";
const char* kV3 = "io.containerd.cri.v1.runtime";

toml::node_view<const toml::node> runtimes(const toml::table& doc, const char* plugin) {
  return doc["plugins"][plugin]["containerd"]["runtimes"];
}

bool same(const toml::node& a, const toml::node& b) {
  if (a.type() != b.type()) return false;
  if (a.is_array()) return *a.as_array() == *b.as_array();
  if (a.is_table()) return *a.as_table() == *b.as_table();
  return a.visit([&](const auto& x) {
    using T = std::remove_cvref_t<decltype(x)>;
    if constexpr (toml::is_table<T> || toml::is_array<T>) {
      return false;
    } else {
      return x == *b.as<typename T::value_type>();
    }
  });
}

// Every value of `a` is in `b` with the same value (b may have more).
void expect_kept(const toml::table& a, const toml::table& b, const std::string& path = "") {
  for (const auto& [k, v] : a) {
    const std::string p = path + "." + std::string(k.str());
    const toml::node* other = b.get(k.str());
    ASSERT_NE(other, nullptr) << p << " is gone";
    if (v.is_table() && other->is_table()) {
      expect_kept(*v.as_table(), *other->as_table(), p);
    } else if (!(p.find(".runtimes.nvproxy") != std::string::npos)) {
      EXPECT_TRUE(same(v, *other)) << p << " changed";
    }
  }
}

TEST(ContainerdConfig, DefaultV2OfContainerd16KeepsEverythingAndAddsTheRuntime) {
  const std::string text = data("containerd-1.6-default.toml");
  TomlEdit e = edit_containerd_config(text, "config.toml", 1, {});
  ASSERT_TRUE(e.changed);
  EXPECT_EQ(e.version, 2);
  const toml::table before = toml::parse(text), after = toml::parse(e.after);
  expect_kept(before, after);
  auto rt = runtimes(after, kV2)["nvproxy"];
  EXPECT_EQ(rt["runtime_type"].value<std::string>(), "io.containerd.nvproxy.v1");
  ASSERT_TRUE(rt["container_annotations"].is_array());
  EXPECT_EQ(rt["container_annotations"][0].value<std::string>(), "cdi.k8s.io/*");
  EXPECT_FALSE(rt["options"]) << "no ConfigPath unless asked";
  EXPECT_EQ(runtimes(after, kV2)["runc"]["runtime_type"].value<std::string>(), "io.containerd.runc.v2");
  EXPECT_TRUE(e.notes.empty()) << "the default config has runc already";
}

TEST(ContainerdConfig, SecondRunChangesNothing) {
  for (const char* file : {"containerd-1.6-default.toml", "containerd-1.7-default.toml", "containerd-2.3-default.toml"}) {
    const int major = std::string(file).find("-2.") != std::string::npos ? 2 : 1;
    RuntimeEntry entry{.shim_config = "/etc/nvproxy/x.yaml", .set_as_default = true};
    TomlEdit first = edit_containerd_config(data(file), file, major, entry);
    ASSERT_TRUE(first.changed) << file;
    TomlEdit second = edit_containerd_config(first.after, file, major, entry);
    EXPECT_FALSE(second.changed) << file;
    EXPECT_EQ(second.after, first.after) << file;
    // Without the options the second run keeps them too.
    EXPECT_FALSE(edit_containerd_config(first.after, file, major, {}).changed) << file;
  }
}

TEST(ContainerdConfig, DefaultOfContainerd23IsVersion4WithTheVersion3Path) {
  const std::string text = data("containerd-2.3-default.toml");
  TomlEdit e = edit_containerd_config(text, "config.toml", 2, {.shim_config = "/etc/s.yaml"});
  ASSERT_TRUE(e.changed);
  EXPECT_EQ(e.version, 4);
  const toml::table after = toml::parse(e.after);
  expect_kept(toml::parse(text), after);
  EXPECT_EQ(runtimes(after, kV3)["nvproxy"]["runtime_type"].value<std::string>(), "io.containerd.nvproxy.v1");
  EXPECT_EQ(runtimes(after, kV3)["nvproxy"]["options"]["ConfigPath"].value<std::string>(), "/etc/s.yaml");
  EXPECT_FALSE(after["plugins"][kV2]["containerd"]) << "no version 2 runtimes in a version 3+ file";
}

TEST(ContainerdConfig, MinimalVersion2GetsTheRuncEntryCriNeeds) {
  TomlEdit e = edit_containerd_config("version = 2\nroot = \"/var/lib/x\"\n", "c.toml", 1, {});
  const toml::table after = toml::parse(e.after);
  EXPECT_EQ(after["root"].value<std::string>(), "/var/lib/x");
  EXPECT_EQ(runtimes(after, kV2)["runc"]["runtime_type"].value<std::string>(), "io.containerd.runc.v2");
  EXPECT_TRUE(runtimes(after, kV2)["nvproxy"]);
  ASSERT_EQ(e.notes.size(), 1u);
  EXPECT_NE(e.notes[0].find("runc"), std::string::npos);
}

TEST(ContainerdConfig, AnotherDefaultRuntimeIsLeftAlone) {
  const std::string text =
      "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\ndefault_runtime_name = \"crun\"\n"
      "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.crun]\nruntime_type = \"io.containerd.runc.v2\"\n";
  const toml::table after = toml::parse(edit_containerd_config(text, "c.toml", 1, {}).after);
  EXPECT_FALSE(runtimes(after, kV2)["runc"]);
  EXPECT_TRUE(runtimes(after, kV2)["crun"]);
}

TEST(ContainerdConfig, EmptyFileTakesTheVersionOfTheContainerd) {
  TomlEdit v2 = edit_containerd_config("", "c.toml", 1, {});
  EXPECT_EQ(v2.version, 2);
  EXPECT_EQ(toml::parse(v2.after)["version"].value<int>(), 2);
  TomlEdit v3 = edit_containerd_config("", "c.toml", 2, {.name = "gpu"});
  EXPECT_EQ(v3.version, 3);
  const toml::table after = toml::parse(v3.after);
  EXPECT_TRUE(runtimes(after, kV3)["gpu"]);
  EXPECT_FALSE(runtimes(after, kV3)["runc"]) << "containerd 2.x keeps its default runtimes";
  EXPECT_THROW(edit_containerd_config("", "c.toml", 0, {}), Error) << "unknown containerd, nothing to go by";
}

TEST(ContainerdConfig, RefusesWhatItCannotEditRight) {
  try {
    edit_containerd_config("version = 3\n", "c.toml", 1, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("containerd 2.x"), std::string::npos) << e.what();
  }
  EXPECT_THROW(edit_containerd_config("root = \"/x\"\n", "c.toml", 1, {}), Error) << "version 1";
  EXPECT_THROW(edit_containerd_config("version = 2\nplugins = 3\n", "c.toml", 1, {}), Error);
  EXPECT_THROW(edit_containerd_config("version = \"2\"\n", "c.toml", 1, {}), Error);
  try {
    edit_containerd_config("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\nruntimes = \"x\"\n", "c.toml", 1,
                           {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runtimes (line 3) is a string, not a table"), std::string::npos) << e.what();
  }
}

TEST(ContainerdConfig, MalformedNamesLineAndColumn) {
  try {
    edit_containerd_config("version = 2\n\n[plugins\nx = 1\n", "/etc/containerd/config.toml", 1, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_EQ(std::string(e.what()).rfind("/etc/containerd/config.toml:3:", 0), 0u) << e.what();
  }
  try {
    edit_containerd_config("version = 2\nroot = \"unterminated\n", "c.toml", 1, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("c.toml:2:", 0), 0u) << e.what();
  }
}

TEST(ContainerdConfig, KeepsWhatTheOperatorAddedToTheEntry) {
  const std::string text =
      "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n"
      "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvproxy]\nruntime_type = \"io.containerd.nvproxy.v1\"\n"
      "pod_annotations = [\"restore.nvproxy.io/*\"]\ncontainer_annotations = [\"x.io/*\"]\n"
      "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvproxy.options]\nConfigPath = \"/etc/mine.yaml\"\n";
  TomlEdit e = edit_containerd_config(text, "c.toml", 1, {});
  ASSERT_TRUE(e.changed);
  const toml::table after = toml::parse(e.after);
  auto rt = runtimes(after, kV2)["nvproxy"];
  EXPECT_EQ(rt["pod_annotations"][0].value<std::string>(), "restore.nvproxy.io/*");
  EXPECT_EQ(rt["container_annotations"][0].value<std::string>(), "x.io/*");
  EXPECT_EQ(rt["container_annotations"][1].value<std::string>(), "cdi.k8s.io/*");
  EXPECT_EQ(rt["options"]["ConfigPath"].value<std::string>(), "/etc/mine.yaml");
}

TEST(ContainerdConfig, SaysWhenCriIsDisabled) {
  TomlEdit e = edit_containerd_config("version = 2\ndisabled_plugins = [\"cri\"]\n", "c.toml", 1, {});
  bool said = false;
  for (const auto& n : e.notes) said = said || n.find("disabled_plugins") != std::string::npos;
  EXPECT_TRUE(said);
}

std::map<std::string, std::string> files;
std::optional<std::string> read_fake(const std::filesystem::path& p) {
  auto it = files.find(p.string());
  return it == files.end() ? std::nullopt : std::optional(it->second);
}

TEST(ContainerdConfig, DropInGoesToTheImportsDirectory) {
  files.clear();
  const std::string main = data("containerd-2.3-default.toml");  // imports /etc/containerd/conf.d/*.toml
  DropInEdit d = edit_containerd_dropin(main, "/etc/containerd/config.toml", 2, {}, read_fake);
  EXPECT_FALSE(d.main.changed);
  EXPECT_EQ(d.path, "/etc/containerd/conf.d/nvproxy.toml");
  ASSERT_TRUE(d.dropin.changed);
  const toml::table drop = toml::parse(d.dropin.after);
  EXPECT_EQ(drop["version"].value<int>(), 4) << "the main file's version";
  EXPECT_EQ(runtimes(drop, kV3)["nvproxy"]["runtime_type"].value<std::string>(), "io.containerd.nvproxy.v1");
  EXPECT_EQ(drop["plugins"][kV3].as_table()->size(), 1u) << "nothing but the runtime: the rest merges from the main file";
  // Again, with the drop-in in place: nothing to change.
  files[d.path.string()] = d.dropin.after;
  DropInEdit again = edit_containerd_dropin(main, "/etc/containerd/config.toml", 2, {}, read_fake);
  EXPECT_FALSE(again.main.changed);
  EXPECT_FALSE(again.dropin.changed);
}

TEST(ContainerdConfig, DropInAddsAnImportWhereThereIsNone) {
  files.clear();
  DropInEdit d = edit_containerd_dropin("version = 3\nimports = [\"/opt/one.toml\"]\n", "/srv/ctd/config.toml", 2, {}, read_fake);
  ASSERT_TRUE(d.main.changed);
  EXPECT_EQ(d.path, "/srv/ctd/conf.d/nvproxy.toml");
  const toml::table main = toml::parse(d.main.after);
  EXPECT_EQ(main["imports"][0].value<std::string>(), "/opt/one.toml");
  EXPECT_EQ(main["imports"][1].value<std::string>(), "/srv/ctd/conf.d/*.toml");
  // A relative import directory is the main file's.
  DropInEdit rel = edit_containerd_dropin("version = 3\nimports = [\"d/*.toml\"]\n", "/srv/ctd/config.toml", 2, {}, read_fake);
  EXPECT_FALSE(rel.main.changed);
  EXPECT_EQ(rel.path, "/srv/ctd/d/nvproxy.toml");
  // An empty main file becomes version 3 with the import.
  DropInEdit empty = edit_containerd_dropin("", "/srv/ctd/config.toml", 2, {}, read_fake);
  EXPECT_EQ(toml::parse(empty.main.after)["version"].value<int>(), 3);
}

TEST(ContainerdConfig, DropInRefusedOnContainerd1WithTheReason) {
  files.clear();
  try {
    edit_containerd_dropin(data("containerd-1.7-default.toml"), "/etc/containerd/config.toml", 1, {}, read_fake);
    FAIL();
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("replace a whole plugin section"), std::string::npos) << w;
    EXPECT_NE(w.find("without --drop-in"), std::string::npos) << w;
  }
}

TEST(ContainerdConfig, DropInThatDoesNotParseIsRefused) {
  files.clear();
  files["/etc/containerd/conf.d/nvproxy.toml"] = "version = 3\n[x\n";
  try {
    edit_containerd_dropin(data("containerd-2.3-default.toml"), "/etc/containerd/config.toml", 2, {}, read_fake);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("/etc/containerd/conf.d/nvproxy.toml:2:", 0), 0u) << e.what();
  }
}

TEST(ContainerdConfig, MajorVersionFromContainerdVersion) {
  EXPECT_EQ(containerd_major("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n"), 1);
  EXPECT_EQ(containerd_major("containerd github.com/containerd/containerd/v2 v2.3.4 1a2b3c\n"), 2);
  EXPECT_EQ(containerd_major("containerd github.com/containerd/containerd/v2 2.1.9~ds1 2.1.9~ds1-1\n"), 2);
  EXPECT_EQ(containerd_major("garbage"), 0);
  EXPECT_EQ(containerd_version("containerd github.com/containerd/containerd/v2 v2.4.0-beta.0 58e6cee9\n"), (Version{2, 4, 0}));
}

}  // namespace
}  // namespace nvproxy::node
