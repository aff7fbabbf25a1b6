// containerd, the OCI runtime, CRIU and the programs CRIU runs.
#include <toml++/toml.h>

#include "checkpoint/preflight/criu_dump_checks.h"
#include "checkpoint/preflight/criu_kernel_check.h"
#include "common/log.h"
#include "oci/runtime_probe.h"
#include "shim/node/containerd_config.h"
#include "shim/node/doctor.h"
#include "shim/node/probe.h"

namespace nvproxy::node {

namespace {

struct CriRuntime {
  std::string name, config_path;  // config_path: options.ConfigPath, "" when none
};

// The CRI runtimes whose runtime_type is ours in a config (containerd's `config dump`).
std::vector<CriRuntime> our_runtimes(const std::string& toml_text) {
  std::vector<CriRuntime> names;
  try {
    toml::table doc = toml::parse(toml_text);
    for (const char* plugin : {"io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime"}) {
      const toml::table* rts = doc["plugins"][plugin]["containerd"]["runtimes"].as_table();
      if (!rts) continue;
      for (const auto& [name, rt] : *rts)
        if (rt.is_table() && (*rt.as_table())["runtime_type"].value<std::string>() == kRuntimeType)
          names.push_back({std::string(name.str()), (*rt.as_table())["options"]["ConfigPath"].value_or(std::string())});
    }
  } catch (const toml::parse_error&) {
  }
  return names;
}

void containerd_checks(DoctorContext& ctx, std::vector<Check>& out) {
  Check c{.name = "containerd"};
  ProbeResult v = probe(ctx.runner, {"containerd", "--version"});
  if (!v.ok()) {
    c.status = Status::Fail;
    c.detail = v.problem;
    c.remedy = "install containerd 1.6 or later";
    out.push_back(c);
    return;
  }
  c.detail = v.out.substr(0, v.out.find('\n'));
  ctx.containerd = containerd_version(v.out);
  if (const auto& ver = ctx.containerd; ver && *ver < Version{1, 6, 0}) {
    c.status = Status::Fail;
    c.remedy = "containerd 1.6 or later";
  }
  out.push_back(c);

  Check cri{.name = "containerd CRI runtime", .needed = false};
  ProbeResult dump = probe(ctx.runner, {"containerd", "--config", ctx.containerd_config.string(), "config", "dump"});
  if (!dump.ok()) {
    cri.status = Status::Warn;
    cri.detail = "cannot read containerd's config " + ctx.containerd_config.string() + ": " + dump.problem;
    cri.remedy = "containerd-shim-nvproxy-v1 configure containerd --config " + ctx.containerd_config.string() + " --dry-run";
  } else if (auto names = our_runtimes(dump.out); names.empty()) {
    cri.status = Status::Warn;
    cri.detail =
        ctx.containerd_config.string() + " has no CRI runtime of type " + kRuntimeType + " (ctr, nerdctl and Docker need none)";
    cri.remedy = "containerd-shim-nvproxy-v1 configure containerd, then restart containerd (Kubernetes, crictl)";
  } else {
    cri.detail = "CRI runtime";
    std::string missing;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const auto& r = names[i];
      cri.detail += (i ? ", " : " ") + r.name + (r.config_path.empty() ? "" : " (ConfigPath " + r.config_path + ")");
      if (!r.config_path.empty() && !std::filesystem::exists(r.config_path)) missing += " " + r.config_path;
    }
    cri.detail += " in " + ctx.containerd_config.string();
    if (!missing.empty()) {
      cri.status = Status::Fail;
      cri.detail += "; missing:" + missing;
      cri.remedy = "create the shim config it names, or drop ConfigPath: the shim refuses containers whose ConfigPath is missing";
    }
  }
  out.push_back(cri);
}

}  // namespace

