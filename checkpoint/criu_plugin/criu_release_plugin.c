/* nvproxy_criu_release.so: a CRIU plugin that leaves GPU device files of forked children out of the
 * image and gives them back as harmless placeholders on restore.
 *
 * A child forked from a CUDA process after it opened the GPU (PyTorch's DataLoader workers, inductor's
 * compile workers, a multiprocessing fork pool) holds the parent's device fds and mappings without a
 * CUDA context of its own: the driver's checkpoint of the parent cannot release them and CRIU cannot
 * dump them. The shim decides which processes those are (same open file descriptions as a CUDA
 * ancestor, no CUDA context) and, only then, loads this plugin through the CRIU configuration it
 * writes (libdir) with the devices to release in $NVPROXY_CRIU_RELEASE ("major:minor,...").
 *
 *   dump:    a char-device fd of one of those devices is dumped as an external file
 *            (DUMP_EXT_FILE), a mapping of one is kept as metadata only (HANDLE_DEVICE_VMA); the
 *            image gets the file nvproxy-criu-released, which tells the shim's restore to load the
 *            plugin again.
 *   restore: each such fd comes back as /dev/null at the same number (RESTORE_EXT_FILE); each such
 *            mapping comes back at the same address over an empty memfd (UPDATE_VMA_MAP), so that
 *            touching it faults (SIGBUS) as a released device mapping should, and nothing maps a GPU.
 *
 * Any other device is left to CRIU (-ENOTSUP), which refuses it as before. The running container is
 * never touched: a failed dump leaves it as it was. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <criu/criu-plugin.h>

#include "common/criu_release.h"

#define RELEASE_ENV NVPROXY_RELEASE_ENV
#define RECORD_FILE NVPROXY_RELEASED_RECORD_FILE
#define MAX_DEVICES 64

/* Per CRIU process (CRIU forks one per restored task; each reads what it needs). */
static dev_t g_devices[MAX_DEVICES];
static int g_ndevices;
static int g_record_read, g_image_released;

/* "195:0,195:255,511:0" -> g_devices; anything unparsable ends the list. */
static void parse_devices(const char* s) {
  g_ndevices = 0;
  while (s && *s && g_ndevices < MAX_DEVICES) {
    char* end;
    unsigned long maj = strtoul(s, &end, 10);
    if (*end != ':') return;
    unsigned long min = strtoul(end + 1, &end, 10);
    g_devices[g_ndevices++] = makedev(maj, min);
    if (*end != ',') return;
    s = end + 1;
  }
}

static int released_device(const struct stat* st) {
  if (!S_ISCHR(st->st_mode)) return 0;
  for (int i = 0; i < g_ndevices; ++i)
    if (g_devices[i] == st->st_rdev) return 1;
  return 0;
}

/* Appends one line to the image's record (the image directory is CRIU's service fd). */
static int record(const char* kind, int id, const struct stat* st) {
  int dir = criu_get_image_dir();
  int fd = openat(dir, RECORD_FILE, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  char line[96];
  int n = snprintf(line, sizeof line, "%s %d %u:%u\n", kind, id, major(st->st_rdev), minor(st->st_rdev));
  ssize_t w = write(fd, line, (size_t)n);
  int err = w == n ? 0 : (w < 0 ? -errno : -EIO);
  close(fd);
  return err;
}

/* At restore: was this image dumped with released files? Asked once per restoring process. */
static int image_released(void) {
  if (!g_record_read) {
    g_record_read = 1;
    struct stat st;
    g_image_released = fstatat(criu_get_image_dir(), RECORD_FILE, &st, 0) == 0;
  }
  return g_image_released;
}

static int release_init(int stage) {
  if (stage == CR_PLUGIN_STAGE__DUMP || stage == CR_PLUGIN_STAGE__PRE_DUMP) parse_devices(getenv(RELEASE_ENV));
  return 0;
}

static void release_exit(int stage, int ret) {
  (void)stage;
  (void)ret;
}

CR_PLUGIN_REGISTER("nvproxy_release", release_init, release_exit)

static int dump_ext_file(int fd, int id) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !released_device(&st)) return -ENOTSUP;
  return record("fd", id, &st);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__DUMP_EXT_FILE, dump_ext_file)

static int handle_device_vma(int fd, const struct stat* st) {
  (void)fd;
  if (!released_device(st)) return -ENOTSUP;
  return record("vma", 0, st);
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA, handle_device_vma)

static int restore_ext_file(int id) {
  (void)id; /* CRIU hands only external files to this hook, and only ours are in this image */
  if (!image_released()) return -ENOTSUP;
  int fd = open("/dev/null", O_RDWR);
  return fd < 0 ? -errno : fd;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__RESTORE_EXT_FILE, restore_ext_file)

static int update_vma_map(const char* path, const uint64_t addr, const uint64_t old_pgoff, uint64_t* new_pgoff,
                          int* plugin_fd) {
  (void)path;
  (void)addr;
  (void)old_pgoff;
  if (!image_released()) return -ENOTSUP;
  /* Every device mapping has its own file id in CRIU's image, so each call gets (and CRIU closes) its
   * own memfd. Size 0: the reservation stays, any access faults. */
  int fd = memfd_create("nvproxy-released-gpu-mapping", MFD_CLOEXEC);
  if (fd < 0) return -errno;
  *new_pgoff = 0;
  *plugin_fd = fd;
  return 1;
}
CR_PLUGIN_REGISTER_HOOK(CR_PLUGIN_HOOK__UPDATE_VMA_MAP, update_vma_map)
