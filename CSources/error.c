/* Error names and messages, the version, and the small string and config helpers. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TERN_STR_(x) #x
#define TERN_XSTR_(x) TERN_STR_(x)

unsigned tern_version(void) { return TERN_VERSION_HEX; }

const char *tern_version_string(void) {
  return TERN_XSTR_(TERN_VERSION_MAJOR) "." TERN_XSTR_(TERN_VERSION_MINOR) "." TERN_XSTR_(
      TERN_VERSION_PATCH);
}

const char *tern_strerror(int err) {
  switch (err) {
    case 0: return "success";
#define XX(name, value, desc) \
  case value: return desc;
    TERN_ERRNO_MAP(XX)
#undef XX
    default: return "unknown error";
  }
}

const char *tern_err_name(int err) {
  switch (err) {
    case 0: return "OK";
#define XX(name, value, desc) \
  case value: return #name;
    TERN_ERRNO_MAP(XX)
#undef XX
    default: return "EUNKNOWN";
  }
}

int tern_error_is_timeout(int err) {
  return err == TERN_ECONNECTTIMEOUT || err == TERN_EHEADERTIMEOUT || err == TERN_EBODYTIMEOUT ||
         err == TERN_ETOTALTIMEOUT;
}

int tern_error_is_tls_verify(int err) {
  return err == TERN_ETLSCERTEXPIRED || err == TERN_ETLSCERTNOTYETVALID || err == TERN_ETLSHOSTNAME ||
         err == TERN_ETLSUNKNOWNCA || err == TERN_ETLSVERIFY;
}

int tern__map_uv_error(int uverr, int fallback) {
  switch (uverr) {
    case UV_ECONNREFUSED: return TERN_ECONNREFUSED;
    case UV_ECONNRESET:
    case UV_EPIPE: return TERN_ECONNRESET;
    case UV_ENOMEM: return TERN_ENOMEM;
    case UV_ECANCELED: return TERN_ECANCELED;
    case UV_EAI_NONAME:
    case UV_EAI_AGAIN:
    case UV_EAI_FAIL:
    case UV_EAI_NODATA:
    case UV_EAI_FAMILY:
    case UV_EAI_SERVICE:
    case UV_EAI_ADDRFAMILY: return TERN_ERESOLVE;
    case UV_ENETUNREACH:
    case UV_EHOSTUNREACH:
    case UV_EADDRNOTAVAIL:
    case UV_ETIMEDOUT: return TERN_ECONNECT;
    default: return fallback;
  }
}

/* ---- growable strings ---- */

int tern__str_reserve(tern__str *s, size_t extra) {
  if (extra <= s->cap - s->len) return 0;
  if (extra > SIZE_MAX / 2 - s->len) return TERN_ENOMEM;
  size_t need = s->len + extra;
  size_t cap = s->cap ? s->cap : 64;
  while (cap < need) cap *= 2;
  char *p = tern__realloc(s->data, cap);
  if (p == NULL) return TERN_ENOMEM;
  s->data = p;
  s->cap = cap;
  return 0;
}

int tern__str_append(tern__str *s, const void *p, size_t n) {
  if (n == 0) return 0;
  int r = tern__str_reserve(s, n);
  if (r) return r;
  memcpy(s->data + s->len, p, n);
  s->len += n;
  return 0;
}

