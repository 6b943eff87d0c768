/* A connection: resolve, connect, write requests, frame responses, keep-alive, timeouts.
 *
 * Each connection owns one I/O buffer (c->buf, c->cap bytes), allocated once. Response bytes are
 * read into it, the head is parsed in place, body bytes go from it straight to the request's
 * sink, and file or callback request bodies are staged in it piece by piece. Reading pauses
 * while a request body is staged there, so the two uses never overlap. */
#include "internal.h"

#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_HEADERS 256
/* All interim (1xx) heads of one hop together: a server sending 100 Continue for ever must not
 * keep a request alive for ever (curl stops at 300 KB of headers too). */
#define MAX_INTERIM (300u * 1024u)
/* Memory bodies go out in pieces of this size, so upload progress moves. */
#define MEM_PIECE (1u << 20)

static void on_connect(uv_connect_t *cr, int status);
static void on_write(uv_write_t *wr, int status);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static int pump(tern__conn *c);
static void consume(tern__conn *c, size_t n);
static int head_limit(const tern__conn *c);
static int tunnel_start(tern__conn *c);
static void on_eof(tern__conn *c, ssize_t uverr);
static void try_next_address(tern__conn *c);
static void write_next(tern__conn *c);
static void start_reading(tern__conn *c);
static void on_resolved(uv_getaddrinfo_t *gai, int status, struct addrinfo *res);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
int tern__conn_process(tern__conn *c);

static tern_request_t *first_request(const tern__conn *c) {
  return tern__list_empty(&c->requests)
             ? NULL
             : tern__container_of(c->requests.next, tern_request_t, node);
}

static void free_addrs(tern__conn *c) {
  if (c->addrs == NULL) return;
  if (c->own_addrs) {
    while (c->addrs) {
      struct addrinfo *next = c->addrs->ai_next;
      free(c->addrs);
      c->addrs = next;
    }
  } else {
    uv_freeaddrinfo(c->addrs);
  }
  c->addrs = c->next_addr = NULL;
}

/* The addresses pinned for host:port by tern_config_add_resolve, as an addrinfo chain of our
 * own; NULL when none is pinned. Entries were validated when added. */
static struct addrinfo *pinned_addrs(const tern_config_t *cfg, const char *host, uint16_t port) {
  const char *p = cfg->resolve.data;
  const char *end = p ? p + cfg->resolve.len : NULL;
  while (p && p < end) {
    const char *tab1 = memchr(p, '\t', (size_t)(end - p));
    const char *tab2 = tab1 ? memchr(tab1 + 1, '\t', (size_t)(end - tab1 - 1)) : NULL;
    const char *nl = tab2 ? memchr(tab2, '\n', (size_t)(end - tab2)) : NULL;
    if (nl == NULL) return NULL;
    if ((size_t)(tab1 - p) == strlen(host) && strncasecmp(p, host, (size_t)(tab1 - p)) == 0 &&
        strtoul(tab1 + 1, NULL, 10) == port) {
      struct addrinfo *head = NULL, **tail = &head;
      for (const char *a = tab2 + 1; a < nl;) {
        size_t n = strcspn(a, ",\n");
        char ip[64];
        snprintf(ip, sizeof ip, "%.*s", (int)n, a);
        char *bare = ip;
        if (bare[0] == '[') {
          bare[strlen(bare) - 1] = '\0';
          bare++;
        }
        struct {
          struct addrinfo ai;
          struct sockaddr_storage ss;
        } *node = tern__calloc(1, sizeof *node);
        if (node == NULL) break;
        node->ai.ai_addr = (struct sockaddr *)&node->ss;
        node->ai.ai_socktype = SOCK_STREAM;
        if (uv_ip4_addr(bare, port, (struct sockaddr_in *)&node->ss) == 0) {
          node->ai.ai_family = AF_INET;
          node->ai.ai_addrlen = sizeof(struct sockaddr_in);
        } else {
          uv_ip6_addr(bare, port, (struct sockaddr_in6 *)&node->ss);
          node->ai.ai_family = AF_INET6;
          node->ai.ai_addrlen = sizeof(struct sockaddr_in6);
        }
        *tail = &node->ai;
        tail = &node->ai.ai_next;
        a += n;
        if (*a == ',') a++;
      }
      return head;
    }
    p = nl + 1;
  }
  return NULL;
}

static void maybe_free(tern__conn *c) {
  if (c->pending > 0) return;
  tern_engine_t *eng = c->engine;
  free_addrs(c);
  tern__tls_conn_free(c);
  free(c->buf);
  free(c);
  TERN__STAT_SUB(eng, TERN_STAT_CONNECTIONS_OPEN, 1);
  tern__engine_handle_gone(eng);
}

static void on_handle_closed(uv_handle_t *h) {
  tern__conn *c = h->data;
  c->pending--;
  maybe_free(c);
}

static void on_timer(uv_timer_t *t);

void tern__conn_arm_timer(tern__conn *c) {
  if (c->timer_ms == 0 || c->timer_kind == TERN__TIMER_NONE) {
    uv_timer_stop(&c->timer);
    return;
  }
  uv_timer_start(&c->timer, on_timer, c->timer_ms, 0);
}

static void set_timer(tern__conn *c, int kind, uint64_t ms) {
  c->timer_kind = kind;
  c->timer_ms = ms;
  c->last_activity = uv_now(c->engine->loop);
  tern__conn_arm_timer(c);
}

