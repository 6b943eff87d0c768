/* Unit tests of internal pieces that need no server: redirect target resolution (RFC 3986
 * 5.4 examples), challenge parsing, Basic and Digest credentials (RFC 7617 and RFC 7616
 * examples). */
#define _DEFAULT_SOURCE
#include "task.h"

#include "internal.h"

#include <ctype.h>
#include <stdio.h>

static void expect_resolve(const char *base, const char *ref, const char *want) {
  tern__url u;
  ASSERT_EQ(tern__url_parse(&u, base), 0);
  char *out = NULL;
  int r = tern__url_resolve(&u, ref, &out);
  if (want == NULL) {
    if (r == 0) TEST_FAIL_("resolving \"%s\" should fail, gave %s", ref, out);
  } else {
    if (r != 0) TEST_FAIL_("resolving \"%s\" failed: %d", ref, r);
    if (strcmp(out, want) != 0) TEST_FAIL_("\"%s\" -> \"%s\", want \"%s\"", ref, out, want);
  }
  free(out);
  tern__url_free(&u);
}

/* RFC 3986 5.4.1 and 5.4.2, with an http base (fragments are dropped by the request anyway). */
TEST(url_resolve_rfc3986_examples) {
  const char *base = "http://a/b/c/d;p?q";
  expect_resolve(base, "g", "http://a/b/c/g");
  expect_resolve(base, "./g", "http://a/b/c/g");
  expect_resolve(base, "g/", "http://a/b/c/g/");
  expect_resolve(base, "/g", "http://a/g");
  expect_resolve(base, "//g", "http://g");
  expect_resolve(base, "?y", "http://a/b/c/d;p?y");
  expect_resolve(base, "g?y", "http://a/b/c/g?y");
  expect_resolve(base, ";x", "http://a/b/c/;x");
  expect_resolve(base, "g;x", "http://a/b/c/g;x");
  expect_resolve(base, ".", "http://a/b/c/");
  expect_resolve(base, "./", "http://a/b/c/");
  expect_resolve(base, "..", "http://a/b/");
  expect_resolve(base, "../", "http://a/b/");
  expect_resolve(base, "../g", "http://a/b/g");
  expect_resolve(base, "../..", "http://a/");
  expect_resolve(base, "../../g", "http://a/g");
  expect_resolve(base, "../../../g", "http://a/g");
  expect_resolve(base, "../../../../g", "http://a/g");
  expect_resolve(base, "/./g", "http://a/g");
  expect_resolve(base, "/../g", "http://a/g");
  expect_resolve(base, "g.", "http://a/b/c/g.");
  expect_resolve(base, "..g", "http://a/b/c/..g");
  expect_resolve(base, "./../g", "http://a/b/g");
  expect_resolve(base, "./g/.", "http://a/b/c/g/");
  expect_resolve(base, "g/./h", "http://a/b/c/g/h");
  expect_resolve(base, "g/../h", "http://a/b/c/h");
  expect_resolve(base, "g;x=1/./y", "http://a/b/c/g;x=1/y");
  expect_resolve(base, "g;x=1/../y", "http://a/b/c/y");
  expect_resolve(base, "https://other:8443/x?1", "https://other:8443/x?1");
}

/* One URL's parse: the error, or each part (NULL userinfo for none). */
static void expect_parse(const char *url, int error, const char *host, const char *hostport,
                         const char *target, const char *userinfo, unsigned port, bool tls) {
  tern__url u;
  int r = tern__url_parse(&u, url);
  if (r != error) TEST_FAIL_("parsing \"%s\" gave %d, want %d", url, r, error);
  if (error != 0) return;
  if (strcmp(u.host, host) != 0) TEST_FAIL_("\"%s\": host \"%s\", want \"%s\"", url, u.host, host);
  if (strcmp(u.hostport, hostport) != 0)
    TEST_FAIL_("\"%s\": hostport \"%s\", want \"%s\"", url, u.hostport, hostport);
  if (strcmp(u.target, target) != 0)
    TEST_FAIL_("\"%s\": target \"%s\", want \"%s\"", url, u.target, target);
  if ((userinfo == NULL) != (u.userinfo == NULL) ||
      (userinfo != NULL && strcmp(u.userinfo, userinfo) != 0))
    TEST_FAIL_("\"%s\": userinfo \"%s\", want \"%s\"", url, u.userinfo ? u.userinfo : "(none)",
               userinfo ? userinfo : "(none)");
  if (u.port != port) TEST_FAIL_("\"%s\": port %u, want %u", url, (unsigned)u.port, port);
  if (u.tls != tls) TEST_FAIL_("\"%s\": tls %d, want %d", url, (int)u.tls, (int)tls);
  tern__url_free(&u);
}

/* Every part of a parse, and every way a URL is refused (the request line and Host field are
 * built from these parts, so a byte let through here reaches the wire). */
