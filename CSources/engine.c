/* The engine: its loop (owned thread or the caller's), the cross-thread submit and cancel
 * queues, request start and completion, and the per-origin pool that hands requests to
 * connections. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_async(uv_async_t *handle);
static void on_kick(uv_prepare_t *handle);
static void start_request(tern_request_t *req);
static void shutdown_all(tern_engine_t *eng);
static void drain(tern_engine_t *eng);
static void complete(tern_request_t *req, int err);
static void hop_continue(tern_request_t *req);
static void redispatch(tern_request_t *req, int err, bool counts_as_retry);
static void handle_gone(tern_engine_t *eng);

/* What the pool and the connections report upward (internal.h says why it is a table). */
static const tern__owner_ops engine_ops = {
  .complete = complete,
  .hop_continue = hop_continue,
  .redispatch = redispatch,
  .release = tern__pool_release,
  .negotiated = tern__pool_negotiated,
  .conn_gone = tern__pool_conn_gone,
  .handle_gone = handle_gone,
  .drain = drain,
};

/* Whether a request of the engine's queue may start now (max_active_requests). */
static bool may_admit(const tern_engine_t *eng) {
  return !tern__list_empty(&eng->queued) && eng->nadmitted < eng->config.max_active_requests;
}

/* The outermost callback returns (tern__engine_leave at depth 1). */
static void drain(tern_engine_t *eng) {
  /* Calls may submit requests, requests' callbacks may queue calls, and the end of a write
   * may send or complete more: run them all until quiet. */
  while (!tern__list_empty(&eng->ready) || !tern__list_empty(&eng->ready_calls) ||
         !tern__list_empty(&eng->wrote) || may_admit(eng)) {
    /* Under max_active_requests every new request joins the queue first, so a slot goes to the
     * highest priority waiting, whether it came in this batch or waited already. */
    while (!tern__list_empty(&eng->ready)) {
      tern__list *n = eng->ready.next;
      tern__list_remove(n);
      tern_request_t *req = tern__container_of(n, tern_request_t, node);
      if (eng->config.max_active_requests && !eng->stopped)
        tern__wait_insert(eng, &eng->queued, req);
      else
        start_request(req);
    }
    while (may_admit(eng)) start_request(tern__wait_take(eng, &eng->queued));
    if (!tern__list_empty(&eng->ready_calls)) tern__engine_run_first_call(eng, &eng->ready_calls);
    tern__conn_report_writes(eng);
  }
  /* Last, once the requests above are on their way: freeing the completed ones is not on the
   * path from a response to the next request's bytes. */
  while (!tern__list_empty(&eng->finished)) {
    tern__list *n = eng->finished.next;
    tern__list_remove(n);
    tern__request_unref(tern__container_of(n, tern_request_t, node));
  }
  /* A deferred call may queue another (a release that ends a second object): run until none
   * is left, so the list is empty whenever no callback runs. */
  while (!tern__list_empty(&eng->deferred)) tern__engine_run_first_call(eng, &eng->deferred);
  tern__conn_trim_idle(eng);
}

static void apply_pause(void *arg) {
  tern_request_t *req = arg;
  if (atomic_load(&req->state) == TERN__REQ_SUBMITTED) tern__conn_apply_pause(req);
  tern__request_unref(req);
}

int tern_request_pause_receive(tern_request_t *req, int paused) {
  if (req == NULL) return TERN_EINVAL;
  atomic_store(&req->recv_paused, paused != 0);
  /* Not yet submitted (or just now): the flag alone is enough, reading checks it. */
  tern_engine_t *eng = atomic_load(&req->submitted_to);
  if (eng == NULL || atomic_load(&req->state) != TERN__REQ_SUBMITTED) return 0;
  tern__request_ref(req);
  int r = tern_engine_call(eng, apply_pause, req);
  if (r) tern__request_unref(req);
  return r;
}

static void apply_resume(void *arg) {
  tern_request_t *req = arg;
  if (atomic_load(&req->state) == TERN__REQ_SUBMITTED) tern__conn_resume_send(req);
  tern__request_unref(req);
}

/* Runs on the loop thread after whatever callback said "no bytes yet" has returned, so a
 * resume can never come between the callback's answer and the engine's noting it. */
int tern_request_resume_send(tern_request_t *req) {
  if (req == NULL) return TERN_EINVAL;
  tern_engine_t *eng = atomic_load(&req->submitted_to);
  if (eng == NULL || atomic_load(&req->state) != TERN__REQ_SUBMITTED) return 0;
  tern__request_ref(req);
  int r = tern_engine_call(eng, apply_resume, req);
  if (r) tern__request_unref(req);
  return r;
}

