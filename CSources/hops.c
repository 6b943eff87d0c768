/* Hops: whether a response leads to another exchange (a redirect, an origin's or a proxy's
 * challenge), and rewriting the request for it. Nothing here touches a socket; conn.c and
 * engine.c decide when a hop happens. Redirect targets are resolved in url.c, credentials in
 * auth.c. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool is_redirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

int tern__request_decide_hop(tern_request_t *req) {
  req->hop.next = TERN__HOP_NONE;
  int status = req->resp.status;
  /* An AUTHENTICATE message answered by anything but a challenge was accepted. */
  if (req->auth.www.ntlm_step == 3 && status != 401) req->auth.www.ntlm_step = 4;
  if (req->auth.proxy.ntlm_step == 3 && status != 407) req->auth.proxy.ntlm_step = 4;
  const char *location = is_redirect(status) ? tern__request_header_value(req, "location") : NULL;
  while (location && (*location == ' ' || *location == '\t')) location++;
  /* An empty Location names no target: the 3xx is the response (curl does the same). */
  if (req->hop.follow_max > 0 && location && *location) {
    req->hop.next = TERN__HOP_REDIRECT;
  } else if (status == 401 &&
             tern__request_answer_challenge(req, &req->auth.www, "www-authenticate", 1)) {
    req->hop.next = TERN__HOP_AUTH;
  } else if (status == 407 && req->proxy.host && req->proxy.kind == TERN__PROXY_KIND_HTTP &&
             tern__request_answer_challenge(req, &req->auth.proxy, "proxy-authenticate", 2)) {
    req->hop.next = TERN__HOP_PROXY_AUTH;
  }
  req->hop.discard_body = req->hop.next != TERN__HOP_NONE;
  /* NTLM authenticates a connection: its next message goes on this one. */
  req->hop.keep_conn =
      (req->hop.next == TERN__HOP_AUTH && tern__auth_ntlm_pending(&req->auth.www)) ||
      (req->hop.next == TERN__HOP_PROXY_AUTH && tern__auth_ntlm_pending(&req->auth.proxy));
  return 0;
}

