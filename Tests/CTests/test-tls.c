/* TLS integration tests against real servers with certificates made at start-up
 * (Tests/TestServer/certs.py): nginx on TLS_PORT (valid), TLS_EXPIRED_PORT, TLS_NOTYET_PORT,
 * TLS_WRONGHOST_PORT, TLS_SELFSIGNED_PORT, TLS_CLIENTCERT_PORT (ssl_verify_client on), and the
 * fault server's TLS peers TLS_REQCERT_PORT (Python TLS 1.3 server that fails the handshake
 * without a client certificate), TLS_GARBAGE_PORT (plain-text reply) and TLS_STALL_PORT (never
 * answers the ClientHello). */
#define _DEFAULT_SOURCE
#define _XOPEN_SOURCE 700 /* posix_openpt, ptsname */
#include "task.h"
#include "testsrv.h"
#include "testutil.h"

#include <tern.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ---- */

/* "https://HOST:PORT/path"; host "[::1]" for IPv6. */
static void https_url(char *out, size_t n, const char *host, const char *portkey,
                      const char *path) {
  snprintf(out, n, "https://%s:%d%s%s", host, testsrv_port(portkey), path[0] == '/' ? "" : "/",
           path);
}

/* A GET of https://HOST:PORT/path; with_ca trusts the test CA (curl --cacert CA_PEM). */
static tern_request_t *tls_request(const char *host, const char *portkey, const char *path,
                                   bool with_ca) {
  char url[256];
  https_url(url, sizeof url, host, portkey, path);
  tern_request_t *req = test_request_url(url);
  if (with_ca) ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  return req;
}

/* The request completed with `want` (0: success); says what it got instead when not. */
#define ASSERT_TERN_ERR(req, want)                                                                 \
  do {                                                                                             \
    int got_ = tern_request_get_error(req);                                                        \
    int want_ = (want);                                                                            \
    if (got_ != want_)                                                                             \
      TEST_FAIL_("expected %s (%d), got %s (%d): \"%s\" (status %d, %" PRIu64 " body bytes)",      \
                 tern_err_name(want_), want_, tern_err_name(got_), got_,                           \
                 tern_request_get_error_message(req), tern_request_get_status(req),                \
                 tern_request_get_bytes_received(req));                                            \
  } while (0)

static bool contains(const char *hay, size_t n, const char *needle) {
  size_t k = strlen(needle);
  for (size_t i = 0; i + k <= n; i++)
    if (memcmp(hay + i, needle, k) == 0) return true;
  return false;
}

/* One request expected to fail certificate verification with `want`. */
static void expect_verify_error(const char *host, const char *portkey, bool with_ca, int want) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request(host, portkey, "/1k.bin", with_ca);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, want);
  ASSERT(tern_error_is_tls_verify(want));
  ASSERT_EQ(tern_request_get_status(req), 0);
  ASSERT(tern_request_get_error_message(req)[0] != '\0');
  size_t len = 1;
  tern_request_get_body(req, &len);
  ASSERT_EQ(len, 0);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 0); /* never pooled */
  tern_request_free(req);
  test_finish(eng);
}

/* ---- bodies over TLS ---- */

TEST(tls_download_1k) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request("localhost", "TLS_PORT", "/1k.bin", true);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_UEQ(tern_request_get_bytes_received(req), 1024);
  test_assert_req_body_sha(req, "SHA_1K");
  const char *v = tern_request_get_tls_version(req);
  ASSERT(v != NULL);
  ASSERT(strcmp(v, "TLSv1.3") == 0 || strcmp(v, "TLSv1.2") == 0);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-SSL-Protocol"), v); /* nginx agrees */
  ASSERT_EQ(tern_request_is_tls_resumed(req), 0);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-SSL-Session-Reused"), ".");
  ASSERT_EQ(tern_request_was_client_cert_requested(req), 0);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-Client-Verify"), "NONE");
  tern_request_free(req);

  /* Plain HTTP on the same engine reports no TLS at all. */
  req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT(tern_request_get_tls_version(req) == NULL);
  ASSERT_EQ(tern_request_is_tls_resumed(req), 0);
  ASSERT(tern_request_get_header(req, "X-SSL-Protocol") == NULL);
  tern_request_free(req);
  test_finish(eng);
}

TEST(tls_tls13_negotiated) {
  /* OpenSSL 3 on both ends: TLS 1.3 is what must come out. */
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request("localhost", "TLS_PORT", "/empty.bin", true);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_STR_EQ(tern_request_get_tls_version(req), "TLSv1.3");
  ASSERT_UEQ(tern_request_get_bytes_received(req), 0);
  test_assert_req_body_sha(req, "SHA_EMPTY");
  tern_request_free(req);
  test_finish(eng);
}

