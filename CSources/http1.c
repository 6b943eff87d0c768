/* HTTP/1.1 exchanges on a connection: what happens when it connects, when bytes arrive, when a
 * write ends, when the peer closes; requests queued and pipelined on it; a finished response
 * handed back to the pool. The bytes themselves are written by http1_write.c and framed by
 * http1_read.c. */
#include "internal.h"

#include <sys/socket.h>

static void on_eof(tern__conn *c, int uverr);
static int pump(tern__conn *c);
static void after_pump(tern__conn *c, int r);
static void response_done(tern__conn *c, tern_request_t *req);

static void on_connected(tern__conn *c) {
  int r = 0;
  if (c->origin->proxy_host && c->origin->proxy_kind != TERN__PROXY_KIND_HTTP) {
    r = tern__socks_start(c);
  } else if (c->origin->tls && c->origin->proxy_host) {
    r = tern__proxy_tunnel_start(c);
  } else if (c->origin->tls) {
    r = tern__conn_start_tls(c);
  } else {
    c->state = TERN__CONN_ACTIVE;
    c->events->ready(c);
  }
  if (r < 0) tern__conn_fail(c, NULL, r);
}

static void on_ready(tern__conn *c) {
  tern_request_t *req = tern__conn_first(c);
  if (req) tern__request_mark(req, TERN_TIME_CONNECTED);
  if (c->ssl)
    tern__log(c->engine, TERN_LOG_DEBUG, req, "connection #%llu: TLS handshake done%s",
              (unsigned long long)c->id, c->tls_resumed ? " (session resumed)" : "");
  if (tern__http2_chosen(c)) {
    tern__http2_start(c); /* the connection is HTTP/2's from here */
    return;
  }
  tern__http1_write_next(c);
  if (c->state == TERN__CONN_ACTIVE) c->engine->ops->negotiated(c);
}

bool tern__http1_can_pipeline(const tern__conn *c, const tern_request_t *req, unsigned depth) {
  if (c->state != TERN__CONN_ACTIVE || c->no_more || !c->http11 || c->served == 0) return false;
  /* A request with a body is never pipelined, nor queued behind one that has a body. */
  if (c->nrequests >= depth) return false;
  if (!req->pipelining || !req->idempotent || req->upload.kind != TERN__BODY_NONE) return false;
  const tern_request_t *head = tern__conn_first(c);
  return head == NULL ||
         (head->pipelining && head->idempotent && head->upload.kind == TERN__BODY_NONE);
}

void tern__http1_send(tern__conn *c, tern_request_t *req) {
  tern_engine_t *eng = c->engine;
  tern__conn_take_idle(c);
  req->conn = c;
  req->reused = true;
  TERN__STAT_ADD(eng, TERN_STAT_REUSED, 1);
  tern__log(eng, TERN_LOG_DEBUG, req, "reusing connection #%llu to %s (request %u on it)",
            (unsigned long long)c->id, req->url.hostport, c->served + c->nrequests + 1);
  tern__request_mark(req, TERN_TIME_CONNECTED);
  tern__list_remove(&req->node);
  tern__list_insert_tail(&c->requests, &req->node);
  c->nrequests++;
  if (!c->writing) tern__http1_write_next(c);
}

void tern__http1_tunnel_again(tern__conn *c, tern_request_t *req) {
  req->conn = c;
  tern__list_remove(&req->node);
  tern__list_insert_tail(&c->requests, &req->node);
  c->nrequests++;
  int r = tern__proxy_tunnel_start(c);
  if (r < 0) tern__conn_fail(c, NULL, r);
}

