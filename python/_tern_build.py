"""Builds ``tern._tern``: a cffi extension in API mode over the installed libtern.

Run by setuptools through ``cffi_modules`` (see setup.py) when the package is installed. The
library is found through pkg-config (``tern.pc``; put its directory in ``PKG_CONFIG_PATH`` for a
prefix outside the default search path). The extension records the library's directory as its
run path, so no ``LD_LIBRARY_PATH`` is needed afterwards.

API mode means a C compiler checks every declaration below against ``tern.h`` itself, and lets
the hot path (waiting for a synchronous request) stay in C: the complete and progress callbacks
of synchronous requests are the small C functions at the end of this file, which signal a
condition variable and never touch the interpreter.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from cffi import FFI

# A completed request's fields, filled in one call (tern_py_response_take): declared once here,
# put into both the declarations (CDEF) and the C source (SOURCE) below. The scalars come first,
# each 8 bytes, so that Python reads them all with one struct.unpack_from (_core.INFO, checked
# against this layout at import). The offsets into the block (fields_at, look_at, body_at,
# body_end) are the ones Python slices at, computed here so that build_response does no
# arithmetic (each Python operation costs ~30 instructions, a C one ~1).
RESPONSE_STRUCT = r"""typedef struct {
  int64_t status;
  int64_t error;
  int64_t http_minor;
  int64_t http_version;
  int64_t redirects;
  int64_t reused;
  uint64_t offset;
  double elapsed;
  uint64_t body_end;
  uint64_t fields_at;
  uint64_t body_len;
  uint64_t look_at;
  uint64_t body_at;
  const char *body;
  const char *reason;
  const char *url;
  const char *tls_version;
  const char *decoded_encoding;
} tern_py_response;"""

# The client's defaults for every request, as tern_py_local_go applies them (one struct per
# client, made again when its headers change): the four timeouts (ms, 0: none), redirects (max,
# or -1: not followed), TLS verification, a CA file or directory (NULL: none), decoding, and the
# header fields as one block of NUL-terminated names and values.
TEMPLATE_STRUCT = r"""typedef struct {
  uint64_t connect_ms;
  uint64_t headers_ms;
  uint64_t body_ms;
  uint64_t total_ms;
  int follow_max;
  int verify;
  int decode_off;
  const char *ca_file;
  const char *ca_path;
  const char *headers;
  size_t headers_len;
} tern_py_template;"""

# What tern_py_local_fetch needs besides the request itself, set once per slot (buf and cap
# again when the scratch grows), so that a plain call converts four arguments, not ten (each
# pointer argument costs cffi about a hundred instructions): the engine, the waiter, the cell
# the request is handed back in, where the response is read to, and the run's first slice (ms);
# and whether the slot holds the engine (tern_py_local_hold), so that the hold is found and
# ended whatever exception cuts the Python code that took it short.
CALL_STRUCT = r"""typedef struct {
  tern_py_local *local;
  tern_py_waiter *waiter;
  tern_request_t **out;
  tern_py_response *info;
  char *buf;
  size_t cap;
  int slice_ms;
  int held;
} tern_py_call;"""

# The part of tern.h the binding uses. Checked by the compiler against the real header.
CDEF = r"""
typedef struct tern_engine tern_engine_t;
typedef struct tern_request tern_request_t;
typedef struct tern_config tern_config_t;

unsigned tern_version(void);
const char *tern_version_string(void);
const char *tern_strerror(int err);
const char *tern_err_name(int err);
int tern_error_is_timeout(int err);
int tern_error_is_tls_verify(int err);

int tern_config_new(tern_config_t **out);
void tern_config_free(tern_config_t *config);
int tern_config_set_buffer_size(tern_config_t *config, size_t bytes);
int tern_config_set_idle_timeout(tern_config_t *config, uint64_t ms);
int tern_config_set_max_connections_per_origin(tern_config_t *config, unsigned n);
int tern_config_set_max_active_requests(tern_config_t *config, unsigned n);
int tern_config_set_user_agent(tern_config_t *config, const char *user_agent);
int tern_config_add_resolve(tern_config_t *config, const char *entry);

int tern_engine_new(tern_engine_t **out, const tern_config_t *config);
void tern_engine_free(tern_engine_t *engine);
int tern_engine_submit(tern_engine_t *engine, tern_request_t *req);

typedef enum {
  TERN_STAT_CONNECTIONS_OPENED = 0,
  TERN_STAT_CONNECTIONS_OPEN = 1,
  TERN_STAT_CONNECTIONS_IDLE = 2,
  TERN_STAT_REQUESTS_ACTIVE = 3,
  TERN_STAT_REQUESTS_COMPLETED = 4,
  TERN_STAT_REUSED = 5,
  TERN_STAT_RETRIES = 6,
  TERN_STAT_REQUESTS_LIVE = 7,
  ...
} tern_stat;
uint64_t tern_engine_get_stat(const tern_engine_t *engine, tern_stat stat);

typedef enum { TERN_PROGRESS_UPLOAD = 1, TERN_PROGRESS_DOWNLOAD = 2 } tern_progress_state;
typedef void (*tern_complete_cb)(tern_request_t *req, int status, void *user_data);
typedef int (*tern_progress_cb)(tern_request_t *req, tern_progress_state state, int percent,
                                uint64_t done, uint64_t total, void *user_data);

int tern_request_new(tern_request_t **out);
void tern_request_free(tern_request_t *req);
void tern_request_cancel(tern_request_t *req);
int tern_request_set_url(tern_request_t *req, const char *url);
int tern_request_set_method(tern_request_t *req, const char *method);
int tern_request_add_header(tern_request_t *req, const char *name, const char *value);
int tern_request_omit_header(tern_request_t *req, const char *name);
int tern_request_set_body(tern_request_t *req, const void *data, size_t len);
int tern_request_set_body_file(tern_request_t *req, const char *path, uint64_t offset,
                               uint64_t end);
int tern_request_add_body_segment(tern_request_t *req, const void *data, size_t len);
int tern_request_add_body_segment_file(tern_request_t *req, const char *path, uint64_t offset,
                                       uint64_t end);
int tern_request_set_download_file(tern_request_t *req, const char *path, uint64_t offset,
                                   uint64_t end, int resume);
int tern_request_set_complete_cb(tern_request_t *req, tern_complete_cb cb, void *user_data);
int tern_request_set_progress_cb(tern_request_t *req, tern_progress_cb cb, void *user_data);
int tern_request_set_follow_redirects(tern_request_t *req, unsigned max);
int tern_request_set_redirect_flags(tern_request_t *req, unsigned flags);
int tern_request_set_auth(tern_request_t *req, const char *user, const char *password,
                          unsigned schemes);