/* Drops the caller's header lines whose names are in `names` (lower case, NULL-terminated). */
static void strip_headers(tern_request_t *req, const char *const *names) {
  tern__str kept = { 0 };
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
  static const char *const names[] = { "authorization", "cookie", NULL };
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
  if (req->hop.next == TERN__HOP_REDIRECT) {
    if (req->hop.redirect_count >= req->hop.follow_max) {
      tern__request_set_error(req, TERN_ETOOMANYREDIRECTS, "%s: more than %u redirects", host,
                              req->hop.follow_max);
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
    if (req->url.tls && !next.tls && !(req->hop.redirect_flags & TERN_REDIRECT_ALLOW_DOWNGRADE)) {
      tern__request_set_error(req, TERN_EREDIRECT,
                              "%s: refusing to follow a redirect from https to %s", host, abs);
      tern__url_free(&next);
      free(abs);
      return TERN_EREDIRECT;
    }
    int status = req->resp.status;
    bool post = strcmp(req->method, "POST") == 0;
    bool to_get = (status == 303 && strcmp(req->method, "HEAD") != 0 &&
                   !(post && (req->hop.redirect_flags & TERN_REDIRECT_POST_303))) ||
                  (status == 301 && post && !(req->hop.redirect_flags & TERN_REDIRECT_POST_301)) ||
                  (status == 302 && post && !(req->hop.redirect_flags & TERN_REDIRECT_POST_302));
    if (to_get) {
      tern__method_free(req->method);
      req->method = tern__method_get;
      tern__request_clear_body(req);
      replay_body = false;
      /* The headers that described the body go with it (Fetch 4.4, and curl). */
      static const char *const body_headers[] = { "content-type", "content-encoding",
                                                  "content-language", "content-location", NULL };
      strip_headers(req, body_headers);
    }
    if (!same_origin(&req->url, &next) &&
        !(req->hop.redirect_flags & TERN_REDIRECT_TRUST_CROSS_ORIGIN)) {
      tern__auth_clear(&req->auth.www);
      req->auth.from_url = false;
      strip_credential_headers(req);
    }
    tern__url_free(&req->url);
    req->url = next;
    free(req->effective_url);
    req->effective_url = abs;
    free(req->tls.id); /* the new origin may differ in scheme */
    req->tls.id = NULL;
    req->hop.redirect_count++;
  }
  /* The AUTHENTICATE message answers a challenge given to one connection: without it, no use. */
  const tern__auth *ntlm = req->hop.next == TERN__HOP_AUTH         ? &req->auth.www
                           : req->hop.next == TERN__HOP_PROXY_AUTH ? &req->auth.proxy
                                                                   : NULL;
  if (ntlm && ntlm->scheme == TERN_AUTH_NTLM && ntlm->ntlm_step == 2 && req->hop.conn == NULL) {
    tern__request_set_error(req, TERN_EAUTH,
                            "%s: the %s closed the connection during the NTLM handshake", host,
                            ntlm == &req->auth.proxy ? "proxy" : "server");
    return TERN_EAUTH;
  }
  if (replay_body && !tern__request_can_replay(req)) {
    int code = req->hop.next == TERN__HOP_REDIRECT ? TERN_EREDIRECT : TERN_EAUTH;
    tern__request_set_error(req, code, "%s: cannot send a callback body again for the next hop",
                            host);
    return code;
  }
  req->hop.next = TERN__HOP_NONE;
  req->hop.discard_body = false;
  req->hop.reported_whole = false;
  return 0;
}

/* ---- the proxy of each hop ---- */

void tern__proxy_conf_clear(tern__proxy_conf *c) {
  free(c->host);
  if (c->userinfo) memset(c->userinfo, 0, strlen(c->userinfo));
  free(c->userinfo);
  memset(c, 0, sizeof *c);
}

int tern__proxy_conf_set(tern__proxy_conf *out, const char *proxy_url) {
  if (proxy_url == NULL || proxy_url[0] == '\0') {
    tern__proxy_conf_clear(out);
    return 0;
  }
  /* A SOCKS proxy URL is read as an http one with the same authority. */
  static const struct {
    const char *scheme;
    int kind;
  } socks[] = { { "socks4://", TERN__PROXY_KIND_SOCKS4 },
                { "socks4a://", TERN__PROXY_KIND_SOCKS4A },
                { "socks5://", TERN__PROXY_KIND_SOCKS5 },
                { "socks5h://", TERN__PROXY_KIND_SOCKS5H } };
  int kind = TERN__PROXY_KIND_HTTP;
  char *as_http = NULL;
  for (size_t i = 0; i < sizeof socks / sizeof socks[0]; i++) {
    size_t n = strlen(socks[i].scheme);
    if (strncasecmp(proxy_url, socks[i].scheme, n) != 0) continue;
    tern__str t = { 0 };
    if (tern__str_appendf(&t, "http://%s", proxy_url + n)) return TERN_ENOMEM;
    kind = socks[i].kind;
    proxy_url = as_http = t.data;
    break;
  }
  tern__url u;
  int r = tern__url_parse(&u, proxy_url);
  if (r) {
    free(as_http);
    return r;
  }
  if (u.tls) { /* TLS to the proxy itself is not supported */
    tern__url_free(&u);
    return TERN_EUNSUPPORTED;
  }
  tern__proxy_conf c = { 0 };
  c.kind = kind;
  c.host = tern__strdup(u.host);
  if (u.userinfo) c.userinfo = tern__strdup(u.userinfo);
  if (c.host == NULL || (u.userinfo && c.userinfo == NULL)) {
    tern__proxy_conf_clear(&c);
    tern__url_free(&u);
    free(as_http);
    return TERN_ENOMEM;
  }
  /* Without an explicit port a proxy is on curl's default, 1080. */
  const char *hostpart = strstr(proxy_url, "://") + 3;
  const char *at = strrchr(hostpart, '@');
  if (at) hostpart = at + 1;
  if (hostpart[0] == '[') hostpart = strchr(hostpart, ']');
  size_t hl = strcspn(hostpart, "/?#");
  c.port = memchr(hostpart, ':', hl) ? u.port : 1080;
  tern__url_free(&u);
  free(as_http);
  tern__proxy_conf_clear(out);
  *out = c;
  return 0;
}

/* ---- proxy lists (PAC answers) ---- */

/* The `index`-th usable entry of a list: its kind and authority ("host:port", copied into
 * `authority`), or DIRECT (*direct). Returns false when there is no such entry. */
static bool list_entry(const char *list, unsigned index, bool *direct, int *kind, char *authority,
                       size_t cap) {
  static const struct {
    const char *word;
    int kind;
  } words[] = { { "PROXY", TERN__PROXY_KIND_HTTP },
                { "HTTP", TERN__PROXY_KIND_HTTP },
                { "SOCKS", TERN__PROXY_KIND_SOCKS4 },
                { "SOCKS4", TERN__PROXY_KIND_SOCKS4 },
                { "SOCKS5", TERN__PROXY_KIND_SOCKS5H } };
  unsigned seen = 0;
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ';');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    const char *e = p;
    p = end ? end + 1 : p + n;
    while (n && (*e == ' ' || *e == '\t')) e++, n--;
    while (n && (e[n - 1] == ' ' || e[n - 1] == '\t')) n--;
    size_t wl = strcspn(e, " \t;");
    if (wl > n) wl = n;
    bool is_direct = wl == 6 && strncasecmp(e, "DIRECT", 6) == 0;
    int k = -1;
    for (size_t i = 0; !is_direct && i < sizeof words / sizeof words[0]; i++)
      if (strlen(words[i].word) == wl && strncasecmp(e, words[i].word, wl) == 0) k = words[i].kind;
    const char *a = e + wl;
    size_t al = n - wl;
    while (al && (*a == ' ' || *a == '\t')) a++, al--;
    if (!is_direct && (k < 0 || al == 0 || al >= cap || memchr(a, ' ', al))) continue; /* skip */
    if (seen++ != index) continue;
    *direct = is_direct;
    *kind = k;
    if (!is_direct) {
      memcpy(authority, a, al);
      authority[al] = '\0';
    }
    return true;
  }
  return false;
}

