/* One HTTP/2 stream's pieces: the request head turned into HTTP/2 fields, the request body
 * read into DATA frames from any source, and the response head collected field by field.
 * The session and its connection are http2.c's. */
#include "http2.h"

#include <stdio.h>

static nghttp2_nv nv(const char *name, size_t nl, const char *value, size_t vl) {
  return (nghttp2_nv){ (uint8_t *)name, (uint8_t *)value, nl, vl, NGHTTP2_NV_FLAG_NONE };
}

int tern__h2_request_fields(const tern_request_t *req, bool tls, nghttp2_nv **nva, size_t *n) {
  const char *head = req->head, *end = head + req->head_len;
  size_t lines = 0;
  for (const char *p = head; p < end; p++) lines += *p == '\n';
  /* One block: the fields, then a copy of the head whose names are lowered in place. */
  nghttp2_nv *v = tern__malloc((lines + 4) * sizeof *v + req->head_len);
  if (v == NULL) return TERN_ENOMEM;
  char *copy = (char *)(v + lines + 4);
  memcpy(copy, head, req->head_len);
  end = copy + req->head_len;
  /* "METHOD SP target SP HTTP/1.1 CRLF" */
  char *sp1 = memchr(copy, ' ', req->head_len);
  char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1)) : NULL;
  char *eol = sp2 ? memchr(sp2, '\n', (size_t)(end - sp2)) : NULL;
  if (eol == NULL) {
    free(v);
    return TERN_EINVAL;
  }
  size_t k = 0;
  v[k++] = nv(":method", 7, copy, (size_t)(sp1 - copy));
  v[k++] = nv(":scheme", 7, tls ? "https" : "http", tls ? 5 : 4);
  v[k++] = nv(":authority", 10, req->url.hostport, strlen(req->url.hostport));
  v[k++] = nv(":path", 5, sp1 + 1, (size_t)(sp2 - sp1 - 1));
  for (char *line = eol + 1; line < end;) {
    char *nl = memchr(line, '\n', (size_t)(end - line));
    if (nl == NULL) break;
    char *colon = memchr(line, ':', (size_t)(nl - line));
    if (colon) {
      char *val = colon + 1, *vend = nl > line && nl[-1] == '\r' ? nl - 1 : nl;
      while (val < vend && (*val == ' ' || *val == '\t')) val++;
      size_t name_len = (size_t)(colon - line), vlen = (size_t)(vend - val);
      for (char *q = line; q < colon; q++)
        if (*q >= 'A' && *q <= 'Z') *q = (char)(*q - 'A' + 'a');
      if (name_len == 4 && memcmp(line, "host", 4) == 0)
        v[2] = nv(":authority", 10, val, vlen); /* the caller's own Host */
      else if (!tern__h2_field_left_out(line, name_len, val, vlen))
        v[k++] = nv(line, name_len, val, vlen);
    }
    line = nl + 1;
  }
  *nva = v;
  *n = k;
  return 0;
}

static int64_t pull_plain(void *req, char *scratch, size_t cap, const char **ptr) {
  return tern__request_pull_plain(req, scratch, cap, ptr);
}

