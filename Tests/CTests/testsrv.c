/* testsrv.c — see testsrv.h. */
#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#  undef _POSIX_C_SOURCE
#  define _POSIX_C_SOURCE 200809L
#endif

#include "testsrv.h"

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TESTSRV_MAX_KEYS 128

static struct {
  char *key;
  char *value;
} entries[TESTSRV_MAX_KEYS];
static size_t entry_count;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

#if defined(__GNUC__) || defined(__clang__)
__attribute__((noreturn, format(printf, 1, 2)))
#endif
static void
testsrv_die(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "testsrv: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  fflush(stderr);
  abort();
}

static char *xstrndup(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (p == NULL) testsrv_die("out of memory");
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

static void load_env(void) {
  const char *state = getenv("TERN_TEST_STATE");
  if (state == NULL || state[0] == '\0')
    testsrv_die(
        "TERN_TEST_STATE is not set: it must name the state dir of "
        "`Tests/TestServer/servers.py start STATE_DIR` (ctest sets it through the "
        "servers fixture; by hand: export TERN_TEST_STATE=/tmp/tern-state)");
  size_t len = strlen(state) + sizeof "/env";
  char *path = malloc(len);
  if (path == NULL) testsrv_die("out of memory");
  snprintf(path, len, "%s/env", state);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    testsrv_die(
        "cannot read %s (%s): are the test servers running? "
        "Start them with `python3 Tests/TestServer/servers.py start %s`",
        path, strerror(errno), state);
  char line[4096];
  while (fgets(line, sizeof line, f) != NULL) {
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    char *eq = strchr(line, '=');
    if (eq == NULL || eq == line) continue;
    if (entry_count == TESTSRV_MAX_KEYS) testsrv_die("%s: too many keys", path);
    entries[entry_count].key = xstrndup(line, (size_t)(eq - line));
    entries[entry_count].value = xstrndup(eq + 1, strlen(eq + 1));
    entry_count++;
  }
  fclose(f);
  if (entry_count == 0) testsrv_die("%s holds no KEY=VALUE lines", path);
  free(path);
}

const char *testsrv_get(const char *key) {
  pthread_once(&load_once, load_env);
  const char *found = NULL;
  for (size_t i = 0; i < entry_count; i++) /* the last one wins, like a shell */
    if (strcmp(entries[i].key, key) == 0) found = entries[i].value;
  return found;
}

int testsrv_port(const char *key) {
  const char *v = testsrv_get(key);
  if (v == NULL) testsrv_die("no %s in $TERN_TEST_STATE/env", key);
  char *end;
  errno = 0;
  long port = strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || port <= 0 || port > 65535)
    testsrv_die("%s=%s in $TERN_TEST_STATE/env is not a port", key, v);
  return (int)port;
}

char *testsrv_url(const char *portkey, const char *path) {
  int port = testsrv_port(portkey);
  if (path == NULL) path = "";
  const char *slash = path[0] == '/' ? "" : "/";
  int n = snprintf(NULL, 0, "http://127.0.0.1:%d%s%s", port, slash, path);
  if (n < 0) testsrv_die("snprintf failed");
  char *url = malloc((size_t)n + 1);
  if (url == NULL) testsrv_die("out of memory");
  snprintf(url, (size_t)n + 1, "http://127.0.0.1:%d%s%s", port, slash, path);
  return url;
}

int testsrv_has_ipv6(void) {
  const char *v6 = testsrv_get("NGINX_IPV6");
  return v6 != NULL && strcmp(v6, "1") == 0;
}

char *testsrv_www_path(const char *name) {
  const char *www = testsrv_get("WWW");
  if (www == NULL) testsrv_die("no WWW in $TERN_TEST_STATE/env");
  size_t len = strlen(www) + 1 + strlen(name) + 1;
  char *p = malloc(len);
  if (p == NULL) testsrv_die("out of memory");
  snprintf(p, len, "%s/%s", www, name);
  return p;
}

static EVP_MD_CTX *sha_begin(void) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
    testsrv_die("EVP_DigestInit_ex(sha256) failed");
  return ctx;
}

static void sha_update(EVP_MD_CTX *ctx, const void *p, size_t n) {
  if (n > 0 && EVP_DigestUpdate(ctx, p, n) != 1) testsrv_die("EVP_DigestUpdate failed");
}

static void sha_end(EVP_MD_CTX *ctx, char hex[65]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  if (EVP_DigestFinal_ex(ctx, md, &md_len) != 1 || md_len != 32)
    testsrv_die("EVP_DigestFinal_ex failed");
  EVP_MD_CTX_free(ctx);
  static const char digits[] = "0123456789abcdef";
  for (unsigned int i = 0; i < md_len; i++) {
    hex[2 * i] = digits[md[i] >> 4];
    hex[2 * i + 1] = digits[md[i] & 15];
  }
  hex[64] = '\0';
}

int testsrv_sha256_file(const char *path, char hex[65]) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return -1;
  EVP_MD_CTX *ctx = sha_begin();
  static const size_t bufsize = 1 << 16;
  unsigned char *buf = malloc(bufsize);
  if (buf == NULL) testsrv_die("out of memory");
  size_t n;
  while ((n = fread(buf, 1, bufsize, f)) > 0) sha_update(ctx, buf, n);
  int failed = ferror(f);
  int saved = errno;
  free(buf);
  fclose(f);
  if (failed) {
    EVP_MD_CTX_free(ctx);
    errno = saved != 0 ? saved : EIO;
    return -1;
  }
  sha_end(ctx, hex);
  return 0;
}

void testsrv_sha256_mem(const void *p, size_t n, char hex[65]) {
  EVP_MD_CTX *ctx = sha_begin();
  sha_update(ctx, p, n);
  sha_end(ctx, hex);
}

void testsrv_pattern_fill(void *buf, size_t n, uint64_t offset) {
  unsigned char *b = buf;
  unsigned v = (unsigned)(offset % TESTSRV_PATTERN_MOD);
  for (size_t i = 0; i < n; i++) {
    b[i] = (unsigned char)v;
    if (++v == TESTSRV_PATTERN_MOD) v = 0;
  }
}

void testsrv_pattern_sha256(uint64_t n, char hex[65]) {
  /* 251 * 261 bytes: a whole number of periods, so every block starts at pattern offset 0. */
  enum { BLOCK = TESTSRV_PATTERN_MOD * 261 };
  unsigned char *buf = malloc(BLOCK);
  if (buf == NULL) testsrv_die("out of memory");
  testsrv_pattern_fill(buf, BLOCK, 0);
  EVP_MD_CTX *ctx = sha_begin();
  while (n > 0) {
    size_t k = n < BLOCK ? (size_t)n : (size_t)BLOCK;
    sha_update(ctx, buf, k);
    n -= k;
  }
  free(buf);
  sha_end(ctx, hex);
}
