/*
 * http1_parse.c — sans-I/O HTTP/1.1 response head parser: tern__parse_response (status line,
 * header fields, empty line) and the word-at-a-time scans it is built on.
 *
 * It lives alone because it is the hot path of every response and the part most worth fuzzing:
 * the chunked body decoder (http1_chunked.c) and the field-value helpers (http1_fields.c) are
 * separate concerns that share only http1_parse.h with it.
 *
 * Nothing here allocates, and every read is bounded by the length the caller passed: the unit
 * tests place each input just before a PROT_NONE page, and the fuzz target runs under ASan and
 * UBSan. Bytes are handled as unsigned char throughout so that obs-text (0x80..0xff) never turns
 * into a negative table index.
 */
#include "http1_parse.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

#define ONES  UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/*
 * Word-at-a-time scanning. ctl_mask() sets the high bit of each byte of w that is below 0x20 or
 * is DEL, using the classic "has a byte less than n" and "has a zero byte" tricks. A borrow can
 * only spill into a byte above a real match, so the
 * lowest flagged byte is always a real match; on a little-endian machine that is the first byte
 * in memory, found with one count-trailing-zeros. Elsewhere the scans fall back to bytes after
 * skipping clean words.
 */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#  define SWAR_FIRST_BYTE(m) ((size_t)__builtin_ctzll(m) >> 3)
#endif

/*
 * Where SSE2 is there (every x86-64), 16 bytes at a time first: a field value or name is mostly
 * shorter than that, so one load and compare finds its end where the word scan took two or three
 * rounds and the name's byte table one lookup per byte. Only whole 16-byte blocks before `end`
 * are read; the rest goes to the word scan (values) or the table (names).
 */
#if defined(__GNUC__) && defined(__SSE2__)
#  include <emmintrin.h>
#  define SIMD16 1
#endif

static uint64_t ctl_mask(uint64_t w) {
  uint64_t del = w ^ (ONES * 0x7f);
  return (((w - ONES * 0x20) & ~w) | ((del - ONES) & ~del)) & HIGHS;
}

/* At a control byte of a value: HTAB belongs to it (non-zero: scan on past it), CR or LF ends
 * it, any other sets *bad. */
static int value_goes_on(const unsigned char *p, int *bad) {
  if (*p == '\t') return 1;
  if (*p != '\r' && *p != '\n') *bad = 1;
  return 0;
}

/*
 * Finds the CR or LF that ends the field value or reason phrase starting at p, checking every
 * byte on the way. Returns that byte's address, NULL if the line does not end before `end`, or
 * sets *bad (and returns non-NULL) on a byte that may not appear in a value. Values are most of
 * a head, so this is the loop that matters.
 */
static const unsigned char *find_eol(const unsigned char *p, const unsigned char *end, int *bad) {
#ifdef SIMD16
  const __m128i ctl_max = _mm_set1_epi8(0x1f), del = _mm_set1_epi8(0x7f);
  while ((size_t)(end - p) >= 16) {
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    /* Unsigned c <= 0x1f is min(c, 0x1f) == c; obs-text (0x80..0xff) is no control. */
    __m128i ctl = _mm_or_si128(_mm_cmpeq_epi8(_mm_min_epu8(v, ctl_max), v), _mm_cmpeq_epi8(v, del));
    unsigned m = (unsigned)_mm_movemask_epi8(ctl);
    if (m == 0) {
      p += 16;
      continue;
    }
    p += __builtin_ctz(m);
    if (!value_goes_on(p, bad)) return p;
    p++;
  }
#endif
  while ((size_t)(end - p) >= 8) {
    uint64_t w, m;
    memcpy(&w, p, 8);
    if ((m = ctl_mask(w)) == 0) {
      p += 8;
      continue;
    }
#ifdef SWAR_FIRST_BYTE
    p += SWAR_FIRST_BYTE(m);
    if (!value_goes_on(p, bad)) return p;
    p++;
#else
    break;
#endif
  }
  for (; p < end; p++) {
    unsigned char c = *p;
    if (c >= 0x20 && c != 0x7f) continue;
    if (!value_goes_on(p, bad)) return p;
  }
  return NULL;
}

