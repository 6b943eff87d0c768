/*
 * test-faults.c — the engine against Tests/TestServer/faultserver.py: truncated, reset, stalled
 * and malformed responses, timeouts, stale pooled connections, request framing, cancellation.
 *
 * Every case ends with the error code the fault calls for, within a bounded wait (a hang fails
 * the case instead of blocking ctest), and with every request object and the engine freed:
 * finish() checks that no request is still active and that the process-wide count of live
 * request objects is back to 0, so a leaked reference shows up even without sanitizers.
 *
 * Nothing here leaves the loopback interface: the connect timeout is produced by a local
 * listener whose accept queue is full, and LONG_LABEL_HOST has a 64-byte label, which the
 * resolver rejects before building a DNS query, so no packet leaves the machine.
 */
#define _DEFAULT_SOURCE /* usleep, mkstemp under -std=c11 */

#include "tern.h"
#include "task.h"
#include "testsrv.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* The longest a test waits for one request before it fails (scaled for sanitizer runs). */
#define WAIT_MS       15000
/* libuv's loop clock has millisecond granularity and may be CLOCK_MONOTONIC_COARSE, while
 * tern_request_get_time uses the precise clock: a timer can fire up to ~2 ms "early" as seen
 * from the precise clock. Lower bounds on elapsed times allow this much. */
#define CLOCK_SLACK_S 0.005

static void sleep_ms(uint64_t ms) { usleep((useconds_t)(ms * 1000)); }

/* Waits on cv until *flag is non-zero; returns 0, or -1 after ms milliseconds. mu is held. */
static int wait_flag(pthread_mutex_t *mu, pthread_cond_t *cv, const int *flag, uint64_t ms) {
  struct timespec dl = test_deadline(ms);
  while (!*flag) {
    int r = pthread_cond_timedwait(cv, mu, &dl);
    if (r == ETIMEDOUT && !*flag) return -1;
  }
  return 0;
}

/* One record per submitted request. The records live for the whole process (one test per
 * process), so a complete callback that ran twice, or late, writes into valid memory and
 * finish() notices the wrong count. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;
  int done;
  int status;
  int expect_calls; /* 1, or 0 for a request freed while in flight */
  int was_done;     /* tern_request_is_done() inside the callback */
} call_t;

#define MAX_CALLS 64
static call_t calls_[MAX_CALLS];
static int ncalls_;

static void on_complete(tern_request_t *req, int status, void *ud) {
  call_t *c = ud;
  pthread_mutex_lock(&c->mu);
  c->calls++;
  c->status = status;
  c->was_done = tern_request_is_done(req);
  c->done = 1;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

/* Sets the complete callback and submits; returns the record to wait on. */
static call_t *submit(tern_engine_t *eng, tern_request_t *req) {
  ASSERT(ncalls_ < MAX_CALLS);
  call_t *c = &calls_[ncalls_++];
  test_cond_init(&c->mu, &c->cv);
  c->expect_calls = 1;
  ASSERT_EQ(tern_request_set_complete_cb(req, on_complete, c), 0);
  ASSERT_EQ(tern_engine_submit(eng, req), 0);
  return c;
}

/* The request's status once its complete callback ran; fails the test after ms. */
static int wait_call(call_t *c, tern_request_t *req, uint64_t ms) {
  pthread_mutex_lock(&c->mu);
  if (wait_flag(&c->mu, &c->cv, &c->done, test_scaled_ms(ms)) != 0)
    TEST_FAIL_("request not complete after %llu ms (hang?)",
               (unsigned long long)test_scaled_ms(ms));
  int status = c->status;
  int was_done = c->was_done;
  pthread_mutex_unlock(&c->mu);
  ASSERT(was_done);
  ASSERT_EQ(tern_request_get_error(req), status);
  if (status == 0)
    ASSERT_STR_EQ(tern_request_get_error_message(req), "");
  else
    ASSERT(tern_request_get_error_message(req)[0] != '\0');
  return status;
}

/* Submits and waits: the request's final status (0 or TERN_E*). */
static int run(tern_engine_t *eng, tern_request_t *req) {
  return wait_call(submit(eng, req), req, WAIT_MS);
}

/* Requests created by req_new are freed by finish() unless req_free freed them already. */
#define MAX_REQS 64
static tern_request_t *reqs_[MAX_REQS];
static int nreqs_;

static tern_request_t *req_new_url(const char *url) {
  ASSERT(nreqs_ < MAX_REQS);
  tern_request_t *req = NULL;
  (void)tern_request_new(&req);
  ASSERT(req != NULL);
  if (url) ASSERT_EQ(tern_request_set_url(req, url), 0);
  reqs_[nreqs_++] = req;
  return req;
}

/* A request to the fault server's `path` ("/truncate?len=10"). */
static tern_request_t *req_new(const char *path) {
  char *url = testsrv_url("FAULT_PORT", path);
  tern_request_t *req = req_new_url(url);
  free(url);
  return req;
}

static void req_free(tern_request_t *req) {
  for (int i = 0; i < nreqs_; i++)
    if (reqs_[i] == req) reqs_[i] = NULL;
  tern_request_free(req);
}

/* The end of every test: nothing active, every request and the engine freed, no request object
 * left alive anywhere in the process, and every complete callback ran as often as expected. */
static void finish(tern_engine_t *eng) {
  if (eng) test_assert_idle(eng);
  for (int i = 0; i < nreqs_; i++) {
    tern_request_free(reqs_[i]);
    reqs_[i] = NULL;
  }
  tern_engine_free(eng);
  for (int i = 0; i < ncalls_; i++) {
    pthread_mutex_lock(&calls_[i].mu);
    int n = calls_[i].calls;
    pthread_mutex_unlock(&calls_[i].mu);
    if (n != calls_[i].expect_calls)
      TEST_FAIL_("request #%d: complete callback ran %d times, expected %d", i, n,
                 calls_[i].expect_calls);
  }
  test_assert_no_live_requests();
}

static void expect_error(tern_engine_t *eng, const char *path, int want) {
  tern_request_t *req = req_new(path);
  int got = run(eng, req);
  if (got != want)
    TEST_FAIL_("%s: expected %s, got %s (%s)", path, tern_err_name(want), tern_err_name(got),
               tern_request_get_error_message(req));
}

/* Asserts the body kept in memory is the fault server's pattern, n bytes. */
static void assert_pattern_body(const tern_request_t *req, size_t n) {
  size_t len = 0;
  const void *body = tern_request_get_body(req, &len);
  ASSERT_UEQ(len, n);
  ASSERT_UEQ(tern_request_get_bytes_received(req), n);
  if (n == 0) return;
  ASSERT(body != NULL);
  char *want = malloc(n);
  ASSERT(want != NULL);
  testsrv_pattern_fill(want, n, 0);
  ASSERT_MEM_EQ(body, want, n);
  free(want);
}

/* END - from (seconds) lies in [limit - slack, limit + 2 s (scaled)). */
static void assert_elapsed(const tern_request_t *req, tern_time from, uint64_t limit_ms) {
  double end = tern_request_get_time(req, TERN_TIME_END);
  double base = tern_request_get_time(req, from);
  ASSERT(end >= 0);
  ASSERT(base >= 0);
  double t = end - base;
  double lo = (double)limit_ms / 1000.0 - CLOCK_SLACK_S;
  double hi = (double)limit_ms / 1000.0 + (double)test_scaled_ms(2000) / 1000.0;
  if (!(t >= lo && t < hi))
    TEST_FAIL_("elapsed %.4f s (time %d to end) outside [%.4f, %.4f)", t, (int)from, lo, hi);
}

/* Progress observer: checks the documented rules as events arrive and lets the test wait for a
 * point in the download. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int events;       /* download events with percent >= 0 */
  int failures;     /* percent -1 events */
  int hundreds;     /* download events with percent 100 */
  int last;         /* last download percent, -1 before the first */
  int decreased;    /* a download percent went back */
  int out_of_range; /* percent outside -1..100 */
  uint64_t last_done, last_total;
  int wait_percent; /* `reached` is set once a download percent >= this arrives */
  int reached;
  int cancel_at;    /* return non-zero at the first download event with percent >= this; -1 never */
  int canceled;     /* times non-zero was returned */
  int after_cancel; /* events after we returned non-zero (except the -1 one) */
} watch_t;

