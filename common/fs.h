// File helpers with errors that name the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/unique_fd.h"

namespace nvproxy {

// The bound read_file puts on a file unless told another (docs/configuration.md, "Bounds").
inline constexpr std::size_t kMaxReadFileBytes = 64u << 20;

// The whole of a regular file. Opened non-blocking, so a FIFO, a device (/dev/zero), a socket or a
// directory is refused at once, never read or waited on: Error(InvalidArgument) naming the path and
// what it is. A file of more than `max_bytes` is refused the same way, naming its size and the
// bound, before it is read whole. Other failures: sys_error naming the path.
std::string read_file(const std::filesystem::path& p, std::size_t max_bytes = kMaxReadFileBytes);

// What kind of file a stat mode is, for messages: "a directory", "a FIFO", "a character device"...
std::string_view file_kind(unsigned mode);
// Writes via a temp file + rename so a crash never leaves a half-written file.
void write_file_atomic(const std::filesystem::path& p, std::string_view data, unsigned mode = 0644);
// /dev/null opened with `flags` (O_CLOEXEC added); throws Error.
UniqueFd open_devnull(int flags);
// A close-on-exec pipe; throws Error naming `what` (what it is for).
void make_pipe(UniqueFd& read_end, UniqueFd& write_end, const std::string& what);
// Writes all of `data` to fd (retrying short writes and EINTR); false with errno set on failure.
bool write_all(int fd, std::string_view data);
// The same at `offset` (pwrite), the file's position untouched: threads writing one file at once.
bool write_all_at(int fd, std::string_view data, std::uint64_t offset);
// Reads up to `n` bytes at `offset` (pread, EINTR retried); how many, or -1 with errno set.
long read_at(int fd, char* buf, std::size_t n, std::uint64_t offset);
// Reads until `n` bytes at `offset` or the end of the file: how many (fewer than n only where the
// file ended), or -1 with errno set.
long read_full_at(int fd, char* buf, std::size_t n, std::uint64_t offset);
// Writes into an existing file without creating or truncating it (cgroup and proc files).
void write_existing_file(const std::filesystem::path& p, std::string_view data);
// Resolves `rel` under `root` lexically and refuses results outside root (".." escapes).
std::filesystem::path join_within(const std::filesystem::path& root, const std::filesystem::path& rel);
bool path_within(const std::filesystem::path& root, const std::filesystem::path& p);

}  // namespace nvproxy
