/* Reading an HTTP/1.1 response: the head (parsed in place by http1_parse.c, interim 1xx heads
 * kept for the caller), what it says about the connection (keep-alive, framing), and the body
 * framed by Content-Length, chunked coding or the connection's end, delivered to the sink. */
#include "internal.h"

static TERN__COLD int bad_length(tern_request_t *req) {
  tern__request_set_error(req, TERN_EPROTO, "%s: invalid Content-Length", req->url.hostport);
  return TERN_EPROTO;
}

/* A chunked body: Transfer-Encoding must be chunked alone, and Content-Size may give the
 * length. Not the common small response's path, so out of its way. */
static __attribute__((noinline)) int setup_chunked(tern__conn *c, tern_request_t *req,
                                                   const tern__header_t *te,
                                                   const tern__header_t *csize, bool have_cl) {
  if (have_cl) c->keep_alive = false; /* both framings: trust chunked, then close (RFC 9112) */
  /* Another transfer coding (gzip, snappy, ...) would leave its bytes in the body, passed off
   * as the content: refused, as curl does (its exit 61). */
  if (!tern__is_chunked_only(te->value, te->value_len)) {
    tern__request_set_error(req, TERN_EDECODE, "%s: unsupported Transfer-Encoding \"%.*s\"",
                            req->url.hostport, (int)(te->value_len > 64 ? 64 : te->value_len),
                            te->value);
    return TERN_EDECODE;
  }
  c->rstate = TERN__RESP_CHUNKED;
  tern__chunked_init(&c->chunked);
  uint64_t v;
  req->resp.content_length = -1;
  if (csize && tern__parse_content_length(csize->value, csize->value_len, &v) == 0)
    req->resp.content_length = (int64_t)v;
  return 0;
}

static TERN__COLD void use_keep_alive(tern__conn *c, const tern__header_t *ka) {
  uint64_t secs;
  if (tern__parse_keep_alive_timeout(ka->value, ka->value_len, &secs) == 0) {
    /* Leave a margin: a server closes at its timeout, and a request sent just then is lost. */
    c->idle_ms = secs >= 2 ? (secs - 1) * 1000 : 500;
  }
}

static int setup_response(tern__conn *c, tern_request_t *req, size_t head_len, int minor,
                          int status, const char *reason, size_t reason_len, tern__header_t *h,
                          size_t n) {
  int r = tern__request_set_response(req, minor, status, reason, reason_len, h, n);
  if (r) return r;
  const tern__header_t *te = NULL, *conn_hdr = NULL, *ka = NULL, *csize = NULL;
  bool have_cl = false;
  uint64_t cl = 0;
  for (size_t i = 0; i < n; i++) {
    /* The length picks the one name worth comparing: most fields match none. */
    const char *nm = h[i].name;
    size_t nl = h[i].name_len;
    if (nl == 14 && tern__token_name_is(nm, nl, "content-length")) {
      uint64_t v;
      if (TERN__UNLIKELY(tern__parse_content_length(h[i].value, h[i].value_len, &v) ||
                         (have_cl && v != cl)))
        return bad_length(req);
      have_cl = true;
      cl = v;
    } else if (nl == 17 && tern__token_name_is(nm, nl, "transfer-encoding")) {
      te = &h[i];
    } else if (nl == 10 && tern__token_name_is(nm, nl, "connection")) {
      conn_hdr = &h[i];
    } else if (nl == 10 && tern__token_name_is(nm, nl, "keep-alive")) {
      ka = &h[i];
    } else if (nl == 12 && tern__token_name_is(nm, nl, "content-size")) {
      csize = &h[i];
    }
  }
  c->http11 = minor == 1;
  if (minor == 1)
    c->keep_alive = !(conn_hdr && tern__has_token(conn_hdr->value, conn_hdr->value_len, "close"));
  else
    c->keep_alive = conn_hdr && tern__has_token(conn_hdr->value, conn_hdr->value_len, "keep-alive");
  if (!req->persistent) c->keep_alive = false;
  if (TERN__UNLIKELY(ka != NULL)) use_keep_alive(c, ka);
  if (have_cl) req->resp.content_length = (int64_t)cl;
  /* Whether the buffer holds the whole response, its body too: it then completes in this read
   * (tern_request_set_whole_at_completion). */
  bool bodiless = req->is_head || status == 204 || status == 304;
  req->hop.whole_now = bodiless || (!te && have_cl && c->len - head_len >= cl);

  if ((r = tern__exchange_head(c, req)) != 0) return r;
  tern__conn_set_timer(c, TERN__TIMER_BODY, req->timeouts[TERN_TIMEOUT_BODY]);
  if (bodiless) {
    c->rstate = TERN__RESP_HEAD;
    c->body_left = 0;
    return 1; /* complete now */
  }
  if (te) return setup_chunked(c, req, te, csize, have_cl);
  if (have_cl) {
    c->rstate = TERN__RESP_LENGTH;
    c->body_left = cl;
    return cl == 0 ? 1 : 0;
  }
  c->rstate = TERN__RESP_CLOSE;
  c->keep_alive = false;
  return 0;
}

