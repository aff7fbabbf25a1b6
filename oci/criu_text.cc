#include "oci/criu_text.h"

#include <fstream>

#include "common/error.h"

namespace nvproxy::oci {

std::string criu_config_text(const std::vector<std::string>& options) {
  std::string text;
  for (std::string o : options) {
    if (o.rfind("--", 0) == 0) o.erase(0, 2);
    if (o.find_first_not_of(" \t") == std::string::npos || o.find_first_of("\n\r") != std::string::npos)
      throw Error(Code::InvalidArgument, "CRIU option \"" + o + "\": must be one non-empty line");
    text += o + "\n";
  }
  return text;
}

std::string criu_option_hint(const std::string& errors) {
  if (errors.find("link-remap") != std::string::npos || errors.find("link remap") != std::string::npos)
    return "hint: CRIU needs its link-remap option (files unlinked while in use, e.g. POSIX semaphores of Python "
           "multiprocessing): add \"link-remap\" to checkpoint.criu_options";
  if (errors.find("ghost") != std::string::npos && errors.find("limit") != std::string::npos)
    return "hint: a file unlinked while in use is larger than CRIU's ghost-limit: raise \"ghost-limit\" in "
           "checkpoint.criu_options";
  if (errors.find("tcp-established") != std::string::npos || errors.find("Connected TCP socket") != std::string::npos)
    return "hint: the container has established TCP connections: checkpoint with --tcp-established, or add "
           "\"tcp-established\" to checkpoint.criu_options";
  // One image restored into several containers on the host's network: each replica's process binds
  // the same abstract unix socket in the one namespace they share (seen on the H200 with 3 replicas).
  if (errors.find("unix") != std::string::npos && errors.find("Can't bind") != std::string::npos &&
      errors.find("Address already in use") != std::string::npos)
    return "hint: a unix socket of the image (named above; \"@\" is an abstract one) is bound already in this "
           "network namespace: another container restored from the same image shares it (host networking). Give "
           "each replica its own network namespace";
  return "";
}

namespace {
// Error lines CRIU prints in runs that succeed too: quoting them first hid the cause.
bool criu_noise(const std::string& line) {
  return line.find("rlimit: Can't setup RLIMIT_NOFILE") != std::string::npos;
}
}  // namespace

std::string criu_errors(const std::filesystem::path& log, size_t max_lines) {
  std::ifstream in(log);
  std::vector<std::string> errors;
  for (std::string line; std::getline(in, line);)
    if ((line.find("Error (") != std::string::npos || line.find("Error:") != std::string::npos) && !criu_noise(line))
      errors.push_back(line);
  if (errors.empty() || max_lines == 0) return "";
  // The first error is the cause; the ones after it are how CRIU gave up (the last say which step
  // failed). Both ends are kept when there are more than max_lines.
  std::vector<std::string> kept;
  if (errors.size() <= max_lines) {
    kept = errors;
  } else {
    kept.push_back(errors.front());
    kept.push_back("...");
    kept.insert(kept.end(), errors.end() - static_cast<std::ptrdiff_t>(max_lines - 1), errors.end());
  }
  std::string out;
  for (const auto& l : kept) out += "  " + l + "\n";
  out.pop_back();
  return out;
}

}  // namespace nvproxy::oci