void tool_checks(DoctorContext& ctx, std::vector<Check>& out) {
  containerd_checks(ctx, out);

  Logger quiet(-1);
  oci::RuntimeProbe rp(ctx.runner, quiet, kProbeDeadline);
  const std::string& binary = ctx.cfg.runtime.binary;
  const oci::RuntimeKind kind = oci::runtime_kind_from_binary(binary);
  const oci::RuntimeFeatures rf = rp.runtime(binary);
  Check rt{.name = "runtime"};
  if (!rf.error.empty()) {
    rt.status = Status::Fail;
    rt.detail = "runtime.binary " + binary + ": " + rf.error;
    rt.remedy = "install " + binary + " or set runtime.binary in " + ctx.cfg.source;
  } else {
    rt.detail = std::string(oci::runtime_kind_name(kind)) + " " + rf.version + " (runtime.binary " + binary + ")";
    if (auto why = oci::checkpoint_unsupported(rf, binary); !why.empty()) {
      rt.status = Status::Fail;
      rt.detail += ": " + why;
      rt.remedy = kind == oci::RuntimeKind::Crun ? "build crun with CRIU (scripts/build-crun.sh) or use runc"
                                                 : "use a runc that can checkpoint";
    }
  }
  out.push_back(rt);
  // The other runtimes on this node, for the operator who switches: their versions only.
  for (const char* other : {"runc", "crun", "runsc"}) {
    if (binary == other || find_program(other).empty()) continue;
    const auto f = rp.runtime(other);
    out.push_back({.name = other,
                   .status = Status::Ok,
                   .detail = f.error.empty() ? f.version + " (not the configured runtime)" : f.error,
                   .needed = false});
  }
  if (kind == oci::RuntimeKind::Runsc) return;  // runsc checkpoints without CRIU

  const oci::CriuInfo criu = rp.criu(ctx.cfg.runtime.criu_path);
  Check cr{.name = "criu"};
  if (!criu.error.empty() || !criu.numbers) {
    cr.status = Status::Fail;
    cr.detail = (ctx.cfg.runtime.criu_path.empty() ? std::string("criu") : ctx.cfg.runtime.criu_path) + ": " +
                (criu.error.empty() ? "version unknown" : criu.error);
    cr.remedy = "install CRIU 4.2 or later: bash scripts/build-criu.sh (or set runtime.criu_path)";
    out.push_back(cr);
  } else {
    cr.detail = "CRIU " + criu.version + " (" + criu.binary + ")";
    if (*criu.numbers < Version{4, 0, 0}) {
      cr.status = Status::Fail;
      cr.remedy = "CRIU before 4.0 fails on recent kernels (\"Unexpected rt vDSO area bounds\"): bash scripts/build-criu.sh";
    } else if (!criu.skip_zero_pages) {
      cr.status = Status::Warn;
      cr.detail += ", without --skip-zero-pages: zero pages are written, then punched out of the image";
      cr.remedy = "bash scripts/build-criu.sh builds CRIU with the project's --skip-zero-pages";
    } else if (!criu.page_io || !criu.page_readers) {
      // An earlier build of the project's CRIU: checkpoints work, at one CPU's page rate.
      cr.status = Status::Warn;
      cr.detail += ", the project's build without its page I/O (--page-writers, --page-readers, --restore-huge-pages)";
      cr.remedy = "bash scripts/build-criu.sh rebuilds it with the page I/O patch (large processes dump and restore faster)";
    } else {
      cr.detail += ", the project's build (--skip-zero-pages, page I/O)";
    }
    out.push_back(cr);
    const std::string kernel = checkpoint::kernel_release();
    if (auto conflict = checkpoint::criu_kernel_conflict(criu.version, kernel))
      out.push_back({.name = "criu and kernel",
                     .status = Status::Warn,
                     .detail = *conflict,
                     .remedy = "CRIU 4.2 or later (bash scripts/build-criu.sh)",
                     .needed = false});

    Check ck{.name = "criu check"};
    ProbeResult p = probe(ctx.runner, {criu.binary, "check"}, std::chrono::seconds(30));
    if (!p.ok()) {
      ck.status = Status::Fail;
      std::string said = p.err.empty() ? p.out : p.err;
      if (said.size() > 400) said = "..." + said.substr(said.size() - 400);
      ck.detail = p.problem + (said.empty() ? "" : ": " + said);
      while (!ck.detail.empty() && ck.detail.back() == '\n') ck.detail.pop_back();
      ck.remedy = "CRIU cannot checkpoint on this kernel: see `criu check --all` and CRIU's kernel requirements";
    } else {
      ck.detail = "criu check: " + p.out.substr(0, p.out.find('\n'));
    }
    out.push_back(ck);
  }

  Check ipt{.name = "iptables-restore"};
  if (checkpoint::has_criu_option(ctx.cfg.runtime.criu_options, "network-lock")) {
    ipt.detail = "not needed: checkpoint.criu_options sets CRIU's network-lock";
  } else if (const std::string p = find_program("iptables-restore"); p.empty()) {
    ipt.status = Status::Fail;
    ipt.detail = "not in PATH: CRIU locks a container's network namespace with it, so every such checkpoint fails";
    ipt.remedy = "install iptables (apt install iptables), or add \"network-lock skip\" to checkpoint.criu_options";
  } else {
    ipt.detail = p;
  }
  out.push_back(ipt);
}

}  // namespace nvproxy::node