tern__conn *tern__conn_open(tern__origin *o, tern_request_t *first, uint64_t connect_ms) {
  tern_engine_t *eng = first->engine;
  tern__conn *c = tern__calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->cap = o->buffer_size;
  c->buf = tern__malloc(c->cap);
  if (c->buf == NULL) {
    free(c);
    return NULL;
  }
  c->origin = o;
  c->engine = eng;
  tern__list_init(&c->requests);
  uv_tcp_init(eng->loop, &c->tcp);
  uv_timer_init(eng->loop, &c->timer);
  c->tcp.data = c;
  c->timer.data = c;
  c->pending = 2;
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
  set_timer(c, TERN__TIMER_CONNECT, connect_ms);

  /* Through a proxy, the socket goes to the proxy; TLS and Host still name the origin. */
  const char *host = o->proxy_host ? o->proxy_host : o->host;
  uint16_t port_num = o->proxy_host ? o->proxy_port : o->port;
  struct addrinfo *pinned = pinned_addrs(&eng->config, host, port_num);
  if (pinned) {
    c->addrs = c->next_addr = pinned;
    c->own_addrs = true;
    c->state = TERN__CONN_CONNECTING;
    c->last_error = UV_EADDRNOTAVAIL;
    try_next_address(c);
    return c;
  }
  /* Literal addresses skip the resolver's thread pool hop. */
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  if (uv_ip4_addr(host, port_num, (struct sockaddr_in *)&ss) == 0 ||
      uv_ip6_addr(host, port_num, (struct sockaddr_in6 *)&ss) == 0) {
    c->state = TERN__CONN_CONNECTING;
    int r = uv_tcp_connect(&c->connect_req, &c->tcp, (struct sockaddr *)&ss, on_connect);
    if (r) {
      tern__request_set_error(first, tern__map_uv_error(r, TERN_ECONNECT), "connect to %s:%u: %s",
                              host, (unsigned)port_num, uv_strerror(r));
      tern__conn_fail(c, NULL, tern__map_uv_error(r, TERN_ECONNECT));
    }
    return c;
  }
  char port[8];
  snprintf(port, sizeof port, "%u", (unsigned)port_num);
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  c->state = TERN__CONN_RESOLVING;
  int r = uv_getaddrinfo(eng->loop, &c->gai, on_resolved, host, port, &hints);
  if (r) {
    tern__request_set_error(first, TERN_ERESOLVE, "resolve %s: %s", host, uv_strerror(r));
    tern__conn_fail(c, NULL, TERN_ERESOLVE);
    return c;
  }
  c->gai.data = c;
  c->gai_live = true;
  c->pending++;
  return c;
}

