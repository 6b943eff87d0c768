/* tern_request_perform, the blocking call, against a real nginx: a body in memory, a file
 * download, HTTP and transfer errors, several threads performing on one engine at once (and the
 * default limit of 6 connections per origin they meet), cancellation from another thread, and
 * the refusal to block an engine's loop thread. A perform that hung would fail the case through
 * the runner's watchdog. */
#define _DEFAULT_SOURCE
#include "task.h"
#include "testsrv.h"
#include "testutil.h"

#include <tern.h>
#include <uv.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- helpers ---- */

/* Waits (bounded, scaled) until cond(eng) holds; polls, as the engine's counters are atomics
 * with nothing to wait on. */
static void wait_until(tern_engine_t *eng, bool (*cond)(tern_engine_t *eng), const char *what) {
  uint64_t deadline = test_now_ms() + test_scaled_ms(30000);
  while (!cond(eng)) {
    if (test_now_ms() > deadline) TEST_FAIL_("timed out waiting until %s", what);
    usleep(1000);
  }
}

/* An engine trusting the test CA, for nginx's TLS port: the one that serves /slow/ (the docroot
 * at 128 KiB/s, so 64k.txt takes about half a second: long enough to see requests overlap). */
static tern_engine_t *tls_engine(unsigned max_per_origin, bool set_limit) {
  tern_config_t *cfg = NULL;
  ASSERT_EQ(tern_config_new(&cfg), 0);
  ASSERT_EQ(tern_config_set_tls_ca_file(cfg, testsrv_get("CA_PEM")), 0);
  if (set_limit) ASSERT_EQ(tern_config_set_max_connections_per_origin(cfg, max_per_origin), 0);
  tern_engine_t *eng = test_engine_new(cfg);
  tern_config_free(cfg);
  return eng;
}

static tern_request_t *slow_request(const char *name) {
  char *url = test_fmt("https://127.0.0.1:%d/slow/%s", testsrv_port("TLS_PORT"), name);
  tern_request_t *req = test_request_url(url);
  free(url);
  return req;
}

/* The caller's own complete callback: perform runs it, once, on the loop thread. */
typedef struct {
  atomic_int calls;
  atomic_int status;
  pthread_t thread;
} complete_seen;

static void on_complete_seen(tern_request_t *req, int status, void *user_data) {
  complete_seen *s = user_data;
  ASSERT(tern_request_is_done(req));
  s->thread = pthread_self();
  atomic_store(&s->status, status);
  atomic_fetch_add(&s->calls, 1);
}

/* ---- one request ---- */

TEST(blocking_get_memory) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
  complete_seen seen = { 0 };
  ASSERT_EQ(tern_request_set_complete_cb(req, on_complete_seen, &seen), 0);
  ASSERT_EQ(tern_request_perform(eng, req), 0);
  /* Returned after completion, with the caller's callback run once, on the loop thread. */
  ASSERT(tern_request_is_done(req));
  ASSERT_EQ(atomic_load(&seen.calls), 1);
  ASSERT_EQ(atomic_load(&seen.status), 0);
  ASSERT(!pthread_equal(seen.thread, pthread_self()));
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(tern_request_get_error(req), 0);
  size_t len = 0;
  ASSERT(tern_request_get_body(req, &len) != NULL);
  ASSERT_EQ(len, 1024);
  test_assert_req_body_sha(req, "SHA_1K");
  /* Performed once: a second perform is a second submit. */
  ASSERT_EQ(tern_request_perform(eng, req), TERN_EBUSY);
  ASSERT_EQ(atomic_load(&seen.calls), 1);
  tern_request_free(req);
  test_finish(eng);
}

/* Without a complete callback of its own, and over a reused connection. */
TEST(blocking_get_sequence) {
  tern_engine_t *eng = test_engine_new(NULL);
  for (int i = 0; i < 20; i++) {
    tern_request_t *req = test_request("NGINX_PORT", "/64k.txt");
    ASSERT_EQ(tern_request_perform(eng, req), 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    test_assert_req_body_sha(req, "SHA_64K");
    if (i > 0) ASSERT(tern_request_is_reused(req));
    tern_request_free(req);
  }
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 1);
  test_finish(eng);
}

