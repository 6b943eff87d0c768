/* Integration tests against a real nginx: bodies by SHA-256, ranges, resume, keep-alive reuse,
 * many sequential and concurrent requests, pipelining, the embedded loop. */
#define _DEFAULT_SOURCE
#include "task.h"
#include "testsrv.h"
#include "testutil.h"

#include <tern.h>
#include <uv.h>

#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ---- */

static uint64_t file_size(const char *path) {
  struct stat st;
  ASSERT_EQ(stat(path, &st), 0);
  return (uint64_t)st.st_size;
}

static void download_and_check(const char *name, const char *sha_key, uint64_t size) {
  tern_engine_t *eng = test_engine_new(NULL);
  char path[64];
  snprintf(path, sizeof path, "/%s", name);
  char *dest = test_tmp_path(name);
  tern_request_t *req = test_request("NGINX_PORT", path);
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 0), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_UEQ(tern_request_get_bytes_received(req), size);
  ASSERT_EQ(tern_request_get_content_length(req), (int64_t)size);
  test_assert_file_sha(dest, sha_key);
  tern_request_free(req);
  unlink(dest);
  free(dest);
  test_finish(eng);
}

/* ---- bodies ---- */

TEST(http_download_empty) { download_and_check("empty.bin", "SHA_EMPTY", 0); }
TEST(http_download_1k) { download_and_check("1k.bin", "SHA_1K", 1024); }
TEST(http_download_100m) { download_and_check("100m.bin", "SHA_100M", 100u << 20); }

TEST(http_memory_body_1k) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(test_run(eng, req), 0);
  size_t len = 0;
  const void *body = tern_request_get_body(req, &len);
  ASSERT(body != NULL);
  ASSERT_EQ(len, 1024);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT_STR_EQ(tern_request_get_header(req, "content-length"), "1024");
  ASSERT(tern_request_get_header(req, "X-Connection") != NULL);
  ASSERT(tern_request_get_time(req, TERN_TIME_HEADERS) >= 0);
  ASSERT(tern_request_get_time(req, TERN_TIME_END) >=
         tern_request_get_time(req, TERN_TIME_HEADERS));
  tern_request_free(req);
  test_finish(eng);
}

/* The header block holds every field the per-field getters give, in order, and nothing else. */
TEST(http_header_block_matches_fields) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(test_run(eng, req), 0);
  size_t len = 0;
  const char *block = tern_request_get_header_block(req, &len);
  size_t count = tern_request_get_header_count(req);
  ASSERT(count >= 3);
  ASSERT(block != NULL);
  size_t at = 0;
  for (size_t i = 0; i < count; i++) {
    const char *name = NULL, *value = NULL;
    ASSERT_EQ(tern_request_get_header_at(req, i, &name, &value), 0);
    ASSERT(at < len);
    ASSERT_STR_EQ(block + at, name);
    at += strlen(name) + 1;
    ASSERT(at < len);
    ASSERT_STR_EQ(block + at, value);
    at += strlen(value) + 1;
  }
  ASSERT_EQ(at, len);
  tern_request_free(req);
  /* A request with no head has no block. */
  tern_request_t *fresh = NULL;
  ASSERT_EQ(tern_request_new(&fresh), 0);
  len = 7;
  ASSERT(tern_request_get_header_block(fresh, &len) == NULL);
  ASSERT_EQ(len, 0);
  tern_request_free(fresh);
  test_finish(eng);
}

typedef struct {
  void *sha_ctx_unused;
  uint64_t bytes;
  unsigned calls;
  int last_percent;
  int hundreds;
  int non_monotonic;
} stream_state;

static int on_data(tern_request_t *req, const void *data, size_t len, void *ud) {
  (void)req;
  (void)data;
  stream_state *s = ud;
  s->bytes += len;
  s->calls++;
  return 0;
}

static int on_progress(tern_request_t *req, tern_progress_state state, int percent, uint64_t done,
                       uint64_t total, void *ud) {
  (void)req;
  (void)done;
  (void)total;
  stream_state *s = ud;
  if (state != TERN_PROGRESS_DOWNLOAD) return 0;
  if (percent < s->last_percent) s->non_monotonic++;
  if (percent == 100) s->hundreds++;
  s->last_percent = percent;
  return 0;
}

