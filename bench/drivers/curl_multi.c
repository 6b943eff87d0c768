/*
 * curl-multi — the benchmark driver for libcurl's multi interface, as a C application would
 * write it: C easy handles on one multi handle, driven by curl_multi_perform/curl_multi_poll.
 *
 *   curl-multi get URL N C        C easy handles; each one, when done, is removed and added
 *                                 again for the next request, reusing its connection from the
 *                                 multi handle's connection cache (at most C connections)
 *   curl-multi fanout URL N C W   the same with W easy handles (W transfers in flight) and at
 *                                 most C connections: libcurl queues the transfers that find no
 *                                 free connection
 *   curl-multi h2get URL N C W    W easy handles over HTTP/2 (CURL_HTTP_VERSION_2TLS,
 *                                 CURLOPT_PIPEWAIT so that the handles wait for the first
 *                                 connection's ALPN instead of each opening its own) multiplexed
 *                                 (CURLMOPT_PIPELINING CURLPIPE_MULTIPLEX) on at most C connections
 *                                 (CURLMOPT_MAX_HOST_CONNECTIONS), up to ceil(W / C) streams on
 *                                 each (CURLMOPT_MAX_CONCURRENT_STREAMS); every response must
 *                                 have come over HTTP/2; appends the connections opened (the sum
 *                                 of CURLINFO_NUM_CONNECTS)
 *   curl-multi download URL PATH  one transfer; the write callback write(2)s to PATH, or only
 *                                 counts for /dev/null. CURLOPT_BUFFERSIZE is 100 KiB, as the
 *                                 curl tool sets it.
 *   curl-multi idle URL N         N transfers at once, then N idle connections in the cache
 *   curl-multi upload URL FILE    FILE as one multipart/form-data part (curl_mime, file data
 *                                 streamed by libcurl), sent with PUT
 *
 * HTTP/1.1 is forced outside h2get (ALPN must not decide). A response
 * counts only with CURLE_OK (libcurl reports short bodies as CURLE_PARTIAL_FILE) and status 200.
 */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

struct run {
  struct bench_args args;
  CURLM *multi;
  long issued, done, failed;
  long connects; /* h2get: connections opened, summed over the transfers */
  unsigned long long bytes;
  int fd; /* download target, or -1 */
  int write_failed;
  curl_mime *mime; /* upload body, or NULL */
};

static size_t on_write(char *data, size_t size, size_t nmemb, void *user_data) {
  struct run *r = user_data;
  size_t len = size * nmemb;

  if (r->fd >= 0) {
    size_t off = 0;
    while (off < len) {
      ssize_t w = write(r->fd, data + off, len - off);
      if (w < 0) {
        if (errno == EINTR) continue;
        r->write_failed = 1;
        return 0; /* libcurl turns this into CURLE_WRITE_ERROR */
      }
      off += (size_t)w;
    }
  }
  r->bytes += len;
  return len;
}

static CURL *new_easy(struct run *r, long buffer_size) {
  CURL *e = curl_easy_init();

  if (e == NULL) bench_die(BENCH_EXIT_FAILED, "curl_easy_init failed");
  curl_easy_setopt(e, CURLOPT_URL, r->args.url);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
  if (r->args.mode == BENCH_H2GET) {
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
  } else {
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  }
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  if (buffer_size > 0) curl_easy_setopt(e, CURLOPT_BUFFERSIZE, buffer_size);
  if (r->args.cafile != NULL) curl_easy_setopt(e, CURLOPT_CAINFO, r->args.cafile);
  if (r->args.mode == BENCH_UPLOAD) {
    curl_mimepart *part;

    r->mime = curl_mime_init(e);
    part = curl_mime_addpart(r->mime);
    curl_mime_name(part, "file");
    if (curl_mime_filedata(part, r->args.path) != CURLE_OK)
      bench_die(BENCH_EXIT_FAILED, "%s: cannot read", r->args.path);
    curl_mime_filename(part, "upload.bin");
    curl_mime_type(part, "application/octet-stream");
    curl_easy_setopt(e, CURLOPT_MIMEPOST, r->mime);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
  }
  return e;
}

/* Collects finished transfers; `again` says whether a finished handle may start another. */
static void collect(struct run *r, long total, int again) {
  CURLMsg *msg;
  int left;

  while ((msg = curl_multi_info_read(r->multi, &left)) != NULL) {
    CURL *e = msg->easy_handle;
    long code = 0;

    long version = 0;

    if (msg->msg != CURLMSG_DONE) continue;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    if (r->args.mode == BENCH_H2GET) {
      long connects = 0;

      curl_easy_getinfo(e, CURLINFO_HTTP_VERSION, &version);
      curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &connects);
      r->connects += connects;
    }
    if (msg->data.result != CURLE_OK ||
        (r->args.mode == BENCH_UPLOAD ? code < 200 || code > 299 : code != 200) ||
        (r->args.mode == BENCH_H2GET && version != CURL_HTTP_VERSION_2_0)) {
      if (r->failed == 0 && msg->data.result != CURLE_OK)
        fprintf(stderr, "%s: %s: %s\n", bench_name, r->args.url,
                curl_easy_strerror(msg->data.result));
      else if (r->failed == 0 && code != 200)
        fprintf(stderr, "%s: %s: status %ld\n", bench_name, r->args.url, code);
      else if (r->failed == 0)
        fprintf(stderr, "%s: %s: answered over %s, not HTTP/2\n", bench_name, r->args.url,
                version == CURL_HTTP_VERSION_1_0   ? "HTTP/1.0"
                : version == CURL_HTTP_VERSION_1_1 ? "HTTP/1.1"
                                                   : "another HTTP version");
      r->failed++;
    }
    r->done++;
    curl_multi_remove_handle(r->multi, e);
    if (again && r->issued < total) {
      r->issued++;
      curl_multi_add_handle(r->multi, e);
    } else {
      curl_easy_cleanup(e);
    }
  }
}

