/*
 * http1_chunked.c — sans-I/O decoder of the chunked transfer coding (RFC 9112 7.1):
 * tern__chunked_init and tern__decode_chunked, declared in http1_parse.h.
 *
 * A state machine of its own, apart from the head parser (http1_parse.c): it runs over body
 * bytes, one read at a time, long after the head is parsed, and decodes in place. Only the byte
 * classes in http1_parse.h are shared with the head parser.
 *
 * Nothing here allocates, and every read is bounded by the length the caller passed: the unit
 * tests place each input just before a PROT_NONE page, and the fuzz target runs under ASan and
 * UBSan. Bytes are handled as unsigned char throughout so that obs-text (0x80..0xff) never turns
 * into a negative table index.
 */
#include "http1_parse.h"

#include <stdint.h>
#include <string.h>

/* The decoder reports leftover byte counts as ssize_t, taken from a size_t length. */
_Static_assert(sizeof(ssize_t) == sizeof(size_t), "ssize_t and size_t differ in width");

/* A chunk-size line, extensions and line ending included, may not be longer than this. */
#define CHUNK_LINE_MAX      4096
/* The trailer-section limit used when the caller leaves max_trailer_bytes at 0. */
#define TRAILER_DEFAULT_MAX 65536

/* A byte that may not appear in a field value or reason phrase: CTL other than HTAB, and DEL. */
static int is_bad_value_byte(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

static int hex_value(unsigned char c) {
  if ((unsigned)(c - '0') < 10u) return c - '0';
  c = (unsigned char)(c | 0x20);
  if ((unsigned)(c - 'a') < 6u) return c - 'a' + 10;
  return -1;
}

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

void tern__chunked_init(tern__chunked_t *dec) { memset(dec, 0, sizeof *dec); }

ssize_t tern__decode_chunked(tern__chunked_t *dec, char *buf, size_t *len) {
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
      if (dec->bytes_left_in_chunk < take) take = (size_t)dec->bytes_left_in_chunk;
      if (dst != src) memmove(buf + dst, buf + src, take);
      dst += take;
      src += take;
      dec->bytes_left_in_chunk -= take;
      if (dec->bytes_left_in_chunk == 0) dec->state = CH_DATA_CR;
      continue;
    }

    c = (unsigned char)buf[src++];
    switch (dec->state) {
      case CH_SIZE:
      case CH_SIZE_WS:
      case CH_EXT:
      case CH_SIZE_LF:
        if (++dec->line_bytes > CHUNK_LINE_MAX) goto fail;
        if (dec->state == CH_SIZE && (v = hex_value(c)) >= 0) {
          /* Room for one more digit only while the value stays below 2^63. */
          if (dec->bytes_left_in_chunk >> 59) goto fail;
          dec->bytes_left_in_chunk = (dec->bytes_left_in_chunk << 4) | (uint64_t)v;
          dec->hex_digits++; /* bounded by CHUNK_LINE_MAX */
          break;
        }
        if (dec->state == CH_SIZE && dec->hex_digits == 0) goto fail;
        if (dec->state == CH_SIZE_LF) {
          if (c != '\n') goto fail;
        } else if (c == '\r') {
          dec->state = CH_SIZE_LF;
          break;
        } else if (c != '\n') {
          if (dec->state == CH_EXT) {
            if (is_bad_value_byte(c)) goto fail;
          } else if (c == ';') {
            dec->state = CH_EXT;
          } else if (tern__is_ows(c)) {
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
        if (c != '\n') goto fail;
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
        if (!tern__is_tchar(c)) goto fail;
        dec->line_bytes = 0;
        dec->state = CH_TRAILER_NAME;
        goto trailer_byte;

      case CH_TRAILER_NAME:
        if (c == ':')
          dec->state = CH_TRAILER_VALUE;
        else if (!tern__is_tchar(c))
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
        if (c != '\n') goto fail;
        dec->state = CH_TRAILER_START;
        goto trailer_byte;

      case CH_END_LF:
        if (c != '\n') goto fail;
        dec->state = CH_DONE;
        break;

      default:
        goto fail;

      trailer_byte:
        /* Field lines of the trailer section count towards its limit; the final empty line
             * does not, so a body without trailers never trips even a tiny limit. */
        dec->line_bytes++;
        if (++dec->trailer_bytes > max_trailer) goto fail;
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
  if (rest != 0 && dst != src) memmove(buf + dst, buf + src, rest);
  *len = dst;
  return (ssize_t)rest;

fail:
  dec->state = CH_ERROR;
  *len = dst;
  return TERN__PARSE_ERROR;
}
