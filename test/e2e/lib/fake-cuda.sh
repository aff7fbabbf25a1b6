# shellcheck shell=bash
# Why: the fake-driver e2e tests (runc) all stage the same thing: the fixtures checked, a temp dir
# with the fake driver's state dir (cuda/), a copy of fake_cuda_app to bind in (bin/) and a regular
# file standing for the device (fakegpu0). Source after lib/shim-env.sh, then call nv_fake_cuda.
# Sets FIX (the fixtures dir) and FAKE (removed at exit); exports NVPROXY_FAKE_CUDA_DIR, which the
# fake libcuda and NVML read wherever they are loaded (the shim's nvproxy-cuda-helper).
nv_fake_cuda() {
  FIX=${NVPROXY_FIXTURES_DIR:?NVPROXY_FIXTURES_DIR (build/test/fixtures) is not set}
  [[ -x $FIX/fake_cuda_app && -f $FIX/libcuda.so && -f $FIX/libnvidia-ml.so ]] || nv_fail "fixtures missing in $FIX"
  FAKE=$(mktemp -d /tmp/nvproxy-fakecuda.XXXXXX)
  nv_defer rm -rf "$FAKE"
  mkdir -p "$FAKE/cuda" "$FAKE/bin"
  touch "$FAKE/fakegpu0"
  cp "$FIX/fake_cuda_app" "$FAKE/bin/"
  export NVPROXY_FAKE_CUDA_DIR=$FAKE/cuda
}
