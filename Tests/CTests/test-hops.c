/* Hops: redirects (method and body rules, relative Location, limits, bad values, downgrade,
 * cross-origin credential stripping), authentication (Basic against nginx and lighttpd, Digest
 * MD5 against Apache's mod_auth_digest, Digest SHA-256 and MD5 against lighttpd, credentials
 * from the request, the URL and a callback, malformed challenges) and HTTP proxies (squid:
 * absolute-form, CONNECT, Basic and Digest proxy authentication, pooling per proxy).
 * Every server here is a real, independent implementation started by
 * Tests/TestServer/servers.py; the fault server supplies redirects, loops, bad Location values,
 * malformed challenges and the request echo. */
#define _DEFAULT_SOURCE
#include "task.h"
#include "testsrv.h"
#include "testutil.h"

#include <tern.h>

#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <strings.h>
#include <unistd.h>

/* ---- harness ---- */

#define fmt test_fmt /* malloc'd printf (testutil.c) */

/* Percent-encodes everything but unreserved characters (for a query value). malloc'd. */
static char *qenc(const char *s) {
  size_t n = strlen(s);
  char *out = malloc(3 * n + 1);
  ASSERT(out != NULL);
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out[j++] = (char)c;
    } else {
      snprintf(out + j, 4, "%%%02X", c);
      j += 3;
    }
  }
  out[j] = '\0';
  return out;
}

/* "http://127.0.0.1:PORT" + printf-formatted path. malloc'd. */
static char *url_at(const char *portkey, const char *pathfmt, ...) {
  va_list ap;
  va_start(ap, pathfmt);
  int n = vsnprintf(NULL, 0, pathfmt, ap);
  va_end(ap);
  char *path = malloc((size_t)n + 1);
  va_start(ap, pathfmt);
  vsnprintf(path, (size_t)n + 1, pathfmt, ap);
  va_end(ap);
  char *u = fmt("http://127.0.0.1:%d%s", testsrv_port(portkey), path);
  free(path);
  return u;
}

/* A fault-server /redirect URL answering `status` with Location `to` (sent verbatim). */
static char *redirect_url(int status, const char *to) {
  char *e = qenc(to);
  char *u = url_at("FAULT_PORT", "/redirect?status=%d&to=%s", status, e);
  free(e);
  return u;
}

static tern_request_t *request_owned(char *url) {
  tern_request_t *req = test_request_url(url);
  free(url);
  return req;
}

static bool body_contains(tern_request_t *req, const char *needle) {
  char *b = test_req_body_str(req);
  bool found = strstr(b, needle) != NULL;
  if (!found) fprintf(stderr, "body does not contain %s:\n%s\n", needle, b);
  free(b);
  return found;
}

static bool body_contains_no_log(tern_request_t *req, const char *needle) {
  char *b = test_req_body_str(req);
  bool found = strstr(b, needle) != NULL;
  free(b);
  return found;
}

/* Case-insensitive strstr (strcasestr is a GNU extension). */
static const char *ci_find(const char *hay, const char *needle) {
  size_t n = strlen(needle);
  for (; *hay; hay++)
    if (strncasecmp(hay, needle, n) == 0) return hay;
  return NULL;
}

static const char *head_of(tern_request_t *req) {
  size_t len = 0;
  const char *h = tern_request_get_request_head(req, &len);
  ASSERT(h != NULL);
  return h;
}

static const char *echoed(tern_request_t *req, const char *what) {
  char name[64];
  snprintf(name, sizeof name, "X-Echo-%s", what);
  return tern_request_get_header(req, name);
}

static const char *user(void) { return testsrv_get("AUTH_USER"); }
static const char *password(void) { return testsrv_get("AUTH_PASSWORD"); }

/* The fault server's body pattern, n bytes (malloc'd), and its SHA-256. */
static unsigned char *pattern_body(size_t n, char hex[65]) {
  unsigned char *b = malloc(n ? n : 1);
  ASSERT(b != NULL);
  testsrv_pattern_fill(b, n, 0);
  testsrv_sha256_mem(b, n, hex);
  return b;
}

/* ---- hop log: what the hop callbacks saw ---- */

#define MAX_HOPS 40
typedef struct {
  int n; /* hop responses */
  int status[MAX_HOPS];
  char cookie[MAX_HOPS][128]; /* Set-Cookie of each hop ("" when none) */
  bool authz[MAX_HOPS];       /* the hop's request carried Authorization (X-Echo-Authorization) */
  int nreq;                   /* hop requests */
  char url[MAX_HOPS][256];
  bool add_cookie;        /* the hop-request callback adds "Cookie: hop=K" */
  int cancel_request_at;  /* hop request number (1-based) to cancel at, 0: never */
  int cancel_response_at; /* same for hop responses */
  int add_hop_header_rc;
  bool final[MAX_HOPS]; /* tern_request_is_final_hop inside the callback */
  bool via[MAX_HOPS];   /* the hop's response came through squid (a Via field) */
} hop_log;

static int on_hop_response(tern_request_t *req, int status, void *ud) {
  hop_log *h = ud;
  ASSERT_LT(h->n, MAX_HOPS);
  h->status[h->n] = status;
  const char *c = tern_request_get_header(req, "Set-Cookie");
  snprintf(h->cookie[h->n], sizeof h->cookie[0], "%s", c ? c : "");
  h->authz[h->n] = tern_request_get_header(req, "X-Echo-Authorization") != NULL;
  h->final[h->n] = tern_request_is_final_hop(req) != 0;
  const char *via = tern_request_get_header(req, "Via");
  h->via[h->n] = via && strstr(via, "tern-squid") != NULL;
  h->n++;
  return h->cancel_response_at && h->n == h->cancel_response_at;
}

static int on_hop_request(tern_request_t *req, const char *url, void *ud) {
  hop_log *h = ud;
  ASSERT_LT(h->nreq, MAX_HOPS);
  ASSERT(url != NULL);
  snprintf(h->url[h->nreq], sizeof h->url[0], "%s", url);
  h->nreq++;
  if (h->add_cookie) {
    char v[32];
    snprintf(v, sizeof v, "hop=%d", h->nreq - 1);
    h->add_hop_header_rc = tern_request_add_hop_header(req, "Cookie", v);
    ASSERT_EQ(h->add_hop_header_rc, 0);
  }
  return h->cancel_request_at && h->nreq == h->cancel_request_at;
}

static void watch_hops(tern_request_t *req, hop_log *h) {
  ASSERT_EQ(tern_request_set_hop_response_cb(req, on_hop_response, h), 0);
  ASSERT_EQ(tern_request_set_hop_request_cb(req, on_hop_request, h), 0);
}

/* ==== redirects ============================================================================ */

TEST(redirect_not_followed_by_default) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = redirect_url(302, "/echo");
  tern_request_t *req = test_request_url(url);
  ASSERT_STR_EQ(tern_request_get_effective_url(req), url);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 302);
  ASSERT_STR_EQ(tern_request_get_header(req, "Location"), "/echo");
  ASSERT_EQ(tern_request_get_redirect_count(req), 0);
  ASSERT_STR_EQ(tern_request_get_effective_url(req), url);
  ASSERT(body_contains(req, "redirect\n"));
  tern_request_free(req);
  free(url);
  test_finish(eng);
}

TEST(redirect_get_every_status) {
  tern_engine_t *eng = test_engine_new(NULL);
  static const int codes[] = { 301, 302, 303, 307, 308 };
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    tern_request_t *req = request_owned(redirect_url(codes[i], "/echo?from=x"));
    ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
    ASSERT_EQ(test_run(eng, req), 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    ASSERT_EQ(tern_request_get_redirect_count(req), 1);
    ASSERT_STR_EQ(echoed(req, "Method"), "GET");
    ASSERT(body_contains(req, "\"target\": \"/echo?from=x\""));
    char *want = url_at("FAULT_PORT", "/echo?from=x");
    ASSERT_STR_EQ(tern_request_get_effective_url(req), want);
    free(want);
    tern_request_free(req);
  }
  test_finish(eng);
}

/* POST with a body through one redirect of `code`, with `flags`; returns the final request. */
static tern_request_t *post_through(tern_engine_t *eng, const char *method, int code,
                                    unsigned flags, const void *body, size_t n, hop_log *h) {
  tern_request_t *req = request_owned(redirect_url(code, "/echo"));
  ASSERT_EQ(tern_request_set_method(req, method), 0);
  ASSERT_EQ(tern_request_set_body(req, body, n), 0);
  ASSERT_EQ(tern_request_add_header(req, "Content-Type", "application/x-www-form-urlencoded"), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 3), 0);
  ASSERT_EQ(tern_request_set_redirect_flags(req, flags), 0);
  watch_hops(req, h);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(tern_request_get_redirect_count(req), 1);
  ASSERT_EQ(h->n, 2);
  ASSERT_EQ(h->status[0], code);
  return req;
}

static void assert_became_get(tern_request_t *req) {
  ASSERT_STR_EQ(echoed(req, "Method"), "GET");
  ASSERT_STR_EQ(echoed(req, "Body-Length"), "0");
  const char *head = head_of(req);
  ASSERT(strncmp(head, "GET /echo HTTP/1.1\r\n", 20) == 0);
  ASSERT(ci_find(head, "\r\nContent-Length:") == NULL);
  ASSERT(ci_find(head, "\r\nTransfer-Encoding:") == NULL);
  ASSERT(ci_find(head, "\r\nContent-Type:") == NULL); /* it went with the body, as in curl */
}

static void assert_kept(tern_request_t *req, const char *method, size_t n, const char *sha) {
  ASSERT_STR_EQ(echoed(req, "Method"), method);
  char len[32];
  snprintf(len, sizeof len, "%zu", n);
  ASSERT_STR_EQ(echoed(req, "Body-Length"), len);
  ASSERT_STR_EQ(echoed(req, "Body-Sha256"), sha);
}

TEST(redirect_post_becomes_get_on_301_302_303) {
  tern_engine_t *eng = test_engine_new(NULL);
  char sha[65];
  unsigned char *body = pattern_body(5000, sha);
  static const int codes[] = { 301, 302, 303 };
  for (size_t i = 0; i < 3; i++) {
    hop_log h = { 0 };
    tern_request_t *req = post_through(eng, "POST", codes[i], 0, body, 5000, &h);
    assert_became_get(req);
    tern_request_free(req);
  }
  free(body);
  test_finish(eng);
}

TEST(redirect_307_308_keep_method_and_body) {
  tern_engine_t *eng = test_engine_new(NULL);
  char sha[65];
  size_t n = 200000;
  unsigned char *body = pattern_body(n, sha);
  static const int codes[] = { 307, 308 };
  static const char *methods[] = { "POST", "PUT", "PATCH" };
  for (size_t i = 0; i < 2; i++) {
    for (size_t m = 0; m < 3; m++) {
      hop_log h = { 0 };
      tern_request_t *req = post_through(eng, methods[m], codes[i], 0, body, n, &h);
      assert_kept(req, methods[m], n, sha);
      ASSERT(ci_find(head_of(req), "\r\nContent-Type: application/x-www-form-urlencoded") != NULL);
      tern_request_free(req);
    }
  }
  free(body);
  test_finish(eng);
}

