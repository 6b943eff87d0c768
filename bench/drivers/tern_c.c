/*
 * tern-c — the benchmark driver for Tern's C API (tern.h), used as a C application would use it.
 *
 *   tern-c get URL N C        N GETs over C keep-alive connections: C requests are in flight at
 *                             any time, each completion submitting the next one from its callback
 *   tern-c fanout URL N C W   the same with W requests in flight over at most C connections
 *                             (the engine queues what the pool cannot take yet): the reference
 *                             for the Swift drivers' W concurrent tasks
 *   tern-c h2get URL N C W    the same over HTTP/2: W requests in flight as streams of at most C
 *                             connections (tern_config_set_max_connections_per_origin(C); the
 *                             engine holds what finds no free stream until one frees up); each
 *                             request asks TERN_HTTP_VERSION_DEFAULT (h2 when ALPN offers it) and
 *                             each response must have come over HTTP/2; appends the connections
 *                             the engine opened (TERN_STAT_CONNECTIONS_OPENED)
 *   tern-c download URL PATH  one GET into PATH (tern_request_set_download_file); /dev/null
 *                             discards the body in-process through a data callback
 *   tern-c idle URL N         N idle pooled connections: RSS before and after, per connection
 *   tern-c upload URL FILE    FILE as one multipart/form-data part (PUT), built from body
 *                             segments: the part head and tail from memory, the file from disk
 *
 * The engine runs its own loop thread (tern_engine_new); the main thread only waits. Bodies of
 * `get` stream through tern_request_set_data_cb and are counted, never kept. Every response must
 * be a 200 whose body matches its Content-Length, else the driver exits 1 after the loop.
 * See common.h for the contract shared by all drivers.
 */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <tern.h>
#include <sys/stat.h>
#include <time.h>

struct run {
  struct bench_args args;
  tern_engine_t *engine;
  long to_issue;      /* requests this phase must submit in all */
  atomic_long issued; /* claimed by submitters (main thread at first, then callbacks) */
  long done;          /* completed; loop thread only until the phase ends */
  long failed;
  unsigned long long bytes;
  double end;
  int first_error_reported;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int finished;
};

static int on_data(tern_request_t *req, const void *data, size_t len, void *user_data) {
  struct run *r = user_data;

  (void)req;
  (void)data;
  r->bytes += len;
  return 0;
}

static void on_complete(tern_request_t *req, int status, void *user_data);

/* Creates and submits one request for the current phase. Returns 0 or a TERN_E* code. */
static int submit_one(struct run *r) {
  tern_request_t *req = NULL;
  int e = tern_request_new(&req);
  if (e != 0) return e;
  if ((e = tern_request_set_url(req, r->args.url)) != 0 ||
      (e = tern_request_set_complete_cb(req, on_complete, r)) != 0)
    goto fail;
  if (r->args.mode == BENCH_DOWNLOAD && !bench_is_devnull(r->args.path))
    e = tern_request_set_download_file(req, r->args.path, 0, 0, 0);
  else
    e = tern_request_set_data_cb(req, on_data, r);
  if (e != 0) goto fail;
  if (r->args.mode == BENCH_UPLOAD &&
      ((e = tern_request_set_method(req, "PUT")) != 0 ||
       (e = tern_request_add_header(req, "Content-Type",
                                    "multipart/form-data; boundary=" BENCH_BOUNDARY)) != 0 ||
       (e = tern_request_add_body_segment(req, BENCH_PART_HEAD, strlen(BENCH_PART_HEAD))) != 0 ||
       (e = tern_request_add_body_segment_file(req, r->args.path, 0, 0)) != 0 ||
       (e = tern_request_add_body_segment(req, BENCH_PART_TAIL, strlen(BENCH_PART_TAIL))) != 0))
    goto fail;
  if (r->args.mode == BENCH_H2GET &&
      (e = tern_request_set_http_version(req, TERN_HTTP_VERSION_DEFAULT)) != 0)
    goto fail;
  if ((e = tern_engine_submit(r->engine, req)) != 0) goto fail;
  return 0;
fail:
  tern_request_free(req);
  return e;
}

