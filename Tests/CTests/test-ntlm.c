/* NTLM against a real acceptor (Tests/TestServer/ntlmserver.py: pyspnego's NTLM checks the
 * AUTHENTICATE message against its user file): right and wrong credentials, the domain forms,
 * the handshake on one connection (the server reports the connections its messages came on),
 * an authenticated connection kept for its credentials only, the auth callback, a server that
 * closes mid-handshake, and a forward proxy demanding NTLM. */
#define _DEFAULT_SOURCE
#include "task.h"
#include "testsrv.h"
#include "testutil.h"

#include <tern.h>

#include <stdarg.h>
#include <stdbool.h>
#include <strings.h>

static char *url_path(const char *portkey, const char *path) { return testsrv_url(portkey, path); }

/* "DOMAIN\user" (domain != NULL) or "user", malloc'd. */
static char *ntlm_user(const char *domain) {
  const char *u = testsrv_get("NTLM_USER");
  size_t n = strlen(u) + (domain ? strlen(domain) + 1 : 0) + 1;
  char *s = malloc(n);
  ASSERT(s != NULL);
  if (domain)
    snprintf(s, n, "%s\\%s", domain, u);
  else
    snprintf(s, n, "%s", u);
  return s;
}

typedef struct {
  int n;
  int status[8];
  char conn[8][16]; /* X-NTLM-Conn of each hop's response */
} hops;

static int on_hop(tern_request_t *req, int status, void *ud) {
  hops *h = ud;
  ASSERT_LT(h->n, 8);
  h->status[h->n] = status;
  const char *c = tern_request_get_header(req, "X-NTLM-Conn");
  snprintf(h->conn[h->n], sizeof h->conn[0], "%s", c ? c : "");
  h->n++;
  return 0;
}

static tern_request_t *ntlm_get(tern_engine_t *eng, const char *path, const char *user,
                                const char *password, unsigned schemes, hops *h) {
  char *url = url_path("NTLM_PORT", path);
  tern_request_t *req = test_request_url(url);
  free(url);
  if (user) ASSERT_EQ(tern_request_set_auth(req, user, password, schemes), 0);
  if (h) ASSERT_EQ(tern_request_set_hop_response_cb(req, on_hop, h), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  return req;
}

/* The value of "key=" in the server's facts line, as a number (-1 when absent). */
static long fact(const char *facts, const char *key) {
  char k[64];
  snprintf(k, sizeof k, " %s=", key);
  const char *p = strstr(facts, k);
  return p ? strtol(p + strlen(k), NULL, 10) : -1;
}

/* The whole handshake (the first request, NEGOTIATE, AUTHENTICATE) went on one connection. */
static void assert_one_connection(const char *facts, long requests) {
  long conn = fact(facts, "conn");
  ASSERT(conn > 0);
  ASSERT_EQ(fact(facts, "negotiate_conn"), conn);
  ASSERT_EQ(fact(facts, "authenticate_conn"), conn);
  if (requests) ASSERT_EQ(fact(facts, "requests"), requests);
}

TEST(ntlm_domain_user_succeeds_on_one_connection) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *user = ntlm_user(testsrv_get("NTLM_DOMAIN"));
  hops h = { 0 };
  tern_request_t *req =
      ntlm_get(eng, "/doc", user, testsrv_get("NTLM_PASSWORD"), TERN_AUTH_NTLM, &h);
  ASSERT_EQ(tern_request_get_status(req), 200);
  char *body = test_req_body_str(req);
  ASSERT(strstr(body, "ok user=TERNDOM\\alice ") == body);
  assert_one_connection(body, 3);
  /* three hops: 401 (bare challenge), 401 (CHALLENGE), 200; all on one connection */
  ASSERT_EQ(h.n, 3);
  ASSERT_EQ(h.status[0], 401);
  ASSERT_EQ(h.status[1], 401);
  ASSERT_STR_EQ(h.conn[0], h.conn[1]);
  ASSERT_STR_EQ(h.conn[1], tern_request_get_header(req, "X-NTLM-Conn"));
  free(body);
  tern_request_free(req);
  free(user);
  test_finish(eng);
}

