/* Authentication: the credentials a request holds for the origin and the proxy, parsing
 * challenges (WWW-Authenticate, Proxy-Authenticate) and choosing which to answer, the Basic
 * (RFC 7617) and Digest (RFC 7616) credentials computed for them, and the steps of an NTLM
 * handshake (its messages are ntlm.c's). */
#include "internal.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- a request's credential slots (origin and proxy) ---- */

void tern__auth_clear(tern__auth *a) {
  if (a->password) memset(a->password, 0, strlen(a->password));
  free(a->user);
  free(a->password);
  free(a->ch);
  if (a->ntlm) tern__ntlm_challenge_clear(a->ntlm);
  free(a->ntlm);
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
      char hex[3] = { s[i + 1], s[i + 2], 0 };
      out[k++] = (char)strtol(hex, NULL, 16);
      i += 2;
    } else {
      out[k++] = s[i];
    }
  }
  out[k] = '\0';
  return out;
}

int tern__auth_set(tern__auth *a, const char *user, const char *password, unsigned schemes) {
  char *u = user ? tern__strdup(user) : NULL;
  char *p = tern__strdup(password ? password : "");
  if ((user && u == NULL) || p == NULL) {
    free(u);
    free(p);
    return TERN_ENOMEM;
  }
  tern__auth_clear(a);
  a->user = u;
  a->password = p;
  a->schemes = schemes & (TERN_AUTH_ANY | TERN_AUTH_NTLM_V1);
  /* Basic alone is sent at once; with a choice, the server's challenge picks. */
  a->scheme = u && a->schemes == TERN_AUTH_BASIC ? TERN_AUTH_BASIC : 0;
  return 0;
}

/* "user:password" (percent-encoded) into an auth slot with any scheme. */
int tern__auth_set_userinfo(tern__auth *a, const char *userinfo, unsigned schemes) {
  const char *colon = strchr(userinfo, ':');
  size_t ulen = colon ? (size_t)(colon - userinfo) : strlen(userinfo);
  char *u = pct_decode(userinfo, ulen);
  char *p = colon ? pct_decode(colon + 1, strlen(colon + 1)) : tern__strdup("");
  int r = (u && p) ? tern__auth_set(a, u, p, schemes) : TERN_ENOMEM;
  if (p) memset(p, 0, strlen(p));
  free(u);
  free(p);
  return r;
}

int tern_request_supply_auth(tern_request_t *req, const char *user, const char *password) {
  if (req == NULL || !req->auth.in_cb || user == NULL) return TERN_EINVAL;
  /* The callback runs for the slot being challenged; in_auth_cb says which (1 www, 2 proxy). */
  tern__auth *a = req->auth.in_cb == 2 ? &req->auth.proxy : &req->auth.www;
  unsigned schemes = a->schemes ? a->schemes : TERN_AUTH_ANY;
  int r = tern__auth_set(a, user, password, schemes);
  a->scheme = 0; /* answer the pending challenge */
  return r;
}

/* ---- challenges ---- */

static const char *skip_ws(const char *p) {
  while (*p == ' ' || *p == '\t') p++;
  return p;
}

