#include <iostream>
#include <set>

#include "common/error.h"
#include "common/version.h"
#include "shim/node/cli_args.h"
#include "shim/node/config_file.h"
#include "shim/node/configure.h"
#include "shim/node/containerd_config.h"
#include "shim/node/probe.h"
#include "shim/node/text_diff.h"

namespace nvproxy::node {

namespace {

const char* kUsage =
    "Usage: containerd-shim-nvproxy-v1 configure containerd [--config FILE] [--drop-in] [--runtime-name NAME]\n"
    "         [--shim-config FILE] [--set-as-default] [--dry-run] [--containerd-version V]\n\n"
    "Adds the runtime io.containerd.nvproxy.v1 to containerd's CRI plugin as runtimes.NAME (default nvproxy), in\n"
    "the config version the installed containerd reads (2 for 1.6 and 1.7, 3 for 2.x), keeping every other setting.\n"
    "  --config FILE          containerd's config (default /etc/containerd/config.toml)\n"
    "  --drop-in              containerd 2.x: write the entry to a file of the config's imports directory\n"
    "  --runtime-name NAME    the CRI handler (RuntimeClass handler); default nvproxy\n"
    "  --shim-config FILE     the shim's config for this runtime (options.ConfigPath)\n"
    "  --set-as-default       make it CRI's default runtime (default_runtime_name)\n"
    "  --dry-run              print the diff, write nothing\n"
    "  --containerd-version V instead of asking `containerd --version`\n"
    "The original is kept as FILE.nvproxy-orig. Comments are not carried over. Restart containerd afterwards.\n";

bool has_comments(const std::string& text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t first = text.find_first_not_of(" \t", pos);
    if (first != std::string::npos && text[first] == '#') return true;
    pos = text.find('\n', pos);
    if (pos == std::string::npos) break;
    ++pos;
  }
  return false;
}

struct Change {
  std::filesystem::path path;
  const TomlEdit* edit;
  std::string original;  // the file's bytes ("" when absent)
  bool exists;
};

}  // namespace

int configure_containerd(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, ProcessRunner& runner) {
  auto [f, done] =
      parse_command("configure containerd", args, {"--config", "--runtime-name", "--shim-config", "--containerd-version"},
                    {"--drop-in", "--set-as-default", "--dry-run"}, kUsage, out, err);
  if (done) return *done;
  const std::filesystem::path config = f.value("--config", "/etc/containerd/config.toml");
  RuntimeEntry entry{.name = f.value("--runtime-name", "nvproxy"),
                     .shim_config = f.value("--shim-config"),
                     .set_as_default = f.on("--set-as-default")};
  std::vector<std::string> written;  // for an error after the first of two files was written
  try {
    if (entry.name.empty() || entry.name.find_first_of("/ \t\n\"'") != std::string::npos)
      throw Error(Code::InvalidArgument, "--runtime-name \"" + entry.name + "\" is not a runtime name");
    if (!entry.shim_config.empty() && entry.shim_config.front() != '/')
      throw Error(Code::InvalidArgument, "--shim-config must be an absolute path (containerd starts the shim elsewhere)");
    int major = 0;
    std::string version_said;
    if (f.values.count("--containerd-version")) {
      version_said = f.value("--containerd-version");
      auto v = parse_version(version_said.rfind('v', 0) == 0 ? version_said.substr(1) : version_said);
      if (!v) throw Error(Code::InvalidArgument, "--containerd-version \"" + version_said + "\" is not a version");
      major = v->major;
    } else {
      ProbeResult p = probe(runner, {"containerd", "--version"});
      if (p.ok()) {
        major = containerd_major(p.out);
        version_said = p.out.substr(0, p.out.find('\n'));
      } else {
        out << "containerd's version unknown (" << p.problem << "): the config's own version decides\n";
      }
    }
    if (major != 0 && major != 1 && major != 2)
      throw Error(Code::InvalidArgument, "containerd " + version_said + ": this command knows containerd 1.x and 2.x");
    // The shim refuses a container whose explicit ConfigPath does not exist.
    if (!entry.shim_config.empty() && !std::filesystem::exists(entry.shim_config))
      out << "note: --shim-config " << entry.shim_config << " does not exist (yet): containers of " << entry.name
          << " fail to start until it does\n";

    const std::optional<std::string> main_text = read_config_text(config);
    std::vector<Change> changes;
    TomlEdit main_edit;
    DropInEdit dropin;
    if (f.on("--drop-in")) {
      dropin = edit_containerd_dropin(main_text.value_or(""), config, major, entry, read_config_text);
      const auto dropin_text = read_config_text(dropin.path);
      // The drop-in first: the main file's import then never names a directory without it.
      changes.push_back({dropin.path, &dropin.dropin, dropin_text.value_or(""), dropin_text.has_value()});
      changes.push_back({config, &dropin.main, main_text.value_or(""), main_text.has_value()});
    } else {
      main_edit = edit_containerd_config(main_text.value_or(""), config.string(), major, entry);
      if (major == 2 && main_edit.version == 2 && main_edit.changed)
        out << config.string() << ": a version 2 config, which containerd 2.x migrates each time it starts "
            << "(`containerd config migrate` prints it in the latest version); edited as version 2\n";
      changes.push_back({config, &main_edit, main_text.value_or(""), main_text.has_value()});
    }

    bool any = false;
    for (const Change& c : changes) {
      if (!c.edit->changed) continue;
      any = true;
      for (const auto& n : c.edit->notes) out << c.path.string() << ": " << n << "\n";
      if (c.exists && has_comments(c.original))
        out << c.path.string() << ": its comments are not carried over (the original stays beside it)\n";
      if (f.on("--dry-run")) {
        out << unified_diff(c.edit->before, c.edit->after, c.path.string(), c.path.string() + " (configured)");
        continue;
      }
      const auto backup = replace_config(c.path, c.edit->after);
      written.push_back(c.path.string());
      out << "wrote " << c.path.string() << " (config version " << c.edit->version << ")";
      if (!backup.empty()) out << "; the original is " << backup.string();
      out << "\n";
    }
    if (!any) {
      out << "nothing to change: " << (f.on("--drop-in") ? dropin.path : config).string() << " already has the runtime "
          << entry.name << " (" << kRuntimeType << ")\n";
      return 0;
    }
    if (f.on("--dry-run")) {
      out << "dry run: nothing written\n";
    } else {
      out << "restart containerd (systemctl restart containerd) for CRI to serve the handler " << entry.name
          << "; Kubernetes: containerd-shim-nvproxy-v1 configure kubernetes --runtime-name " << entry.name << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    err << "configure containerd: " << e.what();
    if (written.empty()) {
      err << "; nothing was written\n";
    } else {
      err << "; already written: " << written.front() << " (its original is beside it)\n";
    }
    return 1;
  }
}

}  // namespace nvproxy::node