#ifdef SIMD16
/* Each byte of v that lies in [lo, hi] (unsigned): 0xff, else 0. */
static __m128i bytes_within(__m128i v, unsigned char lo, unsigned char hi) {
  __m128i x = _mm_sub_epi8(v, _mm_set1_epi8((char)lo));
  return _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8((char)(hi - lo))), x);
}

/* Each byte of v that is no tchar: outside 0x21..0x7e, or one of the separators
 * "(),/:;<=>?@[\]{} and DQUOTE (the ranges 0x28-0x29, 0x3a-0x40, 0x5b-0x5d and five singles). */
static unsigned non_tchar_mask(__m128i v) {
  __m128i sep = _mm_or_si128(bytes_within(v, 0x28, 0x29), bytes_within(v, 0x3a, 0x40));
  sep = _mm_or_si128(sep, bytes_within(v, 0x5b, 0x5d));
  sep = _mm_or_si128(sep, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x22)));
  sep = _mm_or_si128(sep, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x2c)));
  sep = _mm_or_si128(sep, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x2f)));
  sep = _mm_or_si128(sep, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7b)));
  sep = _mm_or_si128(sep, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7d)));
  unsigned printable = (unsigned)_mm_movemask_epi8(bytes_within(v, 0x21, 0x7e));
  return (~printable & 0xffffu) | (unsigned)_mm_movemask_epi8(sep);
}
#endif

/*
 * The end of the field name starting at p: its first byte that is no tchar (which must be the
 * colon), or `end` when every byte up to it is one. One scan checks the name and finds its end.
 */
static const unsigned char *find_name_end(const unsigned char *p, const unsigned char *end) {
#ifdef SIMD16
  while ((size_t)(end - p) >= 16) {
    unsigned m = non_tchar_mask(_mm_loadu_si128((const __m128i *)(const void *)p));
    if (m != 0) return p + __builtin_ctz(m);
    p += 16;
  }
#endif
  while (p < end && tern__is_tchar(*p)) p++;
  return p;
}

/*
 * With a last_len hint, looks for the empty line that ends the head before parsing anything.
 * The terminator is "\n\n" or "\n\r\n"; since none lay wholly inside [0, last_len), one can only
 * start at last_len - 2 or later, so a short read costs a memchr over the new bytes only.
 */
static int head_is_complete(const unsigned char *buf, size_t len, size_t last_len) {
  const unsigned char *p = buf + (last_len >= 2 ? last_len - 2 : 0);
  const unsigned char *end = buf + len;

  while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
    p++;
    if (p == end) return 0;
    if (*p == '\n') return 1;
    if (*p == '\r' && p + 1 < end && p[1] == '\n') return 1;
  }
  return 0;
}

/* Checks byte i (< 13) of "HTTP/1.x SP DDD (SP|CR|LF)". */
static int status_byte_ok(size_t i, unsigned char c) {
  switch (i) {
    case 7: return c == '0' || c == '1';
    case 8: return c == ' ';
    case 9: return c >= '1' && c <= '9';
    case 10:
    case 11: return c >= '0' && c <= '9';
    case 12: return c == ' ' || c == '\r' || c == '\n';
    default: return c == (unsigned char)"HTTP/1."[i];
  }
}

/*
 * Steps over the line ending at eol (CRLF or a bare LF). Returns the start of the next line,
 * NULL if a CR is the last byte so far, or sets *bad if a CR is followed by anything but LF.
 */
static const unsigned char *skip_eol(const unsigned char *eol, const unsigned char *end, int *bad) {
  if (*eol == '\n') return eol + 1;
  if (eol + 1 == end) return NULL;
  if (eol[1] != '\n') {
    *bad = 1;
    return eol;
  }
  return eol + 2;
}

