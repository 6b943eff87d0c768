/* CONNECT tunnels through an HTTP proxy: the CONNECT request, the proxy's answer (1xx heads,
 * a 407 the request may answer with credentials on a new connection, or on this one for NTLM,
 * refusals), and TLS started through the tunnel once it is open. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static void on_tunnel_written(uv_write_t *wr, int status) {
  tern__conn *c = tern__container_of(wr, tern__conn, write_req);
  c->writing = false;
  free(c->tunnel_head);
  c->tunnel_head = NULL;
  if (c->state == TERN__CONN_CLOSING || status >= 0) return;
  tern__engine_enter(c->engine);
  tern_request_t *req = tern__conn_first(c);
  if (req)
    tern__request_set_error(req, TERN_EPROXY, "send CONNECT to proxy %s: %s", c->origin->proxy_host,
                            uv_strerror(status));
  tern__conn_fail(c, NULL, TERN_EPROXY);
  tern__engine_leave(c->engine);
}

int tern__proxy_tunnel_start(tern__conn *c) {
  tern_request_t *req = tern__conn_first(c);
  const tern__origin *o = c->origin;
  tern__str authority = { 0 }, h = { 0 }, pa = { 0 };
  int r = tern__str_appendf(&authority, strchr(o->host, ':') ? "[%s]:%u" : "%s:%u", o->host,
                            (unsigned)o->port);
  if (!r)
    r = tern__str_appendf(&h, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", authority.data,
                          authority.data);
  if (!r) r = tern__request_proxy_authorization(req, "CONNECT", authority.data, &pa);
  if (!r && pa.len)
    r = tern__str_appendf(&h, "Proxy-Authorization: %.*s\r\n", (int)pa.len, pa.data);
  if (!r) r = tern__str_append(&h, "\r\n", 2);
  tern__str_free(&authority);
  tern__str_free(&pa);
  if (r) {
    tern__str_free(&h);
    return r;
  }
  c->tunnel_head = h.data;
  c->state = TERN__CONN_TUNNEL;
  tern__conn_start_reading(c);
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

/* Whether a 407 leaves the connection usable for the NTLM handshake's next CONNECT: its body
 * framed by Content-Length (*len), and no "Connection: close". */
static bool ntlm_keepable(const tern_request_t *req, uint64_t *len) {
  const char *cl = tern__request_header_value(req, "content-length");
  const char *conn = tern__request_header_value(req, "connection");
  return cl && tern__request_header_value(req, "transfer-encoding") == NULL &&
         !(conn && tern__has_token(conn, strlen(conn), "close")) &&
         tern__parse_content_length(cl, strlen(cl), len) == 0;
}

/* Drops what is left of an NTLM 407's body, then sends the next CONNECT on this connection. */
static int ntlm_skip_body(tern__conn *c, tern_request_t *req) {
  size_t n = c->len < c->tunnel_skip ? c->len : (size_t)c->tunnel_skip;
  tern__conn_consume(c, n);
  c->tunnel_skip -= n;
  if (c->tunnel_skip > 0) return 0;
  if (c->len > 0) {
    tern__request_set_error(req, TERN_EPROXY, "proxy %s sent more than its 407 to CONNECT",
                            c->origin->proxy_host);
    return TERN_EPROXY;
  }
  tern__list_remove(&req->node);
  c->nrequests--;
  req->conn = NULL;
  req->hop.conn = c; /* pool.c sends the next CONNECT here */
  tern__owner_hop_continue(req);
  return 0;
}

/* The proxy's answer to CONNECT: 2xx opens the tunnel (TLS starts); a 407 the request can
 * answer becomes another hop on a new connection (NTLM: on this one); anything else ends the
 * request. */
int tern__proxy_tunnel_read(tern__conn *c) {
  tern_request_t *req = tern__conn_first(c);
  if (c->tunnel_skip > 0) return ntlm_skip_body(c, req);
  for (;;) {
    tern__header_t h[TERN__MAX_HEADERS];
    size_t nh = TERN__MAX_HEADERS;
    int minor = 0, status = 0;
    const char *reason = NULL;
    size_t reason_len = 0;
    int r = tern__parse_response(c->buf, c->len, c->last_len, &minor, &status, &reason, &reason_len,
                                 h, &nh);
    if (r == TERN__PARSE_INCOMPLETE) {
      if (c->len >= (size_t)tern__conn_head_limit(c)) break;
      c->last_len = c->len;
      return 0;
    }
    c->last_len = 0;
    if (r < 0) break;
    if (status < 200) {
      c->tunnel_interim += (size_t)r;
      if (c->tunnel_interim > TERN__MAX_INTERIM) {
        tern__request_set_error(req, TERN_EPROXY,
                                "proxy %s: interim (1xx) responses to CONNECT exceed %u bytes",
                                c->origin->proxy_host, TERN__MAX_INTERIM);
        return TERN_EPROXY;
      }
      tern__conn_consume(c, (size_t)r);
      continue;
    }
    req->proxy.connect_status = status; /* curl's %{http_connect} */
    if (status < 300) {
      tern__conn_consume(c, (size_t)r);
      if (c->len > 0) break; /* the server speaks first in TLS only after our hello */
      return tern__conn_start_tls(c);
    }
    int e = tern__request_set_response(req, minor, status, reason, reason_len, h, nh);
    if (e) return e;
    tern__request_decide_hop(req);
    if (req->hop.response_cb && !atomic_load(&req->released) &&
        req->hop.response_cb(req, status, req->hop.response_data) != 0) {
      tern__request_set_error(req, TERN_ECANCELED, "canceled by the response callback");
      return TERN_ECANCELED;
    }
    uint64_t body = 0;
    if (req->hop.next == TERN__HOP_PROXY_AUTH && req->hop.keep_conn && !c->writing &&
        ntlm_keepable(req, &body)) {
      tern__conn_consume(c, (size_t)r);
      c->tunnel_skip = body;
      return ntlm_skip_body(c, req);
    }
    if (req->hop.next == TERN__HOP_PROXY_AUTH) {
      /* The 407's body is not read: this connection ends, the next hop takes a new one. */
      tern__list_remove(&req->node);
      c->nrequests--;
      req->conn = NULL;
      tern__conn_close(c);
      tern__owner_hop_continue(req);
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
