/* The growable byte string (tern__str) every part of the engine builds text in, and the
 * engine's shared strings. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Here, at the bottom, so that request.c (which starts requests with it) and hops.c (which
 * turns a redirected POST into a GET) share it without one calling into the other. */
char tern__method_get[] = "GET";

int tern__str_grow(tern__str *s, size_t extra) {
  if (extra > SIZE_MAX / 2 - s->len) return TERN_ENOMEM;
  size_t need = s->len + extra;
  size_t cap = s->cap ? s->cap : 64;
  while (cap < need) cap *= 2;
  char *p = tern__realloc(s->data, cap);
  if (p == NULL) return TERN_ENOMEM;
  s->data = p;
  s->cap = cap;
  return 0;
}

int tern__str_appendf(tern__str *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return TERN_EINVAL;
  int r = tern__str_reserve(s, (size_t)n + 1);
  if (r) return r;
  va_start(ap, fmt);
  vsnprintf(s->data + s->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  s->len += (size_t)n;
  return 0;
}

void tern__str_free(tern__str *s) {
  free(s->data);
  s->data = NULL;
  s->len = s->cap = 0;
}

static const char base64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int tern__str_append_base64(tern__str *out, const void *data, size_t n) {
  const unsigned char *s = data;
  const char *b64 = base64_alphabet;
  int r = tern__str_reserve(out, (n + 2) / 3 * 4);
  for (size_t i = 0; !r && i < n; i += 3) {
    unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
                 (i + 2 < n ? s[i + 2] : 0);
    char q[4] = { b64[v >> 18], b64[(v >> 12) & 63], i + 1 < n ? b64[(v >> 6) & 63] : '=',
                  i + 2 < n ? b64[v & 63] : '=' };
    r = tern__str_append(out, q, 4);
  }
  return r;
}

long tern__base64_decode(const char *s, size_t n, unsigned char *out, size_t cap) {
  while (n > 0 && s[n - 1] == '=') n--;
  if (n % 4 == 1) return -1;
  size_t k = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    const char *c = s[i] ? strchr(base64_alphabet, s[i]) : NULL;
    if (c == NULL) return -1;
    acc = acc << 6 | (uint32_t)(c - base64_alphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (k >= cap) return -1;
      out[k++] = (unsigned char)(acc >> bits);
    }
  }
  return (long)k;
}