TEST(tls_download_100m) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *dest = test_tmp_path("tls-100m.bin");
  tern_request_t *req = tls_request("localhost", "TLS_PORT", "/100m.bin", true);
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 0), 0);
  /* A stall shows up in 15 s (scaled), not at the 60 s default. */
  ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_BODY, test_scaled_ms(15000)), 0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_UEQ(tern_request_get_bytes_received(req), 100u << 20);
  ASSERT_EQ(tern_request_get_content_length(req), (int64_t)(100u << 20));
  test_assert_file_sha(dest, "SHA_100M");
  tern_request_free(req);
  unlink(dest);
  free(dest);
  test_finish(eng);
}

TEST(tls_chunked_64k) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request("localhost", "TLS_PORT", "/chunked/64k.txt", true);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_STR_EQ(tern_request_get_header(req, "Transfer-Encoding"), "chunked");
  test_assert_req_body_sha(req, "SHA_64K");
  tern_request_free(req);
  test_finish(eng);
}

/* The name (SNI + DNS SAN) and both address forms (IP SANs, no SNI) verify. */
TEST(tls_localhost_ipv4_ipv6) {
  tern_engine_t *eng = test_engine_new(NULL);
  const char *hosts[] = { "localhost", "127.0.0.1", "[::1]" };
  for (int i = 0; i < 3; i++) {
    if (i == 2 && !testsrv_has_ipv6()) break;
    tern_request_t *req = tls_request(hosts[i], "TLS_PORT", "/1k.bin", true);
    test_run(eng, req);
    ASSERT_TERN_ERR(req, 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    test_assert_req_body_sha(req, "SHA_1K");
    tern_request_free(req);
  }
  test_finish(eng);
}

/* A trusted CA directory (CApath) works like the CA file. */
TEST(tls_ca_path) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request("localhost", "TLS_PORT", "/1k.bin", false);
  ASSERT_EQ(tern_request_set_tls_ca_path(req, testsrv_get("CA_DIR")), 0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  tern_request_free(req);
  test_finish(eng);
}

/* ---- verification failures ---- */

TEST(tls_expired) {
  expect_verify_error("localhost", "TLS_EXPIRED_PORT", true, TERN_ETLSCERTEXPIRED);
}

TEST(tls_not_yet_valid) {
  expect_verify_error("localhost", "TLS_NOTYET_PORT", true, TERN_ETLSCERTNOTYETVALID);
}

TEST(tls_wrong_host) {
  expect_verify_error("localhost", "TLS_WRONGHOST_PORT", true, TERN_ETLSHOSTNAME);
  expect_verify_error("127.0.0.1", "TLS_WRONGHOST_PORT", true, TERN_ETLSHOSTNAME);
}

/* A certificate valid for localhost but not for the address the URL names: the IP SANs are
 * checked, not the DNS one. */
TEST(tls_ip_not_in_san) {
  if (!testsrv_has_ipv6()) return;
  /* server.pem has IP:::1, so [::1] passes; wronghost.pem has no IP SAN at all. */
  expect_verify_error("[::1]", "TLS_WRONGHOST_PORT", true, TERN_ETLSHOSTNAME);
}

TEST(tls_self_signed) {
  expect_verify_error("localhost", "TLS_SELFSIGNED_PORT", true, TERN_ETLSUNKNOWNCA);
}

/* Without a CA of our own the system store is used, which does not know the test CA. */
TEST(tls_system_store_unknown_ca) {
  expect_verify_error("localhost", "TLS_PORT", false, TERN_ETLSUNKNOWNCA);
}

/* curl -k: verification off accepts every bad certificate. */
TEST(tls_verify_off) {
  tern_engine_t *eng = test_engine_new(NULL);
  const char *ports[] = { "TLS_EXPIRED_PORT", "TLS_NOTYET_PORT", "TLS_WRONGHOST_PORT",
                          "TLS_SELFSIGNED_PORT", "TLS_PORT" };
  for (int i = 0; i < 5; i++) {
    tern_request_t *req = tls_request("localhost", ports[i], "/1k.bin", false);
    ASSERT_EQ(tern_request_set_tls_verify(req, 0), 0);
    test_run(eng, req);
    ASSERT_TERN_ERR(req, 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    test_assert_req_body_sha(req, "SHA_1K");
    ASSERT(tern_request_get_tls_version(req) != NULL);
    tern_request_free(req);
  }
  test_finish(eng);
}

/* A connection (or session) made with verification off must never serve a verifying request:
 * different TLS settings never share a pooled connection, and resuming a session must not
 * skip the certificate check the new request asks for. */
TEST(tls_settings_isolate_pool_and_sessions) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* Pooled connection with verification off ... */
  tern_request_t *req = tls_request("localhost", "TLS_SELFSIGNED_PORT", "/1k.bin", false);
  ASSERT_EQ(tern_request_set_tls_verify(req, 0), 0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  tern_request_free(req);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 1);
  /* ... is not reused by a verifying request to the same origin. */
  req = tls_request("localhost", "TLS_SELFSIGNED_PORT", "/1k.bin", true);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, TERN_ETLSUNKNOWNCA);
  ASSERT_EQ(tern_request_is_reused(req), 0);
  tern_request_free(req);

  /* Same with a session: unverified non-persistent connection, then a verifying one. */
  req = tls_request("localhost", "TLS_SELFSIGNED_PORT", "/1k.bin?s=1", false);
  ASSERT_EQ(tern_request_set_tls_verify(req, 0), 0);
  ASSERT_EQ(tern_request_set_persistent(req, 0), 0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  tern_request_free(req);
  req = tls_request("localhost", "TLS_SELFSIGNED_PORT", "/1k.bin?s=2", false);
  test_run(eng, req); /* system store */
  ASSERT_TERN_ERR(req, TERN_ETLSUNKNOWNCA);
  ASSERT_EQ(tern_request_is_tls_resumed(req), 0);
  tern_request_free(req);

  /* A connection verified against the test CA is not reused by a request that trusts only
   * the system store. */
  req = tls_request("localhost", "TLS_PORT", "/1k.bin", true);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  tern_request_free(req);
  req = tls_request("localhost", "TLS_PORT", "/1k.bin", false);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, TERN_ETLSUNKNOWNCA);
  ASSERT_EQ(tern_request_is_reused(req), 0);
  tern_request_free(req);
  test_finish(eng);
}