static void on_resolved(uv_getaddrinfo_t *gai, int status, struct addrinfo *res) {
  tern__conn *c = gai->data;
  c->pending--;
  c->gai_live = false;
  if (c->state == TERN__CONN_CLOSING) {
    if (res) uv_freeaddrinfo(res);
    maybe_free(c);
    return;
  }
  tern_engine_t *eng = c->engine;
  tern__engine_enter(eng);
  if (status < 0) {
    tern__request_set_error(first_request(c), TERN_ERESOLVE, "resolve %s%s: %s",
                            c->origin->proxy_host ? "proxy " : "",
                            c->origin->proxy_host ? c->origin->proxy_host : c->origin->host,
                            uv_strerror(status));
    tern__conn_fail(c, NULL, TERN_ERESOLVE);
  } else {
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
  tern__request_set_error(first_request(c), err, "connect to %s%s:%u: %s",
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
    maybe_free(c);
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

/* ---- CONNECT tunnels through a proxy ---- */

static void on_tunnel_written(uv_write_t *wr, int status) {
  tern__conn *c = tern__container_of(wr, tern__conn, write_req);
  c->writing = false;
  free(c->tunnel_head);
  c->tunnel_head = NULL;
  if (c->state == TERN__CONN_CLOSING || status >= 0) return;
  tern__engine_enter(c->engine);
  tern_request_t *req = first_request(c);
  if (req)
    tern__request_set_error(req, TERN_EPROXY, "send CONNECT to proxy %s: %s", c->origin->proxy_host,
                            uv_strerror(status));
  tern__conn_fail(c, NULL, TERN_EPROXY);
  tern__engine_leave(c->engine);
}

static int tunnel_start(tern__conn *c) {
  tern_request_t *req = first_request(c);
  const tern__origin *o = c->origin;
  tern__str authority = {0}, h = {0}, pa = {0};
  int r = tern__str_appendf(&authority, strchr(o->host, ':') ? "[%s]:%u" : "%s:%u", o->host,
                            (unsigned)o->port);
  if (!r) r = tern__str_appendf(&h, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", authority.data,
                                authority.data);
  if (!r) r = tern__request_proxy_authorization(req, "CONNECT", authority.data, &pa);
  if (!r && pa.len) r = tern__str_appendf(&h, "Proxy-Authorization: %.*s\r\n", (int)pa.len, pa.data);
  if (!r) r = tern__str_append(&h, "\r\n", 2);
  tern__str_free(&authority);
  tern__str_free(&pa);
  if (r) {
    tern__str_free(&h);
    return r;
  }
  c->tunnel_head = h.data;
  c->state = TERN__CONN_TUNNEL;
  start_reading(c);
  uv_buf_t b = uv_buf_init(h.data, (unsigned)h.len);
  r = uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &b, 1, on_tunnel_written);
  if (r) {
    free(c->tunnel_head);
    c->tunnel_head = NULL;
    tern__request_set_error(req, TERN_EPROXY, "send CONNECT to proxy %s: %s", o->proxy_host,
                            uv_strerror(r));
    return TERN_EPROXY;
  }
  c->writing = true;
  tern__log(c->engine, TERN_LOG_DEBUG, req, "connection #%llu: CONNECT %s:%u through proxy %s",
            (unsigned long long)c->id, o->host, (unsigned)o->port, o->proxy_host);
  return 0;
}

/* The proxy's answer to CONNECT: 2xx opens the tunnel (TLS starts); a 407 the request can
 * answer becomes another hop on a new connection; anything else ends the request. */
static int tunnel_read(tern__conn *c) {
  tern_request_t *req = first_request(c);
  for (;;) {
    tern__header_t h[MAX_HEADERS];
    size_t nh = MAX_HEADERS;
    int minor = 0, status = 0;
    const char *reason = NULL;
    size_t reason_len = 0;
    int r = tern__parse_response(c->buf, c->len, c->last_len, &minor, &status, &reason,
                                 &reason_len, h, &nh);
    if (r == TERN__PARSE_INCOMPLETE) {
      if (c->len >= (size_t)head_limit(c)) break;
      c->last_len = c->len;
      return 0;
    }
    c->last_len = 0;
    if (r < 0) break;
    if (status < 200) {
      c->tunnel_interim += (size_t)r;
      if (c->tunnel_interim > MAX_INTERIM) {
        tern__request_set_error(req, TERN_EPROXY, "proxy %s: interim (1xx) responses to CONNECT exceed %u bytes",
                                c->origin->proxy_host, MAX_INTERIM);
        return TERN_EPROXY;
      }
      consume(c, (size_t)r);
      continue;
    }
    if (status < 300) {
      consume(c, (size_t)r);
      if (c->len > 0) break; /* the server speaks first in TLS only after our hello */
      return tern__tls_start(c);
    }
    int e = tern__request_set_response(req, minor, status, reason, reason_len, h, nh);
    if (e) return e;
    if (req->hop_response_cb && !atomic_load(&req->released) &&
        req->hop_response_cb(req, status, req->hop_response_data) != 0) {
      tern__request_set_error(req, TERN_ECANCELED, "canceled by the response callback");
      return TERN_ECANCELED;
    }
    tern__request_decide_hop(req);
    if (req->next_hop == TERN__HOP_PROXY_AUTH) {
      /* The 407's body is not read: this connection ends, the next hop takes a new one. */
      tern__list_remove(&req->node);
      c->nrequests--;
      req->conn = NULL;
      tern__conn_close(c);
      tern__hop_continue(req);
      return 0;
    }
    tern__request_set_error(req, TERN_EPROXY, "proxy %s refused CONNECT to %s: %d %.*s",
                            c->origin->proxy_host, req->url.hostport, status, (int)reason_len,
                            reason);
    return TERN_EPROXY;
  }
  tern__request_set_error(req, TERN_EPROXY, "proxy %s sent a malformed answer to CONNECT",
                          c->origin->proxy_host);
  return TERN_EPROXY;
}

static void on_connect(uv_connect_t *cr, int status) {
  tern__conn *c = tern__container_of(cr, tern__conn, connect_req);
  if (c->state == TERN__CONN_CLOSING) return;
  tern_engine_t *eng = c->engine;
  tern__engine_enter(eng);
  if (status < 0) {
    c->last_error = status;
    tern__log(eng, TERN_LOG_DEBUG, first_request(c), "connection #%llu: connect to %s port %u failed: %s%s",
              (unsigned long long)c->id, c->origin->host, (unsigned)c->origin->port,
              uv_strerror(status), c->next_addr ? "; trying the next address" : "");
    if (c->next_addr) {
      c->tcp_closing = true;
      uv_close((uv_handle_t *)&c->tcp, on_tcp_reopened);
    } else {
      connect_failed(c);
    }
    tern__engine_leave(eng);
    return;
  }
  free_addrs(c);
  uv_tcp_nodelay(&c->tcp, 1);
  tern_request_t *req = first_request(c);
  if (TERN__LOGGING(eng, TERN_LOG_DEBUG)) {
    struct sockaddr_storage peer;
    int len = sizeof peer;
    char ip[64] = "?";
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&peer, &len) == 0)
      uv_ip_name((struct sockaddr *)&peer, ip, sizeof ip);
    tern__log(eng, TERN_LOG_DEBUG, req, "connection #%llu connected to %s (%s) port %u",
              (unsigned long long)c->id, c->origin->host, ip, (unsigned)c->origin->port);
  }
  if (c->origin->tls && c->origin->proxy_host) {
    int r = tunnel_start(c);
    if (r < 0) tern__conn_fail(c, NULL, r);
  } else if (c->origin->tls) {
    start_reading(c);
    int r = tern__tls_start(c);
    if (r < 0) tern__conn_fail(c, NULL, r);
  } else {
    tern__conn_ready(c);
  }
  tern__engine_leave(eng);
}

void tern__conn_ready(tern__conn *c) {
  c->state = TERN__CONN_ACTIVE;
  tern_request_t *req = first_request(c);
  if (req) tern__request_mark(req, TERN_TIME_CONNECTED);
  if (c->ssl)
    tern__log(c->engine, TERN_LOG_DEBUG, req, "connection #%llu: TLS handshake done%s",
              (unsigned long long)c->id, c->tls_resumed ? " (session resumed)" : "");
  write_next(c);
}

bool tern__conn_can_pipeline(const tern__conn *c, const tern_request_t *req, unsigned depth) {
  if (c->state != TERN__CONN_ACTIVE || c->no_more || !c->http11 || c->served == 0) return false;
  if (c->nrequests >= depth || c->upload_buffered) return false;
  if (!req->pipelining || !req->idempotent || req->body_kind != TERN__BODY_NONE) return false;
  const tern_request_t *head = first_request(c);
  return head == NULL || (head->pipelining && head->idempotent && head->body_kind == TERN__BODY_NONE);
}

void tern__conn_send(tern__conn *c, tern_request_t *req) {
  tern_engine_t *eng = c->engine;
  if (c->state == TERN__CONN_IDLE) {
    TERN__STAT_SUB(eng, TERN_STAT_CONNECTIONS_IDLE, 1);
    tern__list_remove(&c->node);
    tern__list_insert_tail(&c->origin->busy, &c->node);
    c->state = TERN__CONN_ACTIVE;
    uv_timer_stop(&c->timer);
    c->timer_kind = TERN__TIMER_NONE;
  }
  req->conn = c;
  req->reused = true;
  TERN__STAT_ADD(eng, TERN_STAT_REUSED, 1);
  tern__log(eng, TERN_LOG_DEBUG, req, "reusing connection #%llu to %s (request %u on it)",
            (unsigned long long)c->id, req->url.hostport, c->served + c->nrequests + 1);
  tern__request_mark(req, TERN_TIME_CONNECTED);
  tern__list_remove(&req->node);
  tern__list_insert_tail(&c->requests, &req->node);
  c->nrequests++;
  if (!c->writing) write_next(c);
}