TEST(ntlm_user_without_domain_and_any_scheme) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *user = ntlm_user(NULL);
  /* TERN_AUTH_ANY includes NTLM (curl's CURLAUTH_ANY does too). */
  tern_request_t *req =
      ntlm_get(eng, "/plain", user, testsrv_get("NTLM_PASSWORD"), TERN_AUTH_ANY, NULL);
  ASSERT_EQ(tern_request_get_status(req), 200);
  char *body = test_req_body_str(req);
  ASSERT(strstr(body, "ok user=alice ") == body);
  assert_one_connection(body, 3);
  free(body);
  tern_request_free(req);
  free(user);
  test_finish(eng);
}

TEST(ntlm_wrong_credentials_give_401) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *user = ntlm_user(testsrv_get("NTLM_DOMAIN"));
  hops h = { 0 };
  /* wrong password: one handshake, then the 401 stands (as for Basic and Digest, curl: 401) */
  tern_request_t *req = ntlm_get(eng, "/doc", user, "not-the-password", TERN_AUTH_NTLM, &h);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT_EQ(tern_request_get_error(req), 0);
  ASSERT_EQ(h.n, 3);
  char *body = test_req_body_str(req);
  ASSERT(strstr(body, "NTLM authentication failed") != NULL);
  free(body);
  tern_request_free(req);
  /* the right password for another domain is no better */
  char *other = ntlm_user("OTHERDOM");
  req = ntlm_get(eng, "/doc", other, testsrv_get("NTLM_PASSWORD"), TERN_AUTH_NTLM, NULL);
  ASSERT_EQ(tern_request_get_status(req), 401);
  tern_request_free(req);
  /* nor an unknown user */
  req =
      ntlm_get(eng, "/doc", "TERNDOM\\mallory", testsrv_get("NTLM_PASSWORD"), TERN_AUTH_NTLM, NULL);
  ASSERT_EQ(tern_request_get_status(req), 401);
  tern_request_free(req);
  /* schemes without NTLM cannot answer: the first 401 is final */
  hops h2 = { 0 };
  req = ntlm_get(eng, "/doc", user, testsrv_get("NTLM_PASSWORD"),
                 TERN_AUTH_BASIC | TERN_AUTH_DIGEST, &h2);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT_EQ(h2.n, 1);
  tern_request_free(req);
  free(other);
  free(user);
  test_finish(eng);
}

/* NTLM authenticates the connection: the next request with the same credentials goes on it
 * without a handshake; a request with other credentials, or none, never gets it. */
TEST(ntlm_connection_kept_for_its_credentials) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *user = ntlm_user(testsrv_get("NTLM_DOMAIN"));
  const char *pw = testsrv_get("NTLM_PASSWORD");
  tern_request_t *req = ntlm_get(eng, "/1", user, pw, TERN_AUTH_NTLM, NULL);
  ASSERT_EQ(tern_request_get_status(req), 200);
  char *body = test_req_body_str(req);
  long conn = fact(body, "conn");
  free(body);
  tern_request_free(req);

  hops h = { 0 };
  req = ntlm_get(eng, "/2", user, pw, TERN_AUTH_NTLM, &h);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(h.n, 1); /* no handshake: the connection is authenticated */
  body = test_req_body_str(req);
  ASSERT_EQ(fact(body, "conn"), conn);
  ASSERT_EQ(fact(body, "requests"), 4);
  free(body);
  tern_request_free(req);

  /* no credentials: a new connection, and the server's 401 */
  req = ntlm_get(eng, "/3", NULL, NULL, 0, NULL);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT(atol(tern_request_get_header(req, "X-NTLM-Conn")) != conn);
  tern_request_free(req);
  /* other credentials (the same user without the domain): a new connection too */
  char *plain = ntlm_user(NULL);
  req = ntlm_get(eng, "/4", plain, pw, TERN_AUTH_NTLM, NULL);
  ASSERT_EQ(tern_request_get_status(req), 200);
  body = test_req_body_str(req);
  ASSERT(strstr(body, "ok user=alice ") == body);
  ASSERT(fact(body, "conn") != conn);
  assert_one_connection(body, 0);
  free(body);
  tern_request_free(req);
  free(plain);
  free(user);
  test_finish(eng);
}

