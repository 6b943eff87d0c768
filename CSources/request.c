/* The request object: its lifecycle (new, reference counts, destroy) and the public setters
 * that configure it before it is submitted. What happens to it on the wire lives elsewhere:
 * request_head.c (the head), body.c (the body sent), response.c (what came back), sink.c (where
 * the response body goes), hops.c (redirects and challenges), auth.c (credentials). */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

atomic_uint_fast64_t tern__requests_live;

/*
 * A thread's last destroyed request, kept for the next tern_request_new on that thread. A
 * request (about 2 KiB) is larger than glibc's per-thread cache serves (1,032 bytes), so its
 * calloc and free each went through the shared bins: about 330 and 150 instructions of a plain
 * GET's 7,700 in tern-c (callgrind). One block per thread is enough for the common shape, an
 * engine's loop thread that frees each request and, in the completion callback, makes the next.
 * The thread's exit frees it. Not kept under AddressSanitizer (or its hardware-assisted
 * variant), whose use-after-free checks a recycled block would blind (a Valgrind run of a plain
 * build sees a parked block as live), nor in the allocation-failure torture build, which must
 * see every request's allocation. Linux only: the key's destructor reads the thread-local
 * pointer, which glibc and musl keep valid while destructors run; elsewhere (Darwin) the
 * thread's locals may be gone by then.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_HWADDRESS__) || defined(TERN_TORTURE) ||   \
    !defined(__linux__)
#  define TERN__SPARE_REQUEST 0
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(hwaddress_sanitizer)
#    define TERN__SPARE_REQUEST 0
#  endif
#endif
#ifndef TERN__SPARE_REQUEST
#  define TERN__SPARE_REQUEST 1
#endif

#if TERN__SPARE_REQUEST
#  include <pthread.h>

static _Thread_local tern_request_t *spare;
/* The key's only job is its destructor, which frees a spare when its thread ends; a thread
 * sets it once, the first time it keeps one. */
static _Thread_local bool spare_key_set;
static pthread_key_t spare_key;
static pthread_once_t spare_key_once = PTHREAD_ONCE_INIT;
static bool spare_key_made;

/* Clearing spare_key_set makes a request freed later in the same thread exit (by another key's
 * destructor) set the key again, which has glibc run another round of destructors for it. */
static void free_spare(void *unused) {
  (void)unused;
  free(spare);
  spare = NULL;
  spare_key_set = false;
}

static void make_spare_key(void) {
  spare_key_made = pthread_key_create(&spare_key, free_spare) == 0;
}

static tern_request_t *take_spare(void) {
  tern_request_t *req = spare;
  if (req == NULL) return NULL;
  spare = NULL;
  memset(req, 0, sizeof *req);
  return req;
}

/* Keeps `req` (all its parts freed) as the thread's spare, or frees it. */
static void release_block(tern_request_t *req) {
  if (spare == NULL && !spare_key_set) {
    pthread_once(&spare_key_once, make_spare_key);
    spare_key_set = spare_key_made && pthread_setspecific(spare_key, &spare_key_set) == 0;
  }
  if (spare == NULL && spare_key_set) {
    spare = req;
    return;
  }
  free(req);
}
#else
static tern_request_t *take_spare(void) { return NULL; }
static void release_block(tern_request_t *req) { free(req); }
#endif

int tern_request_new(tern_request_t **out) {
  if (out == NULL) return TERN_EINVAL;
  *out = NULL;
  tern_request_t *req = take_spare();
  if (req == NULL && (req = tern__calloc(1, sizeof *req)) == NULL) return TERN_ENOMEM;
  req->method = tern__method_get;
  tern__list_init(&req->node);
  tern__list_init(&req->cancel_node);
  atomic_init(&req->refs, 1);
  atomic_init(&req->state, TERN__REQ_NEW);
  req->timeouts[TERN_TIMEOUT_CONNECT] = 30000;
  req->timeouts[TERN_TIMEOUT_HEADERS] = 60000;
  req->timeouts[TERN_TIMEOUT_BODY] = 60000;
  req->timeouts[TERN_TIMEOUT_TOTAL] = 0;
  req->persistent = true;
  tern__tls_conf_init(&req->tls.conf);
  req->sink.decoded_max_ratio = 200;
  req->expect_min = 1 << 20;
  req->expect_wait_ms = 1000;
  req->upload.fd = -1;
  req->sink.fd = -1;
  req->resp.content_length = -1;
  req->resp.minor = -1;
  req->notify.last_percent = -1;
  req->notify.last_up_percent = -1;
  req->proxy.chosen = TERN__PROXY_NONE;
  for (int i = 0; i < 5; i++) req->times_ns[i] = -1;
  atomic_fetch_add(&tern__requests_live, 1);
  *out = req;
  return 0;
}

