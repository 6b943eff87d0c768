/* NTLM messages (MS-NLMP): the NEGOTIATE message (type 1), parsing the server's CHALLENGE
 * (type 2, network input: every offset and length is checked), and the AUTHENTICATE message
 * (type 3) with an NTLMv2 response, or an NTLMv1 one when the challenge carries no target
 * information and the caller allows it. MD4 is written here: OpenSSL 3's default provider has
 * none. No request in sight: auth.c decides when a message is sent. */
#include "internal.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/provider.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
  NEG_UNICODE = 0x00000001,
  NEG_OEM = 0x00000002,
  REQUEST_TARGET = 0x00000004,
  NEG_NTLM = 0x00000200,
  NEG_ALWAYS_SIGN = 0x00008000,
  NEG_ESS = 0x00080000, /* extended session security (NTLM2 session response) */
  NEG_TARGET_INFO = 0x00800000,
  NEG_128 = 0x20000000,
  NEG_56 = 0x80000000u
};
#define CLIENT_FLAGS                                                                               \
  (NEG_UNICODE | NEG_OEM | REQUEST_TARGET | NEG_NTLM | NEG_ALWAYS_SIGN | NEG_ESS | NEG_128 | NEG_56)

static const unsigned char signature[8] = { 'N', 'T', 'L', 'M', 'S', 'S', 'P', 0 };

/* ---- MD4 (RFC 1320), for the NT hash only ---- */

static uint32_t rol(uint32_t x, int s) { return (x << s) | (x >> (32 - s)); }

static void md4_block(uint32_t h[4], const unsigned char b[64]) {
  uint32_t x[16];
  for (int i = 0; i < 16; i++)
    x[i] = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
           (uint32_t)b[4 * i + 3] << 24;
  uint32_t a = h[0], bb = h[1], c = h[2], d = h[3];
#define F(x, y, z) (((x) & (y)) | (~(x) & (z)))
#define G(x, y, z) (((x) & (y)) | ((x) & (z)) | ((y) & (z)))
#define H(x, y, z) ((x) ^ (y) ^ (z))
  static const int r1[4] = { 3, 7, 11, 19 }, r2[4] = { 3, 5, 9, 13 }, r3[4] = { 3, 9, 11, 15 };
  static const int o3[16] = { 0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15 };
  for (int i = 0; i < 16; i++) {
    uint32_t t = rol(a + F(bb, c, d) + x[i], r1[i % 4]);
    a = d, d = c, c = bb, bb = t;
  }
  for (int i = 0; i < 16; i++) {
    int k = (i % 4) * 4 + i / 4;
    uint32_t t = rol(a + G(bb, c, d) + x[k] + 0x5a827999u, r2[i % 4]);
    a = d, d = c, c = bb, bb = t;
  }
  for (int i = 0; i < 16; i++) {
    uint32_t t = rol(a + H(bb, c, d) + x[o3[i]] + 0x6ed9eba1u, r3[i % 4]);
    a = d, d = c, c = bb, bb = t;
  }
#undef F
#undef G
#undef H
  h[0] += a, h[1] += bb, h[2] += c, h[3] += d;
}

void tern__md4(const void *data, size_t len, unsigned char out[16]) {
  uint32_t h[4] = { 0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u };
  const unsigned char *p = data;
  size_t left = len;
  for (; left >= 64; left -= 64, p += 64) md4_block(h, p);
  unsigned char tail[128] = { 0 };
  memcpy(tail, p, left);
  tail[left] = 0x80;
  size_t n = left < 56 ? 64 : 128;
  uint64_t bits = (uint64_t)len * 8;
  for (int i = 0; i < 8; i++) tail[n - 8 + i] = (unsigned char)(bits >> (8 * i));
  md4_block(h, tail);
  if (n == 128) md4_block(h, tail + 64);
  for (int i = 0; i < 16; i++) out[i] = (unsigned char)(h[i / 4] >> (8 * (i % 4)));
}

