/* SOCKS proxies: SOCKS5 (RFC 1928) with and without user name and password (RFC 1929), names
 * resolved here (socks5://, socks4://) or by the proxy (socks5h://, socks4a://), plain http and
 * https through the tunnel. Against Dante (a real SOCKS server, started by servers.py on
 * SOCKS_PORT and, demanding a system user's password, SOCKS_AUTH_PORT) and the fault server's
 * SOCKS peer (SOCKS_FAULT_PORT), which logs what it was asked and misbehaves on request. */
#define _DEFAULT_SOURCE
#include "task.h"
#include "testsrv.h"
#include "testutil.h"

#include <tern.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define fmt test_fmt

/* "SCHEME://[userinfo@]127.0.0.1:PORT" for a proxy port of the env file. */
static char *socks_url(const char *scheme, const char *portkey, const char *userinfo) {
  return fmt("%s://%s%s127.0.0.1:%d", scheme, userinfo ? userinfo : "", userinfo ? "@" : "",
             testsrv_port(portkey));
}

static tern_request_t *request_via(const char *url, const char *scheme, const char *portkey,
                                   const char *userinfo) {
  tern_request_t *req = test_request_url(url);
  char *p = socks_url(scheme, portkey, userinfo);
  ASSERT_EQ(tern_request_set_proxy(req, p), 0);
  free(p);
  if (strncmp(url, "https:", 6) == 0)
    ASSERT_EQ(tern_request_set_tls_ca_file(req, testsrv_get("CA_PEM")), 0);
  return req;
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return strdup("");
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (cap - len < 4096) {
      cap = cap ? cap * 2 : 65536;
      buf = realloc(buf, cap + 1);
      ASSERT(buf != NULL);
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    if (n == 0) break;
    len += n;
  }
  fclose(f);
  buf[len] = '\0';
  return buf;
}

/* Connections Dante's log shows it made to 127.0.0.1:port ("... -> ... 127.0.0.1.PORT"). */
static int dante_connects_to(const char *log, int port) {
  char *path = fmt("%s/dante/%s.log", testsrv_get("STATE"), log);
  char *text = read_file(path);
  char *needle = fmt("127.0.0.1.%d\n", port);
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  free(needle);
  free(text);
  free(path);
  return n;
}

/* Whether Dante carried this request's connection: its log names the tunnel's outgoing side,
 * "127.0.0.1.PORT 127.0.0.1.TARGET", where PORT is the client port the server saw (nginx's and
 * the fault server's echo's X-Remote-Port). Unlike counting the log's lines, this holds while
 * other tests use Dante too. */
static bool dante_carried(const char *log, tern_request_t *req, int target) {
  const char *port = tern_request_get_header(req, "X-Remote-Port");
  ASSERT(port != NULL);
  char *path = fmt("%s/dante/%s.log", testsrv_get("STATE"), log);
  char *text = read_file(path);
  char *needle = fmt("127.0.0.1.%s 127.0.0.1.%d\n", port, target);
  bool found = strstr(text, needle) != NULL;
  free(needle);
  free(text);
  free(path);
  return found;
}

static char *fault_get(const char *path) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("FAULT_PORT", path);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  char *body = test_req_body_str(req);
  tern_request_free(req);
  /* Not test_finish: it checks that no request of any engine is alive, and the calling test's
   * engine may still be letting go of its last request. */
  tern_engine_free(eng);
  return body;
}

static void socks_mode(const char *mode) {
  char *path = fmt("/socks-mode?m=%s", mode);
  free(fault_get(path));
  free(path);
}

static void assert_error_says(tern_request_t *req, const char *what) {
  const char *msg = tern_request_get_error_message(req);
  if (msg == NULL || strstr(msg, what) == NULL)
    fprintf(stderr, "error message %s does not say \"%s\"\n", msg ? msg : "(none)", what);
  ASSERT(msg != NULL && strstr(msg, what) != NULL);
}

