/* SOCKS tunnels (RFC 1928 SOCKS5 with RFC 1929 user name and password; SOCKS4 and its 4A
 * extension): the handshake with the proxy, one message at a time, after which the connection
 * is a plain TCP stream to the origin (TLS starts on it for https). The proxy's answers are
 * network input: every length is checked against what arrived and against the buffer. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  SOCKS5_GREETING, /* sent the methods we offer; waiting for the proxy's choice */
  SOCKS5_AUTH,     /* sent user name and password; waiting for the verdict */
  SOCKS5_CONNECT,  /* sent CONNECT; waiting for the reply */
  SOCKS4_CONNECT   /* sent the SOCKS4/4A request; waiting for the reply */
};

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
  c->socks_step = SOCKS4_CONNECT;
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
  c->socks_step = SOCKS5_CONNECT;
  return send_msg(c, m, n);
}

int tern__socks_start(tern__conn *c) {
  c->state = TERN__CONN_SOCKS;
  tern__conn_start_reading(c);
  tern__log(c->engine, TERN_LOG_DEBUG, tern__conn_first(c),
            "connection #%llu: %s handshake for %s:%u with proxy %s",
            (unsigned long long)c->id, kind_name(c->origin->proxy_kind), c->origin->host,
            (unsigned)c->origin->port, c->origin->proxy_host);
  if (c->origin->proxy_kind == TERN__PROXY_KIND_SOCKS4 ||
      c->origin->proxy_kind == TERN__PROXY_KIND_SOCKS4A)
    return socks4_request(c);
  /* VER 5, NMETHODS, METHODS: no authentication, and user name/password when we have one. */
  const tern__auth *a = credentials(c);
  bool have_user = a && a->user;
  unsigned char m[4] = { 5, have_user ? 2 : 1, 0, 2 };
  c->socks_step = SOCKS5_GREETING;
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
  c->socks_step = SOCKS5_AUTH;
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
  const unsigned char *p = (const unsigned char *)c->buf;
  const tern__origin *o = c->origin;
  switch (c->socks_step) {
    case SOCKS5_GREETING: {
      if (c->len < 2) return 0;
      if (p[0] != 5) return socks_error(c, "answered the greeting with version %u, not 5", p[0]);
      unsigned method = p[1];
      const tern__auth *a = credentials(c);
      bool have_user = a && a->user;
      tern__conn_consume(c, 2);
      if (c->len > 0) return socks_error(c, "sent bytes beyond its method choice");
      if (method == 0) return socks5_connect(c);
      if (method == 2 && have_user) return socks5_auth(c);
      if (method == 2)
        return socks_error(c, "requires a user name and password, and none was given");
      if (method == 0xff)
        return socks_error(c, "accepts none of the authentication methods offered (%s)",
                           have_user ? "none, user name and password" : "none");
      return socks_error(c, "chose an authentication method that was not offered (%u)", method);
    }
    case SOCKS5_AUTH:
      if (c->len < 2) return 0;
      if (p[0] != 1)
        return socks_error(c, "answered the credentials with version %u, not 1", p[0]);
      if (p[1] != 0)
        return socks_error(c, "refused the user name and password (status %u)", p[1]);
      tern__conn_consume(c, 2);
      if (c->len > 0) return socks_error(c, "sent bytes beyond its authentication verdict");
      return socks5_connect(c);
    case SOCKS5_CONNECT: {
      if (c->len < 5) return 0;
      if (p[0] != 5) return socks_error(c, "answered CONNECT with version %u, not 5", p[0]);
      if (p[1] != 0)
        return socks_error(c, "could not connect to %s:%u: %s (reply %u)", o->host,
                           (unsigned)o->port, socks5_reply_text(p[1]), p[1]);
      size_t addr;
      switch (p[3]) {
        case 1: addr = 4; break;
        case 4: addr = 16; break;
        case 3: addr = 1 + (size_t)p[4]; break;
        default: return socks_error(c, "sent an unknown address type (%u)", p[3]);
      }
      size_t need = 4 + addr + 2;
      if (c->len < need) return 0;
      return tunnel_open(c, need);
    }
    case SOCKS4_CONNECT:
      if (c->len < 8) return 0;
      if (p[0] != 0 && p[0] != 4)
        return socks_error(c, "answered with version %u, not 0", p[0]);
      if (p[1] != 90)
        return socks_error(c, "could not connect to %s:%u: %s (%u)", o->host, (unsigned)o->port,
                           socks4_reply_text(p[1]), p[1]);
      return tunnel_open(c, 8);
    default: return socks_error(c, "handshake in an unknown state");
  }
}
