/* HTTP/2 on a connection (RFC 9113), with libnghttp2 used sans I/O: the bytes the connection
 * reads (decrypted already) are fed to the session, and the frames it produces are staged in
 * the upper half of the connection's one buffer and written with one write at a time. Many
 * requests share the connection as streams; each one's receive window opens only as its sink
 * takes the bytes, so a paused stream holds back no other. nghttp2's callbacks only record:
 * streams that end are settled (completed, retried, or sent on their next hop) once nghttp2
 * has returned, so no callback ever re-enters the session or closes the connection under it.
 * Stream-level pieces (fields, bodies, heads) are http2_stream.c's. */
#include "http2.h"

#include <stdio.h>

static void settle(tern__conn *c);
static void settle_loop(tern__conn *c);
static void arm_streams_timer(tern__conn *c, uint64_t at);

/* ---- nghttp2's callbacks: they record, never complete ---- */

static ssize_t on_send(nghttp2_session *ngh, const uint8_t *data, size_t len, int flags,
                       void *user) {
  (void)ngh;
  (void)flags;
  tern__conn *c = user;
  size_t room = c->cap - c->rcap - c->h2->out_len;
  if (room == 0) return NGHTTP2_ERR_WOULDBLOCK;
  size_t n = len < room ? len : room;
  memcpy(c->buf + c->rcap + c->h2->out_len, data, n);
  c->h2->out_len += n;
  return (ssize_t)n;
}

/* The stream's request leaves the connection's list for the finished one. */
static void finish(tern__conn *c, tern_request_t *req, uint32_t code) {
  req->h2.close_code = code;
  nghttp2_session_set_stream_user_data(c->h2->ngh, req->h2.stream_id, NULL);
  tern__list_remove(&req->node);
  c->nrequests--;
  tern__list_insert_tail(&c->h2->finished, &req->node);
}

static int on_stream_close(nghttp2_session *ngh, int32_t sid, uint32_t code, void *user) {
  tern__conn *c = user;
  c->h2->nstreams--;
  tern_request_t *req = nghttp2_session_get_stream_user_data(ngh, sid);
  if (req) finish(c, req, code);
  return 0;
}

static int on_header(nghttp2_session *ngh, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *user) {
  (void)flags;
  if (f->hd.type != NGHTTP2_HEADERS) return 0;
  tern_request_t *req = nghttp2_session_get_stream_user_data(ngh, f->hd.stream_id);
  if (req == NULL || req->error || req->h2.head) return 0; /* trailers are not kept */
  req->h2.got_frames = true;
  req->h2.last_ms = uv_now(((tern__conn *)user)->engine->loop);
  if (tern__h2_field(user, req, name, nl, value, vl) == 0) return 0;
  nghttp2_submit_rst_stream(ngh, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_CANCEL);
  return 0;
}

static int on_frame_recv(nghttp2_session *ngh, const nghttp2_frame *f, void *user) {
  tern__conn *c = user;
  if (f->hd.type == NGHTTP2_GOAWAY) {
    c->h2->goaway = true;
    c->no_more = true; /* streams above its last id are closed as refused: they go elsewhere */
    return 0;
  }
  if (f->hd.type == NGHTTP2_RST_STREAM) {
    tern_request_t *req = nghttp2_session_get_stream_user_data(ngh, f->hd.stream_id);
    if (req) req->h2.peer_reset = true;
    return 0;
  }
  if (f->hd.type != NGHTTP2_HEADERS) return 0;
  tern_request_t *req = nghttp2_session_get_stream_user_data(ngh, f->hd.stream_id);
  if (req == NULL || req->error) return 0;
  req->h2.got_frames = true;
  req->h2.last_ms = uv_now(c->engine->loop);
  if (tern__h2_head(c, req) != 0)
    nghttp2_submit_rst_stream(ngh, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_CANCEL);
  else if (req->h2.head && req->timeouts[TERN_TIMEOUT_BODY])
    arm_streams_timer(c, req->h2.last_ms + req->timeouts[TERN_TIMEOUT_BODY]);
  return 0;
}

