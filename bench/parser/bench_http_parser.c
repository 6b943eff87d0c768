/*
 * bench_http_parser.c — the same micro-benchmark as bench_parse.c, on the same inputs
 * (inputs.h), with Node's http-parser (Debian libhttp-parser-dev) in place of Tern's parser.
 *
 * To do the same work as Tern's parser, the callbacks keep what a client keeps: views of each
 * header name and value (like Tern's tern__header_t array), the status, and for bodies the count
 * of data bytes (http-parser hands out body pieces in place, without a copy, where Tern's decoder
 * compacts them in the buffer). The chunked rounds copy the input first, exactly as bench_parse.c
 * does, so both include the same simulated socket read.
 *
 *   bench/.build-cmake/bench-parse-http-parser [head-iterations]
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */

#include "inputs.h"

#include <http_parser.h>

struct view {
  const char *p;
  size_t len;
};

struct state {
  struct view names[64], values[64];
  size_t num;
  int in_value;
  size_t body;
  int complete;
};

static int on_status(http_parser *p, const char *at, size_t len) {
  (void)p;
  (void)at;
  (void)len;
  return 0;
}

/* A field may arrive in pieces when the input is split; here it never is, but keep it right. */
static int on_header_field(http_parser *p, const char *at, size_t len) {
  struct state *s = p->data;

  if (s->in_value || s->num == 0) {
    if (s->num == 64) return 1;
    s->names[s->num].p = at;
    s->names[s->num].len = len;
    s->values[s->num].p = NULL;
    s->values[s->num].len = 0;
    s->num++;
    s->in_value = 0;
  } else {
    s->names[s->num - 1].len += len;
  }
  return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
  struct state *s = p->data;

  if (!s->in_value) {
    s->values[s->num - 1].p = at;
    s->values[s->num - 1].len = len;
    s->in_value = 1;
  } else {
    s->values[s->num - 1].len += len;
  }
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
  struct state *s = p->data;

  (void)at;
  s->body += len;
  return 0;
}

static int on_message_complete(http_parser *p) {
  struct state *s = p->data;

  s->complete = 1;
  return 0;
}

static http_parser_settings settings;

static void bench_head(const char *name, const char *head, size_t len, long iterations) {
  struct state s;
  http_parser parser;
  size_t total = 0;
  double t0;

  t0 = bench_now();
  for (long i = 0; i < iterations; i++) {
    s.num = 0;
    s.in_value = 0;
    http_parser_init(&parser, HTTP_RESPONSE);
    parser.data = &s;
    size_t n = http_parser_execute(&parser, &settings, head, len);
    if (n != len || HTTP_PARSER_ERRNO(&parser) != HPE_OK || parser.status_code != 200) {
      fprintf(stderr, "%s: parse failed: %s\n", name, http_errno_name(HTTP_PARSER_ERRNO(&parser)));
      exit(1);
    }
    total += s.num + s.values[s.num - 1].len;
  }
  bench_sink = total;
  report("http-parser", name, len, iterations, bench_now() - t0);
}

static void bench_chunked(size_t chunk, int rounds) {
  size_t len, data_len, total = 0;
  char *input = make_chunked_response(chunk, &len, &data_len);
  char *work = malloc(len);
  char name[48];
  double t0;

  if (work == NULL) exit(1);
  t0 = bench_now();
  for (int r = 0; r < rounds; r++) {
    struct state s;
    http_parser parser;

    memcpy(work, input, len);
    s.num = 0;
    s.in_value = 0;
    s.body = 0;
    s.complete = 0;
    http_parser_init(&parser, HTTP_RESPONSE);
    parser.data = &s;
    size_t n = http_parser_execute(&parser, &settings, work, len);
    if (n != len || HTTP_PARSER_ERRNO(&parser) != HPE_OK || !s.complete || s.body != data_len) {
      fprintf(stderr, "chunked-%zu: parse failed: %s\n", chunk,
              http_errno_name(HTTP_PARSER_ERRNO(&parser)));
      exit(1);
    }
    total += s.body;
  }
  bench_sink = total;
  snprintf(name, sizeof name, "chunked-%zu", chunk);
  report("http-parser", name, len, rounds, bench_now() - t0);
  snprintf(name, sizeof name, "chunked-%zu-copy", chunk);
  report_copy_floor("http-parser", name, input, len, work, rounds);
  free(work);
  free(input);
}

int main(int argc, char **argv) {
  long iterations = argc > 1 ? strtol(argv[1], NULL, 10) : 2000000;

  if (iterations <= 0) iterations = 2000000;
  settings.on_status = on_status;
  settings.on_header_field = on_header_field;
  settings.on_header_value = on_header_value;
  settings.on_body = on_body;
  settings.on_message_complete = on_message_complete;
  bench_head("head-nginx", head_nginx, sizeof head_nginx - 1, iterations);
  bench_head("head-app", head_app, sizeof head_app - 1, iterations / 2);
  for (size_t i = 0; i < sizeof chunk_sizes / sizeof chunk_sizes[0]; i++)
    bench_chunked(chunk_sizes[i], iterations / 20000 > 2 ? (int)(iterations / 20000) : 2);
  return 0;
}