/* Makes list entry list_pos this hop's proxy; returns TERN_EPROXY when the list has no usable
 * entry there. */
static int apply_list_entry(tern_request_t *req) {
  bool direct = false;
  int kind = TERN__PROXY_KIND_HTTP;
  char authority[300];
  if (!list_entry(req->proxy.list, req->proxy.list_pos, &direct, &kind, authority,
                  sizeof authority)) {
    tern__request_set_error(req, TERN_EPROXY, "no usable proxy for %s in \"%.200s\"",
                            req->url.hostport, req->proxy.list);
    return TERN_EPROXY;
  }
  tern__proxy_conf c = { 0 };
  if (!direct) {
    static const char *const schemes[] = { "http", "socks4", "socks4a", "socks5", "socks5h" };
    tern__str u = { 0 };
    if (tern__str_appendf(&u, "%s://%s", schemes[kind], authority)) return TERN_ENOMEM;
    int r = tern__proxy_conf_set(&c, u.data);
    tern__str_free(&u);
    if (r) {
      tern__request_set_error(req, TERN_EPROXY, "bad proxy \"%s\" for %s", authority,
                              req->url.hostport);
      return TERN_EPROXY;
    }
  }
  bool same = direct ? req->proxy.host == NULL
                     : req->proxy.host && strcmp(req->proxy.host, c.host) == 0 &&
                           req->proxy.port == c.port && req->proxy.kind == c.kind;
  if (same) {
    tern__proxy_conf_clear(&c);
    return 0;
  }
  tern__auth_clear(&req->auth.proxy);
  free(req->proxy.host);
  req->proxy.host = c.host; /* taken over */
  req->proxy.port = c.port;
  req->proxy.kind = c.kind;
  c.host = NULL;
  tern__proxy_conf_clear(&c);
  const tern__auth *g = &req->proxy.given;
  if (req->proxy.host && g->user)
    return tern__auth_set(&req->auth.proxy, g->user, g->password, g->schemes);
  return 0;
}