static int on_data(nghttp2_session *ngh, uint8_t flags, int32_t sid, const uint8_t *data,
                   size_t len, void *user) {
  (void)flags;
  nghttp2_session_consume_connection(ngh, len); /* the connection's window is never held */
  tern_request_t *req = nghttp2_session_get_stream_user_data(ngh, sid);
  if (req == NULL || req->error) return 0;
  req->h2.got_frames = true;
  req->h2.last_ms = uv_now(((tern__conn *)user)->engine->loop);
  int r = req->h2.head ? tern__request_deliver(req, (const char *)data, len) : TERN_EPROTO;
  if (r == 0) r = tern__request_progress_download(req, false);
  if (r) {
    if (!req->error)
      tern__request_set_error(req, r, "%s: body: %s", req->url.hostport, tern_strerror(r));
    nghttp2_submit_rst_stream(ngh, NGHTTP2_FLAG_NONE, sid, NGHTTP2_CANCEL);
    return 0;
  }
  if (atomic_load(&req->recv_paused))
    req->h2.unconsumed += len; /* its window opens when the caller resumes */
  else
    nghttp2_session_consume_stream(ngh, sid, len);
  return 0;
}

static int on_frame_send(nghttp2_session *ngh, const nghttp2_frame *f, void *user) {
  tern__conn *c = user;
  if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) return 0;
  tern_request_t *req = nghttp2_session_get_stream_user_data(ngh, f->hd.stream_id);
  if (req == NULL) return 0;
  req->h2.last_ms = uv_now(c->engine->loop);
  if (req->send == TERN__SEND_NOTHING) req->send = TERN__SEND_BODY;
  if (f->hd.flags & NGHTTP2_FLAG_END_STREAM) {
    req->send = TERN__SEND_DONE;
    tern__request_mark(req, TERN_TIME_SENT);
    tern__log(c->engine, TERN_LOG_INFO, req, "sent %s %s to %s on connection #%llu (stream %d)",
              req->method, req->url.target, req->url.hostport, (unsigned long long)c->id,
              (int)f->hd.stream_id);
  }
  return 0;
}

static int on_not_sent(nghttp2_session *ngh, const nghttp2_frame *f, int err, void *user) {
  /* A request's HEADERS that can no longer go (GOAWAY came first): another connection takes it. */
  if (f->hd.type != NGHTTP2_HEADERS) return 0;
  tern_request_t *req = nghttp2_session_get_stream_user_data(ngh, f->hd.stream_id);
  if (req)
    finish(user, req,
           err == NGHTTP2_ERR_START_STREAM_NOT_ALLOWED || err == NGHTTP2_ERR_STREAM_CLOSING
               ? NGHTTP2_REFUSED_STREAM
               : NGHTTP2_INTERNAL_ERROR);
  return 0;
}

static const char *frame_name(uint8_t type) {
  static const char *const names[] = { "DATA",          "HEADERS",      "PRIORITY", "RST_STREAM",
                                       "SETTINGS",      "PUSH_PROMISE", "PING",     "GOAWAY",
                                       "WINDOW_UPDATE", "CONTINUATION" };
  return type < sizeof names / sizeof names[0] ? names[type] : "unknown";
}

/* A frame nghttp2 refused: the stream's request (or, for the connection, the oldest one) is
 * told which frame and why, before the reset or GOAWAY that follows says less. */
static int on_invalid_frame(nghttp2_session *ngh, const nghttp2_frame *f, int err, void *user) {
  tern__conn *c = user;
  tern_request_t *req =
      f->hd.stream_id ? nghttp2_session_get_stream_user_data(ngh, f->hd.stream_id) : NULL;
  if (req == NULL) req = tern__conn_first(c);
  if (req && !req->error)
    tern__request_set_error(req, TERN_EPROTO, "%s: invalid HTTP/2 %s frame from the server (%s)%s",
                            req->url.hostport, frame_name(f->hd.type), nghttp2_strerror(err),
                            f->hd.type == NGHTTP2_PUSH_PROMISE ? ": server push is refused" : "");
  return 0;
}