/* A write of the request under way finished: account for it, then send what comes next. */
static void on_written(tern__conn *c, int status) {
  tern_request_t *req = c->writing_req;
  if (status < 0) {
    int err = tern__map_uv_error(status, TERN_EIO);
    tern__request_set_error(req, err, "send to %s: %s", req->url.hostport, uv_strerror(status));
    tern__conn_fail(c, req, err);
    return;
  }
  c->rcap = c->cap; /* the staged piece is on its way */
  bool was_head = req->send == TERN__SEND_NOTHING;
  if (was_head) req->send = TERN__SEND_BODY;
  req->upload.sent += c->pending_body;
  if (req->send == TERN__SEND_SKIPPED) {
    /* A final answer came while the body was going: no more of it is sent. */
    c->writing_req = NULL;
    tern__conn_start_reading(c);
    return;
  }
  bool body_out =
      req->upload.kind == TERN__BODY_NONE || req->upload.held ||
      (req->upload.len == UINT64_MAX ? c->last_chunk_pending : req->upload.sent >= req->upload.len);
  if (was_head && req->expect_continue && !body_out) {
    /* Hold the body until the server's 100 (or its final answer) or the wait runs out. */
    req->send = TERN__SEND_WAIT_100;
    tern__conn_start_reading(c);
    tern__conn_set_timer(c, TERN__TIMER_EXPECT, req->expect_wait_ms);
    /* The 100 (or a final answer) may have come before this write's end was reported (a
     * sending budget reports it late): it waited in the buffer for the head to be out. */
    if (c->len > 0 || c->ssl) after_pump(c, pump(c));
    return;
  }
  if (req->upload.kind != TERN__BODY_NONE && !req->upload.held) {
    int r = tern__request_progress_upload(req);
    if (r) {
      tern__conn_fail(c, req, r);
      return;
    }
  }
  tern__conn_start_reading(c); /* it stops when a staged piece left no room */
  if (body_out) {
    tern__http1_request_sent(c, req);
    if (c->done_after_write) {
      c->done_after_write = false;
      response_done(c, req);
      if (c->state == TERN__CONN_ACTIVE && c->len > 0) after_pump(c, pump(c));
      return;
    }
    tern__http1_write_next(c); /* a pipelined request may be waiting */
    /* Bytes that arrived while the body was staged are processed now. */
    if (c->state == TERN__CONN_ACTIVE && (c->len > 0 || c->ssl)) after_pump(c, pump(c));
  } else {
    tern__http1_write_next(c);
  }
}

/* A response finished: detach its request, decide the connection's fate, then complete. */
static void response_done(tern__conn *c, tern_request_t *req) {
  tern__list_remove(&req->node);
  c->nrequests--;
  req->conn = NULL;
  c->served++;
  c->rstate = TERN__RESP_HEAD;
  c->last_len = 0;
  bool hop = req->hop.next != TERN__HOP_NONE;
  int err = hop ? 0 : tern__request_body_end(req);
  if (!err && !hop && !req->hop.reported_whole) err = tern__request_progress_download(req, true);
  bool more = !tern__list_empty(&c->requests);
  /* Bytes beyond the response on a connection with nothing else outstanding mean the server
   * framed the body wrongly: such a connection is not reused. */
  if (!more && c->len > 0) c->keep_alive = false;
  if (!c->keep_alive || !tern__request_out(req)) c->no_more = true;
  if (c->no_more) {
    tern__conn_stop_reading(c);
    tern__conn_close(c); /* pipelined requests behind it are retried elsewhere */
  } else if (more) {
    tern_request_t *next = tern__conn_first(c);
    if (tern__request_out(next))
      tern__conn_set_timer(c, TERN__TIMER_HEADERS, next->timeouts[TERN_TIMEOUT_HEADERS]);
  } else if (hop && req->hop.keep_conn) {
    req->hop.conn = c; /* the NTLM handshake's next message goes here (pool.c) */
  } else {
    c->engine->ops->release(c);
  }
  if (hop && !err)
    tern__owner_hop_continue(req);
  else
    tern__owner_complete(req, err);
}

/* Frames what the buffer holds and, on TLS connections, keeps decrypting what OpenSSL still
 * holds as room frees up: at the end of a response no further socket read may come to do it.
 * Returns 0, 1 when the peer sent close_notify, or a TERN_E* code. */