/* Several at once with the same credentials: each connection does its own handshake. */
TEST(ntlm_concurrent_requests) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *user = ntlm_user(testsrv_get("NTLM_DOMAIN"));
  enum { N = 6 };
  tern_request_t *reqs[N];
  test_waiter w;
  test_waiter_init(&w, N);
  for (int i = 0; i < N; i++) {
    char *url = url_path("NTLM_PORT", "/many");
    reqs[i] = test_request_url(url);
    free(url);
    ASSERT_EQ(tern_request_set_auth(reqs[i], user, testsrv_get("NTLM_PASSWORD"), TERN_AUTH_NTLM),
              0);
    test_waiter_submit(&w, eng, reqs[i]);
  }
  test_waiter_wait(&w, 20000);
  for (int i = 0; i < N; i++) {
    ASSERT_EQ(tern_request_get_error(reqs[i]), 0);
    ASSERT_EQ(tern_request_get_status(reqs[i]), 200);
    char *body = test_req_body_str(reqs[i]);
    assert_one_connection(body, 0);
    free(body);
    tern_request_free(reqs[i]);
  }
  free(user);
  test_finish(eng);
}

TEST(ntlm_post_body_sent_again) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *user = ntlm_user(testsrv_get("NTLM_DOMAIN"));
  char *url = url_path("NTLM_PORT", "/post");
  tern_request_t *req = test_request_url(url);
  free(url);
  ASSERT_EQ(tern_request_set_method(req, "POST"), 0);
  ASSERT_EQ(tern_request_set_body(req, "hello ntlm", 10), 0);
  ASSERT_EQ(tern_request_set_auth(req, user, testsrv_get("NTLM_PASSWORD"), TERN_AUTH_NTLM), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  char *body = test_req_body_str(req);
  ASSERT_EQ(fact(body, "body_bytes"), 10);
  ASSERT_EQ(fact(body, "negotiate_body"), 0); /* the NEGOTIATE went without it (as curl) */
  assert_one_connection(body, 3);
  free(body);
  tern_request_free(req);
  /* 2 MiB (Expect: 100-continue): sent with the first request and the AUTHENTICATE */
  size_t n = 2u << 20;
  char *big = malloc(n);
  ASSERT(big != NULL);
  memset(big, 'x', n);
  url = url_path("NTLM_PORT", "/post-big");
  req = test_request_url(url);
  free(url);
  ASSERT_EQ(tern_request_set_method(req, "POST"), 0);
  ASSERT_EQ(tern_request_set_body(req, big, n), 0);
  ASSERT_EQ(tern_request_set_auth(req, user, testsrv_get("NTLM_PASSWORD"), TERN_AUTH_NTLM), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  body = test_req_body_str(req);
  ASSERT_EQ(fact(body, "body_bytes"), (long)n);
  ASSERT_EQ(fact(body, "negotiate_body"), 0);
  ASSERT_EQ(fact(body, "negotiate_conn"), fact(body, "conn"));
  ASSERT_EQ(fact(body, "authenticate_conn"), fact(body, "conn"));
  free(body);
  free(big);
  tern_request_free(req);
  free(user);
  test_finish(eng);
}

typedef struct {
  int calls;
  char scheme[16];
  const char *user, *password;
} ntlm_script;

static int on_auth(tern_request_t *req, int is_proxy, const char *scheme, const char *realm,
                   void *ud) {
  (void)realm;
  ntlm_script *s = ud;
  ASSERT_EQ(is_proxy, 0);
  snprintf(s->scheme, sizeof s->scheme, "%s", scheme);
  if (s->calls++ > 0) return 0;
  ASSERT_EQ(tern_request_supply_auth(req, s->user, s->password), 0);
  return 1;
}

TEST(ntlm_credentials_from_the_auth_callback) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *user = ntlm_user(testsrv_get("NTLM_DOMAIN"));
  ntlm_script s = { .user = user, .password = testsrv_get("NTLM_PASSWORD") };
  char *url = url_path("NTLM_PORT", "/cb");
  tern_request_t *req = test_request_url(url);
  free(url);
  ASSERT_EQ(tern_request_set_auth_cb(req, on_auth, &s), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(s.calls, 1);
  ASSERT_STR_EQ(s.scheme, "NTLM");
  char *body = test_req_body_str(req);
  /* The credentials came after the first 401: the handshake itself is on one connection. */
  ASSERT(strstr(body, "ok user=TERNDOM\\alice ") == body);
  ASSERT_EQ(fact(body, "negotiate_conn"), fact(body, "conn"));
  ASSERT_EQ(fact(body, "authenticate_conn"), fact(body, "conn"));
  free(body);
  tern_request_free(req);
  /* refused: asked again, and stopping leaves the 401 */
  s.calls = 0;
  s.password = "wrong";
  url = url_path("NTLM_PORT", "/cb");
  req = test_request_url(url);
  free(url);
  ASSERT_EQ(tern_request_set_auth_cb(req, on_auth, &s), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT_EQ(s.calls, 2);
  tern_request_free(req);
  free(user);
  test_finish(eng);
}

TEST(ntlm_server_closing_mid_handshake_is_an_error) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *user = ntlm_user(testsrv_get("NTLM_DOMAIN"));
  char *url = url_path("NTLM_PORT", "/close-after-challenge");
  tern_request_t *req = test_request_url(url);
  free(url);
  ASSERT_EQ(tern_request_set_auth(req, user, testsrv_get("NTLM_PASSWORD"), TERN_AUTH_NTLM), 0);
  ASSERT_EQ(test_run(eng, req), TERN_EAUTH);
  ASSERT(strstr(tern_request_get_error_message(req),
                "closed the connection during the NTLM handshake") != NULL);
  tern_request_free(req);
  free(user);
  test_finish(eng);
}

/* ---- a forward proxy demanding NTLM ---- */

static tern_request_t *proxied(tern_engine_t *eng, const char *user, const char *password) {
  char *url = testsrv_url("NGINX_PORT", "/1k.bin");
  tern_request_t *req = test_request_url(url);
  free(url);
  char proxy[64];
  snprintf(proxy, sizeof proxy, "http://127.0.0.1:%d", testsrv_port("NTLM_PROXY_PORT"));
  ASSERT_EQ(tern_request_set_proxy(req, proxy), 0);
  if (user) ASSERT_EQ(tern_request_set_proxy_auth(req, user, password, TERN_AUTH_NTLM), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  return req;
}

TEST(ntlm_proxy_authentication) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *user = ntlm_user(testsrv_get("NTLM_DOMAIN"));
  tern_request_t *req = proxied(eng, user, testsrv_get("NTLM_PASSWORD"));
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  const char *facts = tern_request_get_header(req, "X-NTLM-Proxy");
  ASSERT(facts != NULL);
  ASSERT(strstr(facts, "ok user=TERNDOM\\alice ") == facts);
  assert_one_connection(facts, 3);
  long conn = fact(facts, "conn");
  tern_request_free(req);
  /* the authenticated proxy connection is reused by the same credentials */
  req = proxied(eng, user, testsrv_get("NTLM_PASSWORD"));
  ASSERT_EQ(tern_request_get_status(req), 200);
  facts = tern_request_get_header(req, "X-NTLM-Proxy");
  ASSERT_EQ(fact(facts, "conn"), conn);
  ASSERT_EQ(fact(facts, "requests"), 4);
  tern_request_free(req);
  /* wrong password: the 407 stands; none: the first 407 */
  req = proxied(eng, user, "wrong");
  ASSERT_EQ(tern_request_get_status(req), 407);
  tern_request_free(req);
  req = proxied(eng, NULL, NULL);
  ASSERT_EQ(tern_request_get_status(req), 407);
  tern_request_free(req);
  free(user);
  test_finish(eng);
}

/* A server whose CHALLENGE has no target info (NTLMv2 cannot be computed): answered with NTLMv1
 * only when the caller allows it with TERN_AUTH_NTLM_V1. */
TEST(ntlm_v1_only_when_allowed) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *user = ntlm_user(testsrv_get("NTLM_DOMAIN"));
  hops h = { 0 };
  tern_request_t *req =
      ntlm_get(eng, "/ntlmv1/a", user, testsrv_get("NTLM_PASSWORD"), TERN_AUTH_NTLM, &h);
  ASSERT_EQ(tern_request_get_status(req), 401);
  ASSERT_EQ(h.n, 2); /* the NEGOTIATE went; the v1-only CHALLENGE was not answered */
  tern_request_free(req);
  req = ntlm_get(eng, "/ntlmv1/b", user, testsrv_get("NTLM_PASSWORD"),
                 TERN_AUTH_NTLM | TERN_AUTH_NTLM_V1, NULL);
  ASSERT_EQ(tern_request_get_status(req), 200);
  char *body = test_req_body_str(req);
  ASSERT(strstr(body, "ok user=TERNDOM\\alice ") == body);
  assert_one_connection(body, 0); /* on the first request's connection, kept alive */
  free(body);
  tern_request_free(req);
  req = ntlm_get(eng, "/ntlmv1/c", user, "wrong", TERN_AUTH_NTLM | TERN_AUTH_NTLM_V1, NULL);
  ASSERT_EQ(tern_request_get_status(req), 401);
  tern_request_free(req);
  free(user);
  test_finish(eng);
}

