#include "checkpoint/report/hints.h"

#include <gtest/gtest.h>

using namespace nvproxy::checkpoint;

// Seen on the GPU machine: a multiprocessing 'spawn' child (same python, another command line) that
// opened /dev/nvidiactl itself was called "forked without exec".
TEST(Hints, ForkedVersusSpawnedChild) {
  ProcInfo parent{.pid = 727,
                  .ppid = 1,
                  .name = "python3",
                  .cmdline = "python3 /probe/gpu_workload.py with-holder",
                  .exe = "/usr/bin/python3.12"};
  ProcInfo forked = parent;
  forked.pid = 780;
  forked.ppid = 727;
  EXPECT_NE(hint_not_cuda(forked, &parent, "/dev/nvidiactl", "error 3").find("forked from CUDA process 727 without exec"),
            std::string::npos);
  ProcInfo spawned = forked;
  spawned.cmdline =
      "python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7) --multiprocessing-fork";
  std::string h = hint_not_cuda(spawned, &parent, "/dev/nvidiactl", "error 3");
  EXPECT_EQ(h.find("without exec"), std::string::npos) << h;
  EXPECT_NE(h.find("pid 780 is not a CUDA process"), std::string::npos) << h;
}