static void watch_init(watch_t *w) {
  memset(w, 0, sizeof *w);
  test_cond_init(&w->mu, &w->cv);
  w->last = -1;
  w->wait_percent = 101;
  w->cancel_at = -1;
}

static int on_progress(tern_request_t *req, tern_progress_state state, int percent, uint64_t done,
                       uint64_t total, void *ud) {
  (void)req;
  watch_t *w = ud;
  int ret = 0;
  pthread_mutex_lock(&w->mu);
  if (percent < -1 || percent > 100) w->out_of_range++;
  if (percent == -1) {
    w->failures++;
  } else if (state == TERN_PROGRESS_DOWNLOAD) {
    if (w->canceled) w->after_cancel++;
    w->events++;
    if (percent < w->last) w->decreased++;
    if (percent == 100) w->hundreds++;
    w->last = percent;
    w->last_done = done;
    w->last_total = total;
    if (percent >= w->wait_percent) {
      w->reached = 1;
      pthread_cond_broadcast(&w->cv);
    }
    if (w->cancel_at >= 0 && percent >= w->cancel_at && !w->canceled) {
      w->canceled++;
      ret = 1;
    }
  }
  pthread_mutex_unlock(&w->mu);
  return ret;
}

static void watch_wait(watch_t *w, uint64_t ms) {
  pthread_mutex_lock(&w->mu);
  if (wait_flag(&w->mu, &w->cv, &w->reached, test_scaled_ms(ms)) != 0)
    TEST_FAIL_("download never reached %d%%", w->wait_percent);
  pthread_mutex_unlock(&w->mu);
}

static const char *header_or_empty(const tern_request_t *req, const char *name) {
  const char *v = tern_request_get_header(req, name);
  return v ? v : "";
}

/* ------------------------------------------------------------------------------------------ */
/* Bodies that end early                                                                      */
/* ------------------------------------------------------------------------------------------ */

TEST(faults_truncated_body) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = req_new("/truncate?len=1000&send=400");
  ASSERT_EQ(run(eng, req), TERN_EPARTIAL);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(tern_request_get_content_length(req), 1000);
  ASSERT_UEQ(tern_request_get_bytes_received(req), 400);
  assert_pattern_body(req, 400); /* what did arrive is kept, and is right */

  /* Nothing at all of the body. */
  tern_request_t *req2 = req_new("/truncate?len=1000&send=0");
  ASSERT_EQ(run(eng, req2), TERN_EPARTIAL);
  ASSERT_UEQ(tern_request_get_bytes_received(req2), 0);
  /* A body bigger than the connection buffer. */
  tern_request_t *req3 = req_new("/truncate?len=300000&send=200000");
  ASSERT_EQ(run(eng, req3), TERN_EPARTIAL);
  assert_pattern_body(req3, 200000);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_RETRIES), 0);
  finish(eng);
}

/* The server flushes 500 body bytes, waits until the kernel has them acknowledged (SIOCOUTQ
 * empty), then aborts with SO_LINGER 0. The data is in our receive queue before the RST, and
 * Linux hands queued data out before the error, so the outcome is exact: ECONNRESET after
 * exactly 500 bytes. */
TEST(faults_reset_mid_body) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = req_new("/reset?len=1000&send=500");
  ASSERT_EQ(run(eng, req), TERN_ECONNRESET);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_UEQ(tern_request_get_bytes_received(req), 500);
  assert_pattern_body(req, 500);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_RETRIES), 0);
  finish(eng);
}

/* The same reset, but already queued behind the data when the engine first reads: the upload
 * progress callback (loop thread, request fully written) holds the loop for 300 ms, time for the
 * server to answer, get the ACK and reset. epoll then reports IN|ERR|HUP together, and a reader
 * that takes the short read plus HUP for a clean end of stream (libuv's uv__stream_io does,
 * never reading the pending error) calls the reset a truncation. */
static int stall_after_upload(tern_request_t *req, tern_progress_state state, int percent,
                              uint64_t done, uint64_t total, void *ud) {
  (void)req, (void)done, (void)total;
  int *stalled = ud;
  if (state == TERN_PROGRESS_UPLOAD && percent == 100 && !*stalled) {
    *stalled = 1;
    sleep_ms(300);
  }
  return 0;
}

TEST(faults_reset_already_queued) {
  tern_engine_t *eng = test_engine_new(NULL);
  int stalled = 0;
  tern_request_t *req = req_new("/reset?len=1000&send=500");
  ASSERT_EQ(tern_request_set_method(req, "PUT"), 0);
  ASSERT_EQ(tern_request_set_body(req, "x", 1), 0);
  ASSERT_EQ(tern_request_set_progress_cb(req, stall_after_upload, &stalled), 0);
  int err = run(eng, req);
  ASSERT_EQ(stalled, 1);
  if (err != TERN_ECONNRESET)
    TEST_FAIL_("expected ECONNRESET, got %s (%s)", tern_err_name(err),
               tern_request_get_error_message(req));
  ASSERT_UEQ(tern_request_get_bytes_received(req), 500);
  finish(eng);
}

/* ------------------------------------------------------------------------------------------ */
/* Timeouts                                                                                   */
/* ------------------------------------------------------------------------------------------ */

TEST(faults_header_timeout) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = req_new("/slowheaders?delay_ms=5000");
  ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_HEADERS, 300), 0);
  ASSERT_EQ(run(eng, req), TERN_EHEADERTIMEOUT);
  ASSERT(tern_error_is_timeout(TERN_EHEADERTIMEOUT));
  ASSERT_EQ(tern_request_get_status(req), 0);
  assert_elapsed(req, TERN_TIME_START, 300);
  assert_elapsed(req, TERN_TIME_SENT, 300); /* the limit runs from the request being sent */
  ASSERT(tern_request_get_time(req, TERN_TIME_HEADERS) < 0);
  finish(eng);
}

TEST(faults_body_timeout) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = req_new("/stall?len=1000&send=500&stall_ms=5000");
  ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_BODY, 300), 0);
  ASSERT_EQ(run(eng, req), TERN_EBODYTIMEOUT);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_UEQ(tern_request_get_bytes_received(req), 500);
  assert_elapsed(req, TERN_TIME_START, 300);
  assert_elapsed(req, TERN_TIME_HEADERS, 300); /* silence starts with the last byte received */
  finish(eng);
}

/* A large body read with a wake-up threshold (SO_RCVLOWAT, conn.c) whose sender stalls with
 * fewer bytes than the threshold waiting (a burst, then 1000 bytes alone): the body timer
 * reads them (threshold dropped), then reports the stall; every byte sent arrives, and nothing
 * waits past the limit twice over. */
TEST(faults_body_timeout_below_read_threshold) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req =
      req_new("/stall?len=8000000&send=3000000&tail=1000&gap_ms=100&stall_ms=5000");
  ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_BODY, 400), 0);
  ASSERT_EQ(run(eng, req), TERN_EBODYTIMEOUT);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_UEQ(tern_request_get_bytes_received(req), 3001000);
  double stalled =
      tern_request_get_time(req, TERN_TIME_END) - tern_request_get_time(req, TERN_TIME_HEADERS);
  if (!(stalled < 0.8 + (double)test_scaled_ms(2000) / 1000.0))
    TEST_FAIL_("ended %.3f s after the head (limit 0.4 s, at most twice that expected)", stalled);
  finish(eng);
}

