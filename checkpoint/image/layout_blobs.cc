#include "checkpoint/image/layout_blobs.h"

#include <unistd.h>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

fs::path blob_path(const fs::path& layout, const std::string& digest) {
  return layout / "blobs" / "sha256" / digest.substr(digest.find(':') + 1);
}

LayoutFile add_blob(const fs::path& file, const fs::path& layout, ProcessRunner& runner) {
  fs::create_directories(layout / "blobs" / "sha256");
  for (const LayoutFile& d : digest_files(file.parent_path(), runner))
    if (d.path == file.filename().string()) {
      fs::rename(file, blob_path(layout, d.digest));
      return d;
    }
  throw Error(Code::Internal, "no digest of " + file.string());
}

namespace {

// "sha256:<hex>" of `text`, written to `scratch`.
std::string digest_of_text(const std::string& text, const fs::path& scratch, ProcessRunner& runner) {
  write_file_atomic(scratch, text, 0600);
  Command c{.argv = {"sha256sum", "--", scratch.string()}, .timeout = std::chrono::seconds(30)};
  RunResult r = runner.run(c);
  if (!r.ok() || r.out.size() < 64) throw Error(Code::Internal, "sha256sum of " + scratch.string() + ": " + r.describe());
  return "sha256:" + r.out.substr(0, 64);
}

}  // namespace

LayoutFile add_blob_text(const std::string& text, const fs::path& layout, ProcessRunner& runner) {
  fs::create_directories(layout / "blobs" / "sha256");
  const fs::path scratch = layout / (".blob-" + std::to_string(::getpid()) + ".tmp");
  LayoutFile d{.digest = digest_of_text(text, scratch, runner), .size = text.size()};
  fs::rename(scratch, blob_path(layout, d.digest));
  return d;
}

void write_layout_top(const fs::path& layout, const nlohmann::json& descriptor) {
  const nlohmann::json top = {{"schemaVersion", 2}, {"manifests", nlohmann::json::array({descriptor})}};
  write_file_atomic(layout / "index.json", top.dump(), 0600);
  write_file_atomic(layout / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})", 0600);
}

std::string run_tar(std::vector<std::string> argv, ProcessRunner& runner, const std::string& what) {
  argv.insert(argv.begin(), "tar");
  RunResult r = runner.run(Command{.argv = std::move(argv), .timeout = std::chrono::minutes(10)});
  if (!r.ok()) throw Error(Code::Internal, what + ": tar failed: " + r.describe());
  return r.out;
}

}  // namespace nvproxy::checkpoint