/* A head that cannot be used: too large, too many fields, or malformed. */
static TERN__COLD int head_error(tern__conn *c, tern_request_t *req, int r) {
  int limit = tern__conn_head_limit(c);
  if (r == TERN__PARSE_INCOMPLETE) {
    tern__request_set_error(req, TERN_EHEADERSIZE, "%s: response head exceeds %d bytes",
                            req->url.hostport, limit);
    return TERN_EHEADERSIZE;
  }
  if (r == TERN__PARSE_TOO_MANY || r > limit) {
    tern__request_set_error(req, TERN_EHEADERSIZE, "%s: response head exceeds %s",
                            req->url.hostport,
                            r == TERN__PARSE_TOO_MANY ? "256 fields" : "its size limit");
    return TERN_EHEADERSIZE;
  }
  tern__request_set_error(req, TERN_EPROTO, "%s: malformed response head", req->url.hostport);
  return TERN_EPROTO;
}

/* An interim (1xx) head of `len` bytes: kept for the caller, and a 100 lets a waiting body go.
 * Returns 0 to parse on, TERN__READ_CONTINUE, or an error. */
static TERN__COLD int interim_head(tern__conn *c, tern_request_t *req, int status, size_t len) {
  if (status == 101) {
    tern__request_set_error(req, TERN_EPROTO, "%s: unexpected 101 Switching Protocols",
                            req->url.hostport);
    return TERN_EPROTO;
  }
  if (req->resp.interim.len + len > TERN__MAX_INTERIM) {
    tern__request_set_error(req, TERN_EHEADERSIZE, "%s: interim (1xx) responses exceed %u bytes",
                            req->url.hostport, TERN__MAX_INTERIM);
    return TERN_EHEADERSIZE;
  }
  /* Interim responses (100, 103) change nothing here; they are kept for the caller. */
  if (tern__str_append(&req->resp.interim, c->buf, len)) return TERN_ENOMEM;
  tern__conn_consume(c, len);
  if (status == 100 && req->send == TERN__SEND_WAIT_100) {
    req->send = TERN__SEND_BODY;
    tern__conn_set_timer(c, TERN__TIMER_BODY, req->timeouts[TERN_TIMEOUT_BODY]);
    return TERN__READ_CONTINUE;
  }
  return 0;
}

/* Bytes wait until the request's head is out; an answer may come while its body goes. */
static bool reads_for(const tern__conn *c, const tern_request_t *req) {
  return req->send != TERN__SEND_NOTHING && !c->done_after_write;
}

/* A chunked body's bytes: decoded in the buffer and delivered. Out of the small response's way,
 * as is the read to the connection's end below. */
static __attribute__((noinline)) int read_chunked(tern__conn *c, tern_request_t *req) {
  int r;
  size_t dlen = c->len;
  ssize_t rest = tern__decode_chunked(&c->chunked, c->buf, &dlen);
  if (rest == TERN__PARSE_ERROR) {
    tern__request_set_error(req, TERN_ECHUNKED, "%s: malformed chunked body", req->url.hostport);
    return TERN_ECHUNKED;
  }
  if (dlen && (r = tern__request_deliver(req, c->buf, dlen)) != 0) return r;
  if (rest == TERN__PARSE_INCOMPLETE) {
    c->len = 0;
    if ((r = tern__request_progress_download(req, false)) != 0) return r;
    return 0;
  }
  c->len = dlen + (size_t)rest;
  tern__conn_consume(c, dlen);
  return TERN__READ_DONE;
}

