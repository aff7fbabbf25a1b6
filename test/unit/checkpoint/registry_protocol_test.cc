// The registry's protocol as the shim speaks it, without a registry: references taken apart as
// container tools do, auth files and 401 challenges, URLs (http_connection.h), the progress line.
#include <gtest/gtest.h>
#include <unistd.h>

#include "checkpoint/registry/http_connection.h"
#include "checkpoint/registry/registry_auth.h"
#include "checkpoint/registry/registry_reference.h"
#include "checkpoint/registry/transfer_progress.h"
#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {
namespace {

namespace fs = std::filesystem;

TEST(RegistryReference, HostsRepositoriesTagsAndDigests) {
  RegistryReference r = parse_reference("127.0.0.1:5000/ckpt/llm:v1.data");
  EXPECT_EQ(r.host, "127.0.0.1:5000");
  EXPECT_EQ(r.repository, "ckpt/llm");
  EXPECT_EQ(r.tag, "v1.data");
  EXPECT_EQ(r.object(), "v1.data");
  const std::string d = "sha256:" + std::string(64, 'a');
  r = parse_reference("registry.example/team/llm@" + d);
  EXPECT_EQ(r.host, "registry.example");
  EXPECT_EQ(r.digest, d);
  EXPECT_EQ(r.object(), d);
  r = parse_reference("ubuntu");
  EXPECT_EQ(r.name(), "docker.io/library/ubuntu");
  EXPECT_EQ(r.tag, "latest");
  EXPECT_EQ(r.api_host(), "registry-1.docker.io");
  EXPECT_EQ(parse_reference("localhost/x:1").host, "localhost");
  EXPECT_EQ(parse_reference("team/llm:2").name(), "docker.io/team/llm");
  for (const char* bad : {"", "host:5000/", "host/Upper:1", "host/x@sha256:abc", "host/x:"})
    EXPECT_THROW(parse_reference(bad), Error) << bad;
}

TEST(RegistryAuth, ChallengesAsRegistriesSendThem) {
  auto c = parse_challenge(
      R"(Bearer realm="https://auth.example/token",service="registry.example",scope="repository:ckpt/llm:pull,push")");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->scheme, "bearer");
  EXPECT_EQ(c->params["realm"], "https://auth.example/token");
  EXPECT_EQ(c->params["scope"], "repository:ckpt/llm:pull,push") << "a comma inside quotes stays";
  c = parse_challenge(R"(Basic realm="Registry Realm")");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->scheme, "basic");
  EXPECT_FALSE(parse_challenge("Negotiate abc"));
  EXPECT_FALSE(parse_challenge(R"(Bearer service="x")")) << "a token service without its address";
}

TEST(RegistryAuth, CredentialsFromTheAuthFileThatNamesTheHost) {
  const fs::path dir = fs::temp_directory_path() / ("nvproxy-auth-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "auth.json";
  write_file_atomic(file, R"({"auths": {"https://reg.example:5000/v1/": {"auth": ")" + base64_encode("ann:s3cret") +
                              R"("}, "https://index.docker.io/v1/": {"auth": ")" + base64_encode("hub:pw") + R"("}}})");
  EXPECT_EQ(credentials_for("reg.example:5000", file.string()), "ann:s3cret");
  EXPECT_EQ(credentials_for("docker.io", file.string()), "hub:pw");
  EXPECT_EQ(credentials_for("other:5000", file.string()), "");
  write_file_atomic(file, "not json");
  EXPECT_THROW(credentials_for("reg.example:5000", file.string()), Error);
  EXPECT_THROW(credentials_for("reg.example:5000", (dir / "none.json").string()), Error) << "a file named must exist";
  fs::remove_all(dir);
  EXPECT_EQ(base64_decode(base64_encode("a:b")), "a:b");
  EXPECT_EQ(base64_decode("not base64!"), "");
  EXPECT_EQ(percent_encode("repository:ckpt/llm:pull,push"), "repository%3Ackpt%2Fllm%3Apull%2Cpush");
}

TEST(HttpConnection, UrlsOfRedirectsAndTokenServices) {
  auto [ep, target] = parse_url("https://storage.example/blobs/ab?sig=1", true);
  EXPECT_TRUE(ep.tls);
  EXPECT_EQ(ep.host, "storage.example");
  EXPECT_EQ(ep.port, "443");
  EXPECT_EQ(target, "/blobs/ab?sig=1");
  EXPECT_EQ(ep.authority(), "storage.example");
  auto [plain, t2] = parse_url("http://127.0.0.1:5000", false);
  EXPECT_FALSE(plain.tls);
  EXPECT_EQ(plain.authority(), "127.0.0.1:5000");
  EXPECT_EQ(t2, "/");
  EXPECT_EQ(parse_url("http://[::1]:5000/v2/", false).first.host, "::1");
  EXPECT_THROW(parse_url("ftp://x/", true), Error);
  EXPECT_THROW(parse_url("http://host:port/", true), Error);
}

TEST(TransferProgress, CountsMovedAndSkippedBytes) {
  TransferProgress p("pushing 3.0 MiB to reg/x:v1", 3 << 20, nullptr, false);
  p.moved(1 << 20);
  p.skipped(2 << 20);
  p.moved(4096);
  p.unmoved(4096);
  EXPECT_EQ(p.moved_bytes(), 1u << 20);
  EXPECT_NE(p.line().find("3.0 MiB of 3.0 MiB"), std::string::npos) << p.line();
  const std::string done = p.finish("sent");
  EXPECT_NE(done.find("1.0 MiB sent, 2.0 MiB already there"), std::string::npos) << done;
  EXPECT_EQ(human_bytes(12), "12 B");
  EXPECT_EQ(human_bytes(3ull << 30), "3.0 GiB");
}

}  // namespace
}  // namespace nvproxy::checkpoint