/* ---- writing ---- */

/* Stages what nghttp2 has to send and writes it, unless a write is under way (its end calls
 * again) or nghttp2 is running (settle calls again once it returns). */
static int flush(tern__conn *c) {
  struct tern__h2 *s = c->h2;
  if (c->writing || s->in_ngh || c->state == TERN__CONN_CLOSING) return 0;
  s->out_len = 0;
  s->in_ngh = true;
  int rv = nghttp2_session_send(s->ngh);
  s->in_ngh = false;
  if (rv != 0) return rv == NGHTTP2_ERR_NOMEM ? TERN_ENOMEM : TERN_EPROTO;
  if (s->out_len == 0) return 0;
  uv_buf_t b = uv_buf_init(c->buf + c->rcap, (unsigned)s->out_len);
  return tern__conn_write(c, tern__conn_first(c), &b, 1);
}

/* ---- the connection's end ---- */

/* A request whose stream will not finish on this connection: sent again elsewhere when the
 * server cannot have acted on it, else failed with err. */
static void lose(tern__conn *c, tern_request_t *req, int err, const char *why) {
  tern__list_remove(&req->node);
  c->nrequests--;
  if (req->h2.stream_id && c->h2 && c->h2->ngh)
    nghttp2_session_set_stream_user_data(c->h2->ngh, req->h2.stream_id, NULL);
  bool untouched =
      req->send == TERN__SEND_NOTHING ||
      (!req->h2.got_frames && req->idempotent && !req->retried && tern__request_can_replay(req));
  if (untouched && !req->error) {
    tern__owner_redispatch(req, err, req->send != TERN__SEND_NOTHING);
    return;
  }
  if (!req->error) tern__request_set_error(req, err, "%s: %s", req->url.hostport, why);
  tern__owner_complete(req, err);
}

static void settle_one(tern__conn *c, tern_request_t *req);

static void on_closing(tern__conn *c) {
  while (!tern__list_empty(&c->requests))
    lose(c, tern__conn_first(c), TERN_ECONNRESET, "HTTP/2 connection closed");
  /* Streams that had ended already, even when a settle under way closes the connection: the
   * session and its list go now. */
  while (c->h2 && !tern__list_empty(&c->h2->finished))
    settle_one(c, tern__container_of(c->h2->finished.next, tern_request_t, node));
  if (c->h2) {
    nghttp2_session_del(c->h2->ngh);
    free(c->h2);
    c->h2 = NULL;
  }
}

static void fail_conn(tern__conn *c, tern_request_t *victim, int err) {
  if (c->state == TERN__CONN_CLOSING) return;
  c->no_more = true;   /* the streams about to be retried must not come back here */
  if (c->h2->in_ngh) { /* never under nghttp2's feet: settle does it once it returned */
    if (!c->h2->fatal) c->h2->fatal = err;
    return;
  }
  tern_request_t *first = victim ? victim : tern__conn_first(c);
  char why[sizeof first->errmsg];
  snprintf(why, sizeof why, "%s", first && first->error ? first->errmsg : tern_strerror(err));
  /* Every stream shares the connection's failure: the first carries its message. */
  while (!tern__list_empty(&c->requests)) {
    tern_request_t *req = tern__conn_first(c);
    if (!req->error && req->h2.got_frames) tern__request_set_error(req, err, "%s", why);
    lose(c, req, err, why);
  }
  tern__conn_close(c);
}

static void on_eof(tern__conn *c, int uverr) {
  int err = uverr == UV_EOF ? TERN_EPARTIAL : tern__map_uv_error(uverr, TERN_EIO);
  if (tern__list_empty(&c->requests) && tern__list_empty(&c->h2->finished)) {
    tern__conn_close(c);
    return;
  }
  tern_request_t *first = tern__conn_first(c);
  if (first && first->h2.got_frames)
    tern__request_set_error(first, err, "%s: HTTP/2 connection closed mid-response (%s)",
                            first->url.hostport,
                            uverr == UV_EOF ? "end of stream" : uv_strerror(uverr));
  fail_conn(c, NULL, err);
}

