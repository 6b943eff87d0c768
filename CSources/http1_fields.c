/*
 * http1_fields.c — sans-I/O helpers for header field values: Content-Length, comma-separated
 * token lists (Connection, Transfer-Encoding), Keep-Alive's timeout and header-name comparison,
 * declared in http1_parse.h.
 *
 * Apart from the head parser (http1_parse.c) because they read values the parser has already
 * delimited: the connection code calls them on the header views it gets back, one field at a
 * time. Each refuses what would be ambiguous framing rather than guessing.
 *
 * Nothing here allocates, and every read is bounded by the length the caller passed: the unit
 * tests place each input just before a PROT_NONE page, and the fuzz target runs under ASan and
 * UBSan. Bytes are handled as unsigned char throughout so that obs-text (0x80..0xff) never turns
 * into a negative table index.
 */
#include "http1_parse.h"

#include <stdint.h>
#include <string.h>

/* Content-Length values above this are refused, so that sums of lengths cannot overflow. */
#define CONTENT_LENGTH_MAX     (UINT64_C(1) << 62)
/* Keep-Alive timeouts above this are treated as malformed; callers multiply it into ms. */
#define KEEP_ALIVE_TIMEOUT_MAX UINT64_C(0xffffffff)

static unsigned char ascii_lower(unsigned char c) {
  return (c >= 'A' && c <= 'Z') ? (unsigned char)(c | 0x20) : c;
}

/*
 * List elements (RFC 9110 5.6.1): next_element() yields [*start, *stop) for the element at
 * *pos with the optional whitespace around it removed, and moves *pos past the comma after it.
 * It returns non-zero while more elements follow. A value with n commas has n + 1 elements, some
 * possibly empty; each caller decides what an empty element means.
 */
static int next_element(const unsigned char *v, size_t len, size_t *pos, size_t *start,
                        size_t *stop) {
  size_t i = *pos, s, e;

  s = i;
  while (i < len && v[i] != ',') i++;
  e = i;
  while (s < e && tern__is_ows(v[s])) s++;
  while (e > s && tern__is_ows(v[e - 1])) e--;
  *start = s;
  *stop = e;
  if (i == len) return 0;
  *pos = i + 1;
  return 1;
}

/* Case-insensitive equality of v[s, e) with the NUL-terminated `word`. */
static int range_is(const unsigned char *v, size_t s, size_t e, const char *word) {
  size_t i, wlen = strlen(word);

  if (e - s != wlen) return 0;
  for (i = 0; i < wlen; i++)
    if (ascii_lower(v[s + i]) != ascii_lower((unsigned char)word[i])) return 0;
  return 1;
}

/* Decimal digits v[s, e) with no sign and no whitespace, up to `max`. Returns 0 or -1. */
static int parse_decimal(const unsigned char *v, size_t s, size_t e, uint64_t max, uint64_t *out) {
  uint64_t x = 0;

  if (s == e) return -1;
  for (; s < e; s++) {
    unsigned d = (unsigned)(v[s] - '0');
    if (d > 9) return -1;
    if (x > (max - d) / 10) return -1;
    x = x * 10 + d;
  }
  *out = x;
  return 0;
}

int tern__parse_content_length(const char *value, size_t len, uint64_t *out) {
  const unsigned char *v = (const unsigned char *)value;
  size_t pos = 0, s, e;
  uint64_t first = 0, x;
  int more, seen = 0;

  /* Every element must be a number and all must be equal. An empty element (",5", "5,,5" or
     * an empty value) is refused rather than skipped, since a length is framing. */
  do {
    more = next_element(v, len, &pos, &s, &e);
    if (parse_decimal(v, s, e, CONTENT_LENGTH_MAX, &x) != 0) return -1;
    if (seen && x != first) return -1;
    first = x;
    seen = 1;
  } while (more);
  *out = first;
  return 0;
}

int tern__has_token(const char *value, size_t len, const char *token) {
  const unsigned char *v = (const unsigned char *)value;
  size_t pos = 0, s, e;
  int more;

  if (token[0] == '\0') return 0;
  do {
    more = next_element(v, len, &pos, &s, &e);
    if (range_is(v, s, e, token)) return 1;
  } while (more);
  return 0;
}