/* This hop's list: the callback's answer for its URL (asked again only when the URL changed),
 * else the fixed one. */
static int choose_from_list(tern_request_t *req) {
  const char *url = tern_request_get_effective_url(req);
  if (req->proxy.list_cb) {
    if (req->proxy.list_url == NULL || strcmp(req->proxy.list_url, url) != 0) {
      char out[4096];
      out[0] = '\0';
      int r = req->proxy.list_cb(req, url, req->url.host, out, sizeof out, req->proxy.list_cb_data);
      out[sizeof out - 1] = '\0';
      if (r < 0) {
        tern__request_set_error(req, r, "proxy for %s: %s", url, out[0] ? out : tern_strerror(r));
        return r;
      }
      char *list = tern__strdup(out), *copy = tern__strdup(url);
      if (list == NULL || copy == NULL) {
        free(list);
        free(copy);
        return TERN_ENOMEM;
      }
      free(req->proxy.list);
      free(req->proxy.list_url);
      req->proxy.list = list;
      req->proxy.list_url = copy;
      req->proxy.list_pos = 0;
    }
  } else if (req->proxy.list == NULL) {
    if ((req->proxy.list = tern__strdup(req->proxy.list_fixed)) == NULL) return TERN_ENOMEM;
    req->proxy.list_pos = 0;
  }
  return apply_list_entry(req);
}

bool tern__request_next_proxy(tern_request_t *req, int err) {
  if (req->proxy.list == NULL || req->resp.status != 0) return false;
  if (err != TERN_ECONNREFUSED && err != TERN_ECONNECT && err != TERN_ECONNECTTIMEOUT &&
      err != TERN_ERESOLVE)
    return false;
  bool direct;
  int kind;
  char authority[300];
  if (!list_entry(req->proxy.list, req->proxy.list_pos + 1, &direct, &kind, authority,
                  sizeof authority))
    return false;
  req->proxy.list_pos++;
  return true;
}

int tern__request_choose_proxy(tern_request_t *req) {
  if (req->proxy.list_cb || req->proxy.list_fixed) return choose_from_list(req);
  int slot = TERN__PROXY_NONE;
  if (!tern__no_proxy_match(req->proxy.no_proxy, req->url.host)) {
    int scheme = req->url.tls ? TERN__PROXY_HTTPS : TERN__PROXY_HTTP;
    if (req->proxy.conf[scheme].host)
      slot = scheme;
    else if (req->proxy.conf[TERN__PROXY_ANY].host)
      slot = TERN__PROXY_ANY;
  }
  if (slot == req->proxy.chosen) return 0; /* the same proxy keeps its credentials and state */
  /* Another proxy (or none): what the last one was told or challenged with stays behind. */
  tern__auth_clear(&req->auth.proxy);
  free(req->proxy.host);
  req->proxy.host = NULL;
  req->proxy.port = 0;
  req->proxy.chosen = slot;
  if (slot == TERN__PROXY_NONE) return 0;
  const tern__proxy_conf *c = &req->proxy.conf[slot];
  if ((req->proxy.host = tern__strdup(c->host)) == NULL) return TERN_ENOMEM;
  req->proxy.port = c->port;
  req->proxy.kind = c->kind;
  const tern__auth *g = &req->proxy.given;
  if (g->user) return tern__auth_set(&req->auth.proxy, g->user, g->password, g->schemes);
  if (c->userinfo)
    return tern__auth_set_userinfo(&req->auth.proxy, c->userinfo,
                                   g->schemes ? g->schemes : TERN_AUTH_ANY);
  return 0;
}