TEST(blocking_download_file) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *dest = test_tmp_path("blocking-100m.bin");
  tern_request_t *req = test_request("NGINX_PORT", "/100m.bin");
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 0), 0);
  ASSERT_EQ(tern_request_perform(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_UEQ(tern_request_get_bytes_received(req), 100u << 20);
  /* The file is whole when perform returns: renamed from .part, nothing left behind. */
  test_assert_file_sha(dest, "SHA_100M");
  char *part = test_fmt("%s.part", dest);
  ASSERT(!test_exists(part));
  free(part);
  tern_request_free(req);
  unlink(dest);
  free(dest);
  test_finish(eng);
}

/* ---- errors ---- */

/* An HTTP error status is a completed exchange: 0, with the status to read. */
TEST(blocking_http_404) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/no-such-file");
  ASSERT_EQ(tern_request_perform(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 404);
  tern_request_free(req);
  test_finish(eng);
}

TEST(blocking_connection_refused) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = test_fmt("http://127.0.0.1:%d/", test_unused_port());
  tern_request_t *req = test_request_url(url);
  free(url);
  complete_seen seen = { 0 };
  ASSERT_EQ(tern_request_set_complete_cb(req, on_complete_seen, &seen), 0);
  ASSERT_EQ(tern_request_perform(eng, req), TERN_ECONNREFUSED);
  ASSERT_EQ(atomic_load(&seen.calls), 1);
  ASSERT_EQ(atomic_load(&seen.status), TERN_ECONNREFUSED);
  ASSERT_EQ(tern_request_get_error(req), TERN_ECONNREFUSED);
  ASSERT_EQ(tern_request_get_status(req), 0);
  ASSERT(strstr(tern_request_get_error_message(req), "127.0.0.1") != NULL);
  tern_request_free(req);
  test_finish(eng);
}

/* What tern_engine_submit refuses, perform refuses the same way, and nothing runs. */
TEST(blocking_submit_errors) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = NULL;
  ASSERT_EQ(tern_request_new(&req), 0);
  complete_seen seen = { 0 };
  ASSERT_EQ(tern_request_set_complete_cb(req, on_complete_seen, &seen), 0);
  ASSERT_EQ(tern_request_perform(eng, req), TERN_EBADURL); /* no URL yet */
  ASSERT_EQ(tern_request_perform(NULL, req), TERN_EINVAL);
  ASSERT_EQ(tern_request_perform(eng, NULL), TERN_EINVAL);
  ASSERT(!tern_request_is_done(req));
  ASSERT_EQ(atomic_load(&seen.calls), 0);
  /* Still the caller's to change, and the callback it set is still its own. */
  char *url = testsrv_url("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(tern_request_set_url(req, url), 0);
  free(url);
  ASSERT_EQ(tern_request_perform(eng, req), 0);
  ASSERT_EQ(atomic_load(&seen.calls), 1);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  test_finish(eng);
}

/* ---- several threads ---- */

typedef struct {
  tern_engine_t *eng;
  pthread_barrier_t *start;
  int rounds; /* after a GET of /slow/64k.txt, this many GETs of /1k.bin (plain port) */
  int failures;
} performer;

static void *perform_thread(void *arg) {
  performer *p = arg;
  pthread_barrier_wait(p->start);
  tern_request_t *req = slow_request("64k.txt");
  if (tern_request_perform(p->eng, req) != 0 || tern_request_get_status(req) != 200) p->failures++;
  tern_request_free(req);
  for (int i = 0; i < p->rounds; i++) {
    req = test_request("NGINX_PORT", "/1k.bin");
    size_t len = 0;
    if (tern_request_perform(p->eng, req) != 0 || tern_request_get_status(req) != 200 ||
        tern_request_get_body(req, &len) == NULL || len != 1024)
      p->failures++;
    tern_request_free(req);
  }
  return NULL;
}