TEST(socks_dante_http_and_https) {
  tern_engine_t *eng = test_engine_new(NULL);
  int nginx = testsrv_port("NGINX_PORT"), tls = testsrv_port("TLS_PORT");
  const char *schemes[] = { "socks5h", "socks5", "socks4" };
  for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
    /* plain http: an ordinary origin-form request through the tunnel */
    /* A name only where the proxy resolves it: Dante connects out over IPv4 only, and
     * "localhost" may resolve to ::1 here first. */
    const char *host = i == 0 ? "localhost" : "127.0.0.1";
    char *url = fmt("http://%s:%d/1k.bin", host, nginx);
    tern_request_t *req = request_via(url, schemes[i], "SOCKS_PORT", NULL);
    ASSERT_EQ(test_run(eng, req), 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    test_assert_req_body_sha(req, "SHA_1K");
    size_t len = 0;
    const char *head = tern_request_get_request_head(req, &len);
    ASSERT(head && strncmp(head, "GET /1k.bin HTTP/1.1\r\n", 22) == 0);
    ASSERT(strstr(head, "Proxy-Authorization") == NULL);
    ASSERT_EQ(tern_request_get_connect_status(req), 0);
    ASSERT(dante_carried("open", req, nginx));
    tern_request_free(req);
    free(url);
    /* https: TLS to the origin inside the tunnel, its certificate checked for its name */
    url = fmt("https://%s:%d/1k.bin", host, tls);
    req = request_via(url, schemes[i], "SOCKS_PORT", NULL);
    ASSERT_EQ(test_run(eng, req), 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    test_assert_req_body_sha(req, "SHA_1K");
    ASSERT(tern_request_get_tls_version(req) != NULL);
    ASSERT(dante_carried("open", req, tls));
    tern_request_free(req);
    /* without the CA the certificate is refused, tunnel or not */
    req = test_request_url(url);
    char *p = socks_url(schemes[i], "SOCKS_PORT", NULL);
    ASSERT_EQ(tern_request_set_proxy(req, p), 0);
    free(p);
    ASSERT_EQ(test_run(eng, req), TERN_ETLSUNKNOWNCA);
    tern_request_free(req);
    free(url);
  }
  test_finish(eng);
}

TEST(socks_dante_user_and_password) {
  tern_engine_t *eng = test_engine_new(NULL);
  const char *user = testsrv_get("SOCKS_USER"), *password = testsrv_get("SOCKS_PASSWORD");
  char *url = fmt("http://127.0.0.1:%d/1k.bin", testsrv_port("NGINX_PORT"));
  /* credentials in the proxy URL */
  char *userinfo = fmt("%s:%s", user, password);
  tern_request_t *req = request_via(url, "socks5h", "SOCKS_AUTH_PORT", userinfo);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  tern_request_free(req);
  free(userinfo);
  /* given apart (curl's --proxy-user) */
  req = request_via(url, "socks5", "SOCKS_AUTH_PORT", NULL);
  ASSERT_EQ(tern_request_set_proxy_auth(req, user, password, TERN_AUTH_ANY), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  tern_request_free(req);
  /* a wrong password: refused by the proxy, and said so */
  userinfo = fmt("%s:wrong", user);
  req = request_via(url, "socks5h", "SOCKS_AUTH_PORT", userinfo);
  ASSERT_EQ(test_run(eng, req), TERN_EPROXY);
  assert_error_says(req, "refused the user name and password");
  assert_error_says(req, "SOCKS5H proxy 127.0.0.1:");
  tern_request_free(req);
  free(userinfo);
  /* none at all */
  req = request_via(url, "socks5h", "SOCKS_AUTH_PORT", NULL);
  ASSERT_EQ(test_run(eng, req), TERN_EPROXY);
  assert_error_says(req, "accepts none of the authentication methods");
  tern_request_free(req);
  free(url);
  test_finish(eng);
}

/* What goes to the proxy: an address resolved here for socks5 and socks4, the name for socks5h
 * and socks4a; the user name of a SOCKS4 request. */
TEST(socks_names_resolved_here_or_by_the_proxy) {
  tern_engine_t *eng = test_engine_new(NULL);
  int nginx = testsrv_port("NGINX_PORT");
  char *url = fmt("http://localhost:%d/1k.bin", nginx);
  struct {
    const char *scheme, *userinfo, *want;
  } cases[] = {
    { "socks5h", NULL, "\"atyp\": \"name\", \"command\": 1, \"host\": \"localhost\"" },
    { "socks5", NULL, "\"command\": 1, \"host\": \"" }, /* an address: checked below */
    { "socks4a", "ann", "\"user\": \"ann\", \"atyp\": \"name\", \"host\": \"localhost\"" },
    { "socks4", "ann", "\"user\": \"ann\", \"atyp\": \"ipv4\", \"host\": \"127.0.0.1\"" },
    { "socks5h", "ann:s%40cret", "\"user\": \"ann\", \"password\": \"s@cret\"" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    socks_mode("ok");
    tern_request_t *req = request_via(url, cases[i].scheme, "SOCKS_FAULT_PORT", cases[i].userinfo);
    ASSERT_EQ(test_run(eng, req), 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    test_assert_req_body_sha(req, "SHA_1K");
    tern_request_free(req);
    char *log = fault_get("/socks-log");
    if (strstr(log, cases[i].want) == NULL)
      fprintf(stderr, "%s: the SOCKS log does not say %s:\n%s", cases[i].scheme, cases[i].want,
              log);
    ASSERT(strstr(log, cases[i].want) != NULL);
    if (strcmp(cases[i].scheme, "socks5") == 0)
      ASSERT(strstr(log, "\"atyp\": \"ipv4\", \"command\": 1, \"host\": \"127.0.0.1\"") ||
             strstr(log, "\"atyp\": \"ipv6\", \"command\": 1, \"host\": \"::1\""));
    free(log);
  }
  free(url);
  /* A name only the proxy could resolve: here it is a resolve error, there the proxy's reply. */
  url = strdup("http://no-such-host.invalid/");
  tern_request_t *req = request_via(url, "socks5", "SOCKS_PORT", NULL);
  ASSERT_EQ(test_run(eng, req), TERN_ERESOLVE);
  assert_error_says(req, "no-such-host.invalid");
  tern_request_free(req);
  req = request_via(url, "socks5h", "SOCKS_PORT", NULL);
  ASSERT_EQ(test_run(eng, req), TERN_EPROXY);
  assert_error_says(req, "could not connect to no-such-host.invalid:80");
  tern_request_free(req);
  free(url);
  test_finish(eng);
}

/* A proxy that misbehaves gets a clear error naming it, in bounded time, and never a crash; a
 * legal but unusual answer (a 255-byte bound name) works. */
TEST(socks_hostile_proxy) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = fmt("http://127.0.0.1:%d/1k.bin", testsrv_port("NGINX_PORT"));
  struct {
    const char *mode, *scheme, *userinfo;
    int err;
    const char *says;
  } cases[] = {
    { "close", "socks5h", NULL, TERN_EPROXY, "SOCKS" },
    { "greeting-version", "socks5h", NULL, TERN_EPROXY, "with version 4, not 5" },
    { "no-method", "socks5h", "u:p", TERN_EPROXY, "accepts none of the authentication methods" },
    { "auth-unoffered", "socks5h", NULL, TERN_EPROXY, "requires a user name and password" },
    { "auth-refuse", "socks5h", "u:p", TERN_EPROXY, "refused the user name and password" },
    { "refuse", "socks5h", NULL, TERN_EPROXY, "connection refused (reply 5)" },
    { "refuse", "socks4a", NULL, TERN_EPROXY, "request rejected or failed (91)" },
    { "bad-atyp", "socks5h", NULL, TERN_EPROXY, "unknown address type (9)" },
    { "truncated", "socks5h", NULL, TERN_EPROXY, "during the SOCKS handshake" },
    { "trailing", "socks5h", NULL, TERN_EPROXY, "bytes after its reply" },
    { "stall", "socks5h", NULL, TERN_ECONNECTTIMEOUT, "timed out" },
    { "long-domain", "socks5h", NULL, 0, NULL },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    socks_mode(cases[i].mode);
    tern_request_t *req = request_via(url, cases[i].scheme, "SOCKS_FAULT_PORT", cases[i].userinfo);
    ASSERT_EQ(tern_request_set_timeout(req, TERN_TIMEOUT_CONNECT, 1000), 0);
    uint64_t t0 = test_now_ms();
    int r = test_run(eng, req);
    if (r != cases[i].err)
      fprintf(stderr, "mode %s: %d (%s)\n", cases[i].mode, r,
              tern_request_get_error_message(req) ? tern_request_get_error_message(req) : "");
    ASSERT_EQ(r, cases[i].err);
    ASSERT(test_now_ms() - t0 < test_scaled_ms(3000));
    if (cases[i].says) {
      assert_error_says(req, cases[i].says);
      assert_error_says(req, "proxy 127.0.0.1:");
    } else {
      test_assert_req_body_sha(req, "SHA_1K");
    }
    tern_request_free(req);
  }
  socks_mode("ok");
  free(url);
  test_finish(eng);
}

/* Connections through a SOCKS proxy are pooled per proxy (and credentials): a second request
 * reuses the tunnel; a direct request and one through another proxy kind do not. */
TEST(socks_connections_pooled_per_proxy) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = fmt("http://127.0.0.1:%d/1k.bin", testsrv_port("NGINX_PORT"));
  for (int i = 0; i < 3; i++) {
    tern_request_t *req = request_via(url, "socks5h", "SOCKS_PORT", NULL);
    ASSERT_EQ(test_run(eng, req), 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    tern_request_free(req);
  }
  ASSERT_EQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 1);
  tern_request_t *req = request_via(url, "socks4", "SOCKS_PORT", NULL);
  ASSERT_EQ(test_run(eng, req), 0);
  tern_request_free(req);
  ASSERT_EQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 2);
  req = test_request_url(url);
  ASSERT_EQ(test_run(eng, req), 0);
  tern_request_free(req);
  ASSERT_EQ(tern_engine_get_stat(eng, TERN_STAT_CONNECTIONS_OPENED), 3);
  free(url);
  test_finish(eng);
}

/* An unreachable proxy is named as the proxy; a bad proxy URL is refused when set. */
TEST(socks_proxy_unreachable_and_bad_urls) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *url = fmt("http://127.0.0.1:%d/1k.bin", testsrv_port("NGINX_PORT"));
  tern_request_t *req = test_request_url(url);
  ASSERT_EQ(tern_request_set_proxy(req, "socks5h://127.0.0.1:1"), 0);
  ASSERT_EQ(test_run(eng, req), TERN_ECONNREFUSED);
  assert_error_says(req, "proxy 127.0.0.1:1");
  tern_request_free(req);
  req = test_request_url(url);
  ASSERT(tern_request_set_proxy(req, "socks5h://") != 0);
  ASSERT(tern_request_set_proxy(req, "socks6://127.0.0.1:1080") != 0);
  tern_request_free(req);
  free(url);
  test_finish(eng);
}

