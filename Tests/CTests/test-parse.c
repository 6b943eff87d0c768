/*
 * test-parse.c — unit tests for http1_parse.c: the response head parser, the chunked decoder and
 * the field-value helpers. No sockets: every case works on byte strings.
 *
 * Every input is copied so that it ends exactly where a PROT_NONE page begins (picohttpparser's
 * test.c does the same), so a read one byte past the length the parser was given crashes the
 * test instead of passing by luck. Valid inputs are also fed as every prefix, and with the
 * last_len hint a real sequence of short reads would give.
 */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS and sysconf under -std=c11 on glibc */

#include "http1_parse.h"
#include "task.h"

#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_ANONYMOUS
#  define MAP_ANONYMOUS MAP_ANON
#endif

/* ------------------------------------------------------------------------------------------ */
/* Guard-page placement                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Large enough for the biggest input below (the default-trailer-limit case, about 70 KB). */
#define GUARD_REGION (256 * 1024)

static unsigned char *guard_base; /* GUARD_REGION readable bytes, then one PROT_NONE page */

/* Copies src[0, len) so that it ends at the guard page and returns the copy. Each call reuses
 * the same region, so views from an earlier call are invalid afterwards. */
static char *guard_place(const void *src, size_t len) {
  if (guard_base == NULL) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *m;
    ASSERT(GUARD_REGION % page == 0);
    m = mmap(NULL, GUARD_REGION + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT(m != MAP_FAILED);
    guard_base = m;
    ASSERT_EQ(mprotect(guard_base + GUARD_REGION, page, PROT_NONE), 0);
  }
  ASSERT(len <= GUARD_REGION);
  if (len != 0) memcpy(guard_base + GUARD_REGION - len, src, len);
  return (char *)guard_base + GUARD_REGION - len;
}

/* ------------------------------------------------------------------------------------------ */
/* Head parser helpers                                                                        */
/* ------------------------------------------------------------------------------------------ */

#define MAX_HEADERS 128

typedef struct {
  int ret;
  int minor;
  int status;
  const char *reason;
  size_t reason_len;
  tern__header_t headers[MAX_HEADERS];
  size_t num_headers;
} result_t;

/* A string literal and its length, embedded NULs included. */
#define S(lit) (lit), (sizeof(lit) - 1)

static int parse_hint(const char *s, size_t len, size_t last_len, size_t cap, result_t *r) {
  const char *b = guard_place(s, len);

  memset(r, 0, sizeof *r);
  r->minor = -1;
  r->status = -1;
  r->num_headers = cap;
  r->ret = tern__parse_response(b, len, last_len, &r->minor, &r->status, &r->reason, &r->reason_len,
                                cap == 0 ? NULL : r->headers, &r->num_headers);
  return r->ret;
}

static int parse(const char *s, size_t len, result_t *r) {
  return parse_hint(s, len, 0, MAX_HEADERS, r);
}

static int parse_ret(const char *s, size_t len) {
  result_t r;
  return parse(s, len, &r);
}

#define ASSERT_VIEW_EQ(ptr, len, lit)                                                              \
  do {                                                                                             \
    const char *p_ = (ptr);                                                                        \
    size_t l_ = (len);                                                                             \
    if (l_ != sizeof(lit) - 1 || (l_ != 0 && memcmp(p_, (lit), l_) != 0))                          \
      TEST_FAIL_("assertion failed: %s == \"%s\" (got \"%.*s\")", #ptr, (lit), (int)l_,            \
                 p_ ? p_ : "");                                                                    \
  } while (0)

#define ASSERT_HEADER(r, i, name_lit, value_lit)                                                   \
  do {                                                                                             \
    ASSERT_VIEW_EQ((r).headers[i].name, (r).headers[i].name_len, name_lit);                        \
    ASSERT_VIEW_EQ((r).headers[i].value, (r).headers[i].value_len, value_lit);                     \
  } while (0)

#define ASSERT_PARSE_ERROR(lit) ASSERT_EQ(parse_ret(S(lit)), TERN__PARSE_ERROR)

/* Valid inputs for the prefix and short-read tests. `head` is the head length; anything after it
 * is the start of a body, which the parser must leave alone. */
typedef struct {
  const char *s;
  size_t len;
  size_t head;
} valid_t;

#define V(lit, body_len)                                                                           \
  { (lit), sizeof(lit) - 1, sizeof(lit) - 1 - (body_len) }

