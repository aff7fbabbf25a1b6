#include "checkpoint/image/skopeo_registry.h"

#include <unistd.h>

#include <filesystem>

#include "common/error.h"
#include "common/fs.h"

namespace nvproxy::checkpoint {

namespace fs = std::filesystem;

namespace {

std::string tls_flag(const char* side, bool verify) {
  return std::string("--") + side + "tls-verify=" + (verify ? "true" : "false");
}

std::string trim_end(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// skopeo's last error line ("time=... level=fatal msg=\"...\"") without the noise around it.
std::string last_line(const std::string& err) {
  std::string s = trim_end(err);
  auto nl = s.rfind('\n');
  if (nl != std::string::npos) s = s.substr(nl + 1);
  // logrus' form: time="..." level=fatal msg="what happened"
  auto msg = s.find("msg=\"");
  if (msg != std::string::npos && s.size() > msg + 6 && s.back() == '"') s = s.substr(msg + 5, s.size() - msg - 6);
  return s;
}

}  // namespace

RunResult SkopeoRegistry::run(std::vector<std::string> args, const std::string& what, std::chrono::seconds timeout) {
  std::string bin = find_program(opts_.skopeo);
  if (bin.empty())
    throw Error(Code::FailedPrecondition,
                what + ": skopeo (" + opts_.skopeo + ") is not installed; the registry transfer needs it");
  // skopeo refuses to copy without a signature policy, which a node without containers-common
  // lacks (measured: Ubuntu 24.04 with skopeo alone). The checkpoint's trust is its pinned digest,
  // checked blob by blob, not a signature: without a policy file, none is asked for.
  if (args.front() == "copy" && !std::filesystem::exists(opts_.policy_file)) args.insert(args.begin(), "--insecure-policy");
  args.insert(args.begin(), bin);
  Command c{.argv = std::move(args), .new_process_group = true, .timeout = timeout};
  RunResult r = runner_.run(c);
  if (r.timed_out)
    throw DeadlineError("skopeo", what, std::chrono::duration_cast<std::chrono::milliseconds>(timeout), r.killed_pgid,
                        "killed skopeo");
  if (!r.ok()) throw Error(Code::Unavailable, what + " failed: " + last_line(r.err));
  return r;
}

ImageRegistry::Manifest SkopeoRegistry::manifest(const std::string& reference) {
  std::vector<std::string> args{"inspect", "--raw", tls_flag("", opts_.tls_verify)};
  if (!opts_.authfile.empty()) args.push_back("--authfile=" + opts_.authfile);
  args.push_back("docker://" + reference);
  Manifest m;
  m.text = run(args, "reading the manifest of " + reference, std::chrono::seconds(120)).out;
  // The digest of exactly these bytes, which a pull by digest then pins.
  std::string bin = find_program(opts_.skopeo);
  Command c{.argv = {bin, "manifest-digest", "/dev/stdin"}, .stdin_data = m.text, .timeout = std::chrono::seconds(30)};
  RunResult r = runner_.run(c);
  if (!r.ok()) throw Error(Code::Internal, "the digest of the manifest of " + reference + ": " + r.describe());
  m.digest = r.out.substr(0, r.out.find_first_of("\r\n"));
  return m;
}

std::string SkopeoRegistry::push(const fs::path& layout, const std::string& tag, const std::string& reference) {
  fs::path digest_file = layout / "pushed.digest";
  std::vector<std::string> args{"copy", "--quiet", "--retry-times=2", tls_flag("dest-", opts_.tls_verify),
                                "--digestfile=" + digest_file.string()};
  if (!opts_.authfile.empty()) args.push_back("--dest-authfile=" + opts_.authfile);
  args.push_back("oci:" + layout.string() + ":" + tag);
  args.push_back("docker://" + reference);
  run(args, "pushing the checkpoint image to " + reference, opts_.timeout);
  return trim_end(read_file(digest_file));
}

void SkopeoRegistry::pull(const std::string& reference, const fs::path& layout, const std::string& tag) {
  std::vector<std::string> args{"copy", "--quiet", "--retry-times=2", tls_flag("src-", opts_.tls_verify)};
  if (!opts_.authfile.empty()) args.push_back("--src-authfile=" + opts_.authfile);
  args.push_back("docker://" + reference);
  args.push_back("oci:" + layout.string() + ":" + tag);
  run(args, "pulling the checkpoint image " + reference, opts_.timeout);
}

}  // namespace nvproxy::checkpoint
