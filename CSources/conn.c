/* A connection: a socket with its one I/O buffer. Timers, reading into the buffer, writing
 * (through TLS when the connection has it), close; connect.c opens it.
 *
 * The buffer (c->buf, c->cap bytes) is allocated once. Response bytes are read into it, the
 * head is parsed in place, body bytes go from it straight to the request's sink, and file or
 * callback request bodies are staged in it piece by piece; reading pauses while a request body
 * is staged there, so the two uses never overlap.
 *
 * What happens on the connection is the protocol's business (http1.c): it installs a table of
 * events at open, and this file reports through it. */
#include "internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

static void on_write(uv_write_t *wr, int status);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_timer(uv_timer_t *t);
static int flush_tls(tern__conn *c);
static void drop_debts(tern__conn *c);
static bool threshold_watched(tern__conn *c, uint64_t now);

void tern__conn_free_addrs(tern__conn *c) {
  if (c->addrs == NULL) return;
  if (c->own_addrs) {
    tern__addrs_free(c->addrs);
  } else {
    uv_freeaddrinfo(c->addrs);
  }
  c->addrs = c->next_addr = NULL;
}

void tern__conn_free_if_done(tern__conn *c) {
  if (c->pending > 0) return;
  tern_engine_t *eng = c->engine;
  tern__conn_free_addrs(c);
  drop_debts(c);
  tern__tls_conn_free(c);
  free(c->buf);
  free(c);
  TERN__STAT_SUB(eng, TERN_STAT_CONNECTIONS_OPEN, 1);
  eng->ops->handle_gone(eng);
}

static void on_handle_closed(uv_handle_t *h) {
  tern__conn *c = h->data;
  c->pending--;
  tern__conn_free_if_done(c);
}

/* ---- timers ---- */

/* Sets the timer to fire `ms` from the loop's now. */
static void start_timer(tern__conn *c, uint64_t ms) {
  uv_timer_start(&c->timer, on_timer, ms, 0);
  c->timer_fires = uv_now(c->engine->loop) + ms;
}

/* The phase's limit runs from now: it ends at timer_due. A keep-alive exchange sets one three
 * times per request (the head, the body, idle in the pool, each later than the last) and drops
 * it once (the connection leaves the pool); starting and stopping the timer each time cost
 * about 500 instructions per request. So a timer that fires no later than the new limit is
 * left as it is, and a limit dropped leaves the timer to fire for nothing: on_timer starts it
 * again for what is left of the limit of the moment. */
void tern__conn_arm_timer(tern__conn *c) {
  if (c->timer_ms == 0 || c->timer_kind == TERN__TIMER_NONE) {
    c->timer_due = 0;
    return;
  }
  c->timer_due = uv_now(c->engine->loop) + c->timer_ms;
  if (uv_is_active((uv_handle_t *)&c->timer) && c->timer_fires <= c->timer_due) return;
  start_timer(c, c->timer_ms);
}

void tern__conn_set_timer(tern__conn *c, int kind, uint64_t ms) {
  /* From now, not from when this loop iteration began (a busy one would cut the limit short). */
  uv_update_time(c->engine->loop);
  c->timer_kind = kind;
  c->timer_ms = ms;
  c->last_activity = uv_now(c->engine->loop);
  tern__conn_arm_timer(c);
}

void tern__conn_wait(tern__conn *c, int kind, uint64_t ms) {
  c->timer_kind = kind;
  c->timer_due = 0; /* fires when set: the protocol's own timer (events->timer) checks */
  start_timer(c, ms);
}

/* Starts the timer for `ms` more of the current limit (on_timer: the limit goes on). */
static void extend_timer(tern__conn *c, uint64_t ms) {
  start_timer(c, ms);
  c->timer_due = c->timer_fires;
}