static void destroy(tern_request_t *req) {
  tern__method_free(req->method);
  tern__url_free(&req->url);
  tern__str_free(&req->headers);
  free(req->sink.path);
  free(req->sink.target_path);
  free(req->sink.part_path);
  free(req->sink.validator_path);
  tern__str_free(&req->resp.interim);
  tern__str_free(&req->h2.fields);
  tern__str_free(&req->h2.head_text);
  tern__decoder_free(req->sink.decoder);
  tern__encoder_free(req->upload.encoder);
  tern__request_clear_body(req);
  free(req->url_str);
  free(req->effective_url);
  tern__str_free(&req->hop.headers);
  free(req->proxy.host);
  for (int i = 0; i < 3; i++) tern__proxy_conf_clear(&req->proxy.conf[i]);
  free(req->proxy.no_proxy);
  free(req->proxy.list_fixed);
  free(req->proxy.list);
  free(req->proxy.list_url);
  tern__auth_clear(&req->proxy.given);
  tern__auth_clear(&req->auth.www);
  tern__auth_clear(&req->auth.proxy);
  if (req->tls.own) tern__tls_conf_clear(&req->tls.conf);
  free(req->tls.id);
  free(req->head);
  free(req->resp.block);
  tern__str_free(&req->resp.body);
  tern__close_fd(&req->upload.fd);
  tern__close_fd(&req->sink.fd);
  tern__bandwidth_unref(req->bandwidth);
  tern__bandwidth_unref(req->send_budget);
  release_block(req);
  atomic_fetch_sub(&tern__requests_live, 1);
}

void tern__request_ref(tern_request_t *req) { atomic_fetch_add(&req->refs, 1); }

void tern__request_unref(tern_request_t *req) {
  if (atomic_fetch_sub(&req->refs, 1) == 1) destroy(req);
}

#define CHECK_NEW(req)                                                                             \
  do {                                                                                             \
    if ((req) == NULL) return TERN_EINVAL;                                                         \
    if (atomic_load(&(req)->state) != TERN__REQ_NEW) return TERN_EBUSY;                            \
  } while (0)

static bool is_tchar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool is_token(const char *s) {
  if (s == NULL || *s == '\0') return false;
  for (; *s; s++)
    if (!is_tchar((unsigned char)*s)) return false;
  return true;
}

int tern_request_set_url(tern_request_t *req, const char *url) {
  CHECK_NEW(req);
  tern__url u;
  int r = tern__url_parse(&u, url);
  if (r) return r;
  char *copy = tern__strdup(url);
  if (copy == NULL) {
    tern__url_free(&u);
    return TERN_ENOMEM;
  }
  tern__url_free(&req->url);
  req->url = u;
  req->has_url = true;
  free(req->url_str);
  req->url_str = copy;
  if (u.userinfo && (req->auth.www.user == NULL || req->auth.from_url)) {
    r = tern__auth_set_userinfo(&req->auth.www, u.userinfo, TERN_AUTH_ANY);
    if (r) return r;
    req->auth.from_url = true;
  }
  return 0;
}

int tern_request_set_method(tern_request_t *req, const char *method) {
  CHECK_NEW(req);
  if (!is_token(method)) return TERN_EINVAL;
  char *m = tern__strdup(method);
  if (m == NULL) return TERN_ENOMEM;
  tern__method_free(req->method);
  req->method = m;
  return 0;
}