/* ---- little helpers ---- */

static void put16(unsigned char *p, unsigned v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}
static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t get32(const unsigned char *p) {
  return get16(p) | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* UTF-8 to UTF-16LE (code points above U+FFFF as surrogate pairs; a malformed byte is taken as
 * Latin-1). Returns the allocation (*n bytes) or NULL. */
static unsigned char *utf16le(const char *s, size_t *n) {
  size_t len = strlen(s);
  unsigned char *out = tern__malloc(4 * len + 2);
  if (out == NULL) return NULL;
  size_t k = 0;
  const unsigned char *p = (const unsigned char *)s, *end = p + len;
  while (p < end) {
    uint32_t cp = *p++;
    int more = cp >= 0xf0 && cp < 0xf8 ? 3 : cp >= 0xe0 ? 2 : cp >= 0xc0 ? 1 : 0;
    if (cp >= 0xf8) more = 0;
    if (more && end - p >= more) {
      uint32_t v = cp & (0x3fu >> more);
      int i = 0;
      for (; i < more && (p[i] & 0xc0) == 0x80; i++) v = v << 6 | (p[i] & 0x3f);
      if (i == more) cp = v, p += more;
    }
    if (cp > 0xffff && cp <= 0x10ffff) {
      cp -= 0x10000;
      put16(out + k, 0xd800 | (cp >> 10));
      put16(out + k + 2, 0xdc00 | (cp & 0x3ff));
      k += 4;
    } else {
      put16(out + k, cp & 0xffff);
      k += 2;
    }
  }
  *n = k;
  return out;
}

/* ASCII letters upper-cased in UTF-16LE text (NTOWFv2 upper-cases the user name; letters beyond
 * ASCII keep their case, as most implementations' invariant upper-casing does for them). */
static void upper16(unsigned char *u, size_t n) {
  for (size_t i = 0; i + 1 < n; i += 2)
    if (u[i + 1] == 0 && u[i] >= 'a' && u[i] <= 'z') u[i] = (unsigned char)(u[i] - 32);
}

/* ---- type 1 ---- */

int tern__ntlm_negotiate(tern__str *out) {
  unsigned char m[32] = { 0 };
  memcpy(m, signature, 8);
  put32(m + 8, 1);
  put32(m + 12, CLIENT_FLAGS);
  /* domain and workstation fields empty, their offsets past the header */
  put32(m + 20, 32);
  put32(m + 28, 32);
  int r = tern__str_append(out, "NTLM ", 5);
  return r ? r : tern__str_append_base64(out, m, sizeof m);
}

/* ---- type 2 ---- */

void tern__ntlm_challenge_clear(tern__ntlm_challenge *ch) {
  free(ch->target_info);
  memset(ch, 0, sizeof *ch);
}

int tern__ntlm_parse_challenge(const unsigned char *m, size_t n, tern__ntlm_challenge *ch) {
  memset(ch, 0, sizeof *ch);
  if (n < 32 || memcmp(m, signature, 8) != 0 || get32(m + 8) != 2) return TERN_EAUTH;
  ch->flags = get32(m + 20);
  memcpy(ch->challenge, m + 24, 8);
  /* Target name (12..20) is not needed; target info (40..48) only when the message holds its
   * fields and the server says it is there. */
  if (n >= 48 && (ch->flags & NEG_TARGET_INFO)) {
    size_t len = get16(m + 40), off = get32(m + 44);
    if (off > n || len > n - off) return TERN_EAUTH;
    if (len > 0) {
      /* AV pairs: each id, length, value; they must end with MsvAvEOL within the field. */
      size_t p = 0;
      bool eol = false;
      while (!eol && p + 4 <= len) {
        uint32_t id = get16(m + off + p), alen = get16(m + off + p + 2);
        if (alen > len - p - 4) return TERN_EAUTH;
        eol = id == 0;
        p += 4 + alen;
      }
      if (!eol) return TERN_EAUTH;
      if ((ch->target_info = tern__malloc(len)) == NULL) return TERN_ENOMEM;
      memcpy(ch->target_info, m + off, len);
      ch->target_info_len = len;
    }
  }
  return 0;
}

int tern__ntlm_parse_header(const char *value, tern__ntlm_challenge *ch) {
  memset(ch, 0, sizeof *ch);
  while (*value == ' ' || *value == '\t') value++;
  size_t n = strcspn(value, " \t,");
  unsigned char m[4096];
  long len = tern__base64_decode(value, n, m, sizeof m);
  if (len < 0) return TERN_EAUTH;
  return tern__ntlm_parse_challenge(m, (size_t)len, ch);
}

/* ---- type 3 ---- */

static int hmac_md5(const unsigned char *key, size_t klen, const unsigned char *a, size_t alen,
                    const unsigned char *b, size_t blen, unsigned char out[16]) {
  unsigned char *buf = tern__malloc(alen + blen + 1);
  if (buf == NULL) return TERN_ENOMEM;
  if (alen) memcpy(buf, a, alen);
  if (blen) memcpy(buf + alen, b, blen);
  unsigned olen = 0;
  bool ok = HMAC(EVP_md5(), key, (int)klen, buf, alen + blen, out, &olen) != NULL && olen == 16;
  free(buf);
  return ok ? 0 : TERN_EAUTH;
}

int tern__ntlm_nt_hash(const char *password, unsigned char out[16]) {
  size_t n;
  unsigned char *u = utf16le(password, &n);
  if (u == NULL) return TERN_ENOMEM;
  tern__md4(u, n, out);
  memset(u, 0, n);
  free(u);
  return 0;
}

int tern__ntlm_v2_hash(const char *user, const char *domain, const char *password,
                       unsigned char out[16]) {
  unsigned char nt[16];
  int r = tern__ntlm_nt_hash(password, nt);
  if (r) return r;
  /* HMAC-MD5 over UTF-16LE(upper-case user) then UTF-16LE(domain), as two pieces */
  size_t un = 0, dn = 0;
  unsigned char *u = utf16le(user, &un), *d = utf16le(domain, &dn);
  if (u && d) {
    upper16(u, un);
    r = hmac_md5(nt, 16, u, un, d, dn, out);
  } else {
    r = TERN_ENOMEM;
  }
  free(u);
  free(d);
  memset(nt, 0, sizeof nt);
  return r;
}

int tern__ntlm_v2_response(const unsigned char v2hash[16], const unsigned char server[8],
                           const unsigned char client[8], uint64_t timestamp,
                           const unsigned char *target_info, size_t ti_len, tern__str *nt,
                           unsigned char lm[24]) {
  /* temp = 1, 1, 6 zero bytes, the timestamp, the client challenge, 4 zeros, target info, 4
   * zeros; the NT response is HMAC(v2hash, server || temp) followed by temp. */
  size_t tlen = 28 + ti_len + 4;
  unsigned char *temp = tern__calloc(1, tlen);
  if (temp == NULL) return TERN_ENOMEM;
  temp[0] = temp[1] = 1;
  for (int i = 0; i < 8; i++) temp[8 + i] = (unsigned char)(timestamp >> (8 * i));
  memcpy(temp + 16, client, 8);
  if (ti_len) memcpy(temp + 28, target_info, ti_len);
  unsigned char proof[16];
  int r = hmac_md5(v2hash, 16, server, 8, temp, tlen, proof);
  if (!r) r = tern__str_append(nt, proof, 16);
  if (!r) r = tern__str_append(nt, temp, tlen);
  free(temp);
  if (!r) r = hmac_md5(v2hash, 16, server, 8, client, 8, lm);
  if (!r) memcpy(lm + 16, client, 8);
  return r;
}

/* NTLMv1's DESL: three DES encryptions of `data` with keys from the 16-byte hash (padded to 21
 * bytes). Single DES lives in OpenSSL 3's legacy provider, loaded into a private library
 * context so the application's OpenSSL stays as it was. */
static EVP_CIPHER *des_ecb;
static uv_once_t des_once = UV_ONCE_INIT;

static void des_load(void) {
  OSSL_LIB_CTX *lib = OSSL_LIB_CTX_new();
  if (lib && OSSL_PROVIDER_load(lib, "legacy") && OSSL_PROVIDER_load(lib, "default"))
    des_ecb = EVP_CIPHER_fetch(lib, "DES-ECB", NULL);
}

static int desl(const unsigned char hash[16], const unsigned char data[8], unsigned char out[24]) {
  uv_once(&des_once, des_load); /* engines on several threads may get here at once */
  EVP_CIPHER *des = des_ecb;
  if (des == NULL) return TERN_EUNSUPPORTED;
  unsigned char k21[21] = { 0 };
  memcpy(k21, hash, 16);
  int r = 0;
  for (int i = 0; i < 3 && !r; i++) {
    const unsigned char *k7 = k21 + 7 * i;
    unsigned char key[8];
    key[0] = k7[0];
    for (int j = 1; j < 7; j++) key[j] = (unsigned char)(k7[j - 1] << (8 - j) | k7[j] >> j);
    key[7] = (unsigned char)(k7[6] << 1);
    EVP_CIPHER_CTX *cx = EVP_CIPHER_CTX_new();
    int len = 0;
    if (cx == NULL || EVP_EncryptInit_ex2(cx, des, key, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_set_padding(cx, 0) != 1 ||
        EVP_EncryptUpdate(cx, out + 8 * i, &len, data, 8) != 1 || len != 8)
      r = TERN_EAUTH;
    EVP_CIPHER_CTX_free(cx);
  }
  return r;
}

int tern__ntlm_v1_response(const unsigned char nt_hash[16], uint32_t flags,
                           const unsigned char server[8], const unsigned char client[8],
                           unsigned char nt[24], unsigned char lm[24]) {
  if (flags & NEG_ESS) {
    /* NTLM2 session response: DESL over MD5(server || client)[0..8]; LM = client || zeros */
    unsigned char sc[16], d[EVP_MAX_MD_SIZE];
    unsigned dn = 0;
    memcpy(sc, server, 8);
    memcpy(sc + 8, client, 8);
    if (EVP_Digest(sc, 16, d, &dn, EVP_md5(), NULL) != 1) return TERN_EAUTH;
    memset(lm, 0, 24);
    memcpy(lm, client, 8);
    return desl(nt_hash, d, nt);
  }
  int r = desl(nt_hash, server, nt);
  if (!r) memcpy(lm, nt, 24); /* no LM hash: the NT response twice (MS-NLMP 3.3.1) */
  return r;
}

/* Windows FILETIME now: 100 ns ticks since 1601. */
static uint64_t filetime_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ((uint64_t)ts.tv_sec + 11644473600ull) * 10000000ull + (uint64_t)ts.tv_nsec / 100;
}

/* The timestamp the server put in its target info (MsvAvTimestamp), which the client must use. */
static bool av_timestamp(const tern__ntlm_challenge *ch, uint64_t *ts) {
  for (size_t p = 0; p + 4 <= ch->target_info_len;) {
    uint32_t id = get16(ch->target_info + p), len = get16(ch->target_info + p + 2);
    if (id == 0 || len > ch->target_info_len - p - 4) break;
    if (id == 7 && len == 8) {
      *ts = 0;
      for (int i = 7; i >= 0; i--) *ts = *ts << 8 | ch->target_info[p + 4 + i];
      return true;
    }
    p += 4 + len;
  }
  return false;
}

int tern__ntlm_authenticate(const tern__ntlm_challenge *ch, const char *user, const char *password,
                            bool allow_v1, tern__str *out) {
  /* "DOMAIN\user" names the domain; otherwise none (a "user@domain" name goes as it is). */
  const char *bs = strchr(user, '\\');
  tern__str dom = { 0 }; /* NUL-terminated: appendf terminates, append does not */
  int r = tern__str_appendf(&dom, "%.*s", bs ? (int)(bs - user) : 0, user);
  if (r) return r;
  const char *name = bs ? bs + 1 : user;
  unsigned char client[8];
  tern__str nt = { 0 };
  unsigned char lm[24], hash[16];
  if (RAND_bytes(client, 8) != 1) r = TERN_EAUTH;
  if (!r && ch->target_info_len > 0) {
    uint64_t ts = filetime_now();
    bool server_ts = av_timestamp(ch, &ts);
    r = tern__ntlm_v2_hash(name, dom.data, password, hash);
    if (!r)
      r = tern__ntlm_v2_response(hash, ch->challenge, client, ts, ch->target_info,
                                 ch->target_info_len, &nt, lm);
    if (server_ts) memset(lm, 0, sizeof lm); /* MS-NLMP 3.1.5.1.2: no LMv2 then */
  } else if (!r && !allow_v1) {
    r = TERN_EUNSUPPORTED; /* the server offers only NTLMv1, which the caller did not allow */
  } else if (!r) {
    unsigned char v1[24];
    r = tern__ntlm_nt_hash(password, hash);
    if (!r) r = tern__ntlm_v1_response(hash, ch->flags, ch->challenge, client, v1, lm);
    if (!r) r = tern__str_append(&nt, v1, 24);
  }
  memset(hash, 0, sizeof hash);

  bool uni = (ch->flags & NEG_UNICODE) != 0;
  size_t dn = 0, un = 0;
  unsigned char *d16 = NULL, *u16 = NULL;
  if (!r && uni) {
    d16 = utf16le(dom.data, &dn);
    u16 = utf16le(name, &un);
    if (d16 == NULL || u16 == NULL) r = TERN_ENOMEM;
  }
  const unsigned char *dp = uni ? d16 : (const unsigned char *)dom.data;
  const unsigned char *up = uni ? u16 : (const unsigned char *)name;
  if (!uni) dn = dom.len, un = strlen(name);
  size_t total = 64 + 24 + nt.len + dn + un; /* at most 88 + 3 * 65535: fits the offsets */
  bool too_big = dn > 0xffff || un > 0xffff || nt.len > 0xffff; /* 16-bit length fields */
  unsigned char *m = r || too_big ? NULL : tern__calloc(1, total);
  if (!r && m == NULL) r = too_big ? TERN_EAUTH : TERN_ENOMEM;
  if (!r) {
    memcpy(m, signature, 8);
    put32(m + 8, 3);
    size_t off = 64;
    /* fields: length, maximum length, offset */
    struct {
      size_t at, len;
      const void *data;
    } f[] = {
      { 12, 24, lm }, { 20, nt.len, nt.data }, { 28, dn, dp }, { 36, un, up }, { 44, 0, NULL }
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
      put16(m + f[i].at, (unsigned)f[i].len);
      put16(m + f[i].at + 2, (unsigned)f[i].len);
      put32(m + f[i].at + 4, (uint32_t)off);
      if (f[i].len) memcpy(m + off, f[i].data, f[i].len);
      off += f[i].len;
    }
    put16(m + 52, 0); /* no session key */
    put16(m + 54, 0);
    put32(m + 56, (uint32_t)off);
    uint32_t flags = (CLIENT_FLAGS & ch->flags) | NEG_NTLM;
    flags &= uni ? ~(uint32_t)NEG_OEM : ~(uint32_t)NEG_UNICODE;
    put32(m + 60, flags);
    r = tern__str_append(out, "NTLM ", 5);
    if (!r) r = tern__str_append_base64(out, m, total);
    memset(m, 0, total);
  }
  free(m);
  free(d16);
  free(u16);
  if (nt.data) memset(nt.data, 0, nt.len);
  tern__str_free(&nt);
  tern__str_free(&dom);
  return r;
}