int tern__parse_response(const char *buf_, size_t len, size_t last_len, int *minor_version,
                         int *status, const char **reason, size_t *reason_len,
                         tern__header_t *headers, size_t *num_headers) {
  const unsigned char *buf = (const unsigned char *)buf_;
  const unsigned char *p, *end, *eol, *reason_start, *reason_end;
  size_t cap = *num_headers, n = 0, i;
  int bad = 0;

  if (len == 0) return TERN__PARSE_INCOMPLETE;
  /* A hint larger than the buffer cannot describe it; parse from scratch instead. */
  if (last_len > len) last_len = 0;
  if (last_len != 0 && !head_is_complete(buf, len, last_len)) return TERN__PARSE_INCOMPLETE;
  end = buf + len;

  /*
     * Status line. The first 13 bytes have a fixed shape, so they are checked as far as they
     * have arrived: a peer that does not speak HTTP/1.x is refused at its first bytes rather
     * than after it has filled the buffer.
     */
  for (i = 0; i < 13; i++) {
    if (i == len) return TERN__PARSE_INCOMPLETE;
    if (!status_byte_ok(i, buf[i])) return TERN__PARSE_ERROR;
  }
  p = buf + 12;
  if (*p == ' ') p++;
  if ((eol = find_eol(p, end, &bad)) == NULL) return TERN__PARSE_INCOMPLETE;
  if (bad) return TERN__PARSE_ERROR;
  reason_start = p;
  reason_end = eol;
  while (reason_start < reason_end && tern__is_ows(*reason_start)) reason_start++;
  while (reason_end > reason_start && tern__is_ows(reason_end[-1])) reason_end--;
  if ((p = skip_eol(eol, end, &bad)) == NULL) return TERN__PARSE_INCOMPLETE;
  if (bad) return TERN__PARSE_ERROR;

  /* Field lines, up to the empty line. */
  for (;;) {
    const unsigned char *name, *name_end, *value, *value_end;

    if (p == end) return TERN__PARSE_INCOMPLETE;
    if (*p == '\r' || *p == '\n') {
      if ((p = skip_eol(p, end, &bad)) == NULL) return TERN__PARSE_INCOMPLETE;
      if (bad) return TERN__PARSE_ERROR;
      break;
    }
    /* A name is a non-empty token ended by the colon: this refuses obs-fold (a line that
         * starts with whitespace) and whitespace before the colon alike. */
    name = p;
    name_end = find_name_end(p, end);
    if (name_end == end) return TERN__PARSE_INCOMPLETE;
    if (*name_end != ':' || name_end == name) return TERN__PARSE_ERROR;
    value = p = name_end + 1;
    if ((eol = find_eol(p, end, &bad)) == NULL) return TERN__PARSE_INCOMPLETE;
    if (bad) return TERN__PARSE_ERROR;
    value_end = eol;
    while (value < value_end && tern__is_ows(*value)) value++;
    while (value_end > value && tern__is_ows(value_end[-1])) value_end--;
    if ((p = skip_eol(eol, end, &bad)) == NULL) return TERN__PARSE_INCOMPLETE;
    if (bad) return TERN__PARSE_ERROR;
    if (n == cap) return TERN__PARSE_TOO_MANY;
    headers[n].name = (const char *)name;
    headers[n].name_len = (size_t)(name_end - name);
    headers[n].value = (const char *)value;
    headers[n].value_len = (size_t)(value_end - value);
    n++;
  }

  if ((size_t)(p - buf) > (size_t)INT_MAX) return TERN__PARSE_ERROR;
  *minor_version = buf[7] - '0';
  *status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
  *reason = (const char *)reason_start;
  *reason_len = (size_t)(reason_end - reason_start);
  *num_headers = n;
  return (int)(p - buf);
}