/* A reused connection's request with no head limit waits for its head however long it takes,
 * though the connection's timer still runs from the idle phase (it is left running when a limit
 * is dropped). It failed at the old idle deadline: "no response head within 0 ms". */
TEST(faults_no_head_limit_outlives_the_idle_timer) {
  tern_engine_t *eng = test_engine_with_idle_timeout(150);
  ASSERT_EQ(run(eng, req_new("/probe?tag=idle-timer&id=0&hold_ms=0&size=100")), 0);
  tern_request_t *late = req_new("/probe?tag=idle-timer&id=1&hold_ms=500&size=100");
  ASSERT_EQ(tern_request_set_timeout(late, TERN_TIMEOUT_HEADERS, 0), 0);
  ASSERT_EQ(run(eng, late), 0);
  ASSERT_EQ(tern_request_is_reused(late), 1);
  ASSERT_UEQ(tern_request_get_bytes_received(late), 100);
  finish(eng);
}

/* The same after a large body read with a read threshold, whose 100 ms watch leaves the timer
 * running (the CLI's -Z test met it when a short request followed a 5 MB one). */
TEST(faults_no_head_limit_after_a_read_threshold) {
  tern_engine_t *eng = test_engine_new(NULL);
  ASSERT_EQ(run(eng, req_new("/probe?tag=threshold-timer&id=0&hold_ms=0&size=5000000")), 0);
  tern_request_t *late = req_new("/probe?tag=threshold-timer&id=1&hold_ms=400&size=0");
  ASSERT_EQ(tern_request_set_timeout(late, TERN_TIMEOUT_HEADERS, 0), 0);
  ASSERT_EQ(tern_request_set_timeout(late, TERN_TIMEOUT_BODY, 0), 0);
  ASSERT_EQ(run(eng, late), 0);
  ASSERT_EQ(tern_request_is_reused(late), 1);
  finish(eng);
}

struct bytes_seen {
  uint64_t total, all_at_ms, want;
};

static int count_bytes(tern_request_t *req, const void *data, size_t len, void *ud) {
  (void)req, (void)data;
  struct bytes_seen *b = ud;
  b->total += len;
  if (b->total >= b->want && b->all_at_ms == 0) b->all_at_ms = test_now_ms();
  return 0;
}

/* The same burst and lone tail with no body limit: the tail is still read within a moment of
 * arriving (the threshold's own watch), long before the sender gives up and closes. */
TEST(faults_read_threshold_never_holds_bytes_back) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req =
      req_new("/stall?len=8000000&send=3000000&tail=1000&gap_ms=100&stall_ms=3000");
  struct bytes_seen seen = { .want = 3001000 };
  ASSERT_EQ(tern_request_set_data_cb(req, count_bytes, &seen), 0);
  uint64_t start = test_now_ms();
  ASSERT_EQ(run(eng, req), TERN_EPARTIAL);
  ASSERT_UEQ(seen.total, 3001000);
  ASSERT(seen.all_at_ms > 0);
  uint64_t took = seen.all_at_ms - start;
  if (took > 1500)
    TEST_FAIL_("the last 1000 bytes were delivered after %llu ms (FIN at 3100)",
               (unsigned long long)took);
  finish(eng);
}

/* A body that keeps flowing (1000 bytes every 50 ms for 5 s) never trips the body timeout, but
 * the total limit ends it; the same limit also ends a wait for headers. */
TEST(faults_total_timeout) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = req_new("/ok?size=100000&drip_ms=50&drip_bytes=1000");
  ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_BODY, 1000), 0);
  ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_TOTAL, 600), 0);
  ASSERT_EQ(run(eng, req), TERN_ETOTALTIMEOUT);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_GT(tern_request_get_bytes_received(req), 0);
  ASSERT_LT(tern_request_get_bytes_received(req), 100000);
  assert_elapsed(req, TERN_TIME_START, 600);

  tern_request_t *req2 = req_new("/slowheaders?delay_ms=5000");
  ASSERT_EQ(tern_request_set_timeout(req2, TERN_TIMEOUT_HEADERS, 0), 0); /* disabled */
  ASSERT_EQ(tern_request_set_timeout(req2, TERN_TIMEOUT_TOTAL, 400), 0);
  ASSERT_EQ(run(eng, req2), TERN_ETOTALTIMEOUT);
  ASSERT_EQ(tern_request_get_status(req2), 0);
  assert_elapsed(req2, TERN_TIME_START, 400);
  finish(eng);
}

/* A listener with backlog 0 whose accept queue already holds a connection nobody accepts: Linux
 * drops further SYNs (LISTENOVERFLOWS), so a connect to it hangs without any traffic leaving
 * loopback. A probe connect proves the queue is full before the engine tries. */
TEST(faults_connect_timeout) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT(lfd >= 0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
  ASSERT_EQ(listen(lfd, 0), 0);
  socklen_t sl = sizeof sa;
  ASSERT_EQ(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);

  int fds[8];
  int nfds = 0, hanging = 0;
  while (nfds < 8 && !hanging) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    ASSERT_EQ(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
    fds[nfds++] = fd;
    int r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    if (r == 0) continue;
    ASSERT_EQ(errno, EINPROGRESS);
    struct pollfd pfd = { .fd = fd, .events = POLLOUT };
    if (poll(&pfd, 1, 300) == 0) hanging = 1;
  }
  if (!hanging) {
    /* Not the Linux behaviour this relies on: a skip, which CI reports and fails on. */
    for (int i = 0; i < nfds; i++) close(fds[i]);
    close(lfd);
    test_skip("a full accept queue did not make connect hang on this system");
  } else {
    tern_engine_t *eng = test_engine_new(NULL);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", ntohs(sa.sin_port));
    tern_request_t *req = req_new_url(url);
    ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_CONNECT, 300), 0);
    ASSERT_EQ(run(eng, req), TERN_ECONNECTTIMEOUT);
    ASSERT_EQ(tern_request_get_status(req), 0);
    ASSERT(tern_request_get_time(req, TERN_TIME_CONNECTED) < 0);
    assert_elapsed(req, TERN_TIME_START, 300);
    ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_RETRIES), 0);
    finish(eng);
  }
  for (int i = 0; i < nfds; i++) close(fds[i]);
  close(lfd);
  test_assert_no_live_requests();
}

/* ------------------------------------------------------------------------------------------ */
/* Malformed responses                                                                        */
/* ------------------------------------------------------------------------------------------ */

TEST(faults_bad_status_line) {
  static const char *const proto[] = { "text",    "proto",   "bigcode", "shortcode", "nospace",
                                       "version", "garbage", "http09",  "nul",       "spacecolon",
                                       "obsfold", "badname", "nocolon" };
  tern_engine_t *eng = test_engine_new(NULL);
  char path[64];
  for (size_t i = 0; i < sizeof proto / sizeof proto[0]; i++) {
    snprintf(path, sizeof path, "/badstatus?variant=%s", proto[i]);
    expect_error(eng, path, TERN_EPROTO);
  }
  /* Not a single byte before the close: an empty reply, not a malformed one. */
  expect_error(eng, "/badstatus?variant=empty", TERN_EEMPTYREPLY);
  /* 101 Switching Protocols to a request that asked for no upgrade. */
  expect_error(eng, "/status/101", TERN_EPROTO);
  /* None of these is stale-connection material: each was a fresh connection. */
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_RETRIES), 0);
  /* The engine is still fine afterwards. */
  tern_request_t *ok = req_new("/ok?size=100");
  ASSERT_EQ(run(eng, ok), 0);
  assert_pattern_body(ok, 100);
  finish(eng);
}