static bool is_tchar(unsigned char c) {
  return isalnum(c) || (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Reads a token or quoted-string value into out (unescaped). Returns the position after it. */
static const char *read_value(const char *p, char *out, size_t cap) {
  size_t n = 0;
  if (*p == '"') {
    p++;
    while (*p && *p != '"') {
      if (*p == '\\' && p[1]) p++;
      if (n + 1 < cap) out[n++] = *p;
      p++;
    }
    if (*p == '"') p++;
  } else {
    while (*p && (is_tchar((unsigned char)*p) || *p == '/' || *p == '=')) {
      if (n + 1 < cap) out[n++] = *p;
      p++;
    }
  }
  out[n] = '\0';
  return p;
}

/* Finds the challenge for `scheme` in a WWW-Authenticate or Proxy-Authenticate value and fills
 * its parameters. Several challenges may share one value: a token not followed by "=" starts
 * the next one. Returns true when found. */
bool tern__challenge_find(const char *value, const char *scheme, tern__challenge *ch) {
  memset(ch, 0, sizeof *ch);
  const char *p = value;
  bool in = false, found = false;
  while (p && *p) {
    p = skip_ws(p);
    if (*p == ',') {
      p++;
      continue;
    }
    const char *tok = p;
    while (is_tchar((unsigned char)*p)) p++;
    size_t tlen = (size_t)(p - tok);
    if (tlen == 0) {
      p++; /* garbage: skip a byte rather than loop */
      continue;
    }
    const char *after = skip_ws(p);
    if (*after != '=' || (after[1] == '=' || after[1] == '\0' || after[1] == ',')) {
      /* A new challenge (token68 values like "abc==" are not needed for Basic/Digest). */
      if (found) break;
      in = tlen == strlen(scheme) && strncasecmp(tok, scheme, tlen) == 0;
      found = in;
      continue;
    }
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)(tlen < 31 ? tlen : 31), tok);
    char val[512];
    p = read_value(skip_ws(after + 1), val, sizeof val);
    if (!in) continue;
    if (strcasecmp(name, "realm") == 0)
      snprintf(ch->realm, sizeof ch->realm, "%s", val);
    else if (strcasecmp(name, "nonce") == 0)
      snprintf(ch->nonce, sizeof ch->nonce, "%s", val);
    else if (strcasecmp(name, "opaque") == 0)
      snprintf(ch->opaque, sizeof ch->opaque, "%s", val);
    else if (strcasecmp(name, "algorithm") == 0)
      snprintf(ch->algorithm, sizeof ch->algorithm, "%s", val);
    else if (strcasecmp(name, "qop") == 0)
      ch->qop_auth = tern__has_token(val, strlen(val), "auth");
    else if (strcasecmp(name, "stale") == 0)
      ch->stale = strcasecmp(val, "true") == 0;
  }
  return found;
}

/* Finds an "NTLM" challenge in a header value (among others, comma-separated). *token is the
 * base64 CHALLENGE message after it, or NULL when the challenge is bare. Commas inside quoted
 * parameter values (Digest realm="corp, NTLM") separate nothing. */
bool tern__ntlm_challenge_find(const char *value, const char **token) {
  for (const char *p = value; p && *p;) {
    p = skip_ws(p);
    if (strncasecmp(p, "NTLM", 4) == 0 && (p[4] == '\0' || p[4] == ' ' || p[4] == ',')) {
      const char *t = skip_ws(p + 4);
      *token = *t && *t != ',' ? t : NULL;
      return true;
    }
    bool quoted = false;
    for (; *p && (quoted || *p != ','); p++) {
      if (*p == '"')
        quoted = !quoted;
      else if (quoted && *p == '\\' && p[1])
        p++;
    }
    if (*p) p++;
  }
  return false;
}

/* ---- credentials ---- */

int tern__auth_basic(const char *user, const char *password, tern__str *out) {
  tern__str plain = { 0 };
  int r = tern__str_appendf(&plain, "%s:%s", user, password);
  if (r) return r;
  r = tern__str_appendf(out, "Basic ");
  if (!r) r = tern__str_append_base64(out, plain.data, plain.len);
  memset(plain.data, 0, plain.len);
  tern__str_free(&plain);
  return r;
}

/* The digest of `in` as lower-case hex, with the challenge's hash. */
static int hash_hex(const EVP_MD *md, const char *in, size_t len, char *hex, size_t cap) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (EVP_Digest(in, len, d, &n, md, NULL) != 1 || cap < 2 * (size_t)n + 1) return TERN_ENOMEM;
  for (unsigned i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
  return 0;
}

/* Maps an algorithm name to its hash; *sess for the "-sess" variants. NULL if unsupported. */
static const EVP_MD *digest_md(const char *algorithm, bool *sess) {
  char base[32];
  snprintf(base, sizeof base, "%s", algorithm[0] ? algorithm : "MD5");
  size_t n = strlen(base);
  *sess = n > 5 && strcasecmp(base + n - 5, "-sess") == 0;
  if (*sess) base[n - 5] = '\0';
  if (strcasecmp(base, "MD5") == 0) return EVP_md5();
  if (strcasecmp(base, "SHA-256") == 0) return EVP_sha256();
  if (strcasecmp(base, "SHA-512-256") == 0) return EVP_sha512_256();
  return NULL;
}