/* Whether the socket holds received bytes not read yet. */
static bool bytes_waiting(tern__conn *c) {
  uv_os_fd_t fd;
  int n = 0;
  return uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

static void on_timer(uv_timer_t *t) {
  tern__conn *c = t->data;
  tern_engine_t *eng = c->engine;
  uint64_t now = uv_now(eng->loop);
  if (c->timer_kind == TERN__TIMER_NONE) return; /* a limit dropped since it was set */
  if (c->timer_kind == TERN__TIMER_BODY && c->read_threshold && threshold_watched(c, now)) return;
  /* A phase with no limit: the timer was left running by an earlier phase (arm_timer leaves
   * it; the read threshold's watch sets it) and fired for nothing. Without this test, a
   * reused connection's request with no head limit failed at the idle timer's old deadline
   * with "no response head within 0 ms" (seen after a read threshold's 100 ms watch). */
  bool limit = c->timer_kind == TERN__TIMER_CONNECT || c->timer_kind == TERN__TIMER_HEADERS ||
               c->timer_kind == TERN__TIMER_BODY || c->timer_kind == TERN__TIMER_IDLE;
  if (limit && c->timer_ms == 0) return;
  if (c->timer_due > now) { /* set for an earlier limit (arm_timer) */
    start_timer(c, c->timer_due - now);
    return;
  }
  tern__engine_enter(eng);
  tern_request_t *req = tern__conn_first(c);
  const char *host = req ? req->url.hostport : c->origin->host;
  switch (c->timer_kind) {
    case TERN__TIMER_CONNECT: {
      /* Name the step that hung, and the proxy when it was the proxy that did not answer. */
      const tern__origin *o = c->origin;
      const char *step = c->state == TERN__CONN_HANDSHAKE ? "TLS handshake with"
                         : c->state == TERN__CONN_SOCKS   ? "SOCKS handshake for"
                         : c->state == TERN__CONN_TUNNEL  ? "CONNECT to"
                                                          : "connect to";
      bool at_proxy = o->proxy_host && c->state != TERN__CONN_HANDSHAKE;
      if (req && at_proxy)
        tern__request_set_error(
            req, TERN_ECONNECTTIMEOUT, "%s %s through proxy %s:%u: timed out after %llu ms", step,
            host, o->proxy_host, (unsigned)o->proxy_port, (unsigned long long)c->timer_ms);
      else if (req)
        tern__request_set_error(req, TERN_ECONNECTTIMEOUT, "%s %s: timed out after %llu ms", step,
                                host, (unsigned long long)c->timer_ms);
      tern__conn_fail(c, NULL, TERN_ECONNECTTIMEOUT);
      break;
    }
    case TERN__TIMER_HEADERS:
      /* the head is here, just not read yet; or reading waits for a bandwidth budget */
      if ((c->reading && bytes_waiting(c)) || c->bw_wait[TERN__RECV] || c->bw_wait[TERN__SEND]) {
        extend_timer(c, c->timer_ms);
        break;
      }
      if (req)
        tern__request_set_error(req, TERN_EHEADERTIMEOUT, "%s: no response head within %llu ms",
                                host, (unsigned long long)c->timer_ms);
      tern__conn_fail(c, NULL, TERN_EHEADERTIMEOUT);
      break;
    case TERN__TIMER_BODY: {
      /* Reads only stamp last_activity; the timer is re-armed lazily for the remainder. */
      uint64_t idle = uv_now(eng->loop) - c->last_activity;
      if (idle < c->timer_ms) {
        extend_timer(c, c->timer_ms - idle);
        break;
      }
      /* Silence while a bandwidth budget holds the connection back is ours, not the peer's. */
      if (c->bw_wait[TERN__RECV] || c->bw_wait[TERN__SEND]) {
        extend_timer(c, c->timer_ms);
        break;
      }
      /* libuv runs timers before it polls: after this process was not scheduled for a while,
       * the limit may pass with the server's bytes already waiting in the socket. Those are
       * activity, not a stall. */
      if (c->reading && bytes_waiting(c)) {
        c->last_activity = uv_now(eng->loop);
        extend_timer(c, c->timer_ms);
        break;
      }
      if (req)
        tern__request_set_error(req, TERN_EBODYTIMEOUT, "%s: body stalled for %llu ms", host,
                                (unsigned long long)c->timer_ms);
      tern__conn_fail(c, NULL, TERN_EBODYTIMEOUT);
      break;
    }
    case TERN__TIMER_IDLE: tern__conn_close(c); break;
    case TERN__TIMER_NONE: break;
    default: c->events->timer(c); break;
  }
  tern__engine_leave(eng);
}

/* ---- bandwidth budgets (bandwidth.c keeps the buckets; this is the waiting) ---- */

/* The budgets a request's bytes go through: the engine's, its group's, its own (sending). */
static void budgets_of(const tern__conn *c, const tern_request_t *req, int dir,
                       tern_bandwidth_t *out[3]) {
  out[0] = c->engine->bw;
  out[1] = req ? req->bandwidth : NULL;
  out[2] = req && dir == TERN__SEND ? req->send_budget : NULL;
}

/* The most one read or write should move under the request's budgets. */
static size_t piece_of(const tern__conn *c, const tern_request_t *req, int dir) {
  tern_bandwidth_t *bws[3];
  budgets_of(c, req, dir, bws);
  size_t piece = tern__budgets_piece(bws, dir), cap = SIZE_MAX;
  /* A request's receive cap (http1.c) pauses after reads, so it sizes them (HTTP/2: windows). */
  if (dir == TERN__RECV && req && !c->h2) cap = tern__rate_piece(req->max_recv_speed);
  return piece < cap ? piece : cap;
}

size_t tern__conn_send_piece(const tern__conn *c, const tern_request_t *req) {
  return piece_of(c, req, TERN__SEND);
}

/* Debits n bytes from each budget; returns whether one is owed (its debt holds the budget). */
static bool debit(tern__conn *c, tern_request_t *req, int dir, size_t n) {
  tern_bandwidth_t *bws[3];
  budgets_of(c, req, dir, bws);
  return tern__debts_add(c->debt[dir], bws, dir, n);
}

static uint64_t owed_ns(tern__conn *c, int dir) { return tern__debts_owed(c->debt[dir], dir); }

static void drop_debts(tern__conn *c) {
  tern__debts_drop(c->debt[TERN__RECV]);
  tern__debts_drop(c->debt[TERN__SEND]);
}

static void on_bw_timer(uv_timer_t *t);

/* Wakes when the first waiting direction may go on, and at least every 0.1 s, so a budget
 * changed meanwhile (from any thread) takes effect soon. */
static void arm_bw_timer(tern__conn *c) {
  uint64_t next = UINT64_MAX;
  for (int dir = 0; dir < 2; dir++) {
    uint64_t ns = c->bw_wait[dir] ? owed_ns(c, dir) : UINT64_MAX;
    if (ns < next) next = ns;
  }
  uint64_t ms = next / 1000000 + 1;
  uv_timer_start(&c->bw_timer, on_bw_timer, ms < 100 ? ms : 100, 0);
}

static void on_bw_timer(uv_timer_t *t) {
  tern__conn *c = t->data;
  if (c->state == TERN__CONN_CLOSING) return;
  tern_engine_t *eng = c->engine;
  tern__engine_enter(eng);
  if (c->bw_wait[TERN__RECV] && owed_ns(c, TERN__RECV) == 0) {
    c->bw_wait[TERN__RECV] = false;
    c->last_activity = uv_now(eng->loop);
    /* The per-request rate cap (http1.c) resumes reading itself when its own wait ends. */
    if (c->timer_kind != TERN__TIMER_THROTTLE) tern__conn_start_reading(c);
  }
  if (c->bw_wait[TERN__SEND] && owed_ns(c, TERN__SEND) == 0) {
    c->bw_wait[TERN__SEND] = false;
    c->writing = false;
    c->last_activity = uv_now(eng->loop);
    c->events->written(c, c->bw_write_status);
  }
  if (c->state != TERN__CONN_CLOSING && (c->bw_wait[TERN__RECV] || c->bw_wait[TERN__SEND]))
    arm_bw_timer(c);
  tern__engine_leave(eng);
}

/* ---- the read threshold ---- */

/* A large body of known length is read in large pieces: the kernel wakes the loop only once
 * THRESHOLD bytes wait (or the window is nearly full, or the peer closed), not for every few
 * segments. Each wake-up costs the sender too (on loopback the sending core delivers the
 * segment and wakes the reader). Only bytes certain to come count: the body still owed, less
 * what is already read but not yet parsed and one TLS record that may be half in OpenSSL's
 * hands; below that the default (1 byte) returns, so the last bytes are never waited for.
 * 128 KiB: 256 gained no more over TLS and cost 4.5% on a download to a file, where the
 * client's own work bounds the speed (64 KiB: less gained over TLS, the same cost). While a
 * threshold is set, the body timer also fires every THRESHOLD_WATCH_MS: bytes that waited
 * below it that long are read as they are (the sender paused). */
enum { THRESHOLD = 128 * 1024, THRESHOLD_SLACK = 20 * 1024, THRESHOLD_WATCH_MS = 100 };

static void set_read_threshold(tern__conn *c, bool on) {
  uv_os_fd_t fd;
  int v = on ? THRESHOLD : 1;
  if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 &&
      setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v) == 0)
    c->read_threshold = on;
}