TEST(faults_oversized_headers) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* Many ~115-byte fields adding up to more than 64 KiB, and one 70 000-byte field. */
  expect_error(eng, "/bigheaders?size=70000", TERN_EHEADERSIZE);
  expect_error(eng, "/bigheaders?size=70000&single=1", TERN_EHEADERSIZE);
  /* A big head that still fits the default limit is fine. */
  tern_request_t *fits = req_new("/bigheaders?size=60000&single=1");
  ASSERT_EQ(run(eng, fits), 0);
  ASSERT_EQ(tern_request_get_status(fits), 200);
  ASSERT_UEQ(strlen(header_or_empty(fits, "X-Filler")), 60000);
  size_t len = 0;
  const void *body = tern_request_get_body(fits, &len);
  ASSERT_UEQ(len, 2);
  ASSERT_MEM_EQ(body, "ok", 2);
  finish(eng);

  tern_config_t *cfg = NULL;

  (void)tern_config_new(&cfg);
  ASSERT(cfg != NULL);
  ASSERT_EQ(tern_config_set_max_header_size(cfg, 2048), 0);
  eng = test_engine_new(cfg);
  tern_config_free(cfg);
  expect_error(eng, "/bigheaders?size=3000", TERN_EHEADERSIZE);
  expect_error(eng, "/bigheaders?size=3000&single=1", TERN_EHEADERSIZE);
  tern_request_t *small = req_new("/bigheaders?size=1500&single=1");
  ASSERT_EQ(run(eng, small), 0);
  ASSERT_EQ(tern_request_get_status(small), 200);
  tern_request_t *ok = req_new("/ok?size=5000");
  ASSERT_EQ(run(eng, ok), 0);
  assert_pattern_body(ok, 5000);
  finish(eng);
}

TEST(faults_bad_chunks) {
  static const char *const bad[] = { "hex", "overflow", "negative", "nocrlf", "badtrailer" };
  tern_engine_t *eng = test_engine_new(NULL);
  char path[64];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(path, sizeof path, "/badchunk?variant=%s", bad[i]);
    expect_error(eng, path, TERN_ECHUNKED);
  }
  /* A chunk of 0x100 bytes of which 50 arrive, then FIN: "hello" + 50 bytes, then EPARTIAL. */
  tern_request_t *trunc = req_new("/badchunk?variant=truncated");
  ASSERT_EQ(run(eng, trunc), TERN_EPARTIAL);
  ASSERT_EQ(tern_request_get_status(trunc), 200);
  ASSERT_UEQ(tern_request_get_bytes_received(trunc), 55);
  /* Two whole chunks and no last chunk before the FIN. */
  tern_request_t *nolast = req_new("/badchunk?variant=nolast");
  ASSERT_EQ(run(eng, nolast), TERN_EPARTIAL);
  ASSERT_UEQ(tern_request_get_bytes_received(nolast), 10);
  size_t len = 0;
  const void *body = tern_request_get_body(nolast, &len);
  ASSERT_UEQ(len, 10);
  ASSERT_MEM_EQ(body, "helloworld", 10);
  finish(eng);
}

/* ------------------------------------------------------------------------------------------ */
/* Connecting                                                                                 */
/* ------------------------------------------------------------------------------------------ */

TEST(faults_connection_refused) {
  tern_engine_t *eng = test_engine_new(NULL);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/", test_unused_port());
  tern_request_t *req = req_new_url(url);
  ASSERT_EQ(run(eng, req), TERN_ECONNREFUSED);
  ASSERT_EQ(tern_request_get_status(req), 0);
  ASSERT_EQ(tern_request_get_http_minor(req), -1);
  ASSERT(strstr(tern_request_get_error_message(req), "127.0.0.1") != NULL);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_RETRIES), 0);
  finish(eng);
}

#define LONG_LABEL_HOST "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.invalid"

TEST(faults_unresolvable_host) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = req_new_url("http://" LONG_LABEL_HOST "/");
  ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_CONNECT, 20000), 0);
  ASSERT_EQ(run(eng, req), TERN_ERESOLVE);
  ASSERT_EQ(tern_request_get_status(req), 0);
  ASSERT(strstr(tern_request_get_error_message(req), LONG_LABEL_HOST) != NULL);
  finish(eng);
}

/* ------------------------------------------------------------------------------------------ */
/* Pooled connections the server closes                                                       */
/* ------------------------------------------------------------------------------------------ */

/* The server closes the idle connection 100 ms after the first response; the engine reads on
 * idle connections, sees the FIN and drops it, so the second request opens a fresh one. */
TEST(faults_closepooled_detected) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *r1 = req_new("/closepooled?after_ms=100");
  ASSERT_EQ(run(eng, r1), 0);
  ASSERT_EQ(tern_request_get_status(r1), 200);
  sleep_ms(500);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 0);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPEN), 0);
  tern_request_t *r2 = req_new("/ok?size=1000");
  ASSERT_EQ(run(eng, r2), 0);
  ASSERT_EQ(tern_request_get_status(r2), 200);
  assert_pattern_body(r2, 1000);
  ASSERT_EQ(tern_request_is_reused(r2), 0);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_RETRIES), 0);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 2);
  ASSERT(strcmp(header_or_empty(r1, "X-Connection"), header_or_empty(r2, "X-Connection")) != 0);
  finish(eng);
}

/* The server answers /closenext, then drops the next request on that connection unanswered
 * (FIN or RST): an idempotent request is retried once, silently, on a fresh connection. */
static void closenext_retried(const char *mode) {
  char path[64];
  snprintf(path, sizeof path, "/closenext?mode=%s", mode);
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *r1 = req_new(path);
  ASSERT_EQ(run(eng, r1), 0);
  ASSERT_EQ(tern_request_get_status(r1), 200);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 1);
  tern_request_t *r2 = req_new("/ok?size=2000");
  ASSERT_EQ(run(eng, r2), 0);
  ASSERT_EQ(tern_request_get_status(r2), 200);
  assert_pattern_body(r2, 2000);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_RETRIES), 1);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 2);
  ASSERT_EQ(tern_request_is_reused(r2), 0); /* the answer came on the fresh connection */
  ASSERT(strcmp(header_or_empty(r1, "X-Connection"), header_or_empty(r2, "X-Connection")) != 0);
  ASSERT_STR_EQ(header_or_empty(r2, "X-Connection-Requests"), "1");
  finish(eng);
}

TEST(faults_closenext_retried) { closenext_retried("fin"); }

TEST(faults_closenext_rst_retried) { closenext_retried("rst"); }

TEST(faults_closenext_post_not_retried) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *r1 = req_new("/closenext?mode=fin");
  ASSERT_EQ(run(eng, r1), 0);
  tern_request_t *r2 = req_new("/echo");
  ASSERT_EQ(tern_request_set_method(r2, "POST"), 0);
  ASSERT_EQ(tern_request_set_body(r2, "hello", 5), 0);
  ASSERT_EQ(run(eng, r2), TERN_EEMPTYREPLY);
  ASSERT_EQ(tern_request_get_status(r2), 0);
  ASSERT_EQ(tern_request_is_reused(r2), 1);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_RETRIES), 0);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 1);
  finish(eng);
}

/* Keep-Alive: timeout=2 makes the engine expire the pooled connection itself after 1 s (a
 * margin before the server's 2 s), so it never sends into a connection the server closes. */
TEST(faults_keepalive_timeout_honoured) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *r1 = req_new("/keepalive-timeout?timeout=2");
  ASSERT_EQ(run(eng, r1), 0);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 1);
  sleep_ms(1500);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 0);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPEN), 0);
  tern_request_t *r2 = req_new("/ok?size=10");
  ASSERT_EQ(run(eng, r2), 0);
  ASSERT_EQ(tern_request_is_reused(r2), 0);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_RETRIES), 0);
  finish(eng);
}

/* ------------------------------------------------------------------------------------------ */
/* Framing edge cases                                                                         */
/* ------------------------------------------------------------------------------------------ */