bool tern__digest_supported(const tern__challenge *ch) {
  bool sess;
  return ch->nonce[0] && digest_md(ch->algorithm, &sess) != NULL;
}

/* Quoted-string content: backslash before '"' and '\'. Control characters cannot be quoted
 * (a user name with CR LF would start a header line of its own): TERN_EBADHEADER. */
static int append_quoted(tern__str *out, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if ((*p < 0x20 && *p != '\t') || *p == 0x7f) return TERN_EBADHEADER;
  int r = tern__str_append(out, "\"", 1);
  for (; !r && *s; s++) {
    if (*s == '"' || *s == '\\') r = tern__str_append(out, "\\", 1);
    if (!r) r = tern__str_append(out, s, 1);
  }
  return r ? r : tern__str_append(out, "\"", 1);
}

int tern__digest_response(const tern__challenge *ch, const char *user, const char *password,
                          const char *method, const char *uri, const char *ncs, const char *cnonce,
                          char resp[2 * EVP_MAX_MD_SIZE + 1]) {
  bool sess;
  const EVP_MD *md = digest_md(ch->algorithm, &sess);
  if (md == NULL) return TERN_EAUTH;
  char ha1[2 * EVP_MAX_MD_SIZE + 1], ha2[sizeof ha1];

  tern__str t = { 0 };
  int r = tern__str_appendf(&t, "%s:%s:%s", user, ch->realm, password);
  if (!r) r = hash_hex(md, t.data, t.len, ha1, sizeof ha1);
  if (!r && sess) {
    t.len = 0;
    r = tern__str_appendf(&t, "%s:%s:%s", ha1, ch->nonce, cnonce);
    if (!r) r = hash_hex(md, t.data, t.len, ha1, sizeof ha1);
  }
  if (!r) {
    t.len = 0;
    r = tern__str_appendf(&t, "%s:%s", method, uri);
    if (!r) r = hash_hex(md, t.data, t.len, ha2, sizeof ha2);
  }
  if (!r) {
    t.len = 0;
    if (ch->qop_auth)
      r = tern__str_appendf(&t, "%s:%s:%s:%s:auth:%s", ha1, ch->nonce, ncs, cnonce, ha2);
    else
      r = tern__str_appendf(&t, "%s:%s:%s", ha1, ch->nonce, ha2); /* RFC 2069 */
    if (!r) r = hash_hex(md, t.data, t.len, resp, 2 * EVP_MAX_MD_SIZE + 1);
  }
  if (t.data) memset(t.data, 0, t.cap);
  tern__str_free(&t);
  memset(ha1, 0, sizeof ha1);
  return r;
}

int tern__auth_digest(const tern__challenge *ch, const char *user, const char *password,
                      const char *method, const char *uri, unsigned nc, tern__str *out) {
  char resp[2 * EVP_MAX_MD_SIZE + 1], cnonce[33], ncs[9];
  unsigned char rnd[16];
  if (RAND_bytes(rnd, sizeof rnd) != 1) return TERN_EAUTH;
  for (int i = 0; i < 16; i++) snprintf(cnonce + 2 * i, 3, "%02x", rnd[i]);
  snprintf(ncs, sizeof ncs, "%08x", nc);
  int r = tern__digest_response(ch, user, password, method, uri, ncs, cnonce, resp);
  if (r) return r;

  r = tern__str_appendf(out, "Digest username=");
  if (!r) r = append_quoted(out, user);
  if (!r) r = tern__str_appendf(out, ", realm=");
  if (!r) r = append_quoted(out, ch->realm);
  if (!r) r = tern__str_appendf(out, ", nonce=");
  if (!r) r = append_quoted(out, ch->nonce);
  if (!r) r = tern__str_appendf(out, ", uri=");
  if (!r) r = append_quoted(out, uri);
  if (!r && ch->algorithm[0]) r = tern__str_appendf(out, ", algorithm=%s", ch->algorithm);
  if (!r) r = tern__str_appendf(out, ", response=\"%s\"", resp);
  if (!r && ch->qop_auth)
    r = tern__str_appendf(out, ", qop=auth, nc=%s, cnonce=\"%s\"", ncs, cnonce);
  if (!r && ch->opaque[0]) {
    r = tern__str_appendf(out, ", opaque=");
    if (!r) r = append_quoted(out, ch->opaque);
  }
  return r;
}

