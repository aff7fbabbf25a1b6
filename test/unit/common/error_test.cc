// What a status carries to containerd, whose client appends the class word (": unknown").
#include "common/error.h"

#include <gtest/gtest.h>

using namespace nvproxy;

TEST(StatusMessage, AMultiLineReportEndsWithALineTheClassWordCompletes) {
  std::string report =
      "checkpoint of container \"b2\" failed: the runtime's checkpoint failed: runc checkpoint of container \"b2\" failed: "
      "criu failed: type NOTIFY errno 0\nrolled back: pid 735 CUDA-running again; the container keeps running\n";
  std::string m = status_message(report);
  EXPECT_EQ(m.substr(m.size() - std::string("keeps running\nstatus").size()), "keeps running\nstatus") << m;
  // As containerd's client shows it: the word on its own line, not glued to the sentence.
  EXPECT_EQ((m + ": unknown").find("keeps running: unknown"), std::string::npos);
  EXPECT_EQ(status_message("runc start of container \"c\" failed: container does not exist"),
            "runc start of container \"c\" failed: container does not exist")
      << "one line: containerd's usual \"<what> failed: <cause>: <class>\"";
  EXPECT_EQ(status_message("one line\n"), "one line");
}
