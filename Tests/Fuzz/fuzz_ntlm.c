/*
 * fuzz_ntlm.c — libFuzzer target for ntlm.c's CHALLENGE parser (network input).
 *
 * One input is a CHALLENGE message as the server sent it, raw; it is parsed as it is and, as
 * base64 text, through the header parser; both must agree. A message that parses is answered
 * (the AUTHENTICATE message walks its target info again for a timestamp), with NTLMv1 allowed
 * so that both response kinds run. ASan and UBSan catch any read past the message; the checks
 * below abort on a parsed target info that does not lie inside it.
 *
 * Build: cmake -DTERN_FUZZ=ON (scripts/test.sh does), then
 *   build/fuzz/fuzz_ntlm Tests/Fuzz/corpus/ntlm
 */
#define _GNU_SOURCE /* memmem */
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

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 3000) return 0; /* the header parser takes at most 4096 decoded bytes */
  tern__ntlm_challenge ch, ch2;
  int r = tern__ntlm_parse_challenge(data, size, &ch);
  if (r == 0) {
    CHECK(ch.target_info_len <= size);
    CHECK((ch.target_info == NULL) == (ch.target_info_len == 0));
    if (ch.target_info) CHECK(memmem(data, size, ch.target_info, ch.target_info_len) != NULL);
  }
  /* the same bytes as the header's base64 text */
  char *text = malloc(4 * (size / 3 + 1) + 1);
  CHECK(text != NULL);
  size_t k = 0;
  for (size_t i = 0; i < size; i += 3) {
    unsigned v = (unsigned)data[i] << 16 | (i + 1 < size ? (unsigned)data[i + 1] << 8 : 0) |
                 (i + 2 < size ? data[i + 2] : 0);
    text[k++] = b64[v >> 18];
    text[k++] = b64[(v >> 12) & 63];
    text[k++] = i + 1 < size ? b64[(v >> 6) & 63] : '=';
    text[k++] = i + 2 < size ? b64[v & 63] : '=';
  }
  text[k] = '\0';
  int r2 = tern__ntlm_parse_header(text, &ch2);
  free(text);
  CHECK(r == r2);
  if (r2 == 0) {
    CHECK(ch2.target_info_len == ch.target_info_len);
    CHECK(ch2.target_info_len == 0 ||
          memcmp(ch.target_info, ch2.target_info, ch2.target_info_len) == 0);
  }
  tern__ntlm_challenge_clear(&ch2);
  if (r == 0) {
    tern__str out = { 0 };
    int a = tern__ntlm_authenticate(&ch, "DOM\\user", "password", true, &out);
    CHECK(a == 0 || a == TERN_EUNSUPPORTED || a == TERN_EAUTH);
    if (a == 0) CHECK(out.len > 5 && memcmp(out.data, "NTLM ", 5) == 0);
    tern__str_free(&out);
  }
  tern__ntlm_challenge_clear(&ch);
  return 0;
}
