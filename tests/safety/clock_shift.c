/*
 * clock_shift.c: an LD_PRELOAD shim that moves a process's wall clock by an offset another
 * process can change while it runs (the safety checker's clock-jump fault: a Redis master
 * whose clock leaps forward expires keys early).
 *
 * Contract
 *   - Interposes clock_gettime, gettimeofday and time. The wall clocks (CLOCK_REALTIME,
 *     CLOCK_REALTIME_COARSE, CLOCK_REALTIME_ALARM, CLOCK_TAI: the ones a step of the system
 *     clock moves) read real time + offset; every other clock (CLOCK_MONOTONIC*,
 *     CLOCK_BOOTTIME*, CPU-time clocks) is passed through unchanged, as an NTP step leaves
 *     them alone.
 *   - The offset: a signed int64, little-endian, in milliseconds, at byte 0 of the file named
 *     by the environment variable LW_CLOCK_SHIFT_FILE. The file is opened and mapped
 *     (MAP_SHARED, read-only, 8 bytes) at the first clock read of the process, and read at
 *     every call after that: a write by another process takes effect at once. Offset 0 when
 *     the variable is unset or empty, or when at that first read the file is missing, shorter
 *     than 8 bytes or cannot be mapped (it is not looked for again).
 *   - The file must not shrink below 8 bytes while a process has it mapped (a read past its
 *     end would be SIGBUS). A writer rewrites the 8 bytes in place (pwrite at offset 0); a
 *     read repeats until two loads agree, so a half-done write is not used.
 *   - A thread that reads the clock while another thread is doing the first read's set-up
 *     gets offset 0 for that call (no lock, no wait: safe in signal handlers too).
 *   - Calls inside libc itself (e.g. timespec_get, ftime) and direct syscalls are not
 *     shifted. errno is left as the real call leaves it.
 *
 * Why not libfaketime: Debian's redis-server links the system libjemalloc.so.2, and
 * libfaketime fails at start with "Unexpected recursive calls to clock_gettime() without proper
 * initialization": its dlsym allocates, jemalloc's set-up reads the clock, which lands back
 * in libfaketime before it has the real function (wolfcw/libfaketime issues #130 and #327).
 * So this shim calls no dlsym and no malloc: the real time comes from
 * syscall(SYS_clock_gettime) (a real syscall, not the vDSO: slower per call).
 *
 * Build: cc -O2 -shared -fPIC -o libclockshift.so clock_shift.c   (clock_shift.mjs does it)
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

enum { SHIFT_UNSET, SHIFT_BUSY, SHIFT_READY };
static atomic_int shift_state = SHIFT_UNSET;
/* The mapped word, or NULL (offset 0). Written once, before shift_state turns SHIFT_READY. */
static const uint64_t *shift_word;

/* Maps the file's first 8 bytes into shift_word if it can. No allocation. */
static void shift_map(void) {
  const char *name = getenv("LW_CLOCK_SHIFT_FILE");
  if (name == NULL || name[0] == '\0') return;
  int fd = open(name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) == 0 && st.st_size >= 8) {
    void *p = mmap(NULL, 8, PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) shift_word = p;
  }
  close(fd);
}

/* The current offset in ms (0 while unset or being set up). */
static int64_t shift_ms(void) {
  int state = atomic_load_explicit(&shift_state, memory_order_acquire);
  if (state != SHIFT_READY) {
    int expected = SHIFT_UNSET;
    if (!atomic_compare_exchange_strong_explicit(&shift_state, &expected, SHIFT_BUSY,
                                                 memory_order_acquire, memory_order_acquire)) {
      if (expected != SHIFT_READY) return 0; /* another thread is setting up */
    } else {
      int saved = errno;
      shift_map();
      errno = saved;
      atomic_store_explicit(&shift_state, SHIFT_READY, memory_order_release);
    }
  }
  const uint64_t *word = shift_word;
  if (word == NULL) return 0;
  uint64_t prev, cur = __atomic_load_n(word, __ATOMIC_RELAXED);
  int tries = 0;
  do {
    prev = cur;
    cur = __atomic_load_n(word, __ATOMIC_RELAXED);
  } while (cur != prev && ++tries < 16);
  return (int64_t)le64toh(cur);
}

static int is_wall_clock(clockid_t id) {
  return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_REALTIME_ALARM ||
         id == CLOCK_TAI;
}

/* ts + ms, normalized (0 <= tv_nsec < 1e9). */
static void add_ms(struct timespec *ts, int64_t ms) {
  ts->tv_sec += ms / 1000;
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  } else if (ts->tv_nsec < 0) {
    ts->tv_sec--;
    ts->tv_nsec += 1000000000L;
  }
}

/* The shifted clock_gettime, called directly by the three interposers. */
static int shifted_clock_gettime(clockid_t id, struct timespec *ts) {
  int rc = (int)syscall(SYS_clock_gettime, id, ts);
  if (rc == 0 && is_wall_clock(id)) {
    int64_t ms = shift_ms();
    if (ms != 0) add_ms(ts, ms);
  }
  return rc;
}

EXPORT int clock_gettime(clockid_t id, struct timespec *ts) {
  return shifted_clock_gettime(id, ts);
}

EXPORT int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
  if (tz != NULL) { /* obsolete; glibc reports UTC too */
    struct timezone *z = tz;
    z->tz_minuteswest = 0;
    z->tz_dsttime = 0;
  }
  struct timespec ts;
  if (shifted_clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = ts.tv_nsec / 1000;
  return 0;
}

EXPORT time_t time(time_t *out) {
  struct timespec ts;
  if (shifted_clock_gettime(CLOCK_REALTIME_COARSE, &ts) != 0) return (time_t)-1;
  if (out != NULL) *out = ts.tv_sec;
  return ts.tv_sec;
}
