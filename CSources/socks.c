/* SOCKS tunnels (RFC 1928 SOCKS5 with RFC 1929 user name and password; SOCKS4 and its 4A
 * extension): the handshake with the proxy, one message at a time, after which the connection
 * is a plain TCP stream to the origin (TLS starts on it for https). The proxy's answers are
 * network input: every length is checked against what arrived and against the buffer. */
#include "internal.h"
#include "socks_parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A message to the proxy: freed by its write callback, which libuv runs (with UV_ECANCELED at
 * the latest) before the connection's handle is closed, so the connection outlives it. */
typedef struct {
  uv_write_t wr;
  tern__conn *conn;
  size_t len;
  unsigned char data[];
} socks_msg;

static const char *kind_name(int kind) {
  switch (kind) {
    case TERN__PROXY_KIND_SOCKS4: return "SOCKS4";
    case TERN__PROXY_KIND_SOCKS4A: return "SOCKS4A";
    case TERN__PROXY_KIND_SOCKS5: return "SOCKS5";
    default: return "SOCKS5H";
  }
}

/* Records "SOCKS5 proxy HOST:PORT: <what>" as the first request's error; returns TERN_EPROXY. */
static int socks_error(tern__conn *c, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const tern__origin *o = c->origin;
  tern_request_t *req = tern__conn_first(c);
  if (req)
    tern__request_set_error(req, TERN_EPROXY, "%s proxy %s:%u: %s", kind_name(o->proxy_kind),
                            o->proxy_host, (unsigned)o->proxy_port, what);
  return TERN_EPROXY;
}

static void on_msg_written(uv_write_t *wr, int status) {
  socks_msg *m = tern__container_of(wr, socks_msg, wr);
  tern__conn *c = m->conn;
  memset(m->data, 0, m->len); /* it may have carried a password */
  free(m);
  if (status >= 0 || c->state == TERN__CONN_CLOSING) return;
  tern__engine_enter(c->engine);
  tern__conn_fail(c, NULL, socks_error(c, "sending the handshake failed: %s", uv_strerror(status)));
  tern__engine_leave(c->engine);
}

static int send_msg(tern__conn *c, const unsigned char *data, size_t len) {
  socks_msg *m = tern__malloc(sizeof *m + len);
  if (m == NULL) return TERN_ENOMEM;
  m->conn = c;
  m->len = len;
  memcpy(m->data, data, len);
  uv_buf_t b = uv_buf_init((char *)m->data, (unsigned)len);
  int r = uv_write(&m->wr, (uv_stream_t *)&c->tcp, &b, 1, on_msg_written);
  if (r) {
    memset(m->data, 0, len);
    free(m);
    return socks_error(c, "sending the handshake failed: %s", uv_strerror(r));
  }
  return 0;
}

static const tern__auth *credentials(const tern__conn *c) {
  tern_request_t *req = tern__conn_first(c);
  return req ? &req->auth.proxy : NULL;
}

/* SOCKS4: VN 4, CD 1 (CONNECT), port, IPv4 address, user id, NUL; 4A puts 0.0.0.1 as the
 * address and the host name, NUL, after the user id. */
static int socks4_request(tern__conn *c) {
  const tern__origin *o = c->origin;
  const tern__auth *a = credentials(c);
  const char *user = a && a->user ? a->user : "";
  size_t ulen = strlen(user), hlen = strlen(o->host);
  if (ulen > 255 || hlen > 255) return socks_error(c, "user name or host name over 255 bytes");
  unsigned char m[8 + 256 + 256];
  size_t n = 0;
  m[n++] = 4;
  m[n++] = 1;
  m[n++] = (unsigned char)(o->port >> 8);
  m[n++] = (unsigned char)(o->port & 0xff);
  if (o->proxy_kind == TERN__PROXY_KIND_SOCKS4) {
    if (!c->has_target_addr || c->target_addr.ss_family != AF_INET)
      return socks_error(c, "SOCKS4 needs an IPv4 address for %s and there is none", o->host);
    memcpy(m + n, &((const struct sockaddr_in *)&c->target_addr)->sin_addr, 4);
    n += 4;
  } else {
    static const unsigned char name_follows[4] = { 0, 0, 0, 1 };
    memcpy(m + n, name_follows, 4);
    n += 4;
  }
  memcpy(m + n, user, ulen + 1);
  n += ulen + 1;
  if (o->proxy_kind == TERN__PROXY_KIND_SOCKS4A) {
    memcpy(m + n, o->host, hlen + 1);
    n += hlen + 1;
  }
  c->socks_step = TERN__SOCKS4_CONNECT;
  return send_msg(c, m, n);
}

