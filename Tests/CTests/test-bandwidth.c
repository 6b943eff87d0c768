/*
 * test-bandwidth.c — shared bandwidth budgets (issue 11): the engine's receive and send
 * budgets, a group budget, a request's own send cap, the bandwidth-used meter, and a budget
 * changed while transfers run.
 *
 * These are behaviour checks, not speed benchmarks: the transfers run over loopback against
 * faultserver.py, many times faster than the budgets, so the wall time is the budget's doing.
 * Durations are measured by the test on a monotonic clock and must lie within 15% of what the
 * budget allows (the budget's burst is a tenth of a second, inside that tolerance); each case
 * prints what it measured.
 */
#define _DEFAULT_SOURCE /* usleep under -std=c11 */

#include "task.h"
#include "testsrv.h"
#include "testutil.h"

#include <tern.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#define MIB (1024u * 1024u)

/* ---- helpers ---- */

/* Body bytes are counted and dropped: nothing piles up in memory. */
static atomic_uint_fast64_t received_;

static int count_body(tern_request_t *req, const void *data, size_t len, void *ud) {
  (void)req;
  (void)data;
  (void)ud;
  atomic_fetch_add(&received_, len);
  return 0;
}

/* A download of `size` pattern bytes from the fault server, counted and dropped. */
static tern_request_t *download(uint64_t size) {
  char path[96];
  snprintf(path, sizeof path, "/ok?size=%llu&chunk=65536", (unsigned long long)size);
  tern_request_t *req = test_request("FAULT_PORT", path);
  ASSERT_EQ(tern_request_set_data_cb(req, count_body, NULL), 0);
  return req;
}

/* An upload of `size` bytes to the fault server's echo, which reads and hashes it. */
static tern_request_t *upload(const void *body, size_t size) {
  tern_request_t *req = test_request("FAULT_PORT", "/echo");
  ASSERT_EQ(tern_request_set_method(req, "PUT"), 0);
  ASSERT_EQ(tern_request_set_body(req, body, size), 0);
  return req;
}

static tern_engine_t *engine_with(unsigned recv_bps, unsigned send_bps) {
  tern_config_t *cfg = NULL;
  ASSERT_EQ(tern_config_new(&cfg), 0);
  ASSERT_EQ(tern_config_set_max_recv_speed(cfg, recv_bps), 0);
  ASSERT_EQ(tern_config_set_max_send_speed(cfg, send_bps), 0);
  tern_engine_t *eng = test_engine_new(cfg);
  tern_config_free(cfg);
  return eng;
}

static void sleep_until(uint64_t t0, uint64_t ms) {
  while (test_now_ms() < t0 + ms) usleep(5000);
}

/* `got` lies within `tol` (0.15: 15%) of `want`. */
static void assert_near(const char *what, double got, double want, double tol) {
  fprintf(stderr, "%s: %.3f (want %.3f +-%.0f%%)\n", what, got, want, tol * 100);
  if (got < want * (1 - tol) || got > want * (1 + tol))
    TEST_FAIL_("%s: %.3f is not within %.0f%% of %.3f", what, got, tol * 100, want);
}

static void free_all(tern_request_t **reqs, int n) {
  for (int i = 0; i < n; i++) tern_request_free(reqs[i]);
}

/* ---- the engine's budget ---- */

/* Four concurrent downloads of 4 MiB under a 4 MiB/s engine receive budget take 4 s, share it
 * (each ends near the end, none starves), and the meter reads about 4 MiB/s meanwhile. */
TEST(bandwidth_engine_recv_4x4m) {
  enum { N = 4 };
  tern_engine_t *eng = engine_with(4 * MIB, 0);
  test_waiter w;
  test_waiter_init(&w, N);
  tern_request_t *reqs[N];
  uint64_t t0 = test_now_ms();
  for (int i = 0; i < N; i++) {
    reqs[i] = download(4 * MIB);
    test_waiter_submit(&w, eng, reqs[i]);
  }
  for (int s = 0; s < 3; s++) {
    sleep_until(t0, 1500 + 800 * (uint64_t)s);
    uint64_t recv = 0, send = 0;
    ASSERT_EQ(tern_engine_get_bandwidth_used(eng, &recv, &send), 0);
    assert_near("bandwidth used, MiB/s", (double)recv / MIB, 4.0, 0.2);
  }
  test_waiter_wait(&w, 30000);
  double secs = (double)(test_now_ms() - t0) / 1000.0;
  assert_near("4 x 4 MiB under 4 MiB/s, seconds", secs, 4.0, 0.15);
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(tern_request_get_error(reqs[i]), 0);
    ASSERT_UEQ(tern_request_get_bytes_received(reqs[i]), 4 * MIB);
    /* Shares about fair: no download gets much more than a quarter (reads are taken in turn,
     * but not all of one size: a download was seen ending at 0.8 of the total). */
    fprintf(stderr, "download %d ended at %.3f s\n", i,
            tern_request_get_time(reqs[i], TERN_TIME_END));
    ASSERT(tern_request_get_time(reqs[i], TERN_TIME_END) > secs * 0.7);
  }
  ASSERT_UEQ(atomic_load(&received_), 16 * MIB);
  ASSERT_GE(tern_engine_get_stat(eng, TERN_STAT_BYTES_RECEIVED), 16 * MIB);
  free_all(reqs, N);
  test_finish(eng);
}