/* ==== proxy lists (a PAC script's answer) and failover ===================================== */

static tern_request_t *request_with_list(const char *url, const char *listfmt, ...) {
  va_list ap;
  va_start(ap, listfmt);
  char list[512];
  vsnprintf(list, sizeof list, listfmt, ap);
  va_end(ap);
  tern_request_t *req = test_request_url(url);
  ASSERT_EQ(tern_request_set_proxy_list(req, list), 0);
  return req;
}

TEST(proxy_list_fails_over_to_the_next_entry) {
  tern_engine_t *eng = test_engine_new(NULL);
  int nginx = testsrv_port("NGINX_PORT"), socks = testsrv_port("SOCKS_PORT");
  int squid = testsrv_port("SQUID_PORT");
  char *url = fmt("http://127.0.0.1:%d/1k.bin", nginx);
  /* a dead proxy first, then Dante: the request goes through Dante */
  tern_request_t *req =
      request_with_list(url, "PROXY 127.0.0.1:1; SOCKS5 127.0.0.1:%d; DIRECT", socks);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT(dante_carried("open", req, nginx));
  tern_request_free(req);
  /* two dead ones, then DIRECT */
  req = request_with_list(url, "PROXY 127.0.0.1:1 ; SOCKS 127.0.0.1:1;DIRECT");
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT(tern_request_get_header(req, "Via") == NULL);
  ASSERT(!dante_carried("open", req, nginx));
  tern_request_free(req);
  /* entries that cannot be used are skipped; PROXY is an HTTP proxy (squid adds Via) */
  req = request_with_list(url, "HTTPS 127.0.0.1:1; QUIC x:1; PROXY; PROXY 127.0.0.1:%d", squid);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT(strstr(tern_request_get_header(req, "Via"), "tern-squid-") != NULL);
  tern_request_free(req);
  /* every entry dead: the last failure is the request's */
  req = request_with_list(url, "PROXY 127.0.0.1:1; SOCKS5 127.0.0.1:1");
  ASSERT_EQ(test_run(eng, req), TERN_ECONNREFUSED);
  assert_error_says(req, "proxy 127.0.0.1:1");
  tern_request_free(req);
  /* nothing usable at all */
  req = request_with_list(url, "HTTPS 127.0.0.1:1");
  ASSERT_EQ(test_run(eng, req), TERN_EPROXY);
  assert_error_says(req, "no usable proxy");
  tern_request_free(req);
  /* a proxy that answers but refuses is not failed over (only unreachable ones are) */
  req = request_with_list(url, "SOCKS5 127.0.0.1:%d; DIRECT", testsrv_port("SOCKS_AUTH_PORT"));
  ASSERT_EQ(test_run(eng, req), TERN_EPROXY);
  tern_request_free(req);
  free(url);
  test_finish(eng);
}