TEST(url_parse_parts_and_refusals) {
  const int bad = TERN_EBADURL;
  expect_parse("http://127.0.0.1:8080/1k.bin", 0, "127.0.0.1", "127.0.0.1:8080", "/1k.bin", NULL,
               8080, false);
  expect_parse("HTTPS://Example.COM/A?b=C", 0, "example.com", "example.com", "/A?b=C", NULL, 443,
               true);
  expect_parse("hTtP://h", 0, "h", "h", "/", NULL, 80, false);
  expect_parse("http://h:80/", 0, "h", "h", "/", NULL, 80, false);
  expect_parse("https://h:80/", 0, "h", "h:80", "/", NULL, 80, true);
  expect_parse("http://h:443/", 0, "h", "h:443", "/", NULL, 443, false);
  expect_parse("http://h:65535", 0, "h", "h:65535", "/", NULL, 65535, false);
  expect_parse("http://h:0081/", 0, "h", "h:81", "/", NULL, 81, false);
  expect_parse("https://h:00443/", 0, "h", "h", "/", NULL, 443, true);
  expect_parse("http://H.Z.A.Q-9:1/", 0, "h.z.a.q-9", "h.z.a.q-9:1", "/", NULL, 1, false);
  expect_parse("http://h`/", TERN_EBADURL, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://h{}/", TERN_EBADURL, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://h^/", TERN_EBADURL, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://h:/p", 0, "h", "h", "/p", NULL, 80, false);
  expect_parse("http://h?q=1", 0, "h", "h", "/?q=1", NULL, 80, false);
  expect_parse("http://h#frag", 0, "h", "h", "/", NULL, 80, false);
  expect_parse("http://h/p?q#f#g", 0, "h", "h", "/p?q", NULL, 80, false);
  expect_parse("http://h/p?a=#", 0, "h", "h", "/p?a=", NULL, 80, false);
  expect_parse("http://u:p%40w@h/", 0, "h", "h", "/", "u:p%40w", 80, false);
  expect_parse("http://a@b@h:81/x", 0, "h", "h:81", "/x", "a@b", 81, false);
  expect_parse("http://@h/", 0, "h", "h", "/", "", 80, false);
  expect_parse("http://h/a@b", 0, "h", "h", "/a@b", NULL, 80, false);
  expect_parse("https://[::1]:8443/a", 0, "::1", "[::1]:8443", "/a", NULL, 8443, true);
  expect_parse("http://[FE80::1]/", 0, "fe80::1", "[fe80::1]", "/", NULL, 80, false);
  expect_parse("http://user@[::ffff:1.2.3.4]/", 0, "::ffff:1.2.3.4", "[::ffff:1.2.3.4]", "/",
               "user", 80, false);
  expect_parse("http://a-b_c~d.e!$&'()*+,;=%41/", 0, "a-b_c~d.e!$&'()*+,;=%41",
               "a-b_c~d.e!$&'()*+,;=%41", "/", NULL, 80, false);
  expect_parse("http://h/\xc3\xa9?\xff", 0, "h", "h", "/\xc3\xa9?\xff", NULL, 80, false);

  expect_parse("ftp://h/", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http:/h/", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("https:h", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http:///p", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://u@/p", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://:80/", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://h:0/", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://h:65536/", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://h:8o/", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://h:99999999999999999999/", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://h\"/", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://h\\x/", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://h\xc3\xa9/", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://[::1/", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://[::g]/", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://[::1]x/", bad, NULL, NULL, NULL, NULL, 0, false);
  expect_parse("http://[]/", bad, NULL, NULL, NULL, NULL, 0, false);
  /* A control byte, space or DEL anywhere: scheme, userinfo, host, port, target, fragment. */
  static const char *const with_control[] = {
    "ht\ttp://h/",     "http://u\r@h/",       "http://h\n/",   "http://h:8\x7f/",   "http://h/a b",
    "http://h/?a\x01", "http://h/#f\r\nX: 1", "http://h#\x7f", "http://h/p#ok\x1f",
  };
  for (size_t i = 0; i < sizeof with_control / sizeof with_control[0]; i++)
    expect_parse(with_control[i], bad, NULL, NULL, NULL, NULL, 0, false);
  tern__url u;
  ASSERT_EQ(tern__url_parse(&u, NULL), TERN_EINVAL);
}

TEST(url_resolve_ports_spaces_and_bad_values) {
  expect_resolve("http://h:8080/a/b", "c d", "http://h:8080/a/c%20d");
  expect_resolve("http://h:8080/a/b", "//x:9/p", "http://x:9/p");
  expect_resolve("https://[::1]:8443/a", "/b", "https://[::1]:8443/b");
  expect_resolve("http://h/", "", NULL);
  expect_resolve("http://h/", "   ", NULL);
  expect_resolve("http://h/", "/a\r\nX: y", NULL);
}

TEST(challenge_parsing) {
  tern__challenge ch;
  const char *v =
      "Basic realm=\"simple\", Digest realm=\"http-auth@example.org\", "
      "qop=\"auth, auth-int\", algorithm=SHA-256, "
      "nonce=\"7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v\", "
      "opaque=\"FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS\"";
  ASSERT(tern__challenge_find(v, "Digest", &ch));
  ASSERT_STR_EQ(ch.realm, "http-auth@example.org");
  ASSERT_STR_EQ(ch.algorithm, "SHA-256");
  ASSERT_STR_EQ(ch.nonce, "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v");
  ASSERT(ch.qop_auth);
  ASSERT(!ch.stale);
  ASSERT(tern__digest_supported(&ch));
  ASSERT(tern__challenge_find(v, "Basic", &ch));
  ASSERT_STR_EQ(ch.realm, "simple");
  ASSERT(!tern__challenge_find(v, "Negotiate", &ch));
  ASSERT(
      tern__challenge_find("Digest realm=\"a \\\"q\\\" b\", nonce=x, stale=TRUE", "digest", &ch));
  ASSERT_STR_EQ(ch.realm, "a \"q\" b");
  ASSERT(ch.stale);
  ASSERT(tern__challenge_find("Digest nonce=\"n\", algorithm=SHA-512-256-sess", "Digest", &ch));
  ASSERT(tern__digest_supported(&ch));
  ASSERT(tern__challenge_find("Digest nonce=\"n\", algorithm=UNKNOWN", "Digest", &ch));
  ASSERT(!tern__digest_supported(&ch));
  /* Malformed values never crash and find nothing useful. */
  const char *junk[] = { "",   ",,,",    "Digest",      "Digest ===", "Digest realm=\"unterminated",
                         "=x", "\"\"\"", "Digest nonce" };
  for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
    tern__challenge_find(junk[i], "Digest", &ch);
    (void)tern__digest_supported(&ch);
  }
}

TEST(basic_credentials_rfc7617) {
  tern__str s = { 0 };
  ASSERT_EQ(tern__auth_basic("Aladdin", "open sesame", &s), 0);
  ASSERT_EQ(s.len, strlen("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="));
  ASSERT(memcmp(s.data, "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==", s.len) == 0);
  tern__str_free(&s);
}

/* RFC 7616 3.9.1: the same exchange with MD5 and with SHA-256. */
TEST(digest_response_rfc7616_examples) {
  tern__challenge ch;
  memset(&ch, 0, sizeof ch);
  strcpy(ch.realm, "http-auth@example.org");
  strcpy(ch.nonce, "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v");
  strcpy(ch.opaque, "FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS");
  ch.qop_auth = true;
  const char *cnonce = "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ";
  char resp[129];
  strcpy(ch.algorithm, "MD5");
  ASSERT_EQ(tern__digest_response(&ch, "Mufasa", "Circle of Life", "GET", "/dir/index.html",
                                  "00000001", cnonce, resp),
            0);
  ASSERT_STR_EQ(resp, "8ca523f5e9506fed4657c9700eebdbec");
  strcpy(ch.algorithm, "SHA-256");
  ASSERT_EQ(tern__digest_response(&ch, "Mufasa", "Circle of Life", "GET", "/dir/index.html",
                                  "00000001", cnonce, resp),
            0);
  ASSERT_STR_EQ(resp, "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1");
  /* The header carries the parameters a server needs to check it. */
  tern__str h = { 0 };
  ASSERT_EQ(tern__auth_digest(&ch, "Mufasa", "Circle of Life", "GET", "/dir/index.html", 1, &h), 0);
  ASSERT_EQ(tern__str_append(&h, "", 1), 0);
  ASSERT(strstr(h.data, "Digest username=\"Mufasa\", realm=\"http-auth@example.org\"") == h.data);
  ASSERT(strstr(h.data, "uri=\"/dir/index.html\", algorithm=SHA-256, response=\"") != NULL);
  ASSERT(strstr(h.data, "qop=auth, nc=00000001, cnonce=\"") != NULL);
  ASSERT(strstr(h.data, "opaque=\"FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS\"") != NULL);
  tern__str_free(&h);
}

/* curl's NO_PROXY rules: names match themselves and subdomains (leading dot or not), addresses
 * and CIDR ranges only addresses, ports ignored, "*" alone everything. */
TEST(no_proxy_list_matching) {
  ASSERT(tern__no_proxy_match("localhost", "localhost"));
  ASSERT(!tern__no_proxy_match("localhost", "localhost2"));
  ASSERT(tern__no_proxy_match("a.test, example.com", "www.example.com"));
  ASSERT(tern__no_proxy_match(".example.com", "example.com"));
  ASSERT(tern__no_proxy_match("*.example.com", "x.example.com"));
  ASSERT(!tern__no_proxy_match("example.com", "myexample.com"));
  ASSERT(tern__no_proxy_match("EXAMPLE.com:8080", "example.com"));
  ASSERT(tern__no_proxy_match("example.com", "example.com."));
  ASSERT(tern__no_proxy_match("*", "anything"));
  ASSERT(tern__no_proxy_match(" * ", "10.1.2.3"));
  ASSERT(!tern__no_proxy_match("*,x", "anything"));
  ASSERT(tern__no_proxy_match("10.0.0.0/8", "10.200.3.4"));
  ASSERT(!tern__no_proxy_match("10.0.0.0/8", "11.0.0.1"));
  ASSERT(tern__no_proxy_match("127.0.0.1", "127.0.0.1"));
  ASSERT(!tern__no_proxy_match("127.0.0.1", "127.0.0.2"));
  ASSERT(!tern__no_proxy_match("0.0.1", "127.0.0.1")); /* addresses never by suffix */
  ASSERT(tern__no_proxy_match("fd00::/8", "fd12::1"));
  ASSERT(tern__no_proxy_match("[::1]:8080", "::1"));
  ASSERT(tern__no_proxy_match("[fd00::]/8", "fdff::2"));
  ASSERT(!tern__no_proxy_match("fd00::/8", "fe80::1"));
  ASSERT(!tern__no_proxy_match("10.0.0.0/8", "ten.example"));
  ASSERT(!tern__no_proxy_match("", "localhost"));
  ASSERT(!tern__no_proxy_match(NULL, "localhost"));
}

static void expect_hex(const unsigned char *b, size_t n, const char *want) {
  char hex[256];
  ASSERT(2 * n < sizeof hex);
  for (size_t i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02x", b[i]);
  ASSERT_STR_EQ(hex, want);
}

/* MD4 (RFC 1320 A.5) and MS-NLMP 4.2.2 to 4.2.4: NTOWFv1, NTOWFv2, LMv2 and the NTLMv2
 * response's NTProofStr, NTLMv1 without and with extended session security. */
TEST(ntlm_ms_nlmp_vectors) {
  unsigned char d[16];
  tern__md4("", 0, d);
  expect_hex(d, 16, "31d6cfe0d16ae931b73c59d7e0c089c0");
  tern__md4("abc", 3, d);
  expect_hex(d, 16, "a448017aaf21d8525fc10ae87aa6729d");
  const char *digits =
      "1234567890123456789012345678901234567890123456789012345678901234567890"
      "1234567890";
  tern__md4(digits, strlen(digits), d);
  expect_hex(d, 16, "e33b4ddc9c38f2199c3e7b164fcc0536");

  ASSERT_EQ(tern__ntlm_nt_hash("Password", d), 0);
  expect_hex(d, 16, "a4f49c406510bdcab6824ee7c30fd852");
  unsigned char v2[16];
  ASSERT_EQ(tern__ntlm_v2_hash("User", "Domain", "Password", v2), 0);
  expect_hex(v2, 16, "0c868a403bfd7a93a3001ef22ef02e3f");
  /* the user name is upper-cased, the domain is not */
  ASSERT_EQ(tern__ntlm_v2_hash("user", "Domain", "Password", d), 0);
  expect_hex(d, 16, "0c868a403bfd7a93a3001ef22ef02e3f");

  const unsigned char server[8] = { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef };
  const unsigned char client[8] = { 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa };
  const unsigned char ti[] = { 0x02, 0x00, 0x0c, 0x00, 'D',  0,    'o',  0,    'm', 0, 'a', 0,
                               'i',  0,    'n',  0,    0x01, 0x00, 0x0c, 0x00, 'S', 0, 'e', 0,
                               'r',  0,    'v',  0,    'e',  0,    'r',  0,    0,   0, 0,   0 };
  tern__str nt = { 0 };
  unsigned char lm[24];
  ASSERT_EQ(tern__ntlm_v2_response(v2, server, client, 0, ti, sizeof ti, &nt, lm), 0);
  expect_hex(lm, 24, "86c35097ac9cec102554764a57cccc19aaaaaaaaaaaaaaaa");
  ASSERT_EQ(nt.len, 16 + 28 + sizeof ti + 4);
  expect_hex((unsigned char *)nt.data, 16, "68cd0ab851e51c96aabc927bebef6a1c");
  tern__str_free(&nt);

  unsigned char nt1[24], lm1[24];
  ASSERT_EQ(tern__ntlm_nt_hash("Password", d), 0);
  int r = tern__ntlm_v1_response(d, 0, server, client, nt1, lm1);
  if (r == TERN_EUNSUPPORTED) return; /* no OpenSSL legacy provider (DES) on this machine */
  ASSERT_EQ(r, 0);
  expect_hex(nt1, 24, "67c43011f30298a2ad35ece64f16331c44bdbed927841f94");
  ASSERT_EQ(tern__ntlm_v1_response(d, 0x00080000, server, client, nt1, lm1), 0);
  expect_hex(nt1, 24, "7537f803ae367128ca458204bde7caf81e97ed2683267232");
  expect_hex(lm1, 24, "aaaaaaaaaaaaaaaa00000000000000000000000000000000");
}

/* The CHALLENGE parser takes network input: a good message parses, and every truncation and
 * every bad offset or length is refused without reading past the message. */
TEST(ntlm_challenge_found_only_outside_quotes) {
  const char *token = "unset";
  ASSERT(tern__ntlm_challenge_find("NTLM", &token));
  ASSERT(token == NULL);
  ASSERT(tern__ntlm_challenge_find("Basic realm=\"x\", NTLM TlRMTVNTUAAC", &token));
  ASSERT(token != NULL && strncmp(token, "TlRMTVNTUAAC", 12) == 0);
  /* a comma inside a quoted value separates nothing: no NTLM offer here */
  ASSERT(!tern__ntlm_challenge_find("Digest realm=\"corp, NTLM domain\", nonce=\"n\"", &token));
  ASSERT(!tern__ntlm_challenge_find("Digest realm=\"a\\\", NTLM here\"", &token));
  ASSERT(tern__ntlm_challenge_find("Digest realm=\"a, b\", nonce=\"n\", NTLM", &token));
}

TEST(ntlm_challenge_parsing) {
  unsigned char m[48 + 36] = { 'N', 'T', 'L', 'M', 'S', 'S', 'P', 0, 2, 0, 0, 0 };
  const unsigned char ti[] = { 0x02, 0x00, 0x0c, 0x00, 'D',  0,    'o',  0,    'm', 0, 'a', 0,
                               'i',  0,    'n',  0,    0x01, 0x00, 0x0c, 0x00, 'S', 0, 'e', 0,
                               'r',  0,    'v',  0,    'e',  0,    'r',  0,    0,   0, 0,   0 };
  m[20] = 0x01, m[22] = 0x80; /* UNICODE | TARGET_INFO */
  for (int i = 0; i < 8; i++) m[24 + i] = (unsigned char)(i + 1);
  m[40] = m[42] = (unsigned char)sizeof ti;
  m[44] = 48;
  memcpy(m + 48, ti, sizeof ti);
  tern__ntlm_challenge ch;
  ASSERT_EQ(tern__ntlm_parse_challenge(m, sizeof m, &ch), 0);
  ASSERT_EQ(ch.target_info_len, sizeof ti);
  ASSERT_EQ(ch.challenge[7], 8);
  tern__ntlm_challenge_clear(&ch);
  for (size_t n = 0; n < sizeof m; n++) {
    int r = tern__ntlm_parse_challenge(m, n, &ch);
    if (n < 32 || n >= 48) ASSERT_EQ(r, TERN_EAUTH); /* short, or target info cut */
    tern__ntlm_challenge_clear(&ch);
  }
  /* The AUTHENTICATE message names the domain and user of "DOMAIN\\user" in UTF-16LE. */
  ASSERT_EQ(tern__ntlm_parse_challenge(m, sizeof m, &ch), 0);
  tern__str auth = { 0 };
  ASSERT_EQ(tern__ntlm_authenticate(&ch, "TERNDOM\\alice", "pw", false, &auth), 0);
  tern__ntlm_challenge_clear(&ch);
  ASSERT(auth.len > 5 && memcmp(auth.data, "NTLM ", 5) == 0);
  unsigned char t3[1024];
  size_t t3n = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 5; i < auth.len && auth.data[i] != '='; i++) {
    const char *al = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    acc = acc << 6 | (uint32_t)(strchr(al, auth.data[i]) - al);
    if ((bits += 6) >= 8) t3[t3n++] = (unsigned char)(acc >> (bits -= 8));
  }
  tern__str_free(&auth);
  ASSERT(t3n > 64 && memcmp(t3, "NTLMSSP\0\3\0\0\0", 12) == 0);
  size_t dlen = t3[28], doff = t3[32] | (size_t)t3[33] << 8;
  size_t ulen = t3[36], uoff = t3[40] | (size_t)t3[41] << 8;
  ASSERT_EQ(dlen, 14);
  ASSERT_EQ(ulen, 10);
  ASSERT(doff + dlen <= t3n && uoff + ulen <= t3n);
  ASSERT(memcmp(t3 + doff, "T\0E\0R\0N\0D\0O\0M\0", 14) == 0);
  ASSERT(memcmp(t3 + uoff, "a\0l\0i\0c\0e\0", 10) == 0);
  size_t ntlen = t3[20] | (size_t)t3[21] << 8;
  ASSERT_EQ(ntlen, 16 + 28 + sizeof ti + 4); /* NTLMv2: proof, temp with the target info */
  m[44] = 49;                                /* target info past the end */
  ASSERT_EQ(tern__ntlm_parse_challenge(m, sizeof m, &ch), TERN_EAUTH);
  m[44] = 48;
  m[48 + 2] = 0xff; /* an AV pair longer than the field */
  ASSERT_EQ(tern__ntlm_parse_challenge(m, sizeof m, &ch), TERN_EAUTH);
  m[48 + 2] = 0x0c;
  m[8] = 3; /* not a CHALLENGE */
  ASSERT_EQ(tern__ntlm_parse_challenge(m, sizeof m, &ch), TERN_EAUTH);
  ASSERT_EQ(tern__ntlm_parse_header("not base64!", &ch), TERN_EAUTH);
  /* a NEGOTIATE message parses as a message but is not a challenge */
  tern__str neg = { 0 };
  ASSERT_EQ(tern__ntlm_negotiate(&neg), 0);
  ASSERT_EQ(tern__str_append(&neg, "", 1), 0);
  ASSERT(strncmp(neg.data, "NTLM TlRMTVNTUAABAAAA", 21) == 0);
  ASSERT_EQ(tern__ntlm_parse_header(neg.data + 5, &ch), TERN_EAUTH);
  tern__str_free(&neg);
}

/* ---- zstd frames split anywhere ---- */

/* 203,000 bytes ("tern zstd frame header test. " 7,000 times) as one zstd frame whose 9-byte
 * header declares its content size (zstd -19). */
static const unsigned char zstd_frame[] = {
  0x28, 0xb5, 0x2f, 0xfd, 0xa4, 0xf8, 0x18, 0x03, 0x00, 0x2c, 0x01, 0x00, 0xd2, 0x81, 0x06, 0x0c,
  0xe0, 0x6d, 0xc3, 0xf2, 0xfa, 0x11, 0xb3, 0xbb, 0x40, 0x17, 0x02, 0x2c, 0x85, 0xa3, 0xdf, 0xb3,
  0x84, 0xa9, 0xae, 0xb8, 0xa9, 0x1c, 0xb3, 0x76, 0x7e, 0x01, 0x00, 0x81, 0xff, 0x83, 0x5c, 0x39,
  0x01, 0x45, 0x00, 0x00, 0x00, 0x01, 0x00, 0xf5, 0x18, 0x20, 0x57, 0x40, 0x13, 0xd0, 0xe9, 0x4b
};
static const char zstd_unit[] = "tern zstd frame header test. ";

struct zstd_check {
  size_t at;
  bool differs;
};

static int zstd_compare(void *ctx, const char *data, size_t n) {
  struct zstd_check *k = ctx;
  size_t unit = sizeof zstd_unit - 1;
  for (size_t i = 0; i < n; i++, k->at++)
    if (data[i] != zstd_unit[k->at % unit]) k->differs = true;
  return 0;
}

/* Decodes `n` bytes into `sink` whole (`first` 0) or cut into pieces: `first` bytes, then
 * `piece` at a time. Returns the decoder's verdict. */
static int zstd_decode_to(const unsigned char *body, size_t n, size_t first, size_t piece,
                          tern__sink_fn sink, void *ctx) {
  tern__decoder *d = tern__decoder_new(tern__decoder_kind("zstd", 4));
  ASSERT(d != NULL);
  tern__decoder_set_limits(d, 64u << 20, 0, true);
  int r = 0;
  for (size_t at = 0; r == 0 && at < n;) {
    size_t want = first == 0 ? n : at == 0 ? first : piece;
    size_t take = want < n - at ? want : n - at;
    r = tern__decoder_write(d, (const char *)body + at, take, sink, ctx);
    at += take;
  }
  if (r == 0) r = tern__decoder_end(d);
  tern__decoder_free(d);
  return r;
}

/* Every cut zstd_decode_to takes: whole (first 0), then a first piece of 1 to max_first bytes
 * followed by pieces of 1 to max_piece bytes. */
#define EACH_ZSTD_CUT(first, piece, max_first, max_piece)                                          \
  for (size_t first = 0; first <= (max_first); first++)                                            \
    for (size_t piece = 1; piece <= (first ? (max_piece) : 1u); piece++)

/* Every way of cutting a frame (and two frames in a row) decodes to the same bytes: a header
 * cut anywhere, pieces of any size up to past the header. A cap on libzstd's first read of a
 * frame once made the header copy see bytes twice, and cuts of 5 to 8 bytes failed. */
TEST(zstd_frames_decode_the_same_cut_anywhere) {
  if (tern__decoder_kind("zstd", 4) < 0) return; /* built without libzstd (TERN_WITH_ZSTD=OFF) */
  static unsigned char twice[2 * sizeof zstd_frame];
  memcpy(twice, zstd_frame, sizeof zstd_frame);
  memcpy(twice + sizeof zstd_frame, zstd_frame, sizeof zstd_frame);
  for (int times = 1; times <= 2; times++) {
    EACH_ZSTD_CUT(first, piece, 24u, 24u) {
      struct zstd_check k = { 0, false };
      int r =
          zstd_decode_to(twice, sizeof zstd_frame * (size_t)times, first, piece, zstd_compare, &k);
      if (r != 0 || k.differs || k.at != 203000u * (size_t)times)
        TEST_FAIL_("%d frame(s), first %zu bytes then %zu at a time: result %d, %zu bytes%s", times,
                   first, piece, r, k.at, k.differs ? ", content differs" : "");
    }
  }
}

/* ---- zstd: real frames, output on the buffer's edge, degenerate blocks ---- */

/* Made by the zstd CLI (1.5.4) from 3,120 bytes: zstd_unit repeated to 1,024 bytes, 2,048
 * zeros, then the bytes 0 to 47. A skippable frame (empty), the content with a checksum and a
 * declared size (-19 --check --zstd=wlog=10: a compressed, two RLE and a raw block), a
 * skippable frame of 5 bytes, the content again without either (from a pipe, -3 --no-check),
 * and an empty frame (a raw block of size 0 and a checksum). */
static const unsigned char zstd_real[] = {
  0x50, 0x2a, 0x4d, 0x18, 0x00, 0x00, 0x00, 0x00, 0x28, 0xb5, 0x2f, 0xfd, 0x44, 0x00, 0x30, 0x0b,
  0x24, 0x01, 0x00, 0xd2, 0x81, 0x06, 0x0c, 0xe0, 0x6d, 0xc3, 0xf2, 0xfa, 0x11, 0xb3, 0xbb, 0x40,
  0x17, 0x02, 0x2c, 0x85, 0xa3, 0xdf, 0xb3, 0x84, 0xa9, 0xae, 0xb8, 0xa9, 0x1c, 0xb3, 0x76, 0x7e,
  0x01, 0x00, 0x81, 0x07, 0x95, 0x72, 0x02, 0x02, 0x20, 0x00, 0x00, 0x02, 0x20, 0x00, 0x00, 0x81,
  0x01, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d,
  0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d,
  0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d,
  0x2e, 0x2f, 0x1f, 0x69, 0xc1, 0x38, 0x5f, 0x2a, 0x4d, 0x18, 0x05, 0x00, 0x00, 0x00, 0x74, 0x65,
  0x72, 0x6e, 0x21, 0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 0x2c, 0x01, 0x00, 0xe8, 0x74, 0x65, 0x72,
  0x6e, 0x20, 0x7a, 0x73, 0x74, 0x64, 0x20, 0x66, 0x72, 0x61, 0x6d, 0x65, 0x20, 0x68, 0x65, 0x61,
  0x64, 0x65, 0x72, 0x20, 0x74, 0x65, 0x73, 0x74, 0x2e, 0x20, 0x01, 0x00, 0x81, 0x07, 0x95, 0x72,
  0x02, 0x02, 0x20, 0x00, 0x00, 0x02, 0x20, 0x00, 0x00, 0x81, 0x01, 0x00, 0x00, 0x01, 0x02, 0x03,
  0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13,
  0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23,
  0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x28, 0xb5, 0x2f, 0xfd,
  0x24, 0x00, 0x01, 0x00, 0x00, 0x99, 0xe9, 0xd8, 0x51
};

/* 16,384 zeros (zstd -3, with a checksum): exactly the decoder's output buffer. */
static const unsigned char zstd_edge[] = { 0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x58, 0x4d, 0x00,
                                           0x00, 0x10, 0x00, 0x00, 0x01, 0x00, 0xfb, 0x9f,
                                           0x07, 0x58, 0xec, 0x45, 0x2c, 0x33 };

struct zstd_out {
  unsigned char buf[8192];
  size_t len; /* every byte decoded, kept or not */
};

static int zstd_collect(void *ctx, const char *data, size_t n) {
  struct zstd_out *o = ctx;
  for (size_t i = 0; i < n; i++, o->len++)
    if (o->len < sizeof o->buf) o->buf[o->len] = (unsigned char)data[i];
  return 0;
}

/* zstd_decode_to into `o`, counting every byte decoded. */
static int zstd_decode(const unsigned char *body, size_t n, size_t first, size_t piece,
                       struct zstd_out *o) {
  o->len = 0;
  return zstd_decode_to(body, n, first, piece, zstd_collect, o);
}

/* What zstd_real holds, decoded: its content twice. */
static unsigned char zstd_real_byte(size_t i) {
  i %= 3120;
  return i < 1024   ? (unsigned char)zstd_unit[i % (sizeof zstd_unit - 1)]
         : i < 3072 ? 0
                    : (unsigned char)(i - 3072);
}

/* Frames as zstd writes them (skippable frames, checksums, sizes declared or not, raw, RLE and
 * compressed blocks, an empty frame) decode whole and cut anywhere to the same bytes, now that
 * gzip.c follows the frames' blocks itself. */
TEST(zstd_real_frames_decode_the_same_cut_anywhere) {
  if (tern__decoder_kind("zstd", 4) < 0) return; /* built without libzstd */
  static struct zstd_out o;
  EACH_ZSTD_CUT(first, piece, 24u, 24u) {
    int r = zstd_decode(zstd_real, sizeof zstd_real, first, piece, &o);
    size_t bad = 0;
    while (bad < o.len && bad < sizeof o.buf && o.buf[bad] == zstd_real_byte(bad)) bad++;
    if (r != 0 || o.len != 6240 || bad != o.len)
      TEST_FAIL_("first %zu bytes then %zu at a time: result %d, %zu bytes, first wrong at %zu",
                 first, piece, r, o.len, bad);
  }
}

/* A frame whose output ends exactly where the decoder's 16 KiB output buffer does: libzstd
 * reports the frame's end on the call that fills the buffer, and the next call (made to be sure
 * nothing is left) asks for another frame. gzip.c took that as a cut frame, so such a body was
 * refused as truncated whole (and, depending on the cuts, in pieces). */
TEST(zstd_output_ending_on_the_buffer_edge_decodes) {
  if (tern__decoder_kind("zstd", 4) < 0) return; /* built without libzstd */
  static struct zstd_out o;
  EACH_ZSTD_CUT(first, piece, 24u, 24u) {
    int r = zstd_decode(zstd_edge, sizeof zstd_edge, first, piece, &o);
    if (r != 0 || o.len != 16384)
      TEST_FAIL_("first %zu bytes then %zu at a time: result %d, %zu bytes", first, piece, r,
                 o.len);
  }
}

/* Frames zstd never writes, which libzstd (1.5.4) treated differently whole and in pieces or
 * let pass: each is refused, whole and cut anywhere. */
TEST(zstd_degenerate_blocks_are_refused_whole_and_cut_anywhere) {
  if (tern__decoder_kind("zstd", 4) < 0) return; /* built without libzstd */
  static const struct {
    const char *what;
    unsigned char bytes[16];
    size_t n;
  } cases[] = {
    /* Magic, descriptor 0 (no size, no checksum), a 1 KiB window, then blocks; the last one is
     * an empty raw block (01 00 00). */
    { "an RLE block of size 0",
      { 0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 0x02, 0x00, 0x00, 0x61, 0x01, 0x00, 0x00 },
      13 },
    { "a compressed block of size 0",
      { 0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 0x04, 0x00, 0x00, 0x01, 0x00, 0x00 },
      12 },
    { "a block of the reserved type", { 0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 0x07, 0x00, 0x00 }, 9 },
    /* Single segment, 4 bytes declared: the window, and the largest block, is 4 bytes. */
    { "a raw block larger than the window",
      { 0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x04, 0x29, 0x00, 0x00, 'a', 'b', 'c', 'd', 'e' },
      14 },
    { "a header with its reserved bit set",
      { 0x28, 0xb5, 0x2f, 0xfd, 0x08, 0x00, 0x01, 0x00, 0x00 },
      9 },
  };
  static struct zstd_out o;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    EACH_ZSTD_CUT(first, piece, cases[c].n - 1, cases[c].n) {
      int r = zstd_decode(cases[c].bytes, cases[c].n, first, piece, &o);
      if (r != TERN_EDECODE)
        TEST_FAIL_("%s, first %zu bytes then %zu at a time: result %d, %zu bytes", cases[c].what,
                   first, piece, r, o.len);
    }
}

/* The response's field filter (resp.names) must never hide a field: every name present is
 * found in any case, and absent names come back NULL, whether or not their bit is shared. */
TEST(response_field_lookup_filter_hides_nothing) {
  static const char *const names[] = {
    "Server",
    "Date",
    "Content-Type",
    "Content-Length",
    "Last-Modified",
    "Connection",
    "ETag",
    "X-Connection",
    "X-Remote-Port",
    "Accept-Ranges",
    "Keep-Alive",
    "Cache-Control",
    "Vary",
    "Set-Cookie",
    "Location",
    "x",
    "X-A-Very-Long-Field-Name-Of-Its-Own",
  };
  enum { N = sizeof names / sizeof names[0] };
  tern__header_t h[N];
  char values[N][8];
  for (size_t i = 0; i < N; i++) {
    snprintf(values[i], sizeof values[i], "v%zu", i);
    h[i] = (tern__header_t){ names[i], strlen(names[i]), values[i], strlen(values[i]) };
  }
  tern_request_t *req = NULL;
  ASSERT_EQ(tern_request_new(&req), 0);
  /* Each prefix of the list, so that names are also looked up while absent. */
  for (size_t n = 0; n <= N; n++) {
    ASSERT_EQ(tern__request_set_response(req, 1, 200, "OK", 2, h, n), 0);
    for (size_t i = 0; i < N; i++) {
      char lower[64], upper[64];
      size_t len = strlen(names[i]);
      for (size_t k = 0; k <= len; k++) {
        lower[k] = (char)tolower((unsigned char)names[i][k]);
        upper[k] = (char)toupper((unsigned char)names[i][k]);
      }
      const char *want = i < n ? values[i] : NULL;
      const char *got[3] = { tern_request_get_header(req, names[i]),
                             tern_request_get_header(req, lower),
                             tern_request_get_header(req, upper) };
      for (int k = 0; k < 3; k++)
        if (got[k] != want && (got[k] == NULL || want == NULL || strcmp(got[k], want) != 0))
          TEST_FAIL_("%zu fields: \"%s\" gave %s, want %s", n, names[i], got[k] ? got[k] : "NULL",
                     want ? want : "NULL");
    }
    /* Names that no response here carries, some sharing a bit with one that is there. */
    static const char *const absent[] = {
      "Content-Encoding", "Content-Range", "Retry-After", "WWW-Authenticate", "Servers", "Dat", ""
    };
    for (size_t a = 0; a < sizeof absent / sizeof absent[0]; a++)
      if (tern_request_get_header(req, absent[a]) != NULL)
        TEST_FAIL_("%zu fields: \"%s\" found but absent", n, absent[a]);
  }
  tern_request_free(req);
}

/* tern_version_info names the library first, then each library it runs on with its version,
 * the same string on every call. */
TEST(version_info_names_each_library_with_its_version) {
  const char *info = tern_version_info();
  ASSERT(info != NULL);
  char want[64];
  snprintf(want, sizeof want, "libtern/%s ", tern_version_string());
  ASSERT(strncmp(info, want, strlen(want)) == 0);
  static const char *const names[] = { " libuv/", " OpenSSL/", " zlib/", " nghttp2/" };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *at = strstr(info, names[i]);
    ASSERT(at != NULL);
    ASSERT(isdigit((unsigned char)at[strlen(names[i])]));
  }
  ASSERT(strstr(info, "unknown") == NULL);
  ASSERT(tern_version_info() == info);
}
