/* gpu_hold: the GPU side of bench/gpu_scaling.sh (runs on the GPU machine; no CUDA headers or
 * toolkit needed: libcuda.so.1 is loaded with dlopen, the few prototypes are declared here).
 *
 *   gpu_hold hold GIB READYFILE      cuInit, primary context on GPU 0, allocates GIB GiB, fills it with
 *                                    a pattern, writes READYFILE, waits for SIGTERM, then checks the
 *                                    whole buffer and prints "gpu_hold PID: data OK" (or BAD) to stdout
 *                                    Env GPU_HOLD_POOL_GIB=P: also allocates P GiB it never writes (a
 *                                    preallocated KV pool), sums it once before READYFILE and again
 *                                    at SIGTERM: "pool same" (or CHANGED) and how much of it reads zero
 *   gpu_hold toggle MODE PID...      MODE parallel|serial: lock all, checkpoint all, restore all,
 *                                    unlock all (parallel: one thread per pid per step; serial: one
 *                                    pid after another); never calls cuInit, like the shim. Prints
 *                                    "lock_ms=.. checkpoint_ms=.. restore_ms=.. unlock_ms=.."
 *   gpu_hold bw GIB                  pinned and pageable host<->device copy bandwidth (GB/s)
 *
 * Env NVPROXY_LIBCUDA: the library (default libcuda.so.1). Exit 0 on success. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void* CUcontext;
typedef struct { unsigned timeoutMs; unsigned reserved0; uint64_t reserved1[7]; } LockArgs;
typedef struct { uint64_t reserved[8]; } Args64;

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(int*, int);
static CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, int);
static CUresult (*cuCtxSetCurrent)(CUcontext);
static CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
static CUresult (*cuMemAllocHost)(void**, size_t);
static CUresult (*cuMemsetD32)(CUdeviceptr, unsigned, size_t);
static CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
static CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
static CUresult (*cuCtxSynchronize)(void);
static CUresult (*ckLock)(int, LockArgs*);
static CUresult (*ckCheckpoint)(int, Args64*);
static CUresult (*ckRestore)(int, Args64*);
static CUresult (*ckUnlock)(int, Args64*);

static void* sym(void* h, const char* a, const char* b) {
  void* p = dlsym(h, a);
  if (!p && b) p = dlsym(h, b);
  if (!p) { fprintf(stderr, "gpu_hold: %s missing in libcuda\n", a); exit(2); }
  return p;
}

#define LOAD(var, ...) var = (__typeof__(var))sym(h, __VA_ARGS__)

static void load(int runtime) {
  const char* lib = getenv("NVPROXY_LIBCUDA");
  void* h = dlopen(lib ? lib : "libcuda.so.1", RTLD_NOW);
  if (!h) { fprintf(stderr, "gpu_hold: %s\n", dlerror()); exit(2); }
  LOAD(ckLock, "cuCheckpointProcessLock", NULL);
  LOAD(ckCheckpoint, "cuCheckpointProcessCheckpoint", NULL);
  LOAD(ckRestore, "cuCheckpointProcessRestore", NULL);
  LOAD(ckUnlock, "cuCheckpointProcessUnlock", NULL);
  if (!runtime) return; /* toggle: the checkpoint API only (also what the fake driver has) */
  LOAD(cuInit, "cuInit", NULL);
  LOAD(cuDeviceGet, "cuDeviceGet", NULL);
  LOAD(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL);
  LOAD(cuCtxSetCurrent, "cuCtxSetCurrent", NULL);
  LOAD(cuMemAlloc, "cuMemAlloc_v2", "cuMemAlloc");
  LOAD(cuMemAllocHost, "cuMemAllocHost_v2", "cuMemAllocHost");
  LOAD(cuMemsetD32, "cuMemsetD32_v2", "cuMemsetD32");
  LOAD(cuMemcpyHtoD, "cuMemcpyHtoD_v2", "cuMemcpyHtoD");
  LOAD(cuMemcpyDtoH, "cuMemcpyDtoH_v2", "cuMemcpyDtoH");
  LOAD(cuCtxSynchronize, "cuCtxSynchronize", NULL);
}