TEST(http_stream_callback_and_progress) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/100m.bin");
  stream_state s = { 0 };
  ASSERT_EQ(tern_request_set_data_cb(req, on_data, &s), 0);
  ASSERT_EQ(tern_request_set_progress_cb(req, on_progress, &s), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_UEQ(s.bytes, 100u << 20);
  ASSERT_GT(s.calls, 1);
  size_t len = 1;
  ASSERT(tern_request_get_body(req, &len) == NULL); /* nothing accumulated */
  ASSERT_EQ(len, 0);
  ASSERT_EQ(s.non_monotonic, 0);
  ASSERT_EQ(s.hundreds, 1);
  ASSERT_EQ(s.last_percent, 100);
  tern_request_free(req);
  test_finish(eng);
}

/* ---- ranges and resume ---- */

TEST(http_range_to_file) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *dest = test_tmp_path("range.bin");
  tern_request_t *req = test_request("NGINX_PORT", "/100m.bin");
  ASSERT_EQ(tern_request_set_download_file(req, dest, 1000, 5000, 0), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 206);
  ASSERT_UEQ(tern_request_get_offset(req), 1000);
  ASSERT_UEQ(file_size(dest), 4000);
  char want[65], got[65];
  test_www_sha256_slice("100m.bin", 1000, 4000, want);
  ASSERT_EQ(testsrv_sha256_file(dest, got), 0);
  ASSERT_STR_EQ(got, want);
  tern_request_free(req);
  unlink(dest);
  free(dest);
  test_finish(eng);
}

TEST(http_open_ended_range) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *dest = test_tmp_path("tail.bin");
  tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(tern_request_set_download_file(req, dest, 1000, 0, 0), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 206);
  ASSERT_UEQ(file_size(dest), 24);
  char want[65], got[65];
  test_www_sha256_slice("1k.bin", 1000, 24, want);
  ASSERT_EQ(testsrv_sha256_file(dest, got), 0);
  ASSERT_STR_EQ(got, want);
  tern_request_free(req);
  unlink(dest);
  free(dest);
  test_finish(eng);
}

/* A download cut short (a truncated copy of its first bytes) is continued byte-identical. */
TEST(http_resume_truncated_file) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *dest = test_tmp_path("resume.bin");
  char *src = testsrv_www_path("100m.bin");
  /* The partial file: the first 37 MiB + 123 bytes of the real one. */
  uint64_t part = (37u << 20) + 123;
  int in = open(src, O_RDONLY), out = open(dest, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT(in >= 0 && out >= 0);
  char *buf = malloc(1 << 20);
  for (uint64_t done = 0; done < part;) {
    size_t n = part - done < (1u << 20) ? (size_t)(part - done) : (1u << 20);
    ASSERT_EQ(read(in, buf, n), (int64_t)n);
    ASSERT_EQ(write(out, buf, n), (int64_t)n);
    done += n;
  }
  free(buf);
  close(in);
  close(out);

  tern_request_t *req = test_request("NGINX_PORT", "/100m.bin");
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 1), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 206);
  ASSERT_UEQ(tern_request_get_offset(req), part);
  ASSERT_UEQ(tern_request_get_bytes_received(req), (100u << 20) - part);
  test_assert_file_sha(dest, "SHA_100M");
  tern_request_free(req);

  /* Resuming the complete file: nginx answers 416, which counts as done, file untouched. */
  req = test_request("NGINX_PORT", "/100m.bin");
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 1), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 416);
  test_assert_file_sha(dest, "SHA_100M");
  tern_request_free(req);

  unlink(dest);
  free(dest);
  free(src);
  test_finish(eng);
}

/* A failed request never touches the destination: the file opens only on a 2xx head. */
TEST(http_error_status_leaves_file_alone) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *dest = test_tmp_path("keep.bin");
  FILE *f = fopen(dest, "w");
  fputs("precious", f);
  fclose(f);
  tern_request_t *req = test_request("NGINX_PORT", "/missing.bin");
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 0), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 404);
  ASSERT_UEQ(file_size(dest), 8);
  size_t len = 0;
  ASSERT(tern_request_get_body(req, &len) != NULL); /* the error page is kept in memory */
  ASSERT_GT(len, 0);
  tern_request_free(req);
  unlink(dest);
  free(dest);
  test_finish(eng);
}

/* ---- keep-alive ---- */

