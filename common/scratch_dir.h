// A directory of this process's own, removed with everything in it when it goes out of scope (a
// layout being pushed or pulled, an entry not finished). What a killed run left at that path is
// removed first; the directory is made 0700.
#pragma once

#include <filesystem>
#include <system_error>
#include <utility>

namespace nvproxy {

class ScratchDir {
 public:
  explicit ScratchDir(std::filesystem::path p) : path_(std::move(p)) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::create_directories(path_);
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::replace, ec);
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace nvproxy