int tern_request_add_header(tern_request_t *req, const char *name, const char *value) {
  CHECK_NEW(req);
  if (!is_token(name) || value == NULL) return TERN_EBADHEADER;
  /* Field values are VCHAR, obs-text, SP and HTAB: any other control byte (CR and LF above all)
   * would let the caller forge headers or a second request. */
  for (const unsigned char *p = (const unsigned char *)value; *p; p++)
    if ((*p < 0x20 && *p != '\t') || *p == 0x7f) return TERN_EBADHEADER;
  if (strcasecmp(name, "content-length") == 0 || strcasecmp(name, "transfer-encoding") == 0)
    return TERN_EBADHEADER;
  size_t vlen = strlen(value);
  /* An empty value goes out as "Name:" (curl's -H "Name;"). */
  int r = tern__str_appendf(&req->headers, vlen ? "%s: %s\r\n" : "%s:%s\r\n", name, value);
  if (r) return r;
  if (strcasecmp(name, "host") == 0) req->user_host = true;
  if (strcasecmp(name, "user-agent") == 0) req->user_agent = true;
  if (strcasecmp(name, "accept") == 0) req->user_accept = true;
  if (strcasecmp(name, "accept-encoding") == 0) req->user_accept_encoding = true;
  if (strcasecmp(name, "connection") == 0 && tern__has_token(value, vlen, "close"))
    req->user_connection_close = true;
  if (strcasecmp(name, "authorization") == 0) req->user_authorization = true;
  if (strcasecmp(name, "proxy-authorization") == 0) req->user_proxy_authorization = true;
  return 0;
}

int tern_request_omit_header(tern_request_t *req, const char *name) {
  CHECK_NEW(req);
  if (!is_token(name)) return TERN_EBADHEADER;
  if (strcasecmp(name, "content-length") == 0 || strcasecmp(name, "transfer-encoding") == 0)
    return TERN_EBADHEADER;
  static const char *const names[] = { "host",       "user-agent", "accept", "accept-encoding",
                                       "connection", "expect",     NULL };
  for (unsigned i = 0; names[i]; i++)
    if (strcasecmp(name, names[i]) == 0) req->omit |= 1u << i;
  return 0;
}

int tern_request_set_body(tern_request_t *req, const void *data, size_t len) {
  CHECK_NEW(req);
  if (data == NULL && len > 0) return TERN_EINVAL;
  void *copy = NULL;
  if (len > 0) {
    copy = tern__malloc(len);
    if (copy == NULL) return TERN_ENOMEM;
    memcpy(copy, data, len);
  }
  tern__request_clear_body(req);
  req->upload.kind = TERN__BODY_MEM;
  req->upload.mem = copy;
  req->upload.mem_len = len;
  return 0;
}

int tern_request_set_body_file(tern_request_t *req, const char *path, uint64_t offset,
                               uint64_t end) {
  CHECK_NEW(req);
  if (path == NULL || (end != 0 && end < offset)) return TERN_EINVAL;
  char *p = tern__strdup(path);
  if (p == NULL) return TERN_ENOMEM;
  tern__request_clear_body(req);
  req->upload.kind = TERN__BODY_FILE;
  req->upload.path = p;
  req->upload.offset = offset;
  req->upload.end = end;
  return 0;
}

static int add_segment(tern_request_t *req, const void *data, size_t len, const char *path,
                       uint64_t offset, uint64_t end) {
  CHECK_NEW(req);
  if ((data == NULL && len > 0 && path == NULL) || (end != 0 && end < offset)) return TERN_EINVAL;
  if (req->upload.kind != TERN__BODY_SEGMENTS) tern__request_clear_body(req);
  tern__segment *grown =
      tern__realloc(req->upload.segments, (req->upload.nsegments + 1) * sizeof *grown);
  if (grown == NULL) return TERN_ENOMEM;
  req->upload.segments = grown;
  tern__segment seg = { NULL, NULL, offset, end, len, -1 };
  if (path) {
    if ((seg.path = tern__strdup(path)) == NULL) return TERN_ENOMEM;
  } else if ((seg.data = tern__malloc(len ? len : 1)) == NULL) {
    return TERN_ENOMEM;
  } else if (len) {
    memcpy(seg.data, data, len);
  }
  req->upload.segments[req->upload.nsegments++] = seg;
  req->upload.kind = TERN__BODY_SEGMENTS;
  return 0;
}

int tern_request_add_body_segment(tern_request_t *req, const void *data, size_t len) {
  return add_segment(req, data, len, NULL, 0, 0);
}

int tern_request_add_body_segment_file(tern_request_t *req, const char *path, uint64_t offset,
                                       uint64_t end) {
  if (path == NULL) return TERN_EINVAL;
  return add_segment(req, NULL, 0, path, offset, end);
}

int tern_request_set_body_cb(tern_request_t *req, int64_t length, tern_read_cb cb,
                             void *user_data) {
  CHECK_NEW(req);
  if (cb == NULL || length < -1) return TERN_EINVAL;
  tern__request_clear_body(req);
  req->upload.kind = TERN__BODY_CB;
  req->upload.cb = cb;
  req->upload.cb_data = user_data;
  req->upload.cb_length = length;
  return 0;
}