int tern_request_set_proxy(tern_request_t *req, const char *proxy_url);
int tern_request_set_proxy_auth(tern_request_t *req, const char *user, const char *password,
                                unsigned schemes);
int tern_request_set_scheme_proxy(tern_request_t *req, const char *scheme,
                                  const char *proxy_url);
int tern_request_set_no_proxy(tern_request_t *req, const char *hosts);
typedef enum { TERN_DECODE_AUTO = 0, TERN_DECODE_RAW = 1, TERN_DECODE_OFF = 2 } tern_decode_mode;
int tern_request_set_decoding(tern_request_t *req, tern_decode_mode mode);
typedef enum {
  TERN_TIMEOUT_CONNECT = 0, TERN_TIMEOUT_HEADERS = 1, TERN_TIMEOUT_BODY = 2,
  TERN_TIMEOUT_TOTAL = 3
} tern_timeout;
int tern_request_set_timeout(tern_request_t *req, tern_timeout which, uint64_t ms);
int tern_request_set_http10(tern_request_t *req, int enabled);
int tern_request_set_tls_verify(tern_request_t *req, int verify);
int tern_request_set_tls_ca_file(tern_request_t *req, const char *path);
int tern_request_set_tls_ca_path(tern_request_t *req, const char *dir);
int tern_request_set_tls_client_cert(tern_request_t *req, const char *cert_file,
                                     const char *key_file, const char *password);
int tern_request_set_buffer_size(tern_request_t *req, size_t bytes);
void tern_request_set_user_data(tern_request_t *req, void *user_data);

int tern_request_get_status(const tern_request_t *req);
const char *tern_request_get_reason(const tern_request_t *req);
int tern_request_get_http_minor(const tern_request_t *req);
int tern_request_get_error(const tern_request_t *req);
const char *tern_request_get_error_message(const tern_request_t *req);
size_t tern_request_get_header_count(const tern_request_t *req);
int tern_request_get_header_at(const tern_request_t *req, size_t i, const char **name,
                               const char **value);
const void *tern_request_get_body(const tern_request_t *req, size_t *len);
uint64_t tern_request_get_bytes_received(const tern_request_t *req);
const char *tern_request_get_decoded_encoding(const tern_request_t *req);
uint64_t tern_request_get_offset(const tern_request_t *req);
const char *tern_request_get_effective_url(const tern_request_t *req);
unsigned tern_request_get_redirect_count(const tern_request_t *req);
const char *tern_request_get_tls_version(const tern_request_t *req);
int tern_request_is_reused(const tern_request_t *req);
typedef enum {
  TERN_TIME_START = 0, TERN_TIME_CONNECTED = 1, TERN_TIME_SENT = 2, TERN_TIME_HEADERS = 3,
  TERN_TIME_END = 4
} tern_time;
double tern_request_get_time(const tern_request_t *req, tern_time which);

static const int TERN_ESHUTDOWN;

/* The binding's own helpers (below in SOURCE). */
typedef struct tern_py_waiter tern_py_waiter;
tern_py_waiter *tern_py_waiter_new(void);
void tern_py_waiter_free(tern_py_waiter *w);
int tern_py_waiter_arm(tern_py_waiter *w, tern_request_t *req, int progress);
int tern_py_waiter_wait(tern_py_waiter *w, int timeout_ms);
int tern_py_waiter_take_progress(tern_py_waiter *w, int index, int *percent, uint64_t *done,
                                 uint64_t *total);

/* A client's engine on a loop of its own, run by the calling thread while it waits (no loop
 * thread, no thread hop per request): only the thread that made it uses it. */
typedef struct tern_py_local tern_py_local;
tern_py_local *tern_py_local_new(const tern_config_t *config, int *err);
int tern_py_local_submit(tern_py_local *l, tern_py_waiter *w, tern_request_t *req);
int tern_py_local_run(tern_py_local *l, tern_py_waiter *w, int slice_ms);
void tern_py_local_unlink(tern_py_local *l, tern_py_waiter *w);
int tern_py_waiter_linked(tern_py_waiter *w);
uint64_t tern_py_local_stat(tern_py_local *l, tern_stat stat);
void tern_py_local_free(tern_py_local *l);
/* Client's engine and another thread's close(), without a Python lock: the owner holds the
 * engine while it uses it (tern_py_local_hold or tern_py_local_fetch, then
 * tern_py_local_let_go); close refuses new holds, cancels the requests in flight and frees the
 * engine and loop once no hold is left; the struct stays until tern_py_local_release. */
void tern_py_local_close(tern_py_local *l, int mode);
/* After another thread's close: 1 once the engine is freed (this call frees it when no hold is
 * left), 0 after timeout_ms; give_up: no wait, the owner's last let-go frees it instead. */
int tern_py_local_wait_idle(tern_py_local *l, int timeout_ms, int give_up);
uint64_t tern_py_local_stat_held(tern_py_local *l, tern_stat stat);
void tern_py_local_release(tern_py_local *l);
/* A request with the client's defaults only, in one call: made, set up from the template,
 * armed, submitted and run for a first slice; see SOURCE. */
@TEMPLATE_STRUCT@
int tern_py_local_go(tern_py_local *l, tern_py_waiter *w, const tern_py_template *t,
                     const char *url, const char *method, tern_request_t **out, int slice_ms);
/* The same request made and set up, for the asyncio client to submit. */
int tern_py_make_plain(const tern_py_template *t, const char *url, const char *method,
                       tern_request_t **out);
/* A completed request's response in one call: the scalar fields, and the strings and header
 * fields as one block of NUL-terminated strings, then the fields again for lookups by name. */
@RESPONSE_STRUCT@
size_t tern_py_response_take(tern_request_t *req, tern_py_response *out, char *buf,
                             size_t cap, tern_request_t **cell);
@CALL_STRUCT@
/* tern_py_local_go, and when the request completed in that first slice, the response taken as
 * by tern_py_response_take. Returns the block's length (> 0) when the request completed and was
 * read whole and freed; 0 when the caller must run it on and read it (it runs, it failed, or
 * its response outgrew buf; *out holds it); a negative code when it was refused. */
int64_t tern_py_local_fetch(tern_py_call *c, const tern_py_template *t, const char *url,
                            const char *method);
/* The hold of c's slot on c's engine (0), or TERN_ESHUTDOWN once closing (no hold taken); and
 * its end (a no-op when c holds none). */
