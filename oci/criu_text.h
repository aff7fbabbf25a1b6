// CRIU's text: the configuration file the shim writes for it, and the lines of its log an error
// quotes, with what to do about them.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace nvproxy::oci {

// The decisive lines of a CRIU log, indented: its "Error" lines without those every run prints
// (RLIMIT_NOFILE), the first one (the cause) always, and the last ones (how it gave up), at most
// `max_lines` with a "..." between; empty when the log is missing or holds none.
std::string criu_errors(const std::filesystem::path& log, size_t max_lines = 5);

// What to do about the CRIU errors above, when an option would have helped: one sentence naming
// checkpoint.criu_options, or empty.
std::string criu_option_hint(const std::string& errors);

// CRIU configuration file text for `options` (one per line; a leading "--" is dropped). Throws
// Error(InvalidArgument) for an empty option or one with a line break.
std::string criu_config_text(const std::vector<std::string>& options);

}  // namespace nvproxy::oci
