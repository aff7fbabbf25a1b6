#pragma once
namespace nvproxy::shim {
inline constexpr const char* kVersion = NVPROXY_VERSION;
inline constexpr const char* kBinaryName = "containerd-shim-nvproxy-v1";
inline constexpr const char* kRuntimeType = "io.containerd.nvproxy.v1";
}  // namespace nvproxy::shim
