/*
 * http1_parse.h — sans-I/O HTTP/1.1 response framing (internal, never installed).
 *
 * The contract follows picohttpparser: parse in place, allocate nothing, return views into the
 * caller's buffer. Nothing here touches a socket, so every function is unit-tested on byte
 * strings and fuzzed (Tests/Fuzz/fuzz_http1_parse.c).
 *
 * The single internal header of three files: http1_parse.c (response head), http1_chunked.c
 * (chunked body decoding) and http1_fields.c (field values). It needs nothing but the C library,
 * so the fuzz target and the parser benchmark compile those files without libuv or internal.h.
 */
#ifndef TERN_HTTP1_PARSE_H
#define TERN_HTTP1_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Return values shared by the parsers below. */
#define TERN__PARSE_ERROR      (-1) /* malformed input */
#define TERN__PARSE_INCOMPLETE (-2) /* need more bytes */
#define TERN__PARSE_TOO_MANY   (-3) /* more header fields than the caller's array holds */

/*
 * Byte classes used by more than one of the three files. static inline, so that each file keeps
 * the table lookup or comparison in its loops exactly as if the helper were its own; the tern__
 * prefix keeps them apart from the helpers of the files that reach this header via internal.h.
 */

/* Optional whitespace (OWS, BWS): SP or HTAB. */
static inline int tern__is_ows(unsigned char c) { return c == ' ' || c == '\t'; }

/* RFC 9110 tchar: "!#$%&'*+-.^_`|~", DIGIT and ALPHA. Bytes 0x80..0xff are not token bytes. */
static inline int tern__is_tchar(unsigned char c) {
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
  return token_char[c];
}

/* One header field: views into the parsed buffer. The value has no leading or trailing
 * whitespace. Obsolete line folding (obs-fold) is rejected as malformed. */
typedef struct {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
} tern__header_t;

/*
 * Parses a response head (status line, fields, empty line) at the start of buf[0, len).
 *
 * Returns the number of bytes the head occupies (> 0), TERN__PARSE_INCOMPLETE, TERN__PARSE_ERROR
 * or TERN__PARSE_TOO_MANY. `last_len` is the length the caller passed on the previous call for the
 * same head (0 at first): bytes before it are known to hold no complete head, so a short read does
 * not make the parser rescan from the start for the terminating empty line.
 * `*num_headers` holds the capacity of `headers` on entry and the count on success.
 *
 * Accepted: "HTTP/1.x SP 3DIGIT [SP reason] CRLF" (a bare LF is accepted wherever CRLF is), the
 * reason may be empty or missing after the space; field names are RFC 9110 tokens; field values
 * are VCHAR / obs-text / SP / HTAB. A NUL byte anywhere, a space before the colon, a status
 * outside 100..999 or a version other than HTTP/1.0 or HTTP/1.1 is malformed.
 */
int tern__parse_response(const char *buf, size_t len, size_t last_len, int *minor_version,
                         int *status, const char **reason, size_t *reason_len,
                         tern__header_t *headers, size_t *num_headers);

/*
 * Chunked transfer-coding decoder (http1_chunked.c), in place and incremental.
 *
 * Zero-initialise (tern__chunked_init) before the first call. Each call takes buf[0, *len) — the
 * next bytes of the connection after the response head — and consumes all of them: on return
 * buf[0, *len) holds the body bytes decoded from them (chunk data only; sizes, extensions, CRLFs
 * and trailers removed).
 *
 * Returns TERN__PARSE_INCOMPLETE while the body goes on, TERN__PARSE_ERROR on malformed input
 * (non-hex size, size overflowing 63 bits, missing CRLF after data, over-long size or extension
 * line, trailer section larger than `max_trailer_bytes`), or, once the last chunk and trailer
 * section are complete, the number (>= 0) of bytes that followed the end of the body: those
 * bytes are at buf + *len, undecoded (they belong to the next pipelined response).
 *
 * `chunk_data_remaining()` style state is exposed for progress: `bytes_left_in_chunk`.
 */
typedef struct {
  uint64_t bytes_left_in_chunk; /* data bytes still expected in the current chunk */
  size_t line_bytes;            /* bytes seen of the current size or trailer line */
  size_t trailer_bytes;         /* bytes of trailer section seen so far */
  size_t max_trailer_bytes;     /* limit on the trailer section (default 65536 if 0) */
  int state;                    /* internal */
  int hex_digits;               /* digits seen in the current size */
} tern__chunked_t;

void tern__chunked_init(tern__chunked_t *dec);
ssize_t tern__decode_chunked(tern__chunked_t *dec, char *buf, size_t *len);

/* Field-value helpers used by the connection code (http1_fields.c). */

/* Content-Length: 1*DIGIT, or a comma-separated list of identical values (RFC 9110 8.6).
 * Returns 0 and sets *out, or -1 (empty, non-digit, differing values, above 2^62). */
int tern__parse_content_length(const char *value, size_t len, uint64_t *out);

/* Non-zero if the comma-separated list `value` holds `token` (case-insensitive), e.g.
 * Connection: "keep-alive, close" has "close". Whitespace around elements is ignored. */
int tern__has_token(const char *value, size_t len, const char *token);

/* Non-zero if the last coding in a Transfer-Encoding list is "chunked". */
int tern__is_chunked_final(const char *value, size_t len);

/* Non-zero if "chunked" is the only coding in a Transfer-Encoding list (empty elements
 * ignored): the only transfer coding the engine undoes. */
int tern__is_chunked_only(const char *value, size_t len);

/* Keep-Alive: "timeout=5, max=100" -> *seconds = 5. Returns 0, or -1 if absent or malformed. */
int tern__parse_keep_alive_timeout(const char *value, size_t len, uint64_t *seconds);

/* Case-insensitive comparison of a header name view with a NUL-terminated lower-case name. */
int tern__name_is(const char *name, size_t name_len, const char *lower);

/* tern__name_is for a name the parser has checked is a token, against a lower-case name of
 * letters, digits and '-' with exactly len bytes: eight bytes at a time. Every response's
 * fields are looked at by name, and byte by byte that was 500 instructions a response. */
int tern__token_name_is(const char *name, size_t len, const char *lower);

/* Whether a request field stays out of an HTTP/2 request (RFC 9113 8.2.2): the connection's
 * own fields, Host (carried as :authority), Expect (the body goes at once), TE but "trailers". */
int tern__h2_field_left_out(const char *name, size_t n, const char *value, size_t vn);

#endif