/* The engine's TLS settings (tern_config_set_tls_*) serve every request without settings of
 * its own; the config may go once the engine has its copies. A request with any setting of
 * its own starts from the defaults instead, and never shares the engine-set connection. */
TEST(tls_engine_settings_serve_requests_without_their_own) {
  tern_config_t *cfg = NULL;
  ASSERT_EQ(tern_config_new(&cfg), 0);
  ASSERT_EQ(tern_config_set_tls_client_cert(cfg, NULL, "key.pem", NULL), TERN_EINVAL);
  ASSERT_EQ(tern_config_set_tls_ca_file(cfg, "/nonexistent/replaced.pem"), 0);
  ASSERT_EQ(tern_config_set_tls_ca_file(cfg, testsrv_get("CA_PEM")), 0);
  ASSERT_EQ(tern_config_set_tls_client_cert(cfg, testsrv_get("CLIENT_CERT"),
                                            testsrv_get("CLIENT_KEY"), NULL),
            0);
  tern_engine_t *eng = test_engine_new(cfg);
  tern_config_free(cfg);

  /* The engine's CA file verifies the server, its certificate answers nginx's request. */
  tern_request_t *req = tls_request("localhost", "TLS_PORT", "/1k.bin", false);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  tern_request_free(req);
  req = tls_request("localhost", "TLS_CLIENTCERT_PORT", "/1k.bin", false);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-Client-Verify"), "SUCCESS");
  tern_request_free(req);

  /* One setting of its own: the system store again, and not the pooled connection. */
  req = tls_request("localhost", "TLS_PORT", "/1k.bin", false);
  ASSERT_EQ(tern_request_set_tls_verify(req, 1), 0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, TERN_ETLSUNKNOWNCA);
  ASSERT_EQ(tern_request_is_reused(req), 0);
  tern_request_free(req);
  /* Its own CA file and no certificate: nginx answers 400, having asked for one. */
  req = tls_request("localhost", "TLS_CLIENTCERT_PORT", "/1k.bin", true);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_get_status(req), 400);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-Client-Verify"), "NONE");
  tern_request_free(req);

  /* And the engine's settings still serve the next request without its own, reusing. */
  req = tls_request("localhost", "TLS_PORT", "/1k.bin", false);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_is_reused(req), 1);
  tern_request_free(req);
  test_finish(eng);

  /* Verification off at the engine: curl -k for every request that does not say otherwise. */
  ASSERT_EQ(tern_config_new(&cfg), 0);
  ASSERT_EQ(tern_config_set_tls_verify(cfg, 0), 0);
  eng = test_engine_new(cfg);
  tern_config_free(cfg);
  req = tls_request("localhost", "TLS_SELFSIGNED_PORT", "/1k.bin", false);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  tern_request_free(req);
  req = tls_request("localhost", "TLS_SELFSIGNED_PORT", "/1k.bin", true);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, TERN_ETLSUNKNOWNCA);
  tern_request_free(req);
  test_finish(eng);
}

/* ---- client certificates ---- */

/* nginx with ssl_verify_client on asks for a certificate, completes the handshake without one
 * and answers 400; the engine says the certificate was asked for. */
