// The "gpu-setup" OCI hook (createContainer): after the runtime mounted the driver files and made
// the device nodes, and before pivot_root, it
//   - checks every recorded GPU device node exists in the rootfs as that char device,
//   - creates the soname links the record lists (we bind real files only, never links),
//   - writes /etc/ld.so.conf.d/nvproxy.conf and refreshes the rootfs' ld cache with the host's
//     static ldconfig (-r ROOTFS); without one, the links alone let the loader find libraries in the
//     standard dirs.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace nvproxy::hooks {

struct GpuSetupOptions {
  std::string ldconfig;      // host ldconfig; empty: /sbin/ldconfig, /usr/sbin/ldconfig
  bool run_ldconfig = true;  // false: write the conf file only
  // Run by runsc's gofer (hook arg --runsc): gVisor's nvproxy passes only /dev/nvidiactl,
  // /dev/nvidia-uvm and /dev/nvidiaN through; the other recorded nodes (nvidia-uvm-tools,
  // nvidia-modeset, nvidia-caps/*) never exist there and are not checked.
  bool runsc = false;
};

// `state`: the OCI state (id, pid, bundle, annotations). Reads bundle/config.json for root.path
// (and the record when state has no annotations). Warnings go to `err`. Throws Error; the caller
// prefixes the container id.
void run_gpu_setup(const nlohmann::json& state, const GpuSetupOptions& opts, std::ostream& err);

}  // namespace nvproxy::hooks