static int pump(tern__conn *c) {
  for (;;) {
    int r;
    while ((r = tern__http1_read(c)) > 0) {
      tern_request_t *req = tern__conn_first(c);
      if (r == TERN__READ_DONE && !tern__request_out(req) && c->writing && c->writing_req == req &&
          c->write_ends_body) {
        /* The answer came before libuv reported the body's last write done: the exchange
         * ends when it does, so the connection stays reusable. */
        c->done_after_write = true;
        return 0;
      }
      if (r == TERN__READ_DONE)
        response_done(c, req);
      else
        tern__http1_write_next(c); /* TERN__READ_CONTINUE */
    }
    if (r < 0) return r;
    if (c->state != TERN__CONN_ACTIVE || c->len == c->rcap || !tern__tls_pending(c)) return 0;
    size_t before = c->len;
    r = tern__conn_tls_more(c);
    if (r != 0) return r;
    if (c->len == before) return 0; /* only part of a record so far */
  }
}

static void after_pump(tern__conn *c, int r) {
  if (r < 0)
    tern__conn_fail(c, NULL, r);
  else if (r == 1 && c->state != TERN__CONN_CLOSING)
    on_eof(c, UV_EOF); /* close_notify */
}

static void on_eof(tern__conn *c, int uverr) {
  /* When data and a reset arrive together, libuv may report a plain end of stream: ask the
   * socket, so a reset body is never taken for a complete close-delimited one. */
  if (uverr == UV_EOF) {
    uv_os_fd_t fd;
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 &&
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr != 0)
      uverr = uv_translate_sys_error(soerr);
  }
  tern_request_t *req = tern__conn_first(c);
  if (req == NULL) {
    tern__conn_close(c); /* the server closed an idle connection */
    return;
  }
  if (uverr == UV_EOF && c->rstate == TERN__RESP_CLOSE) {
    c->keep_alive = false;
    response_done(c, req);
    return;
  }
  int err;
  const char *host = req->url.hostport;
  if (c->state == TERN__CONN_SOCKS) {
    err = TERN_EPROXY;
    tern__request_set_error(req, err,
                            "proxy %s:%u closed the connection during the SOCKS handshake (%s)",
                            c->origin->proxy_host, (unsigned)c->origin->proxy_port,
                            uverr == UV_EOF ? "end of stream" : uv_strerror((int)uverr));
  } else if (c->state == TERN__CONN_HANDSHAKE) {
    err = TERN_ETLSHANDSHAKE;
    tern__request_set_error(req, err, "TLS handshake with %s: connection closed by the server (%s)",
                            host, uverr == UV_EOF ? "end of stream" : uv_strerror((int)uverr));
  } else if (c->rstate == TERN__RESP_HEAD && c->len == 0) {
    err = uverr == UV_EOF ? TERN_EEMPTYREPLY : tern__map_uv_error((int)uverr, TERN_EIO);
    tern__request_set_error(req, err, "%s: connection closed before any response (%s)", host,
                            uverr == UV_EOF ? "end of stream" : uv_strerror((int)uverr));
  } else if (c->rstate == TERN__RESP_HEAD) {
    err = TERN_EPROTO;
    tern__request_set_error(req, err, "%s: connection closed inside the response head", host);
  } else if (uverr == UV_EOF) {
    err = TERN_EPARTIAL;
    if (c->rstate == TERN__RESP_LENGTH)
      tern__request_set_error(req, err, "%s: body ended after %llu bytes, %llu missing", host,
                              (unsigned long long)req->resp.received,
                              (unsigned long long)c->body_left);
    else
      tern__request_set_error(req, err, "%s: chunked body ended before its last chunk", host);
  } else {
    err = tern__map_uv_error((int)uverr, TERN_EIO);
    tern__request_set_error(req, err, "%s: receive failed after %llu body bytes: %s", host,
                            (unsigned long long)req->resp.received, uv_strerror((int)uverr));
  }
  tern__conn_fail(c, NULL, err);
}

/* The receive-rate cap: when the body is ahead of its allowed rate, reading pauses until the
 * rate catches up (the connection timer resumes it). */
static void throttle(tern__conn *c) {
  tern_request_t *req = tern__conn_first(c);
  if (req == NULL || req->max_recv_speed == 0 || c->rstate == TERN__RESP_HEAD ||
      c->state != TERN__CONN_ACTIVE || c->timer_kind == TERN__TIMER_THROTTLE)
    return;
  uint64_t elapsed = uv_now(c->engine->loop) - req->recv_start_ms;
  uint64_t allowed = req->max_recv_speed * elapsed / 1000;
  if (req->resp.received <= allowed) return;
  uint64_t wait = (req->resp.received - allowed) * 1000 / req->max_recv_speed;
  if (wait == 0) return;
  tern__conn_stop_reading(c);
  tern__conn_wait(c, TERN__TIMER_THROTTLE, wait);
}