static bool two_active(tern_engine_t *eng) {
  return tern_engine_get_stat(eng, TERN_STAT_REQUESTS_ACTIVE) >= 2;
}

/* Two threads, each blocked in its own perform, both in flight on the one engine at once. */
TEST(blocking_two_threads) {
  tern_engine_t *eng = tls_engine(0, false);
  pthread_barrier_t start;
  ASSERT_EQ(pthread_barrier_init(&start, NULL, 2), 0);
  performer p[2];
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    p[i] = (performer){ .eng = eng, .start = &start, .rounds = 50 };
    ASSERT_EQ(pthread_create(&t[i], NULL, perform_thread, &p[i]), 0);
  }
  wait_until(eng, two_active, "both threads' requests are active");
  for (int i = 0; i < 2; i++) {
    ASSERT_EQ(pthread_join(t[i], NULL), 0);
    ASSERT_EQ(p[i].failures, 0);
  }
  pthread_barrier_destroy(&start);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_REQUESTS_COMPLETED), 2 * 51);
  test_finish(eng);
}

static bool six_open_four_waiting(tern_engine_t *eng) {
  return tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPEN) == 6 &&
         tern_engine_get_stat(eng, TERN_STAT_REQUESTS_WAITING) == 4;
}

/* Ten threads at once on an engine with the default configuration: six connections to the
 * origin (the default limit), the other four requests wait for one and then complete too. */
TEST(blocking_threads_default_origin_limit) {
  enum { N = 10 };
  tern_engine_t *eng = tls_engine(0, false); /* the default limit */
  pthread_barrier_t start;
  ASSERT_EQ(pthread_barrier_init(&start, NULL, N), 0);
  performer p[N];
  pthread_t t[N];
  for (int i = 0; i < N; i++) {
    p[i] = (performer){ .eng = eng, .start = &start, .rounds = 0 };
    ASSERT_EQ(pthread_create(&t[i], NULL, perform_thread, &p[i]), 0);
  }
  wait_until(eng, six_open_four_waiting, "6 connections are open and 4 requests wait");
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(pthread_join(t[i], NULL), 0);
    ASSERT_EQ(p[i].failures, 0);
  }
  pthread_barrier_destroy(&start);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 6);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_REUSED), N - 6);
  test_finish(eng);
}

/* 0, set explicitly, still lifts the limit: ten connections for ten requests at once. */
static bool ten_open(tern_engine_t *eng) {
  return tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPEN) == 10;
}

TEST(blocking_threads_unlimited_origin) {
  enum { N = 10 };
  tern_engine_t *eng = tls_engine(0, true);
  pthread_barrier_t start;
  ASSERT_EQ(pthread_barrier_init(&start, NULL, N), 0);
  performer p[N];
  pthread_t t[N];
  for (int i = 0; i < N; i++) {
    p[i] = (performer){ .eng = eng, .start = &start, .rounds = 0 };
    ASSERT_EQ(pthread_create(&t[i], NULL, perform_thread, &p[i]), 0);
  }
  wait_until(eng, ten_open, "10 connections are open");
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(pthread_join(t[i], NULL), 0);
    ASSERT_EQ(p[i].failures, 0);
  }
  pthread_barrier_destroy(&start);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), N);
  test_finish(eng);
}

/* ---- cancellation ---- */

typedef struct {
  tern_engine_t *eng;
  tern_request_t *req;
} canceler;

static bool one_active(tern_engine_t *eng) {
  return tern_engine_get_stat(eng, TERN_STAT_REQUESTS_ACTIVE) >= 1;
}

static void *cancel_thread(void *arg) {
  canceler *c = arg;
  wait_until(c->eng, one_active, "the performed request is active");
  tern_request_cancel(c->req);
  return NULL;
}

