#include "common/process.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "common/fs.h"

using namespace nvproxy;

TEST(ProcessRunner, CapturesOutputAndExitCode) {
  DirectWaiter w;
  ProcessRunner r(w);
  auto res = r.run({.argv = {"sh", "-c", "echo out; echo err >&2; exit 7"}});
  EXPECT_EQ(res.exit_code, 7);
  EXPECT_EQ(res.out, "out\n");
  EXPECT_EQ(res.err, "err\n");
  EXPECT_NE(res.describe().find("exit status 7: err"), std::string::npos);
}

TEST(ProcessRunner, FeedsStdinAndEnv) {
  DirectWaiter w;
  ProcessRunner r(w);
  auto res = r.run({.argv = {"sh", "-c", "cat; echo \"$FOO\""}, .env_add = {"FOO=bar"}, .stdin_data = "in\n"});
  EXPECT_TRUE(res.ok());
  EXPECT_EQ(res.out, "in\nbar\n");
}

TEST(ProcessRunner, TimeoutKills) {
  DirectWaiter w;
  ProcessRunner r(w);
  auto res = r.run({.argv = {"sleep", "10"}, .timeout = std::chrono::milliseconds(100)});
  EXPECT_TRUE(res.timed_out);
  EXPECT_EQ(res.term_signal, 9);
}

TEST(ProcessRunner, MissingProgramIsNotFound) {
  DirectWaiter w;
  ProcessRunner r(w);
  try {
    r.run({.argv = {"no-such-program-nvproxy"}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::NotFound);
    EXPECT_NE(std::string(e.what()).find("no-such-program-nvproxy"), std::string::npos);
  }
}

TEST(ProcessRunner, ADirectoryOrANonExecutableIsNamedAsSuch) {
  auto dir = std::filesystem::temp_directory_path() / ("nvproxy-prog-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "runc");
  write_file_atomic(dir / "plain", "#!/bin/sh\n", 0644);
  DirectWaiter w;
  ProcessRunner r(w);
  auto message = [&](const std::filesystem::path& p) -> std::string {
    try {
      r.run({.argv = {p.string(), "--version"}});
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::FailedPrecondition) << e.what();
      return e.what();
    }
    return "ran";
  };
  EXPECT_EQ(message(dir / "runc"), "program \"" + (dir / "runc").string() + "\" is a directory, not an executable file");
  // Not even root may execute a file without an x bit.
  EXPECT_NE(message(dir / "plain").find("is not executable (mode 0644)"), std::string::npos);
  EXPECT_EQ(program_problem("/bin/sh"), "");
  std::filesystem::remove_all(dir);
}

TEST(ExitCode, SignalsMapTo128Plus) {
  EXPECT_EQ(exit_code_from_status(3 << 8), 3);
  EXPECT_EQ(exit_code_from_status(9), 137);
}