TEST(http_keepalive_reuse) {
  tern_engine_t *eng = test_engine_new(NULL);
  char first_conn[32] = "";
  for (int i = 0; i < 5; i++) {
    tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
    ASSERT_EQ(test_run(eng, req), 0);
    test_assert_nginx_reuse(req, i, first_conn, sizeof first_conn);
    tern_request_free(req);
  }
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 1);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_REUSED), 4);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 1);
  test_finish(eng);
}

TEST(http_non_persistent) {
  tern_engine_t *eng = test_engine_new(NULL);
  for (int i = 0; i < 3; i++) {
    tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
    ASSERT_EQ(tern_request_set_persistent(req, 0), 0);
    ASSERT_EQ(test_run(eng, req), 0);
    ASSERT_EQ(tern_request_is_reused(req), 0);
    tern_request_free(req);
  }
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 3);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 0);
  test_finish(eng);
}

TEST(http_idle_timeout_closes) {
  tern_engine_t *eng = test_engine_with_idle_timeout(100);
  tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(test_run(eng, req), 0);
  tern_request_free(req);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 1);
  usleep((useconds_t)test_scaled_ms(400) * 1000);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPEN), 0);
  req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_is_reused(req), 0);
  tern_request_free(req);
  test_finish(eng);
}

/* nginx's short-keepalive server closes idle connections after 1 s; the engine notices the
 * close (or retries once) and the next request still succeeds. */
TEST(http_server_closes_pooled_connection) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_SHORT_PORT", "/1k.bin");
  ASSERT_EQ(test_run(eng, req), 0);
  tern_request_free(req);
  usleep(1500 * 1000);
  req = test_request("NGINX_SHORT_PORT", "/1k.bin");
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  test_finish(eng);
}

TEST(http_1000_sequential) {
  tern_engine_t *eng = test_engine_new(NULL);
  for (int i = 0; i < 1000; i++) {
    tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
    ASSERT_EQ(test_run(eng, req), 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    ASSERT_UEQ(tern_request_get_bytes_received(req), 1024);
    tern_request_free(req);
  }
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 1);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_REQUESTS_COMPLETED), 1000);
  test_finish(eng);
}

static void run_concurrent(tern_engine_t *eng, int n, bool pipelined) {
  test_waiter w;
  test_waiter_init(&w, n);
  tern_request_t **reqs = calloc((size_t)n, sizeof *reqs);
  for (int i = 0; i < n; i++) {
    reqs[i] = test_request("NGINX_PORT", "/1k.bin");
    if (pipelined) ASSERT_EQ(tern_request_set_pipelining(reqs[i], 1), 0);
    test_waiter_submit(&w, eng, reqs[i]);
  }
  test_waiter_wait(&w, 60000);
  ASSERT_EQ(w.completions, n);
  for (int i = 0; i < n; i++) {
    ASSERT_EQ(tern_request_get_error(reqs[i]), 0);
    ASSERT_EQ(tern_request_get_status(reqs[i]), 200);
    test_assert_req_body_sha(reqs[i], "SHA_1K");
    tern_request_free(reqs[i]);
  }
  free(reqs);
}

TEST(http_100_concurrent) {
  tern_engine_t *eng = test_engine_new(NULL);
  run_concurrent(eng, 100, false);
  ASSERT_LE(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 100);
  /* A second wave reuses the pooled connections and opens only what the first lacked: when a
   * first-wave request finished before the last one started, that wave needed (and pooled)
   * fewer than 100, so together they still open at most 100 (without reuse: about 200). */
  run_concurrent(eng, 100, false);
  ASSERT_LE(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 100);
  test_finish(eng);
}

TEST(http_connection_limit_queues) {
  tern_config_t *cfg = NULL;
  (void)tern_config_new(&cfg);
  ASSERT_EQ(tern_config_set_max_connections_per_origin(cfg, 4), 0);
  tern_engine_t *eng = test_engine_new(cfg);
  tern_config_free(cfg);
  run_concurrent(eng, 100, false);
  ASSERT_LE(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 4);
  test_finish(eng);
}