/* Brings the body timer's next firing within THRESHOLD_WATCH_MS (its limit stays timer_due). */
static void watch_threshold(tern__conn *c) {
  uint64_t next = uv_now(c->engine->loop) + THRESHOLD_WATCH_MS;
  if (!uv_is_active((uv_handle_t *)&c->timer) || c->timer_fires > next)
    start_timer(c, THRESHOLD_WATCH_MS);
}

/* The body timer fired while a threshold is set. Bytes that waited below it (for the watch's
 * period, or until the limit is due) are let through: the threshold goes, and on_timer counts
 * them as activity. Returns true when the firing was the watch's alone (the timer is set
 * again), false when on_timer is to go on with the body limit. */
static bool threshold_watched(tern__conn *c, uint64_t now) {
  bool limit_due = c->timer_ms != 0 && c->timer_due <= now;
  if ((limit_due || now - c->last_activity >= THRESHOLD_WATCH_MS) && bytes_waiting(c)) {
    set_read_threshold(c, false);
    return false;
  }
  if (limit_due) return false;
  if (c->timer_due > now) start_timer(c, c->timer_due - now);
  watch_threshold(c);
  return true;
}

/* After a read. `filled`: it filled the room it was given, so bytes come faster than they are
 * read (a slow sender never gets a threshold: its bytes are reported as they come). The cheap
 * tests come first: most reads end a small response. */
