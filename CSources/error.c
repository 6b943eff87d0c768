/* Errors: names and messages, libuv codes mapped to TERN_E*, the request's first failure and
 * its timestamps; logging; the version. The lowest layer: it calls no other file of the engine. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TERN_STR_(x)  #x
#define TERN_XSTR_(x) TERN_STR_(x)

unsigned tern_version(void) { return TERN_VERSION_HEX; }

const char *tern_version_string(void) {
  return TERN_XSTR_(TERN_VERSION_MAJOR) "." TERN_XSTR_(TERN_VERSION_MINOR) "." TERN_XSTR_(
      TERN_VERSION_PATCH);
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