TEST(http_pipelining) {
  tern_config_t *cfg = NULL;
  (void)tern_config_new(&cfg);
  ASSERT_EQ(tern_config_set_max_connections_per_origin(cfg, 1), 0);
  ASSERT_EQ(tern_config_set_pipeline_depth(cfg, 8), 0);
  tern_engine_t *eng = test_engine_new(cfg);
  tern_config_free(cfg);
  /* Warm the connection: pipelining starts once the server has shown it keeps HTTP/1.1 alive. */
  tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(test_run(eng, req), 0);
  tern_request_free(req);
  run_concurrent(eng, 200, true);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 1);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_REUSED), 200);
  test_finish(eng);
}

TEST(http_head_and_http10) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/100m.bin");
  ASSERT_EQ(tern_request_set_method(req, "HEAD"), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(tern_request_get_content_length(req), 100 << 20);
  ASSERT_UEQ(tern_request_get_bytes_received(req), 0);
  tern_request_free(req);

  req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(tern_request_set_http10(req, 1), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_UEQ(tern_request_get_bytes_received(req), 1024);
  tern_request_free(req);
  test_finish(eng);
}

TEST(http_chunked_from_nginx) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/chunked/64k.txt");
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  const char *te = tern_request_get_header(req, "Transfer-Encoding");
  ASSERT(te != NULL && strcmp(te, "chunked") == 0);
  test_assert_req_body_sha(req, "SHA_64K");
  tern_request_free(req);
  test_finish(eng);
}