int tern_request_set_download_any_status(tern_request_t *req, int enabled) {
  CHECK_NEW(req);
  req->sink.any_status = enabled != 0;
  return 0;
}

int tern_request_set_download_file(tern_request_t *req, const char *path, uint64_t offset,
                                   uint64_t end, int resume) {
  CHECK_NEW(req);
  if (path == NULL || (end != 0 && end <= offset) || resume < 0 || resume > TERN_RESUME_PART)
    return TERN_EINVAL;
  char *p = tern__strdup(path);
  if (p == NULL) return TERN_ENOMEM;
  free(req->sink.path);
  req->sink.path = p;
  free(req->sink.target_path);
  free(req->sink.part_path);
  free(req->sink.validator_path);
  req->sink.target_path = req->sink.part_path = req->sink.validator_path = NULL;
  req->sink.offset = offset;
  req->sink.end = end;
  req->sink.resume = resume != 0;
  req->sink.part_only = resume == TERN_RESUME_PART;
  req->sink.kind = TERN__SINK_FILE;
  return 0;
}

int tern_request_set_data_cb(tern_request_t *req, tern_data_cb cb, void *user_data) {
  CHECK_NEW(req);
  if (cb == NULL) return TERN_EINVAL;
  req->sink.kind = TERN__SINK_CB;
  req->sink.data_cb = cb;
  req->sink.data_cb_data = user_data;
  return 0;
}

int tern_request_set_complete_cb(tern_request_t *req, tern_complete_cb cb, void *user_data) {
  CHECK_NEW(req);
  req->notify.complete = cb;
  req->notify.complete_data = user_data;
  return 0;
}

int tern_request_set_progress_cb(tern_request_t *req, tern_progress_cb cb, void *user_data) {
  CHECK_NEW(req);
  req->notify.progress = cb;
  req->notify.progress_data = user_data;
  return 0;
}

int tern_request_set_hop_response_cb(tern_request_t *req, tern_hop_response_cb cb,
                                     void *user_data) {
  CHECK_NEW(req);
  req->hop.response_cb = cb;
  req->hop.response_data = user_data;
  return 0;
}

int tern_request_set_whole_at_completion(tern_request_t *req, int on) {
  CHECK_NEW(req);
  req->hop.whole_at_completion = on != 0;
  return 0;
}

int tern_request_set_timeout(tern_request_t *req, tern_timeout which, uint64_t ms) {
  CHECK_NEW(req);
  if ((unsigned)which > TERN_TIMEOUT_TOTAL) return TERN_EINVAL;
  req->timeouts[which] = ms;
  return 0;
}

int tern_request_set_persistent(tern_request_t *req, int persistent) {
  CHECK_NEW(req);
  req->persistent = persistent != 0;
  return 0;
}

int tern_request_set_pipelining(tern_request_t *req, int enabled) {
  CHECK_NEW(req);
  req->pipelining = enabled != 0;
  return 0;
}

int tern_request_set_http10(tern_request_t *req, int enabled) {
  CHECK_NEW(req);
  req->http10 = enabled != 0;
  return 0;
}

int tern_request_set_http_version(tern_request_t *req, tern_http_version version) {
  CHECK_NEW(req);
  if ((int)version < TERN_HTTP_VERSION_DEFAULT || version > TERN_HTTP_VERSION_2_PRIOR_KNOWLEDGE)
    return TERN_EINVAL;
  req->http_version = version;
  return 0;
}

int tern__request_proto(const tern_request_t *req) {
  /* NTLM authenticates a connection, which HTTP/2 shares among requests (why servers answer it
   * with HTTP_1_1_REQUIRED): credentials for NTLM alone keep HTTP/1.1 from the start; with
   * other schemes allowed too, an NTLM offer over HTTP/2 moves the next hops to HTTP/1.1. */
  const tern__auth *wa = &req->auth.www;
  bool ntlm_only = wa->user && (wa->schemes & TERN_AUTH_NTLM) &&
                   !(wa->schemes & (TERN_AUTH_BASIC | TERN_AUTH_DIGEST));
  if (req->http10 || ntlm_only || req->http11_required ||
      req->http_version == TERN_HTTP_VERSION_1_1)
    return TERN__PROTO_H1;
  /* A request's own rate cap, sending budget or group budget counts its connection's bytes:
   * exact on a connection of its own, not on one shared by other requests' streams. */
  if (req->max_recv_speed || req->send_budget || req->bandwidth) return TERN__PROTO_H1;
  /* Through an HTTP proxy without a tunnel, requests go in absolute form: HTTP/1.1. */
  if (req->proxy.host && req->proxy.kind == TERN__PROXY_KIND_HTTP && !req->url.tls)
    return TERN__PROTO_H1;
  /* Over TLS, prior knowledge is what ALPN says anyway (curl offers http/1.1 too). */
  if (req->url.tls) return TERN__PROTO_ALPN;
  return req->http_version == TERN_HTTP_VERSION_2_PRIOR_KNOWLEDGE ? TERN__PROTO_H2 : TERN__PROTO_H1;
}