void tern__http1_apply_pause(tern_request_t *req) {
  tern__conn *c = req->conn;
  if (c == NULL || tern__conn_first(c) != req || c->state != TERN__CONN_ACTIVE) return;
  if (atomic_load(&req->recv_paused)) {
    /* Silence while paused is the caller's, not the server's: no body timeout meanwhile. */
    if (c->timer_kind == TERN__TIMER_BODY) tern__conn_set_timer(c, TERN__TIMER_NONE, 0);
    tern__conn_stop_reading(c);
    return;
  }
  if (c->timer_kind == TERN__TIMER_NONE)
    tern__conn_set_timer(c, TERN__TIMER_BODY, req->timeouts[TERN_TIMEOUT_BODY]);
  tern__conn_start_reading(c);
  after_pump(c, pump(c)); /* plaintext OpenSSL kept meanwhile */
}

void tern__http1_resume_send(tern_request_t *req) {
  if (!req->upload.waiting) return;
  req->upload.waiting = false;
  tern__conn *c = req->conn;
  if (c == NULL || c->state != TERN__CONN_ACTIVE || tern__request_out(req)) return;
  if (c->timer_kind == TERN__TIMER_NONE)
    tern__conn_set_timer(c, TERN__TIMER_BODY, req->timeouts[TERN_TIMEOUT_BODY]);
  tern__http1_write_next(c);
}

static void on_received(tern__conn *c, int tls) {
  int r = tls;
  if (r >= 0) {
    if (c->state == TERN__CONN_TUNNEL) {
      r = tern__proxy_tunnel_read(c);
    } else if (c->state == TERN__CONN_SOCKS) {
      r = tern__socks_read(c);
    } else {
      r = pump(c);
      if (tls == 1 && r == 0) r = 1;
    }
  }
  if (r < 0 || r == 1) {
    after_pump(c, r);
  } else if (c->len == c->rcap && c->state == TERN__CONN_ACTIVE) {
    tern__conn_stop_reading(c); /* full while a body piece is staged; resumes after its write */
  } else if (c->state == TERN__CONN_ACTIVE && tern__conn_first(c) &&
             atomic_load(&tern__conn_first(c)->recv_paused)) {
    tern__conn_stop_reading(
        c); /* the caller's consumer is behind: bytes read so far were delivered */
  } else {
    throttle(c);
  }
}

static void on_timer(tern__conn *c) {
  tern_request_t *req = tern__conn_first(c);
  switch (c->timer_kind) {
    case TERN__TIMER_THROTTLE: {
      /* Caught up with the rate: read again; the body timer measures silence from now. */
      tern__conn_set_timer(c, TERN__TIMER_BODY, req ? req->timeouts[TERN_TIMEOUT_BODY] : 0);
      tern__conn_start_reading(c);
      int r = pump(c); /* plaintext OpenSSL kept meanwhile */
      if (r != 0)
        after_pump(c, r);
      else
        throttle(c);
      break;
    }
    case TERN__TIMER_EXPECT:
      if (req && req->send == TERN__SEND_WAIT_100) {
        req->send = TERN__SEND_BODY; /* no 100 in time: send the body anyway (RFC 9110 10.1.1) */
        tern__conn_set_timer(c, TERN__TIMER_BODY, req->timeouts[TERN_TIMEOUT_BODY]);
        tern__http1_write_next(c);
      }
      break;
    default: break;
  }
}

static const tern__conn_events http1_events = {
  .connected = on_connected,
  .ready = on_ready,
  .received = on_received,
  .eof = on_eof,
  .written = on_written,
  .timer = on_timer,
  .pause = tern__http1_apply_pause,
  .resume_send = tern__http1_resume_send,
};

tern__conn *tern__http1_open(tern__origin *o, tern_request_t *first, uint64_t connect_ms) {
  return tern__conn_open(o, first, connect_ms, &http1_events);
}