TEST(http_ipv6_and_localhost) {
  tern_engine_t *eng = test_engine_new(NULL);
  char url[128];
  snprintf(url, sizeof url, "http://localhost:%d/1k.bin", testsrv_port("NGINX_PORT"));
  tern_request_t *req = test_request_url(url);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  if (testsrv_has_ipv6()) {
    snprintf(url, sizeof url, "http://[::1]:%d/1k.bin", testsrv_port("NGINX_PORT"));
    req = test_request_url(url);
    ASSERT_EQ(test_run(eng, req), 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    tern_request_free(req);
  }
  test_finish(eng);
}

/* ---- embedded in the caller's loop ---- */

static int embedded_done;
static void on_embedded_done(tern_request_t *req, int status, void *ud) {
  (void)ud;
  ASSERT_EQ(status, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  embedded_done++;
}

TEST(http_embedded_loop) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  tern_engine_t *eng = NULL;
  ASSERT_EQ(tern_engine_new_on_loop(&eng, &loop, NULL), 0);
  tern_request_t *reqs[10];
  for (int i = 0; i < 10; i++) {
    reqs[i] = test_request("NGINX_PORT", "/1k.bin");
    ASSERT_EQ(tern_request_set_complete_cb(reqs[i], on_embedded_done, NULL), 0);
    ASSERT_EQ(tern_engine_submit(eng, reqs[i]), 0);
  }
  while (embedded_done < 10) uv_run(&loop, UV_RUN_ONCE);
  for (int i = 0; i < 10; i++) tern_request_free(reqs[i]);
  tern_engine_free(eng);
  uv_run(&loop, UV_RUN_DEFAULT); /* lets the engine's handles close */
  ASSERT_EQ(uv_loop_close(&loop), 0);
  test_assert_no_live_requests();
}

/* Requests still pending when the engine is freed complete with TERN_ESHUTDOWN. */
TEST(http_shutdown_completes_pending) {
  tern_engine_t *eng = test_engine_new(NULL);
  test_waiter w;
  test_waiter_init(&w, 20);
  tern_request_t *reqs[20];
  static stream_state sinks[20];
  for (int i = 0; i < 20; i++) {
    reqs[i] = test_request("NGINX_PORT", "/100m.bin");
    ASSERT_EQ(tern_request_set_data_cb(reqs[i], on_data, &sinks[i]), 0);
    test_waiter_submit(&w, eng, reqs[i]);
  }
  tern_engine_free(eng);
  ASSERT_EQ(w.remaining, 0);
  ASSERT_EQ(w.completions, 20);
  for (int i = 0; i < 20; i++) {
    int err = tern_request_get_error(reqs[i]);
    ASSERT(err == TERN_ESHUTDOWN || err == 0);
    tern_request_free(reqs[i]);
  }
  test_assert_no_live_requests();
}

/* ---- log callback, hop-response hook, sent head ---- */

typedef struct {
  int lines[4];
  int reuse_lines;
  int hop_calls;
  int hop_status;
  size_t headers_at_hop;
} observe_state;

static void on_log(tern_log_level level, const char *msg, tern_request_t *req, void *ud) {
  (void)req;
  observe_state *s = ud;
  s->lines[level]++;
  if (strstr(msg, "reusing connection #1")) s->reuse_lines++;
}

static int on_hop(tern_request_t *req, int status, void *ud) {
  observe_state *s = ud;
  s->hop_calls++;
  s->hop_status = status;
  s->headers_at_hop = tern_request_get_header_count(req);
  ASSERT_EQ(tern_request_get_bytes_received(req), 0); /* before any body byte */
  return 0;
}

TEST(http_log_hop_and_request_head) {
  static observe_state s;
  tern_config_t *cfg = NULL;
  (void)tern_config_new(&cfg);
  ASSERT_EQ(tern_config_set_log_cb(cfg, on_log, TERN_LOG_DEBUG, &s), 0);
  ASSERT_EQ(tern_config_set_user_agent(cfg, "probe/1"), 0);
  tern_engine_t *eng = test_engine_new(cfg);
  tern_config_free(cfg);
  for (int i = 0; i < 2; i++) {
    tern_request_t *req = test_request("NGINX_PORT", "/1k.bin?x=1");
    ASSERT_EQ(tern_request_add_header(req, "X-Probe", "yes"), 0);
    ASSERT_EQ(tern_request_set_hop_response_cb(req, on_hop, &s), 0);
    ASSERT_EQ(test_run(eng, req), 0);
    size_t len = 0;
    const char *head = tern_request_get_request_head(req, &len);
    ASSERT(head != NULL);
    ASSERT_EQ(strlen(head), len);
    ASSERT(strncmp(head, "GET /1k.bin?x=1 HTTP/1.1\r\n", 26) == 0);
    ASSERT(strstr(head, "\r\nUser-Agent: probe/1\r\n") != NULL);
    ASSERT(strstr(head, "\r\nX-Probe: yes\r\n") != NULL);
    ASSERT(strcmp(head + len - 4, "\r\n\r\n") == 0);
    tern_request_free(req);
  }
  ASSERT_EQ(s.hop_calls, 2);
  ASSERT_EQ(s.hop_status, 200);
  ASSERT_GT(s.headers_at_hop, 3);
  ASSERT_EQ(s.reuse_lines, 1);
  ASSERT_GE(s.lines[TERN_LOG_INFO], 6); /* sent, status, done, twice */
  ASSERT_EQ(s.lines[TERN_LOG_ERROR], 0);
  test_finish(eng);
}

/* ---- pinned addresses: the next address is tried when one fails ---- */

typedef struct {
  int failed_connects;
} fallback_state;

static void on_fallback_log(tern_log_level level, const char *msg, tern_request_t *req, void *ud) {
  (void)level;
  (void)req;
  fallback_state *s = ud;
  if (strstr(msg, "trying the next address")) s->failed_connects++;
}

TEST(http_next_address_after_failure) {
  /* multi.test resolves to 127.0.0.2 first, where nothing listens on nginx's port, then to
   * 127.0.0.1, where nginx does. */
  static fallback_state s;
  int port = testsrv_port("NGINX_PORT");
  char entry[128];
  snprintf(entry, sizeof entry, "multi.test:%d:127.0.0.2,[::1],127.0.0.1", port);
  tern_config_t *cfg = NULL;
  (void)tern_config_new(&cfg);
  ASSERT_EQ(tern_config_add_resolve(cfg, entry), 0);
  ASSERT_EQ(tern_config_add_resolve(cfg, "bad"), TERN_EINVAL);
  ASSERT_EQ(tern_config_add_resolve(cfg, "h:80:not-an-ip"), TERN_EINVAL);
  ASSERT_EQ(tern_config_set_log_cb(cfg, on_fallback_log, TERN_LOG_DEBUG, &s), 0);
  tern_engine_t *eng = test_engine_new(cfg);
  tern_config_free(cfg);
  char url[128];
  snprintf(url, sizeof url, "http://multi.test:%d/1k.bin", port);
  tern_request_t *req = test_request_url(url);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  /* 127.0.0.2 is refused; [::1] answers only when nginx listens on IPv6 too. */
  ASSERT_EQ(s.failed_connects, testsrv_has_ipv6() ? 1 : 2);
  test_finish(eng);
}

/* ---- tern_engine_call ---- */

typedef struct {
  uv_mutex_t lock;
  uv_cond_t cond;
  int order[4];
  int ran;
  tern_engine_t *eng;
} call_log;

static call_log calls;

static void note_call(void *arg) {
  int id = (int)(intptr_t)arg;
  uv_mutex_lock(&calls.lock);
  if (calls.ran < 4) calls.order[calls.ran] = id;
  calls.ran++;
  uv_cond_broadcast(&calls.cond);
  uv_mutex_unlock(&calls.lock);
}

static void complete_then_call(tern_request_t *req, int err, void *data) {
  (void)req;
  (void)data;
  ASSERT_EQ(err, 0);
  /* Inside a callback: runs after this callback returns, before anything else it queued. */
  ASSERT_EQ(tern_engine_call(calls.eng, note_call, (void *)(intptr_t)3), 0);
  ASSERT_EQ(tern_engine_call(calls.eng, note_call, (void *)(intptr_t)4), 0);
  uv_mutex_lock(&calls.lock);
  ASSERT_EQ(calls.ran, 2); /* not yet: they run after this returns */
  uv_mutex_unlock(&calls.lock);
}

TEST(http_engine_call_runs_on_the_loop_in_order) {
  uv_mutex_init(&calls.lock);
  uv_cond_init(&calls.cond);
  tern_engine_t *eng = test_engine_new(NULL);
  calls.eng = eng;
  ASSERT_EQ(tern_engine_call(NULL, note_call, NULL), TERN_EINVAL);
  ASSERT_EQ(tern_engine_call(eng, NULL, NULL), TERN_EINVAL);
  ASSERT_EQ(tern_engine_call(eng, note_call, (void *)(intptr_t)1), 0);
  ASSERT_EQ(tern_engine_call(eng, note_call, (void *)(intptr_t)2), 0);
  uv_mutex_lock(&calls.lock);
  while (calls.ran < 2) uv_cond_wait(&calls.cond, &calls.lock);
  uv_mutex_unlock(&calls.lock);
  tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(tern_request_set_complete_cb(req, complete_then_call, NULL), 0);
  ASSERT_EQ(tern_engine_submit(eng, req), 0);
  uv_mutex_lock(&calls.lock);
  while (calls.ran < 4) uv_cond_wait(&calls.cond, &calls.lock);
  uv_mutex_unlock(&calls.lock);
  for (int i = 0; i < 4; i++) ASSERT_EQ(calls.order[i], i + 1);
  /* A call still queued when the engine goes is dropped, not leaked or run on a dead loop. */
  ASSERT_EQ(tern_engine_call(eng, note_call, (void *)(intptr_t)5), 0);
  tern_request_free(req);
  test_finish(eng);
  ASSERT(calls.ran == 4 || calls.ran == 5);
  uv_cond_destroy(&calls.cond);
  uv_mutex_destroy(&calls.lock);
}

/* ---- tern_engine_defer ---- */

typedef struct {
  tern_engine_t *eng;
  tern_request_t *next;
  test_waiter next_done;
  uint64_t sent_at_complete;
  uint64_t sent_when_deferred;
  int calls_ran;
  int calls_ran_when_deferred;
  int deferred_ran;
  bool complete_returned;
} defer_log;

static defer_log deferred;

static void defer_count_call(void *arg) {
  (void)arg;
  deferred.calls_ran++;
}

static void defer_note(void *arg) {
  ASSERT_EQ((int)(intptr_t)arg, 7);
  ASSERT(deferred.complete_returned);
  deferred.calls_ran_when_deferred = deferred.calls_ran;
  deferred.sent_when_deferred = tern_engine_get_stat(deferred.eng, TERN_STAT_BYTES_SENT);
  deferred.deferred_ran++;
}

static void complete_then_defer(tern_request_t *req, int err, void *data) {
  (void)req;
  (void)data;
  ASSERT_EQ(err, 0);
  deferred.sent_at_complete = tern_engine_get_stat(deferred.eng, TERN_STAT_BYTES_SENT);
  ASSERT_EQ(tern_engine_defer(deferred.eng, defer_note, (void *)(intptr_t)7), 0);
  ASSERT_EQ(tern_engine_call(deferred.eng, defer_count_call, NULL), 0);
  test_waiter_submit(&deferred.next_done, deferred.eng, deferred.next);
  deferred.complete_returned = true;
}

TEST(http_engine_defer_runs_once_the_next_request_is_sent) {
  tern_engine_t *eng = test_engine_new(NULL);
  deferred.eng = eng;
  /* Outside an engine callback there is no "after": the caller does the work itself. */
  ASSERT_EQ(tern_engine_defer(eng, defer_note, NULL), TERN_EINVAL);
  ASSERT_EQ(tern_engine_defer(NULL, defer_note, NULL), TERN_EINVAL);
  ASSERT_EQ(tern_engine_defer(eng, NULL, NULL), TERN_EINVAL);
  deferred.next = test_request("NGINX_PORT", "/1k.bin");
  test_waiter_init(&deferred.next_done, 1);
  tern_request_t *first = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(tern_request_set_complete_cb(first, complete_then_defer, NULL), 0);
  ASSERT_EQ(tern_engine_submit(eng, first), 0);
  test_waiter_wait(&deferred.next_done, 60000);
  /* It ran once, after the calls the same callback queued and after the request it submitted
   * had been written on the kept-alive connection. */
  ASSERT_EQ(deferred.deferred_ran, 1);
  ASSERT_EQ(deferred.calls_ran_when_deferred, 1);
  ASSERT(deferred.sent_when_deferred > deferred.sent_at_complete);
  ASSERT_EQ(tern_request_get_error(deferred.next), 0);
  tern_request_free(first);
  tern_request_free(deferred.next);
  test_finish(eng);
}

/* ---- tern_request_pause_receive ---- */

static uint64_t pause_seen;

static int pause_on_first_data(tern_request_t *req, const void *data, size_t len, void *ud) {
  (void)data;
  (void)ud;
  if (pause_seen == 0) ASSERT_EQ(tern_request_pause_receive(req, 1), 0);
  pause_seen += len;
  return 0;
}

static void resume_later(void *arg) {
  usleep(300000);
  ASSERT_EQ(tern_request_pause_receive(arg, 0), 0);
}

TEST(http_pause_receive_holds_reading_and_the_body_timer) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/100m.bin");
  /* Paused for 300 ms with a 100 ms body timeout: the silence is ours, not the server's. */
  ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_BODY, 100), 0);
  ASSERT_EQ(tern_request_set_data_cb(req, pause_on_first_data, NULL), 0);
  ASSERT_EQ(tern_request_pause_receive(NULL, 1), TERN_EINVAL);
  uv_thread_t resumer;
  ASSERT_EQ(uv_thread_create(&resumer, resume_later, req), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  uv_thread_join(&resumer);
  ASSERT_UEQ(pause_seen, (uint64_t)100 << 20);
  ASSERT(tern_request_get_time(req, TERN_TIME_END) >= 0.3);
  tern_request_free(req);
  test_finish(eng);
}

