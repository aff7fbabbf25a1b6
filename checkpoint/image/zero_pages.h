// Images hold data, not allocations. CRIU writes every present page of a process into
// IMAGE/pages-N.img, zeros included, and most of a CUDA process's memory after the driver's
// checkpoint can be zeros: device memory staged into host memory for a pool it preallocated and
// never wrote (vLLM's KV cache, sglang's static fraction, a JAX arena). This pass, run right after
// the runtime's snapshot, punches every run of zero 4 KiB pages out of the page files
// (fallocate PUNCH_HOLE, size kept): the files read back the very same bytes, their blocks are
// freed, dirty zero pages not yet written back never reach the disk, and a restore reads holes
// without any disk I/O. runsc has its own switch for the same (--exclude-committed-zero-pages).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace nvproxy::checkpoint {

struct ZeroPunch {
  int files = 0;              // page files looked at
  std::uint64_t scanned = 0;  // bytes of them read (holes already there are skipped)
  std::uint64_t punched = 0;  // bytes of zero pages turned into holes
  std::string not_supported;  // the filesystem cannot punch holes: why (nothing was changed)
};

// The page files of a CRIU image: IMAGE/pages-*.img.
bool is_criu_page_file(const std::filesystem::path& p);

// The files are read through mappings in windows, several threads at once: the pass runs while the
// checkpoint is still being answered, so it must cost little beside CRIU (measured on the H200 with
// one thread and read(): 3.3 s for 24 GiB of data, 7.6 s for 21 GiB of zeros).
struct ZeroPunchOptions {
  std::size_t window_bytes = 64u << 20;
  unsigned threads = 0;  // 0: the machine's cores, at most 8
};

// Punches the zero pages out of every page file in `image_dir`. Throws Error naming the file on a
// read or punch failure other than "not supported"; the file's bytes are unchanged either way.
ZeroPunch punch_zero_pages(const std::filesystem::path& image_dir, const ZeroPunchOptions& opts = {});

}  // namespace nvproxy::checkpoint
