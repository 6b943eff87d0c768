/*
 * fuzz_socks.c — libFuzzer target for socks_parse.c, the lengths of a SOCKS proxy's answers.
 *
 * The first input byte picks the step (greeting, authentication, SOCKS5 CONNECT, SOCKS4
 * CONNECT, or an unknown one); the rest is what the proxy sent. The target checks that an
 * answer's length never exceeds the bytes given, that every shorter prefix of a whole answer is
 * still incomplete or already refused the same way (so reading byte by byte and at once agree),
 * and that extra bytes after a whole answer do not change its length.
 */
#include "socks_parse.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  int step = data[0] % 5;
  const unsigned char *p = data + 1;
  size_t n = size - 1;
  /* A private copy of exactly n bytes, so ASan sees any read past the answer. */
  unsigned char *copy = malloc(n ? n : 1);
  CHECK(copy != NULL);
  memcpy(copy, p, n);
  unsigned version, code;
  int r = tern__socks_answer(step, copy, n, &version, &code);
  CHECK(r >= -3);
  CHECK(r <= (int)n);
  if (step == 4) CHECK(r == -3);
  if (r > 0) {
    for (size_t k = 0; k < (size_t)r; k++) {
      unsigned v2, c2;
      int partial = tern__socks_answer(step, copy, k, &v2, &c2);
      CHECK(partial == 0 || partial < 0);
    }
    unsigned v3, c3;
    unsigned char *longer = malloc(n + 7);
    CHECK(longer != NULL);
    memcpy(longer, copy, n);
    memset(longer + n, 0xA5, 7);
    CHECK(tern__socks_answer(step, longer, n + 7, &v3, &c3) == r);
    CHECK(v3 == version && c3 == code);
    free(longer);
  }
  free(copy);
  return 0;
}
