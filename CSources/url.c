/* URL parsing for the request line and the pool key, and resolving redirect targets against
 * the current URL (RFC 3986, http and https only). */
#include "internal.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void tern__url_free(tern__url *u) {
  free(u->host); /* the one block that holds all four strings */
  memset(u, 0, sizeof *u);
}

/* ASCII only, whatever the locale: <ctype.h> would read the locale's tables (a Turkish
 * locale lower-cases 'I' differently) and costs a call per byte. */
static bool ascii_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static bool ascii_alnum(unsigned char c) {
  return ascii_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool ascii_xdigit(unsigned char c) {
  return ascii_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static char ascii_lower(unsigned char c) { return (char)(c >= 'A' && c <= 'Z' ? c + 32 : c); }

/* Characters allowed in a reg-name host: unreserved, sub-delims, pct-encoded. */
static bool is_host_char(unsigned char c) {
  return ascii_alnum(c) || c == '.' || c == '-' || (c != 0 && strchr("_~!$&'()*+,;=%", c) != NULL);
}

int tern__url_parse(tern__url *out, const char *url) {
  tern__url u;
  memset(&u, 0, sizeof u);
  if (url == NULL) return TERN_EINVAL;
  /* Control characters, spaces and DEL never belong in a URL and would let a caller inject
   * bytes into the request line. */
  for (const unsigned char *p = (const unsigned char *)url; *p; p++)
    if (*p <= 0x20 || *p == 0x7f) return TERN_EBADURL;

  const char *p;
  if (strncasecmp(url, "http://", 7) == 0) {
    p = url + 7;
    u.port = 80;
  } else if (strncasecmp(url, "https://", 8) == 0) {
    p = url + 8;
    u.port = 443;
    u.tls = true;
  } else {
    return TERN_EBADURL;
  }

  /* The authority ends at the first '/', '?' or '#'; the last '@' in it ends the userinfo,
   * as browsers and curl read it. */
  const char *auth = p, *rest = p, *at = NULL;
  for (; *rest && *rest != '/' && *rest != '?' && *rest != '#'; rest++)
    if (*rest == '@') at = rest;
  size_t auth_len = (size_t)(rest - auth);
  const char *hp = auth;
  if (at) hp = at + 1;
  const char *hend = auth + auth_len;
  const char *host_start, *host_end, *port_start = NULL;
  if (*hp == '[') {
    const char *close = memchr(hp, ']', (size_t)(hend - hp));
    if (close == NULL) goto bad;
    host_start = hp + 1;
    host_end = close;
    for (const char *q = host_start; q < host_end; q++)
      if (!ascii_xdigit((unsigned char)*q) && *q != ':' && *q != '.') goto bad;
    if (close + 1 < hend) {
      if (close[1] != ':') goto bad;
      port_start = close + 2;
    }
    u.ipv6 = true;
  } else {
    host_start = hp;
    const char *colon = memchr(hp, ':', (size_t)(hend - hp));
    host_end = colon ? colon : hend;
    if (colon) port_start = colon + 1;
    for (const char *q = host_start; q < host_end; q++)
      if (!is_host_char((unsigned char)*q)) goto bad;
  }
  if (host_end == host_start) goto bad;
  if (port_start && port_start < hend) {
    unsigned long port = 0;
    for (const char *q = port_start; q < hend; q++) {
      if (!ascii_digit((unsigned char)*q)) goto bad;
      port = port * 10 + (unsigned long)(*q - '0');
      if (port > 65535) goto bad;
    }
    if (port == 0) goto bad;
    u.port = (uint16_t)port;
  }
  /*
   * Every request parses a URL: its four strings share one allocation, host first (so that
   * freeing host frees them all), then "host[:port]" for the Host header, the target and the
   * userinfo.
   */
  size_t hl = (size_t)(host_end - host_start);
  const char *fragment = strchr(rest, '#');
  size_t tlen = fragment ? (size_t)(fragment - rest) : strlen(rest);
  bool slash = tlen == 0 || rest[0] != '/'; /* "http://h?q": the target still starts with "/" */
  size_t ul = at ? (size_t)(at - auth) : 0;
  char *block = tern__malloc((hl + 1) + (hl + 2 + 6 + 1) + (tlen + 2) + (at ? ul + 1 : 0));
  if (block == NULL) goto nomem;
  u.host = block;
  for (size_t i = 0; i < hl; i++) u.host[i] = ascii_lower((unsigned char)host_start[i]);
  u.host[hl] = '\0';

  bool default_port = u.port == (u.tls ? 443 : 80);
  u.hostport = u.host + hl + 1;
  char *w = u.hostport;
  if (u.ipv6) *w++ = '[';
  memcpy(w, u.host, hl);
  w += hl;
  if (u.ipv6) *w++ = ']';
  if (!default_port) {
    char digits[6];
    int nd = 0;
    for (unsigned v = u.port; v; v /= 10) digits[nd++] = (char)('0' + v % 10);
    *w++ = ':';
    while (nd) *w++ = digits[--nd];
  }
  *w++ = '\0';

  u.target = w;
  if (slash) *w++ = '/';
  memcpy(w, rest, tlen);
  w[tlen] = '\0';
  w += tlen + 1;
  if (at) {
    u.userinfo = w;
    memcpy(w, auth, ul);
    w[ul] = '\0';
  }
  *out = u;
  return 0;

bad:
  tern__url_free(&u);
  return TERN_EBADURL;
nomem:
  tern__url_free(&u);
  return TERN_ENOMEM;
}

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
      while (out > path && *--out != '/') {}
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
  tern__str loc = { 0 };
  int r = encode_location(location, &loc);
  if (r) {
    tern__str_free(&loc);
    return r;
  }
  const char *l = loc.data;
  tern__str abs = { 0 };
  const char *scheme = base->tls ? "https" : "http";

  /* scheme ":" ... is absolute; a scheme is ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ). */
  const char *q = l;
  if (ascii_alnum((unsigned char)*q) && !ascii_digit((unsigned char)*q)) {
    while (ascii_alnum((unsigned char)*q) || *q == '+' || *q == '-' || *q == '.') q++;
  }
  if (q > l && *q == ':') {
    r = tern__str_append(&abs, l, strlen(l) + 1);
  } else if (l[0] == '/' && l[1] == '/') {
    r = tern__str_appendf(&abs, "%s:%s", scheme, l);
  } else {
    /* Relative to the base: keep its authority, merge paths. */
    const char *target = base->target;
    size_t path_len = strcspn(target, "?");
    tern__str path = { 0 };
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

/* ---- NO_PROXY lists ---- */

/* The bytes of an IPv4 (4) or IPv6 (16) literal into out; 0 when `s` is no address. */
static int ip_bytes(const char *s, unsigned char out[16]) {
  if (inet_pton(AF_INET, s, out) == 1) return 4;
  if (inet_pton(AF_INET6, s, out) == 1) return 16;
  return 0;
}

/* One entry (n bytes, lower-cased by the caller's comparison) against the host. */
static bool no_proxy_entry(const char *e, size_t n, const char *host, const unsigned char *ip,
                           int iplen) {
  char tok[300];
  if (n == 0 || n >= sizeof tok) return false;
  memcpy(tok, e, n);
  tok[n] = '\0';
  char *t = tok;
  /* Ports are ignored: "[::1]:8080", "host:8080"; a bare IPv6 address has several colons. */
  if (t[0] == '[') {
    char *close = strchr(t, ']');
    if (close == NULL) return false;
    char *slash = close[1] == '/' ? close + 1 : NULL;
    *close = '\0';
    t++;
    if (slash) { /* "[fd00::]/8" */
      size_t tl = strlen(t), sl = strcspn(slash, ":");
      memmove(t + tl, slash, sl);
      t[tl + sl] = '\0';
    }
  } else {
    char *colon = strchr(t, ':');
    if (colon && strchr(colon + 1, ':') == NULL) *colon = '\0';
  }
  int bits = -1;
  char *slash = strchr(t, '/');
  if (slash) {
    char *end;
    long b = strtol(slash + 1, &end, 10);
    if (slash[1] == '\0' || *end != '\0' || b < 0) return false;
    bits = (int)b;
    *slash = '\0';
  }
  unsigned char net[16];
  int netlen = ip_bytes(t, net);
  if (netlen) {
    if (netlen != iplen) return false;
    if (bits < 0 || bits > netlen * 8) bits = netlen * 8;
    for (int i = 0; i < netlen && bits > 0; i++, bits -= 8) {
      unsigned char mask = bits >= 8 ? 0xff : (unsigned char)(0xff << (8 - bits));
      if ((ip[i] & mask) != (net[i] & mask)) return false;
    }
    return true;
  }
  if (bits >= 0 || iplen) return false; /* names never match an address */
  if (t[0] == '*' && t[1] == '.') t++;
  while (*t == '.') t++;
  size_t tl = strlen(t);
  while (tl && t[tl - 1] == '.') tl--;
  if (tl == 0) return false;
  size_t hl = strlen(host);
  while (hl && host[hl - 1] == '.') hl--;
  if (hl < tl || strncasecmp(host + hl - tl, t, tl) != 0) return false;
  return hl == tl || host[hl - tl - 1] == '.';
}

bool tern__no_proxy_match(const char *list, const char *host) {
  if (list == NULL || host == NULL) return false;
  const char *p = list;
  while (*p == ' ' || *p == '\t') p++;
  size_t n = strlen(p);
  while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  if (n == 1 && p[0] == '*') return true;
  unsigned char ip[16];
  int iplen = ip_bytes(host, ip);
  while (*p) {
    size_t len = strcspn(p, ", \t");
    if (no_proxy_entry(p, len, host, ip, iplen)) return true;
    p += len;
    while (*p == ',' || *p == ' ' || *p == '\t') p++;
  }
  return false;
}