TEST(faults_interim_responses) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = req_new("/interim?size=64"); /* 100 Continue, 103 Early Hints, 200 */
  ASSERT_EQ(run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_STR_EQ(tern_request_get_reason(req), "OK");
  ASSERT(tern_request_get_header(req, "Link") == NULL); /* the 103's field is not the final's */
  assert_pattern_body(req, 64);

  tern_request_t *req2 = req_new("/status/100-then-103-then-200?size=3000");
  ASSERT_EQ(run(eng, req2), 0);
  ASSERT_EQ(tern_request_get_status(req2), 200);
  ASSERT_EQ(tern_request_is_reused(req2), 1);
  assert_pattern_body(req2, 3000);

  tern_request_t *req3 = req_new("/status/103-then-204");
  ASSERT_EQ(run(eng, req3), 0);
  ASSERT_EQ(tern_request_get_status(req3), 204);
  assert_pattern_body(req3, 0);
  finish(eng);
}

TEST(faults_no_body_statuses) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *r204 = req_new("/status/204");
  ASSERT_EQ(run(eng, r204), 0);
  ASSERT_EQ(tern_request_get_status(r204), 204);
  assert_pattern_body(r204, 0);

  tern_request_t *r304 = req_new("/status/304");
  ASSERT_EQ(run(eng, r304), 0);
  ASSERT_EQ(tern_request_get_status(r304), 304);
  assert_pattern_body(r304, 0);
  ASSERT_EQ(tern_request_is_reused(r304), 1);

  tern_request_t *after = req_new("/ok?size=700");
  ASSERT_EQ(run(eng, after), 0);
  ASSERT_EQ(tern_request_is_reused(after), 1);
  assert_pattern_body(after, 700);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 1);
  finish(eng);
}

/* HEAD: Content-Length 50000 announced, no body sent. Waiting for those bytes would hang until
 * a timeout; the connection must stay usable. */
TEST(faults_head_no_body) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *head = req_new("/ok?size=50000");
  ASSERT_EQ(tern_request_set_method(head, "HEAD"), 0);
  ASSERT_EQ(tern_request_set_timeout(head, TERN_TIMEOUT_BODY, 5000), 0);
  ASSERT_EQ(run(eng, head), 0);
  ASSERT_EQ(tern_request_get_status(head), 200);
  ASSERT_STR_EQ(header_or_empty(head, "Content-Length"), "50000");
  ASSERT_EQ(tern_request_get_content_length(head), 50000);
  assert_pattern_body(head, 0);
  ASSERT(tern_request_get_time(head, TERN_TIME_END) < 1.0);

  tern_request_t *get = req_new("/ok?size=50000");
  ASSERT_EQ(run(eng, get), 0);
  ASSERT_EQ(tern_request_is_reused(get), 1);
  assert_pattern_body(get, 50000);
  ASSERT_STR_EQ(header_or_empty(get, "X-Connection"), header_or_empty(head, "X-Connection"));
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 1);
  finish(eng);
}

TEST(faults_close_delimited) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = req_new("/close-delimited?size=300000");
  ASSERT_EQ(run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(tern_request_get_content_length(req), -1);
  assert_pattern_body(req, 300000);
  /* The connection ended with the body: it is not pooled. */
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 0);
  tern_request_t *empty = req_new("/close-delimited?size=0");
  ASSERT_EQ(run(eng, empty), 0);
  assert_pattern_body(empty, 0);
  finish(eng);
}

static void check_progress_run(tern_engine_t *eng, const char *path, int64_t announced,
                               uint64_t size) {
  watch_t w;
  watch_init(&w);
  tern_request_t *req = req_new(path);
  ASSERT_EQ(tern_request_set_progress_cb(req, on_progress, &w), 0);
  ASSERT_EQ(run(eng, req), 0);
  ASSERT_EQ(tern_request_get_content_length(req), announced);
  assert_pattern_body(req, size);
  pthread_mutex_lock(&w.mu);
  ASSERT_GT(w.events, 1);
  ASSERT_EQ(w.hundreds, 1);
  ASSERT_EQ(w.decreased, 0);
  ASSERT_EQ(w.out_of_range, 0);
  ASSERT_EQ(w.failures, 0);
  ASSERT_EQ(w.last, 100);
  ASSERT_UEQ(w.last_done, size);
  pthread_mutex_unlock(&w.mu);
}

TEST(faults_content_size_chunked) {
  tern_engine_t *eng = test_engine_new(NULL);
  check_progress_run(eng, "/contentsize?size=100000&chunk=1000", 100000, 100000);
  /* A Content-Size smaller than the body: 100 is still reported once, the body still whole. */
  check_progress_run(eng, "/contentsize?size=20000&announce=5000&chunk=1000", 5000, 20000);
  finish(eng);
}

/* ------------------------------------------------------------------------------------------ */
/* What the server receives                                                                   */
/* ------------------------------------------------------------------------------------------ */

TEST(faults_echo_request_headers) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = req_new("/echo?x=1");
  ASSERT_EQ(tern_request_add_header(req, "X-Tern-Test", "hello, world"), 0);
  ASSERT_EQ(run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Method"), "GET");
  ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Body-Length"), "0");
  char *doc = test_req_body_str(req);
  char want[128];
  ASSERT(strstr(doc, "\"target\": \"/echo?x=1\"") != NULL);
  ASSERT(strstr(doc, "\"version\": \"HTTP/1.1\"") != NULL);
  ASSERT(strstr(doc, "[\"X-Tern-Test\", \"hello, world\"]") != NULL);
  snprintf(want, sizeof want, "[\"User-Agent\", \"tern/%s\"]", tern_version_string());
  ASSERT(strstr(doc, want) != NULL);
  snprintf(want, sizeof want, "[\"Host\", \"127.0.0.1:%d\"]", testsrv_port("FAULT_PORT"));
  ASSERT(strstr(doc, want) != NULL);
  /* A GET without a body sends no framing headers. */
  ASSERT(strstr(doc, "Content-Length") == NULL);
  ASSERT(strstr(doc, "Transfer-Encoding") == NULL);
  free(doc);
  finish(eng);
}

TEST(faults_echo_post_memory_body) {
  tern_engine_t *eng = test_engine_new(NULL);
  size_t n = 300000;
  unsigned char *data = malloc(n);
  ASSERT(data != NULL);
  for (size_t i = 0; i < n; i++) data[i] = (unsigned char)(i * 131 + (i >> 9));
  char sha[65];
  testsrv_sha256_mem(data, n, sha);
  tern_request_t *req = req_new("/echo");
  ASSERT_EQ(tern_request_set_method(req, "POST"), 0);
  ASSERT_EQ(tern_request_set_body(req, data, n), 0);
  memset(data, 0, n); /* the body was copied */
  free(data);
  ASSERT_EQ(run(eng, req), 0);
  ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Method"), "POST");
  ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Body-Length"), "300000");
  ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Chunked"), "0");
  ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Body-Sha256"), sha);

  /* An empty POST still says Content-Length: 0. */
  tern_request_t *empty = req_new("/echo");
  ASSERT_EQ(tern_request_set_method(empty, "POST"), 0);
  ASSERT_EQ(run(eng, empty), 0);
  char *doc = test_req_body_str(empty);
  ASSERT(strstr(doc, "[\"Content-Length\", \"0\"]") != NULL);
  free(doc);
  finish(eng);
}

typedef struct {
  const unsigned char *data;
  size_t len, pos;
  int calls;
  size_t max_cap;
} source_t;