static bool receive_paused(const tern__conn *c) {
  tern_request_t *req = first_request(c);
  return req != NULL && atomic_load(&req->recv_paused);
}

static void start_reading(tern__conn *c) {
  if (c->reading || c->state == TERN__CONN_CLOSING || receive_paused(c)) return;
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0) c->reading = true;
}

static void stop_reading(tern__conn *c) {
  if (!c->reading) return;
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->reading = false;
}

/* The request whose bytes go out next: the oldest one not yet fully sent. */
static tern_request_t *next_unsent(const tern__conn *c) {
  for (tern__list *n = c->requests.next; n != &c->requests; n = n->next) {
    tern_request_t *req = tern__container_of(n, tern_request_t, node);
    if (!req->sent) return req;
  }
  return NULL;
}

static void request_sent(tern__conn *c, tern_request_t *req) {
  req->sent = true;
  c->writing_req = NULL;
  tern__request_mark(req, TERN_TIME_SENT);
  tern__log(c->engine, TERN_LOG_INFO, req, "sent %s %s to %s on connection #%llu", req->method,
            req->url.target, req->url.hostport, (unsigned long long)c->id);
  if (c->upload_buffered) c->upload_buffered = false;
  if (req == first_request(c) && req->status == 0)
    set_timer(c, TERN__TIMER_HEADERS, req->timeouts[TERN_TIMEOUT_HEADERS]);
  start_reading(c);
}

/* Composes and starts the next write for the connection: the head of the next unsent request
 * and, with it, the first piece of its body. */
static void write_next(tern__conn *c) {
  if (c->writing || c->state != TERN__CONN_ACTIVE) return;
  tern_request_t *req = next_unsent(c);
  if (req == NULL) return;
  c->writing_req = req;
  bool has_body = req->body_kind != TERN__BODY_NONE;
  bool chunked = req->body_len == UINT64_MAX;
  uv_buf_t bufs[5];
  unsigned nb = 0;
  if (!req->head_sent) bufs[nb++] = uv_buf_init(req->head, (unsigned)req->head_len);
  c->pending_body = 0;
  c->last_chunk_pending = false;
  bool hold_body = !req->head_sent && req->expect_continue;
  if (has_body && !req->body_done && !hold_body) {
    const char *ptr = NULL;
    int64_t n;
    if (req->gzip_body) {
      /* Compressed bodies are staged in the buffer like file bodies. */
      if (c->len != 0) {
        tern__request_set_error(req, TERN_EPROTO, "%s: response bytes arrived before the request was sent",
                                req->url.hostport);
        tern__conn_fail(c, req, TERN_EPROTO);
        return;
      }
      if (req->encoder == NULL && (req->encoder = tern__encoder_new()) == NULL) {
        tern__conn_fail(c, req, TERN_ENOMEM);
        return;
      }
      stop_reading(c);
      c->upload_buffered = true;
      n = tern__encoder_fill(req->encoder, req, c->buf, c->cap);
      ptr = c->buf;
    } else if (req->body_kind == TERN__BODY_MEM) {
      uint64_t left = req->body_len - req->body_sent;
      uint64_t piece = c->ssl ? c->cap : MEM_PIECE; /* bounds the ciphertext held per write */
      n = (int64_t)(left < piece ? left : piece);
      ptr = (const char *)req->body_mem + req->body_sent;
    } else {
      /* The body is staged in the connection buffer: no response bytes may land there now. */
      if (c->len == 0) {
        stop_reading(c);
        c->upload_buffered = true;
        n = tern__request_read_plain(req, c->buf, c->cap);
        ptr = c->buf;
      } else {
        n = TERN_EPROTO;
        tern__request_set_error(req, TERN_EPROTO, "%s: response bytes arrived before the request was sent",
                                req->url.hostport);
      }
    }
    if (n < 0) {
      tern__conn_fail(c, req, (int)n);
      return;
    }
    c->pending_body = req->gzip_body ? 0 : (size_t)n; /* compressed: counted as pulled */
    if (chunked) {
      if (n > 0) {
        int k = snprintf(c->chunk_line, sizeof c->chunk_line, "%llx\r\n", (unsigned long long)n);
        bufs[nb++] = uv_buf_init(c->chunk_line, (unsigned)k);
        bufs[nb++] = uv_buf_init((char *)ptr, (unsigned)n);
        bufs[nb++] = uv_buf_init((char *)"\r\n", 2);
      }
      if (n == 0 || (req->gzip_body && tern__encoder_done(req->encoder))) {
        bufs[nb++] = uv_buf_init((char *)"0\r\n\r\n", 5);
        c->last_chunk_pending = true;
      }
    } else if (n > 0) {
      bufs[nb++] = uv_buf_init((char *)ptr, (unsigned)n);
    }
  }
  if (nb == 0) {
    req->body_done = true;
    request_sent(c, req);
    return;
  }
  int r;
  if (c->ssl) {
    uv_buf_t out;
    if ((r = tern__tls_encrypt(c, bufs, nb, &out)) != 0) {
      tern__conn_fail(c, req, r);
      return;
    }
    r = uv_write(&c->write_req, (uv_stream_t *)&c->tcp, &out, 1, on_write);
  } else {
    r = uv_write(&c->write_req, (uv_stream_t *)&c->tcp, bufs, nb, on_write);
  }
  if (r) {
    tern__request_set_error(req, tern__map_uv_error(r, TERN_EIO), "send to %s: %s",
                            req->url.hostport, uv_strerror(r));
    tern__conn_fail(c, req, tern__map_uv_error(r, TERN_EIO));
    return;
  }
  c->writing = true;
  if (!req->head_sent && has_body)
    set_timer(c, TERN__TIMER_BODY, req->timeouts[TERN_TIMEOUT_BODY]);
}

