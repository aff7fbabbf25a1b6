#include "oci/runtime_features.h"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "common/text.h"

namespace nvproxy::oci {

namespace {

// The line of `out` that starts with `prefix`, without it; empty when there is none.
std::string line_after(const std::string& out, const std::string& prefix) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  return "";
}

}  // namespace

RuntimeFeatures parse_runtime_features(RuntimeKind kind, const std::string& version_out, const std::string& features_out,
                                       const std::string& checkpoint_help) {
  RuntimeFeatures f{.kind = kind};
  // "runc version 1.1.5+ds1", "crun version 1.8.1", "runsc version release-20260817.0-70-g3c5eee17d-go-d53e01b47280"
  f.version = trim(line_after(version_out, std::string(runtime_kind_name(kind)) + " version "));
  if (f.version.empty()) {
    f.error = "no \"" + std::string(runtime_kind_name(kind)) + " version\" line in its --version output";
    return f;
  }
  if (kind == RuntimeKind::Runsc) {
    // runsc: a dated release, "release-20260817.0-70-g..." (Debian: "0.0~20240729.0"); not a semantic version.
    if (auto g = f.version.find("-go-"); g != std::string::npos) f.version.erase(g);
    return f;
  }
  f.numbers = parse_version(f.version);
  if (kind == RuntimeKind::Runc) {
    f.criu_flag = f.numbers && *f.numbers < Version{1, 2, 0};
    f.link_remap_flag = checkpoint_help.find("--link-remap") != std::string::npos;
    auto j = nlohmann::json::parse(features_out, nullptr, false);
    if (j.is_object() && j.contains("annotations") && j["annotations"].is_object()) {
      const auto& a = j["annotations"];
      auto it = a.find("org.opencontainers.runc.checkpoint.enabled");
      if (it != a.end() && it->is_string()) f.checkpoint = *it == "true";
    }
  } else if (kind == RuntimeKind::Crun) {
    // The feature line: "+SYSTEMD +SELINUX +APPARMOR +CAP +SECCOMP +EBPF +CRIU +YAJL".
    std::istringstream in(version_out);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind('+', 0) != 0) continue;
      f.checkpoint = (" " + line + " ").find(" +CRIU ") != std::string::npos;
    }
  }
  return f;
}

std::string checkpoint_unsupported(const RuntimeFeatures& f, const std::string& binary) {
  if (f.checkpoint.value_or(true)) return "";
  std::string who = std::string(runtime_kind_name(f.kind)) + (f.version.empty() ? "" : " " + f.version) + " (" + binary + ")";
  if (f.kind == RuntimeKind::Crun)
    return who + " is built without CRIU (`crun --version` lists no +CRIU) and has no checkpoint command";
  return who + " says checkpoint is not enabled (org.opencontainers.runc.checkpoint.enabled in `runc features`)";
}

bool criu_help_lists_option(const std::string& help, std::string_view option) {
  // An option's own line, not a word of another's description.
  std::istringstream in(help);
  for (std::string line; std::getline(in, line);) {
    std::string t = trim(line);
    if (t.rfind(option, 0) == 0 && (t.size() == option.size() || t[option.size()] == ' ')) return true;
  }
  return false;
}

std::optional<std::uint64_t> criu_zero_pages_left_out(const std::filesystem::path& dump_log) {
  std::ifstream in(dump_log);
  std::optional<std::uint64_t> bytes;
  static constexpr std::string_view kKey = "Zero pages left out: ";
  for (std::string line; std::getline(in, line);) {
    auto at = line.find(kKey);
    if (at == std::string::npos) continue;
    auto kib = line.find('(', at);
    if (kib == std::string::npos) continue;
    bytes = bytes.value_or(0) + std::strtoull(line.c_str() + kib + 1, nullptr, 10) * 1024;
  }
  return bytes;
}

CriuInfo parse_criu_version(const std::string& out) {
  CriuInfo c;
  c.version = trim(line_after(out, "Version: "));
  if (c.version.empty()) {
    c.error = "no \"Version:\" line in its --version output";
    return c;
  }
  c.numbers = parse_version(c.version);
  // CRIU prints "Version: 4.1" for x.y releases.
  if (!c.numbers) c.error = "unparsable version \"" + c.version + "\"";
  return c;
}

}  // namespace nvproxy::oci
