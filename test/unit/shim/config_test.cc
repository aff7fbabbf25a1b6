#include "shim/task/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "common/error.h"
#include "common/fs.h"

using namespace nvproxy;
using namespace nvproxy::shim;

TEST(Config, EmptyMeansDefaults) {
  auto c = parse_config("", "c.yaml");
  EXPECT_EQ(c.runtime.binary, "runc");
  EXPECT_EQ(c.runtime.root, kDefaultRuntimeRoot);
  EXPECT_EQ(c.checkpoint.cuda, "driver-api");
  EXPECT_EQ(c.checkpoint.device_globs, std::vector<std::string>{"/dev/nvidia*"});
  EXPECT_EQ(c.log_level, LogLevel::Info);
  EXPECT_EQ(c.runtime.criu_options, (std::vector<std::string>{"link-remap", "ghost-limit 1G"}));
  EXPECT_FALSE(c.checkpoint.allow_lost_cuda_processes);
  EXPECT_TRUE(c.checkpoint.check_space);
  EXPECT_EQ(c.checkpoint.content_store, "/var/lib/containerd");
  EXPECT_FALSE(c.checkpoint.exit_without_options);
}

// The page I/O of the project's CRIU: on by default, each can be turned off, the writers bounded.
TEST(Config, PageIo) {
  auto d = parse_config("", "c.yaml");
  EXPECT_EQ(d.runtime.page_writers, 16u);
  EXPECT_TRUE(d.runtime.restore_huge_pages);
  auto c = parse_config("checkpoint: {page_writers: 0, restore_huge_pages: false}", "c.yaml");
  EXPECT_EQ(c.runtime.page_writers, 0u);
  EXPECT_FALSE(c.runtime.restore_huge_pages);
  try {
    parse_config("checkpoint: {page_writers: 5000}", "c.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.page_writers is 5000: at most 1024"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_config("checkpoint: {page_writers: many}", "c.yaml"), Error);
  EXPECT_EQ(d.runtime.page_readers, 8u);
  EXPECT_TRUE(d.runtime.resume_before_write);
  EXPECT_TRUE(d.runtime.write_after_cuda_resume);
  EXPECT_FALSE(parse_config("checkpoint: {resume_before_write: false}", "c.yaml").runtime.resume_before_write);
  EXPECT_FALSE(d.runtime.runsc_direct_restore);
  EXPECT_TRUE(parse_config("checkpoint: {runsc_direct_restore: true}", "c.yaml").runtime.runsc_direct_restore);
  EXPECT_EQ(parse_config("checkpoint: {page_readers: 0}", "c.yaml").runtime.page_readers, 0u);
  try {
    parse_config("checkpoint: {page_readers: 2000}", "c.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.page_readers is 2000: at most 1024"), std::string::npos) << e.what();
  }
}

TEST(Config, ExitWithoutOptions) {
  EXPECT_TRUE(parse_config("checkpoint: {exit_without_options: true}", "c.yaml").checkpoint.exit_without_options);
  EXPECT_THROW(parse_config("checkpoint: {exit_without_options: maybe}", "c.yaml"), Error);
}

TEST(Config, CheckpointKeysOfIssue16) {
  auto c = parse_config(R"(
checkpoint: {criu_options: [link-remap, tcp-established], allow_lost_cuda_processes: true, check_space: false,
             content_store: /data/containerd}
)",
                        "c.yaml");
  EXPECT_EQ(c.runtime.criu_options, (std::vector<std::string>{"link-remap", "tcp-established"}));
  EXPECT_TRUE(c.checkpoint.allow_lost_cuda_processes);
  EXPECT_FALSE(c.checkpoint.check_space);
  EXPECT_EQ(c.checkpoint.content_store, "/data/containerd");
  EXPECT_TRUE(parse_config("checkpoint: {criu_options: []}", "c.yaml").runtime.criu_options.empty());
  try {
    parse_config("checkpoint: {criu_options: [\"\"]}", "c.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.yaml: checkpoint.criu_options: CRIU option"), std::string::npos) << e.what();
  }
}