static void finish_phase(struct run *r) {
  pthread_mutex_lock(&r->lock);
  r->finished = 1;
  pthread_cond_signal(&r->cond);
  pthread_mutex_unlock(&r->lock);
}

/* Loop thread: check the response, free the request, keep C requests in flight. */
static void on_complete(tern_request_t *req, int status, void *user_data) {
  struct run *r = user_data;
  int http = tern_request_get_status(req);
  int64_t length = tern_request_get_content_length(req);
  int good_status = r->args.mode == BENCH_UPLOAD ? http >= 200 && http <= 299 : http == 200;
  int version = r->args.mode == BENCH_H2GET ? tern_request_get_http_version(req) : 0;

  if (status != 0 || !good_status ||
      (length >= 0 && (uint64_t)length != tern_request_get_bytes_received(req)) ||
      (r->args.mode == BENCH_H2GET && version != 20)) {
    if (!r->first_error_reported) {
      r->first_error_reported = 1;
      if (status != 0)
        fprintf(stderr, "%s: %s: %s (%s)\n", bench_name, r->args.url,
                tern_request_get_error_message(req), tern_err_name(status));
      else if (!good_status)
        fprintf(stderr, "%s: %s: status %d\n", bench_name, r->args.url, http);
      else if (r->args.mode == BENCH_H2GET && version != 20)
        fprintf(stderr, "%s: %s: answered over HTTP/%d.%d, not HTTP/2\n", bench_name, r->args.url,
                version / 10, version % 10);
      else
        fprintf(stderr, "%s: %s: body of %llu bytes, Content-Length %lld\n", bench_name,
                r->args.url, (unsigned long long)tern_request_get_bytes_received(req),
                (long long)length);
    }
    r->failed++;
  }
  if (r->args.mode == BENCH_DOWNLOAD && !bench_is_devnull(r->args.path))
    r->bytes += tern_request_get_bytes_received(req);
  tern_request_free(req);
  r->done++;
  if (atomic_fetch_add(&r->issued, 1) < r->to_issue) {
    int e = submit_one(r);
    if (e != 0) {
      fprintf(stderr, "%s: submit: %s\n", bench_name, tern_strerror(e));
      r->failed++;
      r->done++; /* counted as finished so that the phase still ends */
    }
  }
  if (r->done >= r->to_issue) {
    r->end = bench_now();
    finish_phase(r);
  }
}

/* Runs `count` requests with at most `inflight` in flight; returns the phase's elapsed time. */
static double run_phase(struct run *r, long count, long inflight) {
  double start;

  r->to_issue = count;
  r->done = 0;
  r->bytes = 0;
  r->finished = 0;
  atomic_store(&r->issued, 0);
  start = bench_now();
  for (long i = 0; i < inflight; i++) {
    if (atomic_fetch_add(&r->issued, 1) >= count) break;
    int e = submit_one(r);
    if (e != 0) bench_die(BENCH_EXIT_FAILED, "submit: %s", tern_strerror(e));
  }
  pthread_mutex_lock(&r->lock);
  while (!r->finished) pthread_cond_wait(&r->cond, &r->lock);
  pthread_mutex_unlock(&r->lock);
  return r->end - start;
}