/* Another thread cancels the request a perform waits for: perform returns TERN_ECANCELED. */
TEST(blocking_cancel_from_another_thread) {
  tern_engine_t *eng = tls_engine(0, false);
  /* 100 MiB at 128 KiB/s: it would take minutes, so only the cancel can end it in time. */
  tern_request_t *req = slow_request("100m.bin");
  canceler c = { eng, req };
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, NULL, cancel_thread, &c), 0);
  ASSERT_EQ(tern_request_perform(eng, req), TERN_ECANCELED);
  ASSERT_EQ(pthread_join(t, NULL), 0);
  ASSERT_EQ(tern_request_get_error(req), TERN_ECANCELED);
  tern_request_free(req);
  test_finish(eng);
}

/* ---- the loop thread ---- */

typedef struct {
  tern_engine_t *eng;
  tern_request_t *other; /* performed from the loop thread: refused */
  atomic_int result;
  atomic_int other_done; /* whether the refused perform let `other` run */
  atomic_int calls;
} loop_try;

static void try_from_callback(tern_request_t *req, int status, void *user_data) {
  (void)req;
  (void)status;
  loop_try *t = user_data;
  atomic_store(&t->result, tern_request_perform(t->eng, t->other));
  atomic_store(&t->other_done, tern_request_is_done(t->other));
  atomic_fetch_add(&t->calls, 1);
}

static void try_from_call(void *arg) { try_from_callback(NULL, 0, arg); }

/* On the engine's own loop thread (a complete callback, a tern_engine_call function) perform
 * returns TERN_EINVAL at once instead of waiting for a loop it would stall, and submits
 * nothing: the request can be performed afterwards from another thread. */
TEST(blocking_refuses_loop_thread) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *first = test_request("NGINX_PORT", "/1k.bin");
  tern_request_t *other = test_request("NGINX_PORT", "/1k.bin");
  loop_try t = { .eng = eng, .other = other, .result = 1, .other_done = 1 };
  ASSERT_EQ(tern_request_set_complete_cb(first, try_from_callback, &t), 0);
  ASSERT_EQ(tern_request_perform(eng, first), 0);
  ASSERT_EQ(atomic_load(&t.calls), 1);
  ASSERT_EQ(atomic_load(&t.result), TERN_EINVAL);
  ASSERT_EQ(atomic_load(&t.other_done), 0);

  test_waiter w;
  test_waiter_init(&w, 1);
  atomic_store(&t.result, 1);
  ASSERT_EQ(tern_engine_call(eng, try_from_call, &t), 0);
  /* A request after the call, to know the call has run (calls run in order, before it). */
  tern_request_t *marker = test_request("NGINX_PORT", "/1k.bin");
  test_waiter_submit(&w, eng, marker);
  test_waiter_wait(&w, 60000);
  ASSERT_EQ(atomic_load(&t.calls), 2);
  ASSERT_EQ(atomic_load(&t.result), TERN_EINVAL);
  ASSERT(!tern_request_is_done(other));

  ASSERT_EQ(tern_request_perform(eng, other), 0);
  ASSERT_EQ(tern_request_get_status(other), 200);
  tern_request_free(marker);
  tern_request_free(first);
  tern_request_free(other);
  test_finish(eng);
}

/* An engine on the caller's loop: on that loop's thread perform refuses at once (waiting there
 * would wait for ever, the loop not running). */
TEST(blocking_refuses_embedded_loop_thread) {
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  tern_engine_t *eng = NULL;
  ASSERT_EQ(tern_engine_new_on_loop(&eng, &loop, NULL), 0);
  tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(tern_request_perform(eng, req), TERN_EINVAL);
  ASSERT(!tern_request_is_done(req));
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_REQUESTS_ACTIVE), 0);
  tern_request_free(req);
  tern_engine_free(eng);
  uv_run(&loop, UV_RUN_DEFAULT); /* lets the engine's handles close */
  ASSERT_EQ(uv_loop_close(&loop), 0);
  test_assert_no_live_requests();
}
