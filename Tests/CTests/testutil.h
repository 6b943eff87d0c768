/*
 * testutil.h — the scaffolding the C integration tests (test-http.c, test-tls.c, test-body.c,
 * test-hops.c, test-faults.c) share: bounded waits, engines and requests for the test servers,
 * the leak checks every test ends with, scratch files, SHA-256 checks of bodies and files.
 *
 * Every helper fails the running test (task.h's ASSERT / TEST_FAIL_) instead of returning an
 * error, so a test reads as a list of steps. CMake links it into every test executable with
 * runner.c and testsrv.c.
 */
#ifndef TERN_TEST_TESTUTIL_H
#define TERN_TEST_TESTUTIL_H

#include <tern.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* ---- waiting ---- */

/* Monotonic condvars, so a bounded wait is neither cut short nor stretched by a clock step. */
void test_cond_init(pthread_mutex_t *mu, pthread_cond_t *cv);

/* The absolute timeout pthread_cond_timedwait wants, on test_cond_init's clock. */
struct timespec test_deadline(uint64_t ms);

/* Elapsed-time checks need a clock that never jumps. */
uint64_t test_now_ms(void);

/* A free loopback port: bound, then closed, so a connect to it is refused. */
int test_unused_port(void);

/* Counts complete callbacks, so a test can wait for a batch and notice a second completion. */
typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int remaining;   /* completions still awaited */
  int completions; /* complete callbacks seen */
} test_waiter;

/* Arms (or re-arms) the waiter before requests that report to it are submitted. */
void test_waiter_init(test_waiter *w, int n);

/* Submitting without the waiter as complete callback would leave nothing to wait on. */
void test_waiter_submit(test_waiter *w, tern_engine_t *eng, tern_request_t *req);

/* A hang fails the test after ms (scaled by test_scaled_ms) instead of blocking ctest. */
void test_waiter_wait(test_waiter *w, uint64_t ms);

/* Submit, wait (60 s, scaled) for exactly one completion, return the error: one line a request. */
int test_run(tern_engine_t *eng, tern_request_t *req);

/* ---- engines, requests, the end of a test ---- */

/* Nothing a test checks means anything without an engine; cfg may be NULL. */
tern_engine_t *test_engine_new(const tern_config_t *cfg);

/* An engine whose pooled connections close after `idle_ms` unused. */
tern_engine_t *test_engine_with_idle_timeout(uint64_t idle_ms);

/* A request still active when the test ends is one the engine lost track of. */
void test_assert_idle(const tern_engine_t *eng);

/* A request object alive after everything was freed is a leaked reference, even without ASan. */
void test_assert_no_live_requests(void);

/* Every test ends here, so a leak anywhere in it fails that test: idle, freed, none alive. */
void test_finish(tern_engine_t *eng);

/* A request the engine refused to build would make every later assertion misleading. */
tern_request_t *test_request_url(const char *url);

/* Tests name servers by env-file port key ("NGINX_PORT", "/1k.bin"): ports change every run. */
tern_request_t *test_request(const char *portkey, const char *path);

/* nginx's X-Connection headers are the server's word that request i rode the first's connection. */
void test_assert_nginx_reuse(const tern_request_t *req, int i, char *first_conn, size_t size);

/* ---- files ---- */

/* malloc'd $TERN_TEST_TMP/PID-name: parallel tests never share a file, none lands in the tree. */
char *test_tmp_path(const char *name);
/* Gunzips z[0, zlen) and asserts it is `size` bytes whose SHA-256 (hex) is `want`. */
void test_assert_gunzip_sha(const void *z, size_t zlen, size_t size, const char *want);

/* A fixture file the test wrote only in part would make the test check the wrong thing. */
void test_write_file(const char *path, const void *data, size_t n);

/* Downloads must leave no .part debris (and no file at all when they fail). */
bool test_exists(const char *path);

/* ---- SHA-256 ---- */

/* Range answers and file-slice bodies are checked against the docroot file itself. */
void test_www_sha256_slice(const char *name, uint64_t off, size_t n, char hex[65]);

/* Bodies compare by digest: a failure prints two short strings, not megabytes. */
void test_req_body_sha256(const tern_request_t *req, char hex[65]);

/* The env file holds the docroot files' digests (SHA_1K, ...), so a body needs no copy to check. */
void test_assert_req_body_sha(const tern_request_t *req, const char *sha_key);

/* Downloads to disk are checked like in-memory bodies, against the env file's digest. */
void test_assert_file_sha(const char *path, const char *sha_key);

/* ---- bodies ---- */

/* Bodies are not NUL-terminated; strstr on the echo server's JSON needs a copy that is. */
char *test_req_body_str(const tern_request_t *req);

/* malloc'd printf (aborts when out of memory). */
char *test_fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));

#endif /* TERN_TEST_TESTUTIL_H */
