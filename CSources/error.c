/* Errors: names and messages, libuv codes mapped to TERN_E*, the request's first failure and
 * its timestamps; logging; the version. The lowest layer: it calls no other file of the engine. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>
#include <zlib.h>
#ifdef TERN_HAVE_BROTLI
#  include <brotli/decode.h>
#endif
#ifdef TERN_HAVE_ZSTD
#  include <zstd.h>
#endif

#define TERN_STR_(x)  #x
#define TERN_XSTR_(x) TERN_STR_(x)

unsigned tern_version(void) { return TERN_VERSION_HEX; }

const char *tern_version_string(void) {
  return TERN_XSTR_(TERN_VERSION_MAJOR) "." TERN_XSTR_(TERN_VERSION_MINOR) "." TERN_XSTR_(
      TERN_VERSION_PATCH);
}

/* "libtern/V libuv/V OpenSSL/V zlib/V nghttp2/V [brotli/V] [zstd/V]", made once: the versions
 * of the libraries in use at run time, which may differ from the headers built against. */
static char version_info[256];
static uv_once_t version_info_once = UV_ONCE_INIT;

static void version_info_make(void) {
  char openssl[64] = "unknown";
  /* "OpenSSL 3.0.15 19 Sep 2024": the second word. */
  const char *full = OpenSSL_version(OPENSSL_VERSION);
  const char *space = full ? strchr(full, ' ') : NULL;
  if (space) {
    size_t n = strcspn(space + 1, " ");
    if (n >= sizeof openssl) n = sizeof openssl - 1;
    memcpy(openssl, space + 1, n);
    openssl[n] = '\0';
  }
  const nghttp2_info *h2 = nghttp2_version(0);
  int len = snprintf(version_info, sizeof version_info,
                     "libtern/%s libuv/%s OpenSSL/%s zlib/%s nghttp2/%s", tern_version_string(),
                     uv_version_string(), openssl, zlibVersion(), h2 ? h2->version_str : "unknown");
#ifdef TERN_HAVE_BROTLI
  uint32_t br = BrotliDecoderVersion();
  if (len > 0 && (size_t)len < sizeof version_info)
    len += snprintf(version_info + len, sizeof version_info - (size_t)len, " brotli/%u.%u.%u",
                    (unsigned)(br >> 24), (unsigned)((br >> 12) & 0xfff), (unsigned)(br & 0xfff));
#endif
#ifdef TERN_HAVE_ZSTD
  if (len > 0 && (size_t)len < sizeof version_info)
    snprintf(version_info + len, sizeof version_info - (size_t)len, " zstd/%s",
             ZSTD_versionString());
#endif
  (void)len;
}

const char *tern_version_info(void) {
  uv_once(&version_info_once, version_info_make);
  return version_info;
}

const char *tern_strerror(int err) {
  switch (err) {
    case 0: return "success";
#define XX(name, value, desc)                                                                      \
  case value: return desc;
      TERN_ERRNO_MAP(XX)
#undef XX
    default: return "unknown error";
  }
}

const char *tern_err_name(int err) {
  switch (err) {
    case 0: return "OK";
#define XX(name, value, desc)                                                                      \
  case value: return #name;
      TERN_ERRNO_MAP(XX)
#undef XX
    default: return "EUNKNOWN";
  }
}

int tern_error_is_timeout(int err) {
  return err == TERN_ECONNECTTIMEOUT || err == TERN_EHEADERTIMEOUT || err == TERN_EBODYTIMEOUT ||
         err == TERN_ETOTALTIMEOUT;
}

int tern_error_is_tls_verify(int err) {
  return err == TERN_ETLSCERTEXPIRED || err == TERN_ETLSCERTNOTYETVALID ||
         err == TERN_ETLSHOSTNAME || err == TERN_ETLSUNKNOWNCA || err == TERN_ETLSVERIFY;
}

int tern__map_uv_error(int uverr, int fallback) {
  switch (uverr) {
    case UV_ECONNREFUSED: return TERN_ECONNREFUSED;
    case UV_ECONNRESET:
    case UV_EPIPE: return TERN_ECONNRESET;
    case UV_ENOMEM: return TERN_ENOMEM;
    case UV_ECANCELED: return TERN_ECANCELED;
    case UV_EAI_NONAME:
    case UV_EAI_AGAIN:
    case UV_EAI_FAIL:
    case UV_EAI_NODATA:
    case UV_EAI_FAMILY:
    case UV_EAI_SERVICE:
    case UV_EAI_ADDRFAMILY: return TERN_ERESOLVE;
    case UV_ENETUNREACH:
    case UV_EHOSTUNREACH:
    case UV_EADDRNOTAVAIL:
    case UV_ETIMEDOUT: return TERN_ECONNECT;
    default: return fallback;
  }
}

/* ---- a request's error and timestamps ---- */

void tern__request_mark(tern_request_t *req, tern_time which) {
  req->times_ns[which] = (int64_t)(uv_hrtime() - req->start_ns);
}

void tern__request_set_error(tern_request_t *req, int err, const char *fmt, ...) {
  if (req->error) return; /* the first failure is the one that explains */
  req->error = err;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(req->errmsg, sizeof req->errmsg, fmt, ap);
  va_end(ap);
}

/* ---- logging ---- */

void tern__log_line(const tern_engine_t *eng, tern_log_level level, tern_request_t *req,
                    const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  eng->config.log_cb(level, line, req, eng->config.log_data);
}
