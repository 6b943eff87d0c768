/* What came back: the response head as one block (tern__request_set_response), the public
 * getters of a request's outcome (status, headers, body, timings, TLS facts, counters). */
#include "internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the response head ---- */

/* A field name's bit in resp.names, from its length and first letter (any case): the names one
 * response carries mostly land on bits of their own, and a shared bit only costs the scan the
 * filter would have saved. Cheap on purpose: it is computed for every field of every response.
 * `len` is at least 1. */
static uint64_t field_bit(const char *name, size_t len) {
  return UINT64_C(1) << ((((unsigned char)name[0] & 31u) - (unsigned)len * 4u) & 63u);
}

int tern__request_set_response(tern_request_t *req, int minor, int status, const char *reason,
                               size_t reason_len, const tern__header_t *h, size_t n) {
  free(req->resp.block);
  req->resp.block = NULL;
  req->resp.reason = NULL;
  req->resp.count = 0;
  req->resp.names = 0;
  req->resp.status = status;
  req->resp.minor = minor;
  req->resp.version = minor == 1 ? 11 : 10;

  /* One block: 2n pointers, then "name\0value\0" for each field. */
  size_t strings = 0;
  for (size_t i = 0; i < n; i++) strings += h[i].name_len + h[i].value_len + 2;
  size_t ptrs = 2 * n * sizeof(char *);
  char *block = tern__malloc(ptrs + strings + reason_len + 1);
  if (block == NULL) return TERN_ENOMEM;
  char **pairs = (char **)(void *)block;
  char *s = block + ptrs;
  uint64_t names = 0;
  for (size_t i = 0; i < n; i++) {
    if (h[i].name_len > 0) names |= field_bit(h[i].name, h[i].name_len);
    pairs[2 * i] = s;
    memcpy(s, h[i].name, h[i].name_len);
    s += h[i].name_len;
    *s++ = '\0';
    pairs[2 * i + 1] = s;
    memcpy(s, h[i].value, h[i].value_len);
    s += h[i].value_len;
    *s++ = '\0';
  }
  memcpy(s, reason, reason_len);
  s[reason_len] = '\0';
  req->resp.reason = s;
  req->resp.block = block;
  req->resp.count = n;
  req->resp.names = names;
  return 0;
}

/* The value of the first field named `name` (any case), or NULL. Every response looks up a
 * few names, most of them absent: resp.names answers those without a scan. Otherwise a field's
 * name length is where its value begins (the block's layout), so only names of the same length
 * are compared. */
const char *tern__request_header_value(const tern_request_t *req, const char *name) {
  char **pairs = (char **)(void *)req->resp.block;
  size_t n = strlen(name);
  if (n > 0 && !(req->resp.names & field_bit(name, n))) return NULL;
  for (size_t i = 0; i < req->resp.count; i++)
    if ((size_t)(pairs[2 * i + 1] - pairs[2 * i]) == n + 1 && strcasecmp(pairs[2 * i], name) == 0)
      return pairs[2 * i + 1];
  return NULL;
}

/* ---- getters ---- */

int tern_request_get_status(const tern_request_t *req) { return req ? req->resp.status : 0; }
const char *tern_request_get_reason(const tern_request_t *req) {
  return req && req->resp.reason ? req->resp.reason : "";
}
int tern_request_get_http_minor(const tern_request_t *req) { return req ? req->resp.minor : -1; }
int tern_request_get_http_version(const tern_request_t *req) { return req ? req->resp.version : 0; }
int tern_request_get_error(const tern_request_t *req) { return req ? req->error : TERN_EINVAL; }
const char *tern_request_get_error_message(const tern_request_t *req) {
  return req ? req->errmsg : "";
}
size_t tern_request_get_header_count(const tern_request_t *req) {
  return req ? req->resp.count : 0;
}

int tern_request_get_header_at(const tern_request_t *req, size_t i, const char **name,
                               const char **value) {
  if (req == NULL || i >= req->resp.count) return TERN_EINVAL;
  char **pairs = (char **)(void *)req->resp.block;
  if (name) *name = pairs[2 * i];
  if (value) *value = pairs[2 * i + 1];
  return 0;
}

const char *tern_request_get_header_block(const tern_request_t *req, size_t *len) {
  if (len) *len = 0;
  if (req == NULL || req->resp.count == 0) return NULL;
  /* The strings follow the pointer table; the reason follows the last value. */
  const char *first = ((char **)(void *)req->resp.block)[0];
  if (len) *len = (size_t)(req->resp.reason - first);
  return first;
}

const char *tern_request_get_header(const tern_request_t *req, const char *name) {
  if (req == NULL || name == NULL) return NULL;
  return tern__request_header_value(req, name);
}

const void *tern_request_get_body(const tern_request_t *req, size_t *len) {
  if (len) *len = req ? req->resp.body.len : 0;
  return req && req->resp.body.len ? req->resp.body.data : NULL;
}

void *tern_request_take_body(tern_request_t *req, size_t *len) {
  if (len) *len = 0;
  if (req == NULL || req->resp.body.len == 0) return NULL;
  void *data = req->resp.body.data;
  if (len) *len = req->resp.body.len;
  req->resp.body = (tern__str){ 0 };
  return data;
}

