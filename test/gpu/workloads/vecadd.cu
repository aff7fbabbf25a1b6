// Issue 4 probe: a CUDA program (static cudart, so it needs only the injected libcuda) that lists the
// visible devices, allocates 256 MiB on each, computes on it and checks the result on the host.
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

__global__ void axpy(float* y, const float* x, float a, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) { printf("cudaGetDeviceCount: %s\n", cudaGetErrorString(e)); return 1; }
  printf("devices: %d\n", n);
  int bad = 0;
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, d);
    cudaSetDevice(d);
    const size_t N = 32u << 20;  // 32 Mi floats = 128 MiB per buffer, 256 MiB per GPU
    std::vector<float> hx(N), hy(N);
    for (size_t i = 0; i < N; ++i) { hx[i] = float(i % 1000); hy[i] = 1.0f; }
    float *x = nullptr, *y = nullptr;
    if ((e = cudaMalloc(&x, N * sizeof(float))) != cudaSuccess || (e = cudaMalloc(&y, N * sizeof(float))) != cudaSuccess) {
      printf("GPU %d cudaMalloc: %s\n", d, cudaGetErrorString(e)); return 1;
    }
    cudaMemcpy(x, hx.data(), N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(y, hy.data(), N * sizeof(float), cudaMemcpyHostToDevice);
    axpy<<<(N + 255) / 256, 256>>>(y, x, 2.0f, N);
    if ((e = cudaDeviceSynchronize()) != cudaSuccess) { printf("GPU %d kernel: %s\n", d, cudaGetErrorString(e)); return 1; }
    cudaMemcpy(hy.data(), y, N * sizeof(float), cudaMemcpyDeviceToHost);
    size_t wrong = 0;
    for (size_t i = 0; i < N; ++i) wrong += hy[i] != 2.0f * float(i % 1000) + 1.0f;
    printf("GPU %d: %s, %zu MiB total, 256 MiB allocated, y = 2x + y over %zu elements: %s\n", d, p.name,
           p.totalGlobalMem >> 20, N, wrong ? "WRONG" : "correct");
    bad += wrong != 0;
    cudaFree(x); cudaFree(y);
  }
  return bad ? 2 : 0;
}