static int64_t read_source(tern_request_t *req, void *buf, size_t cap, void *ud) {
  (void)req;
  source_t *s = ud;
  if (cap > s->max_cap) s->max_cap = cap;
  size_t want = 1000 + (size_t)(s->calls * 997) % 7000; /* uneven pieces */
  s->calls++;
  size_t n = s->len - s->pos;
  if (n > want) n = want;
  if (n > cap) n = cap;
  memcpy(buf, s->data + s->pos, n);
  s->pos += n;
  return (int64_t)n;
}

TEST(faults_echo_chunked_callback_body) {
  tern_engine_t *eng = test_engine_new(NULL);
  size_t n = 200000;
  unsigned char *data = malloc(n);
  ASSERT(data != NULL);
  for (size_t i = 0; i < n; i++) data[i] = (unsigned char)(i * 7 + 3);
  char sha[65];
  testsrv_sha256_mem(data, n, sha);
  source_t src = { data, n, 0, 0, 0 };
  tern_request_t *req = req_new("/echo");
  ASSERT_EQ(tern_request_set_method(req, "PUT"), 0);
  ASSERT_EQ(tern_request_set_body_cb(req, -1, read_source, &src), 0);
  ASSERT_EQ(run(eng, req), 0);
  ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Chunked"), "1");
  ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Body-Length"), "200000");
  ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Body-Sha256"), sha);
  ASSERT_UEQ(src.pos, n);
  ASSERT_GT(src.calls, 20);
  char *doc = test_req_body_str(req);
  ASSERT(strstr(doc, "[\"Transfer-Encoding\", \"chunked\"]") != NULL);
  ASSERT(strstr(doc, "Content-Length") == NULL);
  free(doc);

  /* An empty chunked body: just the last chunk. */
  source_t none = { data, 0, 0, 0, 0 };
  tern_request_t *req2 = req_new("/echo");
  ASSERT_EQ(tern_request_set_method(req2, "POST"), 0);
  ASSERT_EQ(tern_request_set_body_cb(req2, -1, read_source, &none), 0);
  ASSERT_EQ(run(eng, req2), 0);
  ASSERT_STR_EQ(header_or_empty(req2, "X-Echo-Chunked"), "1");
  ASSERT_STR_EQ(header_or_empty(req2, "X-Echo-Body-Length"), "0");
  free(data);
  finish(eng);
}

/* A file of `n` bytes in TERN_TEST_TMP (or /tmp); returns the malloc'd path and the data. */
static char *write_temp_file(size_t n, unsigned char **out) {
  char *path = test_tmp_path("faults-upload-XXXXXX");
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  unsigned char *data = malloc(n);
  ASSERT(data != NULL);
  for (size_t i = 0; i < n; i++) data[i] = (unsigned char)((i * 31 + 7) ^ (i >> 11));
  ASSERT_EQ(write(fd, data, n), (int64_t)n);
  close(fd);
  *out = data;
  return path;
}

TEST(faults_echo_file_body_slice) {
  tern_engine_t *eng = test_engine_new(NULL);
  size_t n = 250000;
  unsigned char *data;
  char *path = write_temp_file(n, &data);
  char sha[65], len[32];

  /* [12345, 150000): crosses several 64 KiB buffer fills. */
  tern_request_t *req = req_new("/echo");
  ASSERT_EQ(tern_request_set_method(req, "PUT"), 0);
  ASSERT_EQ(tern_request_set_body_file(req, path, 12345, 150000), 0);
  ASSERT_EQ(run(eng, req), 0);
  testsrv_sha256_mem(data + 12345, 150000 - 12345, sha);
  snprintf(len, sizeof len, "%d", 150000 - 12345);
  ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Chunked"), "0");
  ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Body-Length"), len);
  ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Body-Sha256"), sha);

  /* From an offset to the end of the file (end 0). */
  tern_request_t *req2 = req_new("/echo");
  ASSERT_EQ(tern_request_set_method(req2, "POST"), 0);
  ASSERT_EQ(tern_request_set_body_file(req2, path, 100001, 0), 0);
  ASSERT_EQ(run(eng, req2), 0);
  testsrv_sha256_mem(data + 100001, n - 100001, sha);
  snprintf(len, sizeof len, "%zu", n - 100001);
  ASSERT_STR_EQ(header_or_empty(req2, "X-Echo-Body-Length"), len);
  ASSERT_STR_EQ(header_or_empty(req2, "X-Echo-Body-Sha256"), sha);

  /* A range past the end of the file fails before anything is sent. */
  tern_request_t *req3 = req_new("/echo");
  ASSERT_EQ(tern_request_set_method(req3, "POST"), 0);
  ASSERT_EQ(tern_request_set_body_file(req3, path, 0, n + 1), 0);
  ASSERT_EQ(run(eng, req3), TERN_EFILEREAD);
  ASSERT_EQ(tern_request_get_status(req3), 0);

  unlink(path);
  free(path);
  free(data);
  finish(eng);
}

/* ------------------------------------------------------------------------------------------ */
/* Injection                                                                                  */
/* ------------------------------------------------------------------------------------------ */