int tern_py_local_hold(tern_py_call *c);
void tern_py_local_let_go(tern_py_call *c);
/* Ends whatever c's slot still has: its request (cancelled if it runs, run to its end,
 * unlinked, freed, the cell emptied) and its hold. A no-op when it has nothing. */
void tern_py_call_end(tern_py_call *c);
/* Cancels w's request if it runs, runs the loop until it completes, unlinks w. */
void tern_py_local_abandon(tern_py_local *l, tern_py_waiter *w);
/* The per-request setters that almost every call makes, in one call: URL, method, the four
 * timeouts (ms, 0: none) and redirects (max, or -1: not followed). */
int tern_py_setup(tern_request_t *req, const char *url, const char *method, uint64_t connect_ms,
                  uint64_t headers_ms, uint64_t body_ms, uint64_t total_ms, int follow_max);
/* asyncio: completions queued in C for the event loop, which reads them in batches when an
 * eventfd says there are some (no Python, no GIL on the engine's thread). */
typedef struct tern_py_queue tern_py_queue;
tern_py_queue *tern_py_queue_new(void);
int tern_py_queue_fd(tern_py_queue *q);
int tern_py_queue_arm(tern_py_queue *q, tern_request_t *req, int64_t id);
size_t tern_py_queue_take(tern_py_queue *q, int64_t *ids, int *statuses, size_t cap);
void tern_py_queue_free(tern_py_queue *q);
tern_py_queue *tern_py_queue_new_local(void);
/* asyncio on the event loop's own thread: a tern_py_local engine whose libuv loop the event
 * loop watches (its backend fd under add_reader) and runs without waiting; completions are
 * queued in C (a queue without eventfd) and taken after each run. */
int tern_py_local_fd(tern_py_local *l);
int tern_py_aio_submit(tern_py_local *l, tern_py_queue *q, tern_request_t *req, int64_t id);
int tern_py_aio_go(tern_py_local *l, tern_py_queue *q, const tern_py_template *t,
                   const char *url, const char *method, int64_t id, tern_request_t **out);
size_t tern_py_aio_run(tern_py_local *l, tern_py_queue *q, int64_t *ids, int *statuses,
                       size_t cap, int *timeout_ms);
/* asyncio with a progress callback (or a loop without add_reader): completions and progress
 * reach Python on the engine's thread. */
extern "Python" void _tern_async_complete(tern_request_t *req, int status, void *user_data);
extern "Python" int _tern_async_progress(tern_request_t *req, tern_progress_state state,
                                         int percent, uint64_t done, uint64_t total,
                                         void *user_data);
"""

# A waiter lets a synchronous call sleep on a condition variable, with the GIL released (cffi
# releases it around every C call), until the engine's thread completes the request. The latest
# progress report of each phase is kept for the waiting thread, which calls the Python progress
# callback itself: no Python code ever runs on the engine's thread for a synchronous request.
SOURCE = r"""
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <tern.h>

typedef struct tern_py_waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* A local engine's requests in flight, for tern_py_local_close (under the engine's mu). */
  tern_request_t *req;
  struct tern_py_waiter *prev, *next;
  int done;
  int status;
  int events;          /* progress reports not yet seen by the waiting thread */
  int changed[2];      /* per phase: 0 upload, 1 download */
  int percent[2];
  uint64_t bytes[2];
  uint64_t total[2];
} tern_py_waiter;

static tern_py_waiter *tern_py_waiter_new(void) {
  tern_py_waiter *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, &attr);
  pthread_condattr_destroy(&attr);
  return w;
}

static void tern_py_waiter_free(tern_py_waiter *w) {
  if (!w) return;
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free(w);
}

static void tern_py_on_complete(tern_request_t *req, int status, void *user_data) {
  (void)req;
  tern_py_waiter *w = user_data;
  pthread_mutex_lock(&w->mu);
  w->done = 1;
  w->status = status;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static int tern_py_on_progress(tern_request_t *req, tern_progress_state state, int percent,
                               uint64_t done, uint64_t total, void *user_data) {
  (void)req;
  tern_py_waiter *w = user_data;
  int i = state == TERN_PROGRESS_UPLOAD ? 0 : 1;
  pthread_mutex_lock(&w->mu);
  w->changed[i] = 1;
  w->percent[i] = percent;
  w->bytes[i] = done;
  w->total[i] = total;
  w->events = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  return 0;
}

/* Resets the waiter and makes it the request's complete (and progress) callback. */
static int tern_py_waiter_arm(tern_py_waiter *w, tern_request_t *req, int progress) {
  pthread_mutex_lock(&w->mu);
  w->done = 0;
  w->status = 0;
  w->events = 0;
  w->changed[0] = w->changed[1] = 0;
  pthread_mutex_unlock(&w->mu);
  int rc = tern_request_set_complete_cb(req, tern_py_on_complete, w);
  if (rc == 0 && progress) rc = tern_request_set_progress_cb(req, tern_py_on_progress, w);
  return rc;
}

/* *at = now + ms on the monotonic clock (the clock the condition variables wait on). */
static void tern_py_deadline(struct timespec *at, int ms) {
  clock_gettime(CLOCK_MONOTONIC, at);
  at->tv_sec += ms / 1000;
  at->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (at->tv_nsec >= 1000000000L) {
    at->tv_sec += 1;
    at->tv_nsec -= 1000000000L;
  }
}
/* Sleeps until the request completed (returns 1), a progress report came (2), or timeout_ms
 * passed (0; a negative timeout waits without limit). */
static int tern_py_waiter_wait(tern_py_waiter *w, int timeout_ms) {
  struct timespec deadline;
  if (timeout_ms >= 0) {
    tern_py_deadline(&deadline, timeout_ms);
  }
  int result = 0;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    if (w->events) {
      w->events = 0;
      result = 2;
      break;
    }
    if (w->done) {
      result = 1;
      break;
    }
    if (timeout_ms < 0) {
      pthread_cond_wait(&w->cv, &w->mu);
    } else if (pthread_cond_timedwait(&w->cv, &w->mu, &deadline) == ETIMEDOUT) {
      result = w->events ? 2 : (w->done ? 1 : 0);
      w->events = 0;
      break;
    }
  }
  pthread_mutex_unlock(&w->mu);
  return result;
}

