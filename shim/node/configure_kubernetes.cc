#include <iostream>

#include "common/error.h"
#include "shim/node/cli_args.h"
#include "shim/node/configure.h"

namespace nvproxy::node {

namespace {

const char* kUsage =
    "Usage: containerd-shim-nvproxy-v1 configure kubernetes [--runtime-name NAME] [--name CLASS]\n"
    "         [--node-selector KEY=VALUE] [--overhead-memory QTY] [--overhead-cpu QTY]\n\n"
    "Prints the RuntimeClass whose handler is the CRI runtime NAME (default nvproxy) that `configure containerd`\n"
    "added: kubectl apply -f - < it. Pods then ask for it with runtimeClassName: CLASS (default NAME).\n"
    "  --node-selector KEY=VALUE  scheduling.nodeSelector: only nodes with this label run such pods (repeatable\n"
    "                             as a comma-separated list)\n"
    "  --overhead-memory QTY      overhead.podFixed.memory (the shim's own memory per pod, e.g. 20Mi)\n"
    "  --overhead-cpu QTY         overhead.podFixed.cpu\n";

// A YAML scalar in double quotes where it is not plain text.
std::string scalar(const std::string& s) {
  if (!s.empty() &&
      s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./") == std::string::npos &&
      s != "true" && s != "false" && s != "null")
    return s;
  std::string q = "\"";
  for (char c : s) q += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return q + "\"";
}

}  // namespace

int configure_kubernetes(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto [f, done] =
      parse_command("configure kubernetes", args,
                    {"--runtime-name", "--name", "--node-selector", "--overhead-memory", "--overhead-cpu"}, {}, kUsage, out, err);
  if (done) return *done;
  const std::string handler = f.value("--runtime-name", "nvproxy");
  const std::string name = f.value("--name", handler);
  // A handler must be a DNS label (Kubernetes validates it; containerd's runtime name is the same).
  for (const std::string* s : {&handler, &name}) {
    if (s->empty() || s->size() > 63 || s->find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos ||
        s->front() == '-' || s->back() == '-') {
      err << "configure kubernetes: \"" << *s << "\" is not a RuntimeClass name (lower case letters, digits, '-')\n";
      return 1;
    }
  }
  out << "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: " << name << "\nhandler: " << handler
      << "   # containerd's runtimes." << handler << " (configure containerd --runtime-name " << handler << ")\n";
  const std::string mem = f.value("--overhead-memory"), cpu = f.value("--overhead-cpu");
  if (!mem.empty() || !cpu.empty()) {
    out << "overhead:\n  podFixed:\n";
    if (!cpu.empty()) out << "    cpu: " << scalar(cpu) << "\n";
    if (!mem.empty()) out << "    memory: " << scalar(mem) << "\n";
  }
  if (const std::string sel = f.value("--node-selector"); !sel.empty()) {
    out << "scheduling:\n  nodeSelector:\n";
    std::size_t pos = 0;
    while (pos <= sel.size()) {
      std::size_t comma = sel.find(',', pos);
      const std::string kv = sel.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        err << "configure kubernetes: --node-selector wants KEY=VALUE, not \"" << kv << "\"\n";
        return 1;
      }
      out << "    " << scalar(kv.substr(0, eq)) << ": " << scalar(kv.substr(eq + 1)) << "\n";
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  return 0;
}

}  // namespace nvproxy::node