/* Four concurrent uploads of 1 MiB under a 1 MiB/s engine send budget take 4 s, and the meter
 * reads about 1 MiB/s meanwhile. */
TEST(bandwidth_engine_send_4x1m) {
  enum { N = 4 };
  char *body = malloc(MIB);
  ASSERT(body != NULL);
  testsrv_pattern_fill(body, MIB, 0);
  tern_engine_t *eng = engine_with(0, MIB);
  test_waiter w;
  test_waiter_init(&w, N);
  tern_request_t *reqs[N];
  uint64_t t0 = test_now_ms();
  for (int i = 0; i < N; i++) {
    reqs[i] = upload(body, MIB);
    test_waiter_submit(&w, eng, reqs[i]);
  }
  sleep_until(t0, 2000);
  uint64_t send = 0;
  ASSERT_EQ(tern_engine_get_bandwidth_used(eng, NULL, &send), 0);
  assert_near("send bandwidth used, MiB/s", (double)send / MIB, 1.0, 0.2);
  test_waiter_wait(&w, 30000);
  double secs = (double)(test_now_ms() - t0) / 1000.0;
  assert_near("4 x 1 MiB up under 1 MiB/s, seconds", secs, 4.0, 0.15);
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(tern_request_get_error(reqs[i]), 0);
    ASSERT_EQ(tern_request_get_status(reqs[i]), 200);
    ASSERT_STR_EQ(tern_request_get_header(reqs[i], "X-Echo-Body-Length"), "1048576");
    fprintf(stderr, "upload %d sent at %.3f s\n", i,
            tern_request_get_time(reqs[i], TERN_TIME_SENT));
    ASSERT(tern_request_get_time(reqs[i], TERN_TIME_SENT) > secs * 0.7);
  }
  ASSERT_GE(tern_engine_get_stat(eng, TERN_STAT_BYTES_SENT), 4 * MIB);
  free_all(reqs, N);
  free(body);
  test_finish(eng);
}

/* The engine's budget changed while a download runs takes effect: 1 MiB/s for a second, then
 * 4 MiB/s for the remaining 4 MiB of a 5 MiB download (2 s in all, not 5), and lifted. */
TEST(bandwidth_engine_change_at_run_time) {
  tern_engine_t *eng = engine_with(MIB, 0);
  test_waiter w;
  test_waiter_init(&w, 1);
  tern_request_t *req = download(5 * MIB);
  uint64_t t0 = test_now_ms();
  test_waiter_submit(&w, eng, req);
  sleep_until(t0, 1000);
  double first = (double)tern_engine_get_stat(eng, TERN_STAT_BYTES_RECEIVED) / MIB;
  ASSERT_EQ(tern_engine_set_max_speed(eng, 4 * MIB, 0), 0);
  assert_near("MiB in the first second at 1 MiB/s", first, 1.0, 0.2);
  sleep_until(t0, 1700);
  uint64_t recv = 0;
  ASSERT_EQ(tern_engine_get_bandwidth_used(eng, &recv, NULL), 0);
  assert_near("bandwidth used after the change, MiB/s", (double)recv / MIB, 4.0, 0.3);
  test_waiter_wait(&w, 30000);
  double secs = (double)(test_now_ms() - t0) / 1000.0;
  assert_near("5 MiB, 1 s at 1 MiB/s then 4 MiB/s, seconds", secs, 2.0, 0.15);
  ASSERT_EQ(tern_request_get_error(req), 0);
  tern_request_free(req);

  /* Lifted: 8 MiB go at loopback speed. */
  ASSERT_EQ(tern_engine_set_max_speed(eng, 0, 0), 0);
  test_waiter_init(&w, 1);
  req = download(8 * MIB);
  t0 = test_now_ms();
  test_waiter_submit(&w, eng, req);
  test_waiter_wait(&w, 30000);
  secs = (double)(test_now_ms() - t0) / 1000.0;
  fprintf(stderr, "8 MiB without a budget: %.3f s\n", secs);
  ASSERT(secs < 1.5);
  ASSERT_EQ(tern_request_get_error(req), 0);
  tern_request_free(req);
  test_finish(eng);
}