/* ---- an engine on the caller's thread ---- */
#include <uv.h>
typedef struct tern_py_local tern_py_local;
struct tern_py_local {
  uv_loop_t loop;
  uv_timer_t slice;
  tern_engine_t *engine;
  int slice_over;
  /* What another thread's close() needs: the requests in flight (their waiters, linked) and
   * whether new ones are refused. The owner adds and removes; any thread may cancel. */
  pthread_mutex_t mu;
  atomic_int closing;
  tern_py_waiter *inflight;
  /* The owner's holds (its slots' calls that use the engine now, nested ones included): the
   * owner counts them up before it looks at closing, close() sets closing before it looks at
   * them (both sequentially consistent), so either the owner sees closing or close sees the
   * hold; close() then waits on idle (under mu) for the last hold to end. freed: the engine and
   * loop are gone (under mu); free_when_idle: close() came from the owner's own thread while
   * it held the engine (a nested call's), so the last hold's end frees them. */
  atomic_int busy;
  pthread_cond_t idle;
  int freed;
  int free_when_idle;
};
static void tern_py_local_on_slice(uv_timer_t *t) {
  tern_py_local *l = t->data;
  l->slice_over = 1;
}
static tern_py_local *tern_py_local_new(const tern_config_t *config, int *err) {
  tern_py_local *l = calloc(1, sizeof *l);
  if (!l) {
    *err = -2;
    return NULL;
  }
  if (uv_loop_init(&l->loop) != 0) {
    free(l);
    *err = -1;
    return NULL;
  }
  uv_timer_init(&l->loop, &l->slice);
  l->slice.data = l;
  int rc = tern_engine_new_on_loop(&l->engine, &l->loop, config);
  if (rc) {
    uv_close((uv_handle_t *)&l->slice, NULL);
    uv_run(&l->loop, UV_RUN_DEFAULT);
    uv_loop_close(&l->loop);
    free(l);
    *err = rc;
    return NULL;
  }
  pthread_mutex_init(&l->mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&l->idle, &attr);
  pthread_condattr_destroy(&attr);
  return l;
}
/* Submits w's armed request (the loop is not running: it joins the engine's ready list) and
 * links w into the requests in flight; refused with TERN_ESHUTDOWN once closing, TERN_EBUSY
 * while w is still linked (its last request not seen to complete). */
static int tern_py_local_submit(tern_py_local *l, tern_py_waiter *w, tern_request_t *req) {
  pthread_mutex_lock(&l->mu);
  /* a waiter still linked (its request not seen to complete) is not linked twice */
  int rc = w->req ? TERN_EBUSY
                  : atomic_load(&l->closing) ? TERN_ESHUTDOWN
                                             : tern_engine_submit(l->engine, req);
  if (rc == 0) {
    w->req = req;
    w->prev = NULL;
    w->next = l->inflight;
    if (l->inflight) l->inflight->prev = w;
    l->inflight = w;
  }
  pthread_mutex_unlock(&l->mu);
  return rc;
}
static void tern_py_local_unlink(tern_py_local *l, tern_py_waiter *w) {
  pthread_mutex_lock(&l->mu);
  if (w->req) {
    if (w->prev) w->prev->next = w->next;
    else l->inflight = w->next;
    if (w->next) w->next->prev = w->prev;
    w->req = NULL;
    w->prev = w->next = NULL;
  }
  pthread_mutex_unlock(&l->mu);
}
/* Whether w's request was submitted and its completion not yet seen by tern_py_local_run
 * (only the owner links and unlinks, so the owner may ask without the lock). */
static int tern_py_waiter_linked(tern_py_waiter *w) {
  return w->req != NULL;
}
/* Runs the loop on this thread until w's request completed (1), a progress report came (2),
 * or slice_ms passed (0), so that the caller can look at signals between slices. Other
 * requests of the same loop (a nested call's) move on meanwhile; their waiters keep their
 * news. */
static int tern_py_local_run(tern_py_local *l, tern_py_waiter *w, int slice_ms) {
  l->slice_over = 0;
  uv_timer_start(&l->slice, tern_py_local_on_slice, (uint64_t)slice_ms, 0);
  int result = 0;
  for (;;) {
    pthread_mutex_lock(&w->mu);
    if (w->events) {
      w->events = 0;
      result = 2;
    } else if (w->done) {
      result = 1;
    }
    pthread_mutex_unlock(&w->mu);
    if (result || l->slice_over) break;
    uv_run(&l->loop, UV_RUN_ONCE);
  }
  uv_timer_stop(&l->slice);
  if (result == 1) tern_py_local_unlink(l, w);
  return result;
}
static uint64_t tern_py_local_stat(tern_py_local *l, tern_stat stat) {
  return tern_engine_get_stat(l->engine, stat);
}
/* Frees the engine and its loop; the engine's handles close during the last runs. */
static void tern_py_local_free(tern_py_local *l) {
  if (!l) return;
  tern_engine_free(l->engine);
  uv_close((uv_handle_t *)&l->slice, NULL);
  while (uv_run(&l->loop, UV_RUN_DEFAULT) != 0) {
  }
  uv_loop_close(&l->loop);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->idle);
  free(l);
}
/* The engine and its loop freed, the struct kept (under l->mu, no hold left). */
static void tern_py_local_free_engine(tern_py_local *l) {
  l->freed = 1;
  tern_engine_free(l->engine);
  l->engine = NULL;
  uv_close((uv_handle_t *)&l->slice, NULL);
  while (uv_run(&l->loop, UV_RUN_DEFAULT) != 0) {
  }
  uv_loop_close(&l->loop);
}
/* Ends one hold (the owner's thread); the last one, once closing, wakes close() or, when close
 * came from this thread while it held the engine, frees the engine itself. */
static void tern_py_local_leave(tern_py_local *l) {
  if (atomic_fetch_sub(&l->busy, 1) != 1 || !atomic_load(&l->closing)) return;
  pthread_mutex_lock(&l->mu);
  if (l->free_when_idle && !l->freed && atomic_load(&l->busy) == 0) tern_py_local_free_engine(l);
  pthread_cond_broadcast(&l->idle);
  pthread_mutex_unlock(&l->mu);
}
/* Starts one hold of the engine (the owner's thread): 0, or TERN_ESHUTDOWN once closing. */
static int tern_py_local_enter(tern_py_local *l) {
  atomic_fetch_add(&l->busy, 1);
  if (!atomic_load(&l->closing)) return 0;
  tern_py_local_leave(l);
  return TERN_ESHUTDOWN;
}
/* close(), from any thread: new holds and requests are refused, the requests in flight
 * cancelled (they complete with TERN_ECANCELED while their owner runs the loop); then, mode 0
 * (another thread): nothing more (the caller waits with tern_py_local_wait_idle, in slices so
 * that its signal handlers run); mode 1 (the owner's thread): frees the engine and loop now, or
 * when its last hold ends if it holds the engine (a progress callback's or a signal handler's
 * close); mode 2 (a forked child's copy): only refuses (the copied lock, engine and requests
 * are the parent's: not locked, cancelled or freed). Idempotent. */