ssize_t tern__h2_read_body(nghttp2_session *ngh, int32_t stream_id, uint8_t *buf, size_t length,
                           uint32_t *flags, nghttp2_data_source *src, void *user) {
  (void)src;
  (void)user;
  tern_request_t *req = nghttp2_session_get_stream_user_data(ngh, stream_id);
  if (req == NULL) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* canceled meanwhile */
  int64_t n;
  bool end;
  if (req->upload.gzip) {
    if (req->upload.encoder == NULL && (req->upload.encoder = tern__encoder_new()) == NULL) {
      tern__request_set_error(req, TERN_ENOMEM, "out of memory");
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    n = tern__encoder_fill(req->upload.encoder, pull_plain, req, (char *)buf, length);
    if (n == TERN_EIO)
      tern__request_set_error(req, TERN_EIO, "compressing the body for %s failed",
                              req->url.hostport);
    end = n == 0 || (n > 0 && tern__encoder_done(req->upload.encoder));
  } else if (req->upload.kind == TERN__BODY_MEM) {
    uint64_t left = req->upload.len - req->upload.sent;
    n = (int64_t)(left < length ? left : length);
    memcpy(buf, (const char *)req->upload.mem + req->upload.sent, (size_t)n);
    req->upload.sent += (uint64_t)n;
    end = req->upload.sent >= req->upload.len;
  } else {
    n = tern__request_read_plain(req, (char *)buf, length);
    if (n > 0) req->upload.sent += (uint64_t)n;
    end = n == 0 || (req->upload.len != UINT64_MAX && req->upload.sent >= req->upload.len);
  }
  if (n == TERN__PULL_WAIT) {
    req->upload.waiting = true; /* tern_request_resume_send resumes the stream's data */
    return NGHTTP2_ERR_DEFERRED;
  }
  if (n < 0) {
    tern__request_set_error(req, (int)n, "reading the body for %s: %s", req->url.hostport,
                            tern_strerror((int)n));
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset; the request fails */
  }
  if (end) *flags |= NGHTTP2_DATA_FLAG_EOF;
  if (tern__request_progress_upload(req) != 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  return (ssize_t)n;
}

int tern__h2_field(tern__conn *c, tern_request_t *req, const uint8_t *name, size_t nl,
                   const uint8_t *value, size_t vl) {
  if (nl == 7 && memcmp(name, ":status", 7) == 0) {
    int st = 0;
    for (size_t i = 0; i < vl && i < 4; i++)
      st = value[i] >= '0' && value[i] <= '9' ? st * 10 + (value[i] - '0') : -1000;
    req->h2.status = vl == 3 && st >= 100 ? st : 0;
    return 0;
  }
  /* nghttp2 refuses NUL, CR and LF in fields already; the head's block relies on no NUL. */
  if (memchr(name, '\0', nl) || memchr(value, '\0', vl)) {
    tern__request_set_error(req, TERN_EPROTO, "%s: NUL in a response field", req->url.hostport);
    return TERN_EPROTO;
  }
  size_t limit = c->engine->config.max_header_size;
  if (req->h2.fields.len + nl + vl + 4 > limit || req->h2.nfields >= TERN__MAX_HEADERS) {
    tern__request_set_error(req, TERN_EHEADERSIZE, "%s: response head exceeds %s",
                            req->url.hostport,
                            req->h2.nfields >= TERN__MAX_HEADERS ? "256 fields" : "its size limit");
    return TERN_EHEADERSIZE;
  }
  tern__str *f = &req->h2.fields;
  if (tern__str_reserve(f, nl + vl + 2)) return TERN_ENOMEM;
  memcpy(f->data + f->len, name, nl);
  f->data[f->len + nl] = '\0';
  memcpy(f->data + f->len + nl + 1, value, vl);
  f->data[f->len + nl + 1 + vl] = '\0';
  f->len += nl + vl + 2;
  req->h2.nfields++;
  return 0;
}

/* The fields received so far as header pointers into req->h2.fields. */
static tern__header_t *fields_of(tern_request_t *req) {
  tern__header_t *h = tern__malloc((req->h2.nfields ? req->h2.nfields : 1) * sizeof *h);
  if (h == NULL) return NULL;
  const char *p = req->h2.fields.data;
  for (size_t i = 0; i < req->h2.nfields; i++) {
    h[i].name = p;
    h[i].name_len = strlen(p);
    p += h[i].name_len + 1;
    h[i].value = p;
    h[i].value_len = strlen(p);
    p += h[i].value_len + 1;
  }
  return h;
}

/* An interim head (100, 103) is kept as HTTP/1.1 would show it: "HTTP/2 103" and its fields. */
static int keep_interim(tern_request_t *req) {
  tern__str *out = &req->resp.interim;
  size_t need = 16 + req->h2.fields.len + 4 * req->h2.nfields;
  if (out->len + need > TERN__MAX_INTERIM) {
    tern__request_set_error(req, TERN_EHEADERSIZE, "%s: interim (1xx) responses exceed %u bytes",
                            req->url.hostport, TERN__MAX_INTERIM);
    return TERN_EHEADERSIZE;
  }
  if (tern__str_appendf(out, "HTTP/2 %d\r\n", req->h2.status)) return TERN_ENOMEM;
  const char *p = req->h2.fields.data;
  for (size_t i = 0; i < req->h2.nfields; i++) {
    size_t nl = strlen(p);
    if (tern__str_appendf(out, "%s: %s\r\n", p, p + nl + 1)) return TERN_ENOMEM;
    p += nl + 1 + strlen(p + nl + 1) + 1;
  }
  return tern__str_append(out, "\r\n", 2) ? TERN_ENOMEM : 0;
}

int tern__h2_head(tern__conn *c, tern_request_t *req) {
  int r = 0;
  int status = req->h2.status;
  if (req->h2.head) {
    /* trailers: nothing of them is kept */
  } else if (status == 0 || status == 101) {
    tern__request_set_error(req, TERN_EPROTO, "%s: %s", req->url.hostport,
                            status ? "101 Switching Protocols on HTTP/2" : "head without :status");
    r = TERN_EPROTO;
  } else if (status < 200) {
    r = keep_interim(req);
  } else {
    tern__header_t *h = fields_of(req);
    if (h == NULL) return TERN_ENOMEM;
    r = tern__request_set_response(req, 0, status, "", 0, h, req->h2.nfields);
    for (size_t i = 0; r == 0 && i < req->h2.nfields; i++) {
      uint64_t v;
      if (h[i].name_len == 14 && memcmp(h[i].name, "content-length", 14) == 0 &&
          tern__parse_content_length(h[i].value, h[i].value_len, &v) == 0)
        req->resp.content_length = (int64_t)v;
    }
    free(h);
    req->resp.version = 20;
    req->h2.head = true;
    if (r == 0) r = tern__exchange_head(c, req);
    if (r == 0) r = tern__request_progress_download(req, false);
  }
  tern__str_free(&req->h2.fields); /* heads are rare; the memory goes back at once */
  req->h2.nfields = 0;
  req->h2.status = 0;
  return r;
}
