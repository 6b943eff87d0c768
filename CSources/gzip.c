/* Content decoding of response bodies (gzip, deflate, and br and zstd when built with
 * libbrotlidec and libzstd), streaming through one fixed output buffer, with limits that stop
 * decompression bombs. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#ifdef TERN_HAVE_BROTLI
#  include <brotli/decode.h>
#endif
#ifdef TERN_HAVE_ZSTD
#  include <zstd.h>
#endif

#define OUT_SIZE           16384
/* The ratio limit applies once this much has been decoded, so real, very compressible bodies
 * (a 5 MB repetitive JSON document at 256:1, 10 MiB of zeros at 1000:1) are never refused. A
 * body kept in memory gets 16 MiB; one streamed to a file or callback costs no memory and gets
 * 256 MiB, which only bounds the disk an obvious bomb may take (a caller's max_bytes bounds
 * any sink at once). */
#define RATIO_GRACE_MEMORY (16u << 20)
#define RATIO_GRACE_STREAM (256u << 20)

enum { KIND_GZIP, KIND_DEFLATE, KIND_BR, KIND_ZSTD };
/* zstd frames may ask for any window; HTTP's zstd coding keeps it within 8 MiB (RFC 9659), and
 * a larger one is refused rather than allocated. */
#define ZSTD_WINDOW_LOG_MAX 23

struct tern__decoder {
  z_stream zs;
  int kind;
  bool started; /* inflateInit2 done (deflate waits for two bytes to tell zlib from raw) */
  bool ended;   /* the last member's end was seen */
  unsigned char head[2];
  size_t nhead;
  uint64_t in_total, out_total;
  uint64_t max_bytes; /* 0: none */
  unsigned max_ratio; /* 0: none */
  uint64_t grace;     /* output below this is not held to the ratio */
  char msg[200];      /* why decoding failed ("" when the sink failed) */
#ifdef TERN_HAVE_BROTLI
  BrotliDecoderState *br;
#endif
#ifdef TERN_HAVE_ZSTD
  ZSTD_DStream *zstd;
  int zpart;               /* the part of a frame the next byte is in (ZPART_*) */
  unsigned char zhead[18]; /* a frame header (at most 18 bytes), then each block's 3 */
  size_t zhave;            /* bytes of it gathered */
  uint64_t zleft;          /* bytes left of a block's content, a checksum or a skippable frame */
  uint64_t zblock_max;     /* the frame's Block_Maximum_Size */
  uint64_t zdeclared;      /* the content size its header declares, or ZSTD_CONTENTSIZE_UNKNOWN */
  bool zchecksum, zlast;   /* the frame ends with a checksum; the block is its last */
  bool zlib_end;           /* libzstd's last call saw a frame end */
  uint64_t frame_out;      /* bytes the current frame produced */
#endif
  unsigned char out[OUT_SIZE];
};

static bool token_is(const char *v, size_t n, const char *tok) {
  while (n && (*v == ' ' || *v == '\t')) v++, n--;
  while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
  return n == strlen(tok) && strncasecmp(v, tok, n) == 0;
}

static int kind_of_token(const char *v, size_t n) {
  if (token_is(v, n, "gzip") || token_is(v, n, "x-gzip")) return KIND_GZIP;
  if (token_is(v, n, "deflate")) return KIND_DEFLATE;
#ifdef TERN_HAVE_BROTLI
  if (token_is(v, n, "br")) return KIND_BR;
#endif
#ifdef TERN_HAVE_ZSTD
  if (token_is(v, n, "zstd")) return KIND_ZSTD;
#endif
  if (token_is(v, n, "identity") || token_is(v, n, "")) return TERN__CODING_IDENTITY;
  return TERN__CODING_UNKNOWN;
}

int tern__decoder_kind(const char *coding, size_t len) {
  if (coding == NULL) return TERN__CODING_IDENTITY;
  /* A list: identity entries change nothing; one real coding is decoded; several stacked are
   * not supported (unknown). */
  int found = TERN__CODING_IDENTITY;
  while (len > 0) {
    const char *comma = memchr(coding, ',', len);
    size_t n = comma ? (size_t)(comma - coding) : len;
    int k = kind_of_token(coding, n);
    if (k == TERN__CODING_UNKNOWN) return k;
    if (k != TERN__CODING_IDENTITY) {
      if (found != TERN__CODING_IDENTITY) return TERN__CODING_UNKNOWN;
      found = k;
    }
    if (comma == NULL) break;
    len -= n + 1;
    coding = comma + 1;
  }
  return found;
}