static void on_write(uv_write_t *wr, int status) {
  tern__conn *c = tern__container_of(wr, tern__conn, write_req);
  c->writing = false;
  if (c->ssl) tern__tls_write_done(c);
  if (c->state == TERN__CONN_CLOSING) return;
  tern_engine_t *eng = c->engine;
  tern__engine_enter(eng);
  tern_request_t *req = c->writing_req;
  if (status < 0) {
    int err = tern__map_uv_error(status, TERN_EIO);
    tern__request_set_error(req, err, "send to %s: %s", req->url.hostport, uv_strerror(status));
    tern__conn_fail(c, req, err);
    tern__engine_leave(eng);
    return;
  }
  c->last_activity = uv_now(eng->loop);
  bool was_head = !req->head_sent;
  req->head_sent = true;
  req->body_sent += c->pending_body;
  if (req->body_kind == TERN__BODY_NONE) {
    req->body_done = true;
  } else if (req->body_len == UINT64_MAX) {
    if (c->last_chunk_pending) req->body_done = true;
  } else if (req->body_sent >= req->body_len) {
    req->body_done = true;
  }
  if (was_head && req->expect_continue && !req->body_done) {
    /* Hold the body until the server's 100 (or its final answer) or the wait runs out. */
    req->awaiting_continue = true;
    start_reading(c);
    set_timer(c, TERN__TIMER_EXPECT, req->expect_wait_ms);
    tern__engine_leave(eng);
    return;
  }
  if (req->body_kind != TERN__BODY_NONE) {
    int r = tern__request_progress_upload(req);
    if (r) {
      tern__conn_fail(c, req, r);
      tern__engine_leave(eng);
      return;
    }
  }
  if (req->body_done) {
    request_sent(c, req);
    write_next(c); /* a pipelined request may be waiting */
    /* Bytes that arrived while the body was staged are processed now. */
    if (c->state == TERN__CONN_ACTIVE && (c->len > 0 || c->ssl)) {
      int r = pump(c);
      if (r < 0) tern__conn_fail(c, NULL, r);
      else if (r == 1 && c->state != TERN__CONN_CLOSING) on_eof(c, UV_EOF);
    }
  } else {
    write_next(c);
  }
  tern__engine_leave(eng);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  tern__conn *c = h->data;
  *buf = uv_buf_init(c->buf + c->len, (unsigned)(c->cap - c->len));
}

static void consume(tern__conn *c, size_t n) {
  if (n < c->len) memmove(c->buf, c->buf + n, c->len - n);
  c->len -= n;
}

/* A response finished: detach its request, decide the connection's fate, then complete. */
static void response_done(tern__conn *c, tern_request_t *req) {
  tern__list_remove(&req->node);
  c->nrequests--;
  req->conn = NULL;
  c->served++;
  c->rstate = TERN__RESP_HEAD;
  c->last_len = 0;
  bool hop = req->next_hop != TERN__HOP_NONE;
  int err = hop ? 0 : tern__request_body_end(req);
  if (!err && !hop) err = tern__request_progress_download(req, true);
  bool more = !tern__list_empty(&c->requests);
  /* Bytes beyond the response on a connection with nothing else outstanding mean the server
   * framed the body wrongly: such a connection is not reused. */
  if (!more && c->len > 0) c->keep_alive = false;
  if (!c->keep_alive || !req->sent) c->no_more = true;
  if (c->no_more) {
    stop_reading(c);
    tern__conn_close(c); /* pipelined requests behind it are retried elsewhere */
  } else if (more) {
    tern_request_t *next = first_request(c);
    if (next->sent) set_timer(c, TERN__TIMER_HEADERS, next->timeouts[TERN_TIMEOUT_HEADERS]);
  } else {
    tern__pool_release(c);
  }
  if (hop && !err)
    tern__hop_continue(req);
  else
    tern__complete(req, err);
}

static int head_limit(const tern__conn *c) {
  size_t lim = c->engine->config.max_header_size;
  return (int)(lim < c->cap ? lim : c->cap);
}

static int setup_response(tern__conn *c, tern_request_t *req, int minor, int status,
                          const char *reason, size_t reason_len, tern__header_t *h, size_t n) {
  int r = tern__request_set_response(req, minor, status, reason, reason_len, h, n);
  if (r) return r;
  const tern__header_t *te = NULL, *conn_hdr = NULL, *ka = NULL, *csize = NULL;
  bool have_cl = false;
  uint64_t cl = 0;
  for (size_t i = 0; i < n; i++) {
    /* The length picks the one name worth comparing: most fields match none. */
    const char *nm = h[i].name;
    size_t nl = h[i].name_len;
    if (nl == 14 && tern__name_is(nm, nl, "content-length")) {
      uint64_t v;
      if (tern__parse_content_length(h[i].value, h[i].value_len, &v) || (have_cl && v != cl)) {
        tern__request_set_error(req, TERN_EPROTO, "%s: invalid Content-Length", req->url.hostport);
        return TERN_EPROTO;
      }
      have_cl = true;
      cl = v;
    } else if (nl == 17 && tern__name_is(nm, nl, "transfer-encoding")) {
      te = &h[i];
    } else if (nl == 10 && tern__name_is(nm, nl, "connection")) {
      conn_hdr = &h[i];
    } else if (nl == 10 && tern__name_is(nm, nl, "keep-alive")) {
      ka = &h[i];
    } else if (nl == 12 && tern__name_is(nm, nl, "content-size")) {
      csize = &h[i];
    }
  }
  c->http11 = minor == 1;
  if (minor == 1)
    c->keep_alive = !(conn_hdr && tern__has_token(conn_hdr->value, conn_hdr->value_len, "close"));
  else
    c->keep_alive = conn_hdr && tern__has_token(conn_hdr->value, conn_hdr->value_len, "keep-alive");
  if (!req->persistent) c->keep_alive = false;
  uint64_t secs;
  if (ka && tern__parse_keep_alive_timeout(ka->value, ka->value_len, &secs) == 0) {
    /* Leave a margin: a server closes at its timeout, and a request sent just then is lost. */
    c->idle_ms = secs >= 2 ? (secs - 1) * 1000 : 500;
  }
  if (have_cl) req->content_length = (int64_t)cl;

  tern__request_mark(req, TERN_TIME_HEADERS);
  req->recv_start_ms = uv_now(c->engine->loop);
  if (c->ssl) tern__tls_note(c, req);
  tern__log(c->engine, TERN_LOG_INFO, req, "HTTP/1.%d %d %s from %s after %.3f s", minor, status,
            req->reason, req->url.hostport, tern_request_get_time(req, TERN_TIME_HEADERS));
  if (req->hop_response_cb && !atomic_load(&req->released) &&
      req->hop_response_cb(req, status, req->hop_response_data) != 0) {
    tern__request_set_error(req, TERN_ECANCELED, "canceled by the response callback");
    return TERN_ECANCELED;
  }
  if ((r = tern__request_decide_hop(req)) != 0 || (r = tern__request_setup_sink(req)) != 0)
    return r;
  set_timer(c, TERN__TIMER_BODY, req->timeouts[TERN_TIMEOUT_BODY]);
  if (req->is_head || status == 204 || status == 304) {
    c->rstate = TERN__RESP_HEAD;
    c->body_left = 0;
    return 1; /* complete now */
  }
  if (te) {
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
    req->content_length = -1;
    if (csize && tern__parse_content_length(csize->value, csize->value_len, &v) == 0)
      req->content_length = (int64_t)v;
    return 0;
  }
  if (have_cl) {
    c->rstate = TERN__RESP_LENGTH;
    c->body_left = cl;
    return cl == 0 ? 1 : 0;
  }
  c->rstate = TERN__RESP_CLOSE;
  c->keep_alive = false;
  return 0;
}

