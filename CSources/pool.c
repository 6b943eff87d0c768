/* The pool: one origin per distinct (host, port, TLS settings, proxy, its kind and credentials), its
 * idle and busy connections, and the requests waiting for a connection slot. A request goes to
 * an idle connection, a pipelining one, a new one, or waits. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* "user\npassword" for the request's proxy credentials, "" without any: part of the pool key. */
static char *proxy_identity(const tern_request_t *req) {
  const tern__auth *a = &req->auth.proxy;
  tern__str id = { 0 };
  if (tern__str_appendf(&id, "%s\n%s", a->user ? a->user : "", a->password ? a->password : ""))
    return NULL;
  return id.data;
}

/* "user\npassword" when the origin's credentials may answer NTLM, else NULL (*err on failure). */
static char *ntlm_identity(const tern_request_t *req, bool *err) {
  const tern__auth *a = &req->auth.www;
  *err = false;
  if (a->user == NULL || !((a->schemes ? a->schemes : TERN_AUTH_ANY) & TERN_AUTH_NTLM)) return NULL;
  tern__str id = { 0 };
  *err = tern__str_appendf(&id, "%s\n%s", a->user, a->password ? a->password : "") != 0;
  return id.data;
}

/* Whether a key made by the functions above names these credentials (user NULL: no key),
 * compared in place: looking an origin up allocates nothing. */
static bool id_matches(const char *id, const char *user, const char *password) {
  if (user == NULL || id == NULL) return user == NULL && id == NULL;
  size_t ul = strlen(user);
  return strncmp(id, user, ul) == 0 && id[ul] == '\n' &&
         strcmp(id + ul + 1, password ? password : "") == 0;
}

tern__origin *tern__origin_get(tern_engine_t *eng, const tern_request_t *req) {
  size_t bufsize = req->buffer_size ? req->buffer_size : eng->config.buffer_size;
  const tern__auth *pa = &req->auth.proxy, *wa = &req->auth.www;
  bool ntlm = wa->user && ((wa->schemes ? wa->schemes : TERN_AUTH_ANY) & TERN_AUTH_NTLM);
  int proto = tern__request_proto(req);
  for (tern__list *n = eng->origins.next; n != &eng->origins; n = n->next) {
    tern__origin *o = tern__container_of(n, tern__origin, node);
    if (o->port == req->url.port && o->tls == req->url.tls && o->buffer_size == bufsize &&
        o->proto == proto && strcmp(o->host, req->url.host) == 0 &&
        (!o->tls || strcmp(o->tls_id, req->tls.id) == 0) && o->proxy_port == req->proxy.port &&
        (o->proxy_host == NULL) == (req->proxy.host == NULL) &&
        (o->proxy_host == NULL ||
         (o->proxy_kind == req->proxy.kind && strcmp(o->proxy_host, req->proxy.host) == 0 &&
          id_matches(o->proxy_id, pa->user ? pa->user : "", pa->password))) &&
        id_matches(o->www_id, ntlm ? wa->user : NULL, wa->password))
      return o;
  }
  char *pid = req->proxy.host ? proxy_identity(req) : NULL;
  if (req->proxy.host && pid == NULL) return NULL;
  bool wid_err;
  char *wid = ntlm_identity(req, &wid_err);
  if (wid_err) {
    free(pid);
    return NULL;
  }
  tern__origin *o = tern__calloc(1, sizeof *o);
  if (o == NULL) {
    free(pid);
    free(wid);
    return NULL;
  }
  o->proxy_id = pid;
  o->www_id = wid;
  o->host = tern__strdup(req->url.host);
  if (o->host == NULL) {
    free(pid);
    free(wid);
    free(o);
    return NULL;
  }
  o->port = req->url.port;
  o->tls = req->url.tls;
  o->proto = proto;
  if (req->proxy.host) {
    if ((o->proxy_host = tern__strdup(req->proxy.host)) == NULL) {
      free(o->www_id);
      free(o->proxy_id);
      free(o->host);
      free(o);
      return NULL;
    }
    o->proxy_port = req->proxy.port;
    o->proxy_kind = req->proxy.kind;
  }
  if (o->tls) {
    o->tls_id = tern__strdup(req->tls.id);
    o->tls_ctx = o->tls_id ? tern__tls_ctx_get(eng, req) : NULL;
    if (o->tls_ctx == NULL) {
      free(o->tls_id);
      free(o->www_id);
      free(o->proxy_id);
      free(o->proxy_host);
      free(o->host);
      free(o);
      return NULL;
    }
  }
  o->buffer_size = bufsize;
  tern__list_init(&o->idle);
  tern__list_init(&o->busy);
  tern__list_init(&o->waiting);
  /* Most recently used first: a crawler's hot origin is found at once. */
  tern__list_insert_head(&eng->origins, &o->node);
  return o;
}

