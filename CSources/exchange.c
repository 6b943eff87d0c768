/* What every protocol does once a final response head is recorded, before the body: the
 * times, the TLS facts of the connection, the hop decision, the response callback and the
 * sink. HTTP/1.1 (http1_read.c) and HTTP/2 (http2.c) frame the bytes; this is the rest. */
#include "internal.h"

int tern__exchange_head(tern__conn *c, tern_request_t *req) {
  tern__request_mark(req, TERN_TIME_HEADERS);
  req->recv_start_ms = uv_now(c->engine->loop);
  if (c->ssl) tern__tls_note(c, req);
  int v = req->resp.version;
  const char *reason = req->resp.reason ? req->resp.reason : ""; /* HTTP/2 has none */
  tern__log(c->engine, TERN_LOG_INFO, req, "HTTP/%s %d%s%s from %s after %.3f s",
            v == 20   ? "2"
            : v == 11 ? "1.1"
                      : "1.0",
            req->resp.status, reason[0] ? " " : "", reason, req->url.hostport,
            tern_request_get_time(req, TERN_TIME_HEADERS));
  /* The hop is decided first, so the callback can tell (tern_request_is_final_hop). */
  int r = tern__request_decide_hop(req);
  if (r) return r;
  /* A final head that came with its whole body completes within this read: with
   * whole_at_completion its callbacks are left to the complete callback. */
  req->hop.reported_whole =
      req->hop.whole_at_completion && req->hop.whole_now && req->hop.next == TERN__HOP_NONE;
  req->hop.whole_now = false;
  if (req->hop.response_cb && !req->hop.reported_whole && !atomic_load(&req->released) &&
      req->hop.response_cb(req, req->resp.status, req->hop.response_data) != 0) {
    tern__request_set_error(req, TERN_ECANCELED, "canceled by the response callback");
    return TERN_ECANCELED;
  }
  return tern__request_setup_sink(req);
}