/* ---- group budgets ---- */

/* Two downloads of 2 MiB under a 2 MiB/s group budget take 2 s, while a download outside the
 * group goes at full speed beside them; then a request under a group of 4 MiB/s in an engine
 * of 1 MiB/s obeys the engine's (the stricter) budget. The caller's reference to a group may
 * go as soon as requests hold it. */
TEST(bandwidth_group) {
  tern_engine_t *eng = engine_with(0, 0);
  tern_bandwidth_t *group = NULL;
  ASSERT_EQ(tern_bandwidth_new(&group, 2 * MIB, 0), 0);
  test_waiter w, wfree;
  test_waiter_init(&w, 2);
  test_waiter_init(&wfree, 1);
  tern_request_t *in[2], *out = download(8 * MIB);
  uint64_t t0 = test_now_ms();
  for (int i = 0; i < 2; i++) {
    in[i] = download(2 * MIB);
    ASSERT_EQ(tern_request_set_bandwidth(in[i], group), 0);
    test_waiter_submit(&w, eng, in[i]);
  }
  test_waiter_submit(&wfree, eng, out);
  test_waiter_wait(&wfree, 30000);
  double free_secs = (double)(test_now_ms() - t0) / 1000.0;
  fprintf(stderr, "8 MiB outside the group: %.3f s\n", free_secs);
  ASSERT(free_secs < 1.5);
  ASSERT_EQ(tern_request_get_error(out), 0);
  sleep_until(t0, 1500);
  uint64_t recv = 0;
  ASSERT_EQ(tern_bandwidth_get_used(group, &recv, NULL), 0);
  assert_near("group bandwidth used, MiB/s", (double)recv / MIB, 2.0, 0.2);
  test_waiter_wait(&w, 30000);
  double secs = (double)(test_now_ms() - t0) / 1000.0;
  assert_near("2 x 2 MiB under a 2 MiB/s group, seconds", secs, 2.0, 0.15);
  for (int i = 0; i < 2; i++) ASSERT_EQ(tern_request_get_error(in[i]), 0);
  free_all(in, 2);
  tern_request_free(out);
  tern_bandwidth_free(group);

  /* Both budgets: the engine's 1 MiB/s binds a group of 4 MiB/s. */
  ASSERT_EQ(tern_engine_set_max_speed(eng, MIB, 0), 0);
  ASSERT_EQ(tern_bandwidth_new(&group, 4 * MIB, 0), 0);
  tern_request_t *req = download(3 * MIB / 2);
  ASSERT_EQ(tern_request_set_bandwidth(req, group), 0);
  tern_bandwidth_free(group); /* the request keeps it alive */
  t0 = test_now_ms();
  ASSERT_EQ(test_run(eng, req), 0);
  secs = (double)(test_now_ms() - t0) / 1000.0;
  assert_near("1.5 MiB under 1 MiB/s engine, 4 MiB/s group, seconds", secs, 1.5, 0.15);
  tern_request_free(req);
  test_finish(eng);
}

/* ---- a request's own send cap ---- */

/* 512 KiB under a request's own 256 KiB/s send cap take 2 s; the engine has no budget. */
TEST(bandwidth_request_send_cap) {
  enum { SIZE = 512 * 1024 };
  char *body = malloc(SIZE);
  ASSERT(body != NULL);
  testsrv_pattern_fill(body, SIZE, 0);
  tern_engine_t *eng = engine_with(0, 0);
  tern_request_t *req = upload(body, SIZE);
  ASSERT_EQ(tern_request_set_max_send_speed(req, 256 * 1024), 0);
  uint64_t t0 = test_now_ms();
  ASSERT_EQ(test_run(eng, req), 0);
  double secs = (double)(test_now_ms() - t0) / 1000.0;
  assert_near("512 KiB under a 256 KiB/s request cap, seconds", secs, 2.0, 0.15);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-Echo-Body-Length"), "524288");
  ASSERT_EQ(tern_request_set_max_send_speed(req, 1), TERN_EBUSY);
  tern_request_free(req);
  free(body);
  test_finish(eng);
}