/* https through the proxy: the CONNECT requests carry the handshake, all on one connection,
 * which then becomes the tunnel. */
TEST(ntlm_proxy_connect_tunnel) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *user = ntlm_user(testsrv_get("NTLM_DOMAIN"));
  char url[128], proxy[64];
  snprintf(url, sizeof url, "https://localhost:%d/1k.bin", testsrv_port("TLS_PORT"));
  snprintf(proxy, sizeof proxy, "http://127.0.0.1:%d", testsrv_port("NTLM_PROXY_PORT"));
  for (int round = 0; round < 2; round++) {
    tern_request_t *req = test_request_url(url);
    ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
    ASSERT_EQ(tern_request_set_proxy(req, proxy), 0);
    ASSERT_EQ(tern_request_set_proxy_auth(req, user, testsrv_get("NTLM_PASSWORD"), TERN_AUTH_NTLM),
              0);
    hops h = { 0 };
    ASSERT_EQ(tern_request_set_hop_response_cb(req, on_hop, &h), 0);
    ASSERT_EQ(test_run(eng, req), 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    test_assert_req_body_sha(req, "SHA_1K");
    if (round == 0) {
      /* 407 (bare), 407 (CHALLENGE) on one connection; then the tunnel's 200 */
      ASSERT_EQ(h.n, 3);
      ASSERT_EQ(h.status[0], 407);
      ASSERT_EQ(h.status[1], 407);
      ASSERT_STR_EQ(h.conn[0], h.conn[1]);
      ASSERT_EQ(tern_request_get_connect_status(req), 200);
    } else {
      ASSERT_EQ(h.n, 1); /* the pooled tunnel */
    }
    tern_request_free(req);
  }
  /* a wrong password: the 407 stands */
  tern_request_t *req = test_request_url(url);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(tern_request_set_proxy(req, proxy), 0);
  ASSERT_EQ(tern_request_set_proxy_auth(req, user, "wrong", TERN_AUTH_NTLM), 0);
  int err = test_run(eng, req);
  ASSERT_EQ(err, TERN_EPROXY);
  ASSERT_EQ(tern_request_get_connect_status(req), 407);
  tern_request_free(req);
  free(user);
  test_finish(eng);
}