int tern__is_chunked_final(const char *value, size_t len) {
  const unsigned char *v = (const unsigned char *)value;
  size_t pos = 0, s, e, last_s = 0, last_e = 0;
  int more;

  /* Empty elements are ignored, as RFC 9110 5.6.1 asks of list recipients. */
  do {
    more = next_element(v, len, &pos, &s, &e);
    if (s != e) {
      last_s = s;
      last_e = e;
    }
  } while (more);
  return last_s != last_e && range_is(v, last_s, last_e, "chunked");
}

int tern__is_chunked_only(const char *value, size_t len) {
  const unsigned char *v = (const unsigned char *)value;
  size_t pos = 0, s, e, codings = 0;
  int more, chunked = 0;

  do {
    more = next_element(v, len, &pos, &s, &e);
    if (s != e) {
      codings++;
      chunked = range_is(v, s, e, "chunked");
    }
  } while (more);
  return codings == 1 && chunked;
}

int tern__parse_keep_alive_timeout(const char *value, size_t len, uint64_t *seconds) {
  const unsigned char *v = (const unsigned char *)value;
  size_t pos = 0, s, e, eq, name_end;
  int more;

  do {
    more = next_element(v, len, &pos, &s, &e);
    /* An element is `name [BWS "=" BWS value]`. */
    for (eq = s; eq < e && v[eq] != '='; eq++)
      ;
    for (name_end = eq; name_end > s && tern__is_ows(v[name_end - 1]); name_end--)
      ;
    if (!range_is(v, s, name_end, "timeout")) continue;
    /* The first timeout parameter decides: one without a plain decimal value (bare, empty,
         * signed, fractional or too large) makes the header unusable. */
    if (eq == e) return -1;
    for (s = eq + 1; s < e && tern__is_ows(v[s]); s++)
      ;
    if (e - s >= 2 && v[s] == '"' && v[e - 1] == '"') {
      s++;
      e--;
    }
    return parse_decimal(v, s, e, KEEP_ALIVE_TIMEOUT_MAX, seconds);
  } while (more);
  return -1;
}

/*
 * ORing 0x20 into a byte folds case exactly here: the only bytes that become a lower-case
 * letter are that letter and its upper case, a digit stays itself, and the other bytes that
 * become '-' or a digit (CR, 0x10-0x19) are not token bytes.
 */
int tern__token_name_is(const char *name, size_t len, const char *lower) {
  const uint64_t fold = 0x2020202020202020u;
  uint64_t a, b, diff = 0;
  if (len < 8) {
    for (size_t i = 0; i < len; i++)
      diff |= (uint64_t)(((unsigned char)name[i] | 0x20u) ^ (unsigned char)lower[i]);
    return diff == 0;
  }
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    memcpy(&a, name + i, 8);
    memcpy(&b, lower + i, 8);
    diff |= (a | fold) ^ b;
  }
  if (i < len) { /* the last eight bytes again, overlapping the ones compared */
    memcpy(&a, name + len - 8, 8);
    memcpy(&b, lower + len - 8, 8);
    diff |= (a | fold) ^ b;
  }
  return diff == 0;
}

int tern__name_is(const char *name, size_t name_len, const char *lower) {
  size_t i;

  /* Test lower[i] first: it may end before name does, and must not be read past its NUL. */
  for (i = 0; i < name_len; i++)
    if (lower[i] == '\0' || ascii_lower((unsigned char)name[i]) != (unsigned char)lower[i])
      return 0;
  return lower[name_len] == '\0';
}

int tern__h2_field_left_out(const char *name, size_t n, const char *value, size_t vn) {
  switch (n) {
    case 2:
      return tern__name_is(name, n, "te") && !(vn == 8 && tern__name_is(value, vn, "trailers"));
    case 4: return tern__name_is(name, n, "host");
    case 6: return tern__name_is(name, n, "expect");
    case 7: return tern__name_is(name, n, "upgrade");
    case 10: return tern__name_is(name, n, "connection") || tern__name_is(name, n, "keep-alive");
    case 16: return tern__name_is(name, n, "proxy-connection");
    case 17: return tern__name_is(name, n, "transfer-encoding");
    default: return 0;
  }
}
