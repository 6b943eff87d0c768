/*
 * bench_parse.c — micro-benchmark of http1_parse.c (picohttpparser's bench.c in spirit).
 *
 * Parses a realistic nginx-style response head many times, then decodes chunked bodies with
 * large and small chunks, and prints the rates (bodies in bytes of encoded input). It has no
 * thresholds: it is for comparing changes to the parser on one machine.
 *
 *   cc -std=c11 -O2 -ICSources bench/parser/bench_parse.c CSources/http1_parse.c -o bench_parse
 *   ./bench_parse [head-iterations]
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */

#include "http1_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char head[] = "HTTP/1.1 200 OK\r\n"
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

static volatile size_t sink; /* keeps the compiler from dropping the work */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void bench_head(long iterations)
{
    tern__header_t headers[32];
    const char *reason;
    size_t reason_len, num, total = 0;
    int minor, status;
    double t0, dt;

    t0 = now();
    for (long i = 0; i < iterations; i++) {
        num = sizeof headers / sizeof headers[0];
        int r = tern__parse_response(head, sizeof head - 1, 0, &minor, &status, &reason,
                                     &reason_len, headers, &num);
        if (r != (int)sizeof head - 1) {
            fprintf(stderr, "parse failed: %d\n", r);
            exit(1);
        }
        total += num;
    }
    dt = now() - t0;
    sink = total;
    printf("head (%zu bytes, %zu fields): %.0f heads/s, %.1f MB/s, %.1f ns/head\n",
           sizeof head - 1, num, (double)iterations / dt,
           (double)iterations * (double)(sizeof head - 1) / dt / 1e6, dt / (double)iterations * 1e9);
}

/* Builds a chunked body of about `target` bytes with chunks of `chunk` data bytes. */
static char *make_chunked(size_t target, size_t chunk, size_t *len, size_t *data_len)
{
    size_t cap = target + target / chunk * 16 + 64, n = 0, data = 0;
    char *buf = malloc(cap);

    if (buf == NULL)
        exit(1);
    while (data < target) {
        n += (size_t)snprintf(buf + n, cap - n, "%zx\r\n", chunk);
        for (size_t i = 0; i < chunk; i++)
            buf[n + i] = (char)('a' + (i + data) % 26);
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

static void bench_chunked(size_t chunk, int rounds)
{
    size_t len, data_len, total = 0;
    char *body = make_chunked(4 << 20, chunk, &len, &data_len);
    char *work = malloc(len);
    double t0, dt, copy;

    if (work == NULL)
        exit(1);

    /* The decoder works in place, so each round decodes a fresh copy. The copy alone is timed
     * too, as a floor: with large chunks decoding is little more than one memmove. */
    t0 = now();
    for (int r = 0; r < rounds; r++) {
        memcpy(work, body, len);
        total += (unsigned char)work[(size_t)r % len];
    }
    copy = now() - t0;

    t0 = now();
    for (int r = 0; r < rounds; r++) {
        tern__chunked_t dec;
        size_t n = len;
        memcpy(work, body, len);
        tern__chunked_init(&dec);
        if (tern__decode_chunked(&dec, work, &n) != 0 || n != data_len) {
            fprintf(stderr, "decode failed\n");
            exit(1);
        }
        total += n;
    }
    dt = now() - t0;
    sink = total;
    printf("chunked (%zu-byte chunks, %zu bytes): copy+decode %.0f MB/s, copy alone %.0f MB/s\n",
           chunk, len, (double)len * rounds / dt / 1e6, (double)len * rounds / copy / 1e6);
    free(work);
    free(body);
}

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? strtol(argv[1], NULL, 10) : 5000000;

    if (iterations <= 0)
        iterations = 5000000;
    bench_head(iterations);
    bench_chunked(16384, 100);
    bench_chunked(1024, 100);
    bench_chunked(64, 50);
    return 0;
}