static bool may_open(const tern_engine_t *eng, const tern__origin *o) {
  return eng->config.max_conns_per_origin == 0 || o->nconns < eng->config.max_conns_per_origin;
}

/* Sends a request on an idle or busy connection in the protocol it speaks. */
static void send_on(tern__conn *c, tern_request_t *req) {
  if (c->h2)
    tern__http2_send(c, req);
  else
    tern__http1_send(c, req);
}

/* For an origin that may speak HTTP/2: a busy HTTP/2 connection with a free stream, sent on
 * at once. Else whether the request should wait rather than open a connection: the one being
 * opened may turn out to speak HTTP/2 (curl's "pipewait"), or every stream of the HTTP/2
 * connections is in use and the engine does not open more for that. */
static bool multiplex(tern_engine_t *eng, tern__origin *o, tern_request_t *req) {
  bool negotiating = false, h2_alive = false;
  for (tern__list *n = o->busy.next; n != &o->busy; n = n->next) {
    tern__conn *c = tern__container_of(n, tern__conn, node);
    if (c->h2) {
      if (tern__http2_room(c)) {
        tern__http2_send(c, req);
        return true;
      }
      h2_alive = h2_alive || !c->no_more;
    } else if (c->state < TERN__CONN_ACTIVE) {
      negotiating = true;
    }
  }
  /* A connection being opened takes the waiters when it is ready (as HTTP/2, its streams;
   * as HTTP/1.1, they open their own): one being opened is enough for all of them. */
  bool wait = negotiating || (o->h2_known == 1 && h2_alive && !eng->config.http2_open_when_full) ||
              !may_open(eng, o);
  if (!wait) return false;
  tern__wait_insert(eng, &o->waiting, req);
  return true;
}

void tern__pool_dispatch(tern_request_t *req) {
  tern_engine_t *eng = req->engine;
  if (req->origin == NULL) {
    req->origin = tern__origin_get(eng, req);
    if (req->origin == NULL) {
      tern__owner_complete(req, TERN_ENOMEM);
      return;
    }
  }
  tern__origin *o = req->origin;
  tern__conn *kept = req->hop.conn; /* an NTLM handshake goes on on its connection */
  if (kept) {
    req->hop.conn = NULL;
    if (kept->origin == o && kept->state == TERN__CONN_ACTIVE && !kept->no_more) {
      tern__http1_send(kept, req);
      return;
    }
    if (kept->origin == o && kept->state == TERN__CONN_TUNNEL && !kept->writing) {
      tern__http1_tunnel_again(kept, req);
      return;
    }
    tern__pool_unkeep(kept); /* credentials came with this hop: another pool key */
  }
  if (!req->force_new_conn && !tern__list_empty(&o->idle)) {
    tern__conn *c = tern__container_of(o->idle.next, tern__conn, node);
    send_on(c, req);
    return;
  }
  if (!req->force_new_conn && o->proto != TERN__PROTO_H1 && o->h2_known >= 0 &&
      multiplex(eng, o, req))
    return;
  if (!req->force_new_conn && eng->config.pipeline_depth > 1) {
    for (tern__list *n = o->busy.next; n != &o->busy; n = n->next) {
      tern__conn *c = tern__container_of(n, tern__conn, node);
      if (tern__http1_can_pipeline(c, req, eng->config.pipeline_depth)) {
        tern__http1_send(c, req);
        return;
      }
    }
  }
  if (may_open(eng, o)) {
    if (tern__http1_open(o, req, req->timeouts[TERN_TIMEOUT_CONNECT]) == NULL)
      tern__owner_complete(req, TERN_ENOMEM);
    return;
  }
  tern__wait_insert(eng, &o->waiting, req); /* highest priority first */
}

