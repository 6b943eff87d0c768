/*
 * torture.c — the allocation-failure torture harness (curl's "torture" mode), linked into the
 * test executables of a TERN_TORTURE build (cmake -DTERN_TORTURE=ON; driven by torture.py).
 *
 * The engine built with -DTERN_TORTURE asks tern__alloc_should_fail() before every allocation
 * (CSources/internal.h). Here that is an atomic counter: with TERN_TORTURE_FAIL_AT=N in the
 * environment exactly the N-th call fails (and its call stack is printed, so a defect can be
 * traced to the allocation site); without it nothing fails and the calls are only counted. At
 * exit the harness prints "torture: calls=C fail_at=N" for the driver.
 *
 * TERN_TORTURE_SCOPE=uv and/or ssl (e.g. "uv,ssl") counts, and fails, the allocations of libuv
 * (uv_replace_allocator) and OpenSSL (CRYPTO_set_mem_functions) too: how the engine copes with a
 * library call failing for want of memory. Not part of the default run (OpenSSL's own error paths
 * are not ours to fix); torture.py --scope.
 *
 * Engines and requests are tracked (the link wraps tern_engine_new/free, tern_request_new/free):
 * when a case fails an assertion under injection, runner.c frees the engines, then the requests,
 * the case left behind, checks that no request object is still alive (a lost reference), and
 * exits, so that LeakSanitizer checks the engine's error paths too, not only cases that pass.
 */
#define _DEFAULT_SOURCE
#include "torture.h"

#include <tern.h>

#include <openssl/crypto.h>
#include <uv.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tern__alloc_should_fail(void); /* CSources/internal.h; the harness defines it */

/* Only in sanitizer builds; weak, so a torture build without ASan still links. */
void __sanitizer_print_stack_trace(void) __attribute__((weak));

static atomic_ulong calls;
static unsigned long fail_at; /* 0: count only */

static void torture_report(void) {
  fprintf(stderr, "torture: calls=%lu fail_at=%lu\n", atomic_load(&calls), fail_at);
}

/* ---- libuv and OpenSSL through the same counter (TERN_TORTURE_SCOPE) ---- */

static void *uv_malloc_(size_t n) { return tern__alloc_should_fail() ? NULL : malloc(n); }
/* Never failed: libuv aborts by design when growing its watcher array fails (uv__io_start). */
static void *uv_realloc_(void *p, size_t n) { return realloc(p, n); }
static void *uv_calloc_(size_t k, size_t n) {
  return tern__alloc_should_fail() ? NULL : calloc(k, n);
}
static void *ssl_malloc_(size_t n, const char *file, int line) {
  (void)file;
  (void)line;
  return tern__alloc_should_fail() ? NULL : malloc(n);
}
static void *ssl_realloc_(void *p, size_t n, const char *file, int line) {
  (void)file;
  (void)line;
  return n != 0 && tern__alloc_should_fail() ? NULL : realloc(p, n);
}
static void ssl_free_(void *p, const char *file, int line) {
  (void)file;
  (void)line;
  free(p);
}

__attribute__((constructor)) static void torture_init(void) {
  const char *s = getenv("TERN_TORTURE_FAIL_AT");
  fail_at = s ? strtoul(s, NULL, 10) : 0;
  const char *scope = getenv("TERN_TORTURE_SCOPE");
  if (scope && strstr(scope, "uv") &&
      uv_replace_allocator(uv_malloc_, uv_realloc_, uv_calloc_, free))
    fprintf(stderr, "torture: uv_replace_allocator failed\n");
  if (scope && strstr(scope, "ssl") &&
      !CRYPTO_set_mem_functions(ssl_malloc_, ssl_realloc_, ssl_free_))
    fprintf(stderr, "torture: CRYPTO_set_mem_functions failed (OpenSSL allocated already)\n");
  atexit(torture_report);
}