/* ---- settling what nghttp2 recorded ---- */

static void settle_one(tern__conn *c, tern_request_t *req) {
  tern__list_remove(&req->node);
  req->conn = NULL;
  uint32_t code = req->h2.close_code;
  /* A server that broke the protocol on one stream gets no new ones (one that reset a stream
   * itself, or sent a head over our limits, broke nothing). */
  if (req->error == TERN_EPROTO || (code == NGHTTP2_PROTOCOL_ERROR && !req->h2.peer_reset))
    c->no_more = true;
  if (req->error) {
    tern__owner_complete(req, req->error);
  } else if (code == NGHTTP2_REFUSED_STREAM && !req->h2.head &&
             ++req->h2.refusals <= TERN__H2_MAX_REFUSALS) {
    /* Refused, or above a GOAWAY's last stream: the server did not act on it (RFC 9113 8.7),
     * so it goes again, on another connection; a server that refuses it every time ends it. */
    tern__owner_redispatch(req, TERN_ECONNRESET, false);
  } else if (code != NGHTTP2_NO_ERROR || !req->h2.head) {
    tern__request_set_error(
        req, TERN_EPROTO, "%s: stream %d %s (%s)", req->url.hostport, (int)req->h2.stream_id,
        code == NGHTTP2_REFUSED_STREAM && !req->h2.head ? "refused by the server, again and again"
        : !code                                         ? "ended without a response"
        : req->h2.peer_reset                            ? "reset by the server"
                             : "reset for a protocol error in the response",
        nghttp2_http2_strerror(code));
    tern__owner_complete(req, TERN_EPROTO);
  } else {
    c->served++;
    bool hop = req->hop.next != TERN__HOP_NONE;
    int err = hop ? 0 : tern__request_body_end(req);
    if (!err && !hop) err = tern__request_progress_download(req, true);
    if (hop && !err)
      tern__owner_hop_continue(req);
    else
      tern__owner_complete(req, err);
  }
}

/* After every entry into the session: write its frames, settle the streams that ended, hand
 * free streams to waiters, and close the connection when the session is over. */
static void settle(tern__conn *c) {
  struct tern__h2 *s = c->h2;
  if (s == NULL || s->in_ngh || s->settling) return; /* the settle under way goes on */
  s->settling = true;
  settle_loop(c);
  if (c->h2) c->h2->settling = false;
}

static void settle_loop(tern__conn *c) {
  struct tern__h2 *s = c->h2;
  for (;;) {
    if (s->fatal) {
      int err = s->fatal;
      s->fatal = 0;
      fail_conn(c, NULL, err);
      return;
    }
    if (c->state != TERN__CONN_CLOSING) {
      int r = flush(c);
      if (r) {
        fail_conn(c, NULL, r);
        return;
      }
    }
    if (tern__list_empty(&s->finished)) break;
    while (!tern__list_empty(&s->finished))
      settle_one(c, tern__container_of(s->finished.next, tern_request_t, node));
    if (c->state == TERN__CONN_CLOSING) return;
    c->engine->ops->release(c); /* waiters take the free streams; may idle the connection */
    if (c->state == TERN__CONN_CLOSING) return;
  }
  if (c->state == TERN__CONN_CLOSING) return;
  if (!nghttp2_session_want_read(s->ngh) && !nghttp2_session_want_write(s->ngh) && !c->writing)
    fail_conn(c, NULL, TERN_EPROTO); /* the session ended (a GOAWAY sent or received) */
}

/* ---- the connection's events ---- */

/* Feeds what the buffer holds to the session, then what OpenSSL still holds. Returns 0, 1 when
 * the peer sent close_notify, or a TERN_E* code. */
