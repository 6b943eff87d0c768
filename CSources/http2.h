/* http2.h — what http2.c and http2_stream.c share: the session of an HTTP/2 connection and the
 * stream-level pieces (request fields, body source, response head). Never installed. */
#ifndef TERN_HTTP2_H
#define TERN_HTTP2_H

#include "internal.h"

#include <nghttp2/nghttp2.h>

/* Our side of the flow control: a stream may be sent this much before its sink has taken it
 * (it bounds what a paused stream is handed), the connection this much across streams. */
#define TERN__H2_STREAM_WINDOW (1u << 20)
#define TERN__H2_CONN_WINDOW   (16u << 20)
/* How often one request's stream may be refused (REFUSED_STREAM, GOAWAY) and go again. */
#define TERN__H2_MAX_REFUSALS  4
/* Streams started on one connection at most, whatever the server allows. */
#define TERN__H2_MAX_STREAMS   1000u

struct tern__h2 {
  nghttp2_session *ngh;
  size_t out_len;      /* frames staged in buf[rcap, cap) for the next write */
  bool in_ngh;         /* inside an nghttp2 call: nothing is sent, closed or completed */
  tern__list finished; /* requests whose stream ended, settled once nghttp2 returns */
  unsigned nstreams;   /* streams open (a canceled one stays until its reset is sent) */
  int fatal;           /* a connection error met inside a callback (TERN_E*), else 0 */
  bool goaway;         /* the server sent GOAWAY: no new stream */
  bool settling;       /* settle is running: a nested call leaves the work to it */
  uint64_t timer_at;   /* uv_now when the streams' timer fires (TERN__TIMER_STREAMS) */
};

/* The request's head as HTTP/2 fields: the pseudo-fields from its HTTP/1.1 head (built by
 * request_head.c), then its fields in lower case without the connection-specific ones
 * (RFC 9113 8.2.2). *nva is one allocation for the caller to free. Returns 0 or a TERN_E*. */
int tern__h2_request_fields(const tern_request_t *req, bool tls, nghttp2_nv **nva, size_t *n);
/* The data source's read callback for request bodies of every kind. */
ssize_t tern__h2_read_body(nghttp2_session *ngh, int32_t stream_id, uint8_t *buf, size_t length,
                           uint32_t *flags, nghttp2_data_source *src, void *user);
/* One field of a response head. Returns 0, or TERN_EHEADERSIZE (set on req) past the limits. */
int tern__h2_field(tern__conn *c, tern_request_t *req, const uint8_t *name, size_t nl,
                   const uint8_t *value, size_t vl);
/* A whole head arrived on the stream: an interim one is kept (0), a final one recorded and
 * handed to the exchange (0), trailers ignored. Returns 0 or a TERN_E* code (set on req). */
int tern__h2_head(tern__conn *c, tern_request_t *req);

#endif