static const valid_t valid_inputs[] = {
  V("HTTP/1.1 200 OK\r\n\r\n", 0),
  V("HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n", 0),
  V("HTTP/1.1 200 OK\r\n"
    "Server: nginx/1.25.3\r\n"
    "Date: Tue, 21 Nov 2023 12:00:00 GMT\r\n"
    "Content-Type: text/html; charset=utf-8\r\n"
    "Content-Length: 5\r\n"
    "Connection: keep-alive\r\n"
    "Keep-Alive: timeout=5, max=100\r\n"
    "ETag: \"655c9c2a-5\"\r\n"
    "Accept-Ranges: bytes\r\n"
    "\r\n"
    "hello",
    5),
  V("HTTP/1.1 200 OK\nServer: x\nA: b\n\n", 0),
  V("HTTP/1.1 204 No Content\r\nA: b\n\r\n", 0),
  V("HTTP/1.1 200 \r\n\r\n", 0),
  V("HTTP/1.1 200\r\n\r\n", 0),
  V("HTTP/1.1 200\n\n", 0),
  V("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n", 19),
  V("HTTP/1.1 999 \xc3\xa9t\xe9\r\nX-Name: caf\xc3\xa9 \x80\xff\r\n\r\n", 0),
  V("HTTP/1.1 200 OK\r\nA:   b c \t\r\nB:\r\nC: \t \r\nD: a\tlong\tvalue\twith\ttabs\r\n\r\n", 0),
  V("HTTP/1.1 301 Moved Permanently\r\n"
    "Location: https://example.com/a/very/long/path/that/spans/several/words?q=1&r=2\r\n"
    "Set-Cookie: id=a3fWa; Expires=Thu, 21 Oct 2021 07:28:00 GMT; Secure; HttpOnly\r\n"
    "Transfer-Encoding: chunked\r\n"
    "\r\n"
    "5\r\nhello\r\n0\r\n\r\n",
    15),
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------------------------ */
/* Head parser: valid input                                                                   */
/* ------------------------------------------------------------------------------------------ */

TEST(parse_status_line_basic) {
  result_t r;

  ASSERT_EQ(parse(S("HTTP/1.1 200 OK\r\n\r\n"), &r), 19);
  ASSERT_EQ(r.minor, 1);
  ASSERT_EQ(r.status, 200);
  ASSERT_VIEW_EQ(r.reason, r.reason_len, "OK");
  ASSERT_EQ(r.num_headers, 0);
}

TEST(parse_status_line_http10) {
  result_t r;

  ASSERT_EQ(parse(S("HTTP/1.0 404 Not Found\r\n\r\n"), &r), 26);
  ASSERT_EQ(r.minor, 0);
  ASSERT_EQ(r.status, 404);
  ASSERT_VIEW_EQ(r.reason, r.reason_len, "Not Found");
}

TEST(parse_status_line_empty_reason) {
  result_t r;

  ASSERT_EQ(parse(S("HTTP/1.1 200 \r\n\r\n"), &r), 17);
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(r.reason_len, 0);
  ASSERT_EQ(parse(S("HTTP/1.1 200   \r\n\r\n"), &r), 19);
  ASSERT_EQ(r.reason_len, 0);
}

TEST(parse_status_line_missing_reason) {
  result_t r;

  ASSERT_EQ(parse(S("HTTP/1.1 200\r\n\r\n"), &r), 16);
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(r.reason_len, 0);
  ASSERT_EQ(parse(S("HTTP/1.1 503\nRetry-After: 1\n\n"), &r), 29);
  ASSERT_EQ(r.status, 503);
  ASSERT_EQ(r.reason_len, 0);
  ASSERT_EQ(r.num_headers, 1);
}

TEST(parse_status_line_reason_trimmed) {
  result_t r;

  /* Extra whitespace around the reason is not part of it. */
  ASSERT_EQ(parse(S("HTTP/1.1 200  \tAll good here \t\r\n\r\n"), &r), 34);
  ASSERT_VIEW_EQ(r.reason, r.reason_len, "All good here");
}

TEST(parse_status_line_codes) {
  result_t r;

  ASSERT_EQ(parse(S("HTTP/1.1 100 Continue\r\n\r\n"), &r), 25);
  ASSERT_EQ(r.status, 100);
  ASSERT_EQ(parse(S("HTTP/1.1 999 X\r\n\r\n"), &r), 18);
  ASSERT_EQ(r.status, 999);
  ASSERT_EQ(parse(S("HTTP/1.1 599 X\r\n\r\n"), &r), 18);
  ASSERT_EQ(r.status, 599);
  ASSERT_EQ(parse(S("HTTP/1.1 101 Switching Protocols\r\n\r\n"), &r), 36);
  ASSERT_EQ(r.status, 101);
}

TEST(parse_headers_basic) {
  result_t r;
  const valid_t *v = &valid_inputs[2];

  ASSERT_EQ(parse(v->s, v->len, &r), (int)v->head);
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(r.num_headers, 8);
  ASSERT_HEADER(r, 0, "Server", "nginx/1.25.3");
  ASSERT_HEADER(r, 1, "Date", "Tue, 21 Nov 2023 12:00:00 GMT");
  ASSERT_HEADER(r, 2, "Content-Type", "text/html; charset=utf-8");
  ASSERT_HEADER(r, 3, "Content-Length", "5");
  ASSERT_HEADER(r, 4, "Connection", "keep-alive");
  ASSERT_HEADER(r, 5, "Keep-Alive", "timeout=5, max=100");
  ASSERT_HEADER(r, 6, "ETag", "\"655c9c2a-5\"");
  ASSERT_HEADER(r, 7, "Accept-Ranges", "bytes");
}

TEST(parse_headers_token_names) {
  result_t r;

  /* Every tchar is allowed in a name. */
  ASSERT_EQ(parse(S("HTTP/1.1 200 OK\r\n!#$%&'*+-.^_`|~09azAZ: v\r\n\r\n"), &r), 45);
  ASSERT_EQ(r.num_headers, 1);
  ASSERT_HEADER(r, 0, "!#$%&'*+-.^_`|~09azAZ", "v");
}

TEST(parse_bare_lf) {
  result_t r;

  ASSERT_EQ(parse(S("HTTP/1.1 200 OK\nServer: x\nA: b\n\n"), &r), 32);
  ASSERT_VIEW_EQ(r.reason, r.reason_len, "OK");
  ASSERT_EQ(r.num_headers, 2);
  ASSERT_HEADER(r, 0, "Server", "x");
  ASSERT_HEADER(r, 1, "A", "b");

  /* CRLF and LF mixed, and an LF-only end of head after CRLF lines. */
  ASSERT_EQ(parse(S("HTTP/1.1 204 No Content\r\nA: b\n\r\n"), &r), 32);
  ASSERT_EQ(r.num_headers, 1);
  ASSERT_HEADER(r, 0, "A", "b");
  ASSERT_EQ(parse(S("HTTP/1.1 200 OK\r\nA: b\r\n\n"), &r), 24);
  ASSERT_EQ(r.num_headers, 1);
}

TEST(parse_obs_text_values) {
  result_t r;

  ASSERT_EQ(parse(S("HTTP/1.1 200 \xc3\xa9t\xe9\r\nX-Name: caf\xc3\xa9 \x80\xff\r\n\r\n"), &r), 39);
  ASSERT_VIEW_EQ(r.reason, r.reason_len, "\xc3\xa9t\xe9");
  ASSERT_EQ(r.num_headers, 1);
  ASSERT_HEADER(r, 0, "X-Name", "caf\xc3\xa9 \x80\xff");
  /* A long obs-text value goes through the word-at-a-time scan. */
  ASSERT_EQ(parse(S("HTTP/1.1 200 OK\r\nX: \xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\x80\x81\x82"
                    "\x83\x84\x85\x86\x87\x88\r\n\r\n"),
                  &r),
            43);
  ASSERT_EQ(r.headers[0].value_len, 19);
}

TEST(parse_value_whitespace_trimmed) {
  result_t r;

  ASSERT_EQ(parse(S("HTTP/1.1 200 OK\r\nA:   b c \t\r\nB:\r\nC: \t \r\n"
                    "D:\ta\tlong\tvalue\twith\ttabs\t\r\n\r\n"),
                  &r),
            70);
  ASSERT_EQ(r.num_headers, 4);
  ASSERT_HEADER(r, 0, "A", "b c");
  ASSERT_HEADER(r, 1, "B", "");
  ASSERT_HEADER(r, 2, "C", "");
  ASSERT_HEADER(r, 3, "D", "a\tlong\tvalue\twith\ttabs");
}

TEST(parse_many_headers) {
  char buf[8192];
  size_t len = 0;
  result_t r;
  int i;

  len += (size_t)snprintf(buf + len, sizeof buf - len, "HTTP/1.1 200 OK\r\n");
  for (i = 0; i < 100; i++)
    len +=
        (size_t)snprintf(buf + len, sizeof buf - len, "X-Header-%03d: value number %d\r\n", i, i);
  len += (size_t)snprintf(buf + len, sizeof buf - len, "\r\n");
  ASSERT_LT(len, sizeof buf);

  ASSERT_EQ(parse(buf, len, &r), (int)len);
  ASSERT_EQ(r.num_headers, 100);
  for (i = 0; i < 100; i++) {
    char name[32], value[32];
    snprintf(name, sizeof name, "X-Header-%03d", i);
    snprintf(value, sizeof value, "value number %d", i);
    ASSERT_EQ(r.headers[i].name_len, strlen(name));
    ASSERT_MEM_EQ(r.headers[i].name, name, strlen(name));
    ASSERT_EQ(r.headers[i].value_len, strlen(value));
    ASSERT_MEM_EQ(r.headers[i].value, value, strlen(value));
  }

  /* Exactly enough room, then one slot short. */
  ASSERT_EQ(parse_hint(buf, len, 0, 100, &r), (int)len);
  ASSERT_EQ(r.num_headers, 100);
  ASSERT_EQ(parse_hint(buf, len, 0, 99, &r), TERN__PARSE_TOO_MANY);
  ASSERT_EQ(r.num_headers, 99);
  /* Every prefix is incomplete, even with many lines. */
  for (size_t k = 0; k < len; k++)
    ASSERT_EQ(parse_hint(buf, k, 0, 100, &r), TERN__PARSE_INCOMPLETE);
}

TEST(parse_body_left_alone) {
  result_t r;

  /* The return value is the head length; what follows is never looked at. */
  ASSERT_EQ(parse(S("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n\0\r\n\x01"), &r), 38);
  ASSERT_EQ(parse(S("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"), &r), 25);
  ASSERT_EQ(r.status, 100);
}

TEST(parse_guard_page) {
  /* guard_place() puts every input right before the PROT_NONE page; this spells the check
     * out for each valid input and each of its prefixes, with and without a body after it. */
  for (size_t i = 0; i < COUNT(valid_inputs); i++) {
    const valid_t *v = &valid_inputs[i];
    result_t r;
    ASSERT_EQ(parse(v->s, v->head, &r), (int)v->head);
    ASSERT(r.reason >= (const char *)guard_base);
    ASSERT(r.reason + r.reason_len <= (const char *)guard_base + GUARD_REGION);
    ASSERT_EQ(parse(v->s, v->len, &r), (int)v->head);
  }
}

/* ------------------------------------------------------------------------------------------ */
/* Head parser: partial input                                                                 */
/* ------------------------------------------------------------------------------------------ */

TEST(parse_every_prefix_incomplete) {
  for (size_t i = 0; i < COUNT(valid_inputs); i++) {
    const valid_t *v = &valid_inputs[i];
    for (size_t k = 0; k < v->head; k++) ASSERT_EQ(parse_ret(v->s, k), TERN__PARSE_INCOMPLETE);
    for (size_t k = v->head; k <= v->len; k++) ASSERT_EQ(parse_ret(v->s, k), (int)v->head);
  }
}

TEST(parse_short_reads_with_last_len) {
  static const size_t steps[] = { 1, 2, 3, 5, 7, 8, 13, 64, 4096 };

  /* The sequence of calls a connection makes as reads trickle in, each passing the previous
     * length as the hint. */
  for (size_t i = 0; i < COUNT(valid_inputs); i++) {
    const valid_t *v = &valid_inputs[i];
    for (size_t s = 0; s < COUNT(steps); s++) {
      size_t len = 0, last = 0;
      for (;;) {
        result_t r;
        len = len + steps[s] < v->len ? len + steps[s] : v->len;
        parse_hint(v->s, len, last, MAX_HEADERS, &r);
        if (len < v->head) {
          ASSERT_EQ(r.ret, TERN__PARSE_INCOMPLETE);
        } else {
          result_t once;
          ASSERT_EQ(r.ret, (int)v->head);
          /* The hinted parse finds what a parse from scratch finds. */
          parse(v->s, v->len, &once);
          ASSERT_EQ(r.status, once.status);
          ASSERT_EQ(r.num_headers, once.num_headers);
          break;
        }
        last = len;
      }
    }
  }
}

TEST(parse_every_last_len_pair) {
  /* Every (last_len, len) pair with last_len < len: the terminating empty line can straddle
     * the hint at any offset. */
  for (size_t i = 0; i < COUNT(valid_inputs); i++) {
    const valid_t *v = &valid_inputs[i];
    for (size_t last = 1; last < v->head; last++)
      for (size_t len = last; len <= v->len; len++) {
        result_t r;
        parse_hint(v->s, len, last, MAX_HEADERS, &r);
        ASSERT_EQ(r.ret, len < v->head ? TERN__PARSE_INCOMPLETE : (int)v->head);
      }
  }
}

TEST(parse_last_len_past_len_ignored) {
  result_t r;

  /* A hint beyond the buffer cannot be right; the parser falls back to a full parse. */
  ASSERT_EQ(parse_hint(S("HTTP/1.1 200 OK\r\n\r\n"), 100, MAX_HEADERS, &r), 19);
  ASSERT_EQ(parse_hint(S("HTTP/1.1 200 OK\r\n\r\n"), 19, MAX_HEADERS, &r), TERN__PARSE_INCOMPLETE);
}

TEST(parse_outputs_untouched_unless_complete) {
  result_t r;

  ASSERT_EQ(parse(S("HTTP/1.1 200 OK\r\nA: b\r\n"), &r), TERN__PARSE_INCOMPLETE);
  ASSERT_EQ(r.num_headers, MAX_HEADERS);
  ASSERT_EQ(r.status, -1);
  ASSERT_EQ(r.minor, -1);
  ASSERT_EQ(parse(S("HTTP/1.1 200 OK\r\nA : b\r\n\r\n"), &r), TERN__PARSE_ERROR);
  ASSERT_EQ(r.num_headers, MAX_HEADERS);
  ASSERT_EQ(r.status, -1);
}

TEST(parse_empty_input) {
  result_t r;

  ASSERT_EQ(parse_hint(NULL, 0, 0, MAX_HEADERS, &r), TERN__PARSE_INCOMPLETE);
}

/* ------------------------------------------------------------------------------------------ */
/* Head parser: malformed input                                                               */
/* ------------------------------------------------------------------------------------------ */

TEST(parse_reject_bad_version) {
  ASSERT_PARSE_ERROR("HTTP/1.2 200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.9 200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/2.0 200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/0.9 200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1 200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.10 200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("http/1.1 200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTPS/1.1 200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("ICY 200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("\r\nHTTP/1.1 200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("\nHTTP/1.1 200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR(" HTTP/1.1 200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("\0HTTP/1.1 200 OK\r\n\r\n");
}

TEST(parse_reject_bad_status) {
  ASSERT_PARSE_ERROR("HTTP/1.1 099 X\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 000 X\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 20 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 20\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 2000 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 2x0 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 -20 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 +20 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 \r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1  200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1\t200 OK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200\tOK\r\n\r\n");
  ASSERT_PARSE_ERROR(
      "HTTP/1.1 \x00"
      "200 OK\r\n\r\n");
}

TEST(parse_reject_bad_reason) {
  ASSERT_PARSE_ERROR("HTTP/1.1 200 O\0K\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 O\x01K\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 O\x7fK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 O\x1bK\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 A long reason phrase\0with a NUL\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\rX\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200\r\r\n\r\n");
}

TEST(parse_reject_nul) {
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA\0: b\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\n\0A: b\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: \0\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\0c\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: 0123456789abcdef\0ghijklmnop\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\r\n\0\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\r\n\r\0");
}

TEST(parse_reject_control_in_value) {
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\x01\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\x7f\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\x1b[0m\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\x0b\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\x0c\r\n\r\n");
  ASSERT_PARSE_ERROR(
      "HTTP/1.1 200 OK\r\nA: 01234567\x1f"
      "89abcdef\r\n\r\n");
  ASSERT_PARSE_ERROR(
      "HTTP/1.1 200 OK\r\nA: 01234567\t89abcd\x7f"
      "ef\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\r\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\r\n\r\r");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\r\n\rX");
}

TEST(parse_reject_space_before_colon) {
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA : b\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA\t: b\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n");
}

TEST(parse_reject_obs_fold) {
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: b\r\n\tc\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\nA: b\n c\n\n");
  /* Whitespace between the status line and the first field. */
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\n A: b\r\n\r\n");
}

TEST(parse_reject_bad_name) {
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA(b: c\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA/b: c\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA\"b: c\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\n@: c\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\n{a}: c\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA\x80: c\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA\x01: c\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\n: c\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nNoColon\r\n\r\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nNoColon\n\n");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nHTTP/1.1 200 OK\r\n\r\n");
}

/* Every byte value at every position of a 40-byte name and value, so that each scan (16 bytes
 * at a time where SSE2 is there, words or bytes elsewhere, and each tail) meets it: a name
 * takes token bytes only (RFC 9110 tchar), a value anything but controls other than HTAB. */
TEST(parse_every_byte_at_every_position) {
  enum { N = 40 };
  char head[128];
  const size_t prefix = sizeof "HTTP/1.1 200 OK\r\n" - 1;
  for (int c = 0; c < 256; c++) {
    for (size_t at = 0; at < N; at++) {
      result_t r;
      /* In the name ("aaa...: v"); a colon would only end it early, and a CR or LF first
       * would make the line the head's end. */
      if (c != ':' && !(at == 0 && (c == '\r' || c == '\n'))) {
        memcpy(head, "HTTP/1.1 200 OK\r\n", prefix);
        memset(head + prefix, 'a', N);
        head[prefix + at] = (char)c;
        memcpy(head + prefix + N, ": v\r\n\r\n", 7);
        int ret = parse(head, prefix + N + 7, &r);
        if (tern__is_tchar((unsigned char)c)) {
          ASSERT_EQ(ret, (int)(prefix + N + 7));
          ASSERT_EQ(r.headers[0].name_len, N);
        } else if (ret != TERN__PARSE_ERROR) {
          TEST_FAIL_("name byte 0x%02x at %zu: got %d, want an error", c, at, ret);
        }
      }
      /* In the value, inside it (its ends are trimmed of whitespace); CR and LF end it. */
      if (at == 0 || at == N - 1 || c == '\r' || c == '\n') continue;
      memcpy(head, "HTTP/1.1 200 OK\r\nX: ", prefix + 3);
      memset(head + prefix + 3, 'v', N);
      head[prefix + 3 + at] = (char)c;
      memcpy(head + prefix + 3 + N, "\r\n\r\n", 4);
      int ret = parse(head, prefix + 3 + N + 4, &r);
      int control = (c < 0x20 && c != '\t') || c == 0x7f;
      if (control) {
        if (ret != TERN__PARSE_ERROR)
          TEST_FAIL_("value byte 0x%02x at %zu: got %d, want an error", c, at, ret);
      } else {
        ASSERT_EQ(ret, (int)(prefix + 3 + N + 4));
        ASSERT_EQ(r.headers[0].value_len, N);
        ASSERT_EQ((unsigned char)r.headers[0].value[at], (unsigned char)c);
      }
    }
  }
}

TEST(parse_reject_early) {
  /* Errors in the bytes that have arrived are reported without waiting for the empty line. */
  ASSERT_PARSE_ERROR("X");
  ASSERT_PARSE_ERROR("HTTP/2");
  ASSERT_PARSE_ERROR("HTTP/1.1 2x");
  ASSERT_PARSE_ERROR("<html>");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nBad Name");
  ASSERT_PARSE_ERROR("HTTP/1.1 200 OK\r\nA: \x01");
}

TEST(parse_too_many_headers) {
  result_t r;
  static const char in[] = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";

  ASSERT_EQ(parse_hint(in, sizeof in - 1, 0, 2, &r), TERN__PARSE_TOO_MANY);
  ASSERT_EQ(r.num_headers, 2); /* unchanged on failure */
  ASSERT_EQ(parse_hint(in, sizeof in - 1, 0, 1, &r), TERN__PARSE_TOO_MANY);
  ASSERT_EQ(parse_hint(in, sizeof in - 1, 0, 0, &r), TERN__PARSE_TOO_MANY);
  ASSERT_EQ(parse_hint(in, sizeof in - 1, 0, 3, &r), (int)sizeof in - 1);
  ASSERT_EQ(r.num_headers, 3);
  ASSERT_HEADER(r, 2, "C", "3");
  /* No fields need no array at all. */
  ASSERT_EQ(parse_hint(S("HTTP/1.1 200 OK\r\n\r\n"), 0, 0, &r), 19);
  ASSERT_EQ(r.num_headers, 0);
  /* Too many is reported with the hint as well. */
  ASSERT_EQ(parse_hint(in, sizeof in - 1, 20, 2, &r), TERN__PARSE_TOO_MANY);
}

/* ------------------------------------------------------------------------------------------ */
/* Chunked decoder helpers                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
  ssize_t ret; /* the last call's return */
  char out[128 * 1024];
  size_t out_len; /* decoded bytes, all calls together */
  char left[1024];
  size_t left_len; /* bytes after the body: the final call's leftover plus later pieces */
  uint64_t bytes_left_in_chunk;
} chunked_result_t;

static chunked_result_t cres; /* static: too large for a test's stack under ASan */
static chunked_result_t cres_ref;

/*
 * Feeds in[0, len) to a fresh decoder in pieces ending at splits[0] < splits[1] < ... < len,
 * each piece placed at the guard page, and gathers the decoded bytes and leftover in *res. Stops
 * at the first error. Pieces after the end of the body are leftover, as a connection would see.
 */
static void decode_pieces(const char *in, size_t len, const size_t *splits, size_t nsplits,
                          size_t max_trailer, chunked_result_t *res) {
  tern__chunked_t dec;
  size_t start = 0;

  tern__chunked_init(&dec);
  dec.max_trailer_bytes = max_trailer;
  res->ret = TERN__PARSE_INCOMPLETE;
  res->out_len = 0;
  res->left_len = 0;
  for (size_t i = 0; i <= nsplits; i++) {
    size_t stop = i < nsplits ? splits[i] : len, n = stop - start;
    char *b = guard_place(in + start, n);
    size_t decoded = n;

    if (res->ret >= 0) {
      ASSERT(res->left_len + n <= sizeof res->left);
      memcpy(res->left + res->left_len, in + start, n);
      res->left_len += n;
      start = stop;
      continue;
    }
    res->ret = tern__decode_chunked(&dec, b, &decoded);
    ASSERT_LE(decoded, n);
    ASSERT(res->out_len + decoded <= sizeof res->out);
    memcpy(res->out + res->out_len, b, decoded);
    res->out_len += decoded;
    if (res->ret == TERN__PARSE_ERROR) break;
    if (res->ret >= 0) {
      ASSERT_LE((size_t)res->ret + decoded, n);
      ASSERT(res->left_len + (size_t)res->ret <= sizeof res->left);
      memcpy(res->left, b + decoded, (size_t)res->ret);
      res->left_len = (size_t)res->ret;
    }
    start = stop;
  }
  res->bytes_left_in_chunk = dec.bytes_left_in_chunk;
}

static void decode_once(const char *in, size_t len, size_t max_trailer, chunked_result_t *res) {
  decode_pieces(in, len, NULL, 0, max_trailer, res);
}

/* Compares a split run with the one-shot reference in cres_ref. A split run may finish the body
 * at the end of a piece, so its last return is then a smaller leftover count; the leftover bytes
 * themselves must match. */
static void check_same_as_ref(const chunked_result_t *res) {
  if (cres_ref.ret >= 0)
    ASSERT_GE(res->ret, 0);
  else
    ASSERT_EQ(res->ret, cres_ref.ret);
  if (res->ret == TERN__PARSE_ERROR)
    return; /* how much was decoded before the error depends on the split */
  ASSERT_EQ(res->out_len, cres_ref.out_len);
  ASSERT_MEM_EQ(res->out, cres_ref.out, res->out_len);
  ASSERT_EQ(res->left_len, cres_ref.left_len);
  ASSERT_MEM_EQ(res->left, cres_ref.left, res->left_len);
}

/*
 * Decodes `in` in one piece, one byte at a time and split in two at every offset, and checks
 * every run against the expected result. expect_ret >= 0 is the leftover count and the leftover
 * must equal the last expect_ret bytes of the input.
 */
static void check_chunked(const char *in, size_t len, const char *expect, size_t expect_len,
                          ssize_t expect_ret) {
  static size_t splits[128 * 1024];

  decode_once(in, len, 0, &cres_ref);
  ASSERT_EQ(cres_ref.ret, expect_ret);
  if (expect_ret != TERN__PARSE_ERROR) {
    ASSERT_EQ(cres_ref.out_len, expect_len);
    ASSERT_MEM_EQ(cres_ref.out, expect, expect_len);
  }
  if (expect_ret >= 0) {
    ASSERT_EQ(cres_ref.left_len, (size_t)expect_ret);
    ASSERT_MEM_EQ(cres_ref.left, in + len - (size_t)expect_ret, (size_t)expect_ret);
  }

  /* One byte per call. */
  ASSERT(len <= COUNT(splits));
  for (size_t i = 1; i < len; i++) splits[i - 1] = i;
  decode_pieces(in, len, splits, len > 0 ? len - 1 : 0, 0, &cres);
  check_same_as_ref(&cres);

  /* Every two-way split, empty pieces included. */
  for (size_t i = 0; i <= len; i++) {
    decode_pieces(in, len, &i, 1, 0, &cres);
    check_same_as_ref(&cres);
  }

  /* Every three-way split of short inputs. */
  if (len <= 64) {
    for (size_t i = 0; i <= len; i++)
      for (size_t j = i; j <= len; j++) {
        size_t two[2] = { i, j };
        decode_pieces(in, len, two, 2, 0, &cres);
        check_same_as_ref(&cres);
      }
  }
}

#define CHECK_CHUNKED(in_lit, out_lit, ret) check_chunked(S(in_lit), S(out_lit), (ret))

static ssize_t decode_ret(const char *in, size_t len, size_t max_trailer) {
  decode_once(in, len, max_trailer, &cres);
  return cres.ret;
}

#define ASSERT_CHUNKED_ERROR(lit) ASSERT_EQ(decode_ret(S(lit), 0), TERN__PARSE_ERROR)

/* ------------------------------------------------------------------------------------------ */
/* Chunked decoder                                                                            */
/* ------------------------------------------------------------------------------------------ */

TEST(chunked_single) { CHECK_CHUNKED("5\r\nhello\r\n0\r\n\r\n", "hello", 0); }

TEST(chunked_multiple) {
  CHECK_CHUNKED("5\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\n\r\n", "hello world!", 0);
  CHECK_CHUNKED("1\r\na\r\n1\r\nb\r\n1\r\nc\r\n1\r\nd\r\n0\r\n\r\n", "abcd", 0);
}

TEST(chunked_empty_body) {
  CHECK_CHUNKED("0\r\n\r\n", "", 0);
  CHECK_CHUNKED("0\n\n", "", 0);
}

TEST(chunked_hex_sizes) {
  CHECK_CHUNKED("A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n", "0123456789abcdefghij", 0);
  CHECK_CHUNKED("1f\r\n0123456789012345678901234567890\r\n0\r\n\r\n",
                "0123456789012345678901234567890", 0);
  CHECK_CHUNKED("1F\r\n0123456789012345678901234567890\r\n0\r\n\r\n",
                "0123456789012345678901234567890", 0);
  CHECK_CHUNKED("0000000000000000000000000005\r\nhello\r\n000\r\n\r\n", "hello", 0);
}

TEST(chunked_binary_data) {
  /* Chunk data is opaque: CR, LF, NUL and digits inside it are data. */
  CHECK_CHUNKED("8\r\n\r\n0\r\n\0\r\n\r\n0\r\n\r\n", "\r\n0\r\n\0\r\n", 0);
}

TEST(chunked_extensions) {
  CHECK_CHUNKED("5;name=value\r\nhello\r\n0\r\n\r\n", "hello", 0);
  CHECK_CHUNKED("5;a;b=c;d=\"q;uo\\\"ted\"\r\nhello\r\n0;last\r\n\r\n", "hello", 0);
  CHECK_CHUNKED("5 ;a=b\r\nhello\r\n0 ; x\r\n\r\n", "hello", 0);
  CHECK_CHUNKED("5\t;a=\xff\x80\r\nhello\r\n0\r\n\r\n", "hello", 0);
  CHECK_CHUNKED("5  \r\nhello\r\n0\r\n\r\n", "hello", 0);
}

TEST(chunked_trailers) {
  CHECK_CHUNKED("5\r\nhello\r\n0\r\nExpires: never\r\nX-Checksum: abc\r\n\r\n", "hello", 0);
  CHECK_CHUNKED("0\r\nA:\r\nB: \t\xff\r\n\r\n", "", 0);
  CHECK_CHUNKED("5\nhello\n0\nX: y\nZ: w\r\n\n", "hello", 0);
}

TEST(chunked_bare_lf) {
  CHECK_CHUNKED("5\nhello\n0\n\n", "hello", 0);
  CHECK_CHUNKED("5\r\nhello\n3;x\nabc\r\n0\n\r\n", "helloabc", 0);
}

TEST(chunked_leftover) {
  static const char next[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

  /* The pipelined next response stays, undecoded, right after the decoded body. */
  CHECK_CHUNKED("5\r\nhello\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "hello",
                (ssize_t)(sizeof next - 1));
  CHECK_CHUNKED("0\r\n\r\nX", "", 1);
  CHECK_CHUNKED("1\r\nA\r\n0\r\nT: t\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "A", 15);

  /* A long leftover moved down over itself. */
  {
    char in[600];
    size_t len;
    memcpy(in, "1\r\nA\r\n0\r\n\r\n", 11);
    for (size_t i = 0; i < 500; i++) in[11 + i] = (char)('a' + i % 26);
    len = 511;
    check_chunked(in, len, "A", 1, 500);
  }
}

TEST(chunked_done_then_more) {
  tern__chunked_t dec;
  char buf[32];
  size_t len;

  tern__chunked_init(&dec);
  memcpy(buf, "0\r\n\r\nab", 7);
  len = 7;
  ASSERT_EQ(tern__decode_chunked(&dec, buf, &len), 2);
  ASSERT_EQ(len, 0);
  ASSERT_MEM_EQ(buf, "ab", 2);
  /* Once done, everything given is leftover. */
  memcpy(buf, "xyz", 3);
  len = 3;
  ASSERT_EQ(tern__decode_chunked(&dec, buf, &len), 3);
  ASSERT_EQ(len, 0);
  ASSERT_MEM_EQ(buf, "xyz", 3);
}

TEST(chunked_incomplete) {
  CHECK_CHUNKED("5\r\nhel", "hel", TERN__PARSE_INCOMPLETE);
  ASSERT_EQ(cres_ref.bytes_left_in_chunk, 2);
  CHECK_CHUNKED("5\r\nhello", "hello", TERN__PARSE_INCOMPLETE);
  ASSERT_EQ(cres_ref.bytes_left_in_chunk, 0);
  CHECK_CHUNKED("5\r\nhello\r\n0\r\n", "hello", TERN__PARSE_INCOMPLETE);
  CHECK_CHUNKED("5\r\nhello\r\n0\r\nX: y\r\n", "hello", TERN__PARSE_INCOMPLETE);
  CHECK_CHUNKED("5\r\nhello\r\n0\r\n\r", "hello", TERN__PARSE_INCOMPLETE);
  CHECK_CHUNKED("5;ext", "", TERN__PARSE_INCOMPLETE);
  CHECK_CHUNKED("", "", TERN__PARSE_INCOMPLETE);

  {
    tern__chunked_t dec;
    size_t len = 0;
    tern__chunked_init(&dec);
    ASSERT_EQ(tern__decode_chunked(&dec, NULL, &len), TERN__PARSE_INCOMPLETE);
    ASSERT_EQ(len, 0);
  }
}

TEST(chunked_split_every_byte) {
  static const char big_head[] = "4000;big\r\n";
  static char in[20000];
  static char expect[16384];
  size_t len = 0;

  CHECK_CHUNKED("5\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\n\r\n", "hello world!", 0);
  CHECK_CHUNKED("5;a=b\r\nhello\r\n0;c\r\nX: y\r\nZ: w\r\n\r\nNEXT", "hello", 4);
  CHECK_CHUNKED("3\nabc\n0\nX: y\n\nNEXT", "abc", 4);

  /* A 16 KiB chunk followed by small ones, split at every byte. */
  memcpy(in, big_head, sizeof big_head - 1);
  len = sizeof big_head - 1;
  for (size_t i = 0; i < sizeof expect; i++) expect[i] = (char)(i * 7 + 3);
  memcpy(in + len, expect, sizeof expect);
  len += sizeof expect;
  memcpy(in + len, "\r\n0\r\n\r\n", 7);
  len += 7;
  check_chunked(in, len, expect, sizeof expect, 0);
}

TEST(chunked_split_with_head) {
  static const char in[] =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "7\r\nchunked\r\n0\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
  result_t r;
  int head;

  /* The head parser and the decoder together, as the connection code uses them. */
  head = parse(S(in), &r);
  ASSERT_EQ(head, 47);
  ASSERT_EQ(r.num_headers, 1);
  ASSERT(tern__is_chunked_final(r.headers[0].value, r.headers[0].value_len));
  check_chunked(in + head, sizeof in - 1 - (size_t)head, "chunked", 7, 27);
  ASSERT_EQ(parse(cres_ref.left, cres_ref.left_len, &r), 27);
  ASSERT_EQ(r.status, 204);
}

TEST(chunked_size_limits) {
  /* 2^63 - 1 is the largest size; 2^63 and beyond overflow. */
  ASSERT_EQ(decode_ret(S("7fffffffffffffff\r\n"), 0), TERN__PARSE_INCOMPLETE);
  ASSERT_UEQ(cres.bytes_left_in_chunk, UINT64_C(0x7fffffffffffffff));
  ASSERT_EQ(decode_ret(S("7FFFFFFFFFFFFFFF\r\nabc"), 0), TERN__PARSE_INCOMPLETE);
  ASSERT_UEQ(cres.bytes_left_in_chunk, UINT64_C(0x7fffffffffffffff) - 3);
  ASSERT_EQ(decode_ret(S("00000007fffffffffffffff\r\n"), 0), TERN__PARSE_INCOMPLETE);
  ASSERT_CHUNKED_ERROR("8000000000000000\r\n");
  ASSERT_CHUNKED_ERROR("10000000000000000\r\n");
  ASSERT_CHUNKED_ERROR("ffffffffffffffff\r\n");
  ASSERT_CHUNKED_ERROR("fffffffffffffffffffffffffffff");
}

TEST(chunked_error_bad_size) {
  ASSERT_CHUNKED_ERROR("g\r\n");
  ASSERT_CHUNKED_ERROR("\r\n");
  ASSERT_CHUNKED_ERROR("\n");
  ASSERT_CHUNKED_ERROR(";ext\r\n");
  ASSERT_CHUNKED_ERROR(" 5\r\n");
  ASSERT_CHUNKED_ERROR("0x5\r\n");
  ASSERT_CHUNKED_ERROR("5 5\r\n");
  ASSERT_CHUNKED_ERROR("-5\r\n");
  ASSERT_CHUNKED_ERROR("+5\r\n");
  ASSERT_CHUNKED_ERROR("5\rX");
  ASSERT_CHUNKED_ERROR("5;a\rX");
  ASSERT_CHUNKED_ERROR("5\0\r\n");
  ASSERT_CHUNKED_ERROR("5;a\x01\r\n");
  ASSERT_CHUNKED_ERROR("5;a\0\r\n");
  ASSERT_CHUNKED_ERROR("5;a\x7f\r\n");
  ASSERT_CHUNKED_ERROR("5\r\nhello\r\nz\r\n");
}

TEST(chunked_error_missing_crlf) {
  ASSERT_CHUNKED_ERROR("5\r\nhelloX\r\n0\r\n\r\n");
  ASSERT_CHUNKED_ERROR("5\r\nhello\rX");
  ASSERT_CHUNKED_ERROR("5\r\nhello0\r\n\r\n");
  ASSERT_CHUNKED_ERROR("5\r\nhello world\r\n");
  ASSERT_CHUNKED_ERROR("5\r\nhello\r\r\n");
  ASSERT_CHUNKED_ERROR("0\r\n\rX");
}

TEST(chunked_error_long_line) {
  static char in[8192];
  size_t n;

  /* The size line, CRLF included, may be 4096 bytes long and no longer. */
  memcpy(in, "5;", 2);
  memset(in + 2, 'a', 4092);
  memcpy(in + 4094, "\r\nhello\r\n0\r\n\r\n", 14);
  ASSERT_EQ(decode_ret(in, 4108, 0), 0);
  ASSERT_EQ(cres.out_len, 5);

  memcpy(in, "5;", 2);
  memset(in + 2, 'a', 4093);
  memcpy(in + 4095, "\r\nhello\r\n0\r\n\r\n", 14);
  ASSERT_EQ(decode_ret(in, 4109, 0), TERN__PARSE_ERROR);

  /* Without an end of line, the limit still applies. */
  memset(in, '0', 5000);
  ASSERT_EQ(decode_ret(in, 5000, 0), TERN__PARSE_ERROR);
  n = 4096;
  ASSERT_EQ(decode_ret(in, n, 0), TERN__PARSE_INCOMPLETE);
}

TEST(chunked_error_trailers) {
  ASSERT_CHUNKED_ERROR("0\r\nHTTP/1.1 200 OK\r\n\r\n");
  ASSERT_CHUNKED_ERROR("0\r\n: x\r\n\r\n");
  ASSERT_CHUNKED_ERROR("0\r\nA b: c\r\n\r\n");
  ASSERT_CHUNKED_ERROR("0\r\n A: b\r\n\r\n");
  ASSERT_CHUNKED_ERROR("0\r\nA: b\rX");
  ASSERT_CHUNKED_ERROR("0\r\nA: b\0\r\n\r\n");
  ASSERT_CHUNKED_ERROR("0\r\nA: b\x01\r\n\r\n");
  ASSERT_CHUNKED_ERROR("0\r\nA\0: b\r\n\r\n");
}

TEST(chunked_error_trailer_limit) {
  static char in[80000];
  size_t len;

  /* With max_trailer_bytes 16, a 16-byte field line fits and a 17-byte one does not. */
  ASSERT_EQ(decode_ret(S("0\r\nX: 12345678901\r\n\r\n"), 16), 0);
  ASSERT_EQ(decode_ret(S("0\r\nX: 123456789012\r\n\r\n"), 16), TERN__PARSE_ERROR);
  ASSERT_EQ(decode_ret(S("0\r\nX: 123\r\nY: 456\r\n\r\n"), 16), 0);
  ASSERT_EQ(decode_ret(S("0\r\nX: 123\r\nY: 4567\r\n\r\n"), 16), TERN__PARSE_ERROR);
  /* The final empty line does not count. */
  ASSERT_EQ(decode_ret(S("0\r\n\r\n"), 1), 0);
  /* Errors come as soon as the limit is passed, without waiting for the line's end. */
  ASSERT_EQ(decode_ret(S("0\r\nX: 123456789012345"), 16), TERN__PARSE_ERROR);

  /* The default limit (max_trailer_bytes 0) is 65536: one field line of exactly that size
     * fits, one a byte longer does not. */
  for (size_t extra = 0; extra < 2; extra++) {
    size_t k = 65531 + extra;
    memcpy(in, "0\r\nX: ", 6);
    memset(in + 6, 'v', k);
    memcpy(in + 6 + k, "\r\n\r\n", 4);
    len = 6 + k + 4;
    ASSERT_EQ(decode_ret(in, len, 0), extra == 0 ? 0 : TERN__PARSE_ERROR);
  }
}

TEST(chunked_error_is_sticky) {
  tern__chunked_t dec;
  char buf[32];
  size_t len;

  tern__chunked_init(&dec);
  memcpy(buf, "zz", 2);
  len = 2;
  ASSERT_EQ(tern__decode_chunked(&dec, buf, &len), TERN__PARSE_ERROR);
  memcpy(buf, "0\r\n\r\n", 5);
  len = 5;
  ASSERT_EQ(tern__decode_chunked(&dec, buf, &len), TERN__PARSE_ERROR);
  ASSERT_EQ(len, 0);
}

TEST(chunked_guard_page) {
  static const char in[] = "5\r\nhello\r\n0\r\n\r\n";
  tern__chunked_t dec;
  size_t len = sizeof in - 1;
  char *b = guard_place(in, len);

  /* In-place decoding never writes or reads past the given length. */
  tern__chunked_init(&dec);
  ASSERT_EQ(tern__decode_chunked(&dec, b, &len), 0);
  ASSERT_EQ(len, 5);
  ASSERT_MEM_EQ(b, "hello", 5);
  ASSERT_EQ(b + sizeof in - 1, (char *)guard_base + GUARD_REGION);
}

/* ------------------------------------------------------------------------------------------ */
/* Field-value helpers                                                                        */
/* ------------------------------------------------------------------------------------------ */

static int content_length(const char *s, size_t len, uint64_t *out) {
  return tern__parse_content_length(guard_place(s, len), len, out);
}

#define CL_OK(lit, expect)                                                                         \
  do {                                                                                             \
    uint64_t v_ = 12345;                                                                           \
    ASSERT_EQ(content_length(S(lit), &v_), 0);                                                     \
    ASSERT_UEQ(v_, (expect));                                                                      \
  } while (0)

#define CL_ERROR(lit)                                                                              \
  do {                                                                                             \
    uint64_t v_ = 12345;                                                                           \
    ASSERT_EQ(content_length(S(lit), &v_), -1);                                                    \
    ASSERT_UEQ(v_, 12345);                                                                         \
  } while (0)

TEST(content_length_valid) {
  CL_OK("0", 0);
  CL_OK("5", 5);
  CL_OK("1234567890", 1234567890);
  CL_OK("0005", 5);
  CL_OK("4611686018427387904", UINT64_C(1) << 62);
  CL_OK("0000000000000000000000000000004611686018427387904", UINT64_C(1) << 62);
}

TEST(content_length_list) {
  CL_OK("5, 5", 5);
  CL_OK("5,5", 5);
  CL_OK("5 ,\t5 , 5", 5);
  CL_OK("5, 05", 5);
  CL_ERROR("5, 6");
  CL_ERROR("6, 5, 5");
  CL_ERROR("5,,5");
  CL_ERROR("5, ");
  CL_ERROR(",5");
  CL_ERROR(",");
}

TEST(content_length_whitespace) {
  /* Optional whitespace around list elements is allowed, so around a lone value too. */
  CL_OK(" 5", 5);
  CL_OK("5 ", 5);
  CL_OK("\t5\t", 5);
  CL_ERROR("5 5");
  CL_ERROR(" ");
}

TEST(content_length_invalid) {
  uint64_t v = 7;

  CL_ERROR("");
  CL_ERROR("+5");
  CL_ERROR("-5");
  CL_ERROR("-0");
  CL_ERROR("5a");
  CL_ERROR("a5");
  CL_ERROR("0x10");
  CL_ERROR("1e3");
  CL_ERROR("5.0");
  CL_ERROR("5\0");
  CL_ERROR("\"5\"");
  CL_ERROR("4611686018427387905");
  CL_ERROR("18446744073709551615");
  CL_ERROR("18446744073709551616");
  CL_ERROR("99999999999999999999999999999999");
  ASSERT_EQ(tern__parse_content_length(NULL, 0, &v), -1);
  ASSERT_UEQ(v, 7);
}

static int has_token(const char *s, size_t len, const char *token) {
  return tern__has_token(guard_place(s, len), len, token);
}

TEST(has_token_lists) {
  ASSERT(has_token(S("close"), "close"));
  ASSERT(has_token(S("Close"), "close"));
  ASSERT(has_token(S("CLOSE"), "close"));
  ASSERT(has_token(S("keep-alive, close"), "close"));
  ASSERT(has_token(S("keep-alive, close"), "keep-alive"));
  ASSERT(has_token(S("  close  "), "close"));
  ASSERT(has_token(S(",,close,,"), "close"));
  ASSERT(has_token(S("upgrade,close"), "close"));
  ASSERT(has_token(S("a,\tclose\t,b"), "close"));
  ASSERT(!has_token(S("closed"), "close"));
  ASSERT(!has_token(S("xclose"), "close"));
  ASSERT(!has_token(S("keep-alive"), "close"));
  ASSERT(!has_token(S("clo se"), "close"));
  ASSERT(!has_token(S("clos"), "close"));
  ASSERT(!has_token(S(""), "close"));
  ASSERT(!has_token(S(", ,"), "close"));
  ASSERT(!has_token(S("close"), ""));
  ASSERT(!has_token(S(""), ""));
  ASSERT(!tern__has_token(NULL, 0, "close"));
}

static int chunked_final(const char *s, size_t len) {
  return tern__is_chunked_final(guard_place(s, len), len);
}

TEST(is_chunked_final_lists) {
  ASSERT(chunked_final(S("chunked")));
  ASSERT(chunked_final(S("Chunked")));
  ASSERT(chunked_final(S("CHUNKED")));
  ASSERT(chunked_final(S("gzip, chunked")));
  ASSERT(chunked_final(S("gzip,chunked")));
  ASSERT(chunked_final(S(" chunked ")));
  ASSERT(chunked_final(S("chunked, ")));
  ASSERT(chunked_final(S("deflate, gzip ,\tchunked\t")));
  ASSERT(!chunked_final(S("chunked, gzip")));
  ASSERT(!chunked_final(S("gzip")));
  ASSERT(!chunked_final(S("")));
  ASSERT(!chunked_final(S(" , ")));
  ASSERT(!chunked_final(S("notchunked")));
  ASSERT(!chunked_final(S("chunkedx")));
  ASSERT(!chunked_final(S("chunked;q=1")));
  ASSERT(!chunked_final(S("identity")));
  ASSERT(!tern__is_chunked_final(NULL, 0));
}

static int ka_timeout(const char *s, size_t len, uint64_t *out) {
  return tern__parse_keep_alive_timeout(guard_place(s, len), len, out);
}

#define KA_OK(lit, expect)                                                                         \
  do {                                                                                             \
    uint64_t v_ = 12345;                                                                           \
    ASSERT_EQ(ka_timeout(S(lit), &v_), 0);                                                         \
    ASSERT_UEQ(v_, (expect));                                                                      \
  } while (0)

#define KA_ERROR(lit)                                                                              \
  do {                                                                                             \
    uint64_t v_ = 12345;                                                                           \
    ASSERT_EQ(ka_timeout(S(lit), &v_), -1);                                                        \
  } while (0)

TEST(keep_alive_timeout) {
  KA_OK("timeout=5, max=100", 5);
  KA_OK("max=100, timeout=7", 7);
  KA_OK("timeout=5", 5);
  KA_OK("TIMEOUT=15", 15);
  KA_OK("Timeout=0", 0);
  KA_OK("timeout = 5", 5);
  KA_OK(" timeout=5 ", 5);
  KA_OK("timeout=\"9\"", 9);
  KA_OK("max=1,,timeout=3", 3);
  KA_OK("timeout=4294967295", UINT64_C(4294967295));
  /* The first timeout decides. */
  KA_OK("timeout=2, timeout=3", 2);
}

TEST(keep_alive_timeout_invalid) {
  KA_ERROR("");
  KA_ERROR("max=100");
  KA_ERROR("timeout");
  KA_ERROR("timeout=");
  KA_ERROR("timeout=abc");
  KA_ERROR("timeout=-1");
  KA_ERROR("timeout=+1");
  KA_ERROR("timeout=1.5");
  KA_ERROR("timeout=5 max=100");
  KA_ERROR("timeout=\"\"");
  KA_ERROR("timeout=\"5");
  KA_ERROR("timeouts=5");
  KA_ERROR("xtimeout=5");
  KA_ERROR("timeout=4294967296");
  KA_ERROR("timeout=99999999999999999999999");
  KA_ERROR("timeout=x, timeout=5");
}

static int name_is(const char *s, size_t len, const char *lower) {
  return tern__name_is(guard_place(s, len), len, lower);
}

static int token_name_is(const char *s, size_t len, const char *lower) {
  return tern__token_name_is(guard_place(s, len), len, lower);
}

/* The word-at-a-time comparison agrees with the byte-at-a-time one on every token name of
 * the lengths the reader asks about, and on each byte a token may hold in every place. */
TEST(token_name_is_agrees_with_name_is) {
  static const char *const names[] = {
    "content-length", "transfer-encoding", "connection", "keep-alive", "content-size", "te", "host"
  };
  static const char tchars[] =
      "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz"
      "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    const char *lower = names[k];
    size_t len = strlen(lower);
    char name[32];
    memcpy(name, lower, len);
    ASSERT(token_name_is(name, len, lower));
    for (size_t i = 0; i < len; i++) {
      for (const char *t = tchars; *t; t++) {
        memcpy(name, lower, len);
        name[i] = *t;
        ASSERT_EQ(token_name_is(name, len, lower) != 0, name_is(name, len, lower) != 0);
      }
    }
  }
  ASSERT(token_name_is(S("Content-Length"), "content-length"));
  ASSERT(token_name_is(S("CONNECTION"), "connection"));
  ASSERT(!token_name_is(S("Content-Type"), "content-size"));
  ASSERT(!token_name_is(S("Content_Length"), "content-length"));
  ASSERT(!token_name_is(S("Keep-Alivf"), "keep-alive"));
}

TEST(name_is_compare) {
  ASSERT(name_is(S("Content-Length"), "content-length"));
  ASSERT(name_is(S("CONTENT-LENGTH"), "content-length"));
  ASSERT(name_is(S("content-length"), "content-length"));
  ASSERT(name_is(S(""), ""));
  ASSERT(!name_is(S("Content-Lengt"), "content-length"));
  ASSERT(!name_is(S("Content-Lengths"), "content-length"));
  ASSERT(!name_is(S("Content-Type"), "content-length"));
  ASSERT(!name_is(S("Content_Length"), "content-length"));
  ASSERT(!name_is(S("A"), ""));
  ASSERT(!name_is(S(""), "a"));
  /* A NUL in the view does not end the comparison early. */
  ASSERT(!name_is(S("a\0b"), "a"));
  ASSERT(!name_is(S("a\0"), "a"));
  /* Only ASCII letters fold. */
  ASSERT(!name_is(S("\xc0"), "\xe0"));
  ASSERT(!name_is(S("["), "{"));
}