static int feed(tern__conn *c) {
  struct tern__h2 *s = c->h2;
  for (;;) {
    if (c->len > 0) {
      s->in_ngh = true;
      ssize_t n = nghttp2_session_mem_recv(s->ngh, (const uint8_t *)c->buf, c->len);
      s->in_ngh = false;
      c->len = 0;
      if (n < 0) {
        tern_request_t *first = tern__conn_first(c);
        if (first && !first->error)
          tern__request_set_error(first, TERN_EPROTO, "%s: HTTP/2 protocol error: %s",
                                  first->url.hostport, nghttp2_strerror((int)n));
        return n == NGHTTP2_ERR_NOMEM ? TERN_ENOMEM : TERN_EPROTO;
      }
    }
    if (s->fatal) return 0; /* settle fails the connection */
    if (!c->ssl || !tern__tls_pending(c)) return 0;
    int r = tern__conn_tls_more(c);
    if (r != 0) return r;
    if (c->len == 0) return 0; /* only part of a record so far */
  }
}

static void on_received(tern__conn *c, int tls) {
  int r = tls < 0 ? tls : feed(c);
  if (r < 0) {
    if (!c->h2->in_ngh) settle(c); /* streams that ended before the error keep their result */
    if (c->state != TERN__CONN_CLOSING && c->h2) fail_conn(c, NULL, r);
    return;
  }
  settle(c);
  if ((r == 1 || tls == 1) && c->state != TERN__CONN_CLOSING) on_eof(c, UV_EOF);
}

static void on_written(tern__conn *c, int status) {
  if (status < 0) {
    fail_conn(c, NULL, tern__map_uv_error(status, TERN_EIO));
    return;
  }
  settle(c);
}

static void on_abort(tern__conn *c, tern_request_t *req, int err) {
  /* One stream ends; the connection and its other streams go on. */
  nghttp2_submit_rst_stream(c->h2->ngh, NGHTTP2_FLAG_NONE, req->h2.stream_id, NGHTTP2_CANCEL);
  nghttp2_session_set_stream_user_data(c->h2->ngh, req->h2.stream_id, NULL);
  tern__list_remove(&req->node);
  c->nrequests--;
  req->conn = NULL;
  tern__owner_complete(req, err);
  settle(c);
}

/* The caller let a silent stream go on: its silence counts from now. */
static void restart_clock(tern__conn *c, tern_request_t *req) {
  req->h2.last_ms = uv_now(c->engine->loop);
  uint64_t limit = req->timeouts[req->h2.head ? TERN_TIMEOUT_BODY : TERN_TIMEOUT_HEADERS];
  if (limit) arm_streams_timer(c, req->h2.last_ms + limit);
}

static void on_pause(tern_request_t *req) {
  tern__conn *c = req->conn;
  if (c == NULL || c->h2 == NULL || atomic_load(&req->recv_paused)) return;
  restart_clock(c, req);
  if (req->h2.unconsumed == 0) return;
  nghttp2_session_consume_stream(c->h2->ngh, req->h2.stream_id, (size_t)req->h2.unconsumed);
  req->h2.unconsumed = 0;
  settle(c); /* the WINDOW_UPDATE goes now */
}

static void on_resume_send(tern_request_t *req) {
  tern__conn *c = req->conn;
  if (c == NULL || c->h2 == NULL || !req->upload.waiting) return;
  req->upload.waiting = false;
  restart_clock(c, req);
  nghttp2_session_resume_data(c->h2->ngh, req->h2.stream_id);
  settle(c);
}

static void on_nothing(tern__conn *c) { (void)c; }

/* Each stream has its own silence limits (the head's timeout until the head came, then the
 * body's), one timer serves them all: it fires at the earliest deadline, ends the streams past
 * theirs, and is set again for the next one. A stream whose receiving the caller paused, or
 * whose body callback has nothing yet, is silent by the caller's choice: not timed. */
