/* Opening a connection: its handles and buffer, the addresses of the host (the proxy's when
 * there is one; for a SOCKS proxy that takes addresses, the origin's first), and connecting
 * address after address. Once TCP is up the protocol hears `connected`. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static void on_connect(uv_connect_t *cr, int status);
static void on_resolved(uv_getaddrinfo_t *gai, int status, struct addrinfo *res);
static void try_next_address(tern__conn *c);
static void lookup(tern__conn *c);

tern__conn *tern__conn_open(tern__origin *o, tern_request_t *first, uint64_t connect_ms,
                            const tern__conn_events *events) {
  tern_engine_t *eng = first->engine;
  tern__conn *c = tern__calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->cap = c->rcap = o->buffer_size;
  c->buf = tern__malloc(c->cap);
  if (c->buf == NULL) {
    free(c);
    return NULL;
  }
  c->origin = o;
  c->engine = eng;
  c->events = events;
  tern__list_init(&c->requests);
  uv_tcp_init(eng->loop, &c->tcp);
  uv_timer_init(eng->loop, &c->timer);
  uv_timer_init(eng->loop, &c->bw_timer);
  c->tcp.data = c;
  c->timer.data = c;
  c->bw_timer.data = c;
  c->pending = 3;
  eng->handles++;
  o->nconns++;
  tern__list_insert_tail(&o->busy, &c->node);
  c->id = TERN__STAT_ADD(eng, TERN_STAT_CONNECTIONS_OPENED, 1) + 1;
  TERN__STAT_ADD(eng, TERN_STAT_CONNECTIONS_OPEN, 1);
  tern__log(eng, TERN_LOG_DEBUG, first, "connection #%llu to %s port %u: opening",
            (unsigned long long)c->id, o->host, (unsigned)o->port);

  first->conn = c;
  tern__list_remove(&first->node);
  tern__list_insert_tail(&c->requests, &first->node);
  c->nrequests = 1;
  tern__conn_set_timer(c, TERN__TIMER_CONNECT, connect_ms);
  /* A SOCKS proxy that takes addresses needs the origin's before the proxy's own. */
  c->resolving_target = o->proxy_host != NULL && tern__proxy_resolves_locally(o->proxy_kind);
  lookup(c);
  return c;
}

/* The host being resolved now: the origin for a proxy that takes addresses, else the proxy
 * (the socket goes there; TLS and Host still name the origin), else the origin. */
static const char *lookup_host(const tern__conn *c, uint16_t *port) {
  const tern__origin *o = c->origin;
  bool origin = c->resolving_target || o->proxy_host == NULL;
  *port = origin ? o->port : o->proxy_port;
  return origin ? o->host : o->proxy_host;
}

/* Keeps the origin's first address a SOCKS proxy can take (SOCKS4: IPv4 only), then goes on
 * to the proxy's. */
static void got_target(tern__conn *c, const struct addrinfo *res) {
  for (const struct addrinfo *a = res; a; a = a->ai_next) {
    if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
    if (a->ai_family == AF_INET6 && c->origin->proxy_kind == TERN__PROXY_KIND_SOCKS4) continue;
    if (a->ai_addrlen > sizeof c->target_addr) continue;
    memcpy(&c->target_addr, a->ai_addr, a->ai_addrlen);
    c->has_target_addr = true;
    break;
  }
  c->resolving_target = false;
  lookup(c);
}

/* Finds or resolves the current lookup host's addresses and connects; for a SOCKS proxy's
 * target it keeps the origin's address and moves on to the proxy. */
static void lookup(tern__conn *c) {
  tern_engine_t *eng = c->engine;
  tern_request_t *first = tern__conn_first(c);
  uint16_t port_num;
  const char *host = lookup_host(c, &port_num);
  struct addrinfo *known = tern__resolve_known(eng, host, port_num);
  if (known) {
    if (c->resolving_target) {
      got_target(c, known);
      tern__addrs_free(known);
      return;
    }
    c->addrs = c->next_addr = known;
    c->own_addrs = true;
    c->state = TERN__CONN_CONNECTING;
    c->last_error = UV_EADDRNOTAVAIL;
    try_next_address(c);
    return;
  }
  /* Literal addresses skip the resolver's thread pool hop. */
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  if (uv_ip4_addr(host, port_num, (struct sockaddr_in *)&ss) == 0 ||
      uv_ip6_addr(host, port_num, (struct sockaddr_in6 *)&ss) == 0) {
    if (c->resolving_target) {
      c->target_addr = ss;
      c->has_target_addr = true;
      c->resolving_target = false;
      lookup(c);
      return;
    }
    c->state = TERN__CONN_CONNECTING;
    int r = uv_tcp_connect(&c->connect_req, &c->tcp, (struct sockaddr *)&ss, on_connect);
    if (r) {
      tern__request_set_error(first, tern__map_uv_error(r, TERN_ECONNECT), "connect to %s%s:%u: %s",
                              c->origin->proxy_host ? "proxy " : "", host, (unsigned)port_num,
                              uv_strerror(r));
      tern__conn_fail(c, NULL, tern__map_uv_error(r, TERN_ECONNECT));
    }
    return;
  }
  char port[8];
  snprintf(port, sizeof port, "%u", (unsigned)port_num);
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  c->state = TERN__CONN_RESOLVING;
  TERN__STAT_ADD(eng, TERN_STAT_DNS_LOOKUPS, 1);
  int r = uv_getaddrinfo(eng->loop, &c->gai, on_resolved, host, port, &hints);
  if (r) {
    tern__request_set_error(first, TERN_ERESOLVE, "resolve %s: %s", host, uv_strerror(r));
    tern__conn_fail(c, NULL, TERN_ERESOLVE);
    return;
  }
  c->gai.data = c;
  c->gai_live = true;
  c->pending++;
}

