// Reading and replacing the configuration files of other programs (containerd, Docker): the
// original is kept beside the file before it is replaced, and the replacement is atomic.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace nvproxy::node {

// The text of `path`; nullopt when it does not exist. Throws Error naming the path otherwise (a
// directory, unreadable, larger than 4 MiB).
std::optional<std::string> read_config_text(const std::filesystem::path& path);

// FILE.nvproxy-orig, or FILE.nvproxy-orig.N (N = 2, 3, ...) where earlier ones exist: an earlier
// original is never overwritten.
std::filesystem::path backup_path(const std::filesystem::path& path);

// Replaces `path` with `text` (temp file and rename, the old file's mode kept; 0644 for a new one,
// its directory created). When the file exists its bytes are first copied to backup_path(), which
// is returned; empty when there was no file.
std::filesystem::path replace_config(const std::filesystem::path& path, const std::string& text);

}  // namespace nvproxy::node