/* SOCKS5 CONNECT: VER 5, CMD 1, RSV, then the address (IPv4, a name, or IPv6) and the port. A
 * name goes as a name only to a proxy that resolves (socks5h); a literal address goes as one. */
static int socks5_connect(tern__conn *c) {
  const tern__origin *o = c->origin;
  unsigned char m[6 + 1 + 255 + 16];
  size_t n = 0;
  m[n++] = 5;
  m[n++] = 1;
  m[n++] = 0;
  struct in_addr a4;
  struct in6_addr a6;
  if (c->has_target_addr && c->target_addr.ss_family == AF_INET) {
    m[n++] = 1;
    memcpy(m + n, &((const struct sockaddr_in *)&c->target_addr)->sin_addr, 4);
    n += 4;
  } else if (c->has_target_addr && c->target_addr.ss_family == AF_INET6) {
    m[n++] = 4;
    memcpy(m + n, &((const struct sockaddr_in6 *)&c->target_addr)->sin6_addr, 16);
    n += 16;
  } else if (o->proxy_kind == TERN__PROXY_KIND_SOCKS5) {
    return socks_error(c, "no address of %s to give it (socks5h:// lets the proxy resolve)",
                       o->host);
  } else if (uv_inet_pton(AF_INET, o->host, &a4) == 0) {
    m[n++] = 1;
    memcpy(m + n, &a4, 4);
    n += 4;
  } else if (uv_inet_pton(AF_INET6, o->host, &a6) == 0) {
    m[n++] = 4;
    memcpy(m + n, &a6, 16);
    n += 16;
  } else {
    size_t hlen = strlen(o->host);
    if (hlen > 255) return socks_error(c, "host name %s is over 255 bytes", o->host);
    m[n++] = 3;
    m[n++] = (unsigned char)hlen;
    memcpy(m + n, o->host, hlen);
    n += hlen;
  }
  m[n++] = (unsigned char)(o->port >> 8);
  m[n++] = (unsigned char)(o->port & 0xff);
  c->socks_step = TERN__SOCKS5_CONNECT;
  return send_msg(c, m, n);
}

int tern__socks_start(tern__conn *c) {
  c->state = TERN__CONN_SOCKS;
  tern__conn_start_reading(c);
  tern__log(c->engine, TERN_LOG_DEBUG, tern__conn_first(c),
            "connection #%llu: %s handshake for %s:%u with proxy %s", (unsigned long long)c->id,
            kind_name(c->origin->proxy_kind), c->origin->host, (unsigned)c->origin->port,
            c->origin->proxy_host);
  if (c->origin->proxy_kind == TERN__PROXY_KIND_SOCKS4 ||
      c->origin->proxy_kind == TERN__PROXY_KIND_SOCKS4A)
    return socks4_request(c);
  /* VER 5, NMETHODS, METHODS: no authentication, and user name/password when we have one. */
  const tern__auth *a = credentials(c);
  bool have_user = a && a->user;
  unsigned char m[4] = { 5, have_user ? 2 : 1, 0, 2 };
  c->socks_step = TERN__SOCKS5_GREETING;
  return send_msg(c, m, have_user ? 4 : 3);
}

/* RFC 1929: VER 1, ULEN, UNAME, PLEN, PASSWD. */
static int socks5_auth(tern__conn *c) {
  const tern__auth *a = credentials(c);
  const char *user = a && a->user ? a->user : "", *pass = a && a->password ? a->password : "";
  size_t ul = strlen(user), pl = strlen(pass);
  if (ul == 0 || ul > 255 || pl > 255)
    return socks_error(c, "user name or password empty or over 255 bytes");
  unsigned char m[3 + 255 + 255];
  size_t n = 0;
  m[n++] = 1;
  m[n++] = (unsigned char)ul;
  memcpy(m + n, user, ul);
  n += ul;
  m[n++] = (unsigned char)pl;
  memcpy(m + n, pass, pl);
  n += pl;
  c->socks_step = TERN__SOCKS5_AUTH;
  int r = send_msg(c, m, n);
  memset(m, 0, sizeof m);
  return r;
}