/* Runs `total` transfers on `handles` easy handles; returns the elapsed time. */
static double run_loop(struct run *r, long total, long handles, long buffer_size) {
  double start = bench_now();
  int running = 1;

  for (long i = 0; i < handles && r->issued < total; i++) {
    r->issued++;
    curl_multi_add_handle(r->multi, new_easy(r, buffer_size));
  }
  while (r->done < total) {
    CURLMcode mc = curl_multi_perform(r->multi, &running);
    if (mc != CURLM_OK)
      bench_die(BENCH_EXIT_FAILED, "curl_multi_perform: %s", curl_multi_strerror(mc));
    collect(r, total, 1);
    if (r->done >= total) break;
    mc = curl_multi_poll(r->multi, NULL, 0, 1000, NULL);
    if (mc != CURLM_OK)
      bench_die(BENCH_EXIT_FAILED, "curl_multi_poll: %s", curl_multi_strerror(mc));
  }
  return bench_now() - start;
}

int main(int argc, char **argv) {
  struct run r;
  double elapsed;
  char extra[256];

  bench_name = "curl-multi";
  memset(&r, 0, sizeof r);
  r.fd = -1;
  bench_parse_args(&r.args, argc, argv, 1);
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    bench_die(BENCH_EXIT_FAILED, "curl_global_init failed");
  r.multi = curl_multi_init();
  if (r.multi == NULL) bench_die(BENCH_EXIT_FAILED, "curl_multi_init failed");

  switch (r.args.mode) {
    case BENCH_GET:
    case BENCH_FANOUT:
      curl_multi_setopt(r.multi, CURLMOPT_MAX_HOST_CONNECTIONS, r.args.c);
      curl_multi_setopt(r.multi, CURLMOPT_MAXCONNECTS, r.args.c);
      elapsed = run_loop(&r, r.args.n, r.args.w, 0);
      bench_report(elapsed, r.done, r.bytes, NULL);
      break;
    case BENCH_H2GET:
      curl_multi_setopt(r.multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
      curl_multi_setopt(r.multi, CURLMOPT_MAX_HOST_CONNECTIONS, r.args.c);
      curl_multi_setopt(r.multi, CURLMOPT_MAXCONNECTS, r.args.c);
      curl_multi_setopt(r.multi, CURLMOPT_MAX_CONCURRENT_STREAMS,
                        (r.args.w + r.args.c - 1) / r.args.c);
      elapsed = run_loop(&r, r.args.n, r.args.w, 0);
      snprintf(extra, sizeof extra, "connections=%ld", r.connects);
      bench_report(elapsed, r.done, r.bytes, extra);
      break;
    case BENCH_DOWNLOAD:
      if (!bench_is_devnull(r.args.path)) {
        r.fd = open(r.args.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (r.fd < 0) bench_die(BENCH_EXIT_FAILED, "%s: %s", r.args.path, strerror(errno));
      }
      elapsed = run_loop(&r, 1, 1, 100L * 1024);
      if (r.fd >= 0) {
        /* Closing the file is part of the request loop, as it is in the other drivers. */
        double t0 = bench_now();
        if (close(r.fd) != 0) r.write_failed = 1;
        elapsed += bench_now() - t0;
      }
      if (r.write_failed) {
        fprintf(stderr, "%s: %s: write failed\n", bench_name, r.args.path);
        r.failed++;
      }
      bench_report(elapsed, r.done, r.bytes, NULL);
      break;
    case BENCH_UPLOAD: {
      struct stat st;

      if (stat(r.args.path, &st) != 0)
        bench_die(BENCH_EXIT_FAILED, "%s: %s", r.args.path, strerror(errno));
      elapsed = run_loop(&r, 1, 1, 0);
      /* bytes: the file's size (libcurl sends all of it or fails the transfer). */
      bench_report(elapsed, r.done, (unsigned long long)st.st_size, NULL);
      break;
    }
    case BENCH_IDLE: {
      /* As tern-c does: one transfer first (so per-process set-up is in the baseline), then N
         * at once on N handles; the handles are freed and only the connections stay. */
      long before, after, idle;

      curl_multi_setopt(r.multi, CURLMOPT_MAXCONNECTS, r.args.n);
      run_loop(&r, 1, 1, 0);
      before = bench_rss_kib();
      r.issued = r.done = 0;
      r.bytes = 0;
      elapsed = run_loop(&r, r.args.n, r.args.n, 0);
      after = bench_rss_kib();
      /* libcurl has no public count of cached connections; N concurrent transfers on a
         * multi handle whose cache holds N means N connections, all kept. */
      idle = r.args.n;
      snprintf(extra, sizeof extra,
               "connections=%ld rss_before_kib=%ld rss_after_kib=%ld kib_per_connection=%.1f", idle,
               before, after,
               r.args.n > 1 ? (double)(after - before) / (double)(r.args.n - 1) : 0.0);
      bench_report(elapsed, r.done, r.bytes, extra);
      break;
    }
  }
  curl_multi_cleanup(r.multi);
  curl_mime_free(r.mime);
  curl_global_cleanup();
  if (r.failed != 0) {
    fprintf(stderr, "%s: %ld of %ld requests failed\n", bench_name, r.failed, r.done);
    return BENCH_EXIT_FAILED;
  }
  return BENCH_EXIT_OK;
}
