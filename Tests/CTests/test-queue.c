/*
 * test-queue.c — the engine's share of request queues (issue 11): the engine-wide limit on
 * requests in progress, priorities among waiting requests, cancelling a waiting request.
 *
 * What the server saw is counted by the server: faultserver.py's /probe counts the requests of
 * one tag in progress at once and records their ids in arrival order; /probe-stats reports it.
 * Tags carry the process id, so parallel and repeated runs never mix their counts. The stats are
 * asked for through a second engine without limits, so the query never waits behind the
 * requests it is about.
 */
#define _DEFAULT_SOURCE /* usleep under -std=c11 */

#include "task.h"
#include "testsrv.h"
#include "testutil.h"

#include <tern.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

/* ---- helpers ---- */

static char tag_[64];

static const char *tag(const char *name) {
  snprintf(tag_, sizeof tag_, "q-%s-%ld", name, (long)getpid());
  return tag_;
}

/* A /probe request of this test's tag with `id`, held hold_ms by the server. */
static tern_request_t *probe(const char *id, uint64_t hold_ms) {
  char path[256];
  snprintf(path, sizeof path, "/probe?tag=%s&id=%s&hold_ms=%llu", tag_, id,
           (unsigned long long)hold_ms);
  return test_request("FAULT_PORT", path);
}

typedef struct {
  int count, inflight, max_inflight;
  char order[1024]; /* the ids, comma-separated */
} probe_stats;

static int json_int(const char *body, const char *key) {
  char k[64];
  snprintf(k, sizeof k, "\"%s\": ", key);
  const char *p = strstr(body, k);
  if (p == NULL) TEST_FAIL_("no %s in %s", key, body);
  return atoi(p + strlen(k));
}

/* What the server saw of this test's tag, asked through `stats_eng`. */
static probe_stats get_stats(tern_engine_t *stats_eng) {
  char path[128];
  snprintf(path, sizeof path, "/probe-stats?tag=%s", tag_);
  tern_request_t *req = test_request("FAULT_PORT", path);
  ASSERT_EQ(test_run(stats_eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  char *body = test_req_body_str(req);
  probe_stats s;
  memset(&s, 0, sizeof s);
  s.count = json_int(body, "count");
  s.inflight = json_int(body, "inflight");
  s.max_inflight = json_int(body, "max_inflight");
  const char *o = strstr(body, "\"order\": [");
  ASSERT(o != NULL);
  size_t n = 0;
  for (o += strlen("\"order\": ["); *o && *o != ']'; o++)
    if (*o != '"' && *o != ' ' && n + 1 < sizeof s.order) s.order[n++] = *o;
  s.order[n] = '\0';
  free(body);
  tern_request_free(req);
  return s;
}

/* Polls until the server has seen `count` requests of the tag (fails after 10 s, scaled). */
static void wait_server_count(tern_engine_t *stats_eng, int count) {
  uint64_t deadline = test_now_ms() + test_scaled_ms(10000);
  while (get_stats(stats_eng).count < count) {
    if (test_now_ms() > deadline) TEST_FAIL_("the server never saw %d requests", count);
    usleep(10000);
  }
}

/* Polls an engine counter until it equals `want` (fails after 10 s, scaled). */
static void wait_stat(tern_engine_t *eng, tern_stat stat, uint64_t want) {
  uint64_t deadline = test_now_ms() + test_scaled_ms(10000);
  while (tern_engine_get_stat(eng, stat) != want) {
    if (test_now_ms() > deadline)
      TEST_FAIL_("stat %d is %llu, never %llu", (int)stat,
                 (unsigned long long)tern_engine_get_stat(eng, stat), (unsigned long long)want);
    usleep(2000);
  }
}

/* Counts complete callbacks of one request and keeps its status. */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls, status;
  int blocker_done; /* tern_request_is_done(blocker) when this one completed */
  tern_request_t *blocker;
} one_call;

static void one_call_cb(tern_request_t *req, int status, void *ud) {
  (void)req;
  one_call *c = ud;
  pthread_mutex_lock(&c->mu);
  c->calls++;
  c->status = status;
  c->blocker_done = c->blocker ? tern_request_is_done(c->blocker) : 0;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
}

static void one_call_wait(one_call *c, uint64_t ms) {
  struct timespec dl = test_deadline(test_scaled_ms(ms));
  pthread_mutex_lock(&c->mu);
  while (c->calls == 0)
    if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) != 0) TEST_FAIL_("no completion in time");
  pthread_mutex_unlock(&c->mu);
}

