/* The growable byte string (tern__str) every part of the engine builds text in. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tern__str_reserve(tern__str *s, size_t extra) {
  if (extra <= s->cap - s->len) return 0;
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

int tern__str_append(tern__str *s, const void *p, size_t n) {
  if (n == 0) return 0;
  int r = tern__str_reserve(s, n);
  if (r) return r;
  memcpy(s->data + s->len, p, n);
  s->len += n;
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
