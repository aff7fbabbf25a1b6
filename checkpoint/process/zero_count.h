// What a checkpoint will write, not what is allocated: the zero pages of a process's private
// memory, counted while it is stopped. Once the driver's checkpoint has staged device memory in
// host memory, a pool nothing wrote (a KV cache, a JAX arena) is present pages of zeros, which a
// CRIU with --skip-zero-pages (and runsc with --exclude-committed-zero-pages) leaves out of the
// image. The space check asks this when the image as allocated would not fit (space_check.h).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>

namespace nvproxy::checkpoint {

struct ZeroCount {
  std::uint64_t present = 0;  // bytes of present pages in the private anonymous mappings looked at
  std::uint64_t zero = 0;     // of them, bytes of pages that hold only zeros
  // false: the time was up before every window was read; `zero` is then what was found (a lower
  // bound: what is left counts as data).
  bool complete = true;
};

struct ZeroCountOptions {
  std::filesystem::path proc = "/proc";
  unsigned threads = 0;  // 0: the machine's cores, at most 8
  // The count runs while CUDA is checkpointed: bounded. A mapping reserved huge and barely used
  // (a sanitizer's shadow spans terabytes) is read window by window until then.
  std::chrono::milliseconds time_limit{30000};
};

// Reads PID's maps, its pagemap (which pages are present, and which are the kernel's shared zero
// page: those count in no RSS and are not counted here) and its memory (/proc/PID/mem), in windows
// on several threads. Only private anonymous mappings: what CRIU can leave out. Throws Error naming
// the pid and the file, also when the pagemap shows no page frames (no CAP_SYS_ADMIN): the kernel's
// zero page could not be told apart then.
ZeroCount count_zero_pages(pid_t pid, const ZeroCountOptions& opts = {});

}  // namespace nvproxy::checkpoint
