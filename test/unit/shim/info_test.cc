// `-info`: the RuntimeInfo containerd 2.x reads, with the options it sent echoed back and the
// runtime's features taken from `RUNTIME features` when that prints JSON.
#include "shim/task/info_cmd.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "proto/introspection.pb.h"
#include "proto/runc_options.pb.h"
#include "shim/kit/version.h"

namespace nvproxy::shim {
namespace {

namespace fs = std::filesystem;

containerd::types::RuntimeInfo run_info(const std::string& input) {
  std::istringstream in(input);
  std::ostringstream out;
  EXPECT_EQ(info_main(in, out), 0);
  containerd::types::RuntimeInfo info;
  EXPECT_TRUE(info.ParseFromString(out.str()));
  return info;
}

TEST(Info, NamesTheRuntimeTypeAndVersionWithoutOptions) {
  auto info = run_info("");
  EXPECT_EQ(info.name(), kRuntimeType);
  EXPECT_EQ(info.version().version(), kVersion);
  EXPECT_FALSE(info.has_options());
}

TEST(Info, EchoesTheOptionsAndReportsTheRuntimesFeatures) {
  std::string t = (fs::temp_directory_path() / "info-test-XXXXXX").string();
  fs::path dir = ::mkdtemp(t.data());
  auto fake = dir / "fake-runc";
  std::ofstream(fake) << "#!/bin/sh\n[ \"$1\" = features ] && echo '{\"ociVersionMin\":\"1.0.0\"}'\n";
  fs::permissions(fake, fs::perms::owner_all);
  containerd::runc::v1::Options o;
  o.set_binary_name(fake.string());
  wkt::Any any;
  any.set_type_url("containerd.runc.v1.Options");
  any.set_value(o.SerializeAsString());
  auto info = run_info(any.SerializeAsString());
  EXPECT_EQ(info.options().type_url(), "containerd.runc.v1.Options");
  EXPECT_EQ(info.features().type_url(), "types.containerd.io/opencontainers/runtime-spec/1/features/Features");
  EXPECT_NE(info.features().value().find("ociVersionMin"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace nvproxy::shim
