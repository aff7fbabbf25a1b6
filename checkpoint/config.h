// Checkpoint settings (the `checkpoint:` section of the shim's config; the shim parses the YAML).
#pragma once

#include <string>
#include <vector>

namespace nvproxy::checkpoint {

// checkpoint.staging_memory: lift (the limits that would be crossed are raised while device memory
// lives in host memory) or refuse (the checkpoint is refused with the figures). Parsed once, where
// the configuration is read (staging_bill.h: parse_staging_mode).
enum class StagingMode { Lift, Refuse };

struct CheckpointConfig {
  std::string cuda = "driver-api";  // driver-api | cuda-checkpoint | none
  std::string cuda_checkpoint_path = "cuda-checkpoint";
  std::string libcuda = "libcuda.so.1";
  std::string libnvml = "libnvidia-ml.so.1";
  std::string cuda_helper;  // nvproxy-cuda-helper; empty: beside the shim, then ../libexec (cuda_helper_client.h)
  unsigned lock_timeout_ms = 10000;
  // Deadline of one process's CUDA checkpoint or restore (the driver moves about 1.4 GiB/s of device
  // memory measured on an H200): the call fails and the checkpoint rolls back; the driver call
  // itself is left to finish.
  unsigned toggle_timeout_ms = 10 * 60 * 1000;
  unsigned parallelism = 0;  // 0 = all at once, 1 = sequential
  std::vector<std::string> device_globs{"/dev/nvidia*"};
  bool allow_unrestorable = false;  // operator override of the multi-GPU refusal
  // A CUDA process outside the init's process tree (started by exec) is not brought back by a
  // restore (runc restores the init's tree): the checkpoint is refused unless this is set.
  bool allow_lost_cuda_processes = false;
  // Before any toggle: the image must fit where it is written (device + process memory), and a
  // second time in containerd's content store when containerd copies it there (content_store:
  // containerd's root; the copy goes to its io.containerd.content.v1.content).
  bool check_space = true;
  std::string content_store = "/var/lib/containerd";
  // Deadlines of the runtime's `checkpoint` (runc + CRIU writing the image) and `restore`; on expiry
  // the runtime's process group is killed (the shim hands these to oci::RuntimeConfig).
  unsigned snapshot_timeout_ms = 30 * 60 * 1000;
  unsigned restore_timeout_ms = 30 * 60 * 1000;
  // A checkpoint request without options stops the task (as exit: true would). Docker 26 sends no
  // options to a runtimeType other than io.containerd.runc.v2, so its default `checkpoint create`
  // (stop) and `--leave-running` reach the shim alike; this picks which one they mean.
  bool exit_without_options = false;
  // A process forked from a CUDA process that holds only its ancestor's GPU device files (release.h):
  // its copies are left out of the image by the shim's CRIU plugin and come back as /dev/null and
  // empty reservations (runc, crun). false: such a container is refused, as before.
  bool release_inherited = true;
  // Every thread of the container stopped (ptrace, through nvproxy-cuda-helper) from the CUDA lock
  // to the resume, the driver's restore threads let in for its calls (container_hold.h); runc and
  // crun with checkpoint.cuda: driver-api. false: the processes run while their CUDA state is
  // checkpointed, as before 0.6.0 (JAX's die then).
  bool hold_still = true;
  // Zero pages out of the image: left out by CRIU where it has --skip-zero-pages (the project's
  // patch), else punched out of its page files after the snapshot (zero_pages.h); left out by runsc
  // itself (--exclude-committed-zero-pages). false: every page is kept.
  bool skip_zero_pages = true;
  std::string criu_plugin_dir;  // where nvproxy_criu_release.so is; empty: default_criu_plugin_dir()
  // The shim's own image store (image_store.h): the runtime writes images there and the directory
  // containerd handed over gets a reference, so that containerd's copies are a few hundred bytes.
  // Empty: off (every image is self-contained where containerd asked for it).
  std::string image_store;
  unsigned image_store_keep = 3;  // entries kept per container; older ones go at its next checkpoint
  // Images to and from a registry (image_transfer.h, http_registry.h).
  bool registry_tls_verify = true;     // false: plain HTTP or unverified TLS (a registry on loopback)
  std::string registry_authfile;       // empty: $REGISTRY_AUTH_FILE, containers' auth.json, Docker's config.json
  unsigned registry_timeout_s = 3600;  // one blob or manifest at most
  // Chunks moving at once. Each chunk costs the registry a few requests and files of its own, so
  // small chunks need more of them in flight: the sglang shape at 16 MiB chunks (H100, one machine,
  // bench/README section 8) pushed at 0.72x of cp with 8 and 0.76-0.80x with 16; B's pull and
  // restore took 2.01x the local restore with 8 and 1.50x with 16.
  unsigned registry_streams = 16;
  // The largest chunk of a file: a checkpoint taken again sends each chunk with a change in it again,
  // so smaller chunks send less of what did not change, but each chunk is a blob with its own
  // requests. The sglang shape's second checkpoint after serving sent 6.6 % of its bytes at 64 MiB,
  // 5.4 % at 32 and 3.3-3.7 % at 16 (the floor, pages found nowhere in the first: 0.6 %).
  unsigned registry_chunk_mib = 16;
  // "zstd": a push sends each chunk that shrinks by a tenth compressed (level 1). Pays for the
  // pages of CPU-heavy processes over links slower than the CPUs compress (bench/README); device
  // memory does not compress, so "none" by default. Pulls read either.
  std::string registry_compression = "none";
  // The registry is spoken by nvproxy-image-transfer, not by the shim (its TLS and HTTP parsing stay
  // out of every container's daemon): empty, beside the shim, then ../libexec (as cuda_helper).
  std::string image_transfer;
  // The deadline of each run of it for a restore (the image's record, the pull, a Kubernetes
  // checkpoint image): on expiry it is killed with its process group and the create or restore
  // fails; the pull's whole chunks stay for the next try.
  unsigned image_transfer_timeout_s = 4 * 3600;
  [[nodiscard]] bool known_registry_compression() const {
    return registry_compression == "none" || registry_compression == "zstd";
  }
  // Restore by annotation (restore.nvproxy.io/<container name> in the spec, a pod annotation
  // under Kubernetes): a checkpoint image is process memory that CRIU restores as root, so it is
  // off unless enabled here, and only images of the repositories listed (prefixes, "host:5000/ckpt")
  // pinned by digest are pulled.
  bool annotation_restore = false;
  std::vector<std::string> annotation_registries;
  // The driver stages device memory in the process's own memory (staging_bill.h): limits over the
  // container that this would cross are lifted for the staging's time (lift), or the checkpoint
  // is refused with the figures (refuse). The host's room is checked either way.
  StagingMode staging_memory = StagingMode::Lift;
  unsigned staging_margin_mib = 256;  // kept free beyond the staging, in every cgroup and on the host
  // Where MemAvailable is read (tests point it at a file of their own to play a host short of room).
  std::string host_meminfo = "/proc/meminfo";
  // The host-wide account of staging in flight, shared by every shim (host_reservations.h).
  std::string staging_account = "/run/containerd-shim-nvproxy/staging.json";
};

}  // namespace nvproxy::checkpoint