static void tern_py_local_close(tern_py_local *l, int mode) {
  atomic_store(&l->closing, 1);
  if (mode == 2) return;
  pthread_mutex_lock(&l->mu);
  for (tern_py_waiter *w = l->inflight; w; w = w->next) tern_request_cancel(w->req);
  if (mode == 1) {
    if (atomic_load(&l->busy) != 0) l->free_when_idle = 1;
    else if (!l->freed) tern_py_local_free_engine(l);
  }
  pthread_mutex_unlock(&l->mu);
}
/* After close (mode 0): waits up to timeout_ms for the owner's last hold to end, then frees
 * the engine and loop; 1 once they are freed, 0 when the time ran out. give_up (the waiting
 * thread was interrupted): no wait, the owner's last hold's end frees them instead (or this
 * call, when none is left). */
static int tern_py_local_wait_idle(tern_py_local *l, int timeout_ms, int give_up) {
  pthread_mutex_lock(&l->mu);
  if (!give_up && !l->freed && atomic_load(&l->busy) != 0) {
    struct timespec until;
    tern_py_deadline(&until, timeout_ms);
    while (!l->freed && atomic_load(&l->busy) != 0)
      if (pthread_cond_timedwait(&l->idle, &l->mu, &until) == ETIMEDOUT) break;
  }
  if (!l->freed) {
    if (atomic_load(&l->busy) == 0) tern_py_local_free_engine(l);
    else if (give_up) l->free_when_idle = 1;
  }
  int freed = l->freed;
  pthread_mutex_unlock(&l->mu);
  return freed;
}
/* A counter of the engine, from any thread: 0 once it is freed. */
static uint64_t tern_py_local_stat_held(tern_py_local *l, tern_stat stat) {
  pthread_mutex_lock(&l->mu);
  uint64_t v = l->freed ? 0 : tern_engine_get_stat(l->engine, stat);
  pthread_mutex_unlock(&l->mu);
  return v;
}
/* The struct itself, when nothing points to it any more (the engine freed by close; a forked
 * child's copy, never freed, is left alone). */
static void tern_py_local_release(tern_py_local *l) {
  if (!l || !l->freed) return;
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->idle);
  free(l);
}

/* ---- responses and requests in few calls ---- */
@RESPONSE_STRUCT@
static size_t tern_py_put_n(char *buf, size_t at, size_t cap, const char *s, size_t n) {
  if (at + n + 1 <= cap) {
    memcpy(buf + at, s, n);
    buf[at + n] = '\0';
  }
  return at + n + 1;
}
static size_t tern_py_put(char *buf, size_t at, size_t cap, const char *s) {
  s = s ? s : "";
  return tern_py_put_n(buf, at, cap, s, strlen(s));
}
static int tern_py_has_newline(const char *s) {
  return s && strchr(s, '\n') != NULL;
}
/* Whether two field names of the same length are the same name (ASCII letters fold; bytes
 * above 127 do not, as in Python's bytes.lower(): no locale is asked). */
static int tern_py_same_name(const char *a, const char *b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
    if (x == y) continue;
    unsigned char lower = x | 0x20;
    if (lower != (y | 0x20) || lower < 'a' || lower > 'z') return 0;
  }
  return 1;
}
/* The most fields a response's lookup block (below) is made for; a response with more has
 * none and Python searches its field block instead (slower, same answers). */
#define TERN_PY_LOOK_MAX 64
/* The header fields once more, for looking one up by name (ResponseHeaders.get, [], in): each
 * distinct name once, first-seen order, lowered (ASCII), with the values of every field of that
 * name joined by ", " in order, as "\nname\0value", then a final "\n". Python finds a field with
 * one search for "\nname\0" and reads its value up to the next "\n"; in the field block it had
 * to lower the block, count NULs to tell a name from a value that reads the same, and search
 * again for repeats (together about a quarter of a plain GET's instructions, header lookup
 * included). Only for names and values without a "\n", which the search relies on (the caller
 * checks). */
static size_t tern_py_put_look(char *buf, size_t at, size_t cap, size_t n, const char **names,
                               const size_t *name_lens, const char **values,
                               const size_t *value_lens) {
  unsigned char joined[TERN_PY_LOOK_MAX] = {0};
  /* Names that may repeat, by a 6-bit key of length and first letter (equal names, letters
   * folded, have equal keys): only they are compared with the names after them. */
  unsigned char keys[TERN_PY_LOOK_MAX];
  uint64_t seen = 0, repeated = 0;
  for (size_t i = 0; i < n; i++) {
    keys[i] = (unsigned char)((name_lens[i] * 7 + ((unsigned char)names[i][0] | 0x20)) & 63);
    uint64_t bit = (uint64_t)1 << keys[i];
    repeated |= seen & bit;
    seen |= bit;
  }
  for (size_t i = 0; i < n; i++) {
    if (joined[i]) continue;
    size_t nl = name_lens[i], vl = value_lens[i];
    if (at + nl + vl + 2 <= cap) {
      char *o = buf + at;
      *o++ = '\n';
      for (size_t c = 0; c < nl; c++) {
        char ch = names[i][c];
        *o++ = ch >= 'A' && ch <= 'Z' ? (char)(ch + ('a' - 'A')) : ch;
      }
      *o++ = '\0';
      memcpy(o, values[i], vl);
    }
    at += nl + vl + 2;
    if (!(repeated & ((uint64_t)1 << keys[i]))) continue;
    for (size_t j = i + 1; j < n; j++) {
      if (joined[j] || name_lens[j] != nl || !tern_py_same_name(names[i], names[j], nl)) continue;
      joined[j] = 1;
      if (at + value_lens[j] + 2 <= cap) {
        buf[at] = ',';
        buf[at + 1] = ' ';
        memcpy(buf + at + 2, values[j], value_lens[j]);
      }
      at += value_lens[j] + 2;
    }
  }
  if (at + 1 <= cap) buf[at] = '\n';
  return at + 1;
}
/* A completed request's response in one call: the scalar fields into *out, and into buf the
 * reason phrase, effective URL, TLS version and decoded encoding ("" for none), then every
 * header field's name and value, each NUL-terminated (out->fields_at: the NUL that ends the
 * strings, which Python reads as the field block's first), then the lookup block
 * (tern_py_put_look; out->look_at: where it starts, 0 when not made), then the body when it
 * fits too (out->body_at and out->body_end: where it starts and ends, else 0). Returns
 * the bytes the strings, fields and lookup block take; when that is more than cap, buf holds
 * only what fitted: call again with a buffer that large. With a cell (that holds req), a
 * request that succeeded and whose whole response is in buf is freed here and the cell
 * emptied: nothing of it is needed any more. */