TEST(redirect_308_resends_file_and_segment_bodies) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* A file body: read again from the file for the second hop. */
  char *path = testsrv_www_path("64k.txt");
  tern_request_t *req = request_owned(redirect_url(308, "/echo"));
  ASSERT_EQ(tern_request_set_method(req, "PUT"), 0);
  ASSERT_EQ(tern_request_set_body_file(req, path, 0, 0), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 3), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  assert_kept(req, "PUT", 65536, testsrv_get("SHA_64K"));
  tern_request_free(req);
  /* Segments: memory + file slice + memory. */
  req = request_owned(redirect_url(307, "/echo"));
  ASSERT_EQ(tern_request_set_method(req, "POST"), 0);
  ASSERT_EQ(tern_request_add_body_segment(req, "head-", 5), 0);
  ASSERT_EQ(tern_request_add_body_segment_file(req, path, 100, 1100), 0);
  ASSERT_EQ(tern_request_add_body_segment(req, "-tail", 5), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 3), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  char *want = malloc(1010);
  memcpy(want, "head-", 5);
  int fd = open(path, O_RDONLY);
  ASSERT(fd >= 0);
  ASSERT_EQ(pread(fd, want + 5, 1000, 100), 1000);
  close(fd);
  memcpy(want + 1005, "-tail", 5);
  char sha[65];
  testsrv_sha256_mem(want, 1010, sha);
  assert_kept(req, "POST", 1010, sha);
  free(want);
  tern_request_free(req);
  free(path);
  test_finish(eng);
}

TEST(redirect_post_flags_keep_post) {
  tern_engine_t *eng = test_engine_new(NULL);
  char sha[65];
  unsigned char *body = pattern_body(3000, sha);
  static const struct {
    int code;
    unsigned flag;
  } cases[] = { { 301, TERN_REDIRECT_POST_301 },
                { 302, TERN_REDIRECT_POST_302 },
                { 303, TERN_REDIRECT_POST_303 } };
  for (size_t i = 0; i < 3; i++) {
    hop_log h = { 0 };
    tern_request_t *req = post_through(eng, "POST", cases[i].code, cases[i].flag, body, 3000, &h);
    assert_kept(req, "POST", 3000, sha);
    tern_request_free(req);
  }
  /* Each flag is for its own code: POST_301|POST_303 still turns a 302 into a GET. */
  hop_log h = { 0 };
  tern_request_t *req = post_through(
      eng, "POST", 302, TERN_REDIRECT_POST_301 | TERN_REDIRECT_POST_303, body, 3000, &h);
  assert_became_get(req);
  tern_request_free(req);
  free(body);
  test_finish(eng);
}

TEST(redirect_other_methods_on_301_302_and_303) {
  tern_engine_t *eng = test_engine_new(NULL);
  char sha[65];
  unsigned char *body = pattern_body(777, sha);
  /* Only POST changes on 301/302: a PUT stays a PUT with its body. */
  static const int keep[] = { 301, 302 };
  for (size_t i = 0; i < 2; i++) {
    hop_log h = { 0 };
    tern_request_t *req = post_through(eng, "PUT", keep[i], 0, body, 777, &h);
    assert_kept(req, "PUT", 777, sha);
    tern_request_free(req);
  }
  /* 303 turns anything into a GET without a body. */
  hop_log h = { 0 };
  tern_request_t *req = post_through(eng, "DELETE", 303, 0, body, 777, &h);
  assert_became_get(req);
  tern_request_free(req);
  free(body);
  test_finish(eng);
}

typedef struct {
  const unsigned char *data;
  size_t len, off;
  int calls;
} cb_body;

static int64_t read_cb_body(tern_request_t *req, void *buf, size_t cap, void *ud) {
  (void)req;
  cb_body *b = ud;
  b->calls++;
  size_t k = b->len - b->off < cap ? b->len - b->off : cap;
  memcpy(buf, b->data + b->off, k);
  b->off += k;
  return (int64_t)k;
}

TEST(redirect_callback_body_cannot_be_replayed) {
  tern_engine_t *eng = test_engine_new(NULL);
  char sha[65];
  unsigned char *body = pattern_body(4096, sha);
  /* 307 must send the body again: a callback body cannot be, so the redirect is refused. */
  cb_body src = { body, 4096, 0, 0 };
  hop_log h = { 0 };
  tern_request_t *req = request_owned(redirect_url(307, "/echo"));
  ASSERT_EQ(tern_request_set_method(req, "POST"), 0);
  ASSERT_EQ(tern_request_set_body_cb(req, 4096, read_cb_body, &src), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 3), 0);
  watch_hops(req, &h);
  ASSERT_EQ(test_run(eng, req), TERN_EREDIRECT);
  ASSERT_EQ(h.nreq, 1);
  tern_request_free(req);
  /* 303 drops the body: nothing to replay, so it is followed. */
  cb_body src2 = { body, 4096, 0, 0 };
  req = request_owned(redirect_url(303, "/echo"));
  ASSERT_EQ(tern_request_set_method(req, "POST"), 0);
  ASSERT_EQ(tern_request_set_body_cb(req, 4096, read_cb_body, &src2), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 3), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  assert_became_get(req);
  tern_request_free(req);
  free(body);
  test_finish(eng);
}

/* Follows one redirect from `base_path` (a fault-server path ending in /redirect) to the
 * Location `to` and checks the echo saw `target`. */
static void relative_case(tern_engine_t *eng, const char *base_path, const char *to,
                          const char *target) {
  char *e = qenc(to);
  tern_request_t *req = request_owned(url_at("FAULT_PORT", "%s?to=%s", base_path, e));
  free(e);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 3), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(tern_request_get_redirect_count(req), 1);
  char *needle = fmt("\"target\": \"%s\"", target);
  if (!body_contains(req, needle)) TEST_FAIL_("Location %s from %s: wrong target", to, base_path);
  free(needle);
  char *want = url_at("FAULT_PORT", "%s", target);
  ASSERT_STR_EQ(tern_request_get_effective_url(req), want);
  free(want);
  tern_request_free(req);
}

TEST(redirect_relative_locations) {
  tern_engine_t *eng = test_engine_new(NULL);
  const char *base = "/nest/a/b/redirect";
  relative_case(eng, base, "echo", "/nest/a/b/echo");                      /* path-relative */
  relative_case(eng, base, "./c/echo?k=v", "/nest/a/b/c/echo?k=v");        /* ./ */
  relative_case(eng, base, "../echo", "/nest/a/echo");                     /* ../ */
  relative_case(eng, base, "../../../../../echo", "/echo");                /* excess ../ */
  relative_case(eng, base, "/nest/x/./y/../echo?q=1", "/nest/x/echo?q=1"); /* absolute path */
  relative_case(eng, base, "echo#fragment", "/nest/a/b/echo");             /* fragment not sent */
  relative_case(eng, base, "?q=2", "/nest/a/b/redirect?q=2");              /* query only */
  test_finish(eng);
}

TEST(redirect_absolute_and_scheme_relative_locations) {
  tern_engine_t *eng = test_engine_new(NULL);
  int other = testsrv_port("FAULT2_PORT");
  /* Scheme-relative: //host:port/path takes the scheme of the base. */
  char *to = fmt("//127.0.0.1:%d/echo?s=1", other);
  tern_request_t *req = request_owned(redirect_url(302, to));
  free(to);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 3), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  char *want = url_at("FAULT2_PORT", "/echo?s=1");
  ASSERT_STR_EQ(tern_request_get_effective_url(req), want);
  free(want);
  ASSERT(body_contains(req, "\"target\": \"/echo?s=1\""));
  tern_request_free(req);
  /* Absolute, to nginx (another server altogether). */
  char *abs = url_at("NGINX_PORT", "/1k.bin");
  req = request_owned(redirect_url(301, abs));
  ASSERT_EQ(tern_request_set_follow_redirects(req, 3), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_STR_EQ(tern_request_get_effective_url(req), abs);
  test_assert_req_body_sha(req, "SHA_1K");
  free(abs);
  tern_request_free(req);
  test_finish(eng);
}

TEST(redirect_chain_count_and_effective_url) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = url_at("FAULT_PORT", "/redirect-chain?n=5");
  tern_request_t *req = test_request_url(url);
  hop_log h = { 0 };
  watch_hops(req, &h);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(tern_request_get_redirect_count(req), 5);
  char *want = url_at("FAULT_PORT", "/redirect-chain?n=5&i=5&status=302");
  ASSERT_STR_EQ(tern_request_get_effective_url(req), want);
  free(want);
  ASSERT_EQ(h.n, 6);
  ASSERT_EQ(h.nreq, 6);
  for (int i = 0; i < 5; i++) ASSERT_EQ(h.status[i], 302);
  ASSERT_EQ(h.status[5], 200);
  ASSERT_STR_EQ(h.url[0], url);
  /* The final response's headers and body are the last hop's. */
  ASSERT(tern_request_get_header(req, "Location") == NULL);
  ASSERT(body_contains(req, "\"target\": \"/redirect-chain?n=5&i=5&status=302\""));
  free(url);
  tern_request_free(req);
  /* Absolute Locations, 307 every time. */
  req = request_owned(url_at("FAULT_PORT", "/redirect-chain?n=3&status=307&absolute=1"));
  ASSERT_EQ(tern_request_set_follow_redirects(req, 3), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(tern_request_get_redirect_count(req), 3);
  tern_request_free(req);
  test_finish(eng);
}

TEST(redirect_too_many) {
  tern_engine_t *eng = test_engine_new(NULL);
  hop_log h = { 0 };
  tern_request_t *req = request_owned(url_at("FAULT_PORT", "/redirect-chain?n=5"));
  watch_hops(req, &h);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 4), 0);
  ASSERT_EQ(test_run(eng, req), TERN_ETOOMANYREDIRECTS);
  /* Four followed; the fifth 302 is one too many. */
  ASSERT_EQ(h.n, 5);
  ASSERT_EQ(h.nreq, 5);
  ASSERT_LE(tern_request_get_redirect_count(req), 5);
  ASSERT_GE(tern_request_get_redirect_count(req), 4);
  ASSERT(strcmp(tern_strerror(TERN_ETOOMANYREDIRECTS), "too many redirects") == 0);
  tern_request_free(req);
  test_finish(eng);
}

TEST(redirect_loop) {
  tern_engine_t *eng = test_engine_new(NULL);
  hop_log h = { 0 };
  tern_request_t *req = request_owned(url_at("FAULT_PORT", "/redirect-loop?status=301"));
  watch_hops(req, &h);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 20), 0);
  ASSERT_EQ(test_run(eng, req), TERN_ETOOMANYREDIRECTS);
  ASSERT_EQ(h.n, 21);
  for (int i = 0; i < h.n; i++) ASSERT_EQ(h.status[i], 301);
  tern_request_free(req);
  /* A loop is only a loop when it is followed: without following, the 301 is the answer. */
  req = request_owned(url_at("FAULT_PORT", "/redirect-loop"));
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 302);
  tern_request_free(req);
  test_finish(eng);
}

TEST(redirect_bad_locations) {
  tern_engine_t *eng = test_engine_new(NULL);
  static const char *bad[] = {
    "http://",                 /* no host */
    "ftp://x/file",            /* unsupported scheme */
    "gopher://127.0.0.1:70/",  /* unsupported scheme */
    "http://127.0.0.1:99999/", /* port out of range */
    "http://[::1/",            /* unterminated IPv6 literal */
    "http://127.0.0.1:12ab/",  /* port not a number */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    hop_log h = { 0 };
    tern_request_t *req = request_owned(redirect_url(302, bad[i]));
    watch_hops(req, &h);
    ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
    int err = test_run(eng, req);
    if (err != TERN_EREDIRECT)
      TEST_FAIL_("Location \"%s\": error %s (%s), status %d, want EREDIRECT", bad[i],
                 tern_err_name(err), tern_request_get_error_message(req),
                 tern_request_get_status(req));
    ASSERT_EQ(h.nreq, 1);
    ASSERT_STR_EQ(tern_request_get_effective_url(req), h.url[0]);
    tern_request_free(req);
  }
  test_finish(eng);
}