static void tune_read_threshold(tern__conn *c, bool filled) {
  bool want = (filled || c->read_threshold) && c->rstate == TERN__RESP_LENGTH && !c->h2 &&
              c->state == TERN__CONN_ACTIVE && c->timer_kind == TERN__TIMER_BODY &&
              c->body_left >= (uint64_t)THRESHOLD + c->len + THRESHOLD_SLACK &&
              /* not under a receive-rate cap: its paced small reads are what it asks for */
              piece_of(c, tern__conn_first(c), TERN__RECV) == SIZE_MAX;
  if (want == c->read_threshold) return;
  set_read_threshold(c, want);
  if (c->read_threshold) watch_threshold(c);
}

/* ---- reading ---- */

static bool receive_paused(const tern__conn *c) {
  /* A pause holds back response bytes, not the handshakes before them; HTTP/2 pauses a stream
   * by its window, not the connection. */
  if (c->h2 || c->state != TERN__CONN_ACTIVE) return false;
  tern_request_t *req = tern__conn_first(c);
  return req != NULL && atomic_load(&req->recv_paused);
}

void tern__conn_start_reading(tern__conn *c) {
  if (c->reading || c->state == TERN__CONN_CLOSING || receive_paused(c) || c->bw_wait[TERN__RECV])
    return;
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0) c->reading = true;
}

void tern__conn_stop_reading(tern__conn *c) {
  if (!c->reading) return;
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->reading = false;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  tern__conn *c = h->data;
  size_t room = c->rcap - c->len, piece = piece_of(c, tern__conn_first(c), TERN__RECV);
  /* On TLS, ciphertext lands past the plaintext OpenSSL may still write before reading it, so
   * OpenSSL reads it in place (tls.c); with no room for that, at len (OpenSSL copies it). */
  size_t gap = c->ssl ? tern__tls_read_gap(c) : 0;
  if (gap >= room) gap = 0;
  room -= gap;
  *buf = uv_buf_init(c->buf + c->len + gap, (unsigned)(room < piece ? room : piece));
}

void tern__conn_consume(tern__conn *c, size_t n) {
  if (n < c->len) memmove(c->buf, c->buf + n, c->len - n);
  c->len -= n;
}

