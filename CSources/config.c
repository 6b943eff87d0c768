/* Engine configuration: tern_config_t, its defaults, copies and the public setters. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

void tern__config_defaults(tern_config_t *c) {
  memset(c, 0, sizeof *c);
  c->buffer_size = 65536;
  c->idle_timeout_ms = 60000;
  c->dns_cache_ms = 60000;
  c->max_header_size = 65536;
  c->max_conns_per_origin = 6; /* as browsers and URLSession */
  c->pipeline_depth = 1;
  tern__tls_conf_init(&c->tls);
}

/* *dst = a copy of src (NULL stays NULL). On failure *dst is NULL and the caller clears. */
static int copy_string(char **dst, const char *src) {
  *dst = src ? tern__strdup(src) : NULL;
  return src && *dst == NULL ? TERN_ENOMEM : 0;
}

/* A secret's bytes are overwritten before its memory goes back to the allocator. */
static void free_secret(char **s) {
  if (*s) memset(*s, 0, strlen(*s));
  free(*s);
  *s = NULL;
}

/* ---- TLS settings, an engine's or a request's own ---- */

void tern__tls_conf_init(tern__tls_conf *t) {
  memset(t, 0, sizeof *t);
  t->verify = true;
}

void tern__tls_conf_clear(tern__tls_conf *t) {
  free(t->ca_file);
  free(t->ca_path);
  free(t->cert);
  free(t->key);
  free_secret(&t->password);
  tern__tls_conf_init(t);
}

int tern__tls_conf_copy(tern__tls_conf *dst, const tern__tls_conf *src) {
  tern__tls_conf_init(dst);
  dst->verify = src->verify;
  if (copy_string(&dst->ca_file, src->ca_file) || copy_string(&dst->ca_path, src->ca_path) ||
      copy_string(&dst->cert, src->cert) || copy_string(&dst->key, src->key) ||
      copy_string(&dst->password, src->password))
    return TERN_ENOMEM;
  return 0;
}

int tern__tls_conf_set_string(char **slot, const char *value) {
  char *copy = NULL;
  if (copy_string(&copy, value)) return TERN_ENOMEM;
  free(*slot);
  *slot = copy;
  return 0;
}

int tern__tls_conf_set_client_cert(tern__tls_conf *t, const char *cert_file, const char *key_file,
                                   const char *password) {
  if (cert_file == NULL && (key_file || password)) return TERN_EINVAL;
  char *cert = NULL, *key = NULL, *pass = NULL;
  if (copy_string(&cert, cert_file) || copy_string(&key, key_file) ||
      copy_string(&pass, password)) {
    free(cert);
    free(key);
    free_secret(&pass);
    return TERN_ENOMEM;
  }
  free(t->cert);
  free(t->key);
  free_secret(&t->password);
  t->cert = cert;
  t->key = key;
  t->password = pass;
  return 0;
}

/* ---- the engine's configuration ---- */

int tern__config_copy(tern_config_t *dst, const tern_config_t *src) {
  *dst = *src;
  dst->user_agent = NULL;
  tern__tls_conf_init(&dst->tls);
  memset(&dst->resolve, 0, sizeof dst->resolve);
  if (tern__str_append(&dst->resolve, src->resolve.data, src->resolve.len)) return TERN_ENOMEM;
  if (copy_string(&dst->user_agent, src->user_agent) || tern__tls_conf_copy(&dst->tls, &src->tls))
    return TERN_ENOMEM;
  return 0;
}

void tern__config_clear(tern_config_t *c) {
  free(c->user_agent);
  c->user_agent = NULL;
  tern__str_free(&c->resolve);
  tern__tls_conf_clear(&c->tls);
}

int tern_config_new(tern_config_t **out) {
  if (out == NULL) return TERN_EINVAL;
  tern_config_t *c = tern__malloc(sizeof *c);
  if (c) tern__config_defaults(c);
  *out = c;
  return c ? 0 : TERN_ENOMEM;
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

int tern_config_set_dns_cache_timeout(tern_config_t *c, uint64_t ms) {
  if (c == NULL) return TERN_EINVAL;
  c->dns_cache_ms = ms;
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

int tern_config_set_max_active_requests(tern_config_t *c, unsigned n) {
  if (c == NULL) return TERN_EINVAL;
  c->max_active_requests = n;
  return 0;
}

int tern_config_set_max_recv_speed(tern_config_t *c, uint64_t bytes_per_second) {
  if (c == NULL) return TERN_EINVAL;
  c->max_recv_speed = bytes_per_second;
  return 0;
}

int tern_config_set_max_send_speed(tern_config_t *c, uint64_t bytes_per_second) {
  if (c == NULL) return TERN_EINVAL;
  c->max_send_speed = bytes_per_second;
  return 0;
}

int tern_config_set_http2_open_when_full(tern_config_t *c, int enabled) {
  if (c == NULL) return TERN_EINVAL;
  c->http2_open_when_full = enabled != 0;
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

int tern_config_set_tls_verify(tern_config_t *c, int verify) {
  if (c == NULL) return TERN_EINVAL;
  c->tls.verify = verify != 0;
  return 0;
}

int tern_config_set_tls_ca_file(tern_config_t *c, const char *path) {
  if (c == NULL) return TERN_EINVAL;
  return tern__tls_conf_set_string(&c->tls.ca_file, path);
}

int tern_config_set_tls_ca_path(tern_config_t *c, const char *dir) {
  if (c == NULL) return TERN_EINVAL;
  return tern__tls_conf_set_string(&c->tls.ca_path, dir);
}

int tern_config_set_tls_client_cert(tern_config_t *c, const char *cert_file, const char *key_file,
                                    const char *password) {
  if (c == NULL) return TERN_EINVAL;
  return tern__tls_conf_set_client_cert(&c->tls, cert_file, key_file, password);
}