static size_t tern_py_response_take(tern_request_t *req, tern_py_response *out, char *buf,
                                    size_t cap, tern_request_t **cell) {
  out->status = tern_request_get_status(req);
  out->error = tern_request_get_error(req);
  out->http_minor = tern_request_get_http_minor(req);
  out->http_version = tern_request_get_http_version(req);
  out->redirects = tern_request_get_redirect_count(req);
  out->reused = tern_request_is_reused(req);
  out->offset = tern_request_get_offset(req);
  out->elapsed = tern_request_get_time(req, TERN_TIME_END);
  size_t header_count = tern_request_get_header_count(req);
  size_t body_len = 0;
  out->body = tern_request_get_body(req, &body_len);
  out->body_len = body_len;
  out->reason = tern_request_get_reason(req);
  out->url = tern_request_get_effective_url(req);
  out->tls_version = tern_request_get_tls_version(req);
  out->decoded_encoding = tern_request_get_decoded_encoding(req);
  size_t at = 0;
  at = tern_py_put(buf, at, cap, out->reason);
  at = tern_py_put(buf, at, cap, out->url);
  at = tern_py_put(buf, at, cap, out->tls_version);
  at = tern_py_put(buf, at, cap, out->decoded_encoding);
  out->fields_at = at - 1;
  const char *names[TERN_PY_LOOK_MAX], *values[TERN_PY_LOOK_MAX];
  size_t name_lens[TERN_PY_LOOK_MAX], value_lens[TERN_PY_LOOK_MAX];
  int look = header_count <= TERN_PY_LOOK_MAX;
  size_t n = 0;
  for (size_t i = 0; i < header_count; i++) {
    const char *name = NULL, *value = NULL;
    if (tern_request_get_header_at(req, i, &name, &value) != 0) continue;
    name = name ? name : "";
    value = value ? value : "";
    size_t nl = strlen(name), vl = strlen(value);
    at = tern_py_put_n(buf, at, cap, name, nl);
    at = tern_py_put_n(buf, at, cap, value, vl);
    if (!look) continue;
    names[n] = name;
    name_lens[n] = nl;
    values[n] = value;
    value_lens[n] = vl;
    n++;
  }
  /* A lookup block only when no string before it (the reason phrase and URL too: Python
   * searches the response's strings, fields and lookup block as one) holds a newline: one
   * search of what was written when it all fitted, else each string (the same answer). */
  if (look && at <= cap) {
    look = memchr(buf, '\n', at) == NULL;
  } else if (look) {
    look = !tern_py_has_newline(out->reason) && !tern_py_has_newline(out->url) &&
           !tern_py_has_newline(out->tls_version) && !tern_py_has_newline(out->decoded_encoding);
    for (size_t i = 0; look && i < n; i++)
      look = !memchr(names[i], '\n', name_lens[i]) && !memchr(values[i], '\n', value_lens[i]);
  }
  out->look_at = 0;
  if (look) {
    out->look_at = at;
    at = tern_py_put_look(buf, at, cap, n, names, name_lens, values, value_lens);
  }
  out->body_at = out->body_end = 0;
  if (out->body_len && at <= cap && out->body_len <= cap - at) {
    memcpy(buf + at, out->body, out->body_len);
    out->body_at = at;
    out->body_end = at + out->body_len;
  }
  if (cell && out->error == 0 && at <= cap && (out->body_at || !out->body_len)) {
    tern_request_free(req);
    *cell = NULL;
  }
  return at;
}
static int tern_py_setup(tern_request_t *req, const char *url, const char *method,
                         uint64_t connect_ms, uint64_t headers_ms, uint64_t body_ms,
                         uint64_t total_ms, int follow_max) {
  int rc = tern_request_set_url(req, url);
  if (rc) return rc;
  if (strcmp(method, "GET") != 0 && (rc = tern_request_set_method(req, method)) != 0) return rc;
  /* -1: rejected by the method or a timeout; the caller names which by calling again */
  if (tern_request_set_timeout(req, TERN_TIMEOUT_CONNECT, connect_ms) ||
      tern_request_set_timeout(req, TERN_TIMEOUT_HEADERS, headers_ms) ||
      tern_request_set_timeout(req, TERN_TIMEOUT_BODY, body_ms) ||
      tern_request_set_timeout(req, TERN_TIMEOUT_TOTAL, total_ms))
    return -1000;
  if (follow_max >= 0 && tern_request_set_follow_redirects(req, (unsigned)follow_max) != 0)
    return -1001;
  return 0;
}

@TEMPLATE_STRUCT@
/* A request made and set up from the template (*out; NULL and a negative code when refused). */
static int tern_py_make_plain(const tern_py_template *t, const char *url, const char *method,
                              tern_request_t **out) {
  *out = NULL;
  tern_request_t *req = NULL;
  int rc = tern_request_new(&req);
  if (rc) return rc;
  rc = tern_py_setup(req, url, method, t->connect_ms, t->headers_ms, t->body_ms, t->total_ms,
                     t->follow_max);
  const char *h = t->headers, *end = t->headers + t->headers_len;
  while (rc == 0 && h < end) {
    const char *v = h + strlen(h) + 1;
    rc = tern_request_add_header(req, h, v);
    h = v + strlen(v) + 1;
  }
  if (rc == 0 && !t->verify) rc = tern_request_set_tls_verify(req, 0);
  if (rc == 0 && t->ca_file) rc = tern_request_set_tls_ca_file(req, t->ca_file);
  if (rc == 0 && t->ca_path) rc = tern_request_set_tls_ca_path(req, t->ca_path);
  if (rc == 0 && t->decode_off) rc = tern_request_set_decoding(req, TERN_DECODE_OFF);
  if (rc) {
    tern_request_free(req);
    return rc < 0 ? rc : -1;
  }
  *out = req;
  return 0;
}