TEST(tls_client_cert_missing_nginx) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request("localhost", "TLS_CLIENTCERT_PORT", "/1k.bin", true);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_get_status(req), 400);
  ASSERT_EQ(tern_request_was_client_cert_requested(req), 1);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-Client-Verify"), "NONE");
  size_t len = 0;
  const char *body = tern_request_get_body(req, &len);
  ASSERT(body != NULL && len > 0);
  ASSERT(contains(body, len, "No required SSL certificate was sent"));
  tern_request_free(req);
  test_finish(eng);
}

TEST(tls_client_cert_nginx) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request("localhost", "TLS_CLIENTCERT_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_tls_client_cert(req, testsrv_get("CLIENT_CERT"),
                                             testsrv_get("CLIENT_KEY"), NULL),
            0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-Client-Verify"), "SUCCESS");
  ASSERT_EQ(tern_request_was_client_cert_requested(req), 0); /* asked, and one was sent */
  test_assert_req_body_sha(req, "SHA_1K");
  tern_request_free(req);
  test_finish(eng);
}

TEST(tls_client_cert_encrypted_key) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request("localhost", "TLS_CLIENTCERT_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_tls_client_cert(req, testsrv_get("CLIENT_CERT"),
                                             testsrv_get("CLIENT_KEY_ENC"),
                                             testsrv_get("CLIENT_KEY_PASSWORD")),
            0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-Client-Verify"), "SUCCESS");
  tern_request_free(req);

  req = tls_request("localhost", "TLS_CLIENTCERT_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_tls_client_cert(req, testsrv_get("CLIENT_CERT"),
                                             testsrv_get("CLIENT_KEY_ENC"), "wrong-password"),
            0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, TERN_ETLSCERTFILE);
  ASSERT_EQ(tern_request_get_status(req), 0);
  ASSERT(tern_request_get_error_message(req)[0] != '\0');
  tern_request_free(req);
  test_finish(eng);
}

TEST(tls_cert_and_ca_file_errors) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *missing = test_tmp_path("no-such-file.pem");

  /* Client certificate file that does not exist. */
  tern_request_t *req = tls_request("localhost", "TLS_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_tls_client_cert(req, missing, testsrv_get("CLIENT_KEY"), NULL), 0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, TERN_ETLSCERTFILE);
  tern_request_free(req);

  /* A key that does not belong to the certificate. */
  char *wrong_key = malloc(strlen(testsrv_get("CERTS")) + 32);
  ASSERT(wrong_key != NULL);
  sprintf(wrong_key, "%s/server.key", testsrv_get("CERTS"));
  req = tls_request("localhost", "TLS_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_tls_client_cert(req, testsrv_get("CLIENT_CERT"), wrong_key, NULL), 0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, TERN_ETLSCERTFILE);
  tern_request_free(req);
  free(wrong_key);

  /* CA file that does not exist, and one that is not PEM at all. */
  req = tls_request("localhost", "TLS_PORT", "/1k.bin", false);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, missing), 0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, TERN_ETLSCAFILE);
  ASSERT_EQ(tern_request_get_status(req), 0);
  tern_request_free(req);

  char *notpem = testsrv_www_path("1k.bin");
  req = tls_request("localhost", "TLS_PORT", "/1k.bin", false);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, notpem), 0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, TERN_ETLSCAFILE);
  tern_request_free(req);
  free(notpem);
  free(missing);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 0);
  test_finish(eng);
}

/* A TLS 1.3 server that fails the handshake without a client certificate (alert
 * certificate_required). In TLS 1.3 the client's side of the handshake is already complete
 * when the server rejects it, so the alert arrives on the first read after it. */
TEST(tls_reqcert_without_cert) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request("localhost", "TLS_REQCERT_PORT", "/x", true);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, TERN_ETLSCLIENTCERT);
  ASSERT_EQ(tern_request_get_status(req), 0);
  ASSERT_EQ(tern_request_was_client_cert_requested(req), 1);
  tern_request_free(req);
  test_finish(eng);
}