#define CK(call)                                                                  \
  do {                                                                            \
    CUresult rc_ = (call);                                                        \
    if (rc_) { fprintf(stderr, "gpu_hold: %s = %d\n", #call, rc_); exit(1); }     \
  } while (0)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void context(void) {
  int dev;
  CUcontext ctx;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
}

/* A digest of a device region read back 64 MiB at a time (FNV-style over 8-byte words), and how
 * many of its 4 KiB pages are all zero. */
static unsigned long long pool_digest(CUdeviceptr d, size_t bytes, size_t* zero_pages) {
  size_t chunk = 64u << 20;
  unsigned long long* buf = malloc(chunk);
  unsigned long long h = 1469598103934665603ull;
  *zero_pages = 0;
  for (size_t off = 0; off < bytes; off += chunk) {
    size_t n = bytes - off < chunk ? bytes - off : chunk;
    CK(cuMemcpyDtoH(buf, d + off, n));
    for (size_t p = 0; p < n / 4096; ++p) {
      unsigned long long any = 0;
      for (size_t i = 0; i < 512; ++i) {
        any |= buf[p * 512 + i];
        h = (h ^ buf[p * 512 + i]) * 1099511628211ull;
      }
      *zero_pages += any == 0;
    }
  }
  free(buf);
  return h;
}

static volatile sig_atomic_t g_stop;
static void on_term(int s) { (void)s; g_stop = 1; }

static int hold(double gib, const char* ready) {
  context();
  size_t bytes = (size_t)(gib * (1ull << 30)), words = bytes / 4;
  CUdeviceptr d;
  CK(cuMemAlloc(&d, bytes));
  const unsigned pattern = 0x5eed0000u ^ (unsigned)getpid();
  CK(cuMemsetD32(d, pattern, words));
  CK(cuCtxSynchronize());
  const char* pool_env = getenv("GPU_HOLD_POOL_GIB");
  size_t pool_bytes = pool_env ? (size_t)(atof(pool_env) * (1ull << 30)) : 0;
  CUdeviceptr pool = 0;
  size_t pool_zero = 0, pool_zero_after = 0;
  unsigned long long pool_sum = 0, pool_sum_after = 0;
  if (pool_bytes) {
    CK(cuMemAlloc(&pool, pool_bytes));
    pool_sum = pool_digest(pool, pool_bytes, &pool_zero);
  }
  signal(SIGTERM, on_term);
  FILE* f = fopen(ready, "w");
  if (!f) { perror(ready); return 1; }
  fprintf(f, "%d\n", getpid());
  fclose(f);
  while (!g_stop) usleep(20000);
  /* check everything, 64 MiB at a time */
  size_t chunk = 64u << 20;
  unsigned* buf = malloc(chunk);
  size_t bad = 0;
  for (size_t off = 0; off < bytes; off += chunk) {
    size_t n = bytes - off < chunk ? bytes - off : chunk;
    CK(cuMemcpyDtoH(buf, d + off, n));
    for (size_t i = 0; i < n / 4; ++i) bad += buf[i] != pattern;
  }
  if (pool_bytes) {
    pool_sum_after = pool_digest(pool, pool_bytes, &pool_zero_after);
    bad += pool_sum_after != pool_sum || pool_zero_after != pool_zero;
    printf("gpu_hold %d: pool %.1f GiB %s, %.1f%% of it zero pages\n", getpid(), pool_bytes / 1073741824.0,
           pool_sum_after == pool_sum && pool_zero_after == pool_zero ? "same" : "CHANGED",
           100.0 * (double)pool_zero / (double)(pool_bytes / 4096));
  }
  printf("gpu_hold %d: %.0f GiB data %s\n", getpid(), gib, bad ? "BAD" : "OK");
  return bad ? 1 : 0;
}

typedef struct { int pid; int op; CUresult rc; } Job;
static void* run_op(void* p) {
  Job* j = p;
  LockArgs la;
  Args64 a;
  memset(&la, 0, sizeof la);
  memset(&a, 0, sizeof a);
  la.timeoutMs = 10000;
  switch (j->op) {
    case 0: j->rc = ckLock(j->pid, &la); break;
    case 1: j->rc = ckCheckpoint(j->pid, &a); break;
    case 2: j->rc = ckRestore(j->pid, &a); break;
    default: j->rc = ckUnlock(j->pid, &a); break;
  }
  return NULL;
}

static int toggle(int parallel, int n, char** pids) {
  static const char* names[] = {"lock", "checkpoint", "restore", "unlock"};
  Job* jobs = calloc((size_t)n, sizeof *jobs);
  pthread_t* th = calloc((size_t)n, sizeof *th);
  int failed = 0;
  for (int op = 0; op < 4; ++op) {
    double t0 = now_ms();
    for (int i = 0; i < n; ++i) {
      jobs[i] = (Job){atoi(pids[i]), op, 0};
      if (parallel) pthread_create(&th[i], NULL, run_op, &jobs[i]);
      else run_op(&jobs[i]);
    }
    if (parallel)
      for (int i = 0; i < n; ++i) pthread_join(th[i], NULL);
    for (int i = 0; i < n; ++i)
      if (jobs[i].rc) { fprintf(stderr, "gpu_hold: %s of %d = %d\n", names[op], jobs[i].pid, jobs[i].rc); failed = 1; }
    printf("%s%s_ms=%.1f", op ? " " : "", names[op], now_ms() - t0);
  }
  printf("\n");
  return failed;
}

static int bandwidth(double gib) {
  context();
  size_t bytes = (size_t)(gib * (1ull << 30));
  CUdeviceptr d;
  void* pinned;
  CK(cuMemAlloc(&d, bytes));
  CK(cuMemAllocHost(&pinned, bytes));
  void* pageable = malloc(bytes);
  memset(pinned, 1, bytes);
  memset(pageable, 1, bytes);
  struct { const char* name; void* host; int h2d; } cases[] = {
      {"pinned H2D", pinned, 1}, {"pinned D2H", pinned, 0}, {"pageable H2D", pageable, 1}, {"pageable D2H", pageable, 0}};
  for (int c = 0; c < 4; ++c) {
    double best = 0;
    for (int r = 0; r < 3; ++r) {
      double t0 = now_ms();
      if (cases[c].h2d) CK(cuMemcpyHtoD(d, cases[c].host, bytes));
      else CK(cuMemcpyDtoH(cases[c].host, d, bytes));
      CK(cuCtxSynchronize());
      double gbs = bytes / ((now_ms() - t0) / 1e3) / 1e9;
      if (gbs > best) best = gbs;
    }
    printf("%s%s=%.1fGB/s", c ? " " : "", cases[c].name, best);
  }
  printf("\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 4 && !strcmp(argv[1], "hold")) { load(1); return hold(atof(argv[2]), argv[3]); }
  if (argc >= 4 && !strcmp(argv[1], "toggle")) { load(0); return toggle(!strcmp(argv[2], "parallel"), argc - 3, argv + 3); }
  if (argc >= 3 && !strcmp(argv[1], "bw")) { load(1); return bandwidth(atof(argv[2])); }
  fprintf(stderr, "usage: gpu_hold hold GIB READYFILE | toggle parallel|serial PID... | bw GIB\n");
  return 2;
}