/* After OpenSSL ran: its handshake or alert bytes go out, and a finished handshake is
 * reported. Returns `r` or a TERN_E* code. */
static int after_tls(tern__conn *c, int r) {
  if (r >= 0) {
    int f = flush_tls(c);
    if (f) return f;
  }
  if (r >= 0 && c->state == TERN__CONN_HANDSHAKE && !c->handshaking) {
    c->state = TERN__CONN_ACTIVE;
    c->events->ready(c);
  }
  return r;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  tern__conn *c = s->data;
  if (c->state == TERN__CONN_CLOSING) return;
  tern_engine_t *eng = c->engine;
  tern__engine_enter(eng);
  if (nread > 0) {
    c->last_activity = uv_now(eng->loop);
    TERN__STAT_ADD(eng, TERN_STAT_BYTES_RECEIVED, nread);
    bool owe = debit(c, tern__conn_first(c), TERN__RECV, (size_t)nread);
    int tls = 0;
    if (c->ssl) {
      tls = after_tls(c,
                      tern__tls_recv_at(c, (size_t)(buf->base - (c->buf + c->len)), (size_t)nread));
    } else {
      c->len += (size_t)nread;
    }
    if (c->state != TERN__CONN_CLOSING) c->events->received(c, tls);
    if (c->state != TERN__CONN_CLOSING) tune_read_threshold(c, (size_t)nread == buf->len);
    if (owe && c->state != TERN__CONN_CLOSING) { /* the bytes are handled; more wait */
      tern__conn_stop_reading(c);
      c->bw_wait[TERN__RECV] = true;
      arm_bw_timer(c);
    }
  } else if (nread == UV_ENOBUFS) {
    tern__conn_stop_reading(c);
  } else if (nread < 0) {
    c->events->eof(c, (int)nread);
  }
  tern__engine_leave(eng);
}

/* ---- TLS ---- */

int tern__conn_start_tls(tern__conn *c) {
  tern__conn_start_reading(c);
  return after_tls(c, tern__tls_start(c));
}

int tern__conn_tls_more(tern__conn *c) { return after_tls(c, tern__tls_recv(c, 0)); }

static void on_tls_written(uv_write_t *wr, int status) {
  tern__conn *c = tern__container_of(wr, tern__conn, tls_wreq);
  tern__tls_output_done(c);
  if (c->state == TERN__CONN_CLOSING) return;
  if (status < 0) {
    tern_engine_t *eng = c->engine;
    tern__engine_enter(eng);
    tern_request_t *req = tern__conn_first(c);
    if (req)
      tern__request_set_error(req, TERN_ETLSHANDSHAKE, "TLS handshake with %s: send failed: %s",
                              req->url.hostport, uv_strerror(status));
    tern__conn_fail(c, NULL, TERN_ETLSHANDSHAKE);
    tern__engine_leave(eng);
  } else if (c->ssl) {
    int r = flush_tls(c); /* bytes that came while this write was under way */
    if (r) tern__conn_fail(c, NULL, r);
  }
}

/* Sends handshake and alert bytes that OpenSSL produced outside a request write. Only one such
 * write is under way at a time; anything newer waits and leaves when it ends (or with the next
 * request write, which takes all of OpenSSL's output in order). */
static int flush_tls(tern__conn *c) {
  uv_buf_t b;
  int t = c->ssl ? tern__tls_take_output(c, &b) : 0;
  if (t <= 0) return t;
  if (uv_write(&c->tls_wreq, (uv_stream_t *)&c->tcp, &b, 1, on_tls_written) != 0) {
    tern__tls_output_done(c);
    return TERN_ETLSHANDSHAKE;
  }
  return 0;
}

/* ---- writing ---- */

/* Sends `n` bytes in nb <= TERN__MAX_WRITE_BUFS pieces. Inside an engine callback they are
 * first written at once (uv_try_write): when they all go, no write request is queued, and
 * the write's end is reported when the outermost callback returns (tern__conn_report_writes),
 * as libuv would report it on its next iteration, but without the epoll_ctl that libuv makes
 * per queued write (it stops watching for writability when its queue empties) and without the
 * trip through its queues. What the socket does not take goes through uv_write, and so does a
 * write started by the end of another (the next piece of a body, a pipelined head): the loop
 * polls between two pieces, so an upload never holds it and an early answer is read while the
 * body goes. */
