// File helpers with errors that name the file.
#pragma once

#include <filesystem>
#include <string>

namespace nvproxy {

std::string read_file(const std::filesystem::path& p);  // throws Error
// Writes via a temp file + rename so a crash never leaves a half-written file.
void write_file_atomic(const std::filesystem::path& p, std::string_view data, unsigned mode = 0644);
// Resolves `rel` under `root` lexically and refuses results outside root (".." escapes).
std::filesystem::path join_within(const std::filesystem::path& root, const std::filesystem::path& rel);
bool path_within(const std::filesystem::path& root, const std::filesystem::path& p);

}  // namespace nvproxy