/* A body that ends with the connection: all of it is delivered. */
static __attribute__((noinline)) int read_to_close(tern__conn *c, tern_request_t *req) {
  int r;
  if ((r = tern__request_deliver(req, c->buf, c->len)) != 0) return r;
  c->len = 0;
  if ((r = tern__request_progress_download(req, false)) != 0) return r;
  return 0;
}

int tern__http1_read(tern__conn *c) {
  while (c->state == TERN__CONN_ACTIVE) {
    tern_request_t *req = tern__conn_first(c);
    if (req == NULL) {
      if (c->len > 0) {
        tern__conn_close(c); /* bytes nobody asked for */
      }
      return TERN__READ_MORE;
    }
    if (!reads_for(c, req) || c->len == 0) return TERN__READ_MORE;
    int r;
    switch (c->rstate) {
      case TERN__RESP_HEAD: {
        tern__header_t h[TERN__MAX_HEADERS];
        size_t nh = TERN__MAX_HEADERS;
        int minor = 0, status = 0;
        const char *reason = NULL;
        size_t reason_len = 0;
        r = tern__parse_response(c->buf, c->len, c->last_len, &minor, &status, &reason, &reason_len,
                                 h, &nh);
        if (TERN__UNLIKELY(r == TERN__PARSE_INCOMPLETE)) {
          if (c->len >= (size_t)tern__conn_head_limit(c)) return head_error(c, req, r);
          c->last_len = c->len;
          return 0;
        }
        if (TERN__UNLIKELY(r < 0 || r > tern__conn_head_limit(c))) return head_error(c, req, r);
        c->last_len = 0;
        if (TERN__UNLIKELY(status < 200)) {
          if ((r = interim_head(c, req, status, (size_t)r)) != 0) return r;
          continue;
        }
        if (TERN__UNLIKELY(req->send == TERN__SEND_WAIT_100)) {
          /* A final answer to the head alone: the body is not sent, and since the server may
           * still expect it, the connection is not reused. */
          req->send = TERN__SEND_SKIPPED;
          c->no_more = true;
        } else if (TERN__UNLIKELY(req->send == TERN__SEND_BODY && status >= 300)) {
          /* An answer that refuses the body (413, 401, a redirect) while it is still going: the
           * rest is not sent (RFC 9112 9.3, as curl does), and the connection ends with it.
           * An early 2xx lets the body go on beside the response. */
          req->send = TERN__SEND_SKIPPED;
          req->upload.waiting = false;
          c->no_more = true;
        }
        int done = setup_response(c, req, (size_t)r, minor, status, reason, reason_len, h, nh);
        if (done < 0) return done;
        /* The whole body came with the head (every small response): it goes out from where it
         * lies, under the checks the loop's next turn would make, instead of being moved to the
         * buffer's start first (a copy of every small body, callgrind). */
        if (!done && c->rstate == TERN__RESP_LENGTH && c->len - (size_t)r >= c->body_left &&
            c->state == TERN__CONN_ACTIVE && tern__conn_first(c) == req && reads_for(c, req)) {
          size_t n = (size_t)c->body_left, head = (size_t)r;
          if ((r = tern__request_deliver(req, c->buf + head, n)) != 0) return r;
          c->body_left = 0;
          tern__conn_consume(c, head + n);
          return TERN__READ_DONE;
        }
        tern__conn_consume(c, (size_t)r);
        /* The download's first event, unless the whole body came with the head: its 100
         * follows within this read, and a 0 just before it is one more callback per small
         * response (a Swift request's costs about 400 instructions). */
        bool whole = done || (c->rstate == TERN__RESP_LENGTH && c->len >= c->body_left);
        if (!whole && (r = tern__request_progress_download(req, false)) != 0) return r;
        if (done) return TERN__READ_DONE;
        continue;
      }
      case TERN__RESP_LENGTH: {
        size_t n = c->len < c->body_left ? c->len : (size_t)c->body_left;
        if ((r = tern__request_deliver(req, c->buf, n)) != 0) return r;
        c->body_left -= n;
        tern__conn_consume(c, n);
        if (c->body_left == 0) return TERN__READ_DONE;
        if ((r = tern__request_progress_download(req, false)) != 0) return r;
        return 0;
      }
      case TERN__RESP_CHUNKED: return read_chunked(c, req);
      case TERN__RESP_CLOSE: return read_to_close(c, req);
    }
  }
  return 0;
}