static void thread_main(void *arg) {
  tern_engine_t *eng = arg;
  uv_run(eng->loop, UV_RUN_DEFAULT);
}

/* libuv asserts that it never closes descriptors 0-2 (uv__close). A process started with one of
 * them closed (`prog <&-`) would hand that number to the loop's epoll or a socket, and the
 * engine would abort when closing it. Free slots among 0-2 are filled with /dev/null, once and
 * for good (they must stay taken while any engine lives); open() returns the lowest free
 * number, so this takes exactly the free ones, and nothing already open is touched. */
static void hold_std_fds(void) {
  int fd;
  while ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0 && fd <= 2) {}
  if (fd > 2) close(fd);
}

static int engine_init(tern_engine_t *eng, const tern_config_t *config) {
  eng->ops = &engine_ops;
  tern__config_defaults(&eng->config);
  if (config && tern__config_copy(&eng->config, config)) return TERN_ENOMEM;
  tern__list_init(&eng->submitted);
  tern__list_init(&eng->cancels);
  tern__list_init(&eng->ready);
  tern__list_init(&eng->calls);
  tern__list_init(&eng->ready_calls);
  tern__list_init(&eng->wrote);
  tern__list_init(&eng->went_idle);
  tern__list_init(&eng->finished);
  tern__list_init(&eng->deferred);
  tern__list_init(&eng->spare_calls);
  tern__list_init(&eng->queued);
  tern__list_init(&eng->origins);
  tern__list_init(&eng->tls_ctxs);
  tern__list_init(&eng->dns);
  for (int i = 0; i < TERN__STAT_COUNT; i++) atomic_init(&eng->stats[i], 0);
  if (tern_bandwidth_new(&eng->bw, eng->config.max_recv_speed, eng->config.max_send_speed))
    return TERN_ENOMEM;
  if (uv_mutex_init(&eng->lock)) {
    tern_bandwidth_free(eng->bw);
    return TERN_ENOMEM;
  }
  if (uv_async_init(eng->loop, &eng->async, on_async)) {
    uv_mutex_destroy(&eng->lock);
    tern_bandwidth_free(eng->bw);
    return TERN_ENOMEM;
  }
  eng->async.data = eng;
  uv_prepare_init(eng->loop, &eng->kick);
  eng->kick.data = eng;
  eng->handles = 2;
  return 0;
}

int tern_engine_new(tern_engine_t **out, const tern_config_t *config) {
  if (out == NULL) return TERN_EINVAL;
  *out = NULL;
  hold_std_fds();
  tern_engine_t *eng = tern__calloc(1, sizeof *eng);
  if (eng == NULL) return TERN_ENOMEM;
  if (uv_loop_init(&eng->own_loop)) {
    free(eng);
    return TERN_ENOMEM;
  }
  eng->loop = &eng->own_loop;
  eng->owns_loop = true;
  int r = engine_init(eng, config);
  if (r) {
    tern__config_clear(&eng->config);
    uv_loop_close(&eng->own_loop);
    free(eng);
    return r;
  }
  if (uv_thread_create(&eng->thread, thread_main, eng)) {
    uv_close((uv_handle_t *)&eng->async, NULL);
    uv_close((uv_handle_t *)&eng->kick, NULL);
    uv_run(&eng->own_loop, UV_RUN_DEFAULT);
    uv_loop_close(&eng->own_loop);
    uv_mutex_destroy(&eng->lock);
    tern_bandwidth_free(eng->bw);
    tern__config_clear(&eng->config);
    free(eng);
    return TERN_ENOMEM;
  }
  /* Read only on the loop thread, and only after a submit has synchronised through the lock. */
  eng->loop_thread = eng->thread;
  *out = eng;
  return 0;
}

int tern_engine_new_on_loop(tern_engine_t **out, struct uv_loop_s *loop,
                            const tern_config_t *config) {
  if (out == NULL || loop == NULL) return TERN_EINVAL;
  *out = NULL;
  hold_std_fds();
  tern_engine_t *eng = tern__calloc(1, sizeof *eng);
  if (eng == NULL) return TERN_ENOMEM;
  eng->loop = loop;
  eng->loop_thread = uv_thread_self();
  int r = engine_init(eng, config);
  if (r) {
    tern__config_clear(&eng->config);
    free(eng);
    return r;
  }
  *out = eng;
  return 0;
}