int tern_request_set_expect_continue(tern_request_t *req, int64_t min_body, uint64_t wait_ms) {
  CHECK_NEW(req);
  if (min_body < -1) return TERN_EINVAL;
  req->expect_min = min_body;
  req->expect_wait_ms = wait_ms;
  return 0;
}

int tern_request_set_body_gzip(tern_request_t *req, int enabled) {
  CHECK_NEW(req);
  req->upload.gzip = enabled != 0;
  return 0;
}

int tern_request_set_follow_redirects(tern_request_t *req, unsigned max) {
  CHECK_NEW(req);
  req->hop.follow_max = max;
  return 0;
}

int tern_request_set_redirect_flags(tern_request_t *req, unsigned flags) {
  CHECK_NEW(req);
  if (flags & ~31u) return TERN_EINVAL;
  req->hop.redirect_flags = flags;
  return 0;
}

int tern_request_set_hop_request_cb(tern_request_t *req, tern_hop_request_cb cb, void *user_data) {
  CHECK_NEW(req);
  req->hop.request_cb = cb;
  req->hop.request_data = user_data;
  return 0;
}

int tern_request_add_hop_header(tern_request_t *req, const char *name, const char *value) {
  if (req == NULL || !req->hop.in_request_cb) return TERN_EINVAL;
  if (!is_token(name) || value == NULL) return TERN_EBADHEADER;
  for (const unsigned char *p = (const unsigned char *)value; *p; p++)
    if ((*p < 0x20 && *p != '\t') || *p == 0x7f) return TERN_EBADHEADER;
  if (strcasecmp(name, "content-length") == 0 || strcasecmp(name, "transfer-encoding") == 0 ||
      strcasecmp(name, "host") == 0)
    return TERN_EBADHEADER;
  return tern__str_appendf(&req->hop.headers, "%s: %s\r\n", name, value);
}

int tern_request_set_auth(tern_request_t *req, const char *user, const char *password,
                          unsigned schemes) {
  CHECK_NEW(req);
  if (user == NULL || (schemes & TERN_AUTH_ANY) == 0) return TERN_EINVAL;
  int r = tern__auth_set(&req->auth.www, user, password, schemes);
  if (!r) req->auth.from_url = false;
  return r;
}

int tern_request_set_auth_cb(tern_request_t *req, tern_auth_cb cb, void *user_data) {
  CHECK_NEW(req);
  req->auth.cb = cb;
  req->auth.cb_data = user_data;
  return 0;
}

int tern_request_set_proxy(tern_request_t *req, const char *proxy_url) {
  CHECK_NEW(req);
  return tern__proxy_conf_set(&req->proxy.conf[TERN__PROXY_ANY], proxy_url);
}

int tern_request_set_scheme_proxy(tern_request_t *req, const char *scheme, const char *proxy_url) {
  CHECK_NEW(req);
  if (scheme == NULL) return TERN_EINVAL;
  if (strcasecmp(scheme, "http") == 0)
    return tern__proxy_conf_set(&req->proxy.conf[TERN__PROXY_HTTP], proxy_url);
  if (strcasecmp(scheme, "https") == 0)
    return tern__proxy_conf_set(&req->proxy.conf[TERN__PROXY_HTTPS], proxy_url);
  return TERN_EINVAL;
}

int tern_request_set_proxy_list(tern_request_t *req, const char *list) {
  CHECK_NEW(req);
  char *copy = NULL;
  if (list && list[0] && (copy = tern__strdup(list)) == NULL) return TERN_ENOMEM;
  free(req->proxy.list_fixed);
  req->proxy.list_fixed = copy;
  return 0;
}

