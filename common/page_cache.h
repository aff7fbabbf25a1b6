// How much of a file the kernel holds in its page cache: a restore that reads an image from a
// cold cache reads it from the disk, where a read that bypasses the cache is the faster one.
#pragma once

#include <filesystem>
#include <optional>

namespace nvproxy {

// The share of FILE's bytes in the page cache, 0 to 1, from cachestat(2) (Linux 6.5); nullopt
// where the kernel has no cachestat or the file cannot be opened. Reads nothing of the file.
std::optional<double> page_cache_share(const std::filesystem::path& file);

}  // namespace nvproxy