static void engine_destroy(tern_engine_t *eng) {
  tern__engine_drop_calls(&eng->calls);
  tern__engine_drop_calls(&eng->ready_calls);
  tern__engine_drop_calls(&eng->spare_calls);
  uv_mutex_destroy(&eng->lock);
  tern_bandwidth_free(eng->bw);
  tern__config_clear(&eng->config);
  free(eng);
}

static void handle_gone(tern_engine_t *eng) {
  if (--eng->handles == 0 && eng->free_when_closed) engine_destroy(eng);
}

static void on_async_closed(uv_handle_t *h) { handle_gone(h->data); }

void tern_engine_free(tern_engine_t *eng) {
  if (eng == NULL) return;
  uv_mutex_lock(&eng->lock);
  eng->stopping = true;
  uv_mutex_unlock(&eng->lock);
  if (eng->owns_loop) {
    uv_async_send(&eng->async);
    uv_thread_join(&eng->thread);
    uv_loop_close(&eng->own_loop);
    engine_destroy(eng);
    return;
  }
  /* Embedded: we are on the loop thread; handles close as the caller's loop runs on. */
  tern__engine_enter(eng);
  shutdown_all(eng);
  tern__engine_leave(eng);
  eng->free_when_closed = true;
}

int tern_engine_set_max_speed(tern_engine_t *eng, uint64_t recv_bps, uint64_t send_bps) {
  if (eng == NULL) return TERN_EINVAL;
  return tern_bandwidth_set_max_speed(eng->bw, recv_bps, send_bps);
}

int tern_engine_get_bandwidth_used(tern_engine_t *eng, uint64_t *recv_bps, uint64_t *send_bps) {
  if (eng == NULL) return TERN_EINVAL;
  return tern_bandwidth_get_used(eng->bw, recv_bps, send_bps);
}

uint64_t tern_engine_get_stat(const tern_engine_t *eng, tern_stat stat) {
  if (stat == TERN_STAT_REQUESTS_LIVE) return atomic_load(&tern__requests_live);
  if (eng == NULL || (unsigned)stat >= TERN__STAT_COUNT) return 0;
  return atomic_load(&((tern_engine_t *)eng)->stats[stat]);
}

int tern_engine_submit(tern_engine_t *eng, tern_request_t *req) {
  if (eng == NULL || req == NULL) return TERN_EINVAL;
  if (!req->has_url) return TERN_EBADURL;
  int expected = TERN__REQ_NEW;
  if (!atomic_compare_exchange_strong(&req->state, &expected, TERN__REQ_SUBMITTED))
    return TERN_EBUSY;
  req->engine = eng;
  atomic_store(&req->submitted_to, eng);
  req->start_ns = uv_hrtime();
  req->times_ns[TERN_TIME_START] = 0;
  tern__request_ref(req);

  if (tern__on_loop_thread(eng)) {
    if (eng->stopped) goto refused;
    TERN__STAT_ADD(eng, TERN_STAT_REQUESTS_ACTIVE, 1);
    tern__list_insert_tail(&eng->ready, &req->node);
    /* From outside our callbacks (a loop embedded in the caller's): started before the loop
     * next polls, by a prepare handle, with no wake-up through the async handle's eventfd. */
    if (eng->depth == 0) uv_prepare_start(&eng->kick, on_kick);
    return 0;
  }
  uv_mutex_lock(&eng->lock);
  if (eng->stopping) {
    uv_mutex_unlock(&eng->lock);
    goto refused;
  }
  TERN__STAT_ADD(eng, TERN_STAT_REQUESTS_ACTIVE, 1);
  tern__list_insert_tail(&eng->submitted, &req->node);
  uv_mutex_unlock(&eng->lock);
  uv_async_send(&eng->async);
  return 0;

refused:
  atomic_store(&req->submitted_to, NULL);
  atomic_store(&req->state, TERN__REQ_NEW);
  req->engine = NULL;
  tern__request_unref(req);
  return TERN_ESHUTDOWN;
}

/* ---- tern_request_perform: submit, then wait on the calling thread ---- */

typedef struct {
  uv_mutex_t lock;
  uv_cond_t cond;
  bool done; /* guarded by lock */
  int status;
  tern_complete_cb cb; /* the caller's own complete callback, run first */
  void *cb_data;
} perform_wait;

