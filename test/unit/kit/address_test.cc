#include "shim/kit/address.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "common/error.h"

using namespace nvproxy;
using namespace nvproxy::shim;

TEST(Address, DeterministicPerContainerdNamespaceAndGroup) {
  auto a = socket_path("/run/containerd/containerd.sock", "default", "c1", "/d");
  EXPECT_EQ(a, socket_path("/run/containerd/containerd.sock", "default", "c1", "/d"));
  EXPECT_NE(a, socket_path("/run/containerd/containerd.sock", "other", "c1", "/d"));
  EXPECT_NE(a, socket_path("/run/containerd/containerd.sock", "default", "c2", "/d"));
  EXPECT_EQ(a.rfind("/d/", 0), 0U);
  EXPECT_EQ(a.size(), 3 + 40U);  // hex digest: short enough for sun_path under any sane dir
}

TEST(Address, ListensWith0600In0700DirAndRefusesAbstract) {
  auto dir = std::filesystem::temp_directory_path() / ("nvproxy-addr-" + std::to_string(::getpid())) / "s";
  auto path = socket_path("/x.sock", "ns", "id", dir.string());
  {
    UniqueFd fd = listen_unix(path);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600U);
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700U);
    EXPECT_TRUE(can_connect(path));
  }
  std::filesystem::remove_all(dir.parent_path());
  EXPECT_FALSE(can_connect(path));
  EXPECT_THROW(listen_unix("@abstract"), Error);
  EXPECT_THROW(listen_unix("/tmp/" + std::string(200, 'x')), Error);
  EXPECT_EQ(strip_unix_scheme("unix:///run/a"), "/run/a");
  EXPECT_EQ(strip_unix_scheme("/run/a"), "/run/a");
}