/* An empty Location names no target: the 3xx is the final response, as curl has it. */
TEST(redirect_empty_location_is_final) {
  tern_engine_t *eng = test_engine_new(NULL);
  hop_log h = { 0 };
  tern_request_t *req = request_owned(redirect_url(302, ""));
  watch_hops(req, &h);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 302);
  ASSERT_EQ(tern_request_get_redirect_count(req), 0);
  ASSERT_EQ(h.nreq, 1);
  tern_request_free(req);
  test_finish(eng);
}

TEST(redirect_location_with_spaces) {
  /* Spaces are not allowed in a URI reference. curl percent-encodes them and follows
   * (GET /garbage%20with%20spaces, a 404 here); refusing is the other defensible answer. Either
   * way: no crash, no raw space on the wire. */
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = request_owned(redirect_url(302, "garbage with spaces"));
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  int err = test_run(eng, req);
  fprintf(stderr, "Location with spaces: %s\n", err == 0 ? "followed, percent-encoded" : "refused");
  if (err == 0) {
    ASSERT_EQ(tern_request_get_status(req), 404);
    char *want = url_at("FAULT_PORT", "/garbage%%20with%%20spaces");
    ASSERT_STR_EQ(tern_request_get_effective_url(req), want);
    free(want);
  } else {
    ASSERT_EQ(err, TERN_EREDIRECT);
  }
  tern_request_free(req);
  test_finish(eng);
}

TEST(redirect_without_location_is_final) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req =
      request_owned(url_at("FAULT_PORT", "/redirect?status=302&to=x&nolocation=1"));
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 302);
  ASSERT_EQ(tern_request_get_redirect_count(req), 0);
  tern_request_free(req);
  /* 300 and 304 are not redirects to follow. */
  req = request_owned(url_at("FAULT_PORT", "/redirect?status=300&to=/echo"));
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 300);
  tern_request_free(req);
  test_finish(eng);
}

TEST(redirect_https_to_http_downgrade) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = fmt("https://localhost:%d/to-http/1k.bin", testsrv_port("TLS_PORT"));
  /* Refused by default. */
  tern_request_t *req = test_request_url(url);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  hop_log h = { 0 };
  watch_hops(req, &h);
  ASSERT_EQ(test_run(eng, req), TERN_EREDIRECT);
  ASSERT_EQ(h.nreq, 1);
  ASSERT_EQ(h.n, 1);
  ASSERT_EQ(h.status[0], 302);
  tern_request_free(req);
  /* Followed when allowed. */
  req = test_request_url(url);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(tern_request_set_redirect_flags(req, TERN_REDIRECT_ALLOW_DOWNGRADE), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  char *want = url_at("NGINX_PORT", "/1k.bin");
  ASSERT_STR_EQ(tern_request_get_effective_url(req), want);
  test_assert_req_body_sha(req, "SHA_1K");
  /* The final hop's connection is plain HTTP (checked last, see below). */
  const char *tls_after_downgrade = tern_request_get_tls_version(req);
  bool plain_after_downgrade = tls_after_downgrade == NULL;
  free(want);
  tern_request_free(req);
  /* https -> https on the same server is no downgrade. */
  free(url);
  url = fmt("https://localhost:%d/redirect/1k.bin", testsrv_port("TLS_PORT"));
  req = test_request_url(url);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT(tern_request_get_tls_version(req) != NULL);
  test_assert_req_body_sha(req, "SHA_1K");
  tern_request_free(req);
  free(url);
  test_finish(eng);
  if (!plain_after_downgrade)
    TEST_FAIL_(
        "after the downgrade to http, tern_request_get_tls_version still says a TLS "
        "version (the first hop's)");
}

TEST(redirect_http_to_https_upgrade) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *to = fmt("https://localhost:%d/1k.bin", testsrv_port("TLS_PORT"));
  tern_request_t *req = request_owned(redirect_url(301, to));
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_STR_EQ(tern_request_get_effective_url(req), to);
  ASSERT(tern_request_get_tls_version(req) != NULL);
  test_assert_req_body_sha(req, "SHA_1K");
  tern_request_free(req);
  free(to);
  test_finish(eng);
}

static int count_data(tern_request_t *req, const void *data, size_t len, void *ud) {
  (void)req;
  (void)data;
  *(uint64_t *)ud += len;
  return 0;
}

TEST(redirect_only_last_body_reaches_sink) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* nginx's 302 carries an HTML body; only the target's bytes may land anywhere. */
  tern_request_t *req = request_owned(url_at("NGINX_PORT", "/redirect/1k.bin"));
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT_UEQ(tern_request_get_bytes_delivered(req), 1024);
  tern_request_free(req);
  /* Streaming sink. */
  uint64_t got = 0;
  req = request_owned(url_at("NGINX_PORT", "/redirect/1k.bin"));
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(tern_request_set_data_cb(req, count_data, &got), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_UEQ(got, 1024);
  tern_request_free(req);
  /* Download file: a 2xx body only, and it is the target's. */
  char *dest = test_tmp_path("hops-redirect.bin");
  char *to = url_at("NGINX_PORT", "/1k.bin");
  char *e = qenc(to);
  req = request_owned(url_at("FAULT_PORT", "/redirect?status=307&size=5000&to=%s", e));
  free(e);
  free(to);
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 0), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_file_sha(dest, "SHA_1K");
  unlink(dest);
  free(dest);
  tern_request_free(req);
  test_finish(eng);
}

TEST(redirect_hop_callbacks_see_every_hop) {
  tern_engine_t *eng = test_engine_new(NULL);
  hop_log h = { 0 };
  h.add_cookie = true;
  char *url = url_at("FAULT_PORT", "/redirect-chain?n=3");
  tern_request_t *req = test_request_url(url);
  watch_hops(req, &h);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 10), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(h.n, 4);
  ASSERT_EQ(h.nreq, 4);
  /* Each hop's Set-Cookie reached the hop-response callback. */
  ASSERT_STR_EQ(h.cookie[0], "chain0=0; Path=/");
  ASSERT_STR_EQ(h.cookie[1], "chain1=1; Path=/");
  ASSERT_STR_EQ(h.cookie[2], "chain2=2; Path=/");
  ASSERT_STR_EQ(h.cookie[3], "");
  /* Each hop's URL reached the hop-request callback. */
  ASSERT_STR_EQ(h.url[0], url);
  for (int i = 1; i < 4; i++) {
    char *want = url_at("FAULT_PORT", "/redirect-chain?n=3&i=%d&status=302", i);
    ASSERT_STR_EQ(h.url[i], want);
    free(want);
  }
  /* The Cookie added for the last hop is the only one it carried. */
  ASSERT_STR_EQ(echoed(req, "Cookie"), "hop=3");
  ASSERT(body_contains(req, "[\"Cookie\", \"hop=3\"]"));
  char *b = test_req_body_str(req);
  ASSERT(strstr(strstr(b, "\"Cookie\"") + 1, "\"Cookie\"") == NULL); /* exactly one */
  free(b);
  free(url);
  tern_request_free(req);
  test_finish(eng);
}

TEST(redirect_hop_callbacks_cancel) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* The hop-request callback cancels the second hop before it is sent. */
  hop_log h = { 0 };
  h.cancel_request_at = 2;
  tern_request_t *req = request_owned(url_at("FAULT_PORT", "/redirect-chain?n=3"));
  watch_hops(req, &h);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 10), 0);
  ASSERT_EQ(test_run(eng, req), TERN_ECANCELED);
  ASSERT_EQ(h.nreq, 2);
  ASSERT_EQ(h.n, 1);
  tern_request_free(req);
  /* The hop-response callback cancels at the first 302. */
  hop_log h2 = { 0 };
  h2.cancel_response_at = 1;
  req = request_owned(url_at("FAULT_PORT", "/redirect-chain?n=3"));
  watch_hops(req, &h2);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 10), 0);
  ASSERT_EQ(test_run(eng, req), TERN_ECANCELED);
  ASSERT_EQ(h2.nreq, 1);
  ASSERT_EQ(h2.n, 1);
  tern_request_free(req);
  /* Outside the hop-request callback there is no hop to add a header to. */
  (void)tern_request_new(&req);
  ASSERT_NE(tern_request_add_hop_header(req, "Cookie", "a=b"), 0);
  tern_request_free(req);
  test_finish(eng);
}

/* ---- tern_request_set_whole_at_completion ---- */

typedef struct {
  int hundreds; /* download 100s reported */
  uint64_t done;
} hundred_log;

static int on_progress_hundreds(tern_request_t *req, tern_progress_state state, int percent,
                                uint64_t done, uint64_t total, void *ud) {
  (void)req;
  (void)total;
  hundred_log *p = ud;
  if (state == TERN_PROGRESS_DOWNLOAD && percent == 100) {
    p->hundreds++;
    p->done = done;
  }
  return 0;
}