const char *tern__decoder_name(int kind) {
  switch (kind) {
    case KIND_GZIP: return "gzip";
    case KIND_DEFLATE: return "deflate";
    case KIND_BR: return "br";
    case KIND_ZSTD: return "zstd";
    default: return NULL;
  }
}

const char *tern__accept_encoding(void) {
#if defined(TERN_HAVE_BROTLI) && defined(TERN_HAVE_ZSTD)
  return "gzip, deflate, br, zstd";
#elif defined(TERN_HAVE_BROTLI)
  return "gzip, deflate, br";
#elif defined(TERN_HAVE_ZSTD)
  return "gzip, deflate, zstd";
#else
  return "gzip, deflate";
#endif
}

tern__decoder *tern__decoder_new(int kind) {
  tern__decoder *d = tern__calloc(1, sizeof *d);
  if (d == NULL) return NULL;
  d->kind = kind;
  if (kind == KIND_GZIP) {
    if (inflateInit2(&d->zs, 15 + 16) != Z_OK) {
      free(d);
      return NULL;
    }
    d->started = true;
  }
#ifdef TERN_HAVE_BROTLI
  if (kind == KIND_BR) {
    d->br = BrotliDecoderCreateInstance(NULL, NULL, NULL);
    if (d->br == NULL) {
      free(d);
      return NULL;
    }
    d->started = true;
  }
#endif
#ifdef TERN_HAVE_ZSTD
  if (kind == KIND_ZSTD) {
    d->zstd = ZSTD_createDStream();
    if (d->zstd == NULL ||
        ZSTD_isError(ZSTD_DCtx_setParameter(d->zstd, ZSTD_d_windowLogMax, ZSTD_WINDOW_LOG_MAX))) {
      ZSTD_freeDStream(d->zstd);
      free(d);
      return NULL;
    }
    d->started = true;
    d->ended = true; /* between frames: an empty body is fine, a cut frame is not */
  }
#endif
  return d;
}

void tern__decoder_free(tern__decoder *d) {
  if (d == NULL) return;
#ifdef TERN_HAVE_BROTLI
  if (d->br) BrotliDecoderDestroyInstance(d->br);
#endif
#ifdef TERN_HAVE_ZSTD
  if (d->zstd) ZSTD_freeDStream(d->zstd);
#endif
  if (d->started && (d->kind == KIND_GZIP || d->kind == KIND_DEFLATE)) inflateEnd(&d->zs);
  free(d);
}

static int fail(tern__decoder *d, const char *what) {
  snprintf(d->msg, sizeof d->msg, "%s", what);
  return TERN_EDECODE;
}

void tern__decoder_set_limits(tern__decoder *d, uint64_t max_bytes, unsigned max_ratio,
                              bool in_memory) {
  d->max_bytes = max_bytes;
  d->max_ratio = max_ratio;
  d->grace = in_memory ? RATIO_GRACE_MEMORY : RATIO_GRACE_STREAM;
}

const char *tern__decoder_message(const tern__decoder *d) { return d->msg[0] ? d->msg : NULL; }

/* "deflate" is meant to be zlib-wrapped (RFC 9110 8.4.1.2), but some servers send raw
 * deflate: the first two bytes tell which. */
