// The pipe protocol between the shim and nvproxy-cuda-helper, the small dynamically linked program
// that loads the CUDA driver and NVML for it. The shim is a static binary (one runs per container,
// so it maps as little as it can) and a static program cannot dlopen a driver; the helper also
// keeps libcuda's memory and threads out of every long-lived shim: it exits after the checkpoint.
//
// One JSON object per line each way. Requests {"id": N, "op": OP, "pid": P, "timeout_ms": T} with
// OP one of describe, get_state, lock, checkpoint, restore, unlock, gpus_by_pid, host_facts (the
// driver version, devices and per-process device memory: gpu_facts.h); requests are
// served concurrently (the orchestrator toggles processes in parallel), answers come back tagged
// with their id, in any order: {"id": N, "ok": true, "result": ...} or {"id": N, "ok": false,
// "error": {...}} where the error keeps everything a CudaError or Error carried.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/cuda_toggler.h"

namespace nvproxy::checkpoint::helper_protocol {

// Calls on_line for each '\n'-terminated line read from fd (without the '\n') until EOF or a read
// error; a last line without '\n' is dropped (the peer died mid-line).
void read_lines(int fd, const std::function<void(std::string&&)>& on_line);

nlohmann::json error_to_json(const Error& e);              // keeps CudaError's pid, op, driver code and name
[[noreturn]] void throw_error(const nlohmann::json& err);  // the inverse: rethrows what the helper caught

}  // namespace nvproxy::checkpoint::helper_protocol