static void on_streams_timer(tern__conn *c) {
  if (c->timer_kind != TERN__TIMER_STREAMS || c->h2 == NULL) return;
  uint64_t now = uv_now(c->engine->loop), next = UINT64_MAX;
  c->timer_kind = TERN__TIMER_NONE;
  for (tern__list *n = c->requests.next, *after; n != &c->requests; n = after) {
    after = n->next;
    tern_request_t *req = tern__container_of(n, tern_request_t, node);
    uint64_t limit = req->timeouts[req->h2.head ? TERN_TIMEOUT_BODY : TERN_TIMEOUT_HEADERS];
    if (limit == 0 || atomic_load(&req->recv_paused) || req->upload.waiting) continue;
    uint64_t at = req->h2.last_ms + limit;
    if (at > now || c->bw_wait[TERN__RECV] || c->bw_wait[TERN__SEND]) {
      if (at <= now) at = now + limit; /* a budget holds the connection: its silence is ours */
      if (at < next) next = at;
      continue;
    }
    /* A connection silent as long as the stream gets no new streams: its server may be gone. */
    if (now - c->last_activity >= limit) c->no_more = true;
    if (req->h2.head)
      tern__request_set_error(req, TERN_EBODYTIMEOUT, "%s: body stalled for %llu ms",
                              req->url.hostport, (unsigned long long)limit);
    else
      tern__request_set_error(req, TERN_EHEADERTIMEOUT, "%s: no response head within %llu ms",
                              req->url.hostport, (unsigned long long)limit);
    on_abort(c, req, req->error);
    if (c->state == TERN__CONN_CLOSING || c->h2 == NULL) return;
  }
  if (next != UINT64_MAX) arm_streams_timer(c, next);
}

static const tern__conn_events http2_events = {
  .connected = on_nothing,
  .ready = on_nothing,
  .received = on_received,
  .eof = on_eof,
  .written = on_written,
  .timer = on_streams_timer,
  .abort = on_abort,
  .fail = fail_conn,
  .closing = on_closing,
  .pause = on_pause,
  .resume_send = on_resume_send,
};

/* ---- streams ---- */

/* Sets the streams' timer to fire at `at` (uv_now time) unless it fires sooner already. */
static void arm_streams_timer(tern__conn *c, uint64_t at) {
  if (c->timer_kind == TERN__TIMER_STREAMS && c->h2->timer_at <= at) return;
  uint64_t now = uv_now(c->engine->loop);
  c->h2->timer_at = at;
  tern__conn_wait(c, TERN__TIMER_STREAMS, at > now ? at - now : 0);
}

bool tern__http2_chosen(const tern__conn *c) {
  if (c->origin->proto == TERN__PROTO_H2) return true;
  return c->origin->proto == TERN__PROTO_ALPN && tern__tls_alpn_h2(c);
}

