#!/usr/bin/env python3
"""Writes the seed corpus (corpus/<target>/seed-*) from scratch: run it after changing a seed here.
Crash regression inputs (corpus/<target>/crash-*) are kept by hand and never rewritten.
Protobuf is encoded by hand (tag, varint, length-delimited) so no Python protobuf is needed."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "cdi")


def varint(n):
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def f_bytes(num, data):
    if isinstance(data, str):
        data = data.encode()
    return varint(num << 3 | 2) + varint(len(data)) + data


def f_varint(num, v):
    return varint(num << 3) + varint(v)


def any_(type_url, value):
    return f_bytes(1, type_url) + f_bytes(2, value)


def frame(stream_id, typ, payload, flags=0, length=None):
    return struct.pack(">IIBB", len(payload) if length is None else length, stream_id, typ, flags) + payload


def request(service, method, payload, timeout=0, meta=()):
    out = f_bytes(1, service) + f_bytes(2, method) + f_bytes(3, payload)
    if timeout:
        out += f_varint(4, timeout)
    for k, v in meta:
        out += f_bytes(5, f_bytes(1, k) + f_bytes(2, v))
    return out


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


TASK = "containerd.task.v2.Task"
NS = [("containerd-namespace-ttrpc", "k8s.io")]
PROCESS = {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": ["sh", "-c", "nvidia-smi"],
           "env": ["PATH=/usr/bin:/bin", "NVIDIA_VISIBLE_DEVICES=all"], "cwd": "/"}
SPEC = {
    "ociVersion": "1.1.0",
    "process": PROCESS,
    "root": {"path": "rootfs", "readonly": False},
    "hostname": "c1",
    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
               {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=755"]}],
    "annotations": {"io.kubernetes.cri.sandbox-id": "abc", "cdi.k8s.io/gpu": "nvidia.com/gpu=all"},
    "linux": {"namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "mount"}, {"type": "ipc"},
                             {"type": "uts"}],
              "cgroupsPath": "/kubepods/c1", "devices": []},
}
CREATE = (f_bytes(1, "c1") + f_bytes(2, "/run/containerd/io.containerd.runtime.v2.task/default/c1")
          + f_bytes(3, f_bytes(1, "overlay") + f_bytes(2, "overlay") + f_bytes(4, "lowerdir=/a") + f_bytes(4, "upperdir=/b"))
          + f_bytes(6, "/run/containerd/fifo/1/c1-stdout") + f_bytes(7, "/run/containerd/fifo/1/c1-stderr"))
CONFIG_YAML = ("runtime: {binary: runc, root: /run/containerd/runc, extra_args: [], systemd_cgroup: false}\n"
               "gpu: {mode: auto, cdi_spec_dirs: [/etc/cdi, /var/run/cdi], driver_root: /, nvproxy: auto}\n"
               "checkpoint: {cuda: driver-api, cuda_checkpoint_path: cuda-checkpoint, lock_timeout_ms: 10000,\n"
               "             parallelism: 0, device_globs: [\"/dev/nvidia*\"]}\n"
               "log_level: debug\n")
CREATE_RTOPTS = CREATE + f_bytes(10, any_("runtimeoptions.v1.Options", f_bytes(1, "x") + f_bytes(2, CONFIG_YAML)))
CREATE_RUNC = CREATE + f_bytes(10, any_("containerd.runc.v1.Options",
                                        f_bytes(6, "crun") + f_bytes(7, "/run/crun") + f_varint(9, 1)))
EXEC = (f_bytes(1, "c1") + f_bytes(2, "e1") + f_bytes(5, "/run/containerd/fifo/1/e1-stdout")
        + f_bytes(7, any_("types.containerd.io/opencontainers/runtime-spec/1/Process", json.dumps(PROCESS))))
CKPT_OPTS = (f_varint(1, 0) + f_varint(2, 1) + f_varint(5, 1) + f_bytes(6, "network") + f_bytes(7, "soft")
             + f_bytes(8, "/var/lib/ckpt/img") + f_bytes(9, "/var/lib/ckpt/work"))
CKPT = f_bytes(1, "c1") + f_bytes(2, "/var/lib/ckpt") + f_bytes(3, any_("containerd.runc.v1.CheckpointOptions", CKPT_OPTS))
UPDATE = (f_bytes(1, "c1") + f_bytes(2, any_("types.containerd.io/opencontainers/runtime-spec/1/LinuxResources",
                                              json.dumps({"memory": {"limit": 1 << 30}, "cpu": {"shares": 512}})))
          + f_bytes(3, f_bytes(1, "k") + f_bytes(2, "v")))
KILL = f_bytes(1, "c1") + f_bytes(2, "e1") + f_varint(3, 9) + f_varint(4, 1)

# --- ttrpc frames (byte 0: chunking seed and size limit; 0x80 = the real 4 MiB limit) ---
create_req = request(TASK, "Create", CREATE_RTOPTS, timeout=10**9, meta=NS)
write("fuzz_ttrpc_frame", "create", b"\x80" + frame(1, 1, create_req))
write("fuzz_ttrpc_frame", "two-requests", b"\x93" + frame(1, 1, request(TASK, "State", f_bytes(1, "c1"), meta=NS))
      + frame(3, 1, request(TASK, "Kill", KILL)))
write("fuzz_ttrpc_frame", "oversized-4g", b"\x80" + frame(1, 1, b"", length=0xFFFFFFFF) + b"\x00" * 64)
write("fuzz_ttrpc_frame", "oversized-small-limit", b"\x02" + frame(5, 1, b"A" * 40) + frame(7, 1, b"ok"))
write("fuzz_ttrpc_frame", "data-and-response", b"\xc1" + frame(2, 2, b"\x0a\x00") + frame(1, 3, b"data", flags=1))
write("fuzz_ttrpc_frame", "truncated", b"\x80" + frame(1, 1, create_req)[:25])

# --- the real server: a raw client stream ---
write("fuzz_ttrpc_server", "echo", frame(1, 1, request("fuzz.Svc", "Echo", b"hello", meta=NS)))
write("fuzz_ttrpc_server", "fail-throw-unknown",
      frame(1, 1, request("fuzz.Svc", "Fail", b"c1")) + frame(3, 1, request("fuzz.Svc", "Throw", b""))
      + frame(5, 1, request(TASK, "Create", CREATE)) + frame(7, 1, request("fuzz.Svc", "Nope", b"")))
write("fuzz_ttrpc_server", "even-stream-and-garbage",
      frame(2, 1, request("fuzz.Svc", "Echo", b"x")) + frame(9, 1, b"\xff\xff\xff"))
write("fuzz_ttrpc_server", "oversized-then-echo",
      frame(1, 1, b"", length=(4 << 20) + 1) + b"Z" * 4096)
write("fuzz_ttrpc_server", "timeout-max",
      frame(1, 1, request("fuzz.Svc", "Echo", b"t", timeout=(1 << 63) - 1)))
write("fuzz_ttrpc_server", "truncated", frame(1, 1, request("fuzz.Svc", "Echo", b"hello"))[:13])

# --- Task service: byte 0 = method index (task_rpc_fuzz.cc) ---
for idx, name, payload in [
    (0, "create-runtimeoptions", CREATE_RTOPTS), (0, "create-runc-options", CREATE_RUNC),
    (0, "create-bad-id", f_bytes(1, "../../etc") + f_bytes(2, "/b")), (0, "create-relative-bundle", f_bytes(1, "c1") + f_bytes(2, "b")),
    (1, "start", f_bytes(1, "c1") + f_bytes(2, "e1")), (2, "state", f_bytes(1, "c1")),
    (3, "delete", f_bytes(1, "c1")), (4, "pids", f_bytes(1, "c1")), (5, "wait", f_bytes(1, "c1") + f_bytes(2, "e1")),
    (6, "stats", f_bytes(1, "c1")), (7, "connect", f_bytes(1, "c1")), (8, "kill", KILL), (9, "exec", EXEC),
    (10, "pause", f_bytes(1, "c1")), (11, "resume", f_bytes(1, "c1")),
    (12, "closeio", f_bytes(1, "c1") + f_bytes(2, "e1") + f_varint(3, 1)),
    (13, "resizepty", f_bytes(1, "c1") + f_varint(3, 80) + f_varint(4, 24)), (14, "update", UPDATE),
    (15, "checkpoint", CKPT), (16, "shutdown", f_bytes(1, "c1") + f_varint(2, 1)),
]:
    write("fuzz_task_rpc", name, bytes([idx]) + payload)

# --- events ---
exit_ev = f_bytes(1, "c1") + f_bytes(2, "e1") + f_varint(3, 4242) + f_varint(4, 137) + f_bytes(5, f_varint(1, 1700000000) + f_varint(2, 5))
env = f_bytes(1, f_varint(1, 1700000000)) + f_bytes(2, "k8s.io") + f_bytes(3, "/tasks/exit") + f_bytes(4, any_("containerd.events.TaskExit", exit_ev))
write("fuzz_events", "forward-exit", f_bytes(1, env))
write("fuzz_events", "envelope-exit", env)
create_ev = f_bytes(1, "c1") + f_bytes(2, "/b") + f_bytes(3, f_bytes(1, "overlay")) + f_bytes(4, f_bytes(1, "/in") + f_varint(4, 1)) + f_varint(6, 7)
write("fuzz_events", "forward-create", f_bytes(1, f_bytes(3, "/tasks/create") + f_bytes(4, any_("containerd.events.TaskCreate", create_ev))))
write("fuzz_events", "forward-checkpointed", f_bytes(1, f_bytes(3, "/tasks/checkpointed") + f_bytes(4, any_("containerd.events.TaskCheckpointed", f_bytes(1, "c1") + f_bytes(2, "/img")))))

# --- OCI spec ---
write("fuzz_oci_spec", "config.json", json.dumps(SPEC, indent=1))
write("fuzz_oci_spec", "process.json", json.dumps(PROCESS))
s2 = json.loads(json.dumps(SPEC))
s2["linux"]["namespaces"][0]["path"] = "/proc/1/ns/pid"
s2["root"]["path"] = "../../../../etc"
write("fuzz_oci_spec", "joined-pid-ns-escaping-root.json", json.dumps(s2))
write("fuzz_oci_spec", "minimal.json", '{"ociVersion":"1.0.2","root":{"path":"/rootfs"}}')

# --- CDI: byte 0 = 0 for a .yaml name, 1 for .json ---
for sub in ("valid", "bad", "conflict"):
    d = os.path.join(FIXTURES, sub)
    for fn in sorted(os.listdir(d)):
        with open(os.path.join(d, fn), "rb") as f:
            body = f.read()
        write("fuzz_cdi_spec", sub + "-" + fn, (b"\x01" if fn.endswith(".json") else b"\x00") + body)

# --- the image's record (nvproxy-cuda.json) as shims wrote it ---
GPU = {"driver_version": "580.159.04",
       "devices": [{"index": 0, "uuid": "GPU-5a1f0c2e-0000-0000-0000-000000000001", "name": "NVIDIA H200",
                    "memory_total": 150754820096, "memory_free": 120000000000, "memory_used": 30754820096}],
       "processes": [{"host_pid": 4242, "pid": 1, "name": "python3",
                      "gpus": [{"uuid": "GPU-5a1f0c2e-0000-0000-0000-000000000001", "used_bytes": 25769803776}]}]}
write("fuzz_image_record", "v1-cuda.json", json.dumps({"version": 1, "container": "llm", "cuda_processes": 1,
                                                       "cuda_pids": [{"pid": 1, "name": "python3"}], "gpu": GPU}))
write("fuzz_image_record", "v2-released.json", json.dumps({
    "version": 2, "container": "train", "cuda_processes": 1, "cuda_pids": [{"pid": 1, "name": "python3"}], "gpu": GPU,
    "released": [{"pid": 7, "name": "pt_data_worker", "from": 1, "fds": [11, 12]}],
    "runtime": {"name": "runc", "version": "1.1.15"}, "criu_version": "4.2.1"}))
write("fuzz_image_record", "v0-030.json", json.dumps({"container": "c1", "cuda_processes": 2,
                                                      "cuda_pids": [{"pid": 1, "name": "a"}, {"pid": 9, "name": "b"}]}))
write("fuzz_image_record", "runsc-no-facts.json", json.dumps({
    "version": 1, "container": "c1", "sandbox": "runsc", "cuda_processes": 1, "cuda_pids": [{"pid": 1, "name": "python3"}],
    "gpu_error": "taken inside a gVisor sandbox", "runtime": {"name": "runsc", "version": "release-20260817.0"}}))
write("fuzz_image_record", "no-cuda.json", json.dumps({"version": 1, "container": "c1", "cuda_processes": 0, "cuda_pids": []}))
write("fuzz_image_record", "too-new.json", json.dumps({"version": 3, "container": "c1"}))
# Once a crash: a count too big for an integer parses as a float.
write("fuzz_image_record", "float-count.json",
      '{"container": "c1", "cuda_processes": ' + "2" + "1" * 57 + ', "cuda_pids": [{"pid": 0, "name": "a"}]}')

# Issue 63: GPU requests, byte 0 picks the shape (gpu_request_fuzz.cc): 0 NVIDIA_VISIBLE_DEVICES,
# 1 NVIDIA_DRIVER_CAPABILITIES, 2 annotations one "key=value" a line, 3 one CDI annotation's value.
def gpu(shape, text):
    return bytes([shape]) + (text if isinstance(text, bytes) else text.encode())


write("fuzz_gpu_request", "env-indices", gpu(0, "0,1, 2 ,1,0"))
write("fuzz_gpu_request", "env-all", gpu(0, "all"))
write("fuzz_gpu_request", "env-none", gpu(0, "none"))
write("fuzz_gpu_request", "env-uuids", gpu(0, "GPU-11111111-2222-3333-4444-555555555555,MIG-GPU-aa/1/0"))
write("fuzz_gpu_request", "env-cdi-names", gpu(0, "nvidia.com/gpu=0,nvidia.com/gpu=all,vendor.com/class=x"))
write("fuzz_gpu_request", "env-index-30-digits", gpu(0, "123456789012345678901234567890"))
write("fuzz_gpu_request", "env-not-utf8", gpu(0, b"0,g\xe9pu,1"))
write("fuzz_gpu_request", "env-many", gpu(0, ",".join(str(i) for i in range(3000))))
write("fuzz_gpu_request", "caps", gpu(1, "compute,utility,video"))
write("fuzz_gpu_request", "caps-unknown", gpu(1, "all,bogus,\xff"))
write("fuzz_gpu_request", "annotations", gpu(2, "cdi.k8s.io/a=nvidia.com/gpu=0\nfoo.cdi.k8s.io/b=vendor.com/x=y,vendor.com/x=z\nother=1"))
write("fuzz_gpu_request", "annotations-bad-name", gpu(2, "cdi.k8s.io/a=not-a-name"))
write("fuzz_gpu_request", "annotations-not-utf8", gpu(2, b"cdi.k8s.io/\xe9=vendor.com/x=\xff"))
write("fuzz_gpu_request", "annotations-many", gpu(2, "\n".join("cdi.k8s.io/a%d=vendor.com/gpu=d%d" % (i, i) for i in range(1100))))
write("fuzz_gpu_request", "annotation-value", gpu(3, "vendor.com/gpu=a, vendor.com/gpu=b,,vendor.com/gpu=a"))

# The config loader (config_fuzz.cc): config.yaml as an operator writes it.
write("fuzz_config", "empty.yaml", "")
write("fuzz_config", "runtime.yaml", "runtime:\n  binary: runc\n  root: /run/runc\n  extra_args: [--debug]\n  systemd_cgroup: true\n")
write("fuzz_config", "gpu.yaml", "gpu:\n  dev_root: /dev\n  driver_root: /\n  cdi_spec_dirs: [/etc/cdi, /var/run/cdi]\n")
write("fuzz_config", "checkpoint.yaml",
      "checkpoint:\n  cuda: driver-api\n  staging_memory: lift\n  snapshot_timeout_ms: 3000\n  image_store: /var/lib/x\nlog_level: debug\n")
write("fuzz_config", "unknown-key-latin1.yaml", b"runtime:\n  bin\xe9ry: runc\n")
write("fuzz_config", "value-latin1.yaml", b"runtime:\n  binary: /usr/bin/r\xe9nc\n")
write("fuzz_config", "bad-number.yaml", "checkpoint:\n  snapshot_timeout_ms: 123456789012345678901234567890\n")
write("fuzz_config", "nested.yaml", "[" * 300 + "]" * 300)
write("fuzz_config", "key-is-a-list.yaml", "runtime:\n  [a, b]: c\n")

# CRIU's image files (criu_image_fuzz.cc): the first byte picks the file (0 files.img, 1 pstree.img,
# 2 core-1.img, 3 fdinfo-1.img, 4 remap-fpath.img, 5 stats-dump), the rest is that file.
def criu_img(magic, *entries, service=False):
    out = struct.pack("<II", 0x55105940 if service else 0x54564319, magic)
    for e in entries:
        out += struct.pack("<I", len(e)) + e
    return out


def reg(fid, name, flags=1, pos=0, size=None):
    r = f_varint(1, fid) + f_varint(2, flags) + f_varint(3, pos) + f_bytes(6, name) + f_varint(10, 0o100644)
    return r + (f_varint(8, size) if size is not None else b"")


write("fuzz_criu_image", "files", b"\x00" + criu_img(0x56303138, f_varint(1, 1) + f_varint(2, 2) + f_bytes(3, reg(2, "/out/a b\nc", 0o2001, 54)),
                                                      f_varint(1, 1) + f_varint(2, 3) + f_bytes(3, reg(3, "/usr/lib/x.so", 0, 0, 4096))))
write("fuzz_criu_image", "files-cut", b"\x00" + criu_img(0x56303138, f_varint(1, 1) + f_varint(2, 2) + f_bytes(3, reg(2, "/out/a")))[:-3])
write("fuzz_criu_image", "files-huge-entry", b"\x00" + struct.pack("<III", 0x54564319, 0x56303138, 0xFFFFFFFF) + b"x")
write("fuzz_criu_image", "pstree-two", b"\x01" + criu_img(0x50273030, f_varint(1, 1) + f_varint(2, 0), f_varint(1, 7) + f_varint(2, 1)))
write("fuzz_criu_image", "pstree-big-pid", b"\x01" + criu_img(0x50273030, f_varint(1, 1 << 40)))
write("fuzz_criu_image", "core", b"\x02" + criu_img(0x55053847, f_varint(1, 1) + f_bytes(3, f_bytes(6, "python3")) + f_bytes(4, f_varint(2, 1))))
write("fuzz_criu_image", "fdinfo", b"\x03" + criu_img(0x56213732, f_varint(1, 2) + f_varint(3, 1) + f_varint(4, 9)))
write("fuzz_criu_image", "remap", b"\x04" + criu_img(0x59133954, f_varint(1, 2) + f_varint(2, 9) + f_varint(3, 1)))
write("fuzz_criu_image", "stats-dump", b"\x05" + criu_img(0x57093306, f_bytes(1, f_varint(1, 12000) + f_varint(2, 3100000) + f_varint(4, 1000000) +
                                                                                 f_varint(5, 1048576) + f_varint(7, 262144)), service=True))
