// A forked child's inherited GPU device files dropped inside the running process.
//
// Under runc the shim's CRIU plugin leaves such files out of the image and the running container
// is never touched (release.h). A gVisor sandbox has no such hook: its own checkpoint saves every
// open file and fails on the GPU's ("nvproxy.frontendFD is not saveable"). There the sandbox
// agent makes the child itself replace them, through ptrace, just before the sandbox's checkpoint:
// each inherited fd becomes /dev/null (dup2 over it, the same number) and each device mapping an
// inaccessible anonymous reservation at the same address (mmap MAP_FIXED, PROT_NONE). The child
// has no CUDA context and cannot create one over its parent's files (the driver refuses CUDA in a
// forked child), so nothing it can still do needs them; all its threads are stopped meanwhile.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

struct AddressRange {
  std::uintptr_t start = 0;
  std::uintptr_t end = 0;  // exclusive
};

struct DropRequest {
  pid_t pid = 0;
  std::vector<int> fds;
  std::vector<AddressRange> mappings;
};

// Makes `pid` replace its `fds` by /dev/null and its `mappings` by PROT_NONE reservations, then
// lets it run on exactly where it was (a system call it was blocked in is restarted). Stops every
// thread of the process for the duration. Throws Error naming the pid and the step (the errno of
// the injected call, or of ptrace); on a failure after some fds were replaced, those stay replaced.
// x86-64 only. The caller needs ptrace rights over pid (same uid and CAP_SYS_PTRACE, or its parent).
void drop_in_place(const DropRequest& req, std::chrono::milliseconds timeout = std::chrono::seconds(10));

// Which of `fds` of `pid` are the very open file description of one of `theirs` of `other`, as
// {pid's fd: other's fd}. gVisor has no kcmp; the kernel's own answer is had this way instead: pid
// itself (ptrace, every thread stopped) flips O_APPEND on each fd and back, and an fd of `other`
// whose flags (PROC/OTHER/fdinfo) flipped with it shares the description (status flags belong to
// the description). O_APPEND, because a device's ioctl and mmap ignore it. Throws Error.
std::map<int, int> shared_with(pid_t pid, const std::vector<int>& fds, pid_t other, const std::vector<int>& theirs,
                               std::chrono::milliseconds timeout = std::chrono::seconds(10));

// The address ranges of pid's mappings whose backing file (PROC/PID/maps path) is one of `paths`.
std::vector<AddressRange> mappings_of(pid_t pid, const std::vector<std::string>& paths);

}  // namespace nvproxy::checkpoint