/* Runs `path` on the fault server with every hop callback watched; whole: the flag. */
static tern_request_t *run_watched(tern_engine_t *eng, const char *path, bool whole, hop_log *h,
                                   hundred_log *p) {
  tern_request_t *req = request_owned(url_at("FAULT_PORT", "%s", path));
  watch_hops(req, h);
  ASSERT_EQ(tern_request_set_progress_cb(req, on_progress_hundreds, p), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(tern_request_set_whole_at_completion(req, whole), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  return req;
}

TEST(whole_at_completion_leaves_a_whole_response_to_the_complete_callback) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* /stall sends the head and all 100 body bytes in one write, then waits: one read. */
  const char *whole = "/stall?len=100&send=100&stall_ms=1000";
  for (int flag = 0; flag <= 1; flag++) {
    hop_log h = { 0 };
    hundred_log p = { 0 };
    tern_request_t *req = run_watched(eng, whole, flag, &h, &p);
    ASSERT_EQ(h.nreq, 1);                /* the hop-request callback is not affected */
    ASSERT_EQ(h.n, flag ? 0 : 1);        /* no hop-response callback for the final head */
    ASSERT_EQ(p.hundreds, flag ? 0 : 1); /* and no download 100 */
    /* What they would have said, read after completion. */
    ASSERT(tern_request_is_final_hop(req));
    ASSERT_EQ(tern_request_get_bytes_received(req), 100);
    ASSERT_EQ(tern_request_get_offset(req), 0);
    ASSERT_STR_EQ(tern_request_get_header(req, "Content-Length"), "100");
    size_t len = 0;
    ASSERT(tern_request_get_body(req, &len) != NULL);
    ASSERT_EQ(len, 100);
    tern_request_free(req);
  }
  /* A body that comes in two reads (the rest 100 ms later): reported as without the flag. */
  hop_log h = { 0 };
  hundred_log p = { 0 };
  tern_request_t *req =
      run_watched(eng, "/stall?len=1000&send=500&tail=500&gap_ms=100&stall_ms=1000", true, &h, &p);
  ASSERT_EQ(h.n, 1);
  ASSERT(h.final[0]);
  ASSERT_EQ(p.hundreds, 1);
  ASSERT_EQ(p.done, 1000);
  tern_request_free(req);
  /* A redirect's head is followed, not final: its callback runs; the whole final one's not. */
  char *e = qenc("/stall?len=100&send=100&stall_ms=1000");
  char *path = fmt("/redirect?status=302&to=%s&cookie=r%%3D1", e);
  hop_log h2 = { 0 };
  hundred_log p2 = { 0 };
  req = run_watched(eng, path, true, &h2, &p2);
  ASSERT_EQ(h2.nreq, 2);
  ASSERT_EQ(h2.n, 1);
  ASSERT_EQ(h2.status[0], 302);
  ASSERT(!h2.final[0]);
  ASSERT_STR_EQ(h2.cookie[0], "r=1");
  ASSERT_EQ(p2.hundreds, 0);
  ASSERT_EQ(tern_request_get_redirect_count(req), 1);
  tern_request_free(req);
  free(path);
  free(e);
  test_finish(eng);
}

/* ---- credentials across origins ---- */

/* One redirect from the fault server to `to`, with credentials: set_auth (Basic, preemptive),
 * a caller Cookie and, when caller_authz, a caller Authorization instead of set_auth. */
static tern_request_t *redirect_with_credentials(tern_engine_t *eng, const char *to,
                                                 bool caller_authz, unsigned flags, hop_log *h) {
  tern_request_t *req = request_owned(redirect_url(302, to));
  if (caller_authz)
    ASSERT_EQ(tern_request_add_header(req, "Authorization", "Bearer t0ken"), 0);
  else
    ASSERT_EQ(tern_request_set_auth(req, user(), password(), TERN_AUTH_BASIC), 0);
  ASSERT_EQ(tern_request_add_header(req, "Cookie", "session=s3cret"), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(tern_request_set_redirect_flags(req, flags), 0);
  watch_hops(req, h);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(h->n, 2);
  ASSERT(h->authz[0]); /* the first origin got the credentials */
  return req;
}

static const char *basic_alice = "Basic YWxpY2U6d29uZGVybGFuZA==";

TEST(redirect_same_origin_keeps_credentials) {
  tern_engine_t *eng = test_engine_new(NULL);
  for (int caller = 0; caller < 2; caller++) {
    hop_log h = { 0 };
    tern_request_t *req = redirect_with_credentials(eng, "/echo", caller, 0, &h);
    ASSERT_STR_EQ(echoed(req, "Authorization"), caller ? "Bearer t0ken" : basic_alice);
    ASSERT_STR_EQ(echoed(req, "Cookie"), "session=s3cret");
    tern_request_free(req);
  }
  test_finish(eng);
}

TEST(redirect_cross_origin_port_strips_credentials) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *to = url_at("FAULT2_PORT", "/echo");
  for (int caller = 0; caller < 2; caller++) {
    hop_log h = { 0 };
    tern_request_t *req = redirect_with_credentials(eng, to, caller, 0, &h);
    ASSERT_STR_EQ(tern_request_get_effective_url(req), to);
    ASSERT(echoed(req, "Authorization") == NULL);
    ASSERT(echoed(req, "Cookie") == NULL);
    ASSERT(!body_contains_no_log(req, "s3cret"));
    ASSERT(!body_contains_no_log(req, "t0ken"));
    ASSERT(!body_contains_no_log(req, "YWxpY2U6"));
    tern_request_free(req);
  }
  free(to);
  test_finish(eng);
}

TEST(redirect_cross_origin_host_strips_credentials) {
  /* Same address and port, another host name: another origin. */
  tern_config_t *cfg = NULL;
  (void)tern_config_new(&cfg);
  char *entry = fmt("other.test:%d:127.0.0.1", testsrv_port("FAULT_PORT"));
  ASSERT_EQ(tern_config_add_resolve(cfg, entry), 0);
  free(entry);
  tern_engine_t *eng = test_engine_new(cfg);
  tern_config_free(cfg);
  char *to = fmt("http://other.test:%d/echo", testsrv_port("FAULT_PORT"));
  for (int caller = 0; caller < 2; caller++) {
    hop_log h = { 0 };
    tern_request_t *req = redirect_with_credentials(eng, to, caller, 0, &h);
    ASSERT_STR_EQ(tern_request_get_effective_url(req), to);
    ASSERT(body_contains(req, "[\"Host\", \"other.test:"));
    ASSERT(echoed(req, "Authorization") == NULL);
    ASSERT(echoed(req, "Cookie") == NULL);
    tern_request_free(req);
  }
  free(to);
  test_finish(eng);
}

TEST(redirect_cross_origin_trusted_keeps_credentials) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *to = url_at("FAULT2_PORT", "/echo");
  for (int caller = 0; caller < 2; caller++) {
    hop_log h = { 0 };
    tern_request_t *req =
        redirect_with_credentials(eng, to, caller, TERN_REDIRECT_TRUST_CROSS_ORIGIN, &h);
    ASSERT_STR_EQ(echoed(req, "Authorization"), caller ? "Bearer t0ken" : basic_alice);
    ASSERT_STR_EQ(echoed(req, "Cookie"), "session=s3cret");
    tern_request_free(req);
  }
  free(to);
  test_finish(eng);
}

