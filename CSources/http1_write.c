/* Writing an HTTP/1.1 request: its head (serialized once, by request_head.c) and its body,
 * piece by piece: memory bodies straight from the caller's copy, file, callback and compressed
 * bodies staged in the connection's buffer, chunked framing when the length is unknown. */
#include "internal.h"

#include <stdio.h>

/* Memory bodies go out in pieces of this size, so upload progress moves. */
#define MEM_PIECE (1u << 20)

/* The request whose bytes go out next: the oldest one not yet fully sent. */
static tern_request_t *next_unsent(const tern__conn *c) {
  for (tern__list *n = c->requests.next; n != &c->requests; n = n->next) {
    tern_request_t *req = tern__container_of(n, tern_request_t, node);
    if (!tern__request_out(req)) return req;
  }
  return NULL;
}

void tern__http1_request_sent(tern__conn *c, tern_request_t *req) {
  req->send = TERN__SEND_DONE;
  c->writing_req = NULL;
  tern__request_mark(req, TERN_TIME_SENT);
  tern__log(c->engine, TERN_LOG_INFO, req, "sent %s %s to %s on connection #%llu", req->method,
            req->url.target, req->url.hostport, (unsigned long long)c->id);
  c->rcap = c->cap;
  if (req == tern__conn_first(c) && req->resp.status == 0)
    tern__conn_set_timer(c, TERN__TIMER_HEADERS, req->timeouts[TERN_TIMEOUT_HEADERS]);
  tern__conn_start_reading(c);
}

static int64_t pull_plain(void *req, char *scratch, size_t cap, const char **ptr) {
  return tern__request_pull_plain(req, scratch, cap, ptr);
}

/* Where the next staged body piece goes: above the response bytes already read and a reserve
 * for more, so the response is read while the body is sent. Reads are bounded below it. */
static char *stage(tern__conn *c) {
  size_t reserve = c->cap / 4;
  c->rcap = c->len > reserve ? c->len : reserve;
  if (c->rcap == c->cap) return NULL; /* response bytes fill it: none can be consumed now */
  return c->buf + c->rcap;
}

static int64_t full_buffer(tern__conn *c, tern_request_t *req) {
  c->rcap = c->cap;
  tern__request_set_error(req, TERN_EPROTO,
                          "%s: the response filled the buffer before the request was sent",
                          req->url.hostport);
  return TERN_EPROTO;
}

void tern__http1_write_next(tern__conn *c) {
  if (c->writing || c->state != TERN__CONN_ACTIVE) return;
  tern_request_t *req = next_unsent(c);
  if (req == NULL || req->upload.waiting) return;
  c->writing_req = req;
  bool has_body = req->upload.kind != TERN__BODY_NONE && !req->upload.held;
  bool chunked = req->upload.len == UINT64_MAX;
  uv_buf_t bufs[TERN__MAX_WRITE_BUFS];
  unsigned nb = 0;
  bool head = req->send == TERN__SEND_NOTHING;
  if (head) bufs[nb++] = uv_buf_init(req->head, (unsigned)req->head_len);
  c->pending_body = 0;
  c->last_chunk_pending = false;
  bool hold_body = head && req->expect_continue;
  if (has_body && !hold_body) {
    const char *ptr = NULL;
    int64_t n;
    /* Under a sending budget a piece is small enough not to overdraw it in one write. */
    size_t budget = tern__conn_send_piece(c, req);
    size_t room = 0;
    if (req->upload.gzip) {
      /* Compressed bodies are staged in the buffer like file bodies. */
      if (req->upload.encoder == NULL && (req->upload.encoder = tern__encoder_new()) == NULL) {
        tern__conn_fail(c, req, TERN_ENOMEM);
        return;
      }
      ptr = stage(c);
      room = c->cap - c->rcap < budget ? c->cap - c->rcap : budget;
      n = ptr ? tern__encoder_fill(req->upload.encoder, pull_plain, req, (char *)ptr, room)
              : full_buffer(c, req);
      if (n == TERN_EIO)
        tern__request_set_error(req, TERN_EIO, "compressing the body for %s failed",
                                req->url.hostport);
    } else if (req->upload.kind == TERN__BODY_MEM) {
      uint64_t left = req->upload.len - req->upload.sent;
      uint64_t piece = c->ssl ? c->cap : MEM_PIECE; /* bounds the ciphertext held per write */
      if (budget < piece) piece = budget;
      n = (int64_t)(left < piece ? left : piece);
      ptr = (const char *)req->upload.mem + req->upload.sent;
    } else {
      ptr = stage(c);
      room = c->cap - c->rcap < budget ? c->cap - c->rcap : budget;
      n = ptr ? tern__request_read_plain(req, (char *)ptr, room) : full_buffer(c, req);
    }
    if (n == TERN__PULL_WAIT) {
      /* No bytes yet: the head (if not out yet) goes alone, the response is read meanwhile. */
      req->upload.waiting = true;
      c->rcap = c->cap;
      n = 0;
      if (nb == 0) {
        c->writing_req = NULL;
        tern__conn_set_timer(c, TERN__TIMER_NONE, 0); /* the caller's silence, not the server's */
        tern__conn_start_reading(c);
        return;
      }
    } else if (n < 0) {
      tern__conn_fail(c, req, (int)n);
      return;
    }
    c->pending_body = req->upload.gzip ? 0 : (size_t)n; /* compressed: counted as pulled */
    if (req->upload.waiting) {
      /* nothing of the body in this write */
    } else if (chunked) {
      if (n > 0) {
        int k = snprintf(c->chunk_line, sizeof c->chunk_line, "%llx\r\n", (unsigned long long)n);
        bufs[nb++] = uv_buf_init(c->chunk_line, (unsigned)k);
        bufs[nb++] = uv_buf_init((char *)ptr, (unsigned)n);
        bufs[nb++] = uv_buf_init((char *)"\r\n", 2);
      }
      if (n == 0 || (req->upload.gzip && tern__encoder_done(req->upload.encoder))) {
        bufs[nb++] = uv_buf_init((char *)"0\r\n\r\n", 5);
        c->last_chunk_pending = true;
      }
    } else if (n > 0) {
      bufs[nb++] = uv_buf_init((char *)ptr, (unsigned)n);
    }
  }
  if (nb == 0) {
    tern__http1_request_sent(c, req);
    return;
  }
  c->write_ends_body =
      !req->upload.waiting && (!has_body || c->last_chunk_pending ||
                               (!chunked && req->upload.sent + c->pending_body >= req->upload.len));
  int r = tern__conn_write(c, req, bufs, nb);
  if (r) {
    tern__conn_fail(c, req, r);
    return;
  }
  if (req->upload.waiting)
    tern__conn_set_timer(c, TERN__TIMER_NONE, 0);
  else if (head && has_body)
    tern__conn_set_timer(c, TERN__TIMER_BODY, req->timeouts[TERN_TIMEOUT_BODY]);
  tern__conn_start_reading(c); /* an early answer (413, 401) is seen while the body goes */
}
