// Which regular files a CRIU image's processes need from the filesystem at the restore: every
// regular file (or directory) CRIU recorded by path, with the process and fd that held it open
// where one did (a file reached only through a mapping, a cwd or an executable has no fd). Files
// CRIU keeps in the image or beside it (ghost and link-remap files of unlinked files) and external
// files are left out: the restore does not open them by their path.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

struct CriuOpenFile {
  pid_t pid = 0;                      // in the container's pid namespace; 0: no process holds it as an fd
  std::string comm;                   // that process's name
  int fd = -1;                        // -1: mapped, a cwd or an executable
  std::string path;                   // as the container saw it ("/out/progress.tmp")
  std::uint32_t flags = 0;            // open(2) flags
  std::uint64_t pos = 0;              // the fd's offset
  std::optional<std::uint64_t> size;  // recorded by CRIU for files not open for writing (it refuses another size)
  std::optional<std::uint32_t> mode;  // st_mode at the dump

  [[nodiscard]] bool writing() const;
};

// Throws Error(InvalidArgument) naming the image file when one is malformed, NotFound when the
// directory is not a CRIU image (no pstree.img).
std::vector<CriuOpenFile> criu_open_files(const std::filesystem::path& image_dir);

}  // namespace nvproxy::checkpoint
