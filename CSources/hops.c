/* Hops: resolving redirect targets (RFC 3986), parsing authentication challenges, and the
 * Basic (RFC 7617) and Digest (RFC 7616) credentials computed for them. Nothing here touches a
 * socket; conn.c and engine.c decide when a hop happens. */
#include "internal.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- redirect targets ---- */

/* Removes "." and ".." segments from a path, in place (RFC 3986 5.2.4). The output never
 * grows past the input, so it is written over the input's consumed bytes. */
static void remove_dot_segments(char *path) {
  char *in = path, *out = path;
  while (*in) {
    if (strncmp(in, "../", 3) == 0) {
      in += 3;
    } else if (strncmp(in, "./", 2) == 0) {
      in += 2;
    } else if (strncmp(in, "/./", 3) == 0) {
      in += 2; /* "/./x" -> "/x" */
    } else if (strcmp(in, "/.") == 0) {
      in[1] = '\0'; /* "/." -> "/" */
    } else if (strncmp(in, "/../", 4) == 0 || strcmp(in, "/..") == 0) {
      in += 3; /* "/../x" -> "/x" (in is at "/x" now), "/.." -> "/" */
      if (*in == '\0') *--in = '/';
      while (out > path && *--out != '/') {
      }
    } else if (strcmp(in, ".") == 0 || strcmp(in, "..") == 0) {
      break;
    } else {
      do {
        *out++ = *in++;
      } while (*in && *in != '/');
    }
  }
  *out = '\0';
  if (path[0] == '\0') strcpy(path, "/");
}

/* Percent-encodes what a URL may not hold verbatim (spaces, bytes >= 0x7f), as curl does for
 * Location values; control characters stay refused. */
static int encode_location(const char *loc, tern__str *out) {
  for (const unsigned char *p = (const unsigned char *)loc; *p; p++) {
    if (*p < 0x20 || *p == 0x7f) return TERN_EREDIRECT;
    int r = (*p == ' ' || *p > 0x7e) ? tern__str_appendf(out, "%%%02X", *p)
                                     : tern__str_append(out, p, 1);
    if (r) return r;
  }
  return tern__str_append(out, "", 1) ? TERN_ENOMEM : 0;
}

int tern__url_resolve(const tern__url *base, const char *location, char **out) {
  *out = NULL;
  if (location == NULL) return TERN_EREDIRECT;
  while (*location == ' ' || *location == '\t') location++;
  if (*location == '\0') return TERN_EREDIRECT;
  tern__str loc = {0};
  int r = encode_location(location, &loc);
  if (r) {
    tern__str_free(&loc);
    return r;
  }
  const char *l = loc.data;
  tern__str abs = {0};
  const char *scheme = base->tls ? "https" : "http";

  /* scheme ":" ... is absolute; a scheme is ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ). */
  const char *q = l;
  if (isalpha((unsigned char)*q)) {
    while (isalnum((unsigned char)*q) || *q == '+' || *q == '-' || *q == '.') q++;
  }
  if (q > l && *q == ':') {
    r = tern__str_append(&abs, l, strlen(l) + 1);
  } else if (l[0] == '/' && l[1] == '/') {
    r = tern__str_appendf(&abs, "%s:%s", scheme, l);
  } else {
    /* Relative to the base: keep its authority, merge paths. */
    const char *target = base->target;
    size_t path_len = strcspn(target, "?");
    tern__str path = {0};
    if (l[0] == '/') {
      size_t n = strcspn(l, "?#");
      r = tern__str_append(&path, l, n);
      l += n;
    } else if (l[0] == '?' || l[0] == '#') {
      r = tern__str_append(&path, target, path_len);
    } else {
      const char *slash = target;
      for (const char *t = target; t < target + path_len; t++)
        if (*t == '/') slash = t;
      size_t n = strcspn(l, "?#");
      r = tern__str_append(&path, target, (size_t)(slash - target) + 1);
      if (!r) r = tern__str_append(&path, l, n);
      l += n;
    }
    if (!r) r = tern__str_append(&path, "", 1);
    if (!r) {
      remove_dot_segments(path.data);
      size_t qn = l[0] == '?' ? strcspn(l, "#") : 0;
      r = tern__str_appendf(&abs, "%s://%s%s%.*s", scheme, base->hostport, path.data, (int)qn, l);
    }
    tern__str_free(&path);
  }
  tern__str_free(&loc);
  if (r) {
    tern__str_free(&abs);
    return r;
  }
  *out = abs.data;
  return 0;
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
    if (strcasecmp(name, "realm") == 0) snprintf(ch->realm, sizeof ch->realm, "%s", val);
    else if (strcasecmp(name, "nonce") == 0) snprintf(ch->nonce, sizeof ch->nonce, "%s", val);
    else if (strcasecmp(name, "opaque") == 0) snprintf(ch->opaque, sizeof ch->opaque, "%s", val);
    else if (strcasecmp(name, "algorithm") == 0)
      snprintf(ch->algorithm, sizeof ch->algorithm, "%s", val);
    else if (strcasecmp(name, "qop") == 0) ch->qop_auth = tern__has_token(val, strlen(val), "auth");
    else if (strcasecmp(name, "stale") == 0) ch->stale = strcasecmp(val, "true") == 0;
  }
  return found;
}

/* ---- credentials ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int tern__auth_basic(const char *user, const char *password, tern__str *out) {
  tern__str plain = {0};
  int r = tern__str_appendf(&plain, "%s:%s", user, password);
  if (r) return r;
  r = tern__str_appendf(out, "Basic ");
  const unsigned char *s = (const unsigned char *)plain.data;
  for (size_t i = 0; !r && i < plain.len; i += 3) {
    unsigned v = (unsigned)s[i] << 16 | (i + 1 < plain.len ? (unsigned)s[i + 1] << 8 : 0) |
                 (i + 2 < plain.len ? s[i + 2] : 0);
    char q[4] = {b64[v >> 18], b64[(v >> 12) & 63], i + 1 < plain.len ? b64[(v >> 6) & 63] : '=',
                 i + 2 < plain.len ? b64[v & 63] : '='};
    r = tern__str_append(out, q, 4);
  }
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

  tern__str t = {0};
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