bool tern__alloc_should_fail(void) {
  unsigned long n = atomic_fetch_add(&calls, 1) + 1;
  if (fail_at == 0 || n != fail_at) return false;
  fprintf(stderr, "torture: failing allocation #%lu here:\n", n);
  if (__sanitizer_print_stack_trace) __sanitizer_print_stack_trace();
  fflush(stderr);
  return true;
}

/* ---- engine tracking (-Wl,--wrap=tern_engine_new,--wrap=tern_engine_free) ---- */

#define MAX_ENGINES 64
static pthread_mutex_t engines_lock = PTHREAD_MUTEX_INITIALIZER;
static tern_engine_t *engines[MAX_ENGINES];

int __real_tern_engine_new(tern_engine_t **out, const tern_config_t *config);
void __real_tern_engine_free(tern_engine_t *engine);
int __wrap_tern_engine_new(tern_engine_t **out, const tern_config_t *config);
void __wrap_tern_engine_free(tern_engine_t *engine);

int __wrap_tern_engine_new(tern_engine_t **out, const tern_config_t *config) {
  int r = __real_tern_engine_new(out, config);
  if (r == 0 && out && *out) {
    pthread_mutex_lock(&engines_lock);
    for (int i = 0; i < MAX_ENGINES; i++) {
      if (engines[i] == NULL) {
        engines[i] = *out;
        break;
      }
    }
    pthread_mutex_unlock(&engines_lock);
  }
  return r;
}

void __wrap_tern_engine_free(tern_engine_t *engine) {
  pthread_mutex_lock(&engines_lock);
  for (int i = 0; i < MAX_ENGINES; i++) {
    if (engine != NULL && engines[i] == engine) engines[i] = NULL;
  }
  pthread_mutex_unlock(&engines_lock);
  __real_tern_engine_free(engine);
}

/* Requests in a plain malloc'd array: the harness's own memory is never subject to injection. */
static tern_request_t **requests;
static size_t nrequests, caprequests;

int __real_tern_request_new(tern_request_t **out);
void __real_tern_request_free(tern_request_t *req);
int __wrap_tern_request_new(tern_request_t **out);
void __wrap_tern_request_free(tern_request_t *req);

int __wrap_tern_request_new(tern_request_t **out) {
  int r = __real_tern_request_new(out);
  if (r != 0) return r;
  tern_request_t *req = *out;
  pthread_mutex_lock(&engines_lock);
  if (nrequests == caprequests) {
    size_t cap = caprequests ? 2 * caprequests : 64;
    tern_request_t **p = realloc(requests, cap * sizeof *p);
    if (p == NULL) abort();
    requests = p;
    caprequests = cap;
  }
  requests[nrequests++] = req;
  pthread_mutex_unlock(&engines_lock);
  return 0;
}

void __wrap_tern_request_free(tern_request_t *req) {
  pthread_mutex_lock(&engines_lock);
  for (size_t i = nrequests; i-- > 0;) {
    if (req != NULL && requests[i] == req) {
      requests[i] = requests[--nrequests];
      break;
    }
  }
  pthread_mutex_unlock(&engines_lock);
  __real_tern_request_free(req);
}

int torture_free_requests(void) {
  int n = 0;
  for (;;) {
    tern_request_t *req = NULL;
    pthread_mutex_lock(&engines_lock);
    if (nrequests > 0) req = requests[nrequests - 1];
    pthread_mutex_unlock(&engines_lock);
    if (req == NULL) break;
    __wrap_tern_request_free(req);
    n++;
  }
  free(requests);
  requests = NULL;
  caprequests = 0;
  return n;
}

int torture_free_engines(void) {
  int n = 0;
  for (;;) {
    tern_engine_t *eng = NULL;
    pthread_mutex_lock(&engines_lock);
    for (int i = 0; i < MAX_ENGINES && eng == NULL; i++) eng = engines[i];
    pthread_mutex_unlock(&engines_lock);
    if (eng == NULL) return n;
    __wrap_tern_engine_free(eng);
    n++;
  }
}
