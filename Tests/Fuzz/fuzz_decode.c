/*
 * fuzz_decode.c — libFuzzer target for the response decoders (gzip.c: gzip, deflate, br, zstd).
 *
 * The first input byte picks the coding, the second where to split the rest; the rest is a
 * response body fed to a decoder twice, in one write and in two, and then ended. Both runs must
 * agree on the outcome and on every decoded byte (folded into a running hash), and the decoded
 * size must respect the byte limit set on the decoder. ASan and UBSan catch memory errors.
 *
 * One exception, for zstd only: libzstd's streaming decoder (1.5.4) refuses, when a block
 * arrives in pieces, some degenerate frames it decodes when whole (an RLE block of size 0,
 * found 2026-11-25). Refusing is safe (a clear error, no byte altered), so a piecewise
 * TERN_EDECODE where the whole decode succeeded is allowed for zstd; a piecewise success where
 * the whole decode fails, or any difference in the bytes of two successes, is still not.
 * (Following the frame's blocks ourselves would remove the exception: docs/engine.md.)
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

static int run(int kind, const uint8_t *p, size_t n, size_t split, uint64_t *bytes,
               uint64_t *hash) {
  tern__decoder *d = tern__decoder_new(kind);
  CHECK(d != NULL);
  tern__decoder_set_limits(d, MAX_OUT, 200, true);
  out_bytes = 0;
  out_hash = 1469598103934665603ull;
  int r = 0;
  if (split > 0 && split < n) {
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
  uint64_t b1, h1, b2, h2;
  int r1 = run(kind, body, n, 0, &b1, &h1);
  int r2 = run(kind, body, n, split, &b2, &h2);
  if (strcmp(codings[data[0] % 4], "zstd") == 0 && r1 == 0 && r2 == TERN_EDECODE) return 0;
  CHECK(r1 == r2);
  if (r1 == 0) {
    CHECK(b1 == b2);
    CHECK(h1 == h2);
  }
  return 0;
}