typedef struct {
  int calls;
  char urls[4][256];
  int socks_port, fault_port;
  const char *fail;
} list_cb_state;

/* Plain hosts on the fault server's port go direct, the rest through Dante (SOCKS5). */
static int choose_proxies(tern_request_t *req, const char *url, const char *host, char *out,
                          size_t cap, void *data) {
  (void)req;
  (void)host;
  list_cb_state *st = data;
  if (st->calls < 4) snprintf(st->urls[st->calls], sizeof st->urls[0], "%s", url);
  st->calls++;
  if (st->fail) {
    snprintf(out, cap, "%s", st->fail);
    return TERN_EPROXY;
  }
  char fault[32];
  snprintf(fault, sizeof fault, ":%d/", st->fault_port);
  if (strstr(url, fault))
    snprintf(out, cap, "DIRECT");
  else
    snprintf(out, cap, "SOCKS5 127.0.0.1:%d", st->socks_port);
  return 0;
}

TEST(proxy_list_callback_asked_for_every_hop) {
  tern_engine_t *eng = test_engine_new(NULL);
  int nginx = testsrv_port("NGINX_PORT");
  /* The first hop is the fault server's second port, which no other test sends through Dante:
   * its count in Dante's log must not move. */
  list_cb_state st = { .socks_port = testsrv_port("SOCKS_PORT"),
                       .fault_port = testsrv_port("FAULT2_PORT") };
  char *target = fmt("http://127.0.0.1:%d/1k.bin", nginx);
  char *url =
      fmt("http://127.0.0.1:%d/redirect?status=302&to=http%%3A%%2F%%2F127.0.0.1%%3A%d%%2F1k.bin",
          st.fault_port, nginx);
  int fault_before = dante_connects_to("open", st.fault_port);
  tern_request_t *req = test_request_url(url);
  ASSERT_EQ(tern_request_set_follow_redirects(req, 5), 0);
  ASSERT_EQ(tern_request_set_proxy_callback(req, choose_proxies, &st), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  test_assert_req_body_sha(req, "SHA_1K");
  ASSERT_EQ(st.calls, 2);
  ASSERT_STR_EQ(st.urls[0], url);
  ASSERT_STR_EQ(st.urls[1], target);
  ASSERT(dante_carried("open", req, nginx));                         /* the second hop */
  ASSERT_EQ(dante_connects_to("open", st.fault_port), fault_before); /* not the first */
  tern_request_free(req);
  /* a callback that fails the request: its code and message */
  st.fail = "the PAC script threw: ReferenceError";
  st.calls = 0;
  req = test_request_url(target);
  ASSERT_EQ(tern_request_set_proxy_callback(req, choose_proxies, &st), 0);
  ASSERT_EQ(test_run(eng, req), TERN_EPROXY);
  assert_error_says(req, "the PAC script threw: ReferenceError");
  ASSERT_EQ(st.calls, 1);
  tern_request_free(req);
  free(url);
  free(target);
  test_finish(eng);
}