/* A redirect to another origin through the proxy takes another proxy connection, which the
 * proxy challenges again: the same credentials do the handshake again there. */
TEST(ntlm_proxy_redirect_to_another_origin) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *user = ntlm_user(testsrv_get("NTLM_DOMAIN"));
  char url[256], proxy[64];
  snprintf(url, sizeof url,
           "http://127.0.0.1:%d/redirect?status=302&to=http%%3A%%2F%%2Flocalhost%%3A%d%%2F1k.bin",
           testsrv_port("FAULT_PORT"), testsrv_port("NGINX_PORT"));
  snprintf(proxy, sizeof proxy, "http://127.0.0.1:%d", testsrv_port("NTLM_PROXY_PORT"));
  tern_request_t *req = test_request_url(url);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 3), 0);
  ASSERT_EQ(tern_request_set_proxy(req, proxy), 0);
  ASSERT_EQ(tern_request_set_proxy_auth(req, user, testsrv_get("NTLM_PASSWORD"), TERN_AUTH_NTLM),
            0);
  hops h = { 0 };
  ASSERT_EQ(tern_request_set_hop_response_cb(req, on_hop, &h), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  /* 407 407 302, then 407 407 200 on a second proxy connection */
  ASSERT_EQ(h.n, 6);
  ASSERT_EQ(h.status[2], 302);
  ASSERT_EQ(h.status[3], 407);
  ASSERT(strcmp(h.conn[0], h.conn[3]) != 0);
  ASSERT_STR_EQ(h.conn[3], h.conn[4]);
  const char *facts = tern_request_get_header(req, "X-NTLM-Proxy");
  ASSERT(facts != NULL);
  assert_one_connection(facts, 3);
  tern_request_free(req);
  free(user);
  test_finish(eng);
}