int main(int argc, char **argv) {
  struct run r;
  tern_config_t *cfg;
  double elapsed;
  int e;

  bench_name = "tern-c";
  memset(&r, 0, sizeof r);
  bench_parse_args(&r.args, argc, argv, 1);
  pthread_mutex_init(&r.lock, NULL);
  pthread_cond_init(&r.cond, NULL);

  if (tern_config_new(&cfg) != 0) bench_die(BENCH_EXIT_FAILED, "out of memory");
  if (r.args.mode == BENCH_GET || r.args.mode == BENCH_FANOUT || r.args.mode == BENCH_H2GET)
    tern_config_set_max_connections_per_origin(cfg, (unsigned)r.args.c);
  else if (r.args.mode == BENCH_IDLE) /* N connections to one origin, past the default 6 */
    tern_config_set_max_connections_per_origin(cfg, (unsigned)r.args.n);
  /* The CA once for the engine, as an app trusting one CA everywhere sets it: each request
   * then uses the engine's without a copy of its own. */
  if (r.args.cafile != NULL && (e = tern_config_set_tls_ca_file(cfg, r.args.cafile)) != 0)
    bench_die(BENCH_EXIT_FAILED, "CA file: %s", tern_strerror(e));
  if ((e = tern_engine_new(&r.engine, cfg)) != 0)
    bench_die(BENCH_EXIT_FAILED, "engine: %s", tern_strerror(e));
  tern_config_free(cfg);

  switch (r.args.mode) {
    case BENCH_GET:
    case BENCH_FANOUT:
      elapsed = run_phase(&r, r.args.n, r.args.w);
      bench_report(elapsed, r.done, r.bytes, NULL);
      break;
    case BENCH_H2GET: {
      char extra[64];

      elapsed = run_phase(&r, r.args.n, r.args.w);
      snprintf(extra, sizeof extra, "connections=%llu",
               (unsigned long long)tern_engine_get_stat(r.engine, TERN_STAT_CONNECTIONS_OPENED));
      bench_report(elapsed, r.done, r.bytes, extra);
      break;
    }
    case BENCH_DOWNLOAD:
      elapsed = run_phase(&r, 1, 1);
      bench_report(elapsed, r.done, r.bytes, NULL);
      break;
    case BENCH_UPLOAD: {
      struct stat st;

      if (stat(r.args.path, &st) != 0)
        bench_die(BENCH_EXIT_FAILED, "%s: %s", r.args.path, strerror(errno));
      elapsed = run_phase(&r, 1, 1);
      /* bytes: the file's size (the engine sends all of it or fails the request). */
      bench_report(elapsed, r.done, (unsigned long long)st.st_size, NULL);
      break;
    }
    case BENCH_IDLE: {
      /* One request first, so that everything allocated once per engine or per origin (TLS
         * context, CA store, origin record) is in the baseline; then N at once, which reuse
         * that connection and open N - 1 more; all of them end idle in the pool. */
      char extra[256];
      long before, after, idle;
      double waited = 0;

      run_phase(&r, 1, 1);
      before = bench_rss_kib();
      elapsed = run_phase(&r, r.args.n, r.args.n);
      /* A connection goes back to the pool just after its request's callback. */
      while ((idle = (long)tern_engine_get_stat(r.engine, TERN_STAT_CONNECTIONS_IDLE)) < r.args.n &&
             waited < 2.0) {
        struct timespec ten_ms = { 0, 10 * 1000 * 1000 };
        nanosleep(&ten_ms, NULL);
        waited += 0.01;
      }
      after = bench_rss_kib();
      snprintf(extra, sizeof extra,
               "connections=%ld rss_before_kib=%ld rss_after_kib=%ld kib_per_connection=%.1f", idle,
               before, after,
               r.args.n > 1 ? (double)(after - before) / (double)(r.args.n - 1) : 0.0);
      bench_report(elapsed, r.done, r.bytes, extra);
      if (idle != r.args.n) {
        fprintf(stderr, "%s: %ld idle connections in the pool, wanted %ld\n", bench_name, idle,
                r.args.n);
        r.failed++;
      }
      break;
    }
  }
  tern_engine_free(r.engine);
  if (r.failed != 0) {
    fprintf(stderr, "%s: %ld of %ld requests failed\n", bench_name, r.failed, r.done);
    return BENCH_EXIT_FAILED;
  }
  return BENCH_EXIT_OK;
}
