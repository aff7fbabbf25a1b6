#include "common/process.h"

#include <gtest/gtest.h>

#include "common/error.h"

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

TEST(ExitCode, SignalsMapTo128Plus) {
  EXPECT_EQ(exit_code_from_status(3 << 8), 3);
  EXPECT_EQ(exit_code_from_status(9), 137);
}
