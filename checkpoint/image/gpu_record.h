// The image record's "gpu" part (nvproxy-cuda.json, image_record.h): what each CUDA process used
// at checkpoint, as NVML saw it before the toggle (gpu_facts.h). The restore preflight
// (checkpoint/preflight/restore_preflight.h) compares it with the restoring host's facts.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/facts/gpu_facts.h"

namespace nvproxy::checkpoint {

// A process as the record names it.
struct ProcessIdentity {
  pid_t host_pid = 0;  // at checkpoint
  pid_t pid = 0;       // in the container's pid namespace: the same after the restore
  std::string name;    // comm, "python3"
};

struct RecordedProcess {
  ProcessIdentity id;
  std::vector<GpuProcessUse> gpus;  // empty when NVML did not list it
};

// The "gpu" object of nvproxy-cuda.json.
struct GpuRecord {
  std::string driver_version;
  std::vector<GpuDeviceFacts> devices;  // the devices the processes used, as the checkpointing host saw them
  std::vector<RecordedProcess> processes;
};

// The record for these CUDA processes from the facts NVML gave before they were toggled.
GpuRecord make_gpu_record(const GpuHostFacts& facts, const std::vector<ProcessIdentity>& cuda_processes);
nlohmann::json to_json(const GpuRecord& r);
// Throws Error(InvalidArgument) naming what is malformed.
GpuRecord gpu_record_from_json(const nlohmann::json& j);

}  // namespace nvproxy::checkpoint