static int send_bytes(tern__conn *c, const uv_buf_t *bufs, unsigned nb, size_t n) {
  tern_engine_t *eng = c->engine;
  if (eng->depth == 0 || eng->reporting_writes || n > INT_MAX || nb > TERN__MAX_WRITE_BUFS)
    return uv_write(&c->write_req, (uv_stream_t *)&c->tcp, bufs, nb, on_write);
  int k = uv_try_write((uv_stream_t *)&c->tcp, bufs, nb);
  if (k < 0) k = 0; /* EAGAIN, or an error that uv_write reports through on_write */
  if ((size_t)k == n) {
    c->wrote = true;
    tern__list_insert_tail(&eng->wrote, &c->wrote_node);
    return 0;
  }
  /* The rest: the pieces from the first one not wholly written, that one cut at its end. */
  uv_buf_t rest[TERN__MAX_WRITE_BUFS];
  unsigned i = 0, m = 0;
  size_t skip = (size_t)k;
  while (skip >= bufs[i].len) skip -= bufs[i++].len; /* k < n: some piece is left */
  for (; i < nb; i++, skip = 0) rest[m++] = uv_buf_init(bufs[i].base + skip, bufs[i].len - skip);
  return uv_write(&c->write_req, (uv_stream_t *)&c->tcp, rest, m, on_write);
}

int tern__conn_write(tern__conn *c, tern_request_t *req, const uv_buf_t *bufs, unsigned nb) {
  int r;
  size_t n = 0;
  if (c->ssl) {
    uv_buf_t out;
    if ((r = tern__tls_encrypt(c, bufs, nb, &out)) != 0) return r;
    n = out.len;
    r = send_bytes(c, &out, 1, n);
  } else {
    for (unsigned i = 0; i < nb; i++) n += bufs[i].len;
    r = send_bytes(c, bufs, nb, n);
  }
  if (r) {
    int err = tern__map_uv_error(r, TERN_EIO);
    if (req) tern__request_set_error(req, err, "send to %s: %s", req->url.hostport, uv_strerror(r));
    return err;
  }
  c->writing = true;
  TERN__STAT_ADD(c->engine, TERN_STAT_BYTES_SENT, n);
  (void)debit(c, req, TERN__SEND, n); /* on_write waits if the debt is not paid by then */
  return 0;
}

static void write_ended(tern__conn *c, int status);

static void on_write(uv_write_t *wr, int status) {
  write_ended(tern__container_of(wr, tern__conn, write_req), status);
}

void tern__conn_report_writes(tern_engine_t *eng) {
  while (!tern__list_empty(&eng->wrote)) {
    tern__conn *c = tern__container_of(eng->wrote.next, tern__conn, wrote_node);
    tern__list_remove(&c->wrote_node);
    c->wrote = false;
    write_ended(c, 0);
  }
}

void tern__conn_went_idle(tern__conn *c) {
  if (c->ssl == NULL || c->went_idle) return;
  c->went_idle = true;
  tern__list_insert_tail(&c->engine->went_idle, &c->idle_node);
}

void tern__conn_trim_idle(tern_engine_t *eng) {
  while (!tern__list_empty(&eng->went_idle)) {
    tern__conn *c = tern__container_of(eng->went_idle.next, tern__conn, idle_node);
    tern__list_remove(&c->idle_node);
    c->went_idle = false;
    if (c->state == TERN__CONN_IDLE) tern__tls_release_buffers(c, false);
  }
}

static void write_ended(tern__conn *c, int status) {
  if (c->ssl) tern__tls_write_done(c);
  if (c->state == TERN__CONN_CLOSING) {
    c->writing = false;
    return;
  }
  tern_engine_t *eng = c->engine;
  if (status >= 0) c->last_activity = uv_now(eng->loop);
  if (status >= 0 && owed_ns(c, TERN__SEND) > 0) {
    /* Over a sending budget: the write ends (and the next piece goes) once it is paid. */
    c->bw_wait[TERN__SEND] = true;
    c->bw_write_status = status;
    arm_bw_timer(c);
    return;
  }
  c->writing = false;
  tern__engine_enter(eng);
  bool outer = eng->reporting_writes;
  eng->reporting_writes = true; /* what this end sends goes through uv_write (send_bytes) */
  c->events->written(c, status);
  eng->reporting_writes = outer;
  tern__engine_leave(eng);
}

