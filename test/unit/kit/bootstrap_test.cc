// `start`'s stdin and answer: containerd 2.3's BootstrapParams/BootstrapResult and the legacy
// runtime-options Any of containerd 1.6-2.2.
#include "shim/kit/bootstrap.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/unique_fd.h"
#include "proto/bootstrap.pb.h"
#include "proto/runc_options.pb.h"
#include "proto/runctypes.pb.h"
#include "shim/kit/address.h"
#include "shim/kit/cli.h"
#include "shim/kit/protobuf_log.h"

using namespace nvproxy;
using namespace nvproxy::shim;
namespace bootapi = containerd::runtime::bootstrap::v1;
namespace fs = std::filesystem;

namespace {

wkt::Any runc_options(const std::string& shim_cgroup, const std::string& type_url = "containerd.runc.v1.Options") {
  containerd::runc::v1::Options o;
  o.set_shim_cgroup(shim_cgroup);
  o.set_binary_name("runc");
  wkt::Any any;
  any.set_type_url(type_url);
  any.set_value(o.SerializeAsString());
  return any;
}

wkt::Any create_options(const std::string& shim_cgroup) {
  containerd::linux::runc::CreateOptions o;
  o.set_shim_cgroup(shim_cgroup);
  wkt::Any any;
  any.set_type_url("containerd.linux.runc.CreateOptions");
  any.set_value(o.SerializeAsString());
  return any;
}

bootapi::BootstrapParams params(const std::string& id, const std::string& ns) {
  bootapi::BootstrapParams p;
  p.set_instance_id(id);
  p.set_namespace_(ns);
  p.set_containerd_version("v2.3.4");
  p.set_containerd_ttrpc_address("/run/containerd/containerd.sock.ttrpc");
  p.set_containerd_grpc_address("/run/containerd/containerd.sock");
  p.set_containerd_binary("/usr/bin/containerd");
  return p;
}

// What containerd 2.3.4's proto.Marshal writes for BootstrapParams{instance_id "c1", namespace
// "default", log_level DEBUG, containerd_version "v2.3.4", its ttrpc and grpc addresses and binary,
// socket_dir "/run/containerd/s"} with one extension: the Any of
// containerd.linux.runc.CreateOptions{shim_cgroup "/nvshim"}. Fields in number order, as Go writes.
// Octal escapes: a digit that follows cannot join them.
constexpr char kGoBytes[] =
    "\012\002c1"                                     // 1 instance_id
    "\022\007default"                                // 2 namespace
    "\030\374\377\377\377\377\377\377\377\377\001"   // 3 log_level -4 (DEBUG), ten bytes
    "\042\006v2.3.4"                                 // 4 containerd_version
    "\052\045/run/containerd/containerd.sock.ttrpc"  // 5 containerd_ttrpc_address
    "\062\037/run/containerd/containerd.sock"        // 6 containerd_grpc_address
    "\072\023/usr/bin/containerd"                    // 7 containerd_binary
    "\102\062"                                       // 8 extensions[0]: 50 bytes
    "\012\060"                                       //   1 value (Any): 48 bytes
    "\012\043containerd.linux.runc.CreateOptions"    //     1 type_url
    "\022\011"                                       //     2 value: 9 bytes
    "\112\007/nvshim"                                //       9 shim_cgroup
    "\112\021/run/containerd/s";                     // 9 socket_dir
const std::string kGoParams(kGoBytes, sizeof kGoBytes - 1);

// What containerd 1.6's client and daemon put on start's stdin for a task with
// WithUIDOwner(1000) and WithGIDOwner(2000) (containerd's TestUserNamespaces): gogo's proto.Marshal
// of typeurl.MarshalAny of the options, for a runtime not named io.containerd.runc* (CreateOptions
// io_uid 10, io_gid 11) and for one that is (runc.v1.Options io_uid 4, io_gid 5). Printed by a Go
// program against Debian's containerd 1.6 sources. The varints (\350\007 = 1000) are not UTF-8.
constexpr char kCtd16CreateOptionsBytes[] =
    "\012\043containerd.linux.runc.CreateOptions"
    "\022\006"
    "\120\350\007\130\320\017";
const std::string kCtd16CreateOptions(kCtd16CreateOptionsBytes, sizeof kCtd16CreateOptionsBytes - 1);
constexpr char kCtd16RuncOptionsBytes[] =
    "\012\032containerd.runc.v1.Options"
    "\022\006"
    "\040\350\007\050\320\017";
const std::string kCtd16RuncOptions(kCtd16RuncOptionsBytes, sizeof kCtd16RuncOptionsBytes - 1);

// Everything written to fd 2 while `fn` runs.
template <typename Fn>
std::string stderr_of(Fn fn) {
  std::fflush(stderr);
  char name[] = "/tmp/shim-boot-stderr-XXXXXX";
  UniqueFd file(::mkstemp(name));
  ::unlink(name);
  UniqueFd saved(::dup(2));
  ::dup2(file.get(), 2);
  try {
    fn();
  } catch (...) {
    ::dup2(saved.get(), 2);
    throw;
  }
  std::fflush(stderr);
  ::dup2(saved.get(), 2);
  std::string out;
  char buf[4096];
  ssize_t n;
  ::lseek(file.get(), 0, SEEK_SET);
  while ((n = ::read(file.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

struct TempDir {
  fs::path p;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "shim-boot-XXXXXX").string();
    p = ::mkdtemp(t.data());
  }
  ~TempDir() { fs::remove_all(p); }
};

// Runs start_main with `p` as its working directory (the bundle), restoring the old one after.
std::string run_start(const fs::path& bundle, const ShimArgs& a, const std::string& self_exe, const std::string& input) {
  fs::path old = fs::current_path();
  fs::current_path(bundle);
  std::istringstream in(input);
  std::ostringstream out;
  try {
    start_main(a, self_exe, in, out);
  } catch (...) {
    fs::current_path(old);
    throw;
  }
  fs::current_path(old);
  return out.str();
}

}  // namespace

TEST(Bootstrap, NoInputIsLegacyWithoutOptions) {
  auto in = parse_start_input("", "c1", "default");
  EXPECT_FALSE(in.bootstrap);
  EXPECT_TRUE(in.options.empty());
  EXPECT_EQ(shim_cgroup_of(in.options), "");
}

TEST(Bootstrap, LegacyAnyGivesItsShimCgroup) {
  auto in = parse_start_input(runc_options("/pods/shim").SerializeAsString(), "c1", "default");
  EXPECT_FALSE(in.bootstrap);
  ASSERT_EQ(in.options.size(), 1U);
  EXPECT_EQ(in.options[0].type_url(), "containerd.runc.v1.Options");
  EXPECT_EQ(shim_cgroup_of(in.options), "/pods/shim");
  EXPECT_TRUE(in.socket_dir.empty());

  auto legacy = parse_start_input(create_options("/legacy").SerializeAsString(), "c1", "default");
  EXPECT_FALSE(legacy.bootstrap);
  EXPECT_EQ(shim_cgroup_of(legacy.options), "/legacy");
  EXPECT_EQ(shim_cgroup_of({runc_options("/prefixed", "types.containerd.io/containerd.runc.v1.Options")}), "/prefixed");
}

TEST(Bootstrap, LegacyAnyAlsoDecodesAsParamsButIsNotBelieved) {
  // The ambiguity the id check is for: an Any's type_url and value read as instance_id and namespace.
  std::string legacy = runc_options("/pods/shim").SerializeAsString();
  bootapi::BootstrapParams as_params;
  ASSERT_TRUE(as_params.ParseFromString(legacy));
  EXPECT_EQ(as_params.instance_id(), "containerd.runc.v1.Options");
  auto in = parse_start_input(legacy, "c1", "default");
  EXPECT_FALSE(in.bootstrap);
  EXPECT_EQ(shim_cgroup_of(in.options), "/pods/shim");
}

TEST(Bootstrap, ParamsForThisShimGiveExtensionsSocketDirAndLogLevel) {
  auto p = params("c1", "default");
  p.set_log_level(bootapi::LOG_LEVEL_DEBUG);
  p.set_socket_dir("/run/ctd/s");
  *p.add_extensions()->mutable_value() = runc_options("/pods/shim");
  auto in = parse_start_input(p.SerializeAsString(), "c1", "default");
  EXPECT_TRUE(in.bootstrap);
  ASSERT_EQ(in.options.size(), 1U);
  EXPECT_EQ(shim_cgroup_of(in.options), "/pods/shim");
  EXPECT_EQ(in.socket_dir, "/run/ctd/s");
  EXPECT_TRUE(in.debug);
  EXPECT_EQ(in.grpc_address, "/run/containerd/containerd.sock");

  // No extensions, no socket_dir, INFO: bootstrap all the same, with defaults.
  auto plain = parse_start_input(params("c1", "default").SerializeAsString(), "c1", "default");
  EXPECT_TRUE(plain.bootstrap);
  EXPECT_TRUE(plain.options.empty());
  EXPECT_TRUE(plain.socket_dir.empty());
  EXPECT_FALSE(plain.debug);
  auto trace = params("c1", "default");
  trace.set_log_level(bootapi::LOG_LEVEL_TRACE);
  EXPECT_TRUE(parse_start_input(trace.SerializeAsString(), "c1", "default").debug);
}

TEST(Bootstrap, OtherExtensionsBeforeTheRuncOptionsAreSkipped) {
  auto p = params("c1", "default");
  wkt::Any cri;
  cri.set_type_url("containerd.io/cri.v1.PodSandboxConfig");
  cri.set_value("\x0a\x03pod");
  *p.add_extensions()->mutable_value() = cri;
  p.add_extensions();  // an Extension without a value
  *p.add_extensions()->mutable_value() = create_options("/pods/legacy-type");
  auto in = parse_start_input(p.SerializeAsString(), "c1", "default");
  EXPECT_TRUE(in.bootstrap);
  EXPECT_EQ(in.options.size(), 2U);
  EXPECT_EQ(shim_cgroup_of(in.options), "/pods/legacy-type");
}

TEST(Bootstrap, GoEncodedParams) {
  auto in = parse_start_input(kGoParams, "c1", "default");
  EXPECT_TRUE(in.bootstrap);
  ASSERT_EQ(in.options.size(), 1U);
  EXPECT_EQ(in.options[0].type_url(), "containerd.linux.runc.CreateOptions");
  EXPECT_EQ(shim_cgroup_of(in.options), "/nvshim");
  EXPECT_EQ(in.socket_dir, "/run/containerd/s");
  EXPECT_TRUE(in.debug);
  EXPECT_EQ(in.grpc_address, "/run/containerd/containerd.sock");
  // Our classes write the same bytes.
  bootapi::BootstrapParams p;
  ASSERT_TRUE(p.ParseFromString(kGoParams));
  EXPECT_EQ(p.containerd_ttrpc_address(), "/run/containerd/containerd.sock.ttrpc");
  EXPECT_EQ(p.containerd_binary(), "/usr/bin/containerd");
  EXPECT_EQ(p.SerializeAsString(), kGoParams);
}

TEST(Bootstrap, ParamsOfAnotherIdOrNamespaceAreNotBelieved) {
  auto other_id = params("c2", "default");
  *other_id.add_extensions()->mutable_value() = runc_options("/pods/shim");
  other_id.set_socket_dir("/elsewhere");
  auto in = parse_start_input(other_id.SerializeAsString(), "c1", "default");
  EXPECT_FALSE(in.bootstrap);
  EXPECT_TRUE(in.socket_dir.empty());
  EXPECT_EQ(shim_cgroup_of(in.options), "");  // read as an Any of type "c2": no options

  auto other_ns = params("c1", "k8s.io");
  *other_ns.add_extensions()->mutable_value() = runc_options("/pods/shim");
  auto ns = parse_start_input(other_ns.SerializeAsString(), "c1", "default");
  EXPECT_FALSE(ns.bootstrap);
  EXPECT_EQ(shim_cgroup_of(ns.options), "");
  EXPECT_FALSE(parse_start_input(kGoParams, "c1", "other").bootstrap);
}

TEST(Bootstrap, UndecodableOrUnknownOptionsGiveNoCgroupAndGarbageIsNoOptions) {
  wkt::Any bad;
  bad.set_type_url("containerd.runc.v1.Options");
  bad.set_value("\xff\xff\xff");
  EXPECT_EQ(shim_cgroup_of({bad}), "");
  wkt::Any conf;
  conf.set_type_url("runtimeoptions.v1.Options");
  conf.set_value("\x12\x04/etc");
  EXPECT_EQ(shim_cgroup_of({conf}), "");
  auto in = parse_start_input("{\"not\": \"protobuf\"}", "c1", "default");
  EXPECT_FALSE(in.bootstrap);
  EXPECT_TRUE(in.options.empty());
}

TEST(Bootstrap, RelativeSocketDirIsRefused) {
  auto p = params("c1", "default");
  p.set_socket_dir("run/s");
  EXPECT_THROW(parse_start_input(p.SerializeAsString(), "c1", "default"), Error);
}

TEST(Bootstrap, ResultIsVersion2TtrpcAndItsAddress) {
  std::string r = bootstrap_result("unix:///run/containerd/s/abc");
  bootapi::BootstrapResult res;
  ASSERT_TRUE(res.ParseFromString(r));
  EXPECT_EQ(res.version(), 2);
  EXPECT_EQ(res.address(), "unix:///run/containerd/s/abc");
  EXPECT_EQ(res.protocol(), "ttrpc");
  EXPECT_EQ(r, std::string("\x08\x02\x12\x1cunix:///run/containerd/s/abc\x1a\x05ttrpc"));
}

TEST(Bootstrap, StartAnswersAResultInTheParamsSocketDir) {
  TempDir t;
  fs::create_directories(t.p / "bundle");
  ShimArgs a;
  a.ns = "default";
  a.id = "c1";
  a.address = "/run/containerd/containerd.sock";
  auto p = params("c1", "default");
  p.set_socket_dir((t.p / "s").string());

  // A shim for this group already listens there: start only answers.
  std::string path = socket_path(a.address, a.ns, a.id, (t.p / "s").string());
  {
    UniqueFd listener = listen_unix(path);
    std::string out = run_start(t.p / "bundle", a, "/bin/false", p.SerializeAsString());
    bootapi::BootstrapResult res;
    ASSERT_TRUE(res.ParseFromString(out));
    EXPECT_EQ(res.address(), "unix://" + path);
    EXPECT_EQ(res.protocol(), "ttrpc");
    EXPECT_EQ(read_file(t.p / "bundle/address"), "unix://" + path);
  }

  // No shim there (a stale socket): start launches the daemon (here /bin/true) and answers.
  std::string out = run_start(t.p / "bundle", a, "/bin/true", p.SerializeAsString());
  bootapi::BootstrapResult res;
  ASSERT_TRUE(res.ParseFromString(out));
  EXPECT_EQ(res.address(), "unix://" + path);
  EXPECT_TRUE(fs::exists(path));
  pid_t pid = std::stoi(read_file(t.p / "bundle/shim.pid"));
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
}

TEST(Bootstrap, Containerd16UserNamespaceOptionsAreTheLegacyAny) {
  auto in = parse_start_input(kCtd16CreateOptions, "c1", "default");
  EXPECT_FALSE(in.bootstrap);
  ASSERT_EQ(in.options.size(), 1U);
  EXPECT_EQ(in.options[0].type_url(), "containerd.linux.runc.CreateOptions");
  containerd::linux::runc::CreateOptions co;
  ASSERT_TRUE(co.ParseFromString(in.options[0].value()));
  EXPECT_EQ(co.io_uid(), 1000U);
  EXPECT_EQ(co.io_gid(), 2000U);
  EXPECT_EQ(shim_cgroup_of(in.options), "");

  auto runc = parse_start_input(kCtd16RuncOptions, "c1", "default");
  EXPECT_FALSE(runc.bootstrap);
  ASSERT_EQ(runc.options.size(), 1U);
  containerd::runc::v1::Options ro;
  ASSERT_TRUE(ro.ParseFromString(runc.options[0].value()));
  EXPECT_EQ(ro.io_uid(), 1000U);
  EXPECT_EQ(ro.io_gid(), 2000U);
  // Our classes write containerd's bytes.
  EXPECT_EQ(in.options[0].SerializeAsString(), kCtd16CreateOptions);
  EXPECT_EQ(runc.options[0].SerializeAsString(), kCtd16RuncOptions);
}

// The bytes that made libprotobuf print "String field contains invalid UTF-8" into the address
// containerd 1.6 read: read as BootstrapParams, the Any's value is the string `namespace`.
TEST(Bootstrap, LibprotobufMessagesGoToTheLoggerOrNowhereNeverToStderr) {
  route_protobuf_log(nullptr);
  std::string err = stderr_of([] {
    bootapi::BootstrapParams p;
    (void)p.ParseFromString(kCtd16CreateOptions);
  });
  EXPECT_EQ(err, "");

  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd r(fds[0]), w(fds[1]);
  Logger log(w.get(), LogLevel::Debug);
  route_protobuf_log(&log);
  err = stderr_of([] {
    bootapi::BootstrapParams p;
    (void)p.ParseFromString(kCtd16RuncOptions);
  });
  route_protobuf_log(nullptr);
  EXPECT_EQ(err, "");
  char buf[4096];
  ssize_t n = ::read(r.get(), buf, sizeof buf);
  ASSERT_GT(n, 0) << "nothing reached the logger";
  std::string line(buf, static_cast<size_t>(n));
  EXPECT_NE(line.find("libprotobuf"), std::string::npos) << line;
  EXPECT_NE(line.find("invalid UTF-8"), std::string::npos) << line;
}

TEST(Bootstrap, StartWithContainerd16UserNamespaceOptionsAnswersTheAddressAlone) {
  TempDir t;
  fs::create_directories(t.p / "bundle");
  ShimArgs a;
  a.ns = "default";
  a.id = "c1";
  a.address = (t.p / "containerd.sock").string();  // a socket path of this test alone
  std::string path = socket_path(a.address, a.ns, a.id);
  UniqueFd listener = listen_unix(path);  // a shim for this group already listens: start only answers
  for (const auto* input : {&kCtd16CreateOptions, &kCtd16RuncOptions}) {
    std::string out;
    std::string err = stderr_of([&] { out = run_start(t.p / "bundle", a, "/bin/false", *input); });
    EXPECT_EQ(out, "unix://" + path);
    EXPECT_EQ(err, "");
  }
  fs::remove(path);
}
