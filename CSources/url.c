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
/* Branch-free: a host is lower-cased byte by byte on every request. */
static char ascii_lower(unsigned char c) {
  return (char)(c | (unsigned char)(((unsigned)(c - 'A') < 26u) << 5));
}

/*
 * What each byte may be in a URL, so that every request's URL is read in one pass with one
 * table load per byte: a scan per question (controls, the authority's end, '@', '#') cost
 * about as much as the rest of a request's set-up. Bytes from 0x80 on are 0: allowed in the
 * target, refused in a host.
 */
enum {
  URL_CTL = 1,   /* never in a URL: controls, space, DEL (a request line injection) */
  URL_END = 2,   /* ends the authority: NUL, '/', '?', '#' */
  URL_REG = 4,   /* a reg-name host byte: unreserved, sub-delims, '%' */
  URL_HEX = 8,   /* a hex digit (IPv6 literals, with ':' and '.') */
  URL_AT = 16,   /* '@', which ends the userinfo */
  URL_HASH = 32, /* '#', which starts the fragment */
};
static const unsigned char url_class[256] = {
  2,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1, 1, 1, 1, 1, 1, /* NUL ends a string; controls */
  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1, 1, 1, 1, 1, 1, /* more controls */
  1,  4,  0,  34, 4,  4,  4,  4,  4,  4,  4, 4, 4, 4, 4, 2, /* SP ! " # $ % & ' ( ) * + , - . / */
  12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 0, 4, 0, 4, 0, 2, /* 0-9 : ; < = > ? */
  16, 12, 12, 12, 12, 12, 12, 4,  4,  4,  4, 4, 4, 4, 4, 4, /* @ A-O */
  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4, 0, 0, 0, 0, 4, /* P-Z [ \ ] ^ _ */
  0,  12, 12, 12, 12, 12, 12, 4,  4,  4,  4, 4, 4, 4, 4, 4, /* ` a-o */
  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4, 0, 0, 0, 4, 1, /* p-z { | } ~ DEL */
};

/* "http" then "://" (plain) or "s://" (TLS), any case; the length of the prefix, 0 if neither.
 * Each byte is read only after the one before it matched, so nothing past the NUL is read. */
static size_t scheme_length(const unsigned char *s, bool *tls) {
  if ((s[0] | 0x20) != 'h' || (s[1] | 0x20) != 't' || (s[2] | 0x20) != 't' || (s[3] | 0x20) != 'p')
    return 0;
  *tls = (s[4] | 0x20) == 's';
  s += *tls ? 5 : 4;
  return s[0] == ':' && s[1] == '/' && s[2] == '/' ? (*tls ? 8 : 7) : 0;
}

int tern__url_parse(tern__url *out, const char *url) {
  tern__url u;
  memset(&u, 0, sizeof u);
  if (url == NULL) return TERN_EINVAL;
  size_t skip = scheme_length((const unsigned char *)url, &u.tls);
  /* Control characters, spaces and DEL never belong in a URL and would let a caller inject
   * bytes into the request line: the scans below refuse them wherever they are. */
  if (skip == 0) return TERN_EBADURL;
  u.port = u.tls ? 443 : 80;

  /* The authority ends at the first '/', '?' or '#'; the last '@' in it ends the userinfo,
   * as browsers and curl read it. */
  const unsigned char *auth = (const unsigned char *)url + skip, *rest = auth, *at = NULL;
  for (unsigned char cls; !((cls = url_class[*rest]) & URL_END); rest++) {
    if (cls & (URL_CTL | URL_AT)) {
      if (cls & URL_CTL) return TERN_EBADURL;
      at = rest;
    }
  }
  /* The target: up to the fragment, every byte checked to the end of the string. */
  const unsigned char *fragment = NULL, *stop = rest;
  for (unsigned char c; (c = *stop) != 0; stop++) {
    if (url_class[c] & (URL_CTL | URL_HASH)) {
      if (url_class[c] & URL_CTL) return TERN_EBADURL;
      if (fragment == NULL) fragment = stop;
    }
  }
  size_t auth_len = (size_t)(rest - auth);
  const unsigned char *hp = at ? at + 1 : auth;
  const unsigned char *hend = auth + auth_len;
  const unsigned char *host_start, *host_end, *port_start = NULL;
  if (hp < hend && *hp == '[') {
    const unsigned char *close = memchr(hp, ']', (size_t)(hend - hp));
    if (close == NULL) goto bad;
    host_start = hp + 1;
    host_end = close;
    for (const unsigned char *q = host_start; q < host_end; q++)
      if (!(url_class[*q] & URL_HEX) && *q != ':' && *q != '.') goto bad;
    if (close + 1 < hend) {
      if (close[1] != ':') goto bad;
      port_start = close + 2;
    }
    u.ipv6 = true;
  } else {
    host_start = hp;
    host_end = hp;
    while (host_end < hend && *host_end != ':') {
      if (!(url_class[*host_end] & URL_REG)) goto bad;
      host_end++;
    }
    if (host_end < hend) port_start = host_end + 1;
  }
  if (host_end == host_start) goto bad;
  if (port_start && port_start < hend) {
    unsigned long port = 0;
    for (const unsigned char *q = port_start; q < hend; q++) {
      if (!ascii_digit(*q)) goto bad;
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
  size_t tlen = (size_t)((fragment ? fragment : stop) - rest);
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
    *w++ = ':';
    /* The URL's own digits when they are the number's (no leading zero), else the number. */
    size_t pl = (size_t)(hend - port_start);
    if (*port_start != '0') {
      memcpy(w, port_start, pl);
      w += pl;
    } else {
      char digits[6];
      int nd = 0;
      for (unsigned v = u.port; v; v /= 10) digits[nd++] = (char)('0' + v % 10);
      while (nd) *w++ = digits[--nd];
    }
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