/* ---- the end ---- */

void tern__conn_close(tern__conn *c) {
  if (c->state == TERN__CONN_CLOSING) return;
  tern_engine_t *eng = c->engine;
  if (c->state == TERN__CONN_IDLE) TERN__STAT_SUB(eng, TERN_STAT_CONNECTIONS_IDLE, 1);
  c->state = TERN__CONN_CLOSING;
  tern__log(eng, TERN_LOG_DEBUG, NULL, "connection #%llu to %s port %u closed after %u response(s)",
            (unsigned long long)c->id, c->origin->host, (unsigned)c->origin->port, c->served);
  tern__list_remove(&c->node);
  if (c->wrote) { /* its end is not reported: nothing more happens on this connection */
    c->wrote = false;
    tern__list_remove(&c->wrote_node);
    c->writing = false;
  }
  if (c->went_idle) {
    c->went_idle = false;
    tern__list_remove(&c->idle_node);
  }
  uv_timer_stop(&c->timer);
  uv_close((uv_handle_t *)&c->timer, on_handle_closed);
  uv_close((uv_handle_t *)&c->bw_timer, on_handle_closed);
  if (!c->tcp_closing) {
    c->tcp_closing = true;
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
  }
  if (c->gai_live) uv_cancel((uv_req_t *)&c->gai);
  if (c->events->closing) c->events->closing(c);
  /* Requests still queued here never got a response byte: they go to other connections. */
  while (!tern__list_empty(&c->requests)) {
    tern_request_t *req = tern__conn_first(c);
    tern__list_remove(&req->node);
    c->nrequests--;
    tern__owner_redispatch(req, TERN_ECONNRESET, false);
  }
  eng->ops->conn_gone(c->origin);
}

void tern__conn_take_idle(tern__conn *c) {
  if (c->state != TERN__CONN_IDLE) return;
  TERN__STAT_SUB(c->engine, TERN_STAT_CONNECTIONS_IDLE, 1);
  tern__list_remove(&c->node);
  tern__list_insert_tail(&c->origin->busy, &c->node);
  c->state = TERN__CONN_ACTIVE;
  c->timer_kind = TERN__TIMER_NONE; /* the idle timer, if it fires, finds nothing to do */
  c->timer_due = 0;
}

void tern__conn_abort(tern__conn *c, tern_request_t *req, int err) {
  if (c->events->abort)
    c->events->abort(c, req, err);
  else
    tern__conn_fail(c, req, err);
}

void tern__conn_apply_pause(tern_request_t *req) {
  if (req->conn && req->conn->events->pause) req->conn->events->pause(req);
}

void tern__conn_resume_send(tern_request_t *req) {
  if (req->conn && req->conn->events->resume_send) req->conn->events->resume_send(req);
}

void tern__conn_fail(tern__conn *c, tern_request_t *victim, int err) {
  c->failed = true;
  if (c->events->fail) {
    c->events->fail(c, victim, err);
    return;
  }
  if (victim == NULL) victim = tern__conn_first(c);
  /* A reused connection that the server had already closed fails before any response byte:
   * the request never reached the server's application, so one silent retry is safe when it
   * is idempotent and its body can be sent again. */
  bool stale = victim && victim == tern__conn_first(c) && c->served > 0 &&
               victim->resp.status == 0 && c->len == 0 && c->rstate == TERN__RESP_HEAD &&
               (err == TERN_EEMPTYREPLY || err == TERN_ECONNRESET) && victim->idempotent &&
               tern__request_can_replay(victim);
  if (victim) {
    tern__list_remove(&victim->node);
    c->nrequests--;
  }
  tern__conn_close(c); /* the others are redispatched as bystanders */
  if (victim == NULL) return;
  if (stale) {
    tern__log(victim->engine, TERN_LOG_WARN, victim,
              "pooled connection to %s was closed by the server; retrying %s %s on a new one",
              victim->url.hostport, victim->method, victim->url.target);
    tern__owner_redispatch(victim, err, true);
  } else {
    tern__owner_complete(victim, err);
  }
}
