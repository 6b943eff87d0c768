/* The HTTP/1 request head: tern__request_prepare serializes the request line and header fields
 * of each exchange (after opening the body's files and planning the download), and
 * tern__request_rewind readies a request to go out again. */
#include "internal.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The first byte first: each head asks up to eight times, and most answers are no. */
static bool method_is(const tern_request_t *req, const char *m) {
  return req->method[0] == m[0] && strcmp(req->method, m) == 0;
}

/* Appends NUL-terminated pieces, up to a NULL, keeping the string NUL-terminated. The request
 * head is built for every request: printf-style formatting was a third of the engine's
 * per-request instructions (callgrind, bench/RESULTS.md). */
static int cat(tern__str *s, ...) __attribute__((sentinel));
static int cat(tern__str *s, ...) {
  va_list ap;
  va_start(ap, s);
  int r = 0;
  for (const char *p; !r && (p = va_arg(ap, const char *)) != NULL;) {
    size_t n = strlen(p);
    r = tern__str_reserve(s, n + 1);
    if (!r) {
      memcpy(s->data + s->len, p, n + 1);
      s->len += n;
    }
  }
  va_end(ap);
  return r;
}

/* Appends a string literal: its length is known when compiled (the pieces of every head). */
#define PUT_LIT(s, lit) tern__str_append((s), (lit), sizeof(lit) - 1)

/* Appends a NUL-terminated string without its NUL. */
static inline __attribute__((always_inline)) int put(tern__str *s, const char *p) {
  return tern__str_append(s, p, strlen(p));
}

