/* Signatures of Mesibo's file transfer protocol: SHA-256 over the joined fields, as lower-case
 * hex, and their check on the server side (a timestamp window against replays, a constant-time
 * comparison against forgeries). Nothing else in the engine calls these: they serve apps that
 * sign transfers and servers that host the files. */
#include "internal.h"

#include <stdio.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

/* SHA-256 over the pieces (NULL-terminated list, each of len[i] bytes), joined with '-', into
 * lower-case hex. */
static int sign(const char *const *piece, const size_t *len, char *out) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (!ctx) return TERN_ENOMEM;
  int ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
  for (size_t i = 0; ok && piece[i]; i++) {
    if (i > 0) ok = EVP_DigestUpdate(ctx, "-", 1);
    if (ok) ok = EVP_DigestUpdate(ctx, piece[i], len[i]);
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  if (ok) ok = EVP_DigestFinal_ex(ctx, md, &mdlen);
  EVP_MD_CTX_free(ctx);
  if (!ok || mdlen * 2 != TERN_SIGNATURE_LEN) return TERN_ENOMEM;
  static const char hex[] = "0123456789abcdef";
  for (unsigned int i = 0; i < mdlen; i++) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  out[TERN_SIGNATURE_LEN] = '\0';
  return 0;
}

static int empty(const char *s) { return s == NULL || s[0] == '\0'; }

/* The pieces of either signature; url NULL for an upload. */
static int sign_fields(const char *url, const char *uid, int64_t ts, const char *token, char *out) {
  char tsbuf[24];
  snprintf(tsbuf, sizeof tsbuf, "%lld", (long long)ts);
  const char *piece[5];
  size_t len[5];
  size_t n = 0;
  if (url) {
    piece[n] = url;
    len[n++] = strcspn(url, "?#");
  }
  piece[n] = uid;
  len[n++] = strlen(uid);
  piece[n] = tsbuf;
  len[n++] = strlen(tsbuf);
  piece[n] = token;
  len[n++] = strlen(token);
  piece[n] = NULL;
  return sign(piece, len, out);
}

TERN_API int tern_signature_upload(const char *uid, int64_t ts, const char *access_token,
                                   char *out) {
  if (empty(uid) || empty(access_token) || !out) return TERN_EINVAL;
  return sign_fields(NULL, uid, ts, access_token, out);
}

TERN_API int tern_signature_download(const char *url, const char *uid, int64_t ts,
                                     const char *access_token, char *out) {
  if (empty(url) || url[0] == '?' || url[0] == '#' || empty(uid) || empty(access_token) || !out)
    return TERN_EINVAL;
  return sign_fields(url, uid, ts, access_token, out);
}

TERN_API int tern_signature_verify(const char *url, const char *uid, int64_t ts,
                                   const char *access_token, const char *sig, int64_t now,
                                   int64_t window) {
  if (window < 0 || (url && (url[0] == '\0' || url[0] == '?' || url[0] == '#'))) return TERN_EINVAL;
  if (empty(sig) || empty(uid) || empty(access_token)) return TERN_SIGNATURE_MISSING;
  /* |ts - now| in unsigned arithmetic, which cannot overflow. */
  uint64_t age = ts < now ? (uint64_t)now - (uint64_t)ts : (uint64_t)ts - (uint64_t)now;
  if (age > (uint64_t)window) return TERN_SIGNATURE_EXPIRED;
  char want[TERN_SIGNATURE_LEN + 1];
  int r = sign_fields(url, uid, ts, access_token, want);
  if (r < 0) return r;
  /* The length is no secret; the digits are compared without an early exit. */
  if (strlen(sig) != TERN_SIGNATURE_LEN) return TERN_SIGNATURE_MISMATCH;
  char got[TERN_SIGNATURE_LEN];
  for (size_t i = 0; i < TERN_SIGNATURE_LEN; i++) {
    unsigned char c = (unsigned char)sig[i];
    got[i] = (char)(c | ((c >= 'A' && c <= 'Z') ? 0x20 : 0));
  }
  return CRYPTO_memcmp(got, want, TERN_SIGNATURE_LEN) == 0 ? TERN_SIGNATURE_OK
                                                           : TERN_SIGNATURE_MISMATCH;
}
