/*
 * http1_parse.c — sans-I/O HTTP/1.1 response framing: the head parser, the chunked decoder and
 * the field-value helpers declared in http1_parse.h.
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

/* The decoder reports leftover byte counts as ssize_t, taken from a size_t length. */
_Static_assert(sizeof(ssize_t) == sizeof(size_t), "ssize_t and size_t differ in width");

/* A chunk-size line, extensions and line ending included, may not be longer than this. */
#define CHUNK_LINE_MAX 4096
/* The trailer-section limit used when the caller leaves max_trailer_bytes at 0. */
#define TRAILER_DEFAULT_MAX 65536
/* Content-Length values above this are refused, so that sums of lengths cannot overflow. */
#define CONTENT_LENGTH_MAX (UINT64_C(1) << 62)
/* Keep-Alive timeouts above this are treated as malformed; callers multiply it into ms. */
#define KEEP_ALIVE_TIMEOUT_MAX UINT64_C(0xffffffff)

/* RFC 9110 tchar: "!#$%&'*+-.^_`|~", DIGIT and ALPHA. Bytes 0x80..0xff are not token bytes. */
static const unsigned char token_char[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */
    0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, /* 0x20  !"#$%&'()*+,-./ */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, /* 0x30 0123456789:;<=>? */
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x40 @ABCDEFGHIJKLMNO */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, /* 0x50 PQRSTUVWXYZ[\]^_ */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x60 `abcdefghijklmno */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0, /* 0x70 pqrstuvwxyz{|}~  */
};

static int is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

/* A byte that may not appear in a field value or reason phrase: CTL other than HTAB, and DEL. */
static int is_bad_value_byte(unsigned char c)
{
    return (c < 0x20 && c != '\t') || c == 0x7f;
}

static unsigned char ascii_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c | 0x20) : c;
}

static int hex_value(unsigned char c)
{
    if ((unsigned)(c - '0') < 10u)
        return c - '0';
    c = (unsigned char)(c | 0x20);
    if ((unsigned)(c - 'a') < 6u)
        return c - 'a' + 10;
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Response head                                                                              */
/* ------------------------------------------------------------------------------------------ */

#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/*
 * Word-at-a-time scanning. ctl_mask() sets the high bit of each byte of w that is below 0x20 or
 * is DEL, and colon_mask() of each byte that is ':', using the classic "has a byte less than n"
 * and "has a zero byte" tricks. A borrow can only spill into a byte above a real match, so the
 * lowest flagged byte is always a real match; on a little-endian machine that is the first byte
 * in memory, found with one count-trailing-zeros. Elsewhere the scans fall back to bytes after
 * skipping clean words.
 */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SWAR_FIRST_BYTE(m) ((size_t)__builtin_ctzll(m) >> 3)
#endif

static uint64_t ctl_mask(uint64_t w)
{
    uint64_t del = w ^ (ONES * 0x7f);
    return (((w - ONES * 0x20) & ~w) | ((del - ONES) & ~del)) & HIGHS;
}

static uint64_t colon_mask(uint64_t w)
{
    uint64_t x = w ^ (ONES * ':');
    return (x - ONES) & ~x & HIGHS;
}

/*
 * Finds the CR or LF that ends the field value or reason phrase starting at p, checking every
 * byte on the way. Returns that byte's address, NULL if the line does not end before `end`, or
 * sets *bad (and returns non-NULL) on a byte that may not appear in a value. Values are most of
 * a head, so this is the loop that matters.
 */
static const unsigned char *find_eol(const unsigned char *p, const unsigned char *end, int *bad)
{
    while ((size_t)(end - p) >= 8) {
        uint64_t w, m;
        memcpy(&w, p, 8);
        if ((m = ctl_mask(w)) == 0) {
            p += 8;
            continue;
        }
#ifdef SWAR_FIRST_BYTE
        p += SWAR_FIRST_BYTE(m);
        if (*p == '\t') {
            p++;
            continue;
        }
        if (*p != '\r' && *p != '\n')
            *bad = 1;
        return p;
#else
        break;
#endif
    }
    for (; p < end; p++) {
        unsigned char c = *p;
        if (c >= 0x20 && c != 0x7f)
            continue;
        if (c == '\t')
            continue;
        if (c != '\r' && c != '\n')
            *bad = 1;
        return p;
    }
    return NULL;
}

/* Finds the first ':' in [p, end), or NULL. */
static const unsigned char *find_colon(const unsigned char *p, const unsigned char *end)
{
    while ((size_t)(end - p) >= 8) {
        uint64_t w, m;
        memcpy(&w, p, 8);
        if ((m = colon_mask(w)) == 0) {
            p += 8;
            continue;
        }
#ifdef SWAR_FIRST_BYTE
        return p + SWAR_FIRST_BYTE(m);
#else
        break;
#endif
    }
    for (; p < end; p++)
        if (*p == ':')
            return p;
    return NULL;
}

/*
 * With a last_len hint, looks for the empty line that ends the head before parsing anything.
 * The terminator is "\n\n" or "\n\r\n"; since none lay wholly inside [0, last_len), one can only
 * start at last_len - 2 or later, so a short read costs a memchr over the new bytes only.
 */
static int head_is_complete(const unsigned char *buf, size_t len, size_t last_len)
{
    const unsigned char *p = buf + (last_len >= 2 ? last_len - 2 : 0);
    const unsigned char *end = buf + len;

    while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        p++;
        if (p == end)
            return 0;
        if (*p == '\n')
            return 1;
        if (*p == '\r' && p + 1 < end && p[1] == '\n')
            return 1;
    }
    return 0;
}

/*
 * Non-zero if [p, e) holds only token bytes. The caller has found the colon already, so this
 * loop has no early exit to mispredict; a line without a colon fails here at its CR or LF.
 */
static int token_bytes_ok(const unsigned char *p, const unsigned char *e)
{
    unsigned ok = 1;

    for (; (size_t)(e - p) >= 4; p += 4)
        ok &= (unsigned)(token_char[p[0]] & token_char[p[1]] & token_char[p[2]] & token_char[p[3]]);
    for (; p < e; p++)
        ok &= token_char[*p];
    return ok != 0;
}

/* Checks byte i (< 13) of "HTTP/1.x SP DDD (SP|CR|LF)". */
static int status_byte_ok(size_t i, unsigned char c)
{
    switch (i) {
    case 7:
        return c == '0' || c == '1';
    case 8:
        return c == ' ';
    case 9:
        return c >= '1' && c <= '9';
    case 10:
    case 11:
        return c >= '0' && c <= '9';
    case 12:
        return c == ' ' || c == '\r' || c == '\n';
    default:
        return c == (unsigned char)"HTTP/1."[i];
    }
}

/*
 * Steps over the line ending at eol (CRLF or a bare LF). Returns the start of the next line,
 * NULL if a CR is the last byte so far, or sets *bad if a CR is followed by anything but LF.
 */
static const unsigned char *skip_eol(const unsigned char *eol, const unsigned char *end, int *bad)
{
    if (*eol == '\n')
        return eol + 1;
    if (eol + 1 == end)
        return NULL;
    if (eol[1] != '\n') {
        *bad = 1;
        return eol;
    }
    return eol + 2;
}

int tern__parse_response(const char *buf_, size_t len, size_t last_len, int *minor_version,
                         int *status, const char **reason, size_t *reason_len,
                         tern__header_t *headers, size_t *num_headers)
{
    const unsigned char *buf = (const unsigned char *)buf_;
    const unsigned char *p, *end, *eol, *reason_start, *reason_end;
    size_t cap = *num_headers, n = 0, i;
    int bad = 0;

    if (len == 0)
        return TERN__PARSE_INCOMPLETE;
    /* A hint larger than the buffer cannot describe it; parse from scratch instead. */
    if (last_len > len)
        last_len = 0;
    if (last_len != 0 && !head_is_complete(buf, len, last_len))
        return TERN__PARSE_INCOMPLETE;
    end = buf + len;

    /*
     * Status line. The first 13 bytes have a fixed shape, so they are checked as far as they
     * have arrived: a peer that does not speak HTTP/1.x is refused at its first bytes rather
     * than after it has filled the buffer.
     */
    for (i = 0; i < 13; i++) {
        if (i == len)
            return TERN__PARSE_INCOMPLETE;
        if (!status_byte_ok(i, buf[i]))
            return TERN__PARSE_ERROR;
    }
    p = buf + 12;
    if (*p == ' ')
        p++;
    if ((eol = find_eol(p, end, &bad)) == NULL)
        return TERN__PARSE_INCOMPLETE;
    if (bad)
        return TERN__PARSE_ERROR;
    reason_start = p;
    reason_end = eol;
    while (reason_start < reason_end && is_ows(*reason_start))
        reason_start++;
    while (reason_end > reason_start && is_ows(reason_end[-1]))
        reason_end--;
    if ((p = skip_eol(eol, end, &bad)) == NULL)
        return TERN__PARSE_INCOMPLETE;
    if (bad)
        return TERN__PARSE_ERROR;

    /* Field lines, up to the empty line. */
    for (;;) {
        const unsigned char *name, *name_end, *value, *value_end;

        if (p == end)
            return TERN__PARSE_INCOMPLETE;
        if (*p == '\r' || *p == '\n') {
            if ((p = skip_eol(p, end, &bad)) == NULL)
                return TERN__PARSE_INCOMPLETE;
            if (bad)
                return TERN__PARSE_ERROR;
            break;
        }
        /* A name is a non-empty token ended by the colon: this refuses obs-fold (a line that
         * starts with whitespace) and whitespace before the colon alike. */
        name = p;
        name_end = find_colon(p, end);
        if (!token_bytes_ok(name, name_end != NULL ? name_end : end))
            return TERN__PARSE_ERROR;
        if (name_end == NULL)
            return TERN__PARSE_INCOMPLETE;
        if (name_end == name)
            return TERN__PARSE_ERROR;
        value = p = name_end + 1;
        if ((eol = find_eol(p, end, &bad)) == NULL)
            return TERN__PARSE_INCOMPLETE;
        if (bad)
            return TERN__PARSE_ERROR;
        value_end = eol;
        while (value < value_end && is_ows(*value))
            value++;
        while (value_end > value && is_ows(value_end[-1]))
            value_end--;
        if ((p = skip_eol(eol, end, &bad)) == NULL)
            return TERN__PARSE_INCOMPLETE;
        if (bad)
            return TERN__PARSE_ERROR;
        if (n == cap)
            return TERN__PARSE_TOO_MANY;
        headers[n].name = (const char *)name;
        headers[n].name_len = (size_t)(name_end - name);
        headers[n].value = (const char *)value;
        headers[n].value_len = (size_t)(value_end - value);
        n++;
    }

    if ((size_t)(p - buf) > (size_t)INT_MAX)
        return TERN__PARSE_ERROR;
    *minor_version = buf[7] - '0';
    *status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    *reason = (const char *)reason_start;
    *reason_len = (size_t)(reason_end - reason_start);
    *num_headers = n;
    return (int)(p - buf);
}

/* ------------------------------------------------------------------------------------------ */
/* Chunked transfer coding                                                                    */
/* ------------------------------------------------------------------------------------------ */

/* Decoder states; CH_SIZE is 0 so that a zeroed struct starts at the first size line. */
enum {
    CH_SIZE = 0,      /* hex digits of a chunk size */
    CH_SIZE_WS,       /* whitespace after the size (BWS before ";") */
    CH_EXT,           /* chunk extensions, up to the end of the line */
    CH_SIZE_LF,       /* a CR ended the size line; LF must follow */
    CH_DATA,          /* chunk data: bytes_left_in_chunk more to copy */
    CH_DATA_CR,       /* data done; CRLF or a bare LF must follow */
    CH_DATA_LF,       /* saw the CR after data */
    CH_TRAILER_START, /* start of a trailer field line or of the final empty line */
    CH_TRAILER_NAME,  /* trailer field name, up to the colon */
    CH_TRAILER_VALUE, /* trailer field value, up to the end of the line */
    CH_TRAILER_LF,    /* a CR ended a trailer line */
    CH_END_LF,        /* a CR started the final empty line */
    CH_DONE,          /* the body is complete; further input is all leftover */
    CH_ERROR          /* malformed; every later call fails too */
};

void tern__chunked_init(tern__chunked_t *dec)
{
    memset(dec, 0, sizeof *dec);
}

ssize_t tern__decode_chunked(tern__chunked_t *dec, char *buf, size_t *len)
{
    size_t n = *len, src = 0, dst = 0, rest;
    size_t max_trailer = dec->max_trailer_bytes != 0 ? dec->max_trailer_bytes : TRAILER_DEFAULT_MAX;

    if (dec->state == CH_ERROR || n > SIZE_MAX / 2) {
        *len = 0;
        return TERN__PARSE_ERROR;
    }

    /*
     * src reads and dst writes the same buffer. Framing bytes are only ever removed, so dst never
     * passes src and data can be moved down with memmove. Data that is already in place is not
     * copied: a call that starts inside a large chunk, the common case for big bodies, moves
     * nothing until that chunk ends.
     */
    while (src < n && dec->state != CH_DONE) {
        unsigned char c;
        int v;

        if (dec->state == CH_DATA) {
            size_t take = n - src;
            if (dec->bytes_left_in_chunk < take)
                take = (size_t)dec->bytes_left_in_chunk;
            if (dst != src)
                memmove(buf + dst, buf + src, take);
            dst += take;
            src += take;
            dec->bytes_left_in_chunk -= take;
            if (dec->bytes_left_in_chunk == 0)
                dec->state = CH_DATA_CR;
            continue;
        }

        c = (unsigned char)buf[src++];
        switch (dec->state) {
        case CH_SIZE:
        case CH_SIZE_WS:
        case CH_EXT:
        case CH_SIZE_LF:
            if (++dec->line_bytes > CHUNK_LINE_MAX)
                goto fail;
            if (dec->state == CH_SIZE && (v = hex_value(c)) >= 0) {
                /* Room for one more digit only while the value stays below 2^63. */
                if (dec->bytes_left_in_chunk >> 59)
                    goto fail;
                dec->bytes_left_in_chunk = (dec->bytes_left_in_chunk << 4) | (uint64_t)v;
                dec->hex_digits++; /* bounded by CHUNK_LINE_MAX */
                break;
            }
            if (dec->state == CH_SIZE && dec->hex_digits == 0)
                goto fail;
            if (dec->state == CH_SIZE_LF) {
                if (c != '\n')
                    goto fail;
            } else if (c == '\r') {
                dec->state = CH_SIZE_LF;
                break;
            } else if (c != '\n') {
                if (dec->state == CH_EXT) {
                    if (is_bad_value_byte(c))
                        goto fail;
                } else if (c == ';') {
                    dec->state = CH_EXT;
                } else if (is_ows(c)) {
                    dec->state = CH_SIZE_WS;
                } else {
                    goto fail;
                }
                break;
            }
            /* The size line is complete. */
            dec->line_bytes = 0;
            dec->hex_digits = 0;
            dec->state = dec->bytes_left_in_chunk == 0 ? CH_TRAILER_START : CH_DATA;
            break;

        case CH_DATA_CR:
            /* CRLF ends the data; so does a bare LF, handled as in CH_DATA_LF. */
            if (c == '\r') {
                dec->state = CH_DATA_LF;
                break;
            }
            /* fall through */
        case CH_DATA_LF:
            if (c != '\n')
                goto fail;
            dec->state = CH_SIZE;
            break;

        case CH_TRAILER_START:
            if (c == '\r') {
                dec->state = CH_END_LF;
                break;
            }
            if (c == '\n') {
                dec->state = CH_DONE;
                break;
            }
            if (!token_char[c])
                goto fail;
            dec->line_bytes = 0;
            dec->state = CH_TRAILER_NAME;
            goto trailer_byte;

        case CH_TRAILER_NAME:
            if (c == ':')
                dec->state = CH_TRAILER_VALUE;
            else if (!token_char[c])
                goto fail;
            goto trailer_byte;

        case CH_TRAILER_VALUE:
            if (c == '\r')
                dec->state = CH_TRAILER_LF;
            else if (c == '\n')
                dec->state = CH_TRAILER_START;
            else if (is_bad_value_byte(c))
                goto fail;
            goto trailer_byte;

        case CH_TRAILER_LF:
            if (c != '\n')
                goto fail;
            dec->state = CH_TRAILER_START;
            goto trailer_byte;

        case CH_END_LF:
            if (c != '\n')
                goto fail;
            dec->state = CH_DONE;
            break;

        default:
            goto fail;

        trailer_byte:
            /* Field lines of the trailer section count towards its limit; the final empty line
             * does not, so a body without trailers never trips even a tiny limit. */
            dec->line_bytes++;
            if (++dec->trailer_bytes > max_trailer)
                goto fail;
            break;
        }
    }

    if (dec->state != CH_DONE) {
        *len = dst;
        return TERN__PARSE_INCOMPLETE;
    }
    /* Whatever follows the body belongs to the next response: keep it, undecoded, right after
     * the decoded bytes. */
    rest = n - src;
    if (rest != 0 && dst != src)
        memmove(buf + dst, buf + src, rest);
    *len = dst;
    return (ssize_t)rest;

fail:
    dec->state = CH_ERROR;
    *len = dst;
    return TERN__PARSE_ERROR;
}

/* ------------------------------------------------------------------------------------------ */
/* Field-value helpers                                                                        */
/* ------------------------------------------------------------------------------------------ */

/*
 * List elements (RFC 9110 5.6.1): next_element() yields [*start, *stop) for the element at
 * *pos with the optional whitespace around it removed, and moves *pos past the comma after it.
 * It returns non-zero while more elements follow. A value with n commas has n + 1 elements, some
 * possibly empty; each caller decides what an empty element means.
 */
static int next_element(const unsigned char *v, size_t len, size_t *pos, size_t *start,
                        size_t *stop)
{
    size_t i = *pos, s, e;

    s = i;
    while (i < len && v[i] != ',')
        i++;
    e = i;
    while (s < e && is_ows(v[s]))
        s++;
    while (e > s && is_ows(v[e - 1]))
        e--;
    *start = s;
    *stop = e;
    if (i == len)
        return 0;
    *pos = i + 1;
    return 1;
}

/* Case-insensitive equality of v[s, e) with the NUL-terminated `word`. */
static int range_is(const unsigned char *v, size_t s, size_t e, const char *word)
{
    size_t i, wlen = strlen(word);

    if (e - s != wlen)
        return 0;
    for (i = 0; i < wlen; i++)
        if (ascii_lower(v[s + i]) != ascii_lower((unsigned char)word[i]))
            return 0;
    return 1;
}

/* Decimal digits v[s, e) with no sign and no whitespace, up to `max`. Returns 0 or -1. */
static int parse_decimal(const unsigned char *v, size_t s, size_t e, uint64_t max, uint64_t *out)
{
    uint64_t x = 0;

    if (s == e)
        return -1;
    for (; s < e; s++) {
        unsigned d = (unsigned)(v[s] - '0');
        if (d > 9)
            return -1;
        if (x > (max - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    *out = x;
    return 0;
}

int tern__parse_content_length(const char *value, size_t len, uint64_t *out)
{
    const unsigned char *v = (const unsigned char *)value;
    size_t pos = 0, s, e;
    uint64_t first = 0, x;
    int more, seen = 0;

    /* Every element must be a number and all must be equal. An empty element (",5", "5,,5" or
     * an empty value) is refused rather than skipped, since a length is framing. */
    do {
        more = next_element(v, len, &pos, &s, &e);
        if (parse_decimal(v, s, e, CONTENT_LENGTH_MAX, &x) != 0)
            return -1;
        if (seen && x != first)
            return -1;
        first = x;
        seen = 1;
    } while (more);
    *out = first;
    return 0;
}

int tern__has_token(const char *value, size_t len, const char *token)
{
    const unsigned char *v = (const unsigned char *)value;
    size_t pos = 0, s, e;
    int more;

    if (token[0] == '\0')
        return 0;
    do {
        more = next_element(v, len, &pos, &s, &e);
        if (range_is(v, s, e, token))
            return 1;
    } while (more);
    return 0;
}

int tern__is_chunked_final(const char *value, size_t len)
{
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

int tern__is_chunked_only(const char *value, size_t len)
{
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

int tern__parse_keep_alive_timeout(const char *value, size_t len, uint64_t *seconds)
{
    const unsigned char *v = (const unsigned char *)value;
    size_t pos = 0, s, e, eq, name_end;
    int more;

    do {
        more = next_element(v, len, &pos, &s, &e);
        /* An element is `name [BWS "=" BWS value]`. */
        for (eq = s; eq < e && v[eq] != '='; eq++)
            ;
        for (name_end = eq; name_end > s && is_ows(v[name_end - 1]); name_end--)
            ;
        if (!range_is(v, s, name_end, "timeout"))
            continue;
        /* The first timeout parameter decides: one without a plain decimal value (bare, empty,
         * signed, fractional or too large) makes the header unusable. */
        if (eq == e)
            return -1;
        for (s = eq + 1; s < e && is_ows(v[s]); s++)
            ;
        if (e - s >= 2 && v[s] == '"' && v[e - 1] == '"') {
            s++;
            e--;
        }
        return parse_decimal(v, s, e, KEEP_ALIVE_TIMEOUT_MAX, seconds);
    } while (more);
    return -1;
}

int tern__name_is(const char *name, size_t name_len, const char *lower)
{
    size_t i;

    /* Test lower[i] first: it may end before name does, and must not be read past its NUL. */
    for (i = 0; i < name_len; i++)
        if (lower[i] == '\0' || ascii_lower((unsigned char)name[i]) != (unsigned char)lower[i])
            return 0;
    return lower[name_len] == '\0';
}