static void perform_done(tern_request_t *req, int status, void *user_data) {
  perform_wait *w = user_data;
  if (w->cb) w->cb(req, status, w->cb_data);
  uv_mutex_lock(&w->lock);
  w->status = status;
  w->done = true;
  /* Signalled under the lock: the waiter, whose stack holds `w`, cannot return before the
   * unlock below, and nothing here touches `w` after it. */
  uv_cond_signal(&w->cond);
  uv_mutex_unlock(&w->lock);
}

int tern_request_perform(tern_engine_t *eng, tern_request_t *req) {
  if (eng == NULL || req == NULL || tern__on_loop_thread(eng)) return TERN_EINVAL;
  if (atomic_load(&req->state) != TERN__REQ_NEW) return TERN_EBUSY;
  perform_wait w = { .cb = req->notify.complete, .cb_data = req->notify.complete_data };
  if (uv_mutex_init(&w.lock)) return TERN_ENOMEM;
  if (uv_cond_init(&w.cond)) {
    uv_mutex_destroy(&w.lock);
    return TERN_ENOMEM;
  }
  req->notify.complete = perform_done;
  req->notify.complete_data = &w;
  int r = tern_engine_submit(eng, req);
  if (r == 0) {
    uv_mutex_lock(&w.lock);
    while (!w.done) uv_cond_wait(&w.cond, &w.lock);
    uv_mutex_unlock(&w.lock);
    r = w.status;
  }
  /* The loop thread read these before the wake-up above and reads them no more. */
  req->notify.complete = w.cb;
  req->notify.complete_data = w.cb_data;
  uv_cond_destroy(&w.cond);
  uv_mutex_destroy(&w.lock);
  return r;
}

void tern_request_cancel(tern_request_t *req) {
  if (req == NULL) return;
  atomic_store(&req->cancel_requested, true);
  if (atomic_load(&req->state) != TERN__REQ_SUBMITTED) return;
  tern_engine_t *eng = atomic_load(&req->submitted_to);
  if (eng == NULL) return; /* submit is under way: it sees cancel_requested */
  if (atomic_exchange(&req->cancel_queued, true)) return;
  tern__request_ref(req);
  uv_mutex_lock(&eng->lock);
  tern__list_insert_tail(&eng->cancels, &req->cancel_node);
  uv_mutex_unlock(&eng->lock);
  uv_async_send(&eng->async);
}

/* Lives beside cancel, not with the request's other functions: freeing an in-flight request
 * cancels it, and the request's files sit below the engine. */
void tern_request_free(tern_request_t *req) {
  if (req == NULL) return;
  atomic_store(&req->released, true);
  tern_request_cancel(req);
  tern__request_unref(req);
}

/* Takes a request off whatever it waits in and completes it with `err`. */
static void abort_request(tern_request_t *req, int err) {
  if (atomic_load(&req->state) == TERN__REQ_DONE) return;
  if (req->conn) {
    tern__conn_abort(req->conn, req, err);
  } else {
    tern__list_remove(&req->node);
    complete(req, err);
  }
}

static void on_async(uv_async_t *handle) {
  tern_engine_t *eng = handle->data;
  tern__list subs, cancels, calls;
  tern__list_init(&subs);
  tern__list_init(&cancels);
  tern__list_init(&calls);
  uv_mutex_lock(&eng->lock);
  bool stopping = eng->stopping;
  /* Splice the queues out so that callbacks may queue more while we work. */
  tern__list_splice_tail(&subs, &eng->submitted);
  tern__list_splice_tail(&cancels, &eng->cancels);
  tern__list_splice_tail(&calls, &eng->calls);
  uv_mutex_unlock(&eng->lock);

  tern__engine_enter(eng);
  tern__list_splice_tail(&eng->ready, &subs);
  tern__list_splice_tail(&eng->ready_calls, &calls);
  while (!tern__list_empty(&cancels)) {
    tern__list *n = cancels.next;
    tern__list_remove(n);
    tern_request_t *req = tern__container_of(n, tern_request_t, cancel_node);
    atomic_store(&req->cancel_queued, false);
    if (atomic_load(&req->state) != TERN__REQ_DONE) {
      tern__request_set_error(req, TERN_ECANCELED, "request to %s canceled", req->url.hostport);
      abort_request(req, TERN_ECANCELED);
    }
    tern__request_unref(req);
  }
  if (stopping && !eng->stopped) shutdown_all(eng);
  tern__engine_leave(eng);
}

static void on_kick(uv_prepare_t *handle) {
  tern_engine_t *eng = handle->data;
  uv_prepare_stop(handle);
  tern__engine_enter(eng);
  tern__engine_leave(eng); /* the drain starts the ready requests */
}

