// turnaround.so: how long a client takes between receiving a response and sending its next
// request, measured inside the client process (LD_PRELOAD).
//
// At one connection a client's throughput is one round trip per request, and the round trip is
// the server's time plus the client's own turnaround: from the read() that brings a response's
// bytes to the write() of the next request. Whole-run throughput mixes the two with whatever
// else the machine does; the turnaround is the client's part alone, timed per request with
// CLOCK_MONOTONIC, and its median is steady enough to compare two builds where throughput is
// not (bench/README.md, "Turnaround").
//
// It interposes libc's read/readv/recv/recvfrom/recvmsg and write/writev/send/sendto/sendmsg on
// sockets: a write that follows a successful read records the time since that read. At exit it
// prints the count, median and deciles (microseconds) to stderr, or appends them as one line
// to $TURNAROUND_OUT with $TURNAROUND_LABEL in front. Only dynamically linked calls are seen
// (libuv, OpenSSL and wrk all call libc); one thread at a time is assumed, as at one connection.
//
// Built with -DTURNAROUND_CALLGRIND it also switches callgrind's collection on at each such
// read and off at the write: run the client under `valgrind --tool=callgrind
// --collect-atstart=no` and the profile holds only the turnarounds, the client's critical path.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#ifdef TURNAROUND_CALLGRIND
#  include <valgrind/callgrind.h>
#endif

enum { max_samples = 1 << 21, max_fds = 4096 };

static double *samples;
static atomic_size_t sample_count;
static atomic_llong last_read_ns = -1;
// 0 unknown, 1 socket, 2 not a socket
static atomic_uchar fd_kind[max_fds];

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int is_socket(int fd) {
  if (fd < 0 || fd >= max_fds) return 0;
  unsigned char kind = atomic_load_explicit(&fd_kind[fd], memory_order_relaxed);
  if (kind == 0) {
    struct stat st;
    kind = (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) ? 1 : 2;
    atomic_store_explicit(&fd_kind[fd], kind, memory_order_relaxed);
  }
  return kind == 1;
}

#ifdef TURNAROUND_CALLGRIND
// Callgrind's collection state is per thread: a toggle on one thread leaves the others alone.
// So the flag is the thread's own (a shared one let a thread that never read switch its own
// collection on).
static _Thread_local bool collecting;
#endif

static void note_read(int fd, ssize_t got) {
  if (got > 0 && is_socket(fd)) {
    atomic_store(&last_read_ns, now_ns());
#ifdef TURNAROUND_CALLGRIND
    if (!collecting) {
      collecting = true;
      CALLGRIND_TOGGLE_COLLECT;
    }
#endif
  }
}

static void note_write(int fd) {
  if (!is_socket(fd)) return;
#ifdef TURNAROUND_CALLGRIND
  if (collecting) {
    collecting = false;
    CALLGRIND_TOGGLE_COLLECT;
  }
#endif
  long long since = atomic_exchange(&last_read_ns, -1);
  if (since < 0 || samples == NULL) return;
  size_t at = atomic_fetch_add(&sample_count, 1);
  if (at < max_samples) samples[at] = (double)(now_ns() - since) / 1000.0;
}

// The libc function this one stands in for, looked up on first use. Threads may race to
// the first use: the pointer is read and written atomically (every writer stores the same
// value), so the race is benign and defined.
#define REAL(name)                                                                                 \
  static __typeof__(&name) real_##name;                                                            \
  __typeof__(&name) real_##name##_seen = __atomic_load_n(&real_##name, __ATOMIC_RELAXED);          \
  if (!real_##name##_seen) {                                                                       \
    real_##name##_seen = (__typeof__(&name))dlsym(RTLD_NEXT, #name);                               \
    __atomic_store_n(&real_##name, real_##name##_seen, __ATOMIC_RELAXED);                          \
  }

// A socket's number is reused after close(): forget what it was.
int close(int fd) {
  REAL(close);
  if (fd >= 0 && fd < max_fds) atomic_store_explicit(&fd_kind[fd], 0, memory_order_relaxed);
  return real_close_seen(fd);
}

ssize_t read(int fd, void *buf, size_t n) {
  REAL(read);
  ssize_t got = real_read_seen(fd, buf, n);
  note_read(fd, got);
  return got;
}

ssize_t readv(int fd, const struct iovec *iov, int count) {
  REAL(readv);
  ssize_t got = real_readv_seen(fd, iov, count);
  note_read(fd, got);
  return got;
}

ssize_t recv(int fd, void *buf, size_t n, int flags) {
  REAL(recv);
  ssize_t got = real_recv_seen(fd, buf, n, flags);
  if (!(flags & MSG_PEEK)) note_read(fd, got);
  return got;
}

ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from, socklen_t *len) {
  REAL(recvfrom);
  ssize_t got = real_recvfrom_seen(fd, buf, n, flags, from, len);
  if (!(flags & MSG_PEEK)) note_read(fd, got);
  return got;
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags) {
  REAL(recvmsg);
  ssize_t got = real_recvmsg_seen(fd, msg, flags);
  if (!(flags & MSG_PEEK)) note_read(fd, got);
  return got;
}

ssize_t write(int fd, const void *buf, size_t n) {
  REAL(write);
  note_write(fd);
  return real_write_seen(fd, buf, n);
}

ssize_t writev(int fd, const struct iovec *iov, int count) {
  REAL(writev);
  note_write(fd);
  return real_writev_seen(fd, iov, count);
}

ssize_t send(int fd, const void *buf, size_t n, int flags) {
  REAL(send);
  note_write(fd);
  return real_send_seen(fd, buf, n, flags);
}

ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to,
               socklen_t len) {
  REAL(sendto);
  note_write(fd);
  return real_sendto_seen(fd, buf, n, flags, to, len);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
  REAL(sendmsg);
  note_write(fd);
  return real_sendmsg_seen(fd, msg, flags);
}

__attribute__((constructor)) static void start(void) {
  samples = malloc(sizeof(double) * max_samples);
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

__attribute__((destructor)) static void report(void) {
#ifdef TURNAROUND_CALLGRIND
  // The sort below is no client's work. Collection is per thread, and the exiting thread is
  // often not the one that read (its own state may even be on, inherited from a collecting
  // creator): stopping instrumentation altogether is the one switch that covers every thread.
  CALLGRIND_STOP_INSTRUMENTATION;
#endif
  size_t n = atomic_load(&sample_count);
  if (n > max_samples) n = max_samples;
  if (samples == NULL || n == 0) return;
  qsort(samples, n, sizeof(double), by_value);
  char line[512];
  const char *label = getenv("TURNAROUND_LABEL");
  int len = snprintf(
      line, sizeof line,
      "%s%sturnaround n=%zu p10=%.2f median=%.2f p90=%.2f mean_us_trimmed=", label ? label : "",
      label ? " " : "", n, samples[n / 10], samples[n / 2], samples[n * 9 / 10]);
  // The mean of the middle 80%: steadier than the median when the distribution is bimodal.
  double sum = 0;
  size_t lo = n / 10, hi = n - n / 10;
  for (size_t i = lo; i < hi; i++) sum += samples[i];
  if (len > 0 && (size_t)len < sizeof line)
    snprintf(line + len, sizeof line - (size_t)len, "%.2f\n",
             hi > lo ? sum / (double)(hi - lo) : 0);
  const char *out = getenv("TURNAROUND_OUT");
  FILE *file = out ? fopen(out, "a") : NULL;
  fputs(line, file ? file : stderr);
  if (file) fclose(file);
}