/* ---- the engine-wide limit ---- */

/* 200 requests under max_active_requests = 4: the server never has more than 4 in progress at
 * once, and has 4 at some point (the limit is used, not just respected); all succeed, at most 4
 * connections open and every one of them ends idle in the pool. */
TEST(queue_engine_limit_200) {
  enum { N = 200, LIMIT = 4 };
  tag("limit");
  tern_config_t *cfg = NULL;
  ASSERT_EQ(tern_config_new(&cfg), 0);
  ASSERT_EQ(tern_config_set_max_active_requests(cfg, LIMIT), 0);
  tern_engine_t *eng = test_engine_new(cfg);
  tern_config_free(cfg);
  tern_engine_t *stats_eng = test_engine_new(NULL);

  test_waiter w;
  test_waiter_init(&w, N);
  tern_request_t *reqs[N];
  for (int i = 0; i < N; i++) {
    char id[16];
    snprintf(id, sizeof id, "%d", i);
    reqs[i] = probe(id, 20);
    test_waiter_submit(&w, eng, reqs[i]);
  }
  test_waiter_wait(&w, 60000);
  ASSERT_EQ(w.completions, N);
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(tern_request_get_error(reqs[i]), 0);
    ASSERT_EQ(tern_request_get_status(reqs[i]), 200);
    tern_request_free(reqs[i]);
  }
  probe_stats s = get_stats(stats_eng);
  ASSERT_EQ(s.count, N);
  ASSERT_EQ(s.inflight, 0);
  ASSERT_EQ(s.max_inflight, LIMIT);
  ASSERT_LE(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), LIMIT);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPEN),
             tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE));
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_REQUESTS_WAITING), 0);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_REQUESTS_COMPLETED), N);
  tern_engine_free(stats_eng);
  test_finish(eng);
}

/* ---- priorities ---- */

/* With one slot taken by a blocker, requests of mixed priorities reach the server highest
 * priority first, equal priorities in submission order. `engine_limit`: the slot is the
 * engine's (max_active_requests = 1); else the origin's (max_connections_per_origin = 1). */
static void priority_case(bool engine_limit) {
  static const struct {
    const char *id;
    int priority;
  } order[] = { { "a", 0 },  { "b", 5 }, { "c", -1 }, { "d", 5 },
                { "e", 10 }, { "f", 0 }, { "g", 5 },  { "h", -1 } };
  enum { N = sizeof order / sizeof order[0] };
  tag(engine_limit ? "prio-engine" : "prio-origin");
  tern_config_t *cfg = NULL;
  ASSERT_EQ(tern_config_new(&cfg), 0);
  if (engine_limit)
    ASSERT_EQ(tern_config_set_max_active_requests(cfg, 1), 0);
  else
    ASSERT_EQ(tern_config_set_max_connections_per_origin(cfg, 1), 0);
  tern_engine_t *eng = test_engine_new(cfg);
  tern_config_free(cfg);
  tern_engine_t *stats_eng = test_engine_new(NULL);

  test_waiter w;
  test_waiter_init(&w, N + 1);
  tern_request_t *blocker = probe("blocker", test_scaled_ms(800));
  test_waiter_submit(&w, eng, blocker);
  wait_server_count(stats_eng, 1); /* the blocker holds the one slot */
  tern_request_t *reqs[N];
  for (int i = 0; i < N; i++) {
    reqs[i] = probe(order[i].id, 1);
    ASSERT_EQ(tern_request_set_priority(reqs[i], order[i].priority), 0);
    test_waiter_submit(&w, eng, reqs[i]);
  }
  wait_stat(eng, TERN_STAT_REQUESTS_WAITING, N); /* all wait behind the blocker */
  test_waiter_wait(&w, 30000);
  ASSERT_EQ(w.completions, N + 1);
  ASSERT_EQ(tern_request_get_error(blocker), 0);
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(tern_request_get_error(reqs[i]), 0);
    ASSERT_EQ(tern_request_set_priority(reqs[i], 1), TERN_EBUSY); /* before submit only */
    tern_request_free(reqs[i]);
  }
  tern_request_free(blocker);
  probe_stats s = get_stats(stats_eng);
  ASSERT_EQ(s.count, N + 1);
  ASSERT_EQ(s.max_inflight, 1);
  ASSERT_STR_EQ(s.order, "blocker,e,b,d,g,a,f,c,h");
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_REQUESTS_WAITING), 0);
  tern_engine_free(stats_eng);
  test_finish(eng);
}