static void on_total_closed(uv_handle_t *h) { tern__request_unref(h->data); }

/* The hop's proxy (or the origin, for a DIRECT entry) could not be reached and its proxy list
 * has another entry: the hop goes again through that one. */
static bool fail_over(tern_request_t *req, int err) {
  tern_engine_t *eng = req->engine;
  if (err == 0 || eng->stopped || atomic_load(&req->cancel_requested)) return false;
  int code = req->error ? req->error : err;
  if (!tern__request_next_proxy(req, code)) return false;
  tern__log(eng, TERN_LOG_INFO, req, "%s; trying the next proxy of the list", req->errmsg);
  req->error = 0; /* the abandoned attempt's failure is not the request's */
  req->errmsg[0] = '\0';
  tern__wait_leave(eng, req);
  tern__list_remove(&req->node);
  req->conn = NULL;
  tern__request_rewind(req);
  req->retried = req->force_new_conn = false;
  req->origin = NULL;
  int r = tern__request_prepare(req, &eng->config);
  if (r) {
    complete(req, r);
    return true;
  }
  tern__pool_dispatch(req);
  return true;
}

/* The failure a request ends with: the one recorded first, else `err` with its message. */
static TERN__COLD int record_failure(tern_request_t *req, int err) {
  if (req->error) return req->error;
  tern__request_set_error(req, err, "%s: %s", req->url.hostport, tern_strerror(err));
  return err;
}

static void complete(tern_request_t *req, int err) {
  if (atomic_load(&req->state) == TERN__REQ_DONE) return;
  if (fail_over(req, err)) return;
  tern_engine_t *eng = req->engine;
  err = tern__request_finish_file(req, err);
  /* One rule: the first failure recorded (code and message together) is the request's. */
  if (TERN__UNLIKELY(err))
    err = record_failure(req, err);
  else {
    req->error = 0;
    req->errmsg[0] = '\0';
  }
  tern__wait_leave(eng, req);
  tern__list_remove(&req->node);
  req->conn = NULL;
  if (TERN__UNLIKELY(req->hop.conn != NULL)) { /* kept for an NTLM hop that never went */
    tern__conn *c = req->hop.conn;
    req->hop.conn = NULL;
    tern__pool_unkeep(c);
  }
  if (req->admitted) {
    req->admitted = false;
    eng->nadmitted--;
    /* Outside the engine's callbacks (none today) no drain would follow: wake the loop. */
    if (eng->depth == 0 && may_admit(eng) && !eng->stopped) uv_async_send(&eng->async);
  }
  tern__request_close_files(req);
  tern__request_mark(req, TERN_TIME_END);
  atomic_store(&req->state, TERN__REQ_DONE);
  TERN__STAT_SUB(eng, TERN_STAT_REQUESTS_ACTIVE, 1);
  TERN__STAT_ADD(eng, TERN_STAT_REQUESTS_COMPLETED, 1);
  bool released = atomic_load(&req->released);
  if (err)
    tern__log(eng, TERN_LOG_ERROR, req, "%s %s failed: %s", req->method, req->url.target,
              req->errmsg);
  else
    tern__log(eng, TERN_LOG_INFO, req, "%s %s done: status %d, %llu body bytes in %.3f s",
              req->method, req->url.target, req->resp.status,
              (unsigned long long)req->resp.received, tern_request_get_time(req, TERN_TIME_END));
  if (TERN__UNLIKELY(err) && req->notify.progress && !released)
    (void)req->notify.progress(req,
                               req->resp.status ? TERN_PROGRESS_DOWNLOAD : TERN_PROGRESS_UPLOAD, -1,
                               req->resp.received, 0, req->notify.progress_data);
  if (req->notify.complete && !atomic_load(&req->released))
    req->notify.complete(req, err, req->notify.complete_data);
  if (req->total_timer_live) {
    req->total_timer_live = false;
    uv_timer_stop(&req->total_timer);
    uv_close((uv_handle_t *)&req->total_timer, on_total_closed);
  } else if (eng->depth > 0) {
    tern__list_insert_tail(&eng->finished, &req->node); /* unreferenced by drain */
  } else {
    tern__request_unref(req);
  }
}

static void on_total_timeout(uv_timer_t *t) {
  tern_request_t *req = t->data;
  tern_engine_t *eng = req->engine;
  tern__engine_enter(eng);
  tern__request_set_error(req, TERN_ETOTALTIMEOUT,
                          "%s: request exceeded its total limit of %llu ms", req->url.hostport,
                          (unsigned long long)req->timeouts[TERN_TIMEOUT_TOTAL]);
  abort_request(req, TERN_ETOTALTIMEOUT);
  tern__engine_leave(eng);
}