/* Frames whatever sits in the buffer. Returns 0, or a TERN_E* code for the oldest request. */
int tern__conn_process(tern__conn *c) {
  while (c->state == TERN__CONN_ACTIVE) {
    tern_request_t *req = first_request(c);
    if (req == NULL) {
      if (c->len > 0) {
        tern__conn_close(c); /* bytes nobody asked for */
      }
      return 0;
    }
    if (!req->sent && !req->awaiting_continue) return 0; /* bytes wait until the request is out */
    if (c->len == 0) return 0;
    int r;
    switch (c->rstate) {
      case TERN__RESP_HEAD: {
        tern__header_t h[MAX_HEADERS];
        size_t nh = MAX_HEADERS;
        int minor = 0, status = 0;
        const char *reason = NULL;
        size_t reason_len = 0;
        r = tern__parse_response(c->buf, c->len, c->last_len, &minor, &status, &reason,
                                 &reason_len, h, &nh);
        int limit = head_limit(c);
        if (r == TERN__PARSE_INCOMPLETE) {
          if (c->len >= (size_t)limit) {
            tern__request_set_error(req, TERN_EHEADERSIZE,
                                    "%s: response head exceeds %d bytes", req->url.hostport, limit);
            return TERN_EHEADERSIZE;
          }
          c->last_len = c->len;
          return 0;
        }
        if (r == TERN__PARSE_TOO_MANY || r > limit) {
          tern__request_set_error(req, TERN_EHEADERSIZE, "%s: response head exceeds %s",
                                  req->url.hostport,
                                  r == TERN__PARSE_TOO_MANY ? "256 fields" : "its size limit");
          return TERN_EHEADERSIZE;
        }
        if (r < 0) {
          tern__request_set_error(req, TERN_EPROTO, "%s: malformed response head",
                                  req->url.hostport);
          return TERN_EPROTO;
        }
        c->last_len = 0;
        if (status < 200) {
          if (status == 101) {
            tern__request_set_error(req, TERN_EPROTO, "%s: unexpected 101 Switching Protocols",
                                    req->url.hostport);
            return TERN_EPROTO;
          }
          if (req->interim.len + (size_t)r > MAX_INTERIM) {
            tern__request_set_error(req, TERN_EHEADERSIZE,
                                    "%s: interim (1xx) responses exceed %u bytes",
                                    req->url.hostport, MAX_INTERIM);
            return TERN_EHEADERSIZE;
          }
          /* Interim responses (100, 103) change nothing here; they are kept for the caller. */
          if (tern__str_append(&req->interim, c->buf, (size_t)r)) return TERN_ENOMEM;
          consume(c, (size_t)r);
          if (status == 100 && req->awaiting_continue) {
            req->awaiting_continue = false;
            set_timer(c, TERN__TIMER_BODY, req->timeouts[TERN_TIMEOUT_BODY]);
            write_next(c);
          }
          continue;
        }
        if (req->awaiting_continue) {
          /* A final answer to the head alone: the body is not sent, and since the server may
           * still expect it, the connection is not reused. */
          req->awaiting_continue = false;
          req->body_skipped = true;
          req->body_done = true;
          req->sent = true;
          c->no_more = true;
        }
        int done = setup_response(c, req, minor, status, reason, reason_len, h, nh);
        if (done < 0) return done;
        consume(c, (size_t)r);
        if ((r = tern__request_progress_download(req, false)) != 0) return r;
        if (done) response_done(c, req);
        continue;
      }
      case TERN__RESP_LENGTH: {
        size_t n = c->len < c->body_left ? c->len : (size_t)c->body_left;
        if ((r = tern__request_deliver(req, c->buf, n)) != 0) return r;
        c->body_left -= n;
        consume(c, n);
        if (c->body_left == 0) {
          response_done(c, req);
          continue;
        }
        if ((r = tern__request_progress_download(req, false)) != 0) return r;
        return 0;
      }
      case TERN__RESP_CHUNKED: {
        size_t dlen = c->len;
        ssize_t rest = tern__decode_chunked(&c->chunked, c->buf, &dlen);
        if (rest == TERN__PARSE_ERROR) {
          tern__request_set_error(req, TERN_ECHUNKED, "%s: malformed chunked body",
                                  req->url.hostport);
          return TERN_ECHUNKED;
        }
        if (dlen && (r = tern__request_deliver(req, c->buf, dlen)) != 0) return r;
        if (rest == TERN__PARSE_INCOMPLETE) {
          c->len = 0;
          if ((r = tern__request_progress_download(req, false)) != 0) return r;
          return 0;
        }
        c->len = dlen + (size_t)rest;
        consume(c, dlen);
        response_done(c, req);
        continue;
      }
      case TERN__RESP_CLOSE: {
        if ((r = tern__request_deliver(req, c->buf, c->len)) != 0) return r;
        c->len = 0;
        if ((r = tern__request_progress_download(req, false)) != 0) return r;
        return 0;
      }
    }
  }
  return 0;
}