/* A request with only the client's defaults (a plain client.get(url)) in one call: made, set
 * up from the template, armed with w, submitted, and run for a first slice. Returns what
 * tern_py_local_run returns (the request, in *out, is then the caller's to run on and free),
 * or a negative code when the request could not be made, set up or submitted (*out NULL: the
 * caller makes it again the long way, which names what was refused). */
static int tern_py_local_go(tern_py_local *l, tern_py_waiter *w, const tern_py_template *t,
                            const char *url, const char *method, tern_request_t **out,
                            int slice_ms) {
  *out = NULL;
  tern_request_t *req = NULL;
  int rc = tern_py_make_plain(t, url, method, &req);
  if (rc) return rc;
  rc = tern_py_waiter_arm(w, req, 0);
  if (rc == 0) rc = tern_py_local_submit(l, w, req);
  if (rc) {
    tern_request_free(req);
    return rc < 0 ? rc : -1;
  }
  *out = req;
  return tern_py_local_run(l, w, slice_ms);
}
@CALL_STRUCT@
/* Cancels w's request if it was submitted and not seen to complete, runs the loop until it
 * completes, and unlinks w (the owner's thread; a no-op when w is not linked). */
static void tern_py_local_abandon(tern_py_local *l, tern_py_waiter *w) {
  if (!w->req) return;
  tern_request_cancel(w->req);
  while (tern_py_local_run(l, w, 200) != 1) {
  }
}
/* The end of whatever c's slot still has (the owner's thread; a no-op when nothing): the
 * request in *c->out cancelled if it runs, run to its end, unlinked and freed, the cell
 * emptied, then the hold ended. One C call, so that no Python code (where a signal handler's
 * exception could cut it short) sits between a plain call's request and its end. */
static void tern_py_call_end(tern_py_call *c) {
  tern_request_t *req = *c->out;
  if (req) {
    tern_py_local_abandon(c->local, c->waiter);
    *c->out = NULL;
    tern_request_free(req);
  }
  if (c->held) {
    c->held = 0;
    tern_py_local_leave(c->local);
  }
}
static int tern_py_local_hold(tern_py_call *c) {
  tern_py_call_end(c); /* what an earlier use left behind, if anything */
  int rc = tern_py_local_enter(c->local);
  if (rc == 0) c->held = 1;
  return rc;
}
static void tern_py_local_let_go(tern_py_call *c) {
  if (!c->held) return;
  c->held = 0;
  tern_py_local_leave(c->local);
}
/* The engine is held for the call: let go of before it returns, unless it returns 0 (the
 * request in *c->out, c->held set: the caller runs it on, reads it, then ends it with
 * tern_py_call_end). What an earlier call of the slot left behind is ended first. */
static int64_t tern_py_local_fetch(tern_py_call *c, const tern_py_template *t,
                                   const char *url, const char *method) {
  if (c->held || *c->out) tern_py_call_end(c);
  tern_py_local *l = c->local;
  int r = tern_py_local_enter(l);
  if (r) return r;
  r = tern_py_local_go(l, c->waiter, t, url, method, c->out, c->slice_ms);
  if (r == 1) {
    size_t n = tern_py_response_take(*c->out, c->info, c->buf, c->cap, c->out);
    /* read whole and freed (the cell emptied): the usual case; else the caller takes it again */
    if (*c->out == NULL) {
      tern_py_local_leave(l);
      return (int64_t)n;
    }
  } else if (r < 0) {
    tern_py_local_leave(l);
    return r;
  }
  c->held = 1;
  return 0;
}

/* ---- asyncio completions, queued for the event loop ---- */
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>
typedef struct tern_py_queue {
  pthread_mutex_t mu;
  int fd;         /* eventfd: readable while entries wait (written once per batch) */
  int signaled;
  size_t len, cap;
  int64_t *ids;
  int *statuses;
} tern_py_queue;
static tern_py_queue *tern_py_queue_new(void) {
  tern_py_queue *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  q->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  q->cap = 256;
  q->ids = malloc(q->cap * sizeof *q->ids);
  q->statuses = malloc(q->cap * sizeof *q->statuses);
  if (q->fd < 0 || !q->ids || !q->statuses) {
    if (q->fd >= 0) close(q->fd);
    free(q->ids);
    free(q->statuses);
    free(q);
    return NULL;
  }
  pthread_mutex_init(&q->mu, NULL);
  return q;
}
/* A queue for completions on the thread that takes them (the asyncio engine run on the
 * event loop's thread): no eventfd, nothing to wake. */
static tern_py_queue *tern_py_queue_new_local(void) {
  tern_py_queue *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  q->fd = -1;
  q->cap = 256;
  q->ids = malloc(q->cap * sizeof *q->ids);
  q->statuses = malloc(q->cap * sizeof *q->statuses);
  if (!q->ids || !q->statuses) {
    free(q->ids);
    free(q->statuses);
    free(q);
    return NULL;
  }
  pthread_mutex_init(&q->mu, NULL);
  return q;
}
static int tern_py_queue_fd(tern_py_queue *q) {
  return q->fd;
}
/* On the engine's thread: the request's id joins the queue; the first of a batch wakes the
 * loop. */
static void tern_py_queue_on_complete(tern_request_t *req, int status, void *user_data) {
  tern_py_queue *q = user_data;
  int64_t id = (int64_t)(intptr_t)tern_request_get_user_data(req);
  pthread_mutex_lock(&q->mu);
  if (q->len == q->cap) {
    size_t cap = q->cap * 2;
    int64_t *ids = realloc(q->ids, cap * sizeof *ids);
    if (ids) q->ids = ids;
    int *st = ids ? realloc(q->statuses, cap * sizeof *st) : NULL;
    if (st) q->statuses = st;
    if (ids && st) q->cap = cap;
  }
  if (q->len < q->cap) {
    q->ids[q->len] = id;
    q->statuses[q->len] = status;
    q->len++;
  }
  if (!q->signaled && q->fd >= 0) {
    uint64_t one = 1;
    ssize_t w = write(q->fd, &one, sizeof one);
    (void)w;
    q->signaled = 1;
  }
  pthread_mutex_unlock(&q->mu);
}
/* Before submit: the request completes into q under id. */
static int tern_py_queue_arm(tern_py_queue *q, tern_request_t *req, int64_t id) {
  tern_request_set_user_data(req, (void *)(intptr_t)id);
  return tern_request_set_complete_cb(req, tern_py_queue_on_complete, q);
}
/* On the loop's thread: up to cap completions, oldest first; once the queue is empty the
 * eventfd is read back to not readable. */