TEST(tls_reqcert_with_cert) {
  tern_engine_t *eng = test_engine_new(NULL);
  for (int i = 0; i < 2; i++) { /* the second one on the pooled connection */
    tern_request_t *req = tls_request("localhost", "TLS_REQCERT_PORT", "/x", true);
    ASSERT_EQ(tern_request_set_tls_client_cert(req, testsrv_get("CLIENT_CERT"),
                                               testsrv_get("CLIENT_KEY"), NULL),
              0);
    test_run(eng, req);
    ASSERT_TERN_ERR(req, 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    ASSERT_STR_EQ(tern_request_get_header(req, "X-Client-CN"), "tern-test-client");
    ASSERT_STR_EQ(tern_request_get_header(req, "X-TLS-Version"), "TLSv1.3");
    ASSERT_STR_EQ(tern_request_get_tls_version(req), "TLSv1.3");
    ASSERT_EQ(tern_request_is_reused(req), i);
    size_t len = 0;
    const char *body = tern_request_get_body(req, &len);
    ASSERT_EQ(len, strlen("reqcert ok CN=tern-test-client\n"));
    ASSERT_MEM_EQ(body, "reqcert ok CN=tern-test-client\n", len);
    tern_request_free(req);
  }
  test_finish(eng);
}

/* ---- broken peers ---- */

TEST(tls_garbage_peer) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request("localhost", "TLS_GARBAGE_PORT", "/1k.bin", true);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, TERN_ETLSHANDSHAKE);
  ASSERT_EQ(tern_request_get_status(req), 0);
  ASSERT(tern_request_get_error_message(req)[0] != '\0');
  tern_request_free(req);
  /* Plain HTTP to a TLS port: nginx answers 400 ("plain HTTP request was sent to HTTPS
   * port") and that is an ordinary response. */
  req = test_request("TLS_PORT", "/1k.bin");
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_get_status(req), 400);
  tern_request_free(req);
  test_finish(eng);
}

TEST(tls_stalled_handshake) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request("localhost", "TLS_STALL_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_CONNECT, 300), 0);
  uint64_t t0 = test_now_ms();
  test_run(eng, req);
  uint64_t took = test_now_ms() - t0;
  ASSERT_TERN_ERR(req, TERN_ECONNECTTIMEOUT);
  ASSERT_EQ(tern_request_get_status(req), 0);
  ASSERT_GE(took, 280);
  ASSERT_LT(took, test_scaled_ms(3000));
  tern_request_free(req);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 0); /* not pooled */
  test_finish(eng);
}

/* ---- connections and sessions ---- */

TEST(tls_keepalive_reuse) {
  tern_engine_t *eng = test_engine_new(NULL);
  char first_conn[32] = "";
  for (int i = 0; i < 5; i++) {
    tern_request_t *req = tls_request("localhost", "TLS_PORT", "/1k.bin", true);
    test_run(eng, req);
    ASSERT_TERN_ERR(req, 0);
    test_assert_req_body_sha(req, "SHA_1K");
    test_assert_nginx_reuse(req, i, first_conn, sizeof first_conn);
    ASSERT_STR_EQ(tern_request_get_tls_version(req), "TLSv1.3");
    tern_request_free(req);
  }
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 1);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_REUSED), 4);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 1);
  test_finish(eng);
}

/* A second connection to the same origin resumes the first one's session (TLS 1.3 ticket). */
TEST(tls_session_resumption) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request("localhost", "TLS_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_persistent(req, 0), 0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_is_tls_resumed(req), 0);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-SSL-Session-Reused"), ".");
  tern_request_free(req);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 0); /* not pooled */

  for (int i = 0; i < 2; i++) {
    req = tls_request("localhost", "TLS_PORT", "/1k.bin", true);
    ASSERT_EQ(tern_request_set_persistent(req, 0), 0);
    test_run(eng, req);
    ASSERT_TERN_ERR(req, 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    ASSERT_EQ(tern_request_is_reused(req), 0);      /* a new connection ... */
    ASSERT_EQ(tern_request_is_tls_resumed(req), 1); /* ... with a resumed session */
    ASSERT_STR_EQ(tern_request_get_header(req, "X-SSL-Session-Reused"), "r");
    test_assert_req_body_sha(req, "SHA_1K");
    tern_request_free(req);
  }
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 3);
  test_finish(eng);
}

/* Sessions are per origin: another port (another server, other ticket keys) starts afresh. */
TEST(tls_session_per_origin) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request("localhost", "TLS_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_persistent(req, 0), 0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  tern_request_free(req);
  req = tls_request("localhost", "TLS_CLIENTCERT_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_tls_client_cert(req, testsrv_get("CLIENT_CERT"),
                                             testsrv_get("CLIENT_KEY"), NULL),
            0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_EQ(tern_request_is_tls_resumed(req), 0);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-SSL-Session-Reused"), ".");
  tern_request_free(req);
  test_finish(eng);
}

static void run_concurrent(tern_engine_t *eng, int n) {
  test_waiter w;
  test_waiter_init(&w, n);
  tern_request_t **reqs = calloc((size_t)n, sizeof *reqs);
  ASSERT(reqs != NULL);
  for (int i = 0; i < n; i++) {
    reqs[i] = tls_request("localhost", "TLS_PORT", "/1k.bin", true);
    test_waiter_submit(&w, eng, reqs[i]);
  }
  test_waiter_wait(&w, 60000);
  ASSERT_EQ(w.completions, n);
  for (int i = 0; i < n; i++) {
    ASSERT_TERN_ERR(reqs[i], 0);
    ASSERT_EQ(tern_request_get_status(reqs[i]), 200);
    test_assert_req_body_sha(reqs[i], "SHA_1K");
    tern_request_free(reqs[i]);
  }
  free(reqs);
}