/* ---- answering challenges ---- */

/* Picks the strongest scheme the challenge offers and `a` allows: fills a->scheme and a->ch.
 * Returns false when nothing can answer it. */
bool tern__request_answer_challenge(tern_request_t *req, tern__auth *a, const char *header,
                                    int slot) {
  const char *value = tern__request_header_value(req, header);
  if (value == NULL) return false;
  /* Several header fields may carry challenges: the first one that has what we need wins. */
  char **pairs = (char **)(void *)req->resp.block;
  tern__challenge digest, basic;
  bool have_digest = false, have_basic = false, have_ntlm = false;
  const char *ntlm_token = NULL;
  for (size_t i = 0; i < req->resp.count; i++) {
    if (strcasecmp(pairs[2 * i], header) != 0) continue;
    if (!have_ntlm) have_ntlm = tern__ntlm_challenge_find(pairs[2 * i + 1], &ntlm_token);
    tern__challenge ch;
    if (!have_digest && tern__challenge_find(pairs[2 * i + 1], "Digest", &ch) &&
        tern__digest_supported(&ch))
      digest = ch, have_digest = true;
    if (!have_basic && tern__challenge_find(pairs[2 * i + 1], "Basic", &ch))
      basic = ch, have_basic = true;
  }
  /* NTLM authenticates a connection; an HTTP/2 one is shared by other requests' streams. An
   * NTLM offer over HTTP/2 that the request may answer sends the next hops over HTTP/1.1
   * (curl does the same on HTTP_1_1_REQUIRED). */
  unsigned may_ntlm = a->schemes ? a->schemes : TERN_AUTH_ANY;
  if (req->resp.version == 20 && have_ntlm && slot == 1 && (may_ntlm & TERN_AUTH_NTLM))
    req->http11_required = true;
  if (a->scheme == TERN_AUTH_NTLM && a->ntlm_step == 1) {
    /* The NEGOTIATE was answered: the server's CHALLENGE, answered on the same connection. */
    tern__ntlm_challenge ntlm;
    int r = have_ntlm && ntlm_token ? tern__ntlm_parse_header(ntlm_token, &ntlm) : TERN_EAUTH;
    if (r == 0 && a->ntlm == NULL && (a->ntlm = tern__calloc(1, sizeof *a->ntlm)) == NULL) {
      tern__ntlm_challenge_clear(&ntlm);
      r = TERN_ENOMEM;
    }
    if (r) {
      tern__log(req->engine, TERN_LOG_INFO, req, "NTLM: %s sent no usable CHALLENGE message",
                slot == 2 ? "the proxy" : "the server");
      return false;
    }
    tern__ntlm_challenge_clear(a->ntlm);
    *a->ntlm = ntlm;
    if (ntlm.target_info == NULL && !(a->schemes & TERN_AUTH_NTLM_V1)) {
      tern__log(req->engine, TERN_LOG_WARN, req,
                "NTLM: %s accepts only NTLMv1, which TERN_AUTH_NTLM_V1 did not allow",
                slot == 2 ? "the proxy" : "the server");
      return false;
    }
    a->ntlm_step = 2;
    return true;
  }
  if (a->scheme == TERN_AUTH_NTLM && a->ntlm_step == 4 && have_ntlm) {
    /* Accepted before, challenged now: a hop (a redirect, another origin through the proxy)
     * went on a connection not yet authenticated. The same credentials start again there. */
    a->ntlm_step = 1;
    return true;
  }
  if (a->scheme == TERN_AUTH_NTLM && a->ntlm_step == 3)
    tern__log(req->engine, TERN_LOG_WARN, req, "NTLM: %s refused the credentials of %s",
              slot == 2 ? "the proxy" : "the server", a->user ? a->user : "");
  /* Only the nonce aged (stale=true with a new nonce): answer again with the same credentials,
   * once. */
  bool stale = have_digest && digest.stale && a->scheme == TERN_AUTH_DIGEST && a->tries > 0 &&
               !a->stale_retried && a->ch && strcmp(digest.nonce, a->ch->nonce) != 0;
  if (stale) {
    a->stale_retried = true;
    *a->ch = digest;
    a->nc = 0;
    return true;
  }
  if (a->tries > 0) {
    /* Credentials sent and refused: without a callback to ask, the 401 stands; with one, the
     * refused credentials are dropped and it is asked again (it decides when to stop). */
    if (req->auth.cb == NULL || a->tries >= 16) return false;
    free(a->user);
    a->user = NULL;
  }
  if (a->user == NULL && req->auth.cb && !atomic_load(&req->released)) {
    unsigned may = a->schemes ? a->schemes : TERN_AUTH_ANY;
    bool ntlm = have_ntlm && (may & TERN_AUTH_NTLM);
    const char *scheme = ntlm ? "NTLM" : have_digest ? "Digest" : have_basic ? "Basic" : "";
    const char *realm = ntlm ? "" : have_digest ? digest.realm : have_basic ? basic.realm : "";
    req->auth.in_cb = slot;
    int go = req->auth.cb(req, slot == 2, scheme, realm, req->auth.cb_data);
    req->auth.in_cb = 0;
    if (!go) return false;
  }
  if (a->user == NULL) return false;
  unsigned allowed = a->schemes ? a->schemes : TERN_AUTH_ANY;
  if (have_ntlm && (allowed & TERN_AUTH_NTLM)) {
    a->scheme = TERN_AUTH_NTLM;
    a->ntlm_step = 1;
  } else if (have_digest && (allowed & TERN_AUTH_DIGEST)) {
    if (a->ch == NULL && (a->ch = tern__malloc(sizeof *a->ch)) == NULL) return false;
    a->scheme = TERN_AUTH_DIGEST;
    *a->ch = digest;
    a->nc = 0;
  } else if (have_basic && (allowed & TERN_AUTH_BASIC)) {
    a->scheme = TERN_AUTH_BASIC;
  } else {
    return false;
  }
  a->tries++;
  return true;
}

