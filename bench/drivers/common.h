/*
 * common.h — what every C benchmark driver shares: the command line contract, the clock, the
 * result line and a reading of the process's resident memory.
 *
 * The contract (bench/README.md has the long form):
 *
 *   DRIVER get URL N C        N GETs of URL over C keep-alive connections, bodies discarded
 *   DRIVER fanout URL N C W   N GETs with W in flight at any time (each its own request, the
 *                             next started as one finishes) over at most C connections
 *   DRIVER download URL PATH  one GET, the body written to PATH ("/dev/null": discarded)
 *   DRIVER h2get URL N C W    (extra, not every driver) N GETs over HTTP/2 (TLS, ALPN h2), W in
 *                             flight as streams of at most C connections; every response must
 *                             have come over HTTP/2; `connections=K` (opened) appended
 *   DRIVER idle URL N         (extra, not every driver) N pooled idle connections, RSS each
 *   DRIVER upload URL FILE    (extra, not every driver) FILE as one multipart/form-data part,
 *                             sent with PUT (nginx's WebDAV module stores it); any 2xx is success
 *
 * Exit 0 only when every response was a complete 200; 3 for an unsupported workload; 2 for bad
 * usage; 1 for any failure. https URLs trust the PEM CA file named by $BENCH_CAFILE. One line on
 * stdout: "elapsed_s=S requests=N bytes=B" (the request loop only), with extra key=value pairs
 * after it where a workload has more to say.
 *
 * Header-only so that each driver stays one file plus this one.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_EXIT_OK          0
#define BENCH_EXIT_FAILED      1
#define BENCH_EXIT_USAGE       2
#define BENCH_EXIT_UNSUPPORTED 3

enum bench_mode { BENCH_GET, BENCH_DOWNLOAD, BENCH_IDLE, BENCH_UPLOAD, BENCH_FANOUT, BENCH_H2GET };

/* The multipart/form-data framing every upload driver sends around the file's bytes. */
#define BENCH_BOUNDARY "tern-bench-7d1c0a5e9b3f"
#define BENCH_PART_HEAD                                                                            \
  "--" BENCH_BOUNDARY                                                                              \
  "\r\n"                                                                                           \
  "Content-Disposition: form-data; name=\"file\"; filename=\"upload.bin\"\r\n"                     \
  "Content-Type: application/octet-stream\r\n\r\n"
#define BENCH_PART_TAIL "\r\n--" BENCH_BOUNDARY "--\r\n"

struct bench_args {
  enum bench_mode mode;
  const char *url;
  const char *path;   /* download: where the body goes; upload: the file to send */
  long n;             /* get: requests; idle: connections */
  long c;             /* get, fanout, h2get: connections */
  long w;             /* fanout, h2get: requests in flight (get: equal to c) */
  const char *cafile; /* $BENCH_CAFILE or NULL */
};

static const char *bench_name = "driver";

static void bench_die(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void bench_die(int code, const char *fmt, ...) {
  va_list ap;

  fprintf(stderr, "%s: ", bench_name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(code);
}

static long bench_parse_count(const char *s, const char *what) {
  char *end;
  long v;

  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v <= 0)
    bench_die(BENCH_EXIT_USAGE, "%s must be a positive integer, not '%s'", what, s);
  return v;
}

/* Parses argv by the contract; `has_extras` says whether this driver knows idle, upload and
 * h2get. */
static void bench_parse_args(struct bench_args *a, int argc, char **argv, int has_extras) {
  const char *ca = getenv("BENCH_CAFILE");

  memset(a, 0, sizeof *a);
  a->cafile = ca != NULL && *ca != '\0' ? ca : NULL;
  if (argc == 5 && strcmp(argv[1], "get") == 0) {
    a->mode = BENCH_GET;
    a->url = argv[2];
    a->n = bench_parse_count(argv[3], "N");
    a->c = bench_parse_count(argv[4], "C");
    if (a->c > a->n) a->c = a->n; /* more connections than requests could never all be used */
    a->w = a->c;
    return;
  }
  if (argc == 6 && strcmp(argv[1], "fanout") == 0) {
    a->mode = BENCH_FANOUT;
    a->url = argv[2];
    a->n = bench_parse_count(argv[3], "N");
    a->c = bench_parse_count(argv[4], "C");
    a->w = bench_parse_count(argv[5], "W");
    if (a->w > a->n) a->w = a->n;
    if (a->c > a->w) a->c = a->w;
    return;
  }
  if (argc == 6 && strcmp(argv[1], "h2get") == 0) {
    if (!has_extras) bench_die(BENCH_EXIT_UNSUPPORTED, "unsupported workload: h2get");
    a->mode = BENCH_H2GET;
    a->url = argv[2];
    a->n = bench_parse_count(argv[3], "N");
    a->c = bench_parse_count(argv[4], "C");
    a->w = bench_parse_count(argv[5], "W");
    if (a->w > a->n) a->w = a->n;
    if (a->c > a->w) a->c = a->w;
    return;
  }
  if (argc == 4 && strcmp(argv[1], "download") == 0) {
    a->mode = BENCH_DOWNLOAD;
    a->url = argv[2];
    a->path = argv[3];
    return;
  }
  if (argc == 4 && strcmp(argv[1], "idle") == 0) {
    if (!has_extras) bench_die(BENCH_EXIT_UNSUPPORTED, "unsupported workload: idle");
    a->mode = BENCH_IDLE;
    a->url = argv[2];
    a->n = bench_parse_count(argv[3], "N");
    return;
  }
  if (argc == 4 && strcmp(argv[1], "upload") == 0) {
    if (!has_extras) bench_die(BENCH_EXIT_UNSUPPORTED, "unsupported workload: upload");
    a->mode = BENCH_UPLOAD;
    a->url = argv[2];
    a->path = argv[3];
    return;
  }
  if (argc >= 2 && strcmp(argv[1], "get") != 0 && strcmp(argv[1], "download") != 0 &&
      strcmp(argv[1], "idle") != 0 && strcmp(argv[1], "upload") != 0 &&
      strcmp(argv[1], "fanout") != 0 && strcmp(argv[1], "h2get") != 0)
    bench_die(BENCH_EXIT_UNSUPPORTED, "unsupported workload: %s", argv[1]);
  fprintf(stderr,
          "usage: %s get URL N C | fanout URL N C W | download URL PATH%s\n"
          "  env BENCH_CAFILE: PEM CA file to trust for https\n",
          bench_name, has_extras ? " | h2get URL N C W | idle URL N | upload URL FILE" : "");
  exit(BENCH_EXIT_USAGE);
}

static double bench_now(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The one result line; `extra` (may be NULL) is appended after a space. */
static void bench_report(double elapsed, long requests, unsigned long long bytes,
                         const char *extra) {
  printf("elapsed_s=%.6f requests=%ld bytes=%llu%s%s\n", elapsed, requests, bytes,
         extra != NULL ? " " : "", extra != NULL ? extra : "");
  fflush(stdout);
}

/* Resident set size now, in KiB (VmRSS of /proc/self/status), or -1. */
static long bench_rss_kib(void) {
  char line[256];
  long kib = -1;
  FILE *f = fopen("/proc/self/status", "r");

  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "VmRSS:", 6) == 0) {
      kib = strtol(line + 6, NULL, 10);
      break;
    }
  }
  fclose(f);
  return kib;
}

static int bench_is_devnull(const char *path) { return strcmp(path, "/dev/null") == 0; }

#endif /* BENCH_COMMON_H */
