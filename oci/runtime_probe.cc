#include "oci/runtime_probe.h"

#include "common/error.h"
#include "common/log.h"

namespace nvproxy::oci {

std::string RuntimeProbe::output_of(const std::vector<std::string>& argv) {
  std::string cmd;
  for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
  RunResult r = runner_.run({.argv = argv, .new_process_group = true, .timeout = deadline_});
  if (r.timed_out)
    throw Error(Code::DeadlineExceeded, "`" + cmd + "` did not answer within " + std::to_string(deadline_.count()) + " ms");
  if (!r.ok()) throw Error(Code::Unknown, "`" + cmd + "` failed: " + r.describe());
  return r.out;
}

RuntimeFeatures RuntimeProbe::runtime(const std::string& binary) {
  std::lock_guard lk(mu_);
  if (auto it = runtimes_.find(binary); it != runtimes_.end()) return it->second;
  RuntimeKind kind = runtime_kind_from_binary(binary);
  RuntimeFeatures f{.kind = kind};
  try {
    std::string version = output_of({binary, "--version"});
    std::string features, checkpoint_help;
    if (kind == RuntimeKind::Runc) {
      try {
        features = output_of({binary, "features"});
      } catch (const Error& e) {
        log_.debug(std::string("runtime probe: ") + e.what());  // a runc without `features` (1.0): the version decides
      }
      try {
        checkpoint_help = output_of({binary, "checkpoint", "--help"});
      } catch (const Error& e) {
        log_.debug(std::string("runtime probe: ") + e.what());  // then no --link-remap is given
      }
    }
    f = parse_runtime_features(kind, version, features, checkpoint_help);
  } catch (const Error& e) {
    f.error = e.what();
  }
  if (f.error.empty())
    log_.info(std::string("runtime ") + binary + ": " + runtime_kind_name(kind) + " " + f.version +
              (kind == RuntimeKind::Runsc ? ""
               : f.criu_flag              ? ", CRIU named with --criu"
                                          : ", CRIU found through PATH"));
  else
    log_.warn("runtime " + binary + ": version unknown (" + f.error + "); CRIU is found through PATH");
  return runtimes_[binary] = f;
}

CriuInfo RuntimeProbe::criu(const std::string& criu_path) {
  std::lock_guard lk(mu_);
  if (auto it = criu_.find(criu_path); it != criu_.end()) return it->second;
  CriuInfo c;
  std::string binary = criu_path.empty() ? find_program("criu") : criu_path;
  if (binary.empty()) {
    c.error = "no criu in PATH";
  } else {
    try {
      c = parse_criu_version(output_of({binary, "--version"}));
    } catch (const Error& e) {
      c.error = e.what();
    }
    if (c.error.empty()) {
      try {
        const std::string help = output_of({binary, "--help"});
        c.skip_zero_pages = criu_help_lists_skip_zero_pages(help);
        c.page_io = criu_help_lists_option(help, "--page-writers") && criu_help_lists_option(help, "--restore-huge-pages");
        c.page_readers = c.page_io && criu_help_lists_option(help, "--page-readers");
        c.resumed_fifo = c.page_io && criu_help_lists_option(help, "--resumed-fifo");
        c.write_gate = c.resumed_fifo && criu_help_lists_option(help, "--write-gate");
      } catch (const Error& e) {
        log_.warn("CRIU " + binary + ": --help failed (" + e.what() + "); zero pages are punched after its dump");
      }
    }
  }
  c.binary = binary.empty() ? "criu" : binary;
  if (c.error.empty())
    log_.info("CRIU " + c.binary + ": version " + c.version +
              (c.skip_zero_pages ? ", leaves zero pages out (--skip-zero-pages)" : "") +
              (c.page_io ? ", writes each process's pages from a writer process (--page-writers), restores into huge "
                           "pages (--restore-huge-pages)"
                         : "") +
              (c.page_readers ? ", reads them in with several threads (--page-readers)" : "") +
              (c.resumed_fifo ? ", resumes a leave-running dump before its pages are written (--resumed-fifo)" : "") +
              (c.write_gate ? ", writes them once the caller's resume is done (--write-gate)" : ""));
  else
    log_.warn("CRIU " + c.binary + ": version unknown (" + c.error + ")");
  return criu_[criu_path] = c;
}

}  // namespace nvproxy::oci
