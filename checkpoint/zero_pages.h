// Images hold data, not allocations. CRIU writes every present page of a process into
// IMAGE/pages-N.img, zeros included, and most of a CUDA process's memory after the driver's
// checkpoint can be zeros: device memory staged into host memory for a pool it preallocated and
// never wrote (vLLM's KV cache, sglang's static fraction, a JAX arena). This pass, run right after
// the runtime's snapshot, punches every run of zero 4 KiB pages out of the page files
// (fallocate PUNCH_HOLE, size kept): the files read back the very same bytes, their blocks are
// freed, dirty zero pages not yet written back never reach the disk, and a restore reads holes
// without any disk I/O. runsc has its own switch for the same (--exclude-committed-zero-pages).
#pragma once

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

// Punches the zero pages out of every page file in `image_dir`. Throws Error naming the file on a
// read or punch failure other than "not supported"; the file's bytes are unchanged either way.
ZeroPunch punch_zero_pages(const std::filesystem::path& image_dir);

}  // namespace nvproxy::checkpoint