/* Malformed NTLM challenges from the fault server (the same one every time): the NEGOTIATE
 * goes once, the CHALLENGE that is not one is refused, and the 401 stands. */
TEST(ntlm_malformed_challenges) {
  tern_engine_t *eng = test_engine_new(NULL);
  static const char *const values[] = {
    "NTLM",
    "NTLM%20!!!!",
    "NTLM%20TlRMTVNTUAACAAAA",                 /* truncated */
    "NTLM%20TlRMTVNTUAABAAAAB4IIAAAAAAAAAAAA", /* a NEGOTIATE, not a CHALLENGE */
    "Negotiate%2C%20NTLM",
    "NTLM%20%3D%3D%3D%3D",
  };
  for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
    char path[160];
    snprintf(path, sizeof path, "/challenge?www=%s", values[i]);
    char *url = url_path("FAULT_PORT", path);
    tern_request_t *req = test_request_url(url);
    free(url);
    ASSERT_EQ(tern_request_set_auth(req, "DOM\\u", "p", TERN_AUTH_NTLM), 0);
    hops h = { 0 };
    ASSERT_EQ(tern_request_set_hop_response_cb(req, on_hop, &h), 0);
    int err = test_run(eng, req);
    if (err != 0 || tern_request_get_status(req) != 401 || h.n != 2)
      TEST_FAIL_("challenge %s: error %s, status %d, %d hops", values[i], tern_err_name(err),
                 tern_request_get_status(req), h.n);
    tern_request_free(req);
  }
  test_finish(eng);
}
