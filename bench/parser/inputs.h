/*
 * inputs.h — the inputs of the parser micro-benchmarks, shared so that bench_parse.c (Tern's
 * http1_parse.c) and bench_http_parser.c (Node's http-parser, Debian libhttp-parser-dev) parse
 * exactly the same bytes, and the timing and reporting helpers they both use.
 *
 * Cases:
 *   head-nginx  the head nginx sends for a static file (11 fields)
 *   head-app    an API response head with cookies, CORS and tracing fields (21 fields)
 *   chunked-N   a response head with Transfer-Encoding: chunked plus about 4 MiB of body in
 *               chunks of N data bytes (N = 16384, 1024, 64); each round first copies the input
 *               into a work buffer, as a socket read into a connection buffer would, and the
 *               copy alone is timed too, as the floor
 *
 * Each case prints one line: "parser=NAME case=CASE bytes=B per_s=R mb_per_s=M ns_each=T" where
 * per_s counts heads (head cases) or whole responses (chunked cases) and mb_per_s is input bytes.
 */
#ifndef BENCH_PARSER_INPUTS_H
#define BENCH_PARSER_INPUTS_H

/* Includers define _POSIX_C_SOURCE 199309L (clock_gettime under -std=c11) before any include. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char head_nginx[] =
    "HTTP/1.1 200 OK\r\n"
    "Server: nginx/1.25.3\r\n"
    "Date: Tue, 21 Nov 2023 12:00:00 GMT\r\n"
    "Content-Type: text/html; charset=utf-8\r\n"
    "Content-Length: 615\r\n"
    "Last-Modified: Tue, 24 Oct 2023 13:46:47 GMT\r\n"
    "Connection: keep-alive\r\n"
    "Keep-Alive: timeout=5, max=100\r\n"
    "ETag: \"6537cac7-267\"\r\n"
    "Cache-Control: max-age=3600\r\n"
    "Accept-Ranges: bytes\r\n"
    "\r\n";

static const char head_app[] =
    "HTTP/1.1 200 OK\r\n"
    "Date: Sat, 21 Nov 2026 12:00:00 GMT\r\n"
    "Content-Type: application/json; charset=utf-8\r\n"
    "Content-Length: 4821\r\n"
    "Connection: keep-alive\r\n"
    "Cache-Control: private, no-cache, no-store, must-revalidate\r\n"
    "Pragma: no-cache\r\n"
    "Expires: 0\r\n"
    "Vary: Accept-Encoding, Origin, Authorization\r\n"
    "Access-Control-Allow-Origin: https://app.example.com\r\n"
    "Access-Control-Allow-Credentials: true\r\n"
    "Access-Control-Expose-Headers: X-Request-Id, X-RateLimit-Remaining\r\n"
    "Set-Cookie: session=8f2b9c1e4d7a6f3b0e5c2d9a1b8f7e6d; Path=/; HttpOnly; Secure; "
    "SameSite=Lax; Max-Age=86400\r\n"
    "Set-Cookie: csrftoken=Zq3kP9xW2mR7tY5vN8bL4hJ6gF1dS0aQ; Path=/; Secure; SameSite=Strict\r\n"
    "Strict-Transport-Security: max-age=63072000; includeSubDomains; preload\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "X-Frame-Options: DENY\r\n"
    "X-Request-Id: 7c1f9e2a-4b3d-4e8f-9a6c-2d5b8e1f0a3c\r\n"
    "X-RateLimit-Limit: 5000\r\n"
    "X-RateLimit-Remaining: 4987\r\n"
    "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
    "Server-Timing: db;dur=53.2, app;dur=47.1, cache;desc=\"hit\"\r\n"
    "\r\n";

static const char head_chunked[] =
    "HTTP/1.1 200 OK\r\n"
    "Server: nginx/1.25.3\r\n"
    "Date: Tue, 21 Nov 2023 12:00:00 GMT\r\n"
    "Content-Type: application/octet-stream\r\n"
    "Transfer-Encoding: chunked\r\n"
    "Connection: keep-alive\r\n"
    "\r\n";

#define CHUNKED_BODY_TARGET (4u << 20)
static const size_t chunk_sizes[] = { 16384, 1024, 64 };

static volatile size_t bench_sink; /* keeps the compiler from dropping the work */

static double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * A whole chunked response: head_chunked, then chunks of `chunk` data bytes adding up to about
 * CHUNKED_BODY_TARGET, then the last chunk. *len is the input size, *data_len the body size.
 */
static char *make_chunked_response(size_t chunk, size_t *len, size_t *data_len) {
  size_t target = CHUNKED_BODY_TARGET;
  size_t cap = sizeof head_chunked + target + target / chunk * 16 + 64, n, data = 0;
  char *buf = malloc(cap);

  if (buf == NULL) exit(1);
  memcpy(buf, head_chunked, sizeof head_chunked - 1);
  n = sizeof head_chunked - 1;
  while (data < target) {
    n += (size_t)snprintf(buf + n, cap - n, "%zx\r\n", chunk);
    for (size_t i = 0; i < chunk; i++) buf[n + i] = (char)('a' + (i + data) % 26);
    n += chunk;
    memcpy(buf + n, "\r\n", 2);
    n += 2;
    data += chunk;
  }
  memcpy(buf + n, "0\r\n\r\n", 5);
  n += 5;
  *len = n;
  *data_len = data;
  return buf;
}

static void report(const char *parser, const char *name, size_t bytes, long count, double dt) {
  printf("parser=%s case=%s bytes=%zu per_s=%.0f mb_per_s=%.1f ns_each=%.1f\n", parser, name, bytes,
         (double)count / dt, (double)count * (double)bytes / dt / 1e6, dt / (double)count * 1e9);
  fflush(stdout);
}

/* Times `rounds` plain copies of the input: the floor under the chunked cases. */
static void report_copy_floor(const char *parser, const char *name, const char *input, size_t len,
                              char *work, int rounds) {
  double t0 = bench_now();
  size_t total = 0;

  for (int r = 0; r < rounds; r++) {
    memcpy(work, input, len);
    total += (unsigned char)work[(size_t)r % len];
  }
  bench_sink = total;
  report(parser, name, len, rounds, bench_now() - t0);
}

#endif /* BENCH_PARSER_INPUTS_H */