TEST(faults_header_injection_refused) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = req_new("/echo");
  ASSERT_EQ(tern_request_add_header(req, "X-A", "a\r\nX-Injected: 1"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_add_header(req, "X-A", "a\nX-Injected: 1"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_add_header(req, "X-A", "a\rX-Injected: 1"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_add_header(req, "X-A\r\nX-Injected", "1"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_add_header(req, "X-A\n", "1"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_add_header(req, "X A", "1"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_add_header(req, "X-A:", "1"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_add_header(req, "", "1"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_add_header(req, "X-A", "bell\a"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_add_header(req, "Content-Length", "5"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_add_header(req, "content-length", "5"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_add_header(req, "Transfer-Encoding", "chunked"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_add_header(req, "X-Fine", "tab\tand obs-text \xe9"), 0);

  char *base = testsrv_url("FAULT_PORT", "/");
  char bad[256];
  static const char *const tails[] = {
    "a b", "a\rb", "a\nb", "a\r\nX-Injected: 1", "a\tb", "a\x7f"
  };
  for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
    snprintf(bad, sizeof bad, "%s%s", base, tails[i]);
    ASSERT_EQ(tern_request_set_url(req, bad), TERN_EBADURL);
  }
  ASSERT_EQ(tern_request_set_url(req, "http://127.0.0.1\r\n:80/"), TERN_EBADURL);
  free(base);

  /* The rejected calls left the request as it was: what reaches the server has no trace. */
  ASSERT_EQ(run(eng, req), 0);
  ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Method"), "GET");
  char *doc = test_req_body_str(req);
  ASSERT(strstr(doc, "Injected") == NULL);
  ASSERT(strstr(doc, "\"X-A\"") == NULL);
  ASSERT(strstr(doc, "\"target\": \"/echo\"") != NULL);
  ASSERT(strstr(doc, "[\"X-Fine\", \"tab\\tand obs-text \\u00e9\"]") != NULL);
  ASSERT(strstr(doc, "Content-Length") == NULL);
  free(doc);

  /* A request whose only URL was refused cannot be submitted. */
  tern_request_t *nourl = req_new_url(NULL);
  ASSERT_EQ(tern_request_set_url(nourl, "http://127.0.0.1/a b"), TERN_EBADURL);
  ASSERT_EQ(tern_engine_submit(eng, nourl), TERN_EBADURL);
  finish(eng);
}

/* ------------------------------------------------------------------------------------------ */
/* Cancellation                                                                               */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
  tern_request_t *req;
  uint64_t at_ms;
} cancel_arg_t;

static void *cancel_thread(void *p) {
  cancel_arg_t *a = p;
  a->at_ms = test_now_ms();
  tern_request_cancel(a->req);
  tern_request_cancel(a->req); /* idempotent */
  return NULL;
}

TEST(faults_cancel_from_thread) {
  tern_engine_t *eng = test_engine_new(NULL);
  watch_t w;
  watch_init(&w);
  w.wait_percent = 50; /* the 500 bytes before the stall have arrived */
  tern_request_t *req = req_new("/stall?len=1000&send=500&stall_ms=8000");
  ASSERT_EQ(tern_request_set_progress_cb(req, on_progress, &w), 0);
  call_t *c = submit(eng, req);
  watch_wait(&w, WAIT_MS);
  ASSERT(!tern_request_is_done(req));

  cancel_arg_t arg = { req, 0 };
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, cancel_thread, &arg), 0);
  ASSERT_EQ(wait_call(c, req, 3000), TERN_ECANCELED);
  uint64_t done_at = test_now_ms();
  ASSERT_EQ(pthread_join(th, NULL), 0);
  ASSERT_LT(done_at - arg.at_ms, test_scaled_ms(1000)); /* promptly, not at the stall's end */
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_UEQ(tern_request_get_bytes_received(req), 500);
  tern_request_cancel(req); /* after completion: nothing happens */
  pthread_mutex_lock(&w.mu);
  ASSERT_EQ(w.failures, 1); /* the -1 progress event, once */
  ASSERT_EQ(w.hundreds, 0);
  pthread_mutex_unlock(&w.mu);
  finish(eng);
}

TEST(faults_cancel_from_progress) {
  tern_engine_t *eng = test_engine_new(NULL);
  watch_t w;
  watch_init(&w);
  w.cancel_at = 0; /* at the first download event, when the head has arrived */
  tern_request_t *req = req_new("/ok?size=2000000");
  ASSERT_EQ(tern_request_set_progress_cb(req, on_progress, &w), 0);
  ASSERT_EQ(run(eng, req), TERN_ECANCELED);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_LT(tern_request_get_bytes_received(req), 2000000);
  pthread_mutex_lock(&w.mu);
  ASSERT_EQ(w.canceled, 1);
  ASSERT_EQ(w.after_cancel, 0);
  ASSERT_EQ(w.failures, 1);
  pthread_mutex_unlock(&w.mu);

  /* Later in the body too. */
  watch_t w2;
  watch_init(&w2);
  w2.cancel_at = 30;
  tern_request_t *req2 = req_new("/ok?size=2000000");
  ASSERT_EQ(tern_request_set_progress_cb(req2, on_progress, &w2), 0);
  ASSERT_EQ(run(eng, req2), TERN_ECANCELED);
  ASSERT_GE(tern_request_get_bytes_received(req2), 600000);
  ASSERT_LT(tern_request_get_bytes_received(req2), 2000000);
  pthread_mutex_lock(&w2.mu);
  ASSERT_EQ(w2.canceled, 1);
  ASSERT_EQ(w2.after_cancel, 0);
  ASSERT_EQ(w2.failures, 1);
  ASSERT_EQ(w2.hundreds, 0);
  pthread_mutex_unlock(&w2.mu);

  /* The engine still works afterwards. */
  tern_request_t *ok = req_new("/ok?size=10");
  ASSERT_EQ(run(eng, ok), 0);
  finish(eng);
}

/* Non-zero from the progress callback cancels, documented without exception, so also from the
 * 100% event that comes just before completion. */
TEST(faults_cancel_from_progress_at_end) {
  tern_engine_t *eng = test_engine_new(NULL);
  watch_t w;
  watch_init(&w);
  w.cancel_at = 100;
  tern_request_t *req = req_new("/ok?size=1000");
  ASSERT_EQ(tern_request_set_progress_cb(req, on_progress, &w), 0);
  int err = run(eng, req);
  pthread_mutex_lock(&w.mu);
  ASSERT_EQ(w.canceled, 1);
  pthread_mutex_unlock(&w.mu);
  if (err != TERN_ECANCELED)
    TEST_FAIL_("progress callback returned non-zero at 100%%, request ended with %s",
               tern_err_name(err));
  finish(eng);
}

static void wait_stat(tern_engine_t *eng, tern_stat stat, uint64_t want, uint64_t ms) {
  uint64_t deadline = test_now_ms() + test_scaled_ms(ms);
  while (tern_engine_get_stat(eng, stat) != want) {
    if (test_now_ms() > deadline)
      TEST_FAIL_("stat %d is %llu, expected %llu after %llu ms", (int)stat,
                 (unsigned long long)tern_engine_get_stat(eng, stat), (unsigned long long)want,
                 (unsigned long long)test_scaled_ms(ms));
    sleep_ms(5);
  }
}

TEST(faults_free_in_flight) {
  tern_engine_t *eng = test_engine_new(NULL);
  uint64_t live0 = tern_engine_get_stat(NULL, TERN_STAT_REQUESTS_LIVE);

  /* Mid-body, stalled. */
  watch_t w;
  watch_init(&w);
  w.wait_percent = 50;
  tern_request_t *req = req_new("/stall?len=1000&send=500&stall_ms=8000");
  ASSERT_EQ(tern_request_set_progress_cb(req, on_progress, &w), 0);
  call_t *c = submit(eng, req);
  c->expect_calls = 0;
  watch_wait(&w, WAIT_MS);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_REQUESTS_ACTIVE), 1);
  ASSERT_UEQ(tern_engine_get_stat(NULL, TERN_STAT_REQUESTS_LIVE), live0 + 1);
  req_free(req);
  wait_stat(eng, TERN_STAT_REQUESTS_ACTIVE, 0, 2000);
  wait_stat(NULL, TERN_STAT_REQUESTS_LIVE, live0, 2000);

  /* Waiting for headers. */
  tern_request_t *req2 = req_new("/slowheaders?delay_ms=5000");
  call_t *c2 = submit(eng, req2);
  c2->expect_calls = 0;
  sleep_ms(200);
  req_free(req2);
  wait_stat(eng, TERN_STAT_REQUESTS_ACTIVE, 0, 2000);
  wait_stat(NULL, TERN_STAT_REQUESTS_LIVE, live0, 2000);

  /* Freed at once after the submit, maybe before the loop thread has seen it. */
  tern_request_t *req3 = req_new("/ok?size=100000");
  call_t *c3 = submit(eng, req3);
  c3->expect_calls = 0;
  req_free(req3);
  wait_stat(eng, TERN_STAT_REQUESTS_ACTIVE, 0, 2000);
  wait_stat(NULL, TERN_STAT_REQUESTS_LIVE, live0, 2000);

  sleep_ms(100); /* a late complete callback would land now; finish() counts the calls */
  pthread_mutex_lock(&w.mu);
  ASSERT_EQ(w.failures, 0); /* no progress callback after the free either */
  pthread_mutex_unlock(&w.mu);

  /* The engine goes on serving. */
  tern_request_t *ok = req_new("/ok?size=10");
  ASSERT_EQ(run(eng, ok), 0);
  finish(eng);
}

/* ---- bodies that wait for their bytes, and answers that come while a body goes ---------- */

/* A body whose bytes come from another thread, a piece every so often: the callback says
 * TERN_READ_WAIT while none is there, the producer calls tern_request_resume_send. */
typedef struct {
  source_t src;
  tern_request_t *req;
  atomic_int ready; /* pieces the producer made available and the callback has not taken */
  atomic_int waits;
  atomic_bool done;
  int pieces;
  uint64_t long_pause_ms; /* one pause this long, halfway, longer than the body timeout */
} waiting_source_t;

static int64_t read_waiting(tern_request_t *req, void *buf, size_t cap, void *ud) {
  waiting_source_t *w = ud;
  if (w->src.pos == w->src.len) return 0;
  if (atomic_load(&w->ready) == 0) {
    atomic_fetch_add(&w->waits, 1);
    return TERN_READ_WAIT;
  }
  atomic_fetch_sub(&w->ready, 1);
  return read_source(req, buf, cap, &w->src);
}

static void *produce(void *arg) {
  waiting_source_t *w = arg;
  for (int i = 0; i < w->pieces && !atomic_load(&w->done); i++) {
    sleep_ms(i == w->pieces / 2 ? w->long_pause_ms : 5);
    atomic_fetch_add(&w->ready, 1);
    ASSERT_EQ(tern_request_resume_send(w->req), 0);
  }
  /* The rest at once, in case pieces ran short. */
  while (!atomic_load(&w->done)) {
    atomic_fetch_add(&w->ready, 1);
    ASSERT_EQ(tern_request_resume_send(w->req), 0);
    sleep_ms(2);
  }
  return NULL;
}

static void waiting_body(bool gzip) {
  tern_engine_t *eng = test_engine_new(NULL);
  size_t n = 300000;
  unsigned char *data = malloc(n);
  ASSERT(data != NULL);
  for (size_t i = 0; i < n; i++) data[i] = (unsigned char)(i * 13 + 1);
  char sha[65];
  testsrv_sha256_mem(data, n, sha);
  waiting_source_t w = { .src = { data, n, 0, 0, 0 }, .pieces = 60, .long_pause_ms = 400 };
  atomic_init(&w.ready, 0);
  atomic_init(&w.waits, 0);
  atomic_init(&w.done, false);
  tern_request_t *req = req_new("/echo");
  w.req = req;
  ASSERT_EQ(tern_request_set_method(req, "PUT"), 0);
  ASSERT_EQ(tern_request_set_body_cb(req, gzip ? -1 : (int64_t)n, read_waiting, &w), 0);
  if (gzip) ASSERT_EQ(tern_request_set_body_gzip(req, 1), 0);
  /* The body timeout measures the server's silence, not the caller's: a 400 ms pause of the
   * producer must not trip a 150 ms limit. */
  ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_BODY, 150), 0);
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, NULL, produce, &w), 0);
  int rc = run(eng, req);
  atomic_store(&w.done, true);
  pthread_join(t, NULL);
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_UEQ(w.src.pos, n);
  ASSERT_GT(atomic_load(&w.waits), 20);
  if (!gzip) {
    ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Body-Length"), "300000");
    ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Body-Sha256"), sha);
  } else {
    ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Chunked"), "1");
  }
  free(data);
  finish(eng);
}

TEST(faults_body_callback_waits_for_bytes) { waiting_body(false); }
TEST(faults_gzip_body_callback_waits_for_bytes) { waiting_body(true); }

/* An endless supply of body bytes that do not compress (so bytes given are bytes sent). */
static int64_t read_forever(tern_request_t *req, void *buf, size_t cap, void *ud) {
  (void)req;
  uint64_t *given = ud;
  uint64_t x = *given * 2654435761u + 88172645463325252ull;
  unsigned char *p = buf;
  for (size_t i = 0; i < cap; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p[i] = (unsigned char)x;
  }
  *given += cap;
  return (int64_t)cap;
}

/* The server refuses the body as soon as it has the head (413) and reads none of it: the
 * answer is seen while the body is going, the rest of the body is not sent, and the request
 * ends with the 413 at once, as curl does, instead of a send error after 1 GiB. */
TEST(faults_early_answer_stops_the_upload) {
  tern_engine_t *eng = test_engine_new(NULL);
  for (int i = 0; i < 2; i++) {
    uint64_t given = 0;
    char path[128]; /* a key of its own: /flaky answers 413 to a key's first request only */
    snprintf(path, sizeof path, "/flaky?key=early-%d-%llu-%d&fail=1&status=413&early=1",
             (int)getpid(), (unsigned long long)test_now_ms(), i);
    tern_request_t *req = req_new(path);
    ASSERT_EQ(tern_request_set_method(req, "PUT"), 0);
    ASSERT_EQ(tern_request_set_body_cb(req, i == 0 ? (int64_t)1 << 30 : -1, read_forever, &given),
              0);
    if (i == 1) ASSERT_EQ(tern_request_set_body_gzip(req, 1), 0);
    /* Without Expect: 100-continue, which would hold the body back until the answer. */
    ASSERT_EQ(tern_request_set_expect_continue(req, -1, 0), 0);
    uint64_t t0 = test_now_ms();
    int rc = run(eng, req);
    if (rc)
      TEST_FAIL_("%s (status %d, %llu bytes given)", tern_request_get_error_message(req),
                 tern_request_get_status(req), (unsigned long long)given);
    ASSERT_EQ(tern_request_get_status(req), 413);
    ASSERT_EQ(tern_request_is_body_skipped(req), 1);
    ASSERT_GT(given, 0);
    ASSERT_LT(given, (uint64_t)64 << 20);
    ASSERT_LT(test_now_ms() - t0, test_scaled_ms(5000));
  }
  finish(eng);
}

/* After tern_request_free returns, none of the request's callbacks starts again, not even the
 * data callback of a body still streaming in (the cancel that free queues comes later). */
typedef struct {
  atomic_int calls;
  atomic_bool freed;
  atomic_int after_free;
} free_watch_t;

static int count_data(tern_request_t *req, const void *data, size_t len, void *ud) {
  (void)req, (void)data, (void)len;
  free_watch_t *f = ud;
  if (atomic_load(&f->freed)) atomic_fetch_add(&f->after_free, 1);
  atomic_fetch_add(&f->calls, 1);
  return 0;
}

TEST(faults_no_data_callback_after_free) {
  tern_engine_t *eng = test_engine_new(NULL);
  uint64_t live0 = tern_engine_get_stat(NULL, TERN_STAT_REQUESTS_LIVE);
  free_watch_t f;
  atomic_init(&f.calls, 0);
  atomic_init(&f.freed, false);
  atomic_init(&f.after_free, 0);
  tern_request_t *req = req_new("/endless");
  ASSERT_EQ(tern_request_set_data_cb(req, count_data, &f), 0);
  ASSERT_EQ(tern_engine_submit(eng, req), 0);
  uint64_t deadline = test_now_ms() + test_scaled_ms(5000);
  while (atomic_load(&f.calls) < 50 && test_now_ms() < deadline) sleep_ms(1);
  ASSERT_GE(atomic_load(&f.calls), 50);
  req_free(req);
  atomic_store(&f.freed, true);
  wait_stat(eng, TERN_STAT_REQUESTS_ACTIVE, 0, 2000);
  wait_stat(NULL, TERN_STAT_REQUESTS_LIVE, live0, 2000);
  ASSERT_EQ(atomic_load(&f.after_free), 0);
  finish(eng);
}

/* The server answers as soon as the body's last bytes reach it, which may be before libuv
 * reports the last write done (the read and the write completion come in one poll): the
 * connection must still be reused, for bodies from memory and from a callback. On loopback
 * that ordering is rare (it was seen in tls.tls_upload under ASan), so this guards reuse after
 * large uploads rather than reproducing the race each run. */
TEST(faults_answer_before_last_write_keeps_the_connection) {
  tern_engine_t *eng = test_engine_new(NULL);
  size_t n = 8u << 20;
  unsigned char *data = malloc(n);
  ASSERT(data != NULL);
  for (size_t i = 0; i < n; i++) data[i] = (unsigned char)(i * 31 + 7);
  int rounds = 12;
  for (int i = 0; i < rounds; i++) {
    tern_request_t *req = req_new("/echo");
    ASSERT_EQ(tern_request_set_method(req, "PUT"), 0);
    ASSERT_EQ(tern_request_set_expect_continue(req, -1, 0), 0);
    source_t src = { data, n, 0, 0, 0 };
    if (i % 2 == 0)
      ASSERT_EQ(tern_request_set_body(req, data, n), 0);
    else
      ASSERT_EQ(tern_request_set_body_cb(req, (int64_t)n, read_source, &src), 0);
    ASSERT_EQ(run(eng, req), 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    ASSERT_STR_EQ(header_or_empty(req, "X-Echo-Body-Length"), "8388608");
  }
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 1);
  free(data);
  finish(eng);
}