TEST(tls_100_concurrent) {
  tern_engine_t *eng = test_engine_new(NULL);
  run_concurrent(eng, 100);
  uint64_t opened = tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED);
  ASSERT_LE(opened, 100);
  ASSERT_GE(opened, 1);
  /* A second wave reuses the pooled TLS connections. */
  run_concurrent(eng, 100);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), opened);
  test_finish(eng);
}

/* Resumption while the first connection is still open (pooled): two requests at once, one
 * reuses the pooled connection and the other opens a second one that resumes. Separates
 * "sessions are not kept/offered" from "closing a connection spoils its session". */
TEST(tls_session_resumption_while_open) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = tls_request("localhost", "TLS_PORT", "/1k.bin", true);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_is_tls_resumed(req), 0);
  tern_request_free(req);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_IDLE), 1);

  /* Slow responses, so whichever request takes the pooled connection keeps it busy while the
   * other one is dispatched. */
  test_waiter w;
  test_waiter_init(&w, 2);
  tern_request_t *reqs[2];
  for (int i = 0; i < 2; i++) {
    reqs[i] = tls_request("localhost", "TLS_PORT", "/slow/64k.txt", true);
    test_waiter_submit(&w, eng, reqs[i]);
  }
  test_waiter_wait(&w, 60000);
  int fresh = 0;
  for (int i = 0; i < 2; i++) {
    ASSERT_TERN_ERR(reqs[i], 0);
    ASSERT_EQ(tern_request_get_status(reqs[i]), 200);
    test_assert_req_body_sha(reqs[i], "SHA_64K");
    if (!tern_request_is_reused(reqs[i])) {
      fresh++;
      ASSERT_EQ(tern_request_is_tls_resumed(reqs[i]), 1);
      ASSERT_STR_EQ(tern_request_get_header(reqs[i], "X-SSL-Session-Reused"), "r");
    }
    tern_request_free(reqs[i]);
  }
  ASSERT_EQ(fresh, 1);
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 2);
  test_finish(eng);
}

/* Request bodies are encrypted too: PUT from memory and (100 MiB) from a file, chunked from a
 * callback, each read back byte-identical. */
typedef struct {
  const char *data;
  size_t len, off;
} mem_reader;

static int64_t read_mem(tern_request_t *req, void *buf, size_t cap, void *ud) {
  (void)req;
  mem_reader *m = ud;
  size_t n = m->len - m->off < cap ? m->len - m->off : cap;
  if (n > 1000) n = 1000; /* many small chunks */
  memcpy(buf, m->data + m->off, n);
  m->off += n;
  return (int64_t)n;
}

static void put_then_get(tern_engine_t *eng, const char *name, int how, const char *sha_key) {
  char path[128];
  snprintf(path, sizeof path, "/upload/tls-%d-%s", (int)getpid(), name);
  char *src = testsrv_www_path(name);
  tern_request_t *req = tls_request("localhost", "TLS_PORT", path, true);
  ASSERT_EQ(tern_request_set_method(req, "PUT"), 0);
  ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_BODY, test_scaled_ms(15000)), 0);
  char *mem = NULL;
  mem_reader mr = { 0 };
  if (how == 0) {
    ASSERT_EQ(tern_request_set_body_file(req, src, 0, 0), 0);
  } else {
    FILE *f = fopen(src, "rb");
    ASSERT(f != NULL);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    mem = malloc((size_t)n + 1);
    ASSERT(mem != NULL);
    ASSERT_EQ(fread(mem, 1, (size_t)n, f), n);
    fclose(f);
    if (how == 1) {
      ASSERT_EQ(tern_request_set_body(req, mem, (size_t)n), 0);
    } else {
      mr.data = mem;
      mr.len = (size_t)n;
      ASSERT_EQ(tern_request_set_body_cb(req, -1, read_mem, &mr), 0);
    }
  }
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  int st = tern_request_get_status(req);
  ASSERT(st == 201 || st == 204);
  tern_request_free(req);
  free(mem);

  req = tls_request("localhost", "TLS_PORT", path, true);
  char *dest = test_tmp_path("tls-put-back.bin");
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 0), 0);
  ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_BODY, test_scaled_ms(15000)), 0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_file_sha(dest, sha_key);
  tern_request_free(req);
  unlink(dest);
  free(dest);

  req = tls_request("localhost", "TLS_PORT", path, true);
  ASSERT_EQ(tern_request_set_method(req, "DELETE"), 0);
  test_run(eng, req);
  ASSERT_TERN_ERR(req, 0);
  ASSERT_EQ(tern_request_get_status(req), 204);
  tern_request_free(req);
  free(src);
}