/* A name is resolved once for a burst of connections (the engine keeps the answer for its DNS
 * cache timeout), every time with the cache off, and again once the answer is older than the
 * timeout. Pinned and literal addresses never reach the resolver. */
TEST(http_dns_answers_reused) {
  char url[128];
  snprintf(url, sizeof url, "http://localhost:%s/1k.bin", testsrv_get("NGINX_PORT"));
  static const uint64_t timeouts[] = { 60000, 0, 150 };
  for (int pass = 0; pass < 3; pass++) {
    tern_config_t *cfg = NULL;
    ASSERT_EQ(tern_config_new(&cfg), 0);
    ASSERT_EQ(tern_config_set_idle_timeout(cfg, 0), 0); /* a new connection for each request */
    if (pass > 0) ASSERT_EQ(tern_config_set_dns_cache_timeout(cfg, timeouts[pass]), 0);
    tern_engine_t *eng = test_engine_new(cfg);
    tern_config_free(cfg);
    for (int i = 0; i < 3; i++) {
      if (pass == 2 && i == 2) usleep((useconds_t)300 * 1000); /* past the 150 ms */
      tern_request_t *req = test_request_url(url);
      ASSERT_EQ(test_run(eng, req), 0);
      ASSERT_EQ(tern_request_get_status(req), 200);
      tern_request_free(req);
    }
    ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 3);
    static const uint64_t lookups[] = { 1, 3, 2 };
    ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_DNS_LOOKUPS), lookups[pass]);
    test_finish(eng);
  }
  /* A literal address never asks the resolver. */
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(test_run(eng, req), 0);
  tern_request_free(req);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_DNS_LOOKUPS), 0);
  test_finish(eng);
}
