/*
 * fuzz_http2.c — libFuzzer target for what a server's HTTP/2 bytes reach: nghttp2's framing and
 * every callback of http2.c and http2_stream.c (response fields and heads, interim heads, body
 * delivery, resets, GOAWAY, the connection's end), through the whole engine.
 *
 * One input is what the server sends after its (empty) SETTINGS frame, on a real loopback
 * connection: a thread of this harness accepts, writes the input and closes. The client asks
 * GET http://127.0.0.1:PORT/ with HTTP/2 prior knowledge. Whatever the bytes, the request must
 * complete (the total timeout bounds it), with a status only when it succeeded, and ASan, UBSan
 * and LeakSanitizer must find nothing.
 *
 * Build: cmake -DTERN_FUZZ=ON (scripts/test.sh does), then
 *   build/fuzz/fuzz_http2 -dict=Tests/Fuzz/http2.dict Tests/Fuzz/corpus/http2
 */
#include "tern.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHECK(expr)                                                                                \
  do {                                                                                             \
    if (!(expr)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr);                     \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static int listener = -1;
static char url[64];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
/* The current input, copied: a connection of an earlier input may still be served meanwhile. */
static uint8_t input[64 * 1024];
static size_t input_len;
static int served, done;

/* The server: for each connection, its SETTINGS and the input, then the end of the stream. */
static void *serve(void *arg) {
  (void)arg;
  static const uint8_t settings[9] = { 0, 0, 0, 4, 0, 0, 0, 0, 0 };
  static uint8_t mine[sizeof input];
  for (;;) {
    int fd = accept(listener, NULL, NULL);
    if (fd < 0) continue;
    pthread_mutex_lock(&lock);
    size_t n = input_len;
    memcpy(mine, input, n);
    pthread_mutex_unlock(&lock);
    const uint8_t *p = mine;
    (void)!send(fd, settings, sizeof settings, MSG_NOSIGNAL);
    while (n > 0) {
      ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
      if (w <= 0) break;
      p += w;
      n -= (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    char sink[4096];
    while (read(fd, sink, sizeof sink) > 0) {}
    close(fd);
    pthread_mutex_lock(&lock);
    served++;
    pthread_mutex_unlock(&lock);
  }
  return NULL;
}

static void on_complete(tern_request_t *req, int err, void *user) {
  (void)req;
  (void)err;
  (void)user;
  pthread_mutex_lock(&lock);
  done = 1;
  pthread_cond_signal(&cond);
  pthread_mutex_unlock(&lock);
}

static void start(void) {
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
  socklen_t len = sizeof a;
  listener = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(listener >= 0 && bind(listener, (struct sockaddr *)&a, sizeof a) == 0);
  CHECK(listen(listener, 16) == 0 && getsockname(listener, (struct sockaddr *)&a, &len) == 0);
  snprintf(url, sizeof url, "http://127.0.0.1:%u/f", (unsigned)ntohs(a.sin_port));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, serve, NULL) == 0);
  pthread_detach(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (listener < 0) start();
  if (size > sizeof input) return 0;
  pthread_mutex_lock(&lock);
  memcpy(input, data, size);
  input_len = size;
  done = 0;
  pthread_mutex_unlock(&lock);

  tern_config_t *cfg;
  tern_engine_t *eng;
  tern_request_t *req;
  CHECK(tern_config_new(&cfg) == 0);
  CHECK(tern_config_set_max_header_size(cfg, 4096) == 0);
  CHECK(tern_engine_new(&eng, cfg) == 0);
  CHECK(tern_request_new(&req) == 0);
  CHECK(tern_request_set_url(req, url) == 0);
  CHECK(tern_request_set_http_version(req, TERN_HTTP_VERSION_2_PRIOR_KNOWLEDGE) == 0);
  CHECK(tern_request_set_timeout(req, TERN_TIMEOUT_TOTAL, 3000) == 0);
  CHECK(tern_request_set_complete_cb(req, on_complete, NULL) == 0);
  CHECK(tern_engine_submit(eng, req) == 0);
  pthread_mutex_lock(&lock);
  while (!done) pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  int err = tern_request_get_error(req);
  CHECK(err != TERN_ETOTALTIMEOUT); /* bytes then the end of the stream: never a hang */
  if (err == 0)
    CHECK(tern_request_get_status(req) >= 200 && tern_request_get_http_version(req) == 20);
  size_t body_len;
  (void)tern_request_get_body(req, &body_len);
  tern_request_free(req);
  tern_engine_free(eng);
  tern_config_free(cfg);
  return 0;
}
