/* testutil.c — see testutil.h. */
#define _DEFAULT_SOURCE /* pread, pthread_condattr_setclock under -std=c11 */

#include "testutil.h"

#include <zlib.h>

#include "task.h"
#include "testsrv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* ---- waiting ---- */

void test_cond_init(pthread_mutex_t *mu, pthread_cond_t *cv) {
  pthread_condattr_t attr;
  ASSERT_EQ(pthread_mutex_init(mu, NULL), 0);
  ASSERT_EQ(pthread_condattr_init(&attr), 0);
  ASSERT_EQ(pthread_condattr_setclock(&attr, CLOCK_MONOTONIC), 0);
  ASSERT_EQ(pthread_cond_init(cv, &attr), 0);
  pthread_condattr_destroy(&attr);
}

struct timespec test_deadline(uint64_t ms) {
  struct timespec dl;
  clock_gettime(CLOCK_MONOTONIC, &dl);
  dl.tv_sec += (time_t)(ms / 1000);
  dl.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  return dl;
}

uint64_t test_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void test_waiter_init(test_waiter *w, int n) {
  test_cond_init(&w->lock, &w->cond);
  w->remaining = n;
  w->completions = 0;
}

static void waiter_on_done(tern_request_t *req, int status, void *ud) {
  (void)req;
  (void)status;
  test_waiter *w = ud;
  pthread_mutex_lock(&w->lock);
  w->remaining--;
  w->completions++;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

void test_waiter_submit(test_waiter *w, tern_engine_t *eng, tern_request_t *req) {
  ASSERT_EQ(tern_request_set_complete_cb(req, waiter_on_done, w), 0);
  ASSERT_EQ(tern_engine_submit(eng, req), 0);
}

void test_waiter_wait(test_waiter *w, uint64_t ms) {
  struct timespec dl = test_deadline(test_scaled_ms(ms));
  pthread_mutex_lock(&w->lock);
  while (w->remaining > 0) {
    if (pthread_cond_timedwait(&w->cond, &w->lock, &dl) != 0) {
      int remaining = w->remaining;
      pthread_mutex_unlock(&w->lock);
      TEST_FAIL_("timed out waiting for %d completion(s)", remaining);
    }
  }
  pthread_mutex_unlock(&w->lock);
}

int test_run(tern_engine_t *eng, tern_request_t *req) {
  test_waiter w;
  test_waiter_init(&w, 1);
  test_waiter_submit(&w, eng, req);
  test_waiter_wait(&w, 60000);
  ASSERT_EQ(w.completions, 1);
  ASSERT(tern_request_is_done(req));
  return tern_request_get_error(req);
}

/* ---- engines, requests, the end of a test ---- */

tern_engine_t *test_engine_new(const tern_config_t *cfg) {
  tern_engine_t *eng = NULL;
  ASSERT_EQ(tern_engine_new(&eng, cfg), 0);
  ASSERT(eng != NULL);
  return eng;
}

tern_engine_t *test_engine_with_idle_timeout(uint64_t idle_ms) {
  tern_config_t *cfg = NULL;
  (void)tern_config_new(&cfg);
  ASSERT_EQ(tern_config_set_idle_timeout(cfg, idle_ms), 0);
  tern_engine_t *eng = test_engine_new(cfg);
  tern_config_free(cfg);
  return eng;
}

void test_assert_idle(const tern_engine_t *eng) {
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_REQUESTS_ACTIVE), 0);
}

void test_assert_no_live_requests(void) {
  ASSERT_UEQ(tern_engine_get_stat(NULL, TERN_STAT_REQUESTS_LIVE), 0);
}

void test_finish(tern_engine_t *eng) {
  test_assert_idle(eng);
  tern_engine_free(eng);
  test_assert_no_live_requests();
}

tern_request_t *test_request_url(const char *url) {
  tern_request_t *req = NULL;
  (void)tern_request_new(&req);
  ASSERT(req != NULL);
  ASSERT_EQ(tern_request_set_url(req, url), 0);
  return req;
}

tern_request_t *test_request(const char *portkey, const char *path) {
  char *url = testsrv_url(portkey, path);
  tern_request_t *req = test_request_url(url);
  free(url);
  return req;
}

