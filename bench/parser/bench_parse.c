/*
 * bench_parse.c — micro-benchmark of Tern's http1_parse.c (picohttpparser's bench.c in spirit),
 * on the inputs of inputs.h; bench_http_parser.c runs Node's http-parser on the same bytes.
 *
 * Heads: tern__parse_response over the whole head, header views into the input (no copies).
 * Chunked: each round copies the response into a work buffer (the socket read), parses the head
 * and decodes the body in place with tern__decode_chunked. No thresholds: it is for comparing
 * parsers, and changes to one parser, on one machine.
 *
 *   cmake -S bench -B bench/.build-cmake && cmake --build bench/.build-cmake
 *   bench/.build-cmake/bench-parse-tern [head-iterations]
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */

#include "http1_parse.h"
#include "inputs.h"

static void bench_head(const char *name, const char *head, size_t len, long iterations) {
  tern__header_t headers[64];
  const char *reason;
  size_t reason_len, num = 0, total = 0;
  int minor, status;
  double t0;

  t0 = bench_now();
  for (long i = 0; i < iterations; i++) {
    num = sizeof headers / sizeof headers[0];
    int r =
        tern__parse_response(head, len, 0, &minor, &status, &reason, &reason_len, headers, &num);
    if (r != (int)len) {
      fprintf(stderr, "%s: parse failed: %d\n", name, r);
      exit(1);
    }
    total += num + headers[num - 1].value_len;
  }
  bench_sink = total;
  report("tern", name, len, iterations, bench_now() - t0);
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
    tern__header_t headers[64];
    const char *reason;
    size_t reason_len, num = sizeof headers / sizeof headers[0], n;
    int minor, status, head;
    tern__chunked_t dec;

    memcpy(work, input, len);
    head = tern__parse_response(work, len, 0, &minor, &status, &reason, &reason_len, headers, &num);
    if (head <= 0) {
      fprintf(stderr, "chunked head: parse failed: %d\n", head);
      exit(1);
    }
    n = len - (size_t)head;
    tern__chunked_init(&dec);
    if (tern__decode_chunked(&dec, work + head, &n) != 0 || n != data_len) {
      fprintf(stderr, "chunked-%zu: decode failed\n", chunk);
      exit(1);
    }
    total += n;
  }
  bench_sink = total;
  snprintf(name, sizeof name, "chunked-%zu", chunk);
  report("tern", name, len, rounds, bench_now() - t0);
  snprintf(name, sizeof name, "chunked-%zu-copy", chunk);
  report_copy_floor("tern", name, input, len, work, rounds);
  free(work);
  free(input);
}

int main(int argc, char **argv) {
  long iterations = argc > 1 ? strtol(argv[1], NULL, 10) : 2000000;

  if (iterations <= 0) iterations = 2000000;
  bench_head("head-nginx", head_nginx, sizeof head_nginx - 1, iterations);
  bench_head("head-app", head_app, sizeof head_app - 1, iterations / 2);
  for (size_t i = 0; i < sizeof chunk_sizes / sizeof chunk_sizes[0]; i++)
    bench_chunked(chunk_sizes[i], iterations / 20000 > 2 ? (int)(iterations / 20000) : 2);
  return 0;
}
