/* Signatures of the signed file transfer (tern_signature_*): the values equal SHA-256 of the
 * joined strings as computed independently (printf '%s' '123-1770223138-token' | sha256sum),
 * and the server-side check refuses missing, tampered and replayed signatures. No server. */
#include "task.h"

#include <string.h>

#include "tern.h"

#define UID          "123"
#define TS           1770223138
#define TOKEN        "token"
#define URL          "https://files.example.com/u/abc.jpg"
/* printf '%s' '123-1770223138-token' | sha256sum */
#define UPLOAD_SIG   "48d1f3cafa661a55b5e1abbc170b1b041b61ab273d9aa457e1caad47f3ac0307"
/* printf '%s' 'https://files.example.com/u/abc.jpg-123-1770223138-token' | sha256sum */
#define DOWNLOAD_SIG "0cc00ebd0f38c4183ece9a4b1c1fa251dca19777a243158f7c46ab206bbb38c0"

TEST(signature_values_match_sha256sum) {
  char sig[TERN_SIGNATURE_LEN + 1];
  ASSERT_EQ(tern_signature_upload(UID, TS, TOKEN, sig), 0);
  ASSERT_STR_EQ(sig, UPLOAD_SIG);
  ASSERT_EQ(tern_signature_download(URL, UID, TS, TOKEN, sig), 0);
  ASSERT_STR_EQ(sig, DOWNLOAD_SIG);
  /* The query (and a fragment) are not part of what is signed. */
  ASSERT_EQ(tern_signature_download(URL "?v=1&uid=123", UID, TS, TOKEN, sig), 0);
  ASSERT_STR_EQ(sig, DOWNLOAD_SIG);
  ASSERT_EQ(tern_signature_download(URL "#top", UID, TS, TOKEN, sig), 0);
  ASSERT_STR_EQ(sig, DOWNLOAD_SIG);
}

TEST(signature_bad_arguments) {
  char sig[TERN_SIGNATURE_LEN + 1];
  ASSERT_EQ(tern_signature_upload(NULL, TS, TOKEN, sig), TERN_EINVAL);
  ASSERT_EQ(tern_signature_upload("", TS, TOKEN, sig), TERN_EINVAL);
  ASSERT_EQ(tern_signature_upload(UID, TS, "", sig), TERN_EINVAL);
  ASSERT_EQ(tern_signature_upload(UID, TS, TOKEN, NULL), TERN_EINVAL);
  ASSERT_EQ(tern_signature_download("", UID, TS, TOKEN, sig), TERN_EINVAL);
  ASSERT_EQ(tern_signature_download("?x=1", UID, TS, TOKEN, sig), TERN_EINVAL);
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, TOKEN, UPLOAD_SIG, TS, -1), TERN_EINVAL);
  ASSERT_EQ(tern_signature_verify("", UID, TS, TOKEN, UPLOAD_SIG, TS, 300), TERN_EINVAL);
}

TEST(signature_verify_accepts_within_window) {
  int w = TERN_SIGNATURE_WINDOW;
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, TOKEN, UPLOAD_SIG, TS, w), TERN_SIGNATURE_OK);
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, TOKEN, UPLOAD_SIG, TS + 300, w),
            TERN_SIGNATURE_OK);
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, TOKEN, UPLOAD_SIG, TS - 300, w),
            TERN_SIGNATURE_OK);
  ASSERT_EQ(tern_signature_verify(URL, UID, TS, TOKEN, DOWNLOAD_SIG, TS + 10, w),
            TERN_SIGNATURE_OK);
  ASSERT_EQ(tern_signature_verify(URL "?v=1", UID, TS, TOKEN, DOWNLOAD_SIG, TS, w),
            TERN_SIGNATURE_OK);
  /* Hex digits in upper case are the same signature. */
  char upper[] = UPLOAD_SIG;
  for (char *p = upper; *p; p++)
    if (*p >= 'a' && *p <= 'f') *p = (char)(*p - 0x20);
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, TOKEN, upper, TS, w), TERN_SIGNATURE_OK);
}

TEST(signature_verify_refuses_replayed_tampered_missing) {
  int w = TERN_SIGNATURE_WINDOW;
  /* Replayed: the same request ten minutes later, or a timestamp ten minutes ahead. */
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, TOKEN, UPLOAD_SIG, TS + 600, w),
            TERN_SIGNATURE_EXPIRED);
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, TOKEN, UPLOAD_SIG, TS + 301, w),
            TERN_SIGNATURE_EXPIRED);
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS + 600, TOKEN, UPLOAD_SIG, TS, w),
            TERN_SIGNATURE_EXPIRED);
  /* The window is the caller's: ten minutes pass under a window of 3600 s. */
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, TOKEN, UPLOAD_SIG, TS + 600, 3600),
            TERN_SIGNATURE_OK);
  /* Extremes do not overflow. */
  ASSERT_EQ(tern_signature_verify(NULL, UID, INT64_MIN, TOKEN, UPLOAD_SIG, INT64_MAX, w),
            TERN_SIGNATURE_EXPIRED);
  /* Tampered: one digit changed, another uid, ts, token or URL, a download signature offered
   * for an upload, a truncated signature. */
  char bad[] = UPLOAD_SIG;
  bad[10] = bad[10] == '0' ? '1' : '0';
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, TOKEN, bad, TS, w), TERN_SIGNATURE_MISMATCH);
  ASSERT_EQ(tern_signature_verify(NULL, "124", TS, TOKEN, UPLOAD_SIG, TS, w),
            TERN_SIGNATURE_MISMATCH);
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS + 1, TOKEN, UPLOAD_SIG, TS, w),
            TERN_SIGNATURE_MISMATCH);
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, "other", UPLOAD_SIG, TS, w),
            TERN_SIGNATURE_MISMATCH);
  ASSERT_EQ(tern_signature_verify(URL "x", UID, TS, TOKEN, DOWNLOAD_SIG, TS, w),
            TERN_SIGNATURE_MISMATCH);
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, TOKEN, DOWNLOAD_SIG, TS, w),
            TERN_SIGNATURE_MISMATCH);
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, TOKEN, "48d1f3ca", TS, w),
            TERN_SIGNATURE_MISMATCH);
  /* Missing: no signature, or no uid or token to check it with. */
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, TOKEN, NULL, TS, w), TERN_SIGNATURE_MISSING);
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, TOKEN, "", TS, w), TERN_SIGNATURE_MISSING);
  ASSERT_EQ(tern_signature_verify(NULL, "", TS, TOKEN, UPLOAD_SIG, TS, w), TERN_SIGNATURE_MISSING);
  ASSERT_EQ(tern_signature_verify(NULL, UID, TS, NULL, UPLOAD_SIG, TS, w), TERN_SIGNATURE_MISSING);
}
