/* Content decoding of response bodies (gzip, deflate) through zlib, streaming through one
 * fixed output buffer, with limits that stop decompression bombs. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#define OUT_SIZE 16384
/* The ratio limit applies once this much has been decoded, so real, very compressible bodies
 * (a 5 MB repetitive JSON document at 256:1, 10 MiB of zeros at 1000:1) are never refused. A
 * body kept in memory gets 16 MiB; one streamed to a file or callback costs no memory and gets
 * 256 MiB, which only bounds the disk an obvious bomb may take (a caller's max_bytes bounds
 * any sink at once). */
#define RATIO_GRACE_MEMORY (16u << 20)
#define RATIO_GRACE_STREAM (256u << 20)

enum { KIND_GZIP, KIND_DEFLATE };

struct tern__decoder {
  z_stream zs;
  int kind;
  bool started; /* inflateInit2 done (deflate waits for two bytes to tell zlib from raw) */
  bool ended;   /* the last member's end was seen */
  unsigned char head[2];
  size_t nhead;
  uint64_t in_total, out_total;
  unsigned char out[OUT_SIZE];
};

static bool token_is(const char *v, size_t n, const char *tok) {
  while (n && (*v == ' ' || *v == '\t')) v++, n--;
  while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
  return n == strlen(tok) && strncasecmp(v, tok, n) == 0;
}

int tern__decoder_kind(const char *coding, size_t len) {
  if (coding == NULL) return -1;
  if (token_is(coding, len, "gzip") || token_is(coding, len, "x-gzip")) return KIND_GZIP;
  if (token_is(coding, len, "deflate")) return KIND_DEFLATE;
  return -1;
}

tern__decoder *tern__decoder_new(int kind) {
  tern__decoder *d = calloc(1, sizeof *d);
  if (d == NULL) return NULL;
  d->kind = kind;
  if (kind == KIND_GZIP) {
    if (inflateInit2(&d->zs, 15 + 16) != Z_OK) {
      free(d);
      return NULL;
    }
    d->started = true;
  }
  return d;
}

void tern__decoder_free(tern__decoder *d) {
  if (d == NULL) return;
  if (d->started) inflateEnd(&d->zs);
  free(d);
}


static int fail(tern_request_t *req, const char *what) {
  tern__request_set_error(req, TERN_EDECODE, "%s: %s", req->url.hostport, what);
  return TERN_EDECODE;
}

/* "deflate" is meant to be zlib-wrapped (RFC 9110 8.4.1.2), but some servers send raw
 * deflate: the first two bytes tell which. */
static int start_deflate(tern__decoder *d) {
  unsigned cmf = d->head[0], flg = d->head[1];
  bool zlib = (cmf & 0x0f) == 8 && (cmf >> 4) <= 7 && ((cmf << 8) | flg) % 31 == 0;
  if (inflateInit2(&d->zs, zlib ? 15 : -15) != Z_OK) return TERN_ENOMEM;
  d->started = true;
  return 0;
}

static int inflate_some(tern__decoder *d, tern_request_t *req, const unsigned char *p, size_t n,
                        tern__sink_fn sink) {
  d->zs.next_in = (unsigned char *)p;
  d->zs.avail_in = (uInt)n;
  while (d->zs.avail_in > 0) {
    if (d->ended) {
      /* Bytes after a complete gzip member start another member (RFC 1952 2.2). */
      if (d->kind != KIND_GZIP) return fail(req, "data after the end of the deflate stream");
      if (inflateReset(&d->zs) != Z_OK) return fail(req, "cannot restart the gzip stream");
      d->ended = false;
    }
    d->zs.next_out = d->out;
    d->zs.avail_out = OUT_SIZE;
    int r = inflate(&d->zs, Z_NO_FLUSH);
    size_t made = OUT_SIZE - d->zs.avail_out;
    if (r == Z_STREAM_END) {
      d->ended = true;
    } else if (r != Z_OK && !(r == Z_BUF_ERROR && made > 0)) {
      return fail(req, d->zs.msg ? d->zs.msg : "corrupt compressed body");
    }
    if (made) {
      d->out_total += made;
      uint64_t in = d->in_total - d->zs.avail_in;
      if (req->decoded_max_bytes && d->out_total > req->decoded_max_bytes) {
        tern__request_set_error(req, TERN_EDECODELIMIT,
                                "%s: decoded body exceeds its limit of %llu bytes",
                                req->url.hostport, (unsigned long long)req->decoded_max_bytes);
        return TERN_EDECODELIMIT;
      }
      uint64_t grace = req->sink_kind == TERN__SINK_MEM && !req->to_file ? RATIO_GRACE_MEMORY
                                                                           : RATIO_GRACE_STREAM;
      if (req->decoded_max_ratio && d->out_total > grace &&
          d->out_total / (in ? in : 1) > req->decoded_max_ratio) {
        tern__request_set_error(
            req, TERN_EDECODELIMIT,
            "%s: compressed body expands more than %u:1 (%llu bytes from %llu); refusing a likely "
            "decompression bomb",
            req->url.hostport, req->decoded_max_ratio, (unsigned long long)d->out_total,
            (unsigned long long)in);
        return TERN_EDECODELIMIT;
      }
      int s = sink(req, (const char *)d->out, made);
      if (s) return s;
    }
  }
  return 0;
}

int tern__decoder_write(tern__decoder *d, tern_request_t *req, const char *data, size_t n,
                        tern__sink_fn sink) {
  const unsigned char *p = (const unsigned char *)data;
  d->in_total += n;
  if (!d->started) {
    while (n && d->nhead < 2) {
      d->head[d->nhead++] = *p++;
      n--;
    }
    if (d->nhead < 2) return 0;
    int r = start_deflate(d);
    if (r) return r;
    r = inflate_some(d, req, d->head, 2, sink);
    if (r) return r;
  }
  return n ? inflate_some(d, req, p, n, sink) : 0;
}

/* ---- request bodies ---- */

#define SCRATCH_SIZE 16384

struct tern__encoder {
  z_stream zs;
  bool input_eof, finished;
  char scratch[SCRATCH_SIZE];
};

tern__encoder *tern__encoder_new(void) {
  tern__encoder *e = calloc(1, sizeof *e);
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

int64_t tern__encoder_fill(tern__encoder *e, tern_request_t *req, char *out, size_t cap) {
  e->zs.next_out = (unsigned char *)out;
  e->zs.avail_out = (uInt)cap;
  while (e->zs.avail_out > 0 && !e->finished) {
    if (e->zs.avail_in == 0 && !e->input_eof) {
      const char *p = NULL;
      int64_t k = tern__request_pull_plain(req, e->scratch, sizeof e->scratch, &p);
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
      tern__request_set_error(req, TERN_EIO, "compressing the body for %s failed",
                              req->url.hostport);
      return TERN_EIO;
    }
  }
  return (int64_t)(cap - e->zs.avail_out);
}

int tern__decoder_end(tern__decoder *d, tern_request_t *req) {
  if (d->in_total == 0) return 0; /* an empty body is an empty representation */
  if (!d->ended) return fail(req, "compressed body ended before its end marker (truncated)");
  return 0;
}
