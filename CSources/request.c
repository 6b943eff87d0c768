/* The request object: settings, the serialized request head, body sources, body sinks and
 * progress. Connection code (conn.c) drives it; nothing here touches a socket. */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* A non-2xx response with a file sink keeps at most this much of its body, for the caller to
 * read the server's explanation; the file itself is left alone. */
#define ERROR_BODY_LIMIT (1u << 20)
/* Memory sinks reserve the announced Content-Length up front, but never more than this, so a
 * lying server cannot make one header allocate gigabytes. */
#define PREALLOC_LIMIT (16u << 20)

atomic_uint_fast64_t tern__requests_live;

tern_request_t *tern_request_new(void) {
  tern_request_t *req = tern__calloc(1, sizeof *req);
  if (req == NULL) return NULL;
  req->method = tern__strdup("GET");
  if (req->method == NULL) {
    free(req);
    return NULL;
  }
  tern__list_init(&req->node);
  tern__list_init(&req->cancel_node);
  atomic_init(&req->refs, 1);
  atomic_init(&req->state, TERN__REQ_NEW);
  req->timeouts[TERN_TIMEOUT_CONNECT] = 30000;
  req->timeouts[TERN_TIMEOUT_HEADERS] = 60000;
  req->timeouts[TERN_TIMEOUT_BODY] = 60000;
  req->timeouts[TERN_TIMEOUT_TOTAL] = 0;
  req->persistent = true;
  req->tls_verify = true;
  req->decoded_max_ratio = 200;
  req->expect_min = 1 << 20;
  req->expect_wait_ms = 1000;
  req->body_fd = -1;
  req->dl_fd = -1;
  req->content_length = -1;
  req->minor = -1;
  req->last_percent = -1;
  req->last_up_percent = -1;
  for (int i = 0; i < 5; i++) req->times_ns[i] = -1;
  atomic_fetch_add(&tern__requests_live, 1);
  return req;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void free_segments(tern_request_t *req);

static void clear_auth(tern__auth *a) {
  if (a->password) memset(a->password, 0, strlen(a->password));
  free(a->user);
  free(a->password);
  memset(a, 0, sizeof *a);
}

/* Percent-decodes n bytes of userinfo ("alice", "p%40ss"). */
static char *pct_decode(const char *s, size_t n) {
  char *out = tern__malloc(n + 1);
  if (out == NULL) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
        isxdigit((unsigned char)s[i + 2])) {
      char hex[3] = {s[i + 1], s[i + 2], 0};
      out[k++] = (char)strtol(hex, NULL, 16);
      i += 2;
    } else {
      out[k++] = s[i];
    }
  }
  out[k] = '\0';
  return out;
}

static int set_auth(tern__auth *a, const char *user, const char *password, unsigned schemes) {
  char *u = user ? tern__strdup(user) : NULL;
  char *p = tern__strdup(password ? password : "");
  if ((user && u == NULL) || p == NULL) {
    free(u);
    free(p);
    return TERN_ENOMEM;
  }
  clear_auth(a);
  a->user = u;
  a->password = p;
  a->schemes = schemes & TERN_AUTH_ANY;
  /* Basic alone is sent at once; with a choice, the server's challenge picks. */
  a->scheme = u && a->schemes == TERN_AUTH_BASIC ? TERN_AUTH_BASIC : 0;
  return 0;
}

/* "user:password" (percent-encoded) into an auth slot with any scheme. */
static int set_auth_userinfo(tern__auth *a, const char *userinfo) {
  const char *colon = strchr(userinfo, ':');
  size_t ulen = colon ? (size_t)(colon - userinfo) : strlen(userinfo);
  char *u = pct_decode(userinfo, ulen);
  char *p = colon ? pct_decode(colon + 1, strlen(colon + 1)) : tern__strdup("");
  int r = (u && p) ? set_auth(a, u, p, TERN_AUTH_ANY) : TERN_ENOMEM;
  if (p) memset(p, 0, strlen(p));
  free(u);
  free(p);
  return r;
}

static void destroy(tern_request_t *req) {
  free(req->method);
  tern__url_free(&req->url);
  tern__str_free(&req->headers);
  free(req->body_mem);
  free(req->body_path);
  free(req->dl_path);
  free(req->target_path);
  free(req->part_path);
  free(req->validator_path);
  tern__str_free(&req->interim);
  tern__decoder_free(req->decoder);
  tern__encoder_free(req->encoder);
  free_segments(req);
  free(req->url_str);
  free(req->effective_url);
  tern__str_free(&req->hop_headers);
  free(req->proxy_host);
  clear_auth(&req->www);
  clear_auth(&req->proxy_auth);
  free(req->tls_ca_file);
  free(req->tls_ca_path);
  free(req->tls_cert);
  free(req->tls_key);
  if (req->tls_password) memset(req->tls_password, 0, strlen(req->tls_password));
  free(req->tls_password);
  free(req->tls_id);
  free(req->head);
  free(req->resp_block);
  tern__str_free(&req->body);
  close_fd(&req->body_fd);
  close_fd(&req->dl_fd);
  free(req);
  atomic_fetch_sub(&tern__requests_live, 1);
}

void tern__request_ref(tern_request_t *req) { atomic_fetch_add(&req->refs, 1); }

void tern__request_unref(tern_request_t *req) {
  if (atomic_fetch_sub(&req->refs, 1) == 1) destroy(req);
}

void tern_request_free(tern_request_t *req) {
  if (req == NULL) return;
  atomic_store(&req->released, true);
  tern_request_cancel(req);
  tern__request_unref(req);
}

#define CHECK_NEW(req)                                                               \
  do {                                                                               \
    if ((req) == NULL) return TERN_EINVAL;                                           \
    if (atomic_load(&(req)->state) != TERN__REQ_NEW) return TERN_EBUSY;              \
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
  if (u.userinfo && (req->www.user == NULL || req->url_credentials)) {
    r = set_auth_userinfo(&req->www, u.userinfo);
    if (r) return r;
    req->url_credentials = true;
  }
  return 0;
}