TEST(redirect_cross_origin_no_credentials_for_challenge) {
  /* The other origin challenges: the first origin's credentials must not answer it (Apache
   * would accept them), unless trusted. */
  tern_engine_t *eng = test_engine_new(NULL);
  char *to = url_at("APACHE_PORT", "/digest/1k.bin");
  tern_request_t *req = request_owned(redirect_url(302, to));
  ASSERT_EQ(tern_request_set_auth(req, user(), password(), TERN_AUTH_ANY), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  hop_log h = { 0 };
  watch_hops(req, &h);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT_EQ(h.n, 2);
  ASSERT(ci_find(head_of(req), "\r\nAuthorization:") == NULL);
  tern_request_free(req);
  /* URL credentials are the first origin's too. */
  char *e = qenc(to);
  char *u =
      fmt("http://alice:wonderland@127.0.0.1:%d/redirect?to=%s", testsrv_port("FAULT_PORT"), e);
  req = request_owned(u);
  free(e);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 401);
  tern_request_free(req);
  /* Trusted: they do. */
  req = request_owned(redirect_url(302, to));
  ASSERT_EQ(tern_request_set_auth(req, user(), password(), TERN_AUTH_ANY), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(tern_request_set_redirect_flags(req, TERN_REDIRECT_TRUST_CROSS_ORIGIN), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  tern_request_free(req);
  free(to);
  test_finish(eng);
}

/* ==== authentication ======================================================================= */

/* GET url with credentials (user NULL: none), watching hops. */
static tern_request_t *auth_get(tern_engine_t *eng, char *url, const char *u, const char *p,
                                unsigned schemes, hop_log *h, int want_err) {
  tern_request_t *req = request_owned(url);
  if (u) ASSERT_EQ(tern_request_set_auth(req, u, p, schemes), 0);
  if (h) watch_hops(req, h);
  int err = test_run(eng, req);
  if (err != want_err)
    TEST_FAIL_("error %s (%s), want %s", tern_err_name(err), tern_request_get_error_message(req),
               tern_err_name(want_err));
  return req;
}

TEST(auth_basic_preemptive_nginx) {
  tern_engine_t *eng = test_engine_new(NULL);
  hop_log h = { 0 };
  tern_request_t *req = auth_get(eng, url_at("NGINX_PORT", "/basic/1k.bin"), user(), password(),
                                 TERN_AUTH_BASIC, &h, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT_EQ(h.n, 1); /* no challenge: sent with the first request */
  ASSERT(strstr(head_of(req), "\r\nAuthorization: Basic YWxpY2U6d29uZGVybGFuZA==\r\n") != NULL);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_basic_after_challenge_nginx) {
  tern_engine_t *eng = test_engine_new(NULL);
  hop_log h = { 0 };
  tern_request_t *req = auth_get(eng, url_at("NGINX_PORT", "/basic/1k.bin"), user(), password(),
                                 TERN_AUTH_ANY, &h, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT_EQ(h.n, 2);
  ASSERT_EQ(h.status[0], 401);
  ASSERT_EQ(h.status[1], 200);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_basic_no_credentials_nginx) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* No credentials: the 401 is the answer. */
  hop_log h = { 0 };
  tern_request_t *req = auth_get(eng, url_at("NGINX_PORT", "/basic/1k.bin"), NULL, NULL, 0, &h, 0);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT_EQ(h.n, 1);
  ASSERT(ci_find(head_of(req), "\r\nAuthorization:") == NULL);
  ASSERT(tern_request_get_header(req, "WWW-Authenticate") != NULL);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_basic_wrong_password_nginx) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* After a challenge: one answer, then the 401. */
  hop_log h = { 0 };
  tern_request_t *req =
      auth_get(eng, url_at("NGINX_PORT", "/basic/1k.bin"), user(), "wrong", TERN_AUTH_ANY, &h, 0);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT_EQ(h.n, 2);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_basic_wrong_password_preemptive_nginx) {
  /* Sent preemptively and refused: the same credentials again could only be refused again, so
   * the 401 is the answer after one request (curl --basic: one request). */
  tern_engine_t *eng = test_engine_new(NULL);
  hop_log h = { 0 };
  tern_request_t *req =
      auth_get(eng, url_at("NGINX_PORT", "/basic/1k.bin"), user(), "wrong", TERN_AUTH_BASIC, &h, 0);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT_EQ(h.n, 1);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_digest_only_never_sends_basic) {
  /* Credentials limited to Digest, against a Basic-only server: no Basic in the clear. */
  tern_engine_t *eng = test_engine_new(NULL);
  hop_log h = { 0 };
  tern_request_t *req = auth_get(eng, url_at("NGINX_PORT", "/basic/1k.bin"), user(), password(),
                                 TERN_AUTH_DIGEST, &h, 0);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT_EQ(h.n, 1);
  ASSERT(ci_find(head_of(req), "\r\nAuthorization:") == NULL);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_credentials_not_sent_unasked) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* Without a challenge (and without Basic alone), credentials stay home. */
  tern_request_t *req =
      auth_get(eng, url_at("FAULT_PORT", "/echo"), user(), password(), TERN_AUTH_ANY, NULL, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT(echoed(req, "Authorization") == NULL);
  tern_request_free(req);
  req = auth_get(eng, url_at("FAULT_PORT", "/echo"), user(), password(), TERN_AUTH_DIGEST, NULL, 0);
  ASSERT(echoed(req, "Authorization") == NULL);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_url_userinfo) {
  tern_engine_t *eng = test_engine_new(NULL);
  int nginx = testsrv_port("NGINX_PORT"), apache = testsrv_port("APACHE_PORT");
  /* Basic at nginx. */
  tern_request_t *req = auth_get(
      eng, fmt("http://alice:wonderland@127.0.0.1:%d/basic/1k.bin", nginx), NULL, NULL, 0, NULL, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  /* The userinfo never goes on the wire as such. */
  ASSERT(strstr(head_of(req), "alice:wonderland") == NULL);
  ASSERT(strstr(head_of(req), "@") == NULL);
  tern_request_free(req);
  /* Digest at Apache. */
  req = auth_get(eng, fmt("http://alice:wonderland@127.0.0.1:%d/digest/1k.bin", apache), NULL, NULL,
                 0, NULL, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  tern_request_free(req);
  /* Percent-encoded userinfo is decoded: bob's password is "p@ss:w0rd%". */
  ASSERT_STR_EQ(testsrv_get("AUTH_PASSWORD2"), "p@ss:w0rd%");
  req = auth_get(eng, fmt("http://bob:p%%40ss%%3Aw0rd%%25@127.0.0.1:%d/digest/1k.bin", apache),
                 NULL, NULL, 0, NULL, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  req = auth_get(eng, fmt("http://bob:p%%40ss%%3Aw0rd%%25@127.0.0.1:%d/basic/1k.bin", nginx), NULL,
                 NULL, 0, NULL, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  /* Credentials set on the request win over the URL's. */
  req = auth_get(eng, fmt("http://alice:wrong@127.0.0.1:%d/basic/1k.bin", nginx), user(),
                 password(), TERN_AUTH_ANY, NULL, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_digest_md5_apache) {
  tern_engine_t *eng = test_engine_new(NULL);
  hop_log h = { 0 };
  tern_request_t *req = auth_get(eng, url_at("APACHE_PORT", "/digest/1k.bin"), user(), password(),
                                 TERN_AUTH_ANY, &h, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT_EQ(h.n, 2);
  ASSERT_EQ(h.status[0], 401);
  ASSERT_EQ(h.status[1], 200);
  const char *head = head_of(req);
  ASSERT(strstr(head, "\r\nAuthorization: Digest ") != NULL);
  ASSERT(strstr(head, "username=\"alice\"") != NULL);
  ASSERT(strstr(head, "realm=\"tern-apache\"") != NULL);
  ASSERT(strstr(head, "uri=\"/digest/1k.bin\"") != NULL);
  ASSERT(strstr(head, "nc=00000001") != NULL);
  ASSERT(strstr(head, "qop=auth") != NULL);
  ASSERT(strstr(head, "wonderland") == NULL);
  /* Apache's Authentication-Info proves it verified our response. */
  ASSERT(tern_request_get_header(req, "Authentication-Info") != NULL);
  tern_request_free(req);
  /* Digest alone works too; and the uri covers the query (Apache compares it). */
  req = auth_get(eng, url_at("APACHE_PORT", "/digest/1k.bin?x=1&y=%%2F"), user(), password(),
                 TERN_AUTH_DIGEST, NULL, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT(strstr(head_of(req), "uri=\"/digest/1k.bin?x=1&y=%2F\"") != NULL);
  tern_request_free(req);
  /* Basic alone against a Digest-only server: no Basic is sent in the clear... */
  hop_log h2 = { 0 };
  req = auth_get(eng, url_at("APACHE_PORT", "/digest/1k.bin"), user(), password(), TERN_AUTH_BASIC,
                 &h2, 0);
  ASSERT_EQ(tern_request_get_status(req), 401);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_digest_wrong_password_apache) {
  /* tern.h: no (more) credentials -> complete with the challenge response (curl: 401, exit 0). */
  tern_engine_t *eng = test_engine_new(NULL);
  hop_log h = { 0 };
  tern_request_t *req =
      auth_get(eng, url_at("APACHE_PORT", "/digest/1k.bin"), user(), "wrong", TERN_AUTH_ANY, &h, 0);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT_EQ(h.n, 2);
  ASSERT(tern_request_get_header(req, "WWW-Authenticate") != NULL);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_digest_post_resent_apache) {
  tern_engine_t *eng = test_engine_new(NULL);
  char sha[65];
  size_t n = 100000;
  unsigned char *body = pattern_body(n, sha);
  hop_log h = { 0 };
  tern_request_t *req = request_owned(url_at("APACHE_PORT", "/nest/apache/echo"));
  ASSERT_EQ(tern_request_set_method(req, "POST"), 0);
  ASSERT_EQ(tern_request_set_body(req, body, n), 0);
  ASSERT_EQ(tern_request_set_auth(req, user(), password(), TERN_AUTH_ANY), 0);
  watch_hops(req, &h);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(h.n, 2);
  assert_kept(req, "POST", n, sha);
  ASSERT(strncmp(echoed(req, "Authorization"), "Digest ", 7) == 0);
  tern_request_free(req);
  free(body);
  /* A file body of 2 MiB (Expect: 100-continue: Apache may answer 401 before the body). */
  char *path = testsrv_www_path("100m.bin");
  req = request_owned(url_at("APACHE_PORT", "/nest/apache/echo"));
  ASSERT_EQ(tern_request_set_method(req, "PUT"), 0);
  ASSERT_EQ(tern_request_set_body_file(req, path, 0, 2u << 20), 0);
  ASSERT_EQ(tern_request_set_auth(req, user(), password(), TERN_AUTH_DIGEST), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_www_sha256_slice("100m.bin", 0, 2u << 20, sha);
  assert_kept(req, "PUT", 2u << 20, sha);
  tern_request_free(req);
  free(path);
  test_finish(eng);
}

TEST(auth_basic_post_resent_nginx) {
  tern_engine_t *eng = test_engine_new(NULL);
  char sha[65];
  size_t n = 300000;
  unsigned char *body = pattern_body(n, sha);
  hop_log h = { 0 };
  tern_request_t *req = request_owned(url_at("NGINX_PORT", "/nest/basic/echo"));
  ASSERT_EQ(tern_request_set_method(req, "POST"), 0);
  ASSERT_EQ(tern_request_set_body(req, body, n), 0);
  ASSERT_EQ(tern_request_set_auth(req, user(), password(), TERN_AUTH_ANY), 0);
  watch_hops(req, &h);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(h.n, 2);
  ASSERT_EQ(h.status[0], 401);
  assert_kept(req, "POST", n, sha);
  ASSERT_STR_EQ(echoed(req, "Authorization"), basic_alice);
  tern_request_free(req);
  free(body);
  test_finish(eng);
}

TEST(auth_digest_sha256_lighttpd) {
  tern_engine_t *eng = test_engine_new(NULL);
  hop_log h = { 0 };
  tern_request_t *req = auth_get(eng, url_at("LIGHTTPD_PORT", "/digest/1k.bin"), user(), password(),
                                 TERN_AUTH_ANY, &h, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT_EQ(h.n, 2);
  ASSERT(strstr(head_of(req), "algorithm=SHA-256") != NULL);
  ASSERT(strstr(head_of(req), "realm=\"tern-lighttpd\"") != NULL);
  tern_request_free(req);
  /* Wrong password: the 401. */
  req = auth_get(eng, url_at("LIGHTTPD_PORT", "/digest/1k.bin"), user(), "wrong", TERN_AUTH_DIGEST,
                 NULL, 0);
  ASSERT_EQ(tern_request_get_status(req), 401);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_digest_md5_and_choice_lighttpd) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = auth_get(eng, url_at("LIGHTTPD_PORT", "/digest-md5/1k.bin"), user(),
                                 password(), TERN_AUTH_DIGEST, NULL, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  tern_request_free(req);
  /* Offered SHA-256 then MD5 (two WWW-Authenticate fields): the stronger one is used. */
  req = auth_get(eng, url_at("LIGHTTPD_PORT", "/digest-any/1k.bin"), user(), password(),
                 TERN_AUTH_ANY, NULL, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT(strstr(head_of(req), "algorithm=SHA-256") != NULL);
  tern_request_free(req);
  /* Basic at lighttpd, preemptive and after a challenge; bob's password has ':' in it. */
  req = auth_get(eng, url_at("LIGHTTPD_PORT", "/basic/1k.bin"), testsrv_get("AUTH_USER2"),
                 testsrv_get("AUTH_PASSWORD2"), TERN_AUTH_BASIC, NULL, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  req = auth_get(eng, url_at("LIGHTTPD_PORT", "/basic/1k.bin"), user(), password(), TERN_AUTH_ANY,
                 NULL, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_digest_sha512_256_lighttpd) {
  tern_engine_t *eng = test_engine_new(NULL);
  hop_log h = { 0 };
  tern_request_t *req = auth_get(eng, url_at("LIGHTTPD_PORT", "/digest-sha512-256/1k.bin"), user(),
                                 password(), TERN_AUTH_DIGEST, &h, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT_EQ(h.n, 2);
  ASSERT(strstr(head_of(req), "algorithm=SHA-512-256") != NULL);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_digest_post_resent_lighttpd) {
  tern_engine_t *eng = test_engine_new(NULL);
  char sha[65];
  size_t n = 70000;
  unsigned char *body = pattern_body(n, sha);
  tern_request_t *req = request_owned(url_at("LIGHTTPD_PORT", "/nest/lighttpd/echo?q=1"));
  ASSERT_EQ(tern_request_set_method(req, "POST"), 0);
  ASSERT_EQ(tern_request_set_body(req, body, n), 0);
  ASSERT_EQ(tern_request_set_auth(req, user(), password(), TERN_AUTH_DIGEST), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  assert_kept(req, "POST", n, sha);
  ASSERT(strstr(echoed(req, "Authorization"), "algorithm=SHA-256") != NULL);
  tern_request_free(req);
  free(body);
  test_finish(eng);
}

/* ---- the auth callback ---- */

typedef struct {
  int calls;
  int is_proxy;
  char scheme[32];
  char realm[64];
  const char *answers[8]; /* password per call; NULL: return 0 (stop) */
  int supply_rc;
} auth_script;

static int on_auth(tern_request_t *req, int is_proxy, const char *scheme, const char *realm,
                   void *ud) {
  auth_script *a = ud;
  int i = a->calls++;
  a->is_proxy = is_proxy;
  snprintf(a->scheme, sizeof a->scheme, "%s", scheme ? scheme : "(null)");
  snprintf(a->realm, sizeof a->realm, "%s", realm ? realm : "(null)");
  if (i >= 8 || a->answers[i] == NULL) return 0;
  a->supply_rc = tern_request_supply_auth(req, testsrv_get("AUTH_USER"), a->answers[i]);
  ASSERT_EQ(a->supply_rc, 0);
  return 1;
}

static tern_request_t *auth_cb_get(tern_engine_t *eng, char *url, auth_script *a, hop_log *h) {
  tern_request_t *req = request_owned(url);
  ASSERT_EQ(tern_request_set_auth_cb(req, on_auth, a), 0);
  if (h) watch_hops(req, h);
  ASSERT_EQ(test_run(eng, req), 0);
  return req;
}

TEST(auth_callback_supplies_credentials) {
  tern_engine_t *eng = test_engine_new(NULL);
  auth_script a = { .answers = { "wonderland" } };
  hop_log h = { 0 };
  tern_request_t *req = auth_cb_get(eng, url_at("APACHE_PORT", "/digest/1k.bin"), &a, &h);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT_EQ(a.calls, 1);
  ASSERT_EQ(a.is_proxy, 0);
  ASSERT(strcasecmp(a.scheme, "Digest") == 0);
  ASSERT_STR_EQ(a.realm, "tern-apache");
  ASSERT_EQ(h.n, 2);
  tern_request_free(req);
  /* Basic at nginx. */
  auth_script b = { .answers = { "wonderland" } };
  req = auth_cb_get(eng, url_at("NGINX_PORT", "/basic/1k.bin"), &b, NULL);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT(strcasecmp(b.scheme, "Basic") == 0);
  ASSERT_STR_EQ(b.realm, "tern-basic");
  tern_request_free(req);
  /* supply_auth outside the callback is refused. */
  (void)tern_request_new(&req);
  ASSERT_NE(tern_request_supply_auth(req, "a", "b"), 0);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_callback_stops) {
  tern_engine_t *eng = test_engine_new(NULL);
  auth_script a = { .answers = { NULL } };
  hop_log h = { 0 };
  tern_request_t *req = auth_cb_get(eng, url_at("APACHE_PORT", "/digest/1k.bin"), &a, &h);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT_EQ(a.calls, 1);
  ASSERT_EQ(h.n, 1);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_callback_asked_again_after_wrong_credentials) {
  /* tern.h: the callback runs on a challenge "for which no (more) credentials are known": the
   * ones it supplied were refused, so it is asked again. */
  tern_engine_t *eng = test_engine_new(NULL);
  auth_script a = { .answers = { "wrong", "wonderland" } };
  hop_log h = { 0 };
  tern_request_t *req = auth_cb_get(eng, url_at("APACHE_PORT", "/digest/1k.bin"), &a, &h);
  if (tern_request_get_status(req) != 200)
    TEST_FAIL_(
        "status %d after %d callback call(s), %d hops: the callback was not asked again "
        "after its credentials were refused",
        tern_request_get_status(req), a.calls, h.n);
  ASSERT_EQ(a.calls, 2);
  ASSERT_EQ(h.n, 3);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_callback_gives_up) {
  /* Wrong every time, until the callback gives up on its 4th call. */
  tern_engine_t *eng = test_engine_new(NULL);
  auth_script b = { .answers = { "x1", "x2", "x3", NULL } };
  hop_log h = { 0 };
  tern_request_t *req = auth_cb_get(eng, url_at("LIGHTTPD_PORT", "/digest/1k.bin"), &b, &h);
  ASSERT_EQ(tern_request_get_status(req), 401);
  if (b.calls != 4) TEST_FAIL_("callback called %d time(s), want 4", b.calls);
  ASSERT_EQ(h.n, 4);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_callback_after_request_credentials_fail) {
  /* Credentials set on the request are tried first; the callback runs when they fail. */
  tern_engine_t *eng = test_engine_new(NULL);
  auth_script c = { .answers = { "wonderland" } };
  hop_log h = { 0 };
  tern_request_t *req = request_owned(url_at("APACHE_PORT", "/digest/1k.bin"));
  ASSERT_EQ(tern_request_set_auth(req, user(), "wrong", TERN_AUTH_ANY), 0);
  ASSERT_EQ(tern_request_set_auth_cb(req, on_auth, &c), 0);
  watch_hops(req, &h);
  ASSERT_EQ(test_run(eng, req), 0);
  if (tern_request_get_status(req) != 200)
    TEST_FAIL_("status %d, callback called %d time(s), %d hops", tern_request_get_status(req),
               c.calls, h.n);
  ASSERT_EQ(c.calls, 1);
  ASSERT_EQ(h.n, 3);
  tern_request_free(req);
  test_finish(eng);
}

TEST(auth_malformed_challenges) {
  tern_engine_t *eng = test_engine_new(NULL);
  static const char *challenges[] = {
    "Digest",
    "Digest realm=",
    "Digest realm=\"unterminated",
    "Digest nonce=\"n-only\"",
    "Digest realm=\"r\"",
    "Digest realm=\"r\", nonce=\"n\", algorithm=MD7",
    "Digest realm=\"r\", nonce=\"n\", qop=\"auth-int\"",
    "Digest realm=\"r\" nonce=\"n\" qop=\"auth\"",
    "Digest realm=\"r\", nonce=\"n\", qop=\"auth\", algorithm=SHA-256, algorithm=MD5",
    "Digest ,,,, realm=\"r\",, nonce=\"n\",",
    "Digest realm=\"r\", nonce=\"\", opaque=\"\\\"\\\\\"",
    "Basic",
    "Basic realm",
    "Basic realm=\"",
    "basic REALM=\"case\"",
    "NTLM",
    "Negotiate abc==",
    "Bearer realm=\"x\"",
    ",,,",
    "=",
    "\"",
    "Digest realm=\"\xff\xfe\", nonce=\"\xc3\xa9\"",
  };
  for (size_t i = 0; i < sizeof challenges / sizeof challenges[0]; i++) {
    char *e = qenc(challenges[i]);
    hop_log h = { 0 };
    tern_request_t *req = request_owned(url_at("FAULT_PORT", "/challenge?www=%s", e));
    free(e);
    ASSERT_EQ(tern_request_set_auth(req, user(), password(), TERN_AUTH_ANY), 0);
    watch_hops(req, &h);
    int err = test_run(eng, req);
    if (err != 0 || tern_request_get_status(req) != 401)
      TEST_FAIL_("challenge %s: error %s (%s), status %d", challenges[i], tern_err_name(err),
                 tern_request_get_error_message(req), tern_request_get_status(req));
    if (h.n > 2) TEST_FAIL_("challenge %s: %d hops, want at most 2", challenges[i], h.n);
    ASSERT(body_contains(req, "challenge\n"));
    tern_request_free(req);
  }
  /* stale=true asks for a retry with a fresh nonce without new credentials; a server that
   * keeps saying so with the same nonce gets at most one such retry, never a loop. */
  {
    hop_log hs = { 0 };
    tern_request_t *req = request_owned(
        url_at("FAULT_PORT", "/challenge?www=%s",
               "Digest%20realm%3Dr%2C%20nonce%3Dn%2C%20qop%3Dauth%2C%20stale%3DTRUE"));
    ASSERT_EQ(tern_request_set_auth(req, user(), password(), TERN_AUTH_ANY), 0);
    watch_hops(req, &hs);
    ASSERT_EQ(test_run(eng, req), 0);
    ASSERT_EQ(tern_request_get_status(req), 401);
    ASSERT_GE(hs.n, 2);
    if (hs.n > 3) TEST_FAIL_("stale=TRUE with an unchanged nonce: %d hops, want at most 3", hs.n);
    tern_request_free(req);
  }
  /* Several fields, one of them usable: answered once, then the 401 stands. */
  hop_log h = { 0 };
  tern_request_t *req = request_owned(
      url_at("FAULT_PORT", "/challenge?www=Garbage&www=Basic%%20realm%%3D%%22ok%%22"));
  ASSERT_EQ(tern_request_set_auth(req, user(), password(), TERN_AUTH_ANY), 0);
  watch_hops(req, &h);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT_EQ(h.n, 2);
  ASSERT_STR_EQ(echoed(req, "Authorization"), basic_alice);
  tern_request_free(req);
  test_finish(eng);
}

/* ==== proxies ============================================================================== */

static char *proxy_url(const char *portkey, const char *userinfo) {
  return fmt("http://%s%s127.0.0.1:%d", userinfo ? userinfo : "", userinfo ? "@" : "",
             testsrv_port(portkey));
}

static void set_proxy(tern_request_t *req, const char *portkey, const char *userinfo) {
  char *p = proxy_url(portkey, userinfo);
  ASSERT_EQ(tern_request_set_proxy(req, p), 0);
  free(p);
}

static bool via_squid(tern_request_t *req) {
  return body_contains(req, "\"Via\", \"1.1 tern-squid-");
}

TEST(proxy_http_absolute_form) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = url_at("FAULT_PORT", "/echo?p=1");
  tern_request_t *req = test_request_url(url);
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT(via_squid(req));
  char *line = fmt("GET %s HTTP/1.1\r\n", url);
  ASSERT(strncmp(head_of(req), line, strlen(line)) == 0);
  free(line);
  ASSERT(ci_find(head_of(req), "\r\nProxy-Authorization:") == NULL);
  tern_request_free(req);
  free(url);
  /* A body through the proxy. */
  char sha[65];
  unsigned char *body = pattern_body(123456, sha);
  req = request_owned(url_at("FAULT_PORT", "/echo"));
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(tern_request_set_method(req, "POST"), 0);
  ASSERT_EQ(tern_request_set_body(req, body, 123456), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  assert_kept(req, "POST", 123456, sha);
  tern_request_free(req);
  free(body);
  /* nginx through squid. */
  req = request_owned(url_at("NGINX_PORT", "/1k.bin"));
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT(strstr(tern_request_get_header(req, "Via"), "tern-squid-") != NULL);
  tern_request_free(req);
  test_finish(eng);
}

TEST(proxy_https_connect) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = fmt("https://localhost:%d/1k.bin", testsrv_port("TLS_PORT"));
  tern_request_t *req = test_request_url(url);
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT(tern_request_get_tls_version(req) != NULL);
  /* The tunnel carries an origin-form request; squid never saw it (no Via). */
  ASSERT(strncmp(head_of(req), "GET /1k.bin HTTP/1.1\r\n", 22) == 0);
  ASSERT(tern_request_get_header(req, "Via") == NULL);
  tern_request_free(req);
  /* The certificate is still checked through the tunnel: without the CA, no. */
  req = test_request_url(url);
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(test_run(eng, req), TERN_ETLSUNKNOWNCA);
  tern_request_free(req);
  /* A second request reuses the tunnel. */
  req = test_request_url(url);
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  tern_request_free(req);
  req = test_request_url(url);
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT(tern_request_is_reused(req));
  tern_request_free(req);
  free(url);
  test_finish(eng);
}

TEST(proxy_basic_auth) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* Credentials in the proxy URL. */
  tern_request_t *req = request_owned(url_at("FAULT_PORT", "/echo"));
  set_proxy(req, "SQUID_AUTH_PORT", "alice:wonderland");
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT(via_squid(req));
  ASSERT(echoed(req, "Proxy-Authorization") == NULL); /* squid consumed it */
  ASSERT(echoed(req, "Authorization") == NULL);       /* never the origin's header */
  tern_request_free(req);
  /* Separately, Basic alone: preemptive, one hop. */
  hop_log h = { 0 };
  req = request_owned(url_at("FAULT_PORT", "/echo"));
  set_proxy(req, "SQUID_AUTH_PORT", NULL);
  ASSERT_EQ(tern_request_set_proxy_auth(req, user(), password(), TERN_AUTH_BASIC), 0);
  watch_hops(req, &h);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(h.n, 1);
  ASSERT(strstr(head_of(req), "\r\nProxy-Authorization: Basic YWxpY2U6d29uZGVybGFuZA==\r\n") !=
         NULL);
  tern_request_free(req);
  /* Percent-encoded proxy userinfo. */
  req = request_owned(url_at("NGINX_PORT", "/1k.bin"));
  set_proxy(req, "SQUID_AUTH_PORT", "bob:p%40ss%3Aw0rd%25");
  ASSERT_EQ(tern_request_set_proxy_auth(req, "bob", "p@ss:w0rd%", TERN_AUTH_BASIC), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  test_finish(eng);
}

TEST(proxy_digest_auth) {
  tern_engine_t *eng = test_engine_new(NULL);
  hop_log h = { 0 };
  tern_request_t *req = request_owned(url_at("FAULT_PORT", "/echo"));
  set_proxy(req, "SQUID_AUTH_PORT", NULL);
  ASSERT_EQ(tern_request_set_proxy_auth(req, user(), password(), TERN_AUTH_DIGEST), 0);
  watch_hops(req, &h);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(h.n, 2);
  ASSERT_EQ(h.status[0], 407);
  ASSERT(strstr(head_of(req), "\r\nProxy-Authorization: Digest ") != NULL);
  ASSERT(strstr(head_of(req), "realm=\"tern-squid\"") != NULL);
  ASSERT(via_squid(req));
  tern_request_free(req);
  /* Any scheme, credentials from the URL: squid offers Digest and Basic. */
  req = request_owned(url_at("NGINX_PORT", "/1k.bin"));
  set_proxy(req, "SQUID_AUTH_PORT", "alice:wonderland");
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  tern_request_free(req);
  /* A POST body, sent again whole after the 407. */
  char sha[65];
  unsigned char *body = pattern_body(50000, sha);
  req = request_owned(url_at("FAULT_PORT", "/echo"));
  set_proxy(req, "SQUID_AUTH_PORT", NULL);
  ASSERT_EQ(tern_request_set_proxy_auth(req, user(), password(), TERN_AUTH_DIGEST), 0);
  ASSERT_EQ(tern_request_set_method(req, "POST"), 0);
  ASSERT_EQ(tern_request_set_body(req, body, 50000), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  assert_kept(req, "POST", 50000, sha);
  tern_request_free(req);
  free(body);
  test_finish(eng);
}

TEST(proxy_auth_failures) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* No credentials: the 407 is the answer. */
  tern_request_t *req = request_owned(url_at("FAULT_PORT", "/echo"));
  set_proxy(req, "SQUID_AUTH_PORT", NULL);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 407);
  ASSERT(tern_request_get_header(req, "Proxy-Authenticate") != NULL);
  tern_request_free(req);
  /* Wrong password, each scheme: one answer, then the 407. */
  static const unsigned schemes[] = { TERN_AUTH_BASIC, TERN_AUTH_DIGEST, TERN_AUTH_ANY };
  for (size_t i = 0; i < 3; i++) {
    hop_log h = { 0 };
    req = request_owned(url_at("FAULT_PORT", "/echo"));
    set_proxy(req, "SQUID_AUTH_PORT", NULL);
    ASSERT_EQ(tern_request_set_proxy_auth(req, user(), "wrong", schemes[i]), 0);
    watch_hops(req, &h);
    ASSERT_EQ(test_run(eng, req), 0);
    if (tern_request_get_status(req) != 407)
      TEST_FAIL_("scheme %u, wrong password: status %d after %d hop(s) (%d, %d), Via %s",
                 schemes[i], tern_request_get_status(req), h.n, h.status[0], h.status[1],
                 tern_request_get_header(req, "Via") ? tern_request_get_header(req, "Via") : "-");
    ASSERT_LE(h.n, 2);
    tern_request_free(req);
  }
  /* Origin credentials are not proxy credentials. */
  req = request_owned(url_at("FAULT_PORT", "/echo"));
  set_proxy(req, "SQUID_AUTH_PORT", NULL);
  ASSERT_EQ(tern_request_set_auth(req, user(), password(), TERN_AUTH_ANY), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 407);
  tern_request_free(req);
  test_finish(eng);
}

TEST(proxy_connect_with_auth) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = fmt("https://localhost:%d/1k.bin", testsrv_port("TLS_PORT"));
  static const unsigned schemes[] = { TERN_AUTH_BASIC, TERN_AUTH_DIGEST, TERN_AUTH_ANY };
  for (size_t i = 0; i < 3; i++) {
    tern_request_t *req = test_request_url(url);
    set_proxy(req, "SQUID_AUTH_PORT", NULL);
    ASSERT_EQ(tern_request_set_proxy_auth(req, user(), password(), schemes[i]), 0);
    ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
    int err = test_run(eng, req);
    if (err)
      TEST_FAIL_("scheme %u: %s (%s)", schemes[i], tern_err_name(err),
                 tern_request_get_error_message(req));
    ASSERT_EQ(tern_request_get_status(req), 200);
    test_assert_req_body_sha(req, "SHA_1K");
    /* Proxy credentials go on the CONNECT only, never inside the tunnel. */
    ASSERT(ci_find(head_of(req), "Proxy-Authorization") == NULL);
    tern_request_free(req);
  }
  /* Credentials in the proxy URL. */
  tern_request_t *req = test_request_url(url);
  set_proxy(req, "SQUID_AUTH_PORT", "alice:wonderland");
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  free(url);
  test_finish(eng);
}

TEST(proxy_connect_refused) {
  /* The CONNECT's 407 is what the request gets: status 407, and TERN_EPROXY or 0 (curl: exit
   * 56, "CONNECT tunnel failed, response 407"). */
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = fmt("https://localhost:%d/1k.bin", testsrv_port("TLS_PORT"));
  static const char *userinfo[] = { "alice:wrong", NULL };
  for (int i = 0; i < 2; i++) {
    tern_request_t *req = test_request_url(url);
    set_proxy(req, "SQUID_AUTH_PORT", userinfo[i]);
    ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
    int err = test_run(eng, req);
    ASSERT(err == 0 || err == TERN_EPROXY);
    ASSERT_EQ(tern_request_get_status(req), 407);
    ASSERT(tern_request_get_tls_version(req) == NULL);
    tern_request_free(req);
  }
  free(url);
  test_finish(eng);
}

TEST(proxy_tunnel_not_shared_across_credentials) {
  /* A tunnel squid opened for alice must not carry a request with other (or no) proxy
   * credentials: that request gets its own CONNECT, and squid's 407. curl keys reuse on the
   * proxy credentials too. */
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = fmt("https://localhost:%d/1k.bin", testsrv_port("TLS_PORT"));
  tern_request_t *req = test_request_url(url);
  set_proxy(req, "SQUID_AUTH_PORT", "alice:wonderland");
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  static const char *userinfo[] = { "alice:wrong", NULL };
  for (int i = 0; i < 2; i++) {
    req = test_request_url(url);
    set_proxy(req, "SQUID_AUTH_PORT", userinfo[i]);
    ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
    int err = test_run(eng, req);
    if (tern_request_get_status(req) != 407)
      TEST_FAIL_("proxy userinfo %s: status %d (%s), reused %d: rode alice's tunnel",
                 userinfo[i] ? userinfo[i] : "(none)", tern_request_get_status(req),
                 tern_err_name(err), tern_request_is_reused(req));
    tern_request_free(req);
  }
  /* The same credentials again: the tunnel is reused. */
  req = test_request_url(url);
  set_proxy(req, "SQUID_AUTH_PORT", "alice:wonderland");
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT(tern_request_is_reused(req));
  tern_request_free(req);
  free(url);
  test_finish(eng);
}

TEST(proxy_auth_callback) {
  tern_engine_t *eng = test_engine_new(NULL);
  auth_script a = { .answers = { "wonderland" } };
  tern_request_t *req = request_owned(url_at("FAULT_PORT", "/echo"));
  set_proxy(req, "SQUID_AUTH_PORT", NULL);
  ASSERT_EQ(tern_request_set_auth_cb(req, on_auth, &a), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(a.calls, 1);
  ASSERT_EQ(a.is_proxy, 1);
  ASSERT_STR_EQ(a.realm, "tern-squid");
  tern_request_free(req);
  /* Both at once: squid wants proxy credentials, Apache origin ones. */
  auth_script b = { .answers = { "wonderland", "wonderland" } };
  req = request_owned(url_at("APACHE_PORT", "/digest/1k.bin"));
  set_proxy(req, "SQUID_AUTH_PORT", NULL);
  ASSERT_EQ(tern_request_set_auth_cb(req, on_auth, &b), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT_EQ(b.calls, 2);
  tern_request_free(req);
  test_finish(eng);
}

TEST(proxy_and_origin_auth) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = request_owned(url_at("APACHE_PORT", "/digest/1k.bin"));
  set_proxy(req, "SQUID_AUTH_PORT", NULL);
  ASSERT_EQ(tern_request_set_proxy_auth(req, user(), password(), TERN_AUTH_DIGEST), 0);
  ASSERT_EQ(tern_request_set_auth(req, user(), password(), TERN_AUTH_DIGEST), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  const char *head = head_of(req);
  ASSERT(strstr(head, "\r\nProxy-Authorization: Digest ") != NULL);
  ASSERT(strstr(head, "\r\nAuthorization: Digest ") != NULL);
  /* Through a proxy the Digest uri is still the origin-form path Apache sees. */
  ASSERT(strstr(head, "uri=\"/digest/1k.bin\"") != NULL || strstr(head, "uri=\"http://") != NULL);
  tern_request_free(req);
  test_finish(eng);
}

TEST(proxy_redirects) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* Every hop through the proxy, across origins too. */
  char *to = url_at("FAULT2_PORT", "/echo");
  char *e = qenc(to);
  tern_request_t *req = request_owned(url_at("FAULT_PORT", "/redirect-chain?n=2&absolute=1"));
  free(e);
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(tern_request_get_redirect_count(req), 2);
  ASSERT(via_squid(req));
  tern_request_free(req);
  req = request_owned(redirect_url(307, to));
  set_proxy(req, "SQUID_AUTH_PORT", "alice:wonderland");
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_STR_EQ(tern_request_get_effective_url(req), to);
  ASSERT(via_squid(req));
  tern_request_free(req);
  free(to);
  test_finish(eng);
}

TEST(proxy_connections_pooled_per_proxy) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = url_at("NGINX_PORT", "/1k.bin");
  /* 1: through squid (opens a connection to squid). */
  tern_request_t *req = test_request_url(url);
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT(tern_request_get_header(req, "Via") != NULL);
  tern_request_free(req);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 1);
  /* 2: direct to the same origin: squid's connection must not carry it. */
  req = test_request_url(url);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT(!tern_request_is_reused(req));
  ASSERT(tern_request_get_header(req, "Via") == NULL);
  tern_request_free(req);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 2);
  /* 3: through squid again: its pooled connection. */
  req = test_request_url(url);
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT(tern_request_is_reused(req));
  ASSERT(tern_request_get_header(req, "Via") != NULL);
  tern_request_free(req);
  /* 4: direct again: the direct one. */
  req = test_request_url(url);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT(tern_request_is_reused(req));
  ASSERT(tern_request_get_header(req, "Via") == NULL);
  tern_request_free(req);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 2);
  /* 5: another proxy (squid's authenticated port): another connection. */
  req = test_request_url(url);
  set_proxy(req, "SQUID_AUTH_PORT", "alice:wonderland");
  ASSERT_EQ(tern_request_set_proxy_auth(req, user(), password(), TERN_AUTH_BASIC), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT(!tern_request_is_reused(req));
  tern_request_free(req);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 3);
  /* 6: a different origin through the first proxy may share its connection (same proxy). */
  req = request_owned(url_at("FAULT_PORT", "/echo"));
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  free(url);
  test_finish(eng);
}

/* ==== which head is final; default fields; the proxy of each hop ========================= */

TEST(hop_response_knows_final) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* Two redirects followed, then the echo: only the last head is final. */
  hop_log h = { 0 };
  tern_request_t *req = request_owned(url_at("FAULT_PORT", "/redirect-chain?n=2"));
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  watch_hops(req, &h);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(h.n, 3);
  ASSERT(!h.final[0] && !h.final[1] && h.final[2]);
  ASSERT(tern_request_is_final_hop(req));
  tern_request_free(req);
  /* Not followed: the 3xx is the response. */
  hop_log n = { 0 };
  req = request_owned(redirect_url(302, "/echo"));
  watch_hops(req, &n);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(n.n, 1);
  ASSERT(n.final[0]);
  tern_request_free(req);
  /* A 401 answered with credentials is not final; the 401 that stands is. */
  hop_log a = { 0 };
  req = request_owned(url_at("FAULT_PORT", "/challenge?www=Basic%%20realm%%3D%%22ok%%22"));
  ASSERT_EQ(tern_request_set_auth(req, user(), password(), TERN_AUTH_ANY), 0);
  watch_hops(req, &a);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT_EQ(a.n, 2);
  ASSERT(!a.final[0] && a.final[1]);
  tern_request_free(req);
  /* Without credentials the first 401 is final. */
  hop_log b = { 0 };
  req = request_owned(url_at("FAULT_PORT", "/challenge?www=Basic%%20realm%%3D%%22ok%%22"));
  watch_hops(req, &b);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(b.n, 1);
  ASSERT(b.final[0]);
  ASSERT_EQ(tern_request_get_connect_status(req), 0);
  tern_request_free(req);
  test_finish(eng);
}

TEST(omit_default_headers) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = request_owned(url_at("FAULT_PORT", "/echo"));
  ASSERT_EQ(tern_request_omit_header(req, "Accept"), 0);
  ASSERT_EQ(tern_request_omit_header(req, "user-agent"), 0);
  ASSERT_EQ(tern_request_omit_header(req, "Accept-Encoding"), 0);
  ASSERT_EQ(tern_request_omit_header(req, "X-Not-Generated"), 0); /* nothing to omit */
  ASSERT_EQ(tern_request_omit_header(req, "Content-Length"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_omit_header(req, "Bad Name"), TERN_EBADHEADER);
  ASSERT_EQ(tern_request_add_header(req, "X-Empty", ""), 0); /* curl's -H "X-Empty;" */
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  const char *head = head_of(req);
  ASSERT(ci_find(head, "\r\nAccept:") == NULL);
  ASSERT(ci_find(head, "\r\nUser-Agent:") == NULL);
  ASSERT(ci_find(head, "\r\nAccept-Encoding:") == NULL);
  ASSERT(strstr(head, "\r\nHost: 127.0.0.1:") != NULL);
  ASSERT(strstr(head, "\r\nX-Empty:\r\n") != NULL);
  ASSERT(body_contains(req, "\"X-Empty\", \"\""));
  ASSERT(!body_contains_no_log(req, "\"Accept\""));
  tern_request_free(req);
  /* Omitted, then the caller's own: sent once, the caller's. */
  req = request_owned(url_at("FAULT_PORT", "/echo"));
  ASSERT_EQ(tern_request_omit_header(req, "Accept"), 0);
  ASSERT_EQ(tern_request_add_header(req, "Accept", "text/x-mine"), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  head = head_of(req);
  ASSERT(strstr(head, "\r\nAccept: text/x-mine\r\n") != NULL);
  ASSERT(strstr(head, "*/*") == NULL);
  tern_request_free(req);
  /* Host and Connection too (curl lets -H "Host:" go); Expect: the body goes without waiting. */
  char sha[65];
  unsigned char *body = pattern_body(2 << 20, sha);
  req = request_owned(url_at("FAULT_PORT", "/echo"));
  ASSERT_EQ(tern_request_set_method(req, "POST"), 0);
  ASSERT_EQ(tern_request_set_body(req, body, 2 << 20), 0);
  ASSERT_EQ(tern_request_set_persistent(req, 0), 0);
  ASSERT_EQ(tern_request_omit_header(req, "Expect"), 0);
  ASSERT_EQ(tern_request_omit_header(req, "Connection"), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  head = head_of(req);
  ASSERT(ci_find(head, "\r\nExpect:") == NULL);
  ASSERT(ci_find(head, "\r\nConnection:") == NULL);
  assert_kept(req, "POST", 2 << 20, sha);
  tern_request_free(req);
  free(body);
  req = request_owned(url_at("FAULT_PORT", "/echo"));
  ASSERT_EQ(tern_request_omit_header(req, "Host"), 0);
  test_run(eng, req); /* the server may refuse a request without Host; the head is the point */
  ASSERT(ci_find(head_of(req), "\r\nHost:") == NULL);
  tern_request_free(req);
  test_finish(eng);
}

TEST(proxy_hop_response_knows_final) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* squid's 407, answered with Digest: not final; the 200 is. */
  hop_log h = { 0 };
  tern_request_t *req = request_owned(url_at("FAULT_PORT", "/echo"));
  set_proxy(req, "SQUID_AUTH_PORT", NULL);
  ASSERT_EQ(tern_request_set_proxy_auth(req, user(), password(), TERN_AUTH_DIGEST), 0);
  watch_hops(req, &h);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(h.n, 2);
  ASSERT_EQ(h.status[0], 407);
  ASSERT(!h.final[0] && h.final[1]);
  tern_request_free(req);
  /* The same for the CONNECT's 407. */
  hop_log t = { 0 };
  char *url = fmt("https://localhost:%d/1k.bin", testsrv_port("TLS_PORT"));
  req = test_request_url(url);
  free(url);
  set_proxy(req, "SQUID_AUTH_PORT", NULL);
  ASSERT_EQ(tern_request_set_proxy_auth(req, user(), password(), TERN_AUTH_DIGEST), 0);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  watch_hops(req, &t);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(t.n, 2);
  ASSERT_EQ(t.status[0], 407);
  ASSERT(!t.final[0] && t.final[1]);
  ASSERT_EQ(tern_request_get_connect_status(req), 200);
  tern_request_free(req);
  test_finish(eng);
}

TEST(proxy_connect_status) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = fmt("https://localhost:%d/1k.bin", testsrv_port("TLS_PORT"));
  tern_request_t *req = test_request_url(url);
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(tern_request_get_connect_status(req), 200);
  tern_request_free(req);
  /* A pooled tunnel: no CONNECT for this request (curl: 000). */
  req = test_request_url(url);
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT(tern_request_is_reused(req));
  ASSERT_EQ(tern_request_get_connect_status(req), 0);
  tern_request_free(req);
  /* Refused: the 407. */
  req = test_request_url(url);
  set_proxy(req, "SQUID_AUTH_PORT", NULL);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  test_run(eng, req);
  ASSERT_EQ(tern_request_get_connect_status(req), 407);
  tern_request_free(req);
  free(url);
  /* Plain http through a proxy sends no CONNECT. */
  req = request_owned(url_at("FAULT_PORT", "/echo"));
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_connect_status(req), 0);
  tern_request_free(req);
  test_finish(eng);
}

/* A request for FAULT_PORT's /redirect to `to`, through SQUID_PORT, with a no-proxy list. */
static tern_request_t *no_proxy_case(tern_engine_t *eng, const char *from_host, const char *to,
                                     const char *no_proxy, hop_log *h) {
  char *e = qenc(to);
  char *url =
      fmt("http://%s:%d/redirect?status=302&to=%s", from_host, testsrv_port("FAULT_PORT"), e);
  free(e);
  tern_request_t *req = request_owned(url);
  set_proxy(req, "SQUID_PORT", NULL);
  ASSERT_EQ(tern_request_set_no_proxy(req, no_proxy), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  watch_hops(req, h);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(h->n, 2);
  return req;
}

TEST(proxy_no_proxy_per_hop) {
  /* curl evaluates the proxy and no_proxy for every hop. */
  tern_engine_t *eng = test_engine_new(NULL);
  char *to_localhost = fmt("http://localhost:%d/echo", testsrv_port("FAULT2_PORT"));
  char *to_ip = fmt("http://127.0.0.1:%d/echo", testsrv_port("FAULT2_PORT"));
  /* Through squid, then to a no_proxy host: direct. */
  hop_log a = { 0 };
  tern_request_t *req = no_proxy_case(eng, "127.0.0.1", to_localhost, "example.com, localhost", &a);
  ASSERT(a.via[0]);
  ASSERT(!a.via[1]);
  ASSERT(!body_contains_no_log(req, "\"Via\""));
  ASSERT(strncmp(head_of(req), "GET /echo HTTP/1.1\r\n", 20) == 0);
  tern_request_free(req);
  /* Direct first (a no_proxy host), then through squid. */
  hop_log b = { 0 };
  req = no_proxy_case(eng, "localhost", to_ip, ".localhost", &b);
  ASSERT(!b.via[0]);
  ASSERT(b.via[1]);
  ASSERT(via_squid(req));
  tern_request_free(req);
  /* A CIDR range and "*" cover both hops. */
  static const char *all[] = { "127.0.0.0/8,localhost", "*" };
  for (int i = 0; i < 2; i++) {
    hop_log c = { 0 };
    req = no_proxy_case(eng, "127.0.0.1", to_localhost, all[i], &c);
    ASSERT(!c.via[0] && !c.via[1]);
    tern_request_free(req);
  }
  /* 127.0.0.1 is no subdomain of 0.0.1. */
  hop_log d = { 0 };
  req = no_proxy_case(eng, "127.0.0.1", to_ip, "0.0.1,127.0.0.2", &d);
  ASSERT(d.via[0] && d.via[1]);
  tern_request_free(req);
  free(to_localhost);
  free(to_ip);
  test_finish(eng);
}

TEST(proxy_scheme_proxy_per_hop) {
  /* http_proxy for http://, https_proxy for https://, chosen again after a redirect. */
  tern_engine_t *eng = test_engine_new(NULL);
  char *to = fmt("https://localhost:%d/1k.bin", testsrv_port("TLS_PORT"));
  char *e = qenc(to);
  char *from = url_at("FAULT_PORT", "/redirect?status=302&to=%s", e);
  free(e);
  char *auth_proxy = proxy_url("SQUID_AUTH_PORT", "alice:wonderland");
  char *bare_auth_proxy = proxy_url("SQUID_AUTH_PORT", NULL);
  char *open_proxy = proxy_url("SQUID_PORT", NULL);
  /* The general proxy (with credentials) for http, squid's open port for https. */
  hop_log a = { 0 };
  tern_request_t *req = test_request_url(from);
  ASSERT_EQ(tern_request_set_proxy(req, auth_proxy), 0);
  ASSERT_EQ(tern_request_set_scheme_proxy(req, "https", open_proxy), 0);
  ASSERT_EQ(tern_request_set_scheme_proxy(req, "ftp", open_proxy), TERN_EINVAL);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  watch_hops(req, &a);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  /* squid's 407 (the URL's credentials answer it), its 302, then the tunnel's 200. */
  ASSERT_EQ(a.n, 3);
  ASSERT(a.status[0] == 407 && a.status[1] == 302 && a.status[2] == 200);
  ASSERT(a.via[1]);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT_EQ(tern_request_get_connect_status(req), 200);
  tern_request_free(req);
  /* The credentials of the http proxy's URL never go to the https proxy: its CONNECT gets a
   * 407 (the same squid port, configured without credentials). */
  hop_log b = { 0 };
  req = test_request_url(from);
  ASSERT_EQ(tern_request_set_scheme_proxy(req, "http", auth_proxy), 0);
  ASSERT_EQ(tern_request_set_scheme_proxy(req, "https", bare_auth_proxy), 0);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  watch_hops(req, &b);
  int err = test_run(eng, req);
  ASSERT(err == 0 || err == TERN_EPROXY);
  ASSERT_EQ(b.n, 3);
  ASSERT(b.status[0] == 407 && b.status[1] == 302 && b.via[1]);
  ASSERT_EQ(tern_request_get_status(req), 407);
  ASSERT_EQ(tern_request_get_connect_status(req), 407);
  tern_request_free(req);
  /* Credentials given with tern_request_set_proxy_auth (curl's -U) go to whichever applies. */
  req = test_request_url(from);
  ASSERT_EQ(tern_request_set_scheme_proxy(req, "http", bare_auth_proxy), 0);
  ASSERT_EQ(tern_request_set_scheme_proxy(req, "https", bare_auth_proxy), 0);
  ASSERT_EQ(tern_request_set_proxy_auth(req, user(), password(), TERN_AUTH_ANY), 0);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(tern_request_get_connect_status(req), 200);
  tern_request_free(req);
  /* Schemes alone (a NULL user) apply to the credentials of proxy URLs: Basic at once. */
  hop_log s = { 0 };
  req = request_owned(url_at("FAULT_PORT", "/echo"));
  ASSERT_EQ(tern_request_set_scheme_proxy(req, "http", auth_proxy), 0);
  ASSERT_EQ(tern_request_set_proxy_auth(req, NULL, NULL, 0), TERN_EINVAL);
  ASSERT_EQ(tern_request_set_proxy_auth(req, NULL, NULL, TERN_AUTH_BASIC), 0);
  watch_hops(req, &s);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(s.n, 1);
  ASSERT(strstr(head_of(req), "\r\nProxy-Authorization: Basic YWxpY2U6d29uZGVybGFuZA==\r\n"));
  tern_request_free(req);
  /* A scheme without its own proxy uses the general one; no proxy at all goes direct. */
  hop_log c = { 0 };
  req = test_request_url(from);
  ASSERT_EQ(tern_request_set_scheme_proxy(req, "https", open_proxy), 0);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  watch_hops(req, &c);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT(!c.via[0]);
  ASSERT_EQ(tern_request_get_status(req), 200);
  /* The https hop rode the first case's tunnel through squid's open port (no CONNECT). */
  ASSERT(tern_request_is_reused(req));
  ASSERT_EQ(tern_request_get_connect_status(req), 0);
  tern_request_free(req);
  free(auth_proxy);
  free(bare_auth_proxy);
  free(open_proxy);
  free(from);
  free(to);
  test_finish(eng);
}
