// `containerd-shim-nvproxy-v1 doctor`: whether this node can checkpoint GPU containers, one check a
// line with its remedy. It reads files and asks programs their versions (each under a deadline);
// it changes nothing and starts no container.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "common/process.h"
#include "common/version.h"
#include "shim/task/config.h"

namespace nvproxy::node {

enum class Status { Ok, Warn, Fail };
const char* status_name(Status s);

struct Check {
  std::string name;  // "criu", "iptables-restore", ...
  Status status = Status::Ok;
  std::string detail;  // what was found
  std::string remedy;  // what to do; "" when ok
  // A GPU checkpoint fails without it: a Fail here makes doctor exit 1 (other Fails are warnings
  // about one way of using the node, e.g. CRI without the runtime).
  bool needed = true;
};

struct DoctorContext {
  shim::ShimConfig cfg;
  std::filesystem::path containerd_config = "/etc/containerd/config.toml";
  ProcessRunner& runner;
  std::filesystem::path proc = "/proc";
  std::filesystem::path sys = "/sys";
  // containerd's version, as its check found it (tool_checks run first); the io_uring check says
  // what containerd's default seccomp profile does about io_uring.
  std::optional<Version> containerd;
};

struct GpuInfo {
  std::string name, uuid;
  std::uint64_t memory_bytes = 0;  // 0: unknown (no nvidia-smi)
};
struct GpuFacts {
  std::string driver_version;  // "580.159.04"; "" without a driver
  std::vector<GpuInfo> gpus;
  [[nodiscard]] std::uint64_t largest() const;
  [[nodiscard]] std::uint64_t total() const;
};

GpuFacts gpu_facts(DoctorContext& ctx);
void gpu_checks(DoctorContext& ctx, const GpuFacts& facts, std::vector<Check>& out);
void host_checks(DoctorContext& ctx, const GpuFacts& facts, std::vector<Check>& out);
void tool_checks(DoctorContext& ctx, std::vector<Check>& out);

// Every check, in the order printed.
std::vector<Check> run_doctor(DoctorContext& ctx);
// 0 when no needed check failed, else 1.
int doctor_exit_code(const std::vector<Check>& checks);
void print_checks(const std::vector<Check>& checks, std::ostream& out);
void print_checks_json(const std::vector<Check>& checks, std::ostream& out);

// "doctor [--config FILE] [--containerd-config FILE] [--json]"
int doctor_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Helpers the checks share (exposed for their unit tests); sizes are checkpoint::format_bytes's.
// Whether the ELF file at `lib` names each of `symbols` in its dynamic string table; the missing ones.
std::vector<std::string> missing_symbols(const std::filesystem::path& lib, const std::vector<std::string>& symbols);

}  // namespace nvproxy::node
