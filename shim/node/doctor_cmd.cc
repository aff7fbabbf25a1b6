#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "shim/node/cli_args.h"
#include "shim/node/doctor.h"

namespace nvproxy::node {

const char* status_name(Status s) {
  switch (s) {
    case Status::Ok: return "ok";
    case Status::Warn: return "warn";
    case Status::Fail: return "fail";
  }
  return "?";
}

std::vector<Check> run_doctor(DoctorContext& ctx) {
  std::vector<Check> checks;
  tool_checks(ctx, checks);
  const GpuFacts gpus = gpu_facts(ctx);
  gpu_checks(ctx, gpus, checks);
  host_checks(ctx, gpus, checks);
  return checks;
}

int doctor_exit_code(const std::vector<Check>& checks) {
  for (const auto& c : checks)
    if (c.needed && c.status == Status::Fail) return 1;
  return 0;
}

void print_checks(const std::vector<Check>& checks, std::ostream& out) {
  for (const auto& c : checks) {
    // A failure of a check a GPU checkpoint does not need reads as a warning.
    const Status shown = c.status == Status::Fail && !c.needed ? Status::Warn : c.status;
    out << std::left << std::setw(5) << status_name(shown) << std::setw(24) << c.name << c.detail;
    if (!c.remedy.empty() && c.status != Status::Ok) out << "\n" << std::string(29, ' ') << "-> " << c.remedy;
    out << "\n";
  }
  out << (doctor_exit_code(checks) == 0 ? "this node can checkpoint GPU containers\n"
                                        : "this node cannot checkpoint GPU containers: see the fail lines\n");
}

void print_checks_json(const std::vector<Check>& checks, std::ostream& out) {
  nlohmann::ordered_json j;
  j["ok"] = doctor_exit_code(checks) == 0;
  j["checks"] = nlohmann::ordered_json::array();
  for (const auto& c : checks)
    j["checks"].push_back(
        {{"name", c.name}, {"status", status_name(c.status)}, {"needed", c.needed}, {"detail", c.detail}, {"remedy", c.remedy}});
  out << j.dump(2) << "\n";
}

int doctor_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const char* usage =
      "Usage: containerd-shim-nvproxy-v1 doctor [--config FILE] [--containerd-config FILE] [--json]\n\n"
      "Whether this node can checkpoint GPU containers: one line per check (ok, warn, fail) with its remedy. Reads\n"
      "files and asks programs their versions (each under a deadline); changes nothing, starts no container.\n"
      "Exit 0 when every check a GPU checkpoint needs passes, 1 otherwise.\n"
      "  --config FILE             the shim's config (default: $NVPROXY_SHIM_CONFIG, /etc/containerd-shim-nvproxy/config.yaml)\n"
      "  --containerd-config FILE  containerd's (default /etc/containerd/config.toml)\n"
      "  --json                    {\"ok\": bool, \"checks\": [{name, status, needed, detail, remedy}]}\n";
  auto [f, done] = parse_command("doctor", args, {"--config", "--containerd-config"}, {"--json"}, usage, out, err);
  if (done) return *done;
  DirectWaiter waiter;
  ProcessRunner runner(waiter);
  shim::ShimConfig cfg;
  try {
    cfg = shim::load_config(f.value("--config"));
  } catch (const std::exception& e) {
    err << "doctor: " << e.what() << "\n";
    return 1;
  }
  DoctorContext ctx{.cfg = std::move(cfg),
                    .containerd_config = f.value("--containerd-config", "/etc/containerd/config.toml"),
                    .runner = runner};
  const auto checks = run_doctor(ctx);
  if (f.on("--json")) {
    print_checks_json(checks, out);
  } else {
    out << "shim config: " << ctx.cfg.source << "\n";
    print_checks(checks, out);
  }
  return doctor_exit_code(checks);
}

}  // namespace nvproxy::node