static void on_resolved(uv_getaddrinfo_t *gai, int status, struct addrinfo *res) {
  tern__conn *c = gai->data;
  c->pending--;
  c->gai_live = false;
  if (c->state == TERN__CONN_CLOSING) {
    if (res) uv_freeaddrinfo(res);
    tern__conn_free_if_done(c);
    return;
  }
  tern_engine_t *eng = c->engine;
  tern__engine_enter(eng);
  uint16_t port;
  const char *host = lookup_host(c, &port);
  bool of_proxy = c->origin->proxy_host && !c->resolving_target;
  if (status < 0) {
    tern__request_set_error(tern__conn_first(c), TERN_ERESOLVE, "resolve %s%s: %s",
                            of_proxy ? "proxy " : "", host, uv_strerror(status));
    tern__conn_fail(c, NULL, TERN_ERESOLVE);
  } else if (c->resolving_target) {
    tern__resolve_remember(eng, host, port, res);
    got_target(c, res);
    uv_freeaddrinfo(res);
  } else {
    tern__resolve_remember(eng, host, port, res);
    c->addrs = res;
    c->next_addr = res;
    c->state = TERN__CONN_CONNECTING;
    c->last_error = UV_EADDRNOTAVAIL;
    try_next_address(c);
  }
  tern__engine_leave(eng);
}

static void connect_failed(tern__conn *c) {
  int err = tern__map_uv_error(c->last_error, TERN_ECONNECT);
  const tern__origin *o = c->origin;
  tern__request_set_error(tern__conn_first(c), err, "connect to %s%s:%u: %s",
                          o->proxy_host ? "proxy " : "", o->proxy_host ? o->proxy_host : o->host,
                          (unsigned)(o->proxy_host ? o->proxy_port : o->port),
                          uv_strerror(c->last_error));
  tern__conn_fail(c, NULL, err);
}

static void on_tcp_reopened(uv_handle_t *h) {
  tern__conn *c = h->data;
  c->tcp_closing = false;
  if (c->state == TERN__CONN_CLOSING) {
    c->pending--;
    tern__conn_free_if_done(c);
    return;
  }
  tern__engine_enter(c->engine);
  uv_tcp_init(c->engine->loop, &c->tcp);
  c->tcp.data = c;
  try_next_address(c);
  tern__engine_leave(c->engine);
}

/* A failed connect leaves the socket bound to its address family: start over on a fresh
 * handle for the next address. */
static void try_next_address(tern__conn *c) {
  while (c->next_addr) {
    struct addrinfo *a = c->next_addr;
    c->next_addr = a->ai_next;
    if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
    int r = uv_tcp_connect(&c->connect_req, &c->tcp, a->ai_addr, on_connect);
    if (r == 0) return;
    c->last_error = r;
    c->tcp_closing = true;
    uv_close((uv_handle_t *)&c->tcp, on_tcp_reopened);
    return;
  }
  connect_failed(c);
}

static void on_connect(uv_connect_t *cr, int status) {
  tern__conn *c = tern__container_of(cr, tern__conn, connect_req);
  if (c->state == TERN__CONN_CLOSING) return;
  tern_engine_t *eng = c->engine;
  tern__engine_enter(eng);
  if (status < 0) {
    c->last_error = status;
    tern__log(eng, TERN_LOG_DEBUG, tern__conn_first(c),
              "connection #%llu: connect to %s port %u failed: %s%s", (unsigned long long)c->id,
              c->origin->host, (unsigned)c->origin->port, uv_strerror(status),
              c->next_addr ? "; trying the next address" : "");
    if (c->next_addr) {
      c->tcp_closing = true;
      uv_close((uv_handle_t *)&c->tcp, on_tcp_reopened);
    } else {
      connect_failed(c);
    }
    tern__engine_leave(eng);
    return;
  }
  tern__conn_free_addrs(c);
  uv_tcp_nodelay(&c->tcp, 1);
  tern_request_t *req = tern__conn_first(c);
  if (TERN__LOGGING(eng, TERN_LOG_DEBUG)) {
    struct sockaddr_storage peer;
    int len = sizeof peer;
    char ip[64] = "?";
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&peer, &len) == 0)
      uv_ip_name((struct sockaddr *)&peer, ip, sizeof ip);
    tern__log(eng, TERN_LOG_DEBUG, req, "connection #%llu connected to %s (%s) port %u",
              (unsigned long long)c->id, c->origin->host, ip, (unsigned)c->origin->port);
  }
  c->events->connected(c);
  tern__engine_leave(eng);
}
