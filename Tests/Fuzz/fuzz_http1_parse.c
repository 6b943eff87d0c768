/*
 * fuzz_http1_parse.c — libFuzzer target for http1_parse.c.
 *
 * One input is one connection's bytes. The target parses a response head from them, checks
 * that the last_len hint and a shorter prefix agree with a parse from scratch, runs the field-
 * value helpers on every header value, and then decodes what follows the head as a chunked body
 * twice: in one call, and split in two at an offset taken from the input. Both decodes must
 * agree byte for byte. Any disagreement aborts, so the fuzzer reports logic bugs as well as the
 * memory errors ASan and UBSan catch.
 *
 * Build (the Swift toolchain's clang ships libFuzzer):
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -ICSources -ICSources/include \
 *       Tests/Fuzz/fuzz_http1_parse.c CSources/http1_parse.c -o fuzz_http1_parse
 *   ./fuzz_http1_parse -dict=Tests/Fuzz/http.dict Tests/Fuzz/corpus/http1_parse
 */
#include "http1_parse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADERS 64

#define CHECK(expr)                                                                                \
  do {                                                                                             \
    if (!(expr)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr);                     \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

typedef struct {
  int ret;
  int minor;
  int status;
  const char *reason;
  size_t reason_len;
  tern__header_t headers[MAX_HEADERS];
  size_t num_headers;
} head_t;

static void parse_head(const uint8_t *data, size_t len, size_t last_len, head_t *h) {
  h->num_headers = MAX_HEADERS;
  h->ret = tern__parse_response((const char *)data, len, last_len, &h->minor, &h->status,
                                &h->reason, &h->reason_len, h->headers, &h->num_headers);
}

static void check_same_head(const head_t *a, const head_t *b) {
  CHECK(a->ret == b->ret);
  if (a->ret < 0) return;
  CHECK(a->minor == b->minor && a->status == b->status);
  CHECK(a->reason == b->reason && a->reason_len == b->reason_len);
  CHECK(a->num_headers == b->num_headers);
  for (size_t i = 0; i < a->num_headers; i++) {
    CHECK(a->headers[i].name == b->headers[i].name);
    CHECK(a->headers[i].name_len == b->headers[i].name_len);
    CHECK(a->headers[i].value == b->headers[i].value);
    CHECK(a->headers[i].value_len == b->headers[i].value_len);
  }
}

/* Checks what the contract promises about a successful parse. */
static void check_head_shape(const head_t *h, const uint8_t *data, size_t len) {
  const char *base = (const char *)data;

  CHECK(h->ret > 0 && (size_t)h->ret <= len);
  CHECK(h->minor == 0 || h->minor == 1);
  CHECK(h->status >= 100 && h->status <= 999);
  CHECK(h->num_headers <= MAX_HEADERS);
  CHECK(h->reason >= base && h->reason + h->reason_len <= base + h->ret);
  for (size_t i = 0; i < h->num_headers; i++) {
    const tern__header_t *f = &h->headers[i];
    CHECK(f->name_len > 0);
    CHECK(f->name >= base && f->name + f->name_len <= base + h->ret);
    CHECK(f->value >= base && f->value + f->value_len <= base + h->ret);
    CHECK(f->name[f->name_len] == ':');
    if (f->value_len > 0) {
      CHECK(f->value[0] != ' ' && f->value[0] != '\t');
      CHECK(f->value[f->value_len - 1] != ' ' && f->value[f->value_len - 1] != '\t');
    }
    for (size_t j = 0; j < f->value_len; j++) {
      unsigned char c = (unsigned char)f->value[j];
      CHECK(c >= 0x20 || c == '\t');
      CHECK(c != 0x7f);
    }
  }
}

/* Runs every value helper over one value; the results only have to be consistent. */
static void run_helpers(const char *value, size_t len) {
  uint64_t v = 0;

  if (tern__parse_content_length(value, len, &v) == 0) CHECK(v <= (UINT64_C(1) << 62));
  if (tern__parse_keep_alive_timeout(value, len, &v) == 0) CHECK(v <= UINT64_C(0xffffffff));
  if (tern__is_chunked_final(value, len)) CHECK(tern__has_token(value, len, "chunked"));
  if (tern__is_chunked_only(value, len)) CHECK(tern__is_chunked_final(value, len));
  (void)tern__has_token(value, len, "close");
  (void)tern__has_token(value, len, "keep-alive");
  (void)tern__name_is(value, len, "content-length");
  (void)tern__name_is(value, len, "");
}

typedef struct {
  ssize_t ret;
  char *out; /* decoded bytes, then the leftover */
  size_t out_len;
  size_t left_len;
} body_t;

/* Decodes body[0, len) in pieces split at `split`, each piece in a buffer of its own exact size
 * so that ASan sees any access past the length the decoder was given. */
static void decode_split(const uint8_t *body, size_t len, size_t split, size_t max_trailer,
                         body_t *res) {
  tern__chunked_t dec;
  size_t bounds[2] = { split, len }, start = 0;

  tern__chunked_init(&dec);
  dec.max_trailer_bytes = max_trailer;
  res->ret = TERN__PARSE_INCOMPLETE;
  res->out_len = 0;
  res->left_len = 0;
  res->out = malloc(len + 1);
  CHECK(res->out != NULL);
  for (size_t i = 0; i < 2; i++) {
    size_t n = bounds[i] - start, decoded = n;
    char *piece;

    if (res->ret >= 0) {
      /* The body ended in an earlier piece: this one belongs to the next response. */
      memcpy(res->out + res->out_len + res->left_len, body + start, n);
      res->left_len += n;
      start = bounds[i];
      continue;
    }
    piece = malloc(n != 0 ? n : 1); /* exact size: ASan flags any byte past n */
    CHECK(piece != NULL);
    memcpy(piece, body + start, n);
    res->ret = tern__decode_chunked(&dec, piece, &decoded);
    CHECK(decoded <= n);
    CHECK(res->ret == TERN__PARSE_ERROR || res->ret == TERN__PARSE_INCOMPLETE ||
          (res->ret >= 0 && (size_t)res->ret + decoded <= n));
    memcpy(res->out + res->out_len, piece, decoded);
    res->out_len += decoded;
    if (res->ret >= 0) {
      memcpy(res->out + res->out_len, piece + decoded, (size_t)res->ret);
      res->left_len = (size_t)res->ret;
    }
    free(piece);
    if (res->ret == TERN__PARSE_ERROR) break;
    start = bounds[i];
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  head_t head, other;
  const uint8_t *body;
  size_t body_len, split, max_trailer;
  body_t one, two;

  parse_head(data, size, 0, &head);
  CHECK(head.ret > 0 || head.ret == TERN__PARSE_ERROR || head.ret == TERN__PARSE_INCOMPLETE ||
        head.ret == TERN__PARSE_TOO_MANY);

  if (size > 0) {
    /* A prefix that settles the result settles it for the whole input too; one that does
         * not is a valid last_len hint, and the hinted parse may only differ from a parse from
         * scratch by still waiting (an error or TOO_MANY before the empty line has arrived). */
    size_t k = (size_t)data[size - 1] * size / 256;
    parse_head(data, k, 0, &other);
    if (other.ret != TERN__PARSE_INCOMPLETE) {
      check_same_head(&other, &head);
    } else {
      parse_head(data, size, k, &other);
      if (head.ret >= 0 || other.ret != TERN__PARSE_INCOMPLETE) check_same_head(&other, &head);
    }
  }

  if (head.ret > 0) {
    check_head_shape(&head, data, size);
    run_helpers(head.reason, head.reason_len);
    for (size_t i = 0; i < head.num_headers; i++) {
      run_helpers(head.headers[i].value, head.headers[i].value_len);
      run_helpers(head.headers[i].name, head.headers[i].name_len);
    }
    body = data + head.ret;
    body_len = size - (size_t)head.ret;
  } else {
    /* No head: treat the whole input as a body, so that the decoder is fuzzed directly. */
    run_helpers((const char *)data, size);
    body = data;
    body_len = size;
  }

  split = size > 0 ? ((size_t)data[0] * 257 + (size_t)data[size / 2]) % (body_len + 1) : 0;
  max_trailer = size > 1 && (data[1] & 1) ? data[1] : 0;
  decode_split(body, body_len, body_len, max_trailer, &one);
  decode_split(body, body_len, split, max_trailer, &two);

  if (one.ret >= 0)
    CHECK(two.ret >= 0);
  else
    CHECK(two.ret == one.ret);
  if (one.ret != TERN__PARSE_ERROR) {
    CHECK(one.out_len == two.out_len && one.left_len == two.left_len);
    CHECK(memcmp(one.out, two.out, one.out_len + one.left_len) == 0);
    if (one.ret >= 0) {
      /* The leftover is the input's tail, untouched. */
      CHECK((size_t)one.ret == one.left_len);
      CHECK(memcmp(one.out + one.out_len, body + body_len - one.left_len, one.left_len) == 0);
    }
  }
  free(one.out);
  free(two.out);
  return 0;
}