static const char *socks5_reply_text(unsigned rep) {
  static const char *const text[] = { "succeeded",
                                      "general SOCKS server failure",
                                      "connection not allowed by ruleset",
                                      "network unreachable",
                                      "host unreachable",
                                      "connection refused",
                                      "TTL expired",
                                      "command not supported",
                                      "address type not supported" };
  return rep < sizeof text / sizeof text[0] ? text[rep] : "unknown reply";
}

static const char *socks4_reply_text(unsigned cd) {
  switch (cd) {
    case 91: return "request rejected or failed";
    case 92: return "request rejected: the proxy cannot reach the client's identd";
    case 93: return "request rejected: identd reports a different user id";
    default: return "unknown reply";
  }
}

/* The tunnel is open: the origin's bytes come next, TLS first for https. */
static int tunnel_open(tern__conn *c, size_t reply_len) {
  tern__conn_consume(c, reply_len);
  if (c->len > 0) return socks_error(c, "sent %zu bytes after its reply", c->len);
  tern__log(c->engine, TERN_LOG_DEBUG, tern__conn_first(c), "connection #%llu: %s tunnel open",
            (unsigned long long)c->id, kind_name(c->origin->proxy_kind));
  if (c->origin->tls) return tern__conn_start_tls(c);
  c->state = TERN__CONN_ACTIVE;
  c->events->ready(c);
  return 0;
}

int tern__socks_read(tern__conn *c) {
  const tern__origin *o = c->origin;
  unsigned version, code;
  int r = tern__socks_answer(c->socks_step, (const unsigned char *)c->buf, c->len, &version, &code);
  if (r == TERN__SOCKS_MORE) return 0;
  if (r == TERN__SOCKS_BAD_VERSION) {
    static const char *const what[] = { "the greeting", "the credentials", "CONNECT", "CONNECT" };
    unsigned want = c->socks_step == TERN__SOCKS5_AUTH      ? 1
                    : c->socks_step == TERN__SOCKS4_CONNECT ? 0
                                                            : 5;
    return socks_error(c, "answered %s with version %u, not %u", what[c->socks_step], version,
                       want);
  }
  if (r == TERN__SOCKS_BAD_ADDRESS)
    return socks_error(c, "sent an unknown address type (%u)", code);
  if (r < 0) return socks_error(c, "handshake in an unknown state");
  switch (c->socks_step) {
    case TERN__SOCKS5_GREETING: {
      const tern__auth *a = credentials(c);
      bool have_user = a && a->user;
      tern__conn_consume(c, (size_t)r);
      if (c->len > 0) return socks_error(c, "sent bytes beyond its method choice");
      if (code == 0) return socks5_connect(c);
      if (code == 2 && have_user) return socks5_auth(c);
      if (code == 2) return socks_error(c, "requires a user name and password, and none was given");
      if (code == 0xff)
        return socks_error(c, "accepts none of the authentication methods offered (%s)",
                           have_user ? "none, user name and password" : "none");
      return socks_error(c, "chose an authentication method that was not offered (%u)", code);
    }
    case TERN__SOCKS5_AUTH:
      if (code != 0) return socks_error(c, "refused the user name and password (status %u)", code);
      tern__conn_consume(c, (size_t)r);
      if (c->len > 0) return socks_error(c, "sent bytes beyond its authentication verdict");
      return socks5_connect(c);
    case TERN__SOCKS5_CONNECT:
      if (code != 0)
        return socks_error(c, "could not connect to %s:%u: %s (reply %u)", o->host,
                           (unsigned)o->port, socks5_reply_text(code), code);
      return tunnel_open(c, (size_t)r);
    default: /* TERN__SOCKS4_CONNECT */
      if (code != 90)
        return socks_error(c, "could not connect to %s:%u: %s (%u)", o->host, (unsigned)o->port,
                           socks4_reply_text(code), code);
      return tunnel_open(c, (size_t)r);
  }
}
