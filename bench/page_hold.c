/* bench/page_io.sh's workload: a tree of 1 + KIDS processes, each holding MIB MiB of private
 * anonymous memory written with a pattern of its own (every page differs, none is zero), so that
 * CRIU dumps and restores all of it. SIGUSR1 makes each check its memory and write
 * "bad N" (pages whose pattern is wrong) to DIR/PID.verify; DIR/PID says it is ready.
 * Usage: page_hold MIB DIR [KIDS] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile sig_atomic_t check;
static void on_usr1(int sig) {
  (void)sig;
  check = 1;
}

static unsigned char mark(size_t page, int j, unsigned salt) {
  return (unsigned char)(page + (size_t)j + 1 + salt);
}

static void note(const char* dir, const char* suffix, const char* text) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%d%s", dir, (int)getpid(), suffix);
  FILE* f = fopen(path, "w");
  if (!f) exit(1);
  fputs(text, f);
  fclose(f);
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const size_t n = (size_t)atol(argv[1]) << 20;
  const int kids = argc > 3 ? atoi(argv[3]) : 0;
  signal(SIGUSR1, on_usr1);
  /* SIGUSR1 only arrives inside sigsuspend: one sent between the flag's test and a pause() would be
   * lost (a restored process re-enters its wait just as the benchmark signals it). */
  sigset_t usr1, wait_mask;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  sigprocmask(SIG_BLOCK, &usr1, &wait_mask);
  sigdelset(&wait_mask, SIGUSR1);
  for (int k = 0; k < kids; k++)
    if (fork() == 0) break;
  unsigned char* p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 1;
  const unsigned salt = (unsigned)getpid();
  for (size_t i = 0; i < n; i += 4096)
    for (int j = 0; j < 4096; j += 512) p[i + j] = mark(i / 4096, j, salt);
  note(argv[2], "", "ready\n");
  for (;;) {
    while (!check) sigsuspend(&wait_mask);
    check = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i += 4096)
      for (int j = 0; j < 4096; j += 512)
        if (p[i + j] != mark(i / 4096, j, salt)) bad++;
    char line[64];
    snprintf(line, sizeof line, "bad %zu\n", bad);
    note(argv[2], ".verify", line);
  }
}