TEST(Config, ReadsEverySection) {
  auto c = parse_config(R"(
runtime: {binary: /usr/bin/runsc, root: /run/x, extra_args: ["--network=none"], systemd_cgroup: true, criu_path: /c}
gpu: {mode: cdi, cdi_spec_dirs: [/etc/cdi], driver_root: /drv}
checkpoint: {cuda: cuda-checkpoint, lock_timeout_ms: 500, parallelism: 1, device_globs: ["/dev/dri/*"], allow_unrestorable: true}
log_level: debug
)",
                        "c.yaml");
  EXPECT_EQ(c.runtime.binary, "/usr/bin/runsc");
  EXPECT_EQ(c.runtime.extra_args, std::vector<std::string>{"--network=none"});
  EXPECT_TRUE(c.runtime.systemd_cgroup);
  EXPECT_EQ(c.runtime.criu_path, "/c");
  EXPECT_EQ(c.gpu.mode, "cdi");
  EXPECT_EQ(c.gpu.driver_root, "/drv");
  EXPECT_EQ(c.checkpoint.cuda, "cuda-checkpoint");
  EXPECT_EQ(c.checkpoint.lock_timeout_ms, 500U);
  EXPECT_EQ(c.checkpoint.parallelism, 1U);
  EXPECT_TRUE(c.checkpoint.allow_unrestorable);
  EXPECT_EQ(c.log_level, LogLevel::Debug);
}

static std::string error_of(const std::string& yaml) {
  try {
    parse_config(yaml, "/etc/x.yaml");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    return e.what();
  }
  return "";
}

TEST(Config, ErrorsNameFileAndKey) {
  EXPECT_NE(error_of("runtime: {binray: runc}").find("/etc/x.yaml: runtime.binray: unknown key"), std::string::npos);
  EXPECT_NE(error_of("checkpoint: {lock_timeout_ms: soon}").find("checkpoint.lock_timeout_ms"), std::string::npos);
  EXPECT_NE(error_of("log_level: loud").find("log level"), std::string::npos);
  EXPECT_NE(error_of("runtime: [1, 2]").find("runtime: must be a mapping"), std::string::npos);
  EXPECT_NE(error_of("runtime: {binary: ''}").find("runtime.binary"), std::string::npos);
  EXPECT_NE(error_of("a: [").find("not valid YAML"), std::string::npos);
  EXPECT_NE(
      error_of("checkpoint: {registry_compression: gzip}").find("checkpoint.registry_compression is \"gzip\": none or zstd"),
      std::string::npos);
}

TEST(Config, ExplicitMissingFileIsAnError) {
  EXPECT_THROW(load_config("/nonexistent/nvproxy.yaml"), Error);
}

TEST(Config, YamlErrorsInKeysStayInvalidArgument) {
  // Found by fuzz_task_rpc: a mapping key that is itself a sequence made yaml-cpp throw past the seam.
  EXPECT_NE(error_of("runtime: {[a, b]: 1}").find("/etc/x.yaml"), std::string::npos);
  EXPECT_NE(error_of("{[1]: x}").find("/etc/x.yaml"), std::string::npos);
}

TEST(Config, StagingMemory) {
  auto d = parse_config("", "c.yaml");
  EXPECT_EQ(d.checkpoint.staging_memory, checkpoint::StagingMode::Lift);
  EXPECT_EQ(d.checkpoint.staging_margin_mib, 256u);
  auto c = parse_config("checkpoint: {staging_memory: refuse, staging_margin_mib: 64, staging_account: /x/a.json}", "c.yaml");
  EXPECT_EQ(c.checkpoint.staging_memory, checkpoint::StagingMode::Refuse);
  EXPECT_EQ(c.checkpoint.staging_margin_mib, 64u);
  EXPECT_EQ(c.checkpoint.staging_account, "/x/a.json");
  try {
    parse_config("checkpoint: {staging_memory: sometimes}", "/etc/x.yaml");
    FAIL() << "an unknown staging_memory was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/etc/x.yaml: checkpoint.staging_memory: \"sometimes\" is neither lift nor refuse"),
              std::string::npos)
        << e.what();
  }
}

// Issue 63: what an operator points the shim at is read bounded and refused at once otherwise.
namespace {
std::string load_error(const std::string& path) {
  try {
    load_config(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument) << e.what();
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Config, ADeviceAFifoOrAHugeFileIsRefusedAtOnceNamingThePath) {
  auto dir = std::filesystem::temp_directory_path() / ("nvproxy-cfg-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  write_file_atomic(dir / "big.yaml", "log_level: info\n" + std::string(kMaxConfigBytes, '#'));
  EXPECT_EQ(load_error("/dev/zero"), "read /dev/zero: is a character device, not a regular file");
  EXPECT_EQ(load_error((dir / "fifo").string()), "read " + (dir / "fifo").string() + ": is a FIFO, not a regular file");
  EXPECT_NE(load_error((dir / "big.yaml").string()).find("exceeds the bound of 1048576 bytes"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Config, AKeyThatIsNotUtf8IsNamedEscaped) {
  try {
    parse_config("runtime:\n  bin\xe9ry: runc\n", "/etc/x.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_STREQ(e.what(), "/etc/x.yaml: runtime.\"bin\\xe9ry\": unknown key");
  }
}