/* Frames what the buffer holds and, on TLS connections, keeps decrypting what OpenSSL still
 * holds as room frees up: at the end of a response no further socket read may come to do it.
 * Returns 0, 1 when the peer sent close_notify, or a TERN_E* code. */
static int pump(tern__conn *c) {
  for (;;) {
    int r = tern__conn_process(c);
    if (r < 0) return r;
    if (c->state != TERN__CONN_ACTIVE || c->len == c->cap || !tern__tls_pending(c)) return 0;
    size_t before = c->len;
    r = tern__tls_recv(c, 0);
    if (r != 0) return r;
    if (c->len == before) return 0; /* only part of a record so far */
  }
}

static void on_eof(tern__conn *c, ssize_t uverr) {
  /* When data and a reset arrive together, libuv may report a plain end of stream: ask the
   * socket, so a reset body is never taken for a complete close-delimited one. */
  if (uverr == UV_EOF) {
    uv_os_fd_t fd;
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 &&
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr != 0)
      uverr = uv_translate_sys_error(soerr);
  }
  tern_request_t *req = first_request(c);
  if (req == NULL) {
    tern__conn_close(c); /* the server closed an idle connection */
    return;
  }
  if (uverr == UV_EOF && c->rstate == TERN__RESP_CLOSE) {
    c->keep_alive = false;
    response_done(c, req);
    return;
  }
  int err;
  const char *host = req->url.hostport;
  if (c->state == TERN__CONN_HANDSHAKE) {
    err = TERN_ETLSHANDSHAKE;
    tern__request_set_error(req, err, "TLS handshake with %s: connection closed by the server (%s)",
                            host, uverr == UV_EOF ? "end of stream" : uv_strerror((int)uverr));
  } else if (c->rstate == TERN__RESP_HEAD && c->len == 0) {
    err = uverr == UV_EOF ? TERN_EEMPTYREPLY : tern__map_uv_error((int)uverr, TERN_EIO);
    tern__request_set_error(req, err, "%s: connection closed before any response (%s)", host,
                            uverr == UV_EOF ? "end of stream" : uv_strerror((int)uverr));
  } else if (c->rstate == TERN__RESP_HEAD) {
    err = TERN_EPROTO;
    tern__request_set_error(req, err, "%s: connection closed inside the response head", host);
  } else if (uverr == UV_EOF) {
    err = TERN_EPARTIAL;
    if (c->rstate == TERN__RESP_LENGTH)
      tern__request_set_error(req, err, "%s: body ended after %llu bytes, %llu missing", host,
                              (unsigned long long)req->received,
                              (unsigned long long)c->body_left);
    else
      tern__request_set_error(req, err, "%s: chunked body ended before its last chunk", host);
  } else {
    err = tern__map_uv_error((int)uverr, TERN_EIO);
    tern__request_set_error(req, err, "%s: receive failed after %llu body bytes: %s", host,
                            (unsigned long long)req->received, uv_strerror((int)uverr));
  }
  tern__conn_fail(c, NULL, err);
}

/* The receive-rate cap: when the body is ahead of its allowed rate, reading pauses until the
 * rate catches up (the connection timer resumes it). */
static void throttle(tern__conn *c) {
  tern_request_t *req = first_request(c);
  if (req == NULL || req->max_recv_speed == 0 || c->rstate == TERN__RESP_HEAD ||
      c->state != TERN__CONN_ACTIVE || c->timer_kind == TERN__TIMER_THROTTLE)
    return;
  uint64_t elapsed = uv_now(c->engine->loop) - req->recv_start_ms;
  uint64_t allowed = req->max_recv_speed * elapsed / 1000;
  if (req->received <= allowed) return;
  uint64_t wait = (req->received - allowed) * 1000 / req->max_recv_speed;
  if (wait == 0) return;
  stop_reading(c);
  c->timer_kind = TERN__TIMER_THROTTLE;
  uv_timer_start(&c->timer, on_timer, wait, 0);
}

void tern__conn_apply_pause(tern_request_t *req) {
  tern__conn *c = req->conn;
  if (c == NULL || first_request(c) != req || c->state != TERN__CONN_ACTIVE) return;
  if (atomic_load(&req->recv_paused)) {
    /* Silence while paused is the caller's, not the server's: no body timeout meanwhile. */
    if (c->timer_kind == TERN__TIMER_BODY) set_timer(c, TERN__TIMER_NONE, 0);
    stop_reading(c);
    return;
  }
  if (c->timer_kind == TERN__TIMER_NONE)
    set_timer(c, TERN__TIMER_BODY, req->timeouts[TERN_TIMEOUT_BODY]);
  start_reading(c);
  int r = pump(c); /* plaintext OpenSSL kept meanwhile */
  if (r < 0) tern__conn_fail(c, NULL, r);
  else if (r == 1 && c->state != TERN__CONN_CLOSING) on_eof(c, UV_EOF);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  (void)buf;
  tern__conn *c = s->data;
  if (c->state == TERN__CONN_CLOSING) return;
  tern_engine_t *eng = c->engine;
  tern__engine_enter(eng);
  if (nread > 0) {
    int closed = 0, r;
    c->last_activity = uv_now(eng->loop);
    if (c->ssl) {
      closed = tern__tls_recv(c, (size_t)nread);
      r = closed < 0 ? closed : pump(c);
      if (r == 1) closed = 1, r = 0;
    } else {
      c->len += (size_t)nread;
      r = c->state == TERN__CONN_TUNNEL ? tunnel_read(c) : tern__conn_process(c);
    }
    if (r < 0) tern__conn_fail(c, NULL, r);
    else if (closed && c->state != TERN__CONN_CLOSING) on_eof(c, UV_EOF); /* close_notify */
    else if (c->len == c->cap && c->state == TERN__CONN_ACTIVE)
      stop_reading(c); /* full while a request is still being sent; resumes after */
    else if (receive_paused(c))
      stop_reading(c); /* the caller's consumer is behind: bytes read so far were delivered */
    else
      throttle(c);
  } else if (nread < 0) {
    if (nread == UV_ENOBUFS) {
      stop_reading(c);
    } else {
      on_eof(c, nread);
    }
  }
  tern__engine_leave(eng);
}