TEST(tls_upload) {
  tern_engine_t *eng = test_engine_new(NULL);
  put_then_get(eng, "64k.txt", 1, "SHA_64K");
  put_then_get(eng, "64k.txt", 2, "SHA_64K");
  put_then_get(eng, "100m.bin", 0, "SHA_100M");
  ASSERT_UEQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 1);
  test_finish(eng);
}

/* TLS 1.2 (nginx limited to it): the version is reported, bodies arrive intact, and a second
 * connection resumes the session (which TLS 1.2 delivers inside the handshake). */
TEST(tls_tls12) {
  tern_engine_t *eng = test_engine_new(NULL);
  for (int i = 0; i < 3; i++) {
    tern_request_t *req = tls_request("localhost", "TLS12_PORT", "/1k.bin", true);
    ASSERT_EQ(tern_request_set_persistent(req, 0), 0);
    test_run(eng, req);
    ASSERT_TERN_ERR(req, 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    test_assert_req_body_sha(req, "SHA_1K");
    ASSERT_STR_EQ(tern_request_get_tls_version(req), "TLSv1.2");
    ASSERT_STR_EQ(tern_request_get_header(req, "X-SSL-Protocol"), "TLSv1.2");
    ASSERT_EQ(tern_request_is_tls_resumed(req), i > 0);
    ASSERT_STR_EQ(tern_request_get_header(req, "X-SSL-Session-Reused"), i > 0 ? "r" : ".");
    tern_request_free(req);
  }
  test_finish(eng);
}

/* Connection buffers smaller than a TLS record (and ones a record straddles): OpenSSL then
 * holds decrypted bytes the buffer had no room for, and the engine must drain them once the
 * buffer empties, not wait for more bytes from the socket (which, at the end of a response,
 * never come). Plain HTTP with the same buffers is the control. */
TEST(tls_small_buffers) {
  tern_engine_t *eng = test_engine_new(NULL);
  const size_t sizes[] = { 1024, 4096, 16384, 20000 };
  for (int i = 0; i < 4; i++) {
    for (int tls = 0; tls < 2; tls++) {
      tern_request_t *req;
      if (tls) {
        req = tls_request("localhost", "TLS_PORT", "/64k.txt", true);
      } else {
        req = test_request("NGINX_PORT", "/64k.txt");
      }
      ASSERT_EQ(tern_request_set_buffer_size(req, sizes[i]), 0);
      ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_BODY, test_scaled_ms(5000)), 0);
      test_run(eng, req);
      if (tern_request_get_error(req) != 0)
        fprintf(stderr, "%s with a %zu-byte buffer:\n", tls ? "https" : "http", sizes[i]);
      ASSERT_TERN_ERR(req, 0);
      ASSERT_EQ(tern_request_get_status(req), 200);
      test_assert_req_body_sha(req, "SHA_64K");
      tern_request_free(req);
    }
  }
  test_finish(eng);
}

/* Canceling a request whose handshake never completes, and freeing the engine under one:
 * both complete it once, and nothing leaks (SSL objects included, under ASan). */
TEST(tls_cancel_and_shutdown_during_handshake) {
  tern_engine_t *eng = test_engine_new(NULL);
  test_waiter w;
  test_waiter_init(&w, 1);
  tern_request_t *req = tls_request("localhost", "TLS_STALL_PORT", "/1k.bin", true);
  test_waiter_submit(&w, eng, req);
  usleep(100 * 1000);
  tern_request_cancel(req);
  test_waiter_wait(&w, 10000);
  ASSERT_EQ(w.completions, 1);
  ASSERT_TERN_ERR(req, TERN_ECANCELED);
  tern_request_free(req);

  test_waiter_init(&w, 1);
  req = tls_request("localhost", "TLS_STALL_PORT", "/1k.bin", true);
  test_waiter_submit(&w, eng, req);
  usleep(100 * 1000);
  tern_engine_free(eng);
  ASSERT_EQ(w.completions, 1);
  ASSERT_TERN_ERR(req, TERN_ESHUTDOWN);
  tern_request_free(req);
  test_assert_no_live_requests();
}

/* An encrypted key and no password: loading must fail (ETLSCERTFILE), never ask. OpenSSL's
 * default password callback prompts "Enter PEM pass phrase:" on the controlling terminal and
 * blocks the engine's thread reading it, so the request runs in a child process whose
 * controlling terminal is a pseudo-terminal we watch. */