int tern_request_set_method(tern_request_t *req, const char *method) {
  CHECK_NEW(req);
  if (!is_token(method)) return TERN_EINVAL;
  char *m = tern__strdup(method);
  if (m == NULL) return TERN_ENOMEM;
  free(req->method);
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
  int r = tern__str_appendf(&req->headers, "%s: %s\r\n", name, value);
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

static void free_segments(tern_request_t *req) {
  for (size_t i = 0; i < req->nsegments; i++) {
    free(req->segments[i].data);
    free(req->segments[i].path);
    close_fd(&req->segments[i].fd);
  }
  free(req->segments);
  req->segments = NULL;
  req->nsegments = 0;
}

static void clear_body(tern_request_t *req) {
  free_segments(req);
  free(req->body_mem);
  req->body_mem = NULL;
  req->body_mem_len = 0;
  free(req->body_path);
  req->body_path = NULL;
  req->body_cb = NULL;
  req->body_kind = TERN__BODY_NONE;
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
  clear_body(req);
  req->body_kind = TERN__BODY_MEM;
  req->body_mem = copy;
  req->body_mem_len = len;
  return 0;
}

int tern_request_set_body_file(tern_request_t *req, const char *path, uint64_t offset,
                               uint64_t end) {
  CHECK_NEW(req);
  if (path == NULL || (end != 0 && end < offset)) return TERN_EINVAL;
  char *p = tern__strdup(path);
  if (p == NULL) return TERN_ENOMEM;
  clear_body(req);
  req->body_kind = TERN__BODY_FILE;
  req->body_path = p;
  req->body_offset = offset;
  req->body_end = end;
  return 0;
}

static int add_segment(tern_request_t *req, const void *data, size_t len, const char *path,
                       uint64_t offset, uint64_t end) {
  CHECK_NEW(req);
  if ((data == NULL && len > 0 && path == NULL) || (end != 0 && end < offset)) return TERN_EINVAL;
  if (req->body_kind != TERN__BODY_SEGMENTS) clear_body(req);
  tern__segment *grown = tern__realloc(req->segments, (req->nsegments + 1) * sizeof *grown);
  if (grown == NULL) return TERN_ENOMEM;
  req->segments = grown;
  tern__segment seg = {NULL, NULL, offset, end, len, -1};
  if (path) {
    if ((seg.path = tern__strdup(path)) == NULL) return TERN_ENOMEM;
  } else if ((seg.data = tern__malloc(len ? len : 1)) == NULL) {
    return TERN_ENOMEM;
  } else if (len) {
    memcpy(seg.data, data, len);
  }
  req->segments[req->nsegments++] = seg;
  req->body_kind = TERN__BODY_SEGMENTS;
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
  clear_body(req);
  req->body_kind = TERN__BODY_CB;
  req->body_cb = cb;
  req->body_cb_data = user_data;
  req->body_cb_length = length;
  return 0;
}

int tern_request_set_download_any_status(tern_request_t *req, int enabled) {
  CHECK_NEW(req);
  req->dl_any_status = enabled != 0;
  return 0;
}

int tern_request_set_download_file(tern_request_t *req, const char *path, uint64_t offset,
                                   uint64_t end, int resume) {
  CHECK_NEW(req);
  if (path == NULL || (end != 0 && end <= offset) || resume < 0 || resume > TERN_RESUME_PART)
    return TERN_EINVAL;
  char *p = tern__strdup(path);
  if (p == NULL) return TERN_ENOMEM;
  free(req->dl_path);
  req->dl_path = p;
  free(req->target_path);
  free(req->part_path);
  free(req->validator_path);
  req->target_path = req->part_path = req->validator_path = NULL;
  req->dl_offset = offset;
  req->dl_end = end;
  req->dl_resume = resume != 0;
  req->dl_part_only = resume == TERN_RESUME_PART;
  req->sink_kind = TERN__SINK_FILE;
  return 0;
}

int tern_request_set_data_cb(tern_request_t *req, tern_data_cb cb, void *user_data) {
  CHECK_NEW(req);
  if (cb == NULL) return TERN_EINVAL;
  req->sink_kind = TERN__SINK_CB;
  req->data_cb = cb;
  req->data_cb_data = user_data;
  return 0;
}

int tern_request_set_complete_cb(tern_request_t *req, tern_complete_cb cb, void *user_data) {
  CHECK_NEW(req);
  req->complete_cb = cb;
  req->complete_data = user_data;
  return 0;
}

int tern_request_set_progress_cb(tern_request_t *req, tern_progress_cb cb, void *user_data) {
  CHECK_NEW(req);
  req->progress_cb = cb;
  req->progress_data = user_data;
  return 0;
}

int tern_request_set_hop_response_cb(tern_request_t *req, tern_hop_response_cb cb,
                                     void *user_data) {
  CHECK_NEW(req);
  req->hop_response_cb = cb;
  req->hop_response_data = user_data;
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

int tern_request_set_expect_continue(tern_request_t *req, int64_t min_body, uint64_t wait_ms) {
  CHECK_NEW(req);
  if (min_body < -1) return TERN_EINVAL;
  req->expect_min = min_body;
  req->expect_wait_ms = wait_ms;
  return 0;
}

int tern_request_set_body_gzip(tern_request_t *req, int enabled) {
  CHECK_NEW(req);
  req->gzip_body = enabled != 0;
  return 0;
}

int tern_request_is_body_skipped(const tern_request_t *req) { return req ? req->body_skipped : 0; }

int tern_request_set_follow_redirects(tern_request_t *req, unsigned max) {
  CHECK_NEW(req);
  req->follow_max = max;
  return 0;
}

int tern_request_set_redirect_flags(tern_request_t *req, unsigned flags) {
  CHECK_NEW(req);
  if (flags & ~31u) return TERN_EINVAL;
  req->redirect_flags = flags;
  return 0;
}

int tern_request_set_hop_request_cb(tern_request_t *req, tern_hop_request_cb cb, void *user_data) {
  CHECK_NEW(req);
  req->hop_request_cb = cb;
  req->hop_request_data = user_data;
  return 0;
}

int tern_request_add_hop_header(tern_request_t *req, const char *name, const char *value) {
  if (req == NULL || !req->in_hop_request) return TERN_EINVAL;
  if (!is_token(name) || value == NULL) return TERN_EBADHEADER;
  for (const unsigned char *p = (const unsigned char *)value; *p; p++)
    if ((*p < 0x20 && *p != '\t') || *p == 0x7f) return TERN_EBADHEADER;
  if (strcasecmp(name, "content-length") == 0 || strcasecmp(name, "transfer-encoding") == 0 ||
      strcasecmp(name, "host") == 0)
    return TERN_EBADHEADER;
  return tern__str_appendf(&req->hop_headers, "%s: %s\r\n", name, value);
}

const char *tern_request_get_effective_url(const tern_request_t *req) {
  if (req == NULL) return NULL;
  return req->effective_url ? req->effective_url : req->url_str;
}

unsigned tern_request_get_redirect_count(const tern_request_t *req) {
  return req ? req->redirect_count : 0;
}

int tern_request_set_auth(tern_request_t *req, const char *user, const char *password,
                          unsigned schemes) {
  CHECK_NEW(req);
  if (user == NULL || (schemes & TERN_AUTH_ANY) == 0) return TERN_EINVAL;
  int r = set_auth(&req->www, user, password, schemes);
  if (!r) req->url_credentials = false;
  return r;
}

int tern_request_set_auth_cb(tern_request_t *req, tern_auth_cb cb, void *user_data) {
  CHECK_NEW(req);
  req->auth_cb = cb;
  req->auth_cb_data = user_data;
  return 0;
}

int tern_request_supply_auth(tern_request_t *req, const char *user, const char *password) {
  if (req == NULL || !req->in_auth_cb || user == NULL) return TERN_EINVAL;
  /* The callback runs for the slot being challenged; in_auth_cb says which (1 www, 2 proxy). */
  tern__auth *a = req->in_auth_cb == 2 ? &req->proxy_auth : &req->www;
  unsigned schemes = a->schemes ? a->schemes : TERN_AUTH_ANY;
  int r = set_auth(a, user, password, schemes);
  a->scheme = 0; /* answer the pending challenge */
  return r;
}

int tern_request_set_proxy(tern_request_t *req, const char *proxy_url) {
  CHECK_NEW(req);
  if (proxy_url == NULL || proxy_url[0] == '\0') {
    free(req->proxy_host);
    req->proxy_host = NULL;
    return 0;
  }
  tern__url u;
  int r = tern__url_parse(&u, proxy_url);
  if (r) return r;
  if (u.tls) { /* TLS to the proxy itself is not supported */
    tern__url_free(&u);
    return TERN_EUNSUPPORTED;
  }
  char *host = tern__strdup(u.host);
  if (host == NULL) r = TERN_ENOMEM;
  if (!r && u.userinfo) r = set_auth_userinfo(&req->proxy_auth, u.userinfo);
  if (!r) {
    free(req->proxy_host);
    req->proxy_host = host;
    /* Without an explicit port a proxy is on curl's default, 1080. */
    const char *hostpart = strstr(proxy_url, "://") + 3;
    const char *at = strrchr(hostpart, '@');
    if (at) hostpart = at + 1;
    if (hostpart[0] == '[') hostpart = strchr(hostpart, ']');
    size_t hl = strcspn(hostpart, "/?#");
    req->proxy_port = memchr(hostpart, ':', hl) ? u.port : 1080;
  } else {
    free(host);
  }
  tern__url_free(&u);
  return r;
}

int tern_request_set_proxy_auth(tern_request_t *req, const char *user, const char *password,
                                unsigned schemes) {
  CHECK_NEW(req);
  if (user == NULL || (schemes & TERN_AUTH_ANY) == 0) return TERN_EINVAL;
  return set_auth(&req->proxy_auth, user, password, schemes);
}

int tern_request_set_decoding(tern_request_t *req, tern_decode_mode mode) {
  CHECK_NEW(req);
  if ((unsigned)mode > TERN_DECODE_OFF) return TERN_EINVAL;
  req->decode_mode = mode;
  return 0;
}

int tern_request_set_decoding_limits(tern_request_t *req, uint64_t max_bytes, unsigned max_ratio) {
  CHECK_NEW(req);
  req->decoded_max_bytes = max_bytes;
  req->decoded_max_ratio = max_ratio;
  return 0;
}

uint64_t tern_request_get_bytes_delivered(const tern_request_t *req) {
  return req ? req->delivered : 0;
}

const char *tern_request_get_decoded_encoding(const tern_request_t *req) {
  return req ? req->decoded_encoding : NULL;
}

int tern_request_set_tls_verify(tern_request_t *req, int verify) {
  CHECK_NEW(req);
  req->tls_verify = verify != 0;
  return 0;
}

/* Replaces *slot with a copy of value (NULL clears it). */
static int set_string(char **slot, const char *value) {
  char *copy = NULL;
  if (value && (copy = tern__strdup(value)) == NULL) return TERN_ENOMEM;
  free(*slot);
  *slot = copy;
  return 0;
}

int tern_request_set_tls_ca_file(tern_request_t *req, const char *path) {
  CHECK_NEW(req);
  return set_string(&req->tls_ca_file, path);
}

int tern_request_set_tls_ca_path(tern_request_t *req, const char *dir) {
  CHECK_NEW(req);
  return set_string(&req->tls_ca_path, dir);
}

int tern_request_set_tls_client_cert(tern_request_t *req, const char *cert_file,
                                     const char *key_file, const char *password) {
  CHECK_NEW(req);
  if (cert_file == NULL && (key_file || password)) return TERN_EINVAL;
  int r = set_string(&req->tls_cert, cert_file);
  if (!r) r = set_string(&req->tls_key, key_file);
  if (!r) r = set_string(&req->tls_password, password);
  return r;
}

const char *tern_request_get_tls_version(const tern_request_t *req) {
  return req ? req->tls_version : NULL;
}
int tern_request_is_tls_resumed(const tern_request_t *req) { return req ? req->tls_resumed : 0; }
int tern_request_was_client_cert_requested(const tern_request_t *req) {
  return req ? req->cert_requested : 0;
}

int tern_request_set_max_recv_speed(tern_request_t *req, uint64_t bytes_per_second) {
  CHECK_NEW(req);
  req->max_recv_speed = bytes_per_second;
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

void *tern_request_get_user_data(const tern_request_t *req) { return req ? req->user_data : NULL; }

/* ---- getters ---- */

int tern_request_get_status(const tern_request_t *req) { return req ? req->status : 0; }
const char *tern_request_get_reason(const tern_request_t *req) {
  return req && req->reason ? req->reason : "";
}
int tern_request_get_http_minor(const tern_request_t *req) { return req ? req->minor : -1; }
int tern_request_get_error(const tern_request_t *req) { return req ? req->error : TERN_EINVAL; }
const char *tern_request_get_error_message(const tern_request_t *req) {
  return req ? req->errmsg : "";
}
size_t tern_request_get_header_count(const tern_request_t *req) {
  return req ? req->resp_count : 0;
}

int tern_request_get_header_at(const tern_request_t *req, size_t i, const char **name,
                               const char **value) {
  if (req == NULL || i >= req->resp_count) return TERN_EINVAL;
  char **pairs = (char **)(void *)req->resp_block;
  if (name) *name = pairs[2 * i];
  if (value) *value = pairs[2 * i + 1];
  return 0;
}

const char *tern_request_get_header(const tern_request_t *req, const char *name) {
  if (req == NULL || name == NULL) return NULL;
  return tern__request_header_value(req, name);
}

const char *tern__request_header_value(const tern_request_t *req, const char *name) {
  char **pairs = (char **)(void *)req->resp_block;
  for (size_t i = 0; i < req->resp_count; i++)
    if (strcasecmp(pairs[2 * i], name) == 0) return pairs[2 * i + 1];
  return NULL;
}

const void *tern_request_get_body(const tern_request_t *req, size_t *len) {
  if (len) *len = req ? req->body.len : 0;
  return req && req->body.len ? req->body.data : NULL;
}

const char *tern_request_get_interim_heads(const tern_request_t *req, size_t *len) {
  if (len) *len = req ? req->interim.len : 0;
  return req && req->interim.len ? req->interim.data : NULL;
}

uint64_t tern_request_get_bytes_received(const tern_request_t *req) {
  return req ? req->received : 0;
}
int64_t tern_request_get_content_length(const tern_request_t *req) {
  return req ? req->content_length : -1;
}
uint64_t tern_request_get_offset(const tern_request_t *req) { return req ? req->resp_offset : 0; }
const char *tern_request_get_request_head(const tern_request_t *req, size_t *len) {
  if (len) *len = req && req->head ? req->head_len : 0;
  return req ? req->head : NULL;
}

int tern_request_is_reused(const tern_request_t *req) { return req ? req->reused : 0; }
int tern_request_is_done(const tern_request_t *req) {
  return req ? atomic_load(&req->state) == TERN__REQ_DONE : 0;
}

double tern_request_get_time(const tern_request_t *req, tern_time which) {
  if (req == NULL || (unsigned)which > TERN_TIME_END || req->times_ns[which] < 0) return -1;
  return (double)req->times_ns[which] / 1e9;
}

void tern__request_mark(tern_request_t *req, tern_time which) {
  req->times_ns[which] = (int64_t)(uv_hrtime() - req->start_ns);
}

void tern__request_set_error(tern_request_t *req, int err, const char *fmt, ...) {
  if (req->error) return; /* the first failure is the one that explains */
  req->error = err;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(req->errmsg, sizeof req->errmsg, fmt, ap);
  va_end(ap);
}

/* ---- preparing the exchange ---- */

static bool method_is(const tern_request_t *req, const char *m) {
  return strcmp(req->method, m) == 0;
}

/* Opens bytes [offset, end) of a file for upload: *fd and *len on success. */
static int open_upload_range(tern_request_t *req, const char *path, uint64_t offset,
                             uint64_t end, int *fd_out, uint64_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    tern__request_set_error(req, TERN_EFILEREAD, "open %s: %s", path, strerror(errno));
    return TERN_EFILEREAD;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    tern__request_set_error(req, TERN_EFILEREAD, "stat %s: %s", path, strerror(errno));
    close(fd);
    return TERN_EFILEREAD;
  }
  uint64_t size = (uint64_t)st.st_size;
  if (end == 0) end = size;
  if (end > size || offset > end) {
    tern__request_set_error(req, TERN_EFILEREAD,
                            "upload range %llu-%llu lies outside %s (%llu bytes)",
                            (unsigned long long)offset, (unsigned long long)end, path,
                            (unsigned long long)size);
    close(fd);
    return TERN_EFILEREAD;
  }
  *fd_out = fd;
  *len = end - offset;
  return 0;
}

static int open_upload(tern_request_t *req) {
  return open_upload_range(req, req->body_path, req->body_offset, req->body_end, &req->body_fd,
                           &req->body_len);
}

static int open_segments(tern_request_t *req) {
  uint64_t total = 0;
  for (size_t i = 0; i < req->nsegments; i++) {
    tern__segment *s = &req->segments[i];
    if (s->path && s->fd < 0) {
      int r = open_upload_range(req, s->path, s->offset, s->end, &s->fd, &s->len);
      if (r) return r;
    }
    total += s->len;
  }
  req->body_len = total;
  return 0;
}

/* Copies the segments' bytes at body_sent into buf: memory parts copied, file parts read. */
static int64_t read_segments(tern_request_t *req, char *buf, size_t cap) {
  size_t done = 0;
  while (done < cap && req->seg_index < req->nsegments) {
    tern__segment *s = &req->segments[req->seg_index];
    uint64_t left = s->len - req->seg_offset;
    if (left == 0) {
      req->seg_index++;
      req->seg_offset = 0;
      continue;
    }
    size_t n = cap - done < left ? cap - done : (size_t)left;
    if (s->data) {
      memcpy(buf + done, s->data + req->seg_offset, n);
    } else {
      ssize_t k;
      do {
        k = pread(s->fd, buf + done, n, (off_t)(s->offset + req->seg_offset));
      } while (k < 0 && errno == EINTR);
      if (k <= 0) {
        tern__request_set_error(req, TERN_EFILEREAD, "read %s: %s", s->path,
                                k < 0 ? strerror(errno) : "file shrank while uploading");
        return TERN_EFILEREAD;
      }
      n = (size_t)k;
    }
    req->seg_offset += n;
    done += n;
  }
  return (int64_t)done;
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

int tern__request_prepare(tern_request_t *req, const tern_config_t *cfg) {
  req->idempotent = method_is(req, "GET") || method_is(req, "HEAD") || method_is(req, "PUT") ||
                    method_is(req, "DELETE") || method_is(req, "OPTIONS") ||
                    method_is(req, "TRACE");
  req->is_head = method_is(req, "HEAD");
  if (req->user_connection_close) req->persistent = false;

  int r;
  switch (req->body_kind) {
    case TERN__BODY_MEM: req->body_len = req->body_mem_len; break;
    case TERN__BODY_FILE:
      if (req->body_fd < 0 && (r = open_upload(req)) != 0) return r;
      break;
    case TERN__BODY_SEGMENTS:
      if ((r = open_segments(req)) != 0) return r;
      req->seg_index = 0;
      req->seg_offset = 0;
      break;
    case TERN__BODY_CB:
      if (req->body_cb_length < 0 && req->http10) {
        tern__request_set_error(req, TERN_EINVAL, "a body of unknown length needs HTTP/1.1");
        return TERN_EINVAL;
      }
      req->body_len = req->body_cb_length < 0 ? UINT64_MAX : (uint64_t)req->body_cb_length;
      break;
    default: req->body_len = 0; break;
  }
  req->plain_len = req->body_len;
  if (req->gzip_body && req->body_kind != TERN__BODY_NONE) {
    if (req->http10) {
      tern__request_set_error(req, TERN_EINVAL, "a compressed body is sent chunked: needs HTTP/1.1");
      return TERN_EINVAL;
    }
    req->body_len = UINT64_MAX; /* the compressed length is known only at the end */
  }

  if (req->url.tls && req->tls_id == NULL) {
    tern__str id = {0};
    r = tern__str_appendf(&id, "v%d|%s|%s|%s|%s|%s", req->tls_verify,
                          req->tls_ca_file ? req->tls_ca_file : "",
                          req->tls_ca_path ? req->tls_ca_path : "", req->tls_cert ? req->tls_cert : "",
                          req->tls_key ? req->tls_key : "", req->tls_password ? req->tls_password : "");
    if (r) return r;
    req->tls_id = id.data;
  }

  req->range_start = 0;
  req->range_sent = false;
  char validator[256] = "";
  if (req->sink_kind == TERN__SINK_FILE) {
    if (req->part_path == NULL) {
      /* A symlink is written through: the temporary file goes beside the file it points to,
       * and replaces that file, not the link. A dangling link is written in place (below). */
      struct stat lst;
      char *target = NULL;
      if (lstat(req->dl_path, &lst) == 0 && S_ISLNK(lst.st_mode))
        target = realpath(req->dl_path, NULL);
      if (target == NULL) target = tern__strdup(req->dl_path);
      tern__str pp = {0}, vp = {0};
      if (target == NULL || tern__str_appendf(&pp, "%s.part", target) ||
          tern__str_appendf(&vp, "%s.part.validator", target)) {
        free(target);
        tern__str_free(&pp);
        tern__str_free(&vp);
        return TERN_ENOMEM;
      }
      req->target_path = target;
      req->part_path = pp.data;
      req->validator_path = vp.data;
    }
    req->resume_from = 0;
    req->resume_in_place = false;
    struct stat dst, lst;
    /* A device or pipe (/dev/null, a FIFO) is written in place: renaming a .part over it would
     * replace it with a regular file. So is a directory, to fail on it with EISDIR and no .part
     * debris, and a dangling symlink (open creates the file it names, as curl does). */
    bool exists = stat(req->target_path, &dst) == 0;
    req->dl_special = (exists && !S_ISREG(dst.st_mode)) ||
                      strncmp(req->dl_path, "/dev/", 5) == 0 || /* /dev/stdout: the open fd */
                      strncmp(req->target_path, "/proc/", 6) == 0 ||
                      (!exists && lstat(req->target_path, &lst) == 0 && S_ISLNK(lst.st_mode));
    if (req->dl_resume && !req->dl_special) {
      struct stat st;
      if (stat(req->part_path, &st) == 0 && S_ISREG(st.st_mode)) {
        req->resume_from = (uint64_t)st.st_size;
        FILE *f = fopen(req->validator_path, "r");
        if (f) {
          if (fgets(validator, sizeof validator, f) == NULL) validator[0] = '\0';
          validator[strcspn(validator, "\r\n")] = '\0';
          fclose(f);
        }
      } else if (!req->dl_part_only && stat(req->target_path, &st) == 0 && S_ISREG(st.st_mode)) {
        req->resume_from = (uint64_t)st.st_size;
        req->resume_in_place = true;
      }
    }
    req->range_start = req->dl_offset + req->resume_from;
    req->range_sent = req->range_start > 0 || req->dl_end != 0;
  }

  /* The hop-request callback adds this hop's own headers (e.g. the cookies for its URL). */
  req->hop_headers.len = 0;
  if (req->hop_request_cb && !atomic_load(&req->released)) {
    req->in_hop_request = true;
    int stop = req->hop_request_cb(req, tern_request_get_effective_url(req), req->hop_request_data);
    req->in_hop_request = false;
    if (stop) {
      tern__request_set_error(req, TERN_ECANCELED, "canceled by the hop-request callback");
      return TERN_ECANCELED;
    }
  }

  /* Through a proxy, plain http goes in absolute form; https goes through a tunnel. */
  bool absolute = req->proxy_host && !req->url.tls;
  const char *target = req->url.target;
  tern__str abs_target = {0};
  if (absolute) {
    r = cat(&abs_target, "http://", req->url.hostport, req->url.target, NULL);
    if (r) return r;
    target = abs_target.data;
  }
  tern__str h = {0};
  char n1[21], n2[21];
  r = tern__str_reserve(&h, 256 + strlen(target) + req->headers.len + req->hop_headers.len);
  if (!r) r = cat(&h, req->method, " ", target, req->http10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n", NULL);
  if (req->www.scheme == TERN_AUTH_BASIC && req->www.tries == 0) req->www.tries = 1;
  if (req->proxy_auth.scheme == TERN_AUTH_BASIC && req->proxy_auth.tries == 0)
    req->proxy_auth.tries = 1; /* a preemptive send is an answer: a 401 to it is final */
  if (!r && req->www.scheme && req->www.user && !req->user_authorization) {
    r = cat(&h, "Authorization: ", NULL);
    if (!r && req->www.scheme == TERN_AUTH_BASIC)
      r = tern__auth_basic(req->www.user, req->www.password, &h);
    else if (!r)
      r = tern__auth_digest(&req->www.ch, req->www.user, req->www.password, req->method, target,
                            ++req->www.nc, &h);
    if (!r) r = cat(&h, "\r\n", NULL);
  }
  if (!r && absolute && !req->user_proxy_authorization) {
    tern__str pa = {0};
    r = tern__request_proxy_authorization(req, req->method, target, &pa);
    if (!r && pa.len) {
      r = cat(&h, "Proxy-Authorization: ", NULL);
      if (!r) r = tern__str_append(&h, pa.data, pa.len);
      if (!r) r = cat(&h, "\r\n", NULL);
    }
    tern__str_free(&pa);
  }
  tern__str_free(&abs_target);
  if (!r && !req->user_host) r = cat(&h, "Host: ", req->url.hostport, "\r\n", NULL);
  if (!r && !req->user_agent) {
    if (!cfg->user_agent_set)
      r = cat(&h, "User-Agent: tern/", tern_version_string(), "\r\n", NULL);
    else if (cfg->user_agent[0])
      r = cat(&h, "User-Agent: ", cfg->user_agent, "\r\n", NULL);
  }
  if (!r && !req->user_accept) r = cat(&h, "Accept: */*\r\n", NULL);
  if (!r && req->range_sent) {
    r = cat(&h, "Range: bytes=", u64_text(req->range_start, n1), "-",
            req->dl_end ? u64_text(req->dl_end - 1, n2) : "", "\r\n", NULL);
    /* If-Range: the partial file continues only if the resource is still the one it began
     * with; otherwise the server sends it whole (200) and the download restarts. */
    if (!r && req->resume_from > 0 && validator[0])
      r = cat(&h, "If-Range: ", validator, "\r\n", NULL);
  }
  if (!r && req->gzip_body && req->body_kind != TERN__BODY_NONE)
    r = cat(&h, "Content-Encoding: gzip\r\n", NULL);
  if (!r && req->decode_mode != TERN_DECODE_OFF && !req->user_accept_encoding)
    r = cat(&h, "Accept-Encoding: ", tern__accept_encoding(), "\r\n", NULL);
  if (!r) {
    if (req->body_len == UINT64_MAX)
      r = cat(&h, "Transfer-Encoding: chunked\r\n", NULL);
    else if (req->body_kind != TERN__BODY_NONE || method_is(req, "POST") ||
             method_is(req, "PUT") || method_is(req, "PATCH"))
      r = cat(&h, "Content-Length: ", u64_text(req->body_len, n1), "\r\n", NULL);
  }
  req->expect_continue = req->body_kind != TERN__BODY_NONE && req->expect_min >= 0 &&
                         !req->http10 && req->body_len > 0 &&
                         (req->body_len == UINT64_MAX || req->body_len >= (uint64_t)req->expect_min);
  if (!r && req->expect_continue) r = cat(&h, "Expect: 100-continue\r\n", NULL);
  if (!r && !req->user_connection_close) {
    if (!req->persistent && !req->http10)
      r = cat(&h, "Connection: close\r\n", NULL);
    else if (req->persistent && req->http10)
      r = cat(&h, "Connection: keep-alive\r\n", NULL);
  }
  if (!r && req->headers.len) r = tern__str_append(&h, req->headers.data, req->headers.len);
  if (!r && req->hop_headers.len)
    r = tern__str_append(&h, req->hop_headers.data, req->hop_headers.len);
  if (!r) r = tern__str_append(&h, "\r\n", 3); /* with a NUL, for tern_request_get_request_head */
  if (!r) h.len--;
  if (r) {
    if (r == TERN_EBADHEADER)
      tern__request_set_error(req, r, "%s: a control character in the Digest credentials",
                              req->url.hostport);
    tern__str_free(&h);
    return r;
  }
  free(req->head);
  req->head = h.data;
  req->head_len = h.len;
  return 0;
}

bool tern__request_can_replay(const tern_request_t *req) {
  return req->body_kind != TERN__BODY_CB || req->body_sent == 0 || req->body_skipped;
}

void tern__request_rewind(tern_request_t *req) {
  req->head_sent = req->body_done = req->sent = false;
  req->reused = false;
  req->conn = NULL;
  req->status = 0;
  req->minor = -1;
  req->reason = NULL;
  free(req->resp_block);
  req->resp_block = NULL;
  req->resp_count = 0;
  req->body.len = 0;
  req->interim.len = 0;
  req->received = 0;
  req->content_length = -1;
  req->resp_offset = 0;
  req->body_sent = 0;
  req->seg_index = 0;
  req->seg_offset = 0;
  req->to_file = false;
  req->keep_error_body = false;
  req->skip_bytes = 0;
  req->range_done = false;
  req->writing_part = false;
  req->delivered = 0;
  req->decoded_encoding = NULL;
  req->awaiting_continue = false;
  req->body_skipped = false;
  req->tls_version = NULL;
  req->tls_resumed = req->cert_requested = false;
  tern__encoder_free(req->encoder);
  req->encoder = NULL;
  tern__decoder_free(req->decoder);
  req->decoder = NULL;
  close_fd(&req->dl_fd);
}

/* "bytes 100-199/1000" -> *first = 100. */
static int parse_content_range_start(const char *v, uint64_t *first) {
  if (v == NULL || strncasecmp(v, "bytes ", 6) != 0) return -1;
  v += 6;
  while (*v == ' ') v++;
  if (*v < '0' || *v > '9') return -1;
  uint64_t n = 0;
  for (; *v >= '0' && *v <= '9'; v++) {
    if (n > (UINT64_MAX - 9) / 10) return -1;
    n = n * 10 + (uint64_t)(*v - '0');
  }
  if (*v != '-') return -1;
  *first = n;
  return 0;
}

static int open_download(tern_request_t *req, bool part, bool truncate, uint64_t position) {
  if (req->dl_special) { /* devices and pipes: no .part, no truncation, no seek */
    part = truncate = false;
    position = 0;
  }
  const char *path = part ? req->part_path : req->target_path;
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0);
  int fd;
  if (part) {
    /* Refuse what the target refuses (a read-only file: curl's exit 23) before any byte is
     * written; the .part would otherwise replace a file the caller may not write. */
    struct stat st;
    if (stat(req->target_path, &st) == 0) {
      int probe = open(req->target_path, O_WRONLY | O_CLOEXEC);
      if (probe < 0) {
        tern__request_set_error(req, TERN_EFILEWRITE, "open %s: %s", req->target_path,
                                strerror(errno));
        return TERN_EFILEWRITE;
      }
      close(probe);
    }
    fd = open(path, flags, 0666);
    if (fd < 0 && (errno == EACCES || errno == EPERM || errno == EROFS)) {
      /* No temporary file can be made beside the target (a read-only directory): write the
       * target in place, as curl does. A failure then leaves it partial. */
      part = false;
      path = req->target_path;
      flags |= O_TRUNC;
      position = 0;
      fd = open(path, flags, 0666);
    }
  } else {
    fd = open(path, flags, 0666);
  }
  if (fd < 0) {
    tern__request_set_error(req, TERN_EFILEWRITE, "open %s: %s", path, strerror(errno));
    return TERN_EFILEWRITE;
  }
  if (!req->dl_special && lseek(fd, (off_t)position, SEEK_SET) < 0) {
    tern__request_set_error(req, TERN_EFILEWRITE, "seek %s: %s", path, strerror(errno));
    close(fd);
    return TERN_EFILEWRITE;
  }
  req->dl_fd = fd;
  req->to_file = true;
  req->writing_part = part;
  return 0;
}

/* Keeps the strong ETag, else Last-Modified, beside the partial file for a later If-Range. */
static void save_validator(tern_request_t *req) {
  if (req->dl_special) return;
  const char *etag = tern__request_header_value(req, "etag");
  const char *lm = tern__request_header_value(req, "last-modified");
  const char *v = etag && strncmp(etag, "W/", 2) != 0 ? etag : lm;
  if (v == NULL || strpbrk(v, "\r\n")) {
    unlink(req->validator_path);
    return;
  }
  FILE *f = fopen(req->validator_path, "w");
  if (f == NULL) return; /* resume then restarts from zero: safe, only slower */
  fprintf(f, "%s\n", v);
  fclose(f);
}

int tern__request_set_response(tern_request_t *req, int minor, int status, const char *reason,
                               size_t reason_len, const tern__header_t *h, size_t n) {
  free(req->resp_block);
  req->resp_block = NULL;
  req->reason = NULL;
  req->resp_count = 0;
  req->status = status;
  req->minor = minor;

  /* One block: 2n pointers, then "name\0value\0" for each field. */
  size_t strings = 0;
  for (size_t i = 0; i < n; i++) strings += h[i].name_len + h[i].value_len + 2;
  size_t ptrs = 2 * n * sizeof(char *);
  char *block = tern__malloc(ptrs + strings + reason_len + 1);
  if (block == NULL) return TERN_ENOMEM;
  char **pairs = (char **)(void *)block;
  char *s = block + ptrs;
  for (size_t i = 0; i < n; i++) {
    pairs[2 * i] = s;
    memcpy(s, h[i].name, h[i].name_len);
    s += h[i].name_len;
    *s++ = '\0';
    pairs[2 * i + 1] = s;
    memcpy(s, h[i].value, h[i].value_len);
    s += h[i].value_len;
    *s++ = '\0';
  }
  memcpy(s, reason, reason_len);
  s[reason_len] = '\0';
  req->reason = s;
  req->resp_block = block;
  req->resp_count = n;
  return 0;
}

int tern__request_setup_sink(tern_request_t *req) {
  int status = req->status;
  if (req->discard_body) return 0;
  /* Decode the body unless asked not to; a coding this build cannot undo is an error then
   * (curl's 61), never the encoded bytes passed off as the body. */
  const char *coding = tern__request_header_value(req, "content-encoding");
  if (coding && req->decode_mode == TERN_DECODE_AUTO && !req->is_head && status != 204 &&
      status != 304) {
    int kind = tern__decoder_kind(coding, strlen(coding));
    if (kind == TERN__CODING_UNKNOWN) {
      tern__request_set_error(req, TERN_EDECODE, "%s: unsupported Content-Encoding \"%.64s\"",
                              req->url.hostport, coding);
      return TERN_EDECODE;
    }
    if (kind >= 0) {
      req->decoder = tern__decoder_new(kind);
      if (req->decoder == NULL) return TERN_ENOMEM;
      req->decoded_encoding = tern__decoder_name(kind);
    }
  }

  if (req->sink_kind != TERN__SINK_FILE) return 0;
  if (status >= 200 && status < 300) {
    if (status == 206 && req->range_sent) {
      uint64_t first;
      if (parse_content_range_start(tern__request_header_value(req, "content-range"), &first) ||
          first != req->range_start) {
        tern__request_set_error(req, TERN_ERANGE,
                                "%s: asked for bytes from %llu, got Content-Range \"%s\"",
                                req->url.hostport, (unsigned long long)req->range_start,
                                tern__request_header_value(req, "content-range")
                                    ? tern__request_header_value(req, "content-range")
                                    : "");
        return TERN_ERANGE;
      }
      req->resp_offset = first;
      if (req->resume_in_place) return open_download(req, false, false, req->resume_from);
      int r = open_download(req, true, req->resume_from == 0, req->resume_from);
      if (!r && req->resume_from == 0) save_validator(req);
      return r;
    }
    /* A full representation (new, changed, or a server that ignores Range): the download
     * restarts from zero in the .part file, and when the caller wanted it from an offset the
     * bytes before that are skipped rather than spliced in. */
    req->skip_bytes = req->dl_offset;
    req->resume_from = 0;
    int r = open_download(req, true, true, 0);
    if (!r) save_validator(req);
    return r;
  }
  if (status == 416 && req->dl_resume && req->resume_from > 0) {
    req->range_done = true; /* the partial file is already whole */
  } else if (req->dl_any_status && !req->dl_resume && !req->discard_body) {
    /* The caller wants whatever the final response says in the file, as curl's -o does; it
     * is not a piece of the resource, so nothing is kept to resume it. */
    req->skip_bytes = 0;
    req->resume_from = 0;
    return open_download(req, true, true, 0);
  }
  req->keep_error_body = true;
  return 0;
}

/* A decoder's failure, with its reason, becomes the request's error (a sink failure already
 * is). */
static int decode_failed(tern_request_t *req, int err) {
  const char *why = err ? tern__decoder_message(req->decoder) : NULL;
  if (why) tern__request_set_error(req, err, "%s: %s", req->url.hostport, why);
  return err;
}

static int sink_write(void *ctx, const char *data, size_t n) {
  tern_request_t *req = ctx;
  if (req->skip_bytes) {
    size_t k = n < req->skip_bytes ? n : (size_t)req->skip_bytes;
    req->skip_bytes -= k;
    data += k;
    n -= k;
    if (n == 0) return 0;
  }
  req->delivered += n;
  if (req->to_file) {
    while (n > 0) {
      ssize_t w = write(req->dl_fd, data, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        tern__request_set_error(req, TERN_EFILEWRITE, "write %s: %s",
                                req->writing_part ? req->part_path : req->target_path,
                                strerror(errno));
        return TERN_EFILEWRITE;
      }
      data += w;
      n -= (size_t)w;
    }
    return 0;
  }
  if (req->sink_kind == TERN__SINK_CB && !req->keep_error_body) {
    if (req->data_cb(req, data, n, req->data_cb_data) != 0) {
      tern__request_set_error(req, TERN_ECALLBACK, "the data callback stopped the body from %s",
                              req->url.hostport);
      return TERN_ECALLBACK;
    }
    return 0;
  }
  if (req->keep_error_body) {
    if (req->body.len >= ERROR_BODY_LIMIT) return 0;
    if (n > ERROR_BODY_LIMIT - req->body.len) n = ERROR_BODY_LIMIT - req->body.len;
  } else if (req->body.cap == 0 && req->content_length > 0) {
    uint64_t want = (uint64_t)req->content_length;
    if (tern__str_reserve(&req->body, want < PREALLOC_LIMIT ? (size_t)want : PREALLOC_LIMIT))
      return TERN_ENOMEM;
  }
  return tern__str_append(&req->body, data, n);
}

/* ---- hops ---- */

static bool is_redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* Picks the strongest scheme the challenge offers and `a` allows: fills a->scheme and a->ch.
 * Returns false when nothing can answer it. */
static bool answer_challenge(tern_request_t *req, tern__auth *a, const char *header, int slot) {
  const char *value = tern__request_header_value(req, header);
  if (value == NULL) return false;
  /* Several header fields may carry challenges: the first one that has what we need wins. */
  char **pairs = (char **)(void *)req->resp_block;
  tern__challenge digest, basic;
  bool have_digest = false, have_basic = false;
  for (size_t i = 0; i < req->resp_count; i++) {
    if (strcasecmp(pairs[2 * i], header) != 0) continue;
    tern__challenge ch;
    if (!have_digest && tern__challenge_find(pairs[2 * i + 1], "Digest", &ch) &&
        tern__digest_supported(&ch))
      digest = ch, have_digest = true;
    if (!have_basic && tern__challenge_find(pairs[2 * i + 1], "Basic", &ch))
      basic = ch, have_basic = true;
  }
  /* Only the nonce aged (stale=true with a new nonce): answer again with the same credentials,
   * once. */
  bool stale = have_digest && digest.stale && a->scheme == TERN_AUTH_DIGEST && a->tries > 0 &&
               !a->stale_retried && strcmp(digest.nonce, a->ch.nonce) != 0;
  if (stale) {
    a->stale_retried = true;
    a->ch = digest;
    a->nc = 0;
    return true;
  }
  if (a->tries > 0) {
    /* Credentials sent and refused: without a callback to ask, the 401 stands; with one, the
     * refused credentials are dropped and it is asked again (it decides when to stop). */
    if (req->auth_cb == NULL || a->tries >= 16) return false;
    free(a->user);
    a->user = NULL;
  }
  if (a->user == NULL && req->auth_cb && !atomic_load(&req->released)) {
    const char *scheme = have_digest ? "Digest" : have_basic ? "Basic" : "";
    const char *realm = have_digest ? digest.realm : have_basic ? basic.realm : "";
    req->in_auth_cb = slot;
    int go = req->auth_cb(req, slot == 2, scheme, realm, req->auth_cb_data);
    req->in_auth_cb = 0;
    if (!go) return false;
  }
  if (a->user == NULL) return false;
  unsigned allowed = a->schemes ? a->schemes : TERN_AUTH_ANY;
  if (have_digest && (allowed & TERN_AUTH_DIGEST)) {
    a->scheme = TERN_AUTH_DIGEST;
    a->ch = digest;
    a->nc = 0;
  } else if (have_basic && (allowed & TERN_AUTH_BASIC)) {
    a->scheme = TERN_AUTH_BASIC;
  } else {
    return false;
  }
  a->tries++;
  return true;
}

int tern__request_decide_hop(tern_request_t *req) {
  req->next_hop = TERN__HOP_NONE;
  int status = req->status;
  const char *location = tern__request_header_value(req, "location");
  while (location && (*location == ' ' || *location == '\t')) location++;
  /* An empty Location names no target: the 3xx is the response (curl does the same). */
  if (is_redirect(status) && req->follow_max > 0 && location && *location) {
    req->next_hop = TERN__HOP_REDIRECT;
  } else if (status == 401 && answer_challenge(req, &req->www, "www-authenticate", 1)) {
    req->next_hop = TERN__HOP_AUTH;
  } else if (status == 407 && req->proxy_host &&
             answer_challenge(req, &req->proxy_auth, "proxy-authenticate", 2)) {
    req->next_hop = TERN__HOP_PROXY_AUTH;
  }
  req->discard_body = req->next_hop != TERN__HOP_NONE;
  return 0;
}

/* Drops the caller's header lines whose names are in `names` (lower case, NULL-terminated). */
static void strip_headers(tern_request_t *req, const char *const *names) {
  tern__str kept = {0};
  const char *p = req->headers.data, *end = p ? p + req->headers.len : NULL;
  while (p && p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
    const char *colon = memchr(p, ':', n);
    bool drop = false;
    for (const char *const *nm = names; colon && *nm && !drop; nm++)
      drop = tern__name_is(p, (size_t)(colon - p), *nm);
    if (!drop) tern__str_append(&kept, p, n);
    p += n;
  }
  tern__str_free(&req->headers);
  req->headers = kept;
}

/* Credentials (Authorization, Cookie) never reach another origin. */
static void strip_credential_headers(tern_request_t *req) {
  static const char *const names[] = {"authorization", "cookie", NULL};
  strip_headers(req, names);
  req->user_authorization = false;
}

static bool same_origin(const tern__url *a, const tern__url *b) {
  return a->tls == b->tls && a->port == b->port && strcmp(a->host, b->host) == 0;
}

int tern__request_next_hop(tern_request_t *req) {
  /* A copy: a redirect replaces req->url, and the messages below may name the old host. */
  char host[280];
  snprintf(host, sizeof host, "%s", req->url.hostport);
  /* Sending the body again needs it whole: a callback body already read is gone. */
  bool replay_body = true;
  if (req->next_hop == TERN__HOP_REDIRECT) {
    if (req->redirect_count >= req->follow_max) {
      tern__request_set_error(req, TERN_ETOOMANYREDIRECTS, "%s: more than %u redirects", host,
                              req->follow_max);
      return TERN_ETOOMANYREDIRECTS;
    }
    const char *location = tern__request_header_value(req, "location");
    char *abs = NULL;
    int r = tern__url_resolve(&req->url, location, &abs);
    tern__url next;
    if (!r) r = tern__url_parse(&next, abs);
    if (r) {
      tern__request_set_error(req, TERN_EREDIRECT, "%s: cannot follow Location \"%.200s\"", host,
                              location);
      free(abs);
      return TERN_EREDIRECT;
    }
    if (req->url.tls && !next.tls && !(req->redirect_flags & TERN_REDIRECT_ALLOW_DOWNGRADE)) {
      tern__request_set_error(req, TERN_EREDIRECT, "%s: refusing to follow a redirect from https to %s",
                              host, abs);
      tern__url_free(&next);
      free(abs);
      return TERN_EREDIRECT;
    }
    int status = req->status;
    bool post = strcmp(req->method, "POST") == 0;
    bool to_get = (status == 303 && strcmp(req->method, "HEAD") != 0 &&
                   !(post && (req->redirect_flags & TERN_REDIRECT_POST_303))) ||
                  (status == 301 && post && !(req->redirect_flags & TERN_REDIRECT_POST_301)) ||
                  (status == 302 && post && !(req->redirect_flags & TERN_REDIRECT_POST_302));
    if (to_get) {
      char *get = tern__strdup("GET");
      if (get == NULL) {
        tern__url_free(&next);
        free(abs);
        return TERN_ENOMEM;
      }
      free(req->method);
      req->method = get;
      clear_body(req);
      replay_body = false;
      /* The headers that described the body go with it (Fetch 4.4, and curl). */
      static const char *const body_headers[] = {"content-type", "content-encoding",
                                                 "content-language", "content-location", NULL};
      strip_headers(req, body_headers);
    }
    if (!same_origin(&req->url, &next) && !(req->redirect_flags & TERN_REDIRECT_TRUST_CROSS_ORIGIN)) {
      clear_auth(&req->www);
      req->url_credentials = false;
      strip_credential_headers(req);
    }
    tern__url_free(&req->url);
    req->url = next;
    free(req->effective_url);
    req->effective_url = abs;
    free(req->tls_id); /* the new origin may differ in scheme */
    req->tls_id = NULL;
    req->redirect_count++;
  }
  if (replay_body && !tern__request_can_replay(req)) {
    tern__request_set_error(req, TERN_EAUTH, "%s: cannot send a callback body again for the next hop",
                            host);
    return req->next_hop == TERN__HOP_REDIRECT ? TERN_EREDIRECT : TERN_EAUTH;
  }
  req->next_hop = TERN__HOP_NONE;
  req->discard_body = false;
  return 0;
}

int tern__request_proxy_authorization(tern_request_t *req, const char *method, const char *uri,
                                      tern__str *out) {
  tern__auth *a = &req->proxy_auth;
  if (a->user == NULL || a->scheme == 0) return 0;
  if (a->scheme == TERN_AUTH_BASIC) return tern__auth_basic(a->user, a->password, out);
  return tern__auth_digest(&a->ch, a->user, a->password, method, uri, ++a->nc, out);
}

int tern__request_deliver(tern_request_t *req, const char *data, size_t n) {
  req->received += n;
  if (req->discard_body) return 0; /* an intermediate hop's body */
  if (req->decoder) {
    tern__decoder_set_limits(req->decoder, req->decoded_max_bytes, req->decoded_max_ratio,
                             req->sink_kind == TERN__SINK_MEM && !req->to_file);
    return decode_failed(req, tern__decoder_write(req->decoder, data, n, sink_write, req));
  }
  return sink_write(req, data, n);
}

void tern__request_close_files(tern_request_t *req) {
  close_fd(&req->dl_fd);
  close_fd(&req->body_fd);
  for (size_t i = 0; i < req->nsegments; i++) close_fd(&req->segments[i].fd);
}

int tern__request_body_end(tern_request_t *req) {
  return req->decoder ? decode_failed(req, tern__decoder_end(req->decoder)) : 0;
}

/* Copies the finished .part into the existing target in place (keeping its inode: hard links,
 * owner, mode, ACLs), through a bounded stack buffer, then removes the .part. */
static int copy_into_target(tern_request_t *req) {
  int in = open(req->part_path, O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    tern__request_set_error(req, TERN_EFILEWRITE, "open %s: %s", req->part_path, strerror(errno));
    return TERN_EFILEWRITE;
  }
  int out = open(req->target_path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (out < 0) {
    tern__request_set_error(req, TERN_EFILEWRITE, "open %s: %s", req->target_path, strerror(errno));
    close(in);
    return TERN_EFILEWRITE;
  }
  char buf[16384];
  int r = 0;
  for (;;) {
    ssize_t n = read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      tern__request_set_error(req, TERN_EFILEWRITE, "read %s: %s", req->part_path, strerror(errno));
      r = TERN_EFILEWRITE;
      break;
    }
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(out, buf + off, (size_t)(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        tern__request_set_error(req, TERN_EFILEWRITE, "write %s: %s", req->target_path,
                                strerror(errno));
        r = TERN_EFILEWRITE;
        break;
      }
      off += w;
    }
    if (r) break;
  }
  close(in);
  if (close(out) != 0 && r == 0) {
    tern__request_set_error(req, TERN_EFILEWRITE, "close %s: %s", req->target_path, strerror(errno));
    r = TERN_EFILEWRITE;
  }
  if (r == 0) unlink(req->part_path);
  return r;
}

/* The finished .part becomes the target. A new target is simply renamed into place. An
 * existing one keeps what makes it that file: its mode and owner are given to the .part before
 * the rename, and when that cannot be done (another owner) or a rename would cut hard links,
 * the bytes are copied into the target instead. */
static int replace_target(tern_request_t *req) {
  struct stat st;
  if (stat(req->target_path, &st) == 0 && S_ISREG(st.st_mode)) {
    bool copy = st.st_nlink > 1;
    if (!copy && (st.st_uid != geteuid() || st.st_gid != getegid()) &&
        chown(req->part_path, st.st_uid, st.st_gid) != 0)
      copy = true;
    if (!copy && chmod(req->part_path, st.st_mode & 07777) != 0) copy = true;
    if (copy) return copy_into_target(req);
  }
  if (rename(req->part_path, req->target_path) != 0) {
    tern__request_set_error(req, TERN_EFILEWRITE, "rename %s to %s: %s", req->part_path,
                            req->target_path, strerror(errno));
    return TERN_EFILEWRITE;
  }
  return 0;
}

int tern__request_finish_file(tern_request_t *req, int err) {
  if (req->sink_kind != TERN__SINK_FILE || req->part_path == NULL) return err;
  close_fd(&req->dl_fd);
  bool part_done = !err && (req->writing_part || (req->range_done && !req->resume_in_place));
  if (part_done) {
    int r = replace_target(req);
    if (r) {
      if (!req->dl_resume) unlink(req->part_path);
      return r;
    }
    unlink(req->validator_path);
  } else if (err && req->writing_part && !req->dl_resume) {
    /* Nothing will continue this attempt: leave no debris. */
    unlink(req->part_path);
    unlink(req->validator_path);
  }
  return err;
}

static int percent_of(uint64_t done, uint64_t total) {
  if (total == 0) return 0;
  if (done >= total) return 100;
  if (total > UINT64_MAX / 100) return (int)(done / (total / 100));
  return (int)(done * 100 / total);
}

int tern__request_progress_download(tern_request_t *req, bool final) {
  if (req->progress_cb == NULL || atomic_load(&req->released)) return 0;
  uint64_t total = req->content_length > 0 ? (uint64_t)req->content_length : 0;
  uint64_t done = req->resp_offset + req->received;
  if (total) total += req->resp_offset;
  /* 100 means the phase is over, which only the framing knows: a body that reached its
   * announced size may still await its last chunk. */
  int percent = final ? 100 : (total ? percent_of(done, total) : 0);
  if (!final && percent > 99) percent = 99;
  /* Percent never goes back, and 100 is reported once. */
  if (percent <= req->last_percent && !(percent == 0 && req->last_percent == 0 && !total))
    return 0;
  if (percent == 100 && req->last_percent == 100) return 0;
  req->last_percent = percent;
  if (final && total == 0) total = done;
  if (req->progress_cb(req, TERN_PROGRESS_DOWNLOAD, percent, done, total, req->progress_data)) {
    tern__request_set_error(req, TERN_ECANCELED, "canceled by the progress callback");
    return TERN_ECANCELED;
  }
  return 0;
}

int tern__request_progress_upload(tern_request_t *req) {
  if (req->progress_cb == NULL || atomic_load(&req->released)) return 0;
  bool unknown = req->plain_len == UINT64_MAX;
  uint64_t total = unknown ? 0 : req->plain_len;
  int percent = unknown ? 0 : percent_of(req->body_sent, total);
  if (percent <= req->last_up_percent && !(unknown && percent == 0)) return 0;
  req->last_up_percent = percent;
  if (req->progress_cb(req, TERN_PROGRESS_UPLOAD, percent, req->body_sent, total,
                       req->progress_data)) {
    tern__request_set_error(req, TERN_ECANCELED, "canceled by the progress callback");
    return TERN_ECANCELED;
  }
  return 0;
}

int64_t tern__request_pull_plain(tern_request_t *req, char *scratch, size_t cap, const char **ptr) {
  if (req->body_kind == TERN__BODY_MEM) {
    uint64_t left = req->plain_len - req->body_sent;
    size_t n = left < (1u << 20) ? (size_t)left : (1u << 20);
    *ptr = (const char *)req->body_mem + req->body_sent;
    req->body_sent += n;
    return (int64_t)n;
  }
  int64_t n = tern__request_read_plain(req, scratch, cap);
  if (n > 0) req->body_sent += (uint64_t)n;
  *ptr = scratch;
  return n;
}

/* The next bytes of a file or callback body, at body_sent, bounded by its plain length. */
int64_t tern__request_read_plain(tern_request_t *req, char *buf, size_t cap) {
  uint64_t left = req->plain_len == UINT64_MAX ? UINT64_MAX : req->plain_len - req->body_sent;
  if (left == 0) return 0;
  if (cap > left) cap = (size_t)left;
  if (req->body_kind == TERN__BODY_SEGMENTS) return read_segments(req, buf, cap);
  if (req->body_kind == TERN__BODY_FILE) {
    ssize_t n;
    do {
      n = pread(req->body_fd, buf, cap, (off_t)(req->body_offset + req->body_sent));
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
      tern__request_set_error(req, TERN_EFILEREAD, "read %s: %s", req->body_path,
                              n < 0 ? strerror(errno) : "file shrank while uploading");
      return TERN_EFILEREAD;
    }
    return n;
  }
  int64_t n = req->body_cb(req, buf, cap, req->body_cb_data);
  if (n < 0 || (uint64_t)n > cap || (n == 0 && req->plain_len != UINT64_MAX)) {
    tern__request_set_error(req, TERN_EFILEREAD, "the body callback %s",
                            n == 0 ? "ended before the announced length" : "reported an error");
    return TERN_EFILEREAD;
  }
  return n;
}