int tern__str_appendf(tern__str *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return TERN_EINVAL;
  int r = tern__str_reserve(s, (size_t)n + 1);
  if (r) return r;
  va_start(ap, fmt);
  vsnprintf(s->data + s->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  s->len += (size_t)n;
  return 0;
}

void tern__str_free(tern__str *s) {
  free(s->data);
  s->data = NULL;
  s->len = s->cap = 0;
}

/* ---- configuration ---- */

void tern__config_defaults(tern_config_t *c) {
  memset(c, 0, sizeof *c);
  c->buffer_size = 65536;
  c->idle_timeout_ms = 60000;
  c->dns_cache_ms = 60000;
  c->max_header_size = 65536;
  c->max_conns_per_origin = 0;
  c->pipeline_depth = 1;
}

int tern__config_copy(tern_config_t *dst, const tern_config_t *src) {
  *dst = *src;
  dst->user_agent = NULL;
  memset(&dst->resolve, 0, sizeof dst->resolve);
  if (tern__str_append(&dst->resolve, src->resolve.data, src->resolve.len)) return TERN_ENOMEM;
  if (src->user_agent) {
    dst->user_agent = tern__strdup(src->user_agent);
    if (dst->user_agent == NULL) return TERN_ENOMEM;
  }
  return 0;
}

void tern__config_clear(tern_config_t *c) {
  free(c->user_agent);
  c->user_agent = NULL;
  tern__str_free(&c->resolve);
}

tern_config_t *tern_config_new(void) {
  tern_config_t *c = tern__malloc(sizeof *c);
  if (c) tern__config_defaults(c);
  return c;
}

void tern_config_free(tern_config_t *c) {
  if (c == NULL) return;
  tern__config_clear(c);
  free(c);
}

int tern_config_set_buffer_size(tern_config_t *c, size_t bytes) {
  if (c == NULL || bytes < 1024 || bytes > (1u << 30)) return TERN_EINVAL;
  c->buffer_size = bytes;
  return 0;
}

int tern_config_set_idle_timeout(tern_config_t *c, uint64_t ms) {
  if (c == NULL) return TERN_EINVAL;
  c->idle_timeout_ms = ms;
  return 0;
}

int tern_config_set_max_header_size(tern_config_t *c, size_t bytes) {
  if (c == NULL || bytes < 64) return TERN_EINVAL;
  c->max_header_size = bytes;
  return 0;
}

int tern_config_set_max_connections_per_origin(tern_config_t *c, unsigned n) {
  if (c == NULL) return TERN_EINVAL;
  c->max_conns_per_origin = n;
  return 0;
}

int tern_config_set_pipeline_depth(tern_config_t *c, unsigned depth) {
  if (c == NULL || depth == 0 || depth > 1024) return TERN_EINVAL;
  c->pipeline_depth = depth;
  return 0;
}

int tern_config_add_resolve(tern_config_t *c, const char *entry) {
  if (c == NULL || entry == NULL) return TERN_EINVAL;
  const char *p1 = strchr(entry, ':');
  if (p1 == NULL || p1 == entry) return TERN_EINVAL;
  const char *p2 = strchr(p1 + 1, ':');
  if (p2 == NULL || p2 == p1 + 1 || p2[1] == '\0') return TERN_EINVAL;
  for (const char *q = p1 + 1; q < p2; q++)
    if (*q < '0' || *q > '9') return TERN_EINVAL;
  for (const char *q = entry; *q; q++)
    if ((unsigned char)*q <= ' ') return TERN_EINVAL;
  /* Each address must parse now, so a typo fails here and not at connect time. */
  const char *a = p2 + 1;
  while (*a) {
    size_t n = strcspn(a, ",");
    char addr[64];
    if (n == 0 || n >= sizeof addr) return TERN_EINVAL;
    memcpy(addr, a, n);
    addr[n] = '\0';
    char *ip = addr;
    if (ip[0] == '[') {
      if (ip[n - 1] != ']') return TERN_EINVAL;
      ip[n - 1] = '\0';
      ip++;
    }
    struct sockaddr_in6 s6;
    struct sockaddr_in s4;
    if (uv_ip4_addr(ip, 0, &s4) != 0 && uv_ip6_addr(ip, 0, &s6) != 0) return TERN_EINVAL;
    a += n;
    if (*a == ',') a++;
  }
  int r = tern__str_appendf(&c->resolve, "%.*s\t%.*s\t%s\n", (int)(p1 - entry), entry,
                            (int)(p2 - p1 - 1), p1 + 1, p2 + 1);
  return r;
}

int tern_config_set_log_cb(tern_config_t *c, tern_log_cb cb, tern_log_level min_level,
                           void *user_data) {
  if (c == NULL || (unsigned)min_level > TERN_LOG_ERROR) return TERN_EINVAL;
  c->log_cb = cb;
  c->log_level = min_level;
  c->log_data = user_data;
  return 0;
}

void tern__log(const tern_engine_t *eng, tern_log_level level, tern_request_t *req,
               const char *fmt, ...) {
  if (!TERN__LOGGING(eng, level)) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  eng->config.log_cb(level, line, req, eng->config.log_data);
}

int tern_config_set_user_agent(tern_config_t *c, const char *ua) {
  if (c == NULL) return TERN_EINVAL;
  if (ua && strpbrk(ua, "\r\n")) return TERN_EBADHEADER;
  char *copy = tern__strdup(ua ? ua : "");
  if (copy == NULL) return TERN_ENOMEM;
  free(c->user_agent);
  c->user_agent = copy;
  c->user_agent_set = true;
  return 0;
}