static void start_request(tern_request_t *req) {
  tern_engine_t *eng = req->engine;
  req->admitted = true;
  eng->nadmitted++;
  if (eng->stopped) {
    complete(req, TERN_ESHUTDOWN);
    return;
  }
  if (atomic_load(&req->cancel_requested)) {
    complete(req, TERN_ECANCELED);
    return;
  }
  if (req->timeouts[TERN_TIMEOUT_TOTAL]) {
    /* The loop's clock is the one cached when this iteration began: a busy iteration would
     * make the limit fire early. */
    uv_update_time(eng->loop);
    uv_timer_init(eng->loop, &req->total_timer);
    req->total_timer.data = req;
    req->total_timer_live = true;
    uint64_t spent = (uv_hrtime() - req->start_ns) / 1000000;
    uint64_t limit = req->timeouts[TERN_TIMEOUT_TOTAL];
    uv_timer_start(&req->total_timer, on_total_timeout, spent < limit ? limit - spent : 1, 0);
  }
  int r = tern__request_prepare(req, &eng->config);
  if (r) {
    complete(req, r);
    return;
  }
  if (req->sink.kind == TERN__SINK_FILE && req->sink.end &&
      req->sink.range_start >= req->sink.end) {
    req->sink.range_done = true;
    complete(req, 0); /* a resumed file that already holds the whole range */
    return;
  }
  tern__pool_dispatch(req);
}

static void hop_continue(tern_request_t *req) {
  tern_engine_t *eng = req->engine;
  if (eng->stopped) {
    complete(req, TERN_ESHUTDOWN);
    return;
  }
  int r = tern__request_next_hop(req);
  if (r) {
    complete(req, r);
    return;
  }
  tern__log(eng, TERN_LOG_INFO, req, "next hop: %s %s", req->method,
            tern_request_get_effective_url(req));
  tern__request_rewind(req);
  req->retried = req->force_new_conn = false; /* a new hop may retry a stale connection again */
  req->origin = NULL;                         /* a redirect may lead elsewhere */
  r = tern__request_prepare(req, &eng->config);
  if (r) {
    complete(req, r);
    return;
  }
  tern__pool_dispatch(req);
}

static void redispatch(tern_request_t *req, int err, bool counts_as_retry) {
  tern_engine_t *eng = req->engine;
  req->conn = NULL;
  if (eng->stopped) {
    complete(req, TERN_ESHUTDOWN);
    return;
  }
  if (counts_as_retry) {
    if (req->retried) {
      complete(req, err);
      return;
    }
    req->retried = true;
    req->force_new_conn = true;
    TERN__STAT_ADD(eng, TERN_STAT_RETRIES, 1);
  }
  if (!tern__request_can_replay(req)) {
    complete(req, err);
    return;
  }
  tern__request_rewind(req);
  tern__pool_dispatch(req);
}

static void fail_list(tern__list *l, int err) {
  while (!tern__list_empty(l)) {
    tern_request_t *req = tern__container_of(l->next, tern_request_t, node);
    tern__list_remove(&req->node);
    complete(req, err);
  }
}

static void shutdown_all(tern_engine_t *eng) {
  eng->stopped = true;
  uv_mutex_lock(&eng->lock);
  tern__list subs;
  tern__list_init(&subs);
  tern__list_splice_tail(&subs, &eng->submitted);
  while (!tern__list_empty(&eng->cancels)) {
    tern__list *n = eng->cancels.next;
    tern__list_remove(n);
    tern_request_t *req = tern__container_of(n, tern_request_t, cancel_node);
    atomic_store(&req->cancel_queued, false);
    tern__request_unref(req);
  }
  uv_mutex_unlock(&eng->lock);
  fail_list(&subs, TERN_ESHUTDOWN);
  fail_list(&eng->ready, TERN_ESHUTDOWN);
  tern_request_t *req;
  while ((req = tern__wait_take(eng, &eng->queued)) != NULL) complete(req, TERN_ESHUTDOWN);
  tern__pool_shutdown(eng);
  tern__tls_ctx_free_all(eng); /* connections still closing hold their own references */
  tern__resolve_forget_all(eng);
  uv_close((uv_handle_t *)&eng->async, on_async_closed);
  uv_close((uv_handle_t *)&eng->kick, on_async_closed);
}
