#!/bin/bash
# Issue 33: why a JAX process dies while its CUDA state is checkpointed. On the GPU machine, no
# container: the JAX training step (workloads/jax_workload.py) runs under cuda-gdb; once it steps,
# another process locks and checkpoints it through the driver's API (ctypes, as the shim's helper
# calls it) and leaves it checkpointed; cuda-gdb stops at the fault and prints which thread touched
# what. Output: $OUT/why-jax-gdb.txt, the faulting thread's backtrace on stdout.
# Run: timeout 240 bash test/gpu/why-jax-dies.sh
set -uo pipefail
PY=${PY:-/opt/torch/.venv/bin/python3}
OUTD=${OUT:-/tmp/nvgpu-out}
mkdir -p /out "$OUTD"
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.04 XLA_FLAGS=--xla_gpu_cuda_data_dir=/usr/local/cuda-13.0
GDB=$(command -v cuda-gdb || ls /usr/local/cuda*/bin/cuda-gdb 2>/dev/null | head -1)
[[ -n $GDB ]] || { echo "no cuda-gdb"; exit 1; }
rm -f /out/jax.txt
"$GDB" -q -batch -ex 'set pagination off' -ex 'set cuda api_failures ignore' -ex 'handle SIGSEGV stop print' \
  -ex 'handle SIGBUS stop print' -ex run -ex 'info threads' -ex 'bt 30' -ex 'info registers rip' -ex 'x/3i $pc' \
  --args "$PY" test/gpu/workloads/jax_workload.py >"$OUTD/why-jax-gdb.txt" 2>&1 &
gdbpid=$!
for _ in $(seq 120); do [[ -s /out/jax.txt ]] && (($(cut -d' ' -f1 /out/jax.txt) > 60)) && break; sleep 0.5; done
pid=$(pgrep -n -f 'python3 test/gpu/workloads/jax_workload.py' | head -1)
echo "JAX pid $pid at step $(cut -d' ' -f1 /out/jax.txt 2>/dev/null)"
"$PY" - "$pid" <<'PYEOF'
import ctypes, sys, time
pid = int(sys.argv[1])
cu = ctypes.CDLL("libcuda.so.1")
print("cuInit", cu.cuInit(0))
print("lock", cu.cuCheckpointProcessLock(pid, None))
t = time.time()
print("checkpoint", cu.cuCheckpointProcessCheckpoint(pid, None), f"{time.time() - t:.2f} s")
st = ctypes.c_int(-1)
cu.cuCheckpointProcessGetState(pid, ctypes.byref(st))
print("state", st.value, "(2: checkpointed); left so for 20 s")
time.sleep(20)
PYEOF
for _ in $(seq 30); do kill -0 "$gdbpid" 2>/dev/null || break; sleep 1; done
kill -0 "$gdbpid" 2>/dev/null && { echo "no fault within 50 s of the checkpoint"; kill -9 "$gdbpid"; pkill -9 -f jax_workload.py; }
grep -n -B2 -A45 "received signal" "$OUTD/why-jax-gdb.txt" | head -90
