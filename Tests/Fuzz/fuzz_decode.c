/*
 * fuzz_decode.c — libFuzzer target for the response decoders (gzip.c: gzip, deflate, br, zstd).
 *
 * The first input byte picks the coding, the second where to split the rest; the rest is a
 * response body fed to a decoder three times, in one write, in two, and in pieces of 1 to 8
 * bytes, and then ended. All runs must agree on the outcome and on every decoded byte (folded
 * into a running hash), and the decoded size must respect the byte limit set on the decoder.
 * ASan and UBSan catch memory errors.
 *
 * No exception, zstd included: libzstd's streaming decoder (1.5.4) decided some degenerate
 * frames differently in pieces (an RLE or compressed block of size 0, a header's reserved bit,
 * legacy frames), and a whole frame in one call took its one-pass decoder. gzip.c now follows
 * a zstd body's frames and blocks itself, hands libzstd each header whole and each part up to
 * its end only, and refuses those frames first, so all runs must agree here as for the rest.
 *
 * Build with -DTERN_FUZZ=ON (clang): target fuzz_decode; run
 *   build/fuzz/fuzz_decode -max_total_time=60 CORPUS_DIR
 */
#include "internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(expr)                                                                                \
  do {                                                                                             \
    if (!(expr)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr);                     \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

#define MAX_OUT (4u << 20)

static uint64_t out_bytes, out_hash;

static int sink(void *ctx, const char *data, size_t n) {
  (void)ctx;
  for (size_t i = 0; i < n; i++) out_hash = (out_hash ^ (uint8_t)data[i]) * 1099511628211ull;
  out_bytes += n;
  return 0;
}

/* Feeds p whole (split 0, step 0), in two writes (cut at split) or `step` bytes at a time. */
static int run(int kind, const uint8_t *p, size_t n, size_t split, size_t step, uint64_t *bytes,
               uint64_t *hash) {
  tern__decoder *d = tern__decoder_new(kind);
  CHECK(d != NULL);
  tern__decoder_set_limits(d, MAX_OUT, 200, true);
  out_bytes = 0;
  out_hash = 1469598103934665603ull;
  int r = 0;
  if (step > 0) {
    for (size_t at = 0; r == 0 && at < n; at += step)
      r = tern__decoder_write(d, (const char *)p + at, step < n - at ? step : n - at, sink, NULL);
  } else if (split > 0 && split < n) {
    r = tern__decoder_write(d, (const char *)p, split, sink, NULL);
    if (!r) r = tern__decoder_write(d, (const char *)p + split, n - split, sink, NULL);
  } else {
    r = tern__decoder_write(d, (const char *)p, n, sink, NULL);
  }
  if (!r) r = tern__decoder_end(d);
  tern__decoder_free(d);
  CHECK(out_bytes <= MAX_OUT);
  *bytes = out_bytes;
  *hash = out_hash;
  return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  static const char *codings[] = { "gzip", "deflate", "br", "zstd" };
  int kind = tern__decoder_kind(codings[data[0] % 4], strlen(codings[data[0] % 4]));
  if (kind < 0) return 0; /* a coding this build lacks */
  const uint8_t *body = data + 2;
  size_t n = size - 2;
  size_t split = n ? data[1] % (n + 1) : 0;
  uint64_t b1, h1, b2, h2, b3, h3;
  int r1 = run(kind, body, n, 0, 0, &b1, &h1);
  int r2 = run(kind, body, n, split, 0, &b2, &h2);
  int r3 = run(kind, body, n, 0, 1 + data[1] % 8, &b3, &h3);
  CHECK(r1 == r2);
  CHECK(r1 == r3);
  if (r1 == 0) {
    CHECK(b1 == b2);
    CHECK(h1 == h2);
    CHECK(b1 == b3);
    CHECK(h1 == h3);
  }
  return 0;
}