void tern__pool_release(tern__conn *c) {
  tern__origin *o = c->origin;
  tern_engine_t *eng = c->engine;
  if (c->h2) {
    /* A stream ended: the waiters take the free streams; the connection idles when none is
     * left in use. */
    while (tern__http2_room(c) && !tern__list_empty(&o->waiting))
      tern__http2_send(c, tern__wait_take(eng, &o->waiting));
    if (c->nrequests > 0 || c->state != TERN__CONN_ACTIVE) return;
    if (c->no_more) {
      tern__conn_close(c);
      return;
    }
  } else {
    tern_request_t *next = tern__wait_take(eng, &o->waiting);
    if (next) {
      tern__http1_send(c, next);
      return;
    }
  }
  uint64_t idle = eng->config.idle_timeout_ms;
  if (c->idle_ms && c->idle_ms < idle) idle = c->idle_ms;
  if (idle == 0 || eng->stopped) {
    tern__conn_close(c);
    return;
  }
  tern__list_remove(&c->node);
  tern__list_insert_head(&o->idle, &c->node);
  c->state = TERN__CONN_IDLE;
  TERN__STAT_ADD(eng, TERN_STAT_CONNECTIONS_IDLE, 1);
  c->timer_kind = TERN__TIMER_IDLE;
  c->timer_ms = idle;
  c->last_activity = uv_now(eng->loop);
  tern__conn_arm_timer(c);
  tern__conn_went_idle(c);
}

void tern__pool_unkeep(tern__conn *c) {
  if (c->state == TERN__CONN_TUNNEL)
    tern__conn_close(c);
  else
    tern__pool_release(c);
}

void tern__pool_conn_gone(tern__origin *o) {
  o->nconns--;
  if (tern__list_empty(&o->waiting)) return;
  tern_request_t *req = tern__container_of(o->waiting.next, tern_request_t, node);
  tern_engine_t *eng = req->engine;
  if (!may_open(eng, o)) return;
  tern__wait_take(eng, &o->waiting);
  if (tern__http1_open(o, req, req->timeouts[TERN_TIMEOUT_CONNECT]) == NULL)
    tern__owner_complete(req, TERN_ENOMEM);
}

void tern__pool_negotiated(tern__conn *c) {
  tern__origin *o = c->origin;
  tern_engine_t *eng = c->engine;
  if (o->proto == TERN__PROTO_H1) return;
  if (c->h2) {
    o->h2_known = 1;
    tern__pool_release(c);
    /* More waiters than its streams: another connection for them, if the engine opens more. */
    if (eng->config.http2_open_when_full && !tern__list_empty(&o->waiting) && may_open(eng, o)) {
      tern_request_t *req = tern__wait_take(eng, &o->waiting);
      if (tern__http1_open(o, req, req->timeouts[TERN_TIMEOUT_CONNECT]) == NULL)
        tern__owner_complete(req, TERN_ENOMEM);
    }
    return;
  }
  /* HTTP/1.1 after all: one request per connection, so the waiters open their own. */
  o->h2_known = -1;
  while (!tern__list_empty(&o->waiting) && may_open(eng, o)) {
    tern_request_t *req = tern__wait_take(eng, &o->waiting);
    if (tern__http1_open(o, req, req->timeouts[TERN_TIMEOUT_CONNECT]) == NULL)
      tern__owner_complete(req, TERN_ENOMEM);
  }
}

static void fail_list(tern_engine_t *eng, tern__list *l, int err) {
  tern_request_t *req;
  while ((req = tern__wait_take(eng, l)) != NULL) tern__owner_complete(req, err);
}

void tern__pool_shutdown(tern_engine_t *eng) {
  while (!tern__list_empty(&eng->origins)) {
    tern__origin *o = tern__container_of(eng->origins.next, tern__origin, node);
    fail_list(eng, &o->waiting, TERN_ESHUTDOWN);
    while (!tern__list_empty(&o->busy)) {
      tern__conn *c = tern__container_of(o->busy.next, tern__conn, node);
      if (!tern__list_empty(&c->requests))
        tern__conn_fail(c, NULL, TERN_ESHUTDOWN);
      else
        tern__conn_close(c);
    }
    while (!tern__list_empty(&o->idle))
      tern__conn_close(tern__container_of(o->idle.next, tern__conn, node));
    tern__list_remove(&o->node);
    tern__tls_origin_free(o);
    free(o->www_id);
    free(o->proxy_id);
    free(o->proxy_host);
    free(o->host);
    free(o);
  }
}