bool tern__auth_ntlm_pending(const tern__auth *a) {
  return a->user && a->scheme == TERN_AUTH_NTLM && (a->ntlm_step == 1 || a->ntlm_step == 2);
}

int tern__auth_credentials(tern_request_t *req, tern__auth *a, const char *method, const char *uri,
                           tern__str *out) {
  if (a->user == NULL || a->scheme == 0) return 0;
  if (a->scheme == TERN_AUTH_BASIC) return tern__auth_basic(a->user, a->password, out);
  if (a->scheme == TERN_AUTH_DIGEST)
    return tern__auth_digest(a->ch, a->user, a->password, method, uri, ++a->nc, out);
  if (a->ntlm_step == 1) return tern__ntlm_negotiate(out);
  if (a->ntlm_step != 2) return 0; /* the connection is authenticated: nothing more to send */
  int r = tern__ntlm_authenticate(a->ntlm, a->user, a->password,
                                  (a->schemes & TERN_AUTH_NTLM_V1) != 0, out);
  if (r == 0) a->ntlm_step = 3;
  if (r && r != TERN_ENOMEM)
    tern__request_set_error(req, TERN_EAUTH, "%s: cannot answer the NTLM challenge (%s)",
                            req->url.hostport,
                            r == TERN_EUNSUPPORTED ? "NTLMv1 only" : "malformed");
  return r == TERN_ENOMEM ? r : r ? TERN_EAUTH : 0;
}

int tern__request_proxy_authorization(tern_request_t *req, const char *method, const char *uri,
                                      tern__str *out) {
  return tern__auth_credentials(req, &req->auth.proxy, method, uri, out);
}