/* The decimal digits of v, in buf. */
static const char *u64_text(uint64_t v, char buf[21]) {
  char *p = buf + 20;
  *p = '\0';
  do {
    *--p = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  return p;
}

/* The TLS settings as one string, "v1|ca_file|ca_path|cert|key|password": the pool's and the
 * TLS contexts' key. Copied piece by piece (every https request makes one; a formatted print
 * cost more than the rest of preparing it). */
static char *tls_identity(const tern_request_t *req) {
  const char *parts[5] = { req->tls.conf.ca_file, req->tls.conf.ca_path, req->tls.conf.cert,
                           req->tls.conf.key, req->tls.conf.password };
  size_t lens[5], total = 2;
  for (int i = 0; i < 5; i++) total += 1 + (lens[i] = parts[i] ? strlen(parts[i]) : 0);
  char *id = tern__malloc(total + 1), *p = id;
  if (id == NULL) return NULL;
  *p++ = 'v';
  *p++ = req->tls.conf.verify ? '1' : '0';
  for (int i = 0; i < 5; i++) {
    *p++ = '|';
    if (lens[i]) memcpy(p, parts[i], lens[i]);
    p += lens[i];
  }
  *p = '\0';
  return id;
}

/* The rare parts of a head are out of line (TERN__COLD), so that the common head, a GET with the
 * default fields, runs through one short stretch of code. This one: Authorization and
 * Proxy-Authorization, when the engine writes them. */
static TERN__COLD int put_credentials(tern_request_t *req, tern__str *h, const char *target,
                                      bool absolute) {
  int r = 0;
  if (req->auth.www.scheme && req->auth.www.user && !req->user_authorization) {
    tern__str wa = { 0 };
    r = tern__auth_credentials(req, &req->auth.www, req->method, target, &wa);
    if (!r && wa.len) {
      r = cat(h, "Authorization: ", NULL);
      if (!r) r = tern__str_append(h, wa.data, wa.len);
      if (!r) r = cat(h, "\r\n", NULL);
    }
    tern__str_free(&wa);
  }
  if (!r && absolute && !req->user_proxy_authorization) {
    tern__str pa = { 0 };
    r = tern__request_proxy_authorization(req, req->method, target, &pa);
    if (!r && pa.len) {
      r = cat(h, "Proxy-Authorization: ", NULL);
      if (!r) r = tern__str_append(h, pa.data, pa.len);
      if (!r) r = cat(h, "\r\n", NULL);
    }
    tern__str_free(&pa);
  }
  return r;
}

/* Range, and If-Range for a resumed download. */
static TERN__COLD int put_range(const tern_request_t *req, tern__str *h, const char *validator) {
  char n1[21], n2[21];
  int r = cat(h, "Range: bytes=", u64_text(req->sink.range_start, n1), "-",
              req->sink.end ? u64_text(req->sink.end - 1, n2) : "", "\r\n", NULL);
  /* If-Range: the partial file continues only if the resource is still the one it began
   * with; otherwise the server sends it whole (200) and the download restarts. */
  if (!r && req->sink.resume_from > 0 && validator[0])
    r = cat(h, "If-Range: ", validator, "\r\n", NULL);
  return r;
}

/* Content-Length or Transfer-Encoding, for a request that has a body or a method that
 * expects one. */
static __attribute__((noinline)) int put_length(const tern_request_t *req, tern__str *h) {
  char n1[21];
  if (req->upload.held) return cat(h, "Content-Length: 0\r\n", NULL);
  if (req->upload.len == UINT64_MAX) return cat(h, "Transfer-Encoding: chunked\r\n", NULL);
  return cat(h, "Content-Length: ", u64_text(req->upload.len, n1), "\r\n", NULL);
}

/* A method other than GET: whether it is idempotent (RFC 9110 9.2.2) and whether it is HEAD. */
static __attribute__((noinline)) void classify_method(tern_request_t *req) {
  req->idempotent = method_is(req, "HEAD") || method_is(req, "PUT") || method_is(req, "DELETE") ||
                    method_is(req, "OPTIONS") || method_is(req, "TRACE");
  req->is_head = method_is(req, "HEAD");
}

static TERN__COLD int put_custom_agent(const tern_config_t *cfg, tern__str *h) {
  return cfg->user_agent[0] ? cat(h, "User-Agent: ", cfg->user_agent, "\r\n", NULL) : 0;
}

int tern__request_prepare(tern_request_t *req, const tern_config_t *cfg) {
  if (method_is(req, "GET")) {
    req->idempotent = true;
    req->is_head = false;
  } else {
    classify_method(req);
  }
  if (TERN__UNLIKELY(req->user_connection_close)) req->persistent = false;

  /* Each hop picks its proxy again: a redirect may change the scheme or reach a no_proxy host. */
  int r = tern__request_choose_proxy(req);
  if (r) return r;
  r = tern__request_open_body(req);
  if (r) return r;

  /* Without settings of its own, a request takes the engine's, by reference: copying them
   * for every request cost more than building its head (callgrind, bench/HISTORY-swift-path.md). */
  if (!req->tls.own) req->tls.conf = cfg->tls;
  if (req->url.tls && req->tls.id == NULL && (req->tls.id = tls_identity(req)) == NULL)
    return TERN_ENOMEM;

  char validator[256]; /* not zeroed whole: four cache lines of stack for every request */
  validator[0] = '\0';
  r = tern__request_prepare_download(req, validator, sizeof validator);
  if (r) return r;

  /* The hop-request callback adds this hop's own headers (e.g. the cookies for its URL). */
  req->hop.headers.len = 0;
  if (req->hop.request_cb && !atomic_load(&req->released)) {
    req->hop.in_request_cb = true;
    int stop = req->hop.request_cb(req, tern_request_get_effective_url(req), req->hop.request_data);
    req->hop.in_request_cb = false;
    if (TERN__UNLIKELY(stop)) {
      tern__request_set_error(req, TERN_ECANCELED, "canceled by the hop-request callback");
      return TERN_ECANCELED;
    }
  }

  /* Through an HTTP proxy, plain http goes in absolute form; https goes through a tunnel. A
   * SOCKS proxy is a tunnel for both: the origin sees an ordinary request. */
  bool absolute = req->proxy.host && req->proxy.kind == TERN__PROXY_KIND_HTTP && !req->url.tls;
  const char *target = req->url.target;
  tern__str abs_target = { 0 };
  if (TERN__UNLIKELY(absolute)) {
    r = cat(&abs_target, "http://", req->url.hostport, req->url.target, NULL);
    if (r) {
      tern__str_free(&abs_target); /* the pieces that fitted before memory ran out */
      return r;
    }
    target = abs_target.data;
  }
  /* An NTLM NEGOTIATE goes without the body, which the AUTHENTICATE hop sends whole (as curl
   * does): a server answering it before reading a large body would end the connection the
   * handshake needs. */
  const tern__auth *ww = &req->auth.www, *pp = &req->auth.proxy;
  req->upload.held = req->upload.kind != TERN__BODY_NONE &&
                     ((ww->user && ww->scheme == TERN_AUTH_NTLM && ww->ntlm_step == 1 &&
                       !req->user_authorization) ||
                      (absolute && pp->user && pp->scheme == TERN_AUTH_NTLM && pp->ntlm_step == 1 &&
                       !req->user_proxy_authorization));
  bool body = req->upload.kind != TERN__BODY_NONE && !req->upload.held;
  tern__str h = { 0 };
  r = tern__str_reserve(&h, 256 + strlen(target) + req->headers.len + req->hop.headers.len);
  if (!r) r = put(&h, req->method);
  if (!r) r = PUT_LIT(&h, " ");
  if (!r) r = put(&h, target);
  if (!r)
    r = TERN__UNLIKELY(req->http10) ? PUT_LIT(&h, " HTTP/1.0\r\n") : PUT_LIT(&h, " HTTP/1.1\r\n");
  if (TERN__UNLIKELY(req->auth.www.scheme || req->auth.proxy.scheme)) {
    if (req->auth.www.scheme == TERN_AUTH_BASIC && req->auth.www.tries == 0)
      req->auth.www.tries = 1;
    if (req->auth.proxy.scheme == TERN_AUTH_BASIC && req->auth.proxy.tries == 0)
      req->auth.proxy.tries = 1; /* a preemptive send is an answer: a 401 to it is final */
  }
  if (!r && TERN__UNLIKELY((req->auth.www.scheme && req->auth.www.user) || absolute))
    r = put_credentials(req, &h, target, absolute);
  if (TERN__UNLIKELY(absolute)) tern__str_free(&abs_target);
  /* The fields every request has go piece by piece, each length known or measured once. */
  if (!r && !req->user_host && !(req->omit & TERN__OMIT_HOST)) {
    r = PUT_LIT(&h, "Host: ");
    if (!r) r = put(&h, req->url.hostport);
    if (!r) r = PUT_LIT(&h, "\r\n");
  }
  if (!r && !req->user_agent && !(req->omit & TERN__OMIT_USER_AGENT)) {
    if (!TERN__UNLIKELY(cfg->user_agent_set)) {
      r = PUT_LIT(&h, "User-Agent: tern/");
      if (!r) r = put(&h, tern_version_string());
      if (!r) r = PUT_LIT(&h, "\r\n");
    } else {
      r = put_custom_agent(cfg, &h);
    }
  }
  if (!r && !req->user_accept && !(req->omit & TERN__OMIT_ACCEPT))
    r = PUT_LIT(&h, "Accept: */*\r\n");
  if (!r && TERN__UNLIKELY(req->sink.range_sent)) r = put_range(req, &h, validator);
  if (!r && TERN__UNLIKELY(req->upload.gzip && body))
    r = cat(&h, "Content-Encoding: gzip\r\n", NULL);
  if (!r && req->sink.decode_mode != TERN_DECODE_OFF && !req->user_accept_encoding &&
      !(req->omit & TERN__OMIT_ACCEPT_ENCODING)) {
    r = PUT_LIT(&h, "Accept-Encoding: ");
    if (!r) r = put(&h, tern__accept_encoding());
    if (!r) r = PUT_LIT(&h, "\r\n");
  }
  /* POST, PUT and PATCH say their length even without a body; other methods only with one
   * (a held or chunked body is a body: tern__request_open_body). */
  if (!r && (req->upload.kind != TERN__BODY_NONE || method_is(req, "POST") ||
             method_is(req, "PUT") || method_is(req, "PATCH")))
    r = put_length(req, &h);
  req->expect_continue =
      body && req->expect_min >= 0 && !req->http10 && !(req->omit & TERN__OMIT_EXPECT) &&
      req->upload.len > 0 &&
      (req->upload.len == UINT64_MAX || req->upload.len >= (uint64_t)req->expect_min);
  if (!r && TERN__UNLIKELY(req->expect_continue)) r = cat(&h, "Expect: 100-continue\r\n", NULL);
  if (!r && TERN__UNLIKELY(req->persistent == req->http10) && !req->user_connection_close &&
      !(req->omit & TERN__OMIT_CONNECTION))
    r = cat(&h, req->http10 ? "Connection: keep-alive\r\n" : "Connection: close\r\n", NULL);
  if (!r && req->headers.len) r = tern__str_append(&h, req->headers.data, req->headers.len);
  if (!r && req->hop.headers.len)
    r = tern__str_append(&h, req->hop.headers.data, req->hop.headers.len);
  if (!r) r = tern__str_append(&h, "\r\n", 3); /* with a NUL, for tern_request_get_request_head */
  if (TERN__UNLIKELY(r)) {
    if (r == TERN_EBADHEADER)
      tern__request_set_error(req, r, "%s: a control character in the Digest credentials",
                              req->url.hostport);
    tern__str_free(&h);
    return r;
  }
  h.len--;
  free(req->head);
  req->head = h.data;
  req->head_len = h.len;
  return 0;
}

void tern__request_rewind(tern_request_t *req) {
  req->send = TERN__SEND_NOTHING;
  req->h2.stream_id = 0;
  req->h2.close_code = 0;
  req->h2.head = req->h2.got_frames = false;
  req->h2.status = 0;
  req->h2.fields.len = 0;
  req->h2.head_text.len = 0;
  req->h2.nfields = 0;
  req->h2.unconsumed = 0;
  req->error = 0; /* an abandoned attempt's failure is not the request's */
  req->errmsg[0] = '\0';
  req->upload.waiting = false;
  req->reused = false;
  req->conn = NULL;
  req->resp.status = 0;
  req->resp.minor = -1;
  req->resp.version = 0;
  req->resp.reason = NULL;
  free(req->resp.block);
  req->resp.block = NULL;
  req->resp.count = 0;
  req->resp.names = 0;
  req->resp.body.len = 0;
  req->resp.interim.len = 0;
  req->resp.received = 0;
  req->resp.content_length = -1;
  req->resp.offset = 0;
  req->upload.sent = 0;
  req->upload.seg_index = 0;
  req->upload.seg_offset = 0;
  req->sink.to_file = false;
  req->sink.keep_error_body = false;
  req->sink.skip_bytes = 0;
  req->sink.range_done = false;
  req->sink.writing_part = false;
  req->sink.delivered = 0;
  req->sink.decoded_encoding = NULL;
  req->tls.version = NULL;
  req->tls.resumed = req->tls.cert_requested = false;
  tern__encoder_free(req->upload.encoder);
  req->upload.encoder = NULL;
  tern__decoder_free(req->sink.decoder);
  req->sink.decoder = NULL;
  tern__close_fd(&req->sink.fd);
}