void test_assert_nginx_reuse(const tern_request_t *req, int i, char *first_conn, size_t size) {
  const char *conn = tern_request_get_header(req, "X-Connection");
  ASSERT(conn != NULL);
  if (i == 0) {
    snprintf(first_conn, size, "%s", conn);
    ASSERT_EQ(tern_request_is_reused(req), 0);
  } else {
    ASSERT_STR_EQ(conn, first_conn); /* nginx saw the same TCP connection */
    ASSERT_EQ(tern_request_is_reused(req), 1);
    char nreq[16];
    snprintf(nreq, sizeof nreq, "%d", i + 1);
    ASSERT_STR_EQ(tern_request_get_header(req, "X-Connection-Requests"), nreq);
  }
}

/* ---- files ---- */

char *test_tmp_path(const char *name) {
  const char *dir = getenv("TERN_TEST_TMP");
  if (dir == NULL || dir[0] == '\0') dir = "/tmp";
  if (mkdir(dir, 0777) != 0) ASSERT(errno == EEXIST);
  size_t n = strlen(dir) + strlen(name) + 32;
  char *p = malloc(n);
  ASSERT(p != NULL);
  snprintf(p, n, "%s/%d-%s", dir, (int)getpid(), name);
  return p;
}

void test_write_file(const char *path, const void *data, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT(fd >= 0);
  ASSERT_EQ(write(fd, data, n), (int64_t)n);
  close(fd);
}

bool test_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* ---- SHA-256 ---- */

void test_www_sha256_slice(const char *name, uint64_t off, size_t n, char hex[65]) {
  char *path = testsrv_www_path(name);
  int fd = open(path, O_RDONLY);
  ASSERT(fd >= 0);
  char *buf = malloc(n ? n : 1);
  ASSERT(buf != NULL);
  ASSERT_EQ(pread(fd, buf, n, (off_t)off), (int64_t)n);
  close(fd);
  testsrv_sha256_mem(buf, n, hex);
  free(buf);
  free(path);
}

void test_req_body_sha256(const tern_request_t *req, char hex[65]) {
  size_t len = 0;
  const void *body = tern_request_get_body(req, &len);
  testsrv_sha256_mem(body, len, hex);
}

void test_assert_req_body_sha(const tern_request_t *req, const char *sha_key) {
  char hex[65];
  test_req_body_sha256(req, hex);
  ASSERT_STR_EQ(hex, testsrv_get(sha_key));
}

void test_assert_file_sha(const char *path, const char *sha_key) {
  char hex[65];
  ASSERT_EQ(testsrv_sha256_file(path, hex), 0);
  ASSERT_STR_EQ(hex, testsrv_get(sha_key));
}

/* ---- bodies ---- */

char *test_req_body_str(const tern_request_t *req) {
  size_t len = 0;
  const void *body = tern_request_get_body(req, &len);
  char *s = malloc(len + 1);
  ASSERT(s != NULL);
  if (len) memcpy(s, body, len);
  s[len] = '\0';
  return s;
}

char *test_fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  int n = vsnprintf(NULL, 0, f, ap);
  va_end(ap);
  ASSERT(n >= 0);
  char *s = malloc((size_t)n + 1);
  ASSERT(s != NULL);
  va_start(ap, f);
  vsnprintf(s, (size_t)n + 1, f, ap);
  va_end(ap);
  return s;
}

void test_assert_gunzip_sha(const void *z, size_t zlen, size_t size, const char *want) {
  unsigned char *plain = malloc(size + 1);
  ASSERT(plain != NULL);
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  ASSERT_EQ(inflateInit2(&zs, 15 + 16), Z_OK);
  zs.next_in = (unsigned char *)z;
  zs.avail_in = (uInt)zlen;
  zs.next_out = plain;
  zs.avail_out = (uInt)size + 1;
  ASSERT_EQ(inflate(&zs, Z_FINISH), Z_STREAM_END);
  ASSERT_UEQ(zs.total_out, size);
  inflateEnd(&zs);
  char got[65];
  testsrv_sha256_mem(plain, size, got);
  ASSERT_STR_EQ(got, want);
  free(plain);
}

/* A free loopback port: bound, then closed, so a connect to it is refused. */
int test_unused_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT(fd >= 0);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  socklen_t sl = sizeof sa;
  ASSERT_EQ(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
  close(fd);
  return ntohs(sa.sin_port);
}