TEST(tls_encrypted_key_without_password_never_prompts) {
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT(master >= 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const char *slave_name = ptsname(master);
  ASSERT(slave_name != NULL);
  char slave_path[128];
  snprintf(slave_path, sizeof slave_path, "%s", slave_name);
  const char *cert = testsrv_get("CLIENT_CERT"), *key = testsrv_get("CLIENT_KEY_ENC");
  fflush(NULL);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    close(master);
    if (setsid() < 0) _exit(90);
    int slave = open(slave_path, O_RDWR); /* becomes the controlling terminal */
    if (slave < 0) _exit(91);
    dup2(slave, 0);
    dup2(slave, 1);
    dup2(slave, 2);
    tern_engine_t *eng = test_engine_new(NULL);
    tern_request_t *req = tls_request("localhost", "TLS_CLIENTCERT_PORT", "/1k.bin", true);
    ASSERT_EQ(tern_request_set_tls_client_cert(req, cert, key, NULL), 0);
    test_run(eng, req);
    ASSERT_TERN_ERR(req, TERN_ETLSCERTFILE);
    tern_request_free(req);
    test_finish(eng);
    fflush(NULL);
    _exit(0);
  }
  char out[4096];
  size_t got = 0;
  int status = 0;
  bool exited = false, prompted = false;
  uint64_t deadline = test_now_ms() + test_scaled_ms(10000);
  while (!exited && test_now_ms() < deadline) {
    struct pollfd pfd = { master, POLLIN, 0 };
    if (poll(&pfd, 1, 50) > 0 && (pfd.revents & POLLIN)) {
      ssize_t k = read(master, out + got, sizeof out - 1 - got);
      if (k > 0) got += (size_t)k;
      out[got] = '\0';
      if (strstr(out, "pass phrase") != NULL) {
        prompted = true;
        break;
      }
    }
    exited = waitpid(pid, &status, WNOHANG) == pid;
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  close(master);
  out[got] = '\0';
  if (prompted) TEST_FAIL_("the engine asked for the key's password on the terminal: \"%s\"", out);
  if (!exited) TEST_FAIL_("the request did not complete (terminal output: \"%s\")", out);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    TEST_FAIL_("child failed (status 0x%x): %s", status, out);
}

/* Each way a certificate, key or CA setting can be wrong gets a message that says which file
 * and what is wrong with it in plain words, not only OpenSSL's code. */
static void expect_load_message(tern_engine_t *eng, tern_request_t *req, int code,
                                const char *words) {
  test_run(eng, req);
  ASSERT_TERN_ERR(req, code);
  const char *msg = tern_request_get_error_message(req);
  if (strstr(msg, words) == NULL) TEST_FAIL_("message \"%s\" lacks \"%s\"", msg, words);
  tern_request_free(req);
}

TEST(tls_load_errors_say_what_is_wrong) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *missing = test_tmp_path("no-such-file.pem");
  const char *cert = testsrv_get("CLIENT_CERT"), *key = testsrv_get("CLIENT_KEY");
  const char *enc = testsrv_get("CLIENT_KEY_ENC"), *pw = testsrv_get("CLIENT_KEY_PASSWORD");
  char server_key[1024];
  snprintf(server_key, sizeof server_key, "%s/server.key", testsrv_get("CERTS"));

  tern_request_t *req = tls_request("localhost", "TLS_CLIENTCERT_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_tls_client_cert(req, cert, enc, "wrong-password"), 0);
  expect_load_message(eng, req, TERN_ETLSCERTFILE, "wrong password");

  req = tls_request("localhost", "TLS_CLIENTCERT_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_tls_client_cert(req, cert, enc, NULL), 0);
  expect_load_message(eng, req, TERN_ETLSCERTFILE, "is encrypted and no password was given");

  req = tls_request("localhost", "TLS_CLIENTCERT_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_tls_client_cert(req, cert, missing, pw), 0);
  expect_load_message(eng, req, TERN_ETLSCERTFILE, "No such file or directory");

  req = tls_request("localhost", "TLS_CLIENTCERT_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_tls_client_cert(req, missing, key, NULL), 0);
  expect_load_message(eng, req, TERN_ETLSCERTFILE, "client certificate");

  req = tls_request("localhost", "TLS_CLIENTCERT_PORT", "/1k.bin", true);
  ASSERT_EQ(tern_request_set_tls_client_cert(req, cert, server_key, NULL), 0);
  expect_load_message(eng, req, TERN_ETLSCERTFILE, "does not belong to the certificate");

  req = tls_request("localhost", "TLS_PORT", "/1k.bin", false);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, missing), 0);
  expect_load_message(eng, req, TERN_ETLSCAFILE, "CA file");

  req = tls_request("localhost", "TLS_PORT", "/1k.bin", false);
  ASSERT_EQ(tern_request_set_tls_ca_path(req, missing), 0);
  expect_load_message(eng, req, TERN_ETLSCAFILE, "CA directory");

  char *notpem = testsrv_www_path("1k.bin");
  req = tls_request("localhost", "TLS_PORT", "/1k.bin", false);
  ASSERT_EQ(tern_request_set_tls_ca_file(req, notpem), 0);
  expect_load_message(eng, req, TERN_ETLSCAFILE, "holds no usable PEM certificate");
  free(notpem);
  free(missing);
  test_finish(eng);
}