TEST(queue_priority_engine_limit) { priority_case(true); }
TEST(queue_priority_origin_limit) { priority_case(false); }

/* ---- cancel while waiting ---- */

/* A request waiting for a slot (the engine's, then an origin's) and canceled completes with
 * TERN_ECANCELED once, at once (the blocker is still in progress), and the server never sees
 * it; a waiting request freed by its owner leaves without a callback. */
static void cancel_case(bool engine_limit) {
  tag(engine_limit ? "cancel-engine" : "cancel-origin");
  tern_config_t *cfg = NULL;
  ASSERT_EQ(tern_config_new(&cfg), 0);
  if (engine_limit)
    ASSERT_EQ(tern_config_set_max_active_requests(cfg, 1), 0);
  else
    ASSERT_EQ(tern_config_set_max_connections_per_origin(cfg, 1), 0);
  tern_engine_t *eng = test_engine_new(cfg);
  tern_config_free(cfg);
  tern_engine_t *stats_eng = test_engine_new(NULL);

  test_waiter w;
  test_waiter_init(&w, 1);
  tern_request_t *blocker = probe("blocker", test_scaled_ms(1500));
  test_waiter_submit(&w, eng, blocker);
  wait_server_count(stats_eng, 1);

  one_call c = { .blocker = blocker };
  test_cond_init(&c.mu, &c.cv);
  tern_request_t *victim = probe("victim", 1);
  ASSERT_EQ(tern_request_set_complete_cb(victim, one_call_cb, &c), 0);
  ASSERT_EQ(tern_engine_submit(eng, victim), 0);
  tern_request_t *dropped = probe("dropped", 1); /* freed while waiting: no callback */
  ASSERT_EQ(tern_request_set_complete_cb(dropped, one_call_cb, &c), 0);
  ASSERT_EQ(tern_engine_submit(eng, dropped), 0);
  wait_stat(eng, TERN_STAT_REQUESTS_WAITING, 2);
  tern_request_cancel(victim);
  tern_request_free(dropped);
  one_call_wait(&c, 5000);
  ASSERT_EQ(c.status, TERN_ECANCELED);
  ASSERT_EQ(c.blocker_done, 0); /* at once, not when a slot freed */
  wait_stat(eng, TERN_STAT_REQUESTS_WAITING, 0);
  test_waiter_wait(&w, 30000);
  ASSERT_EQ(tern_request_get_error(blocker), 0);
  ASSERT_EQ(tern_request_get_error(victim), TERN_ECANCELED);
  ASSERT_EQ(tern_request_get_status(victim), 0);
  tern_request_cancel(victim); /* idempotent: no second completion */
  usleep(50000);
  pthread_mutex_lock(&c.mu);
  ASSERT_EQ(c.calls, 1);
  pthread_mutex_unlock(&c.mu);
  probe_stats s = get_stats(stats_eng);
  ASSERT_EQ(s.count, 1);
  ASSERT_STR_EQ(s.order, "blocker");
  tern_request_free(victim);
  tern_request_free(blocker);
  tern_engine_free(stats_eng);
  test_finish(eng);
}

TEST(queue_cancel_waiting_engine_limit) { cancel_case(true); }
TEST(queue_cancel_waiting_origin_limit) { cancel_case(false); }