int tern_request_set_proxy_callback(tern_request_t *req, tern_proxy_cb cb, void *user_data) {
  CHECK_NEW(req);
  req->proxy.list_cb = cb;
  req->proxy.list_cb_data = user_data;
  return 0;
}

int tern_request_set_no_proxy(tern_request_t *req, const char *hosts) {
  CHECK_NEW(req);
  char *copy = NULL;
  if (hosts && hosts[0] && (copy = tern__strdup(hosts)) == NULL) return TERN_ENOMEM;
  free(req->proxy.no_proxy);
  req->proxy.no_proxy = copy;
  return 0;
}

int tern_request_set_proxy_auth(tern_request_t *req, const char *user, const char *password,
                                unsigned schemes) {
  CHECK_NEW(req);
  if ((schemes & TERN_AUTH_ANY) == 0) return TERN_EINVAL;
  return tern__auth_set(&req->proxy.given, user, password, schemes);
}

int tern_request_set_decoding(tern_request_t *req, tern_decode_mode mode) {
  CHECK_NEW(req);
  if ((unsigned)mode > TERN_DECODE_OFF) return TERN_EINVAL;
  req->sink.decode_mode = mode;
  return 0;
}

int tern_request_set_decoding_limits(tern_request_t *req, uint64_t max_bytes, unsigned max_ratio) {
  CHECK_NEW(req);
  req->sink.decoded_max_bytes = max_bytes;
  req->sink.decoded_max_ratio = max_ratio;
  return 0;
}

/* The first TLS setter makes the request's TLS settings its own, from the library's defaults:
 * whatever the engine's were is no longer looked at (and was never the request's to free). */
static void own_tls(tern_request_t *req) {
  if (req->tls.own) return;
  req->tls.own = true;
  tern__tls_conf_init(&req->tls.conf);
}

int tern_request_set_tls_verify(tern_request_t *req, int verify) {
  CHECK_NEW(req);
  own_tls(req);
  req->tls.conf.verify = verify != 0;
  return 0;
}

/* Replaces *slot with a copy of value (NULL clears it). */
int tern_request_set_tls_ca_file(tern_request_t *req, const char *path) {
  CHECK_NEW(req);
  own_tls(req);
  return tern__tls_conf_set_string(&req->tls.conf.ca_file, path);
}

int tern_request_set_tls_ca_path(tern_request_t *req, const char *dir) {
  CHECK_NEW(req);
  own_tls(req);
  return tern__tls_conf_set_string(&req->tls.conf.ca_path, dir);
}

int tern_request_set_tls_client_cert(tern_request_t *req, const char *cert_file,
                                     const char *key_file, const char *password) {
  CHECK_NEW(req);
  if (cert_file == NULL && (key_file || password)) return TERN_EINVAL;
  own_tls(req);
  return tern__tls_conf_set_client_cert(&req->tls.conf, cert_file, key_file, password);
}

int tern_request_set_max_recv_speed(tern_request_t *req, uint64_t bytes_per_second) {
  CHECK_NEW(req);
  req->max_recv_speed = bytes_per_second;
  return 0;
}

int tern_request_set_bandwidth(tern_request_t *req, tern_bandwidth_t *bw) {
  CHECK_NEW(req);
  if (bw) tern__bandwidth_ref(bw);
  tern__bandwidth_unref(req->bandwidth);
  req->bandwidth = bw;
  return 0;
}

int tern_request_set_max_send_speed(tern_request_t *req, uint64_t bytes_per_second) {
  CHECK_NEW(req);
  if (bytes_per_second == 0) {
    tern__bandwidth_unref(req->send_budget);
    req->send_budget = NULL;
    return 0;
  }
  if (req->send_budget) return tern_bandwidth_set_max_speed(req->send_budget, 0, bytes_per_second);
  return tern_bandwidth_new(&req->send_budget, 0, bytes_per_second);
}

int tern_request_set_priority(tern_request_t *req, int priority) {
  CHECK_NEW(req);
  req->priority = priority;
  return 0;
}

int tern_request_set_buffer_size(tern_request_t *req, size_t bytes) {
  CHECK_NEW(req);
  if (bytes != 0 && (bytes < 1024 || bytes > (1u << 30))) return TERN_EINVAL;
  req->buffer_size = bytes;
  return 0;
}

void tern_request_set_user_data(tern_request_t *req, void *user_data) {
  if (req) req->user_data = user_data;
}
