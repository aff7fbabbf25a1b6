#include <iostream>

#include "common/error.h"
#include "shim/node/cli_args.h"
#include "shim/node/config_file.h"
#include "shim/node/configure.h"
#include "shim/node/docker_config.h"
#include "shim/node/text_diff.h"

namespace nvproxy::node {

namespace {

const char* kUsage =
    "Usage: containerd-shim-nvproxy-v1 configure docker [--config FILE] [--runtime-name NAME] [--shim-config FILE]\n"
    "         [--exit-config FILE | --no-exit-runtime] [--set-as-default] [--experimental] [--dry-run]\n\n"
    "Adds runtimes.NAME (default nvproxy, runtimeType io.containerd.nvproxy.v1) to Docker's daemon.json, and\n"
    "runtimes.NAME-exit, whose shim config makes `docker checkpoint create` stop the container (Docker 26 sends\n"
    "checkpoint options only to runc's runtime type), keeping every other setting.\n"
    "  --config FILE        default /etc/docker/daemon.json\n"
    "  --shim-config FILE   the shim's config for NAME (options.ConfigPath)\n"
    "  --exit-config FILE   NAME-exit's shim config (default /etc/containerd-shim-nvproxy/exit.yaml; written when\n"
    "                       absent, from --shim-config or /etc/containerd-shim-nvproxy/config.yaml)\n"
    "  --no-exit-runtime    no NAME-exit\n"
    "  --set-as-default     default-runtime = NAME\n"
    "  --experimental       \"experimental\": true (docker checkpoint needs it)\n"
    "  --dry-run            print the diff, write nothing\n"
    "The original is kept as FILE.nvproxy-orig. Restart dockerd afterwards (systemctl restart docker).\n";

}  // namespace

int configure_docker(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto [f, done] = parse_command("configure docker", args, {"--config", "--runtime-name", "--shim-config", "--exit-config"},
                                 {"--no-exit-runtime", "--set-as-default", "--experimental", "--dry-run"}, kUsage, out, err);
  if (done) return *done;
  const std::filesystem::path config = f.value("--config", "/etc/docker/daemon.json");
  DockerEntry entry{.name = f.value("--runtime-name", "nvproxy"),
                    .shim_config = f.value("--shim-config"),
                    .set_as_default = f.on("--set-as-default"),
                    .experimental = f.on("--experimental")};
  entry.exit_config = f.on("--no-exit-runtime") ? "" : f.value("--exit-config", entry.exit_config);
  const bool dry = f.on("--dry-run");
  try {
    for (const std::string* p : {&entry.shim_config, &entry.exit_config})
      if (!p->empty() && p->front() != '/') throw Error(Code::InvalidArgument, "\"" + *p + "\" is not an absolute path");
    if (!entry.shim_config.empty() && !std::filesystem::exists(entry.shim_config))
      out << "note: --shim-config " << entry.shim_config << " does not exist (yet): containers of " << entry.name
          << " fail to start until it does\n";
    const auto text = read_config_text(config);
    const JsonEdit edit = edit_docker_config(text.value_or(""), config.string(), entry);

    // NAME-exit's shim config: written when absent, so the runtime works once dockerd has it.
    std::string exit_text;
    bool write_exit = false;
    if (!entry.exit_config.empty()) {
      const auto existing = read_config_text(entry.exit_config);
      if (!existing) {
        const std::string base_path = entry.shim_config.empty() ? "/etc/containerd-shim-nvproxy/config.yaml" : entry.shim_config;
        exit_text = exit_shim_config(read_config_text(base_path).value_or(""), base_path);
        write_exit = true;
      } else if (!exits_without_options(*existing)) {
        out << entry.exit_config << ": checkpoint.exit_without_options is not true there, so " << entry.name
            << "-exit's checkpoints keep the container running; set it\n";
      }
    }

    if (!edit.changed && !write_exit) {
      out << "nothing to change: " << config.string() << " already has the runtime " << entry.name << "\n";
      return 0;
    }
    for (const auto& n : edit.notes) out << config.string() << ": " << n << "\n";
    if (dry) {
      if (edit.changed) out << unified_diff(edit.before, edit.after, config.string(), config.string() + " (configured)");
      if (write_exit) out << unified_diff("", exit_text, "/dev/null", entry.exit_config);
      out << "dry run: nothing written\n";
      return 0;
    }
    if (write_exit) {
      replace_config(entry.exit_config, exit_text);
      out << "wrote " << entry.exit_config << "\n";
    }
    if (edit.changed) {
      const auto backup = replace_config(config, edit.after);
      out << "wrote " << config.string();
      if (!backup.empty()) out << "; the original is " << backup.string();
      out << "\n";
    }
    out << "restart dockerd (systemctl restart docker); then: docker run --runtime " << entry.name << " ...\n";
    return 0;
  } catch (const std::exception& e) {
    err << "configure docker: " << e.what() << "; nothing was written\n";
    return 1;
  }
}

}  // namespace nvproxy::node