bool tern__http2_room(const tern__conn *c) {
  if (c->h2 == NULL || c->no_more || c->h2->goaway ||
      (c->state != TERN__CONN_ACTIVE && c->state != TERN__CONN_IDLE))
    return false;
  uint32_t max =
      nghttp2_session_get_remote_settings(c->h2->ngh, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
  if (max > TERN__H2_MAX_STREAMS) max = TERN__H2_MAX_STREAMS;
  return c->h2->nstreams < max && nghttp2_session_get_next_stream_id(c->h2->ngh) < (1u << 30);
}

/* Starts the request's stream. Returns 0 or a TERN_E* code. */
static int submit(tern__conn *c, tern_request_t *req) {
  nghttp2_nv *nva;
  size_t n;
  int r = tern__h2_request_fields(req, c->origin->tls, &nva, &n);
  if (r) return r;
  nghttp2_data_provider body = { .read_callback = tern__h2_read_body };
  bool has_body = req->upload.kind != TERN__BODY_NONE;
  int32_t sid = nghttp2_submit_request(c->h2->ngh, NULL, nva, n, has_body ? &body : NULL, req);
  free(nva);
  if (sid < 0) return sid == NGHTTP2_ERR_NOMEM ? TERN_ENOMEM : TERN_EPROTO;
  req->h2.stream_id = sid;
  c->h2->nstreams++;
  uv_update_time(c->engine->loop); /* the limit counts from now, not from this iteration's start */
  req->h2.last_ms = uv_now(c->engine->loop);
  uint64_t limit = req->timeouts[TERN_TIMEOUT_HEADERS];
  if (limit) arm_streams_timer(c, req->h2.last_ms + limit);
  return 0;
}

void tern__http2_send(tern__conn *c, tern_request_t *req) {
  tern_engine_t *eng = c->engine;
  tern__conn_take_idle(c);
  req->conn = c;
  req->reused = true;
  TERN__STAT_ADD(eng, TERN_STAT_REUSED, 1);
  tern__request_mark(req, TERN_TIME_CONNECTED);
  tern__list_remove(&req->node);
  tern__list_insert_tail(&c->requests, &req->node);
  c->nrequests++;
  int r = submit(c, req);
  if (r) {
    tern__list_remove(&req->node);
    c->nrequests--;
    req->conn = NULL;
    tern__owner_complete(req, r);
    return;
  }
  settle(c);
}

/* nghttp2 allocates through the engine's functions, so the torture run fails its allocations
 * too. */
static void *mem_malloc(size_t n, void *ud) {
  (void)ud;
  return tern__malloc(n);
}
static void mem_free(void *p, void *ud) {
  (void)ud;
  free(p);
}
static void *mem_calloc(size_t k, size_t n, void *ud) {
  (void)ud;
  return tern__calloc(k, n);
}
static void *mem_realloc(void *p, size_t n, void *ud) {
  (void)ud;
  return tern__realloc(p, n);
}
static nghttp2_mem engine_mem = { NULL, mem_malloc, mem_free, mem_calloc, mem_realloc };

void tern__http2_start(tern__conn *c) {
  tern_request_t *first = tern__conn_first(c);
  struct tern__h2 *s = tern__calloc(1, sizeof *s);
  nghttp2_session_callbacks *cb = NULL;
  nghttp2_option *opt = NULL;
  if (s == NULL || nghttp2_session_callbacks_new(&cb) != 0 || nghttp2_option_new(&opt) != 0) {
    if (cb) nghttp2_session_callbacks_del(cb);
    free(s);
    tern__conn_fail(c, NULL, TERN_ENOMEM);
    return;
  }
  nghttp2_session_callbacks_set_send_callback(cb, on_send);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
  nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
  nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(cb, on_not_sent);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cb, on_invalid_frame);
  nghttp2_option_set_no_auto_window_update(opt, 1); /* windows open as sinks take the bytes */
  nghttp2_option_set_max_reserved_remote_streams(opt, 0);
  int rv = nghttp2_session_client_new3(&s->ngh, cb, c, opt, &engine_mem);
  nghttp2_session_callbacks_del(cb);
  nghttp2_option_del(opt);
  if (rv != 0) {
    free(s);
    tern__conn_fail(c, NULL, TERN_ENOMEM);
    return;
  }
  tern__list_init(&s->finished);
  c->h2 = s;
  c->events = &http2_events;
  c->rcap = c->cap / 2; /* reads below, frames to send above */
  nghttp2_settings_entry settings[] = {
    { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
    { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100 },
    { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, TERN__H2_STREAM_WINDOW },
    { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)c->engine->config.max_header_size },
  };
  if (nghttp2_submit_settings(s->ngh, NGHTTP2_FLAG_NONE, settings, 4) != 0 ||
      nghttp2_session_set_local_window_size(s->ngh, NGHTTP2_FLAG_NONE, 0, TERN__H2_CONN_WINDOW)) {
    tern__conn_fail(c, NULL, TERN_ENOMEM);
    return;
  }
  tern__log(c->engine, TERN_LOG_DEBUG, first, "connection #%llu to %s: HTTP/2",
            (unsigned long long)c->id, c->origin->host);
  /* The request that opened the connection becomes its first stream. */
  if (first) {
    int r = submit(c, first);
    if (r) {
      tern__conn_fail(c, first, r);
      return;
    }
  }
  c->engine->ops->negotiated(c); /* the origin's waiters take streams too */
  if (c->state == TERN__CONN_CLOSING) return;
  tern__conn_start_reading(c);
  if (c->len > 0 || (c->ssl && tern__tls_pending(c)))
    on_received(c, 0); /* frames that came with the end of the handshake */
  else
    settle(c);
}