static void on_timer(uv_timer_t *t) {
  tern__conn *c = t->data;
  tern_engine_t *eng = c->engine;
  tern__engine_enter(eng);
  tern_request_t *req = first_request(c);
  const char *host = req ? req->url.hostport : c->origin->host;
  switch (c->timer_kind) {
    case TERN__TIMER_CONNECT:
      if (req)
        tern__request_set_error(req, TERN_ECONNECTTIMEOUT, "%s %s: timed out after %llu ms",
                                c->state == TERN__CONN_HANDSHAKE ? "TLS handshake with" : "connect to",
                                host, (unsigned long long)c->timer_ms);
      tern__conn_fail(c, NULL, TERN_ECONNECTTIMEOUT);
      break;
    case TERN__TIMER_HEADERS:
      if (req)
        tern__request_set_error(req, TERN_EHEADERTIMEOUT, "%s: no response head within %llu ms",
                                host, (unsigned long long)c->timer_ms);
      tern__conn_fail(c, NULL, TERN_EHEADERTIMEOUT);
      break;
    case TERN__TIMER_BODY: {
      /* Reads only stamp last_activity; the timer is re-armed lazily for the remainder. */
      uint64_t idle = uv_now(eng->loop) - c->last_activity;
      if (idle < c->timer_ms) {
        uv_timer_start(&c->timer, on_timer, c->timer_ms - idle, 0);
        break;
      }
      if (req)
        tern__request_set_error(req, TERN_EBODYTIMEOUT, "%s: body stalled for %llu ms", host,
                                (unsigned long long)c->timer_ms);
      tern__conn_fail(c, NULL, TERN_EBODYTIMEOUT);
      break;
    }
    case TERN__TIMER_IDLE: tern__conn_close(c); break;
    case TERN__TIMER_THROTTLE: {
      /* Caught up with the rate: read again; the body timer measures silence from now. */
      set_timer(c, TERN__TIMER_BODY, req ? req->timeouts[TERN_TIMEOUT_BODY] : 0);
      start_reading(c);
      int r = pump(c); /* plaintext OpenSSL kept meanwhile */
      if (r < 0) tern__conn_fail(c, NULL, r);
      else if (r == 1 && c->state != TERN__CONN_CLOSING) on_eof(c, UV_EOF);
      else throttle(c);
      break;
    }
    case TERN__TIMER_EXPECT:
      if (req && req->awaiting_continue) {
        req->awaiting_continue = false; /* no 100 in time: send the body anyway (RFC 9110 10.1.1) */
        set_timer(c, TERN__TIMER_BODY, req->timeouts[TERN_TIMEOUT_BODY]);
        write_next(c);
      }
      break;
    default: break;
  }
  tern__engine_leave(eng);
}

void tern__conn_close(tern__conn *c) {
  if (c->state == TERN__CONN_CLOSING) return;
  tern_engine_t *eng = c->engine;
  if (c->state == TERN__CONN_IDLE) TERN__STAT_SUB(eng, TERN_STAT_CONNECTIONS_IDLE, 1);
  c->state = TERN__CONN_CLOSING;
  tern__log(eng, TERN_LOG_DEBUG, NULL, "connection #%llu to %s port %u closed after %u response(s)",
            (unsigned long long)c->id, c->origin->host, (unsigned)c->origin->port, c->served);
  tern__list_remove(&c->node);
  uv_timer_stop(&c->timer);
  uv_close((uv_handle_t *)&c->timer, on_handle_closed);
  if (!c->tcp_closing) {
    c->tcp_closing = true;
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
  }
  if (c->gai_live) uv_cancel((uv_req_t *)&c->gai);
  /* Requests still queued here never got a response byte: they go to other connections. */
  while (!tern__list_empty(&c->requests)) {
    tern_request_t *req = first_request(c);
    tern__list_remove(&req->node);
    c->nrequests--;
    tern__redispatch(req, TERN_ECONNRESET, false);
  }
  tern__origin_conn_gone(c->origin);
}

void tern__conn_fail(tern__conn *c, tern_request_t *victim, int err) {
  c->failed = true;
  if (victim == NULL) victim = first_request(c);
  /* A reused connection that the server had already closed fails before any response byte:
   * the request never reached the server's application, so one silent retry is safe when it
   * is idempotent and its body can be sent again. */
  bool stale = victim && victim == first_request(c) && c->served > 0 && victim->status == 0 &&
               c->len == 0 && c->rstate == TERN__RESP_HEAD &&
               (err == TERN_EEMPTYREPLY || err == TERN_ECONNRESET) && victim->idempotent &&
               tern__request_can_replay(victim);
  if (victim) {
    tern__list_remove(&victim->node);
    c->nrequests--;
  }
  tern__conn_close(c); /* the others are redispatched as bystanders */
  if (victim == NULL) return;
  if (stale) {
    tern__log(victim->engine, TERN_LOG_WARN, victim,
              "pooled connection to %s was closed by the server; retrying %s %s on a new one",
              victim->url.hostport, victim->method, victim->url.target);
    tern__redispatch(victim, err, true);
  }
  else
    tern__complete(victim, err);
}