const char *tern_request_get_interim_heads(const tern_request_t *req, size_t *len) {
  if (len) *len = req ? req->resp.interim.len : 0;
  return req && req->resp.interim.len ? req->resp.interim.data : NULL;
}

uint64_t tern_request_get_bytes_received(const tern_request_t *req) {
  return req ? req->resp.received : 0;
}
int64_t tern_request_get_content_length(const tern_request_t *req) {
  return req ? req->resp.content_length : -1;
}
uint64_t tern_request_get_offset(const tern_request_t *req) { return req ? req->resp.offset : 0; }
/* What went as HTTP/2 fields, shown as curl shows it: "GET /path HTTP/2", the fields that went,
 * names in lower case as on the wire (Host for :authority). Made from the HTTP/1.1 head. */
static int h2_head_text(const tern_request_t *req, tern__str *out) {
  const char *p = req->head, *end = req->head + req->head_len;
  const char *eol = memchr(p, '\n', req->head_len);
  const char *sp = eol ? memchr(p, ' ', (size_t)(eol - p)) : NULL;
  const char *sp2 = sp ? memchr(sp + 1, ' ', (size_t)(eol - sp - 1)) : NULL;
  if (sp2 == NULL) return TERN_EINVAL;
  if (tern__str_appendf(out, "%.*s HTTP/2\r\n", (int)(sp2 - p), p)) return TERN_ENOMEM;
  for (const char *line = eol + 1; line < end;) {
    const char *nl = memchr(line, '\n', (size_t)(end - line));
    if (nl == NULL) break;
    const char *colon = memchr(line, ':', (size_t)(nl - line));
    if (colon) {
      const char *val = colon + 1, *vend = nl > line && nl[-1] == '\r' ? nl - 1 : nl;
      while (val < vend && (*val == ' ' || *val == '\t')) val++;
      size_t n = (size_t)(colon - line);
      bool host = tern__name_is(line, n, "host");
      if (host || !tern__h2_field_left_out(line, n, val, (size_t)(vend - val))) {
        size_t at = out->len;
        if (tern__str_append(out, line, (size_t)(nl + 1 - line))) return TERN_ENOMEM;
        for (size_t i = host ? n : 0; i < n; i++)
          if (out->data[at + i] >= 'A' && out->data[at + i] <= 'Z') out->data[at + i] += 'a' - 'A';
      }
    }
    line = nl + 1;
  }
  if (tern__str_append(out, "\r\n", 3)) return TERN_ENOMEM; /* NUL-terminated, as the other */
  out->len--;
  return 0;
}

const char *tern_request_get_request_head(const tern_request_t *req, size_t *len) {
  if (len) *len = 0;
  if (req == NULL || req->head == NULL) return NULL;
  if (req->resp.version == 20 || req->h2.stream_id) {
    /* Built on the first call (after completion or in a callback: one thread at a time). */
    tern__str *text = (tern__str *)&req->h2.head_text;
    if (text->len == 0 && h2_head_text(req, text) != 0) text->len = 0;
    if (text->len > 0) {
      if (len) *len = text->len;
      return text->data;
    }
  }
  if (len) *len = req->head_len;
  return req->head;
}

int tern_request_is_reused(const tern_request_t *req) { return req ? req->reused : 0; }
int tern_request_is_done(const tern_request_t *req) {
  return req ? atomic_load(&req->state) == TERN__REQ_DONE : 0;
}

double tern_request_get_time(const tern_request_t *req, tern_time which) {
  if (req == NULL || (unsigned)which > TERN_TIME_END || req->times_ns[which] < 0) return -1;
  return (double)req->times_ns[which] / 1e9;
}

/* ---- the exchange as it went ---- */

int tern_request_is_body_skipped(const tern_request_t *req) {
  return req ? req->send == TERN__SEND_SKIPPED : 0;
}

const char *tern_request_get_effective_url(const tern_request_t *req) {
  if (req == NULL) return NULL;
  return req->effective_url ? req->effective_url : req->url_str;
}

unsigned tern_request_get_redirect_count(const tern_request_t *req) {
  return req ? req->hop.redirect_count : 0;
}

uint64_t tern_request_get_bytes_delivered(const tern_request_t *req) {
  return req ? req->sink.delivered : 0;
}

const char *tern_request_get_decoded_encoding(const tern_request_t *req) {
  return req ? req->sink.decoded_encoding : NULL;
}

const char *tern_request_get_tls_version(const tern_request_t *req) {
  return req ? req->tls.version : NULL;
}
int tern_request_is_tls_resumed(const tern_request_t *req) { return req ? req->tls.resumed : 0; }
int tern_request_was_client_cert_requested(const tern_request_t *req) {
  return req ? req->tls.cert_requested : 0;
}

void *tern_request_get_user_data(const tern_request_t *req) { return req ? req->user_data : NULL; }

int tern_request_is_final_hop(const tern_request_t *req) {
  return req && req->resp.status != 0 && req->hop.next == TERN__HOP_NONE;
}

int tern_request_get_connect_status(const tern_request_t *req) {
  return req ? req->proxy.connect_status : 0;
}