static size_t tern_py_queue_take(tern_py_queue *q, int64_t *ids, int *statuses, size_t cap) {
  pthread_mutex_lock(&q->mu);
  size_t n = q->len < cap ? q->len : cap;
  memcpy(ids, q->ids, n * sizeof *ids);
  memcpy(statuses, q->statuses, n * sizeof *statuses);
  q->len -= n;
  memmove(q->ids, q->ids + n, q->len * sizeof *q->ids);
  memmove(q->statuses, q->statuses + n, q->len * sizeof *q->statuses);
  if (q->len == 0 && q->signaled) {
    uint64_t v;
    ssize_t r = read(q->fd, &v, sizeof v);
    (void)r;
    q->signaled = 0;
  }
  pthread_mutex_unlock(&q->mu);
  return n;
}
/* Only once no request armed with q can complete any more (its engine freed). */
static void tern_py_queue_free(tern_py_queue *q) {
  if (!q) return;
  if (q->fd >= 0) close(q->fd);
  pthread_mutex_destroy(&q->mu);
  free(q->ids);
  free(q->statuses);
  free(q);
}

/* ---- asyncio: the engine on the event loop's thread ---- */
/* The libuv loop's backend (epoll) fd: readable whenever the loop has I/O to run. */
static int tern_py_local_fd(tern_py_local *l) {
  return uv_backend_fd(&l->loop);
}
/* Submits req to complete into q under id (on the event loop's thread; the loop is not
 * running: the engine starts req when its loop next runs, so the caller schedules a run). */
static int tern_py_aio_submit(tern_py_local *l, tern_py_queue *q, tern_request_t *req,
                              int64_t id) {
  int rc = tern_py_queue_arm(q, req, id);
  if (rc == 0) rc = tern_engine_submit(l->engine, req);
  return rc;
}
/* A request with the client's defaults only: made from the template, armed and submitted in
 * one call (*out: the request, the caller's to free; NULL and a negative code when refused). */
static int tern_py_aio_go(tern_py_local *l, tern_py_queue *q, const tern_py_template *t,
                          const char *url, const char *method, int64_t id,
                          tern_request_t **out) {
  *out = NULL;
  tern_request_t *req = NULL;
  int rc = tern_py_make_plain(t, url, method, &req);
  if (rc) return rc;
  rc = tern_py_aio_submit(l, q, req, id);
  if (rc) {
    tern_request_free(req);
    return rc < 0 ? rc : -1;
  }
  *out = req;
  return 0;
}
/* Runs the loop without waiting (again while it has work ready at once or descriptors to add
 * to its epoll set, a few times at most), then takes up to cap completions; *timeout_ms: when the loop next needs to run for a timer
 * (-1: no timer; 0: at once). */
/* Whether descriptors wait to be added to (or changed in) the loop's epoll set: libuv does
 * that at the start of its next poll, so until then the backend fd cannot become readable for
 * them. Read from the loop's watcher queue, empty when its first link points at itself (the
 * same layout in libuv's QUEUE and uv__queue). */
static int tern_py_loop_has_new_watchers(uv_loop_t *loop) {
  void *first;
  memcpy(&first, &loop->watcher_queue, sizeof first);
  return first != (void *)&loop->watcher_queue;
}
static size_t tern_py_aio_run(tern_py_local *l, tern_py_queue *q, int64_t *ids, int *statuses,
                              size_t cap, int *timeout_ms) {
  int timeout = 0;
  for (int i = 0; i < 8; i++) {
    uv_run(&l->loop, UV_RUN_NOWAIT);
    timeout = uv_backend_timeout(&l->loop);
    if (timeout != 0 && !tern_py_loop_has_new_watchers(&l->loop)) break;
  }
  *timeout_ms = timeout;
  return tern_py_queue_take(q, ids, statuses, cap);
}

/* The latest report of one phase (0 upload, 1 download) if it changed since the last take. */
static int tern_py_waiter_take_progress(tern_py_waiter *w, int index, int *percent,
                                        uint64_t *done, uint64_t *total) {
  if (index < 0 || index > 1) return 0;
  pthread_mutex_lock(&w->mu);
  int changed = w->changed[index];
  w->changed[index] = 0;
  *percent = w->percent[index];
  *done = w->bytes[index];
  *total = w->total[index];
  pthread_mutex_unlock(&w->mu);
  return changed;
}
"""

CDEF = (CDEF.replace("@RESPONSE_STRUCT@", RESPONSE_STRUCT)
        .replace("@TEMPLATE_STRUCT@", TEMPLATE_STRUCT).replace("@CALL_STRUCT@", CALL_STRUCT))
SOURCE = (SOURCE.replace("@RESPONSE_STRUCT@", RESPONSE_STRUCT)
          .replace("@TEMPLATE_STRUCT@", TEMPLATE_STRUCT).replace("@CALL_STRUCT@", CALL_STRUCT))


def _pkg_config(*args: str, package: str = "tern") -> list[str]:
    try:
        out = subprocess.run(
            ["pkg-config", *args, package], check=True, capture_output=True, text=True
        ).stdout
    except FileNotFoundError:
        sys.exit("tern: pkg-config is not installed; it is needed to find libtern (tern.pc)")
    except subprocess.CalledProcessError as exc:
        sys.exit(
            "tern: pkg-config cannot find libtern (tern.pc): build and install the library first "
            "(cmake --install build/release --prefix PREFIX) and put PREFIX/lib/pkgconfig in "
            f"PKG_CONFIG_PATH.\npkg-config said: {exc.stderr.strip()}"
        )
    return shlex.split(out)


def _builder() -> FFI:
    # libuv too: a synchronous client runs its engine's loop on the calling thread.
    cflags = _pkg_config("--cflags") + _pkg_config("--cflags", package="libuv")
    libs = _pkg_config("--libs") + _pkg_config("--libs", package="libuv")
    include_dirs = [f[2:] for f in cflags if f.startswith("-I")]
    library_dirs = [f[2:] for f in libs if f.startswith("-L")]
    libraries = [f[2:] for f in libs if f.startswith("-l")]
    extra_link = [f for f in libs if not f.startswith(("-L", "-l"))]
    ffi = FFI()
    ffi.cdef(CDEF)
    ffi.set_source(
        "tern._tern",
        SOURCE,
        include_dirs=include_dirs,
        library_dirs=library_dirs,
        libraries=libraries + ["pthread"],
        runtime_library_dirs=[os.path.abspath(d) for d in library_dirs],
        extra_link_args=extra_link,
        extra_compile_args=[f for f in cflags if not f.startswith("-I")],
    )
    return ffi


ffibuilder = _builder()

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