static int start_deflate(tern__decoder *d) {
  unsigned cmf = d->head[0], flg = d->head[1];
  bool zlib = (cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && ((cmf << 8) | flg) % 31 == 0;
  if (inflateInit2(&d->zs, zlib ? 15 : -15) != Z_OK) return TERN_ENOMEM;
  d->started = true;
  return 0;
}

/* Output of `made` bytes in d->out after `in` input bytes: checked against the limits, then
 * passed to the sink. */
static int emit(tern__decoder *d, size_t made, uint64_t in, tern__sink_fn sink, void *ctx) {
  d->out_total += made;
  if (d->max_bytes && d->out_total > d->max_bytes) {
    snprintf(d->msg, sizeof d->msg, "decoded body exceeds its limit of %llu bytes",
             (unsigned long long)d->max_bytes);
    return TERN_EDECODELIMIT;
  }
  if (d->max_ratio && d->out_total > d->grace && d->out_total / (in ? in : 1) > d->max_ratio) {
    snprintf(d->msg, sizeof d->msg,
             "compressed body expands more than %u:1 (%llu bytes from %llu); refusing a likely "
             "decompression bomb",
             d->max_ratio, (unsigned long long)d->out_total, (unsigned long long)in);
    return TERN_EDECODELIMIT;
  }
  return sink(ctx, (const char *)d->out, made);
}

static int inflate_some(tern__decoder *d, const unsigned char *p, size_t n, tern__sink_fn sink,
                        void *ctx) {
  d->zs.next_in = (unsigned char *)p;
  d->zs.avail_in = (uInt)n;
  while (d->zs.avail_in > 0) {
    if (d->ended) {
      /* Bytes after a complete gzip member start another member (RFC 1952 2.2). */
      if (d->kind != KIND_GZIP) return fail(d, "data after the end of the deflate stream");
      if (inflateReset(&d->zs) != Z_OK) return fail(d, "cannot restart the gzip stream");
      d->ended = false;
    }
    d->zs.next_out = d->out;
    d->zs.avail_out = OUT_SIZE;
    int r = inflate(&d->zs, Z_NO_FLUSH);
    size_t made = OUT_SIZE - d->zs.avail_out;
    if (r == Z_STREAM_END) {
      d->ended = true;
    } else if (r != Z_OK && !(r == Z_BUF_ERROR && made > 0)) {
      return fail(d, d->zs.msg ? d->zs.msg : "corrupt compressed body");
    }
    if (made) {
      int e = emit(d, made, d->in_total - d->zs.avail_in, sink, ctx);
      if (e) return e;
    }
  }
  return 0;
}

#ifdef TERN_HAVE_BROTLI
static int brotli_some(tern__decoder *d, const unsigned char *p, size_t n, tern__sink_fn sink,
                       void *ctx) {
  size_t avail_in = n;
  const uint8_t *next_in = p;
  for (;;) {
    if (d->ended) {
      if (avail_in > 0) return fail(d, "data after the end of the brotli stream");
      return 0;
    }
    size_t avail_out = OUT_SIZE;
    uint8_t *next_out = d->out;
    BrotliDecoderResult r =
        BrotliDecoderDecompressStream(d->br, &avail_in, &next_in, &avail_out, &next_out, NULL);
    if (r == BROTLI_DECODER_RESULT_ERROR)
      return fail(d, BrotliDecoderErrorString(BrotliDecoderGetErrorCode(d->br)));
    if (r == BROTLI_DECODER_RESULT_SUCCESS) d->ended = true;
    size_t made = OUT_SIZE - avail_out;
    if (made) {
      int e = emit(d, made, d->in_total - avail_in, sink, ctx);
      if (e) return e;
    }
    if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT && avail_in == 0) return 0;
  }
}
#endif

#ifdef TERN_HAVE_ZSTD
/* gzip.c follows a zstd body's frames and blocks itself (RFC 8878 3.1) and hands libzstd each
 * header whole, then each block's content, checksum or skippable content up to its end and no
 * further. libzstd then sees the same headers and the same ends of parts however the body was
 * cut; what it was seen to treat differently in pieces (fuzz_decode: legacy frames, a header's
 * reserved bit, an empty compressed or RLE block) is refused here before it gets there, and
 * it never holds a whole frame in one call, which would take its one-pass decoder (that one
 * refused an empty compressed block that its streaming decoder let pass). */
enum { ZPART_FRAME, ZPART_BLOCK_HEAD, ZPART_CONTENT, ZPART_CHECKSUM, ZPART_SKIP };
#  define ZBLOCK_MAX (128u << 10)

