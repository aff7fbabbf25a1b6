// The restore preflight: can this host give the checkpointed CUDA processes back?
//
// At checkpoint the shim records in the image (nvproxy-cuda.json, key "gpu") what each CUDA
// process used: the GPU(s) it had contexts on (model, UUID) and the device memory it held there,
// and the driver version. Before the runtime restores anything, the shim asks this host's NVML for
// the same facts and compares: the driver branch must be the same (580 of 580.159.04), each
// recorded GPU needs a GPU of the same model here (another UUID of the same model is allowed, with a
// warning), and each such GPU needs as much free memory as the processes held on the recorded one.
//
//   restore of "c1" refused: pid 41 (python3) was checkpointed on "NVIDIA H200" (GPU-79f8...)
//   with 4.7 GiB; this host's GPU 0 is "NVIDIA A100-SXM4-80GB" (GPU-0c1d...), no "NVIDIA H200"
//
// check_restore is pure (record + host facts -> refusals), so that every case is tested without a
// driver.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/facts/gpu_facts.h"
#include "checkpoint/image/gpu_record.h"
#include "checkpoint/shared/cuda_toggler.h"

namespace nvproxy::checkpoint {

// From PROC/PID/comm and the NSpid line of PROC/PID/status; a process that is gone keeps its host
// pid as pid and an empty name.
ProcessIdentity identify_process(pid_t host_pid, const std::filesystem::path& proc_root = "/proc");

struct RestoreRefusal {
  std::string kind;                // driver | model | missing | memory | nvml
  std::vector<pid_t> pids;         // container pids of the processes concerned
  std::string gpu_uuid, gpu_name;  // the recorded GPU (empty for driver and nvml)
  std::string message;             // "pid 41 (python3) was checkpointed on ...; this host's GPU 0 is ..."
};

struct RestoreCheck {
  std::vector<RestoreRefusal> refusals;
  std::vector<std::string> warnings;          // e.g. restored onto another GPU of the same model
  std::map<std::string, unsigned> placement;  // recorded GPU UUID -> this host's device index
  // When any recorded GPU is placed on another one: every recorded GPU paired with its placement
  // (the driver wants them all), for the CUDA restore. Empty: the same GPUs.
  DeviceMap device_map;
};

// The GPUs a restoring container is given, as this host's UUIDs, from its request's tokens
// (NVIDIA_VISIBLE_DEVICES entries or the device part of CDI names: an index, a "GPU-" UUID,
// "all"). nullopt: no restriction (no tokens, or "all"). Tokens naming no GPU here go to unknown.
std::optional<std::set<std::string>> visible_gpus(const std::vector<std::string>& tokens, const GpuHostFacts& host,
                                                  std::vector<std::string>& unknown);

// Pure: what of the record this host cannot give back. visible: the GPUs the restoring container
// is given (visible_gpus); only those are places to restore onto.
RestoreCheck check_restore(const GpuRecord& rec, const GpuHostFacts& host,
                           const std::optional<std::set<std::string>>& visible = std::nullopt);
// The refusal when this host's NVML cannot be had (not loadable, failing) while the record needs GPUs.
RestoreRefusal nvml_unavailable(const GpuRecord& rec, const std::string& error);

// `restore of "ID" refused: MSG; MSG ...`.
std::string refusal_text(const std::string& container, const std::vector<RestoreRefusal>& refusals);
// checkpoint-diagnostic.json of a refused restore: container, verdict "refused", operation
// "restore", reason (the text), refusals, warnings, recorded (the record), host (the facts, or
// host_error).
nlohmann::json refusal_diagnostic(const std::string& container, const GpuRecord& rec, const GpuHostFacts* host,
                                  const std::string& host_error, const RestoreCheck& check);

}  // namespace nvproxy::checkpoint