static uint32_t le32(const unsigned char *b) {
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static bool zstd_skippable(const unsigned char *head) {
  return (le32(head) & ZSTD_MAGIC_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START;
}

static const unsigned char zdict_bytes[4] = { 0, 1, 2, 4 };

/* How many bytes of the frame header begun in d->zhead to gather: 4 for the magic number, 5 for
 * a standard frame's descriptor, then the whole header (RFC 8878 3.1.1.1); 0 when the magic
 * number is neither a standard nor a skippable frame's (libzstd would also take legacy frames,
 * and decoded them differently in pieces). */
static size_t zstd_head_size(const tern__decoder *d) {
  if (d->zhave < 4) return 4;
  if (zstd_skippable(d->zhead)) return 8;
  if (le32(d->zhead) != ZSTD_MAGICNUMBER) return 0;
  if (d->zhave < 5) return 5;
  unsigned fhd = d->zhead[4], single = (fhd >> 5) & 1;
  unsigned char size_bytes[4] = { (unsigned char)single, 2, 4, 8 };
  return 5 + !single + zdict_bytes[fhd & 3] + size_bytes[fhd >> 6];
}

/* A whole frame header in d->zhead: what the frame holds. */
static int zstd_frame_start(tern__decoder *d) {
  const unsigned char *h = d->zhead;
  d->frame_out = 0;
  d->zdeclared = ZSTD_CONTENTSIZE_UNKNOWN;
  if (zstd_skippable(h)) {
    d->zleft = le32(h + 4);
    d->zpart = ZPART_SKIP;
    return 0;
  }
  unsigned fhd = h[4], single = (fhd >> 5) & 1;
  if (fhd & 0x08) return fail(d, "malformed zstd frame header (reserved bit set)");
  size_t at = 5 + !single + zdict_bytes[fhd & 3];
  uint64_t size = 0;
  for (size_t i = d->zhave; i-- > at;) size = size << 8 | h[i];
  if (d->zhave > at) d->zdeclared = size + (d->zhave - at == 2 ? 256 : 0);
  uint64_t window = d->zdeclared;
  if (!single) {
    uint64_t base = (uint64_t)1 << (10 + (h[5] >> 3));
    window = base + base / 8 * (h[5] & 7);
  }
  d->zblock_max = window < ZBLOCK_MAX ? window : ZBLOCK_MAX;
  d->zchecksum = (fhd >> 2) & 1;
  d->zpart = ZPART_BLOCK_HEAD;
  return 0;
}

/* A whole block header in d->zhead (RFC 8878 3.1.1.2). Beyond what the format forbids, an RLE
 * or compressed block of size 0 is refused: zstd never writes one, and libzstd treated both
 * differently whole and in pieces. */
static int zstd_block_start(tern__decoder *d) {
  uint32_t v = (uint32_t)d->zhead[0] | (uint32_t)d->zhead[1] << 8 | (uint32_t)d->zhead[2] << 16;
  unsigned type = (v >> 1) & 3; /* raw, RLE, compressed, reserved */
  uint32_t size = v >> 3;
  if (type == 3) return fail(d, "zstd block of the reserved type");
  if (size > d->zblock_max) return fail(d, "zstd block larger than its frame allows");
  if (size == 0 && type == 1) return fail(d, "empty zstd RLE block");
  if (size == 0 && type == 2) return fail(d, "empty compressed zstd block");
  d->zlast = v & 1;
  d->zleft = type == 1 ? 1 : size;
  d->zpart = ZPART_CONTENT;
  return 0;
}

/* The part in hand is over: moves to the next one, and says whether the frame ended. */
static bool zstd_part_done(tern__decoder *d) {
  if (d->zpart == ZPART_CONTENT && !d->zlast) {
    d->zpart = ZPART_BLOCK_HEAD;
    return false;
  }
  if (d->zpart == ZPART_CONTENT && d->zchecksum) {
    d->zpart = ZPART_CHECKSUM;
    d->zleft = 4;
    return false;
  }
  d->zpart = ZPART_FRAME;
  return true;
}

/* Hands libzstd `n` bytes and takes all it makes of them; `in` counts the body's bytes up to the
 * end of these. d->zlib_end tells whether libzstd ended a frame with them. */
static int zstd_feed(tern__decoder *d, const unsigned char *p, size_t n, uint64_t in,
                     tern__sink_fn sink, void *ctx) {
  ZSTD_inBuffer src = { p, n, 0 };
  for (;;) {
    ZSTD_outBuffer out = { d->out, OUT_SIZE, 0 };
    size_t r = ZSTD_decompressStream(d->zstd, &out, &src);
    if (ZSTD_isError(r)) return fail(d, ZSTD_getErrorName(r));
    d->frame_out += out.pos;
    if (out.pos) {
      int e = emit(d, out.pos, in - (n - src.pos), sink, ctx);
      if (e) return e;
    }
    /* 0: a frame ended and all it made is out. Even when that filled d->out, there is no more
     * to take: another call would ask for the next frame's header. */
    if (r == 0 && src.pos < src.size) return fail(d, "zstd frame ends before its blocks do");
    if (src.pos == src.size && (out.pos < out.size || r == 0)) {
      d->zlib_end = r == 0;
      return 0;
    }
  }
}

static int zstd_some(tern__decoder *d, const unsigned char *p, size_t n, tern__sink_fn sink,
                     void *ctx) {
  uint64_t before = d->in_total - n; /* the body's bytes before p */
  size_t at = 0;
  while (at < n) {
    const unsigned char *piece = p + at;
    size_t len;
    if (d->zpart == ZPART_FRAME || d->zpart == ZPART_BLOCK_HEAD) {
      d->ended = false;
      size_t need;
      while ((need = d->zpart == ZPART_FRAME ? zstd_head_size(d) : 3) > d->zhave && at < n) {
        size_t k = need - d->zhave < n - at ? need - d->zhave : n - at;
        memcpy(d->zhead + d->zhave, p + at, k);
        d->zhave += k;
        at += k;
      }
      if (need == 0) return fail(d, "not a zstd frame (RFC 8878)");
      if (d->zhave < need) return 0;
      int e = d->zpart == ZPART_FRAME ? zstd_frame_start(d) : zstd_block_start(d);
      if (e) return e;
      piece = d->zhead;
      len = d->zhave;
      d->zhave = 0;
    } else {
      len = d->zleft < n - at ? (size_t)d->zleft : n - at;
      d->zleft -= len;
      at += len;
    }
    bool frame_end = d->zpart != ZPART_BLOCK_HEAD && d->zleft == 0 && zstd_part_done(d);
    int e = zstd_feed(d, piece, len, before + at, sink, ctx);
    if (e) return e;
    if (d->zlib_end != frame_end) return fail(d, "zstd frame does not end where its blocks end");
    /* libzstd's streaming decoder (1.5.4) can finish a frame without checking the content
     * size its header declares. */
    if (frame_end && d->zdeclared != ZSTD_CONTENTSIZE_UNKNOWN && d->zdeclared != d->frame_out)
      return fail(d, "zstd frame size differs from the size its header declares");
    d->ended = frame_end;
  }
  return 0;
}
#endif

int tern__decoder_write(tern__decoder *d, const char *data, size_t n, tern__sink_fn sink,
                        void *ctx) {
  const unsigned char *p = (const unsigned char *)data;
  d->in_total += n;
#ifdef TERN_HAVE_BROTLI
  if (d->kind == KIND_BR) return n ? brotli_some(d, p, n, sink, ctx) : 0;
#endif
#ifdef TERN_HAVE_ZSTD
  if (d->kind == KIND_ZSTD) return n ? zstd_some(d, p, n, sink, ctx) : 0;
#endif
  if (!d->started) {
    while (n && d->nhead < 2) {
      d->head[d->nhead++] = *p++;
      n--;
    }
    if (d->nhead < 2) return 0;
    int r = start_deflate(d);
    if (r) return r;
    r = inflate_some(d, d->head, 2, sink, ctx);
    if (r) return r;
  }
  return n ? inflate_some(d, p, n, sink, ctx) : 0;
}

/* ---- request bodies ---- */

#define SCRATCH_SIZE 16384

struct tern__encoder {
  z_stream zs;
  bool input_eof, finished;
  char scratch[SCRATCH_SIZE];
};

tern__encoder *tern__encoder_new(void) {
  tern__encoder *e = tern__calloc(1, sizeof *e);
  if (e == NULL) return NULL;
  if (deflateInit2(&e->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    free(e);
    return NULL;
  }
  return e;
}

void tern__encoder_free(tern__encoder *e) {
  if (e == NULL) return;
  deflateEnd(&e->zs);
  free(e);
}

bool tern__encoder_done(const tern__encoder *e) { return e->finished; }

int64_t tern__encoder_fill(tern__encoder *e, tern__pull_fn pull, void *ctx, char *out, size_t cap) {
  e->zs.next_out = (unsigned char *)out;
  e->zs.avail_out = (uInt)cap;
  while (e->zs.avail_out > 0 && !e->finished) {
    if (e->zs.avail_in == 0 && !e->input_eof) {
      const char *p = NULL;
      int64_t k = pull(ctx, e->scratch, sizeof e->scratch, &p);
      if (k == TERN__PULL_WAIT) {
        /* No input yet: what came so far is flushed out of zlib and goes now (a reader on the
         * other side sees it without waiting for more); the rest when input comes. */
        if (deflate(&e->zs, Z_SYNC_FLUSH) == Z_STREAM_ERROR) return TERN_EIO;
        return e->zs.avail_out < cap ? (int64_t)(cap - e->zs.avail_out) : k;
      }
      if (k < 0) return k;
      if (k == 0) {
        e->input_eof = true;
      } else {
        e->zs.next_in = (unsigned char *)p;
        e->zs.avail_in = (uInt)k;
      }
    }
    int r = deflate(&e->zs, e->input_eof ? Z_FINISH : Z_NO_FLUSH);
    if (r == Z_STREAM_END) {
      e->finished = true;
    } else if (r != Z_OK && r != Z_BUF_ERROR) {
      return TERN_EIO;
    }
  }
  return (int64_t)(cap - e->zs.avail_out);
}

int tern__decoder_end(tern__decoder *d) {
  if (d->in_total == 0) return 0; /* an empty body is an empty representation */
  if (!d->ended) return fail(d, "compressed body ended before its end marker (truncated)");
  return 0;
}
