/*
 * internal.h — declarations shared by the engine's C files (tern__ prefix). Never installed.
 *
 * Threading: everything here runs on the engine's loop thread, except what is marked
 * "any thread" (the submit and cancel queues, reference counts and statistics).
 */
#ifndef TERN_INTERNAL_H
#define TERN_INTERNAL_H

#include "tern.h"
#include "http1_parse.h"

#include <stdatomic.h>

struct ssl_st;
struct bio_st;
struct ssl_session_st;
typedef struct tern__tls_ctx tern__tls_ctx;
#include <stdbool.h>
#include <uv.h>

/* ---- allocation ------------------------------------------------------------------------------
 * Every allocation of the engine goes through these, so that the allocation-failure torture run
 * (a build with -DTERN_TORTURE, scripts/test.sh) can make the N-th one fail. Such a build leaves
 * tern__alloc_should_fail to the test harness; a normal build compiles these to the libc calls. */
#include <stdlib.h>
#include <string.h>
#ifdef TERN_TORTURE
bool tern__alloc_should_fail(void);
#  define TERN__ALLOC_FAILS() tern__alloc_should_fail()
#else
#  define TERN__ALLOC_FAILS() false
#endif
static inline void *tern__malloc(size_t n) { return TERN__ALLOC_FAILS() ? NULL : malloc(n); }
static inline void *tern__calloc(size_t k, size_t n) {
  return TERN__ALLOC_FAILS() ? NULL : calloc(k, n);
}
static inline void *tern__realloc(void *p, size_t n) {
  return TERN__ALLOC_FAILS() ? NULL : realloc(p, n);
}
static inline char *tern__strdup(const char *s) { return TERN__ALLOC_FAILS() ? NULL : strdup(s); }

/* ---- intrusive doubly linked list (circular, with a sentinel head) ----------------------- */

typedef struct tern__list {
  struct tern__list *next, *prev;
} tern__list;

static inline void tern__list_init(tern__list *h) { h->next = h->prev = h; }
static inline bool tern__list_empty(const tern__list *h) { return h->next == h; }
static inline void tern__list_insert_tail(tern__list *h, tern__list *n) {
  n->prev = h->prev;
  n->next = h;
  h->prev->next = n;
  h->prev = n;
}
static inline void tern__list_insert_head(tern__list *h, tern__list *n) {
  n->next = h->next;
  n->prev = h;
  h->next->prev = n;
  h->next = n;
}
static inline void tern__list_remove(tern__list *n) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->next = n->prev = n;
}
/* Moves every node of `src` to the tail of `dst`, in order; `src` ends empty. */
static inline void tern__list_splice_tail(tern__list *dst, tern__list *src) {
  if (tern__list_empty(src)) return;
  src->next->prev = dst->prev;
  dst->prev->next = src->next;
  src->prev->next = dst;
  dst->prev = src->prev;
  tern__list_init(src);
}
#define tern__container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- growable byte string (str.c) ------------------------------------------------------------ */

typedef struct {
  char *data;
  size_t len, cap;
} tern__str;

/* The slow half of tern__str_reserve, for when `extra` more does not fit: grows the buffer
 * (doubling from 64). */
int tern__str_grow(tern__str *s, size_t extra);
/* The common path of a function that runs for every request should span few cache lines: at
 * one connection a client's code is mostly evicted while it waits for the server, and each line
 * its turnaround touches is fetched again (bench/turnaround/footprint). TERN__UNLIKELY marks the
 * branches to rare work, so the compilers lay it out past the common path; TERN__COLD puts rare
 * work (errors, uncommon features) in functions of its own, out of the way. */
#define TERN__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TERN__COLD        __attribute__((noinline, cold))

/* Inline, as is tern__str_append, and always (clang left them out of line in the request head's
 * long function): every head is some fifteen appends of a few bytes each, where the call cost
 * more than the copy (callgrind, bench/HISTORY-swift-path.md). */
#define TERN__HOT_INLINE static inline __attribute__((always_inline))
/* Growing is the exception (a head reserves its room first), so its call is laid out past the
 * copies: inlined some fifteen times in a head, it was a skipped block between each two. */
TERN__HOT_INLINE int tern__str_reserve(tern__str *s, size_t extra) {
  return TERN__UNLIKELY(extra > s->cap - s->len) ? tern__str_grow(s, extra) : 0;
}
TERN__HOT_INLINE int tern__str_append(tern__str *s, const void *p, size_t n) {
  if (n == 0) return 0;
  if (TERN__UNLIKELY(n > s->cap - s->len)) {
    int r = tern__str_grow(s, n);
    if (r) return r;
  }
  memcpy(s->data + s->len, p, n);
  s->len += n;
  return 0;
}
int tern__str_appendf(tern__str *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends n bytes as base64 (with padding). */
int tern__str_append_base64(tern__str *s, const void *data, size_t n);
/* Decodes base64 (padding optional, nothing else allowed) into out (cap bytes). Returns the
 * length, or -1 when malformed or too long. */
long tern__base64_decode(const char *s, size_t n, unsigned char *out, size_t cap);
void tern__str_free(tern__str *s);

/* ---- content codings (gzip.c): no request in sight, only bytes, limits and functions ---- */

typedef struct tern__decoder tern__decoder;
/* Where decoded bytes go. Returns 0 or a TERN_E* code (which stops decoding). */
typedef int (*tern__sink_fn)(void *ctx, const char *data, size_t n);
#define TERN__CODING_IDENTITY (-1) /* no Content-Encoding, or only "identity" */
#define TERN__CODING_UNKNOWN  (-2) /* one this build cannot decode, or several stacked */
/* The decoder kind (>= 0) for a Content-Encoding value, or one of the two above. */
int tern__decoder_kind(const char *coding, size_t len);
/* "gzip", "deflate", "br", "zstd" for a kind. */
const char *tern__decoder_name(int kind);
/* The Accept-Encoding value naming every coding this build decodes. */
const char *tern__accept_encoding(void);
tern__decoder *tern__decoder_new(int kind);
/* Bounds the output: at most max_bytes (0: no bound), and at most max_ratio times the input
 * (0: no bound) once past a grace amount, smaller when the output is kept in memory. */
void tern__decoder_set_limits(tern__decoder *d, uint64_t max_bytes, unsigned max_ratio,
                              bool in_memory);
/* Decodes and passes the output to `sink`. Returns 0 or a TERN_E* code. */
int tern__decoder_write(tern__decoder *d, const char *data, size_t n, tern__sink_fn sink,
                        void *ctx);
/* The body ended: it must have ended the compressed stream too. Returns 0 or TERN_EDECODE. */
int tern__decoder_end(tern__decoder *d);
/* Why the last call failed, or NULL when the sink's own error stopped it. */
const char *tern__decoder_message(const tern__decoder *d);
void tern__decoder_free(tern__decoder *d);

/* Request body compression: fills out[0, cap) with gzip bytes, pulling plaintext from `pull`
 * (which points *ptr at the next piece, in its memory or in `scratch`, and returns its length,
 * 0 at the end, or a TERN_E* code). Returns bytes produced, 0 once the stream has ended, or a
 * TERN_E* code. */
typedef int64_t (*tern__pull_fn)(void *ctx, char *scratch, size_t cap, const char **ptr);
/* What a pull function returns when its source has no bytes yet but has not ended. */
#define TERN__PULL_WAIT (-10000)
typedef struct tern__encoder tern__encoder;
tern__encoder *tern__encoder_new(void);
int64_t tern__encoder_fill(tern__encoder *e, tern__pull_fn pull, void *ctx, char *out, size_t cap);
bool tern__encoder_done(const tern__encoder *e);
void tern__encoder_free(tern__encoder *e);

/* ---- bandwidth budgets (bandwidth.c): token buckets, no request in sight -------------------- */

enum { TERN__RECV = 0, TERN__SEND = 1 };
#define TERN__METER_SLOTS 10 /* of 100 ms: the meter's second */

/* One direction of a budget. `rate` may be read without the lock (the read and write sizes),
 * and the meter's slots are atomic: a bucket with no rate (every engine's, unless it has a
 * budget) counts its bytes without the lock. The budget's state is under the lock. */
typedef struct {
  uv_mutex_t lock;
  _Atomic uint64_t rate; /* bytes per second; 0: no budget (the meter still counts) */
  double balance;        /* bytes that may go now; negative: the debt being paid */
  double credits;        /* every byte the rate earned: waiters' marks are counted on it */
  uint64_t stamp_ns;     /* uv_hrtime of the last refill */
  _Atomic uint64_t slot_bytes[TERN__METER_SLOTS], slot_epoch[TERN__METER_SLOTS];
} tern__bucket;

/* An engine's budget, a group's (tern_bandwidth_new), or one request's sending budget. */
struct tern_bandwidth {
  atomic_int refs; /* the creator's (engine, caller, request), each request's, each debt's */
  tern__bucket dir[2];
};

/* Counts n bytes through the bucket and debits them. Returns -1 when nothing is owed, else
 * the mark: the debtor waits until tern__bucket_wait_ns(b, mark) is 0. Any thread. */
double tern__bucket_debit(tern__bucket *b, size_t n);
/* Nanoseconds until the debt up to `mark` is paid at the current rate; 0 when paid or when the
 * budget was lifted. Any thread. */
uint64_t tern__bucket_wait_ns(tern__bucket *b, double mark);
/* The most bytes one read or write should move under this bucket (SIZE_MAX: no budget), so no
 * single piece overdraws it by much more than half its burst. */
size_t tern__bucket_piece(tern__bucket *b);
/* The same for a rate of `rate` bytes per second (0: SIZE_MAX), a twentieth of a second's worth:
 * also the read size under a request's own receive cap (tern_request_set_max_recv_speed). */
size_t tern__rate_piece(uint64_t rate);
/* What a connection owes the budgets its last read or write went through: a reference to the
 * budget and the mark to wait for (bw NULL: nothing owed). */
typedef struct {
  tern_bandwidth_t *bw;
  double mark;
} tern__debt;
/* Debits n bytes of direction `dir` from each of the three budgets (NULL: none) and records
 * in d[i] what is owed to each. Returns whether anything is owed. */
bool tern__debts_add(tern__debt d[3], tern_bandwidth_t *const bws[3], int dir, size_t n);
/* Nanoseconds until every debt is paid (0: all paid); paid debts let go of their budget. */
uint64_t tern__debts_owed(tern__debt d[3], int dir);
void tern__debts_drop(tern__debt d[3]);
/* The most bytes one read or write should move under these budgets (SIZE_MAX: none). */
size_t tern__budgets_piece(tern_bandwidth_t *const bws[3], int dir);
void tern__bandwidth_ref(tern_bandwidth_t *bw);
/* Drops a reference (NULL: nothing); the last one frees the budget. Any thread. */
void tern__bandwidth_unref(tern_bandwidth_t *bw);

/* ---- configuration (config.c) ---------------------------------------------------------------- */

/* TLS settings, an engine's (tern_config_set_tls_*) or a request's own (tern_request_set_tls_*):
 * verification, CA file or directory, client certificate, its key and the key's password. One
 * type for both, so that a request without its own borrows the engine's whole, and every
 * setting added reaches both. Helpers in config.c. */
typedef struct {
  bool verify;
  char *ca_file, *ca_path, *cert, *key, *password;
} tern__tls_conf;

/* The defaults (verification on, nothing else set), without freeing anything. */
void tern__tls_conf_init(tern__tls_conf *t);
/* Frees the strings (the password wiped first) and goes back to the defaults. */
void tern__tls_conf_clear(tern__tls_conf *t);
/* *dst = a deep copy of src; on failure (TERN_ENOMEM) dst holds what was copied, for
 * tern__tls_conf_clear. */
int tern__tls_conf_copy(tern__tls_conf *dst, const tern__tls_conf *src);
/* Replaces *slot (one of the strings) with a copy of value; NULL clears it. */
int tern__tls_conf_set_string(char **slot, const char *value);
/* The client certificate, its key and password: all three or none (TERN_EINVAL for a key or
 * password without a certificate; TERN_ENOMEM leaves the old three). */
int tern__tls_conf_set_client_cert(tern__tls_conf *t, const char *cert_file, const char *key_file,
                                   const char *password);

struct tern_config {
  size_t buffer_size;
  uint64_t idle_timeout_ms;
  size_t max_header_size;
  unsigned max_conns_per_origin;
  unsigned pipeline_depth;
  bool http2_open_when_full;    /* a full HTTP/2 origin opens another connection, not wait */
  unsigned max_active_requests; /* requests in progress at once, engine-wide; 0: no limit */
  uint64_t max_recv_speed, max_send_speed; /* the engine's budget at start, bytes/s; 0: none */
  char *user_agent;                        /* NULL: the default; "": none */
  bool user_agent_set;
  tern_log_cb log_cb;
  tern_log_level log_level;
  void *log_data;
  tern__str resolve;     /* "host\tport\taddr,addr\n" lines from tern_config_add_resolve */
  uint64_t dns_cache_ms; /* how long the resolver's answers are reused; 0: not at all */
  tern__tls_conf tls;    /* of requests that set none of their own (tern_config_set_tls_*) */
};

void tern__config_defaults(tern_config_t *c);
int tern__config_copy(tern_config_t *dst, const tern_config_t *src);
void tern__config_clear(tern_config_t *c);

/* ---- URL (url.c) -------------------------------------------------------------------------- */

typedef struct {
  char *host;     /* lower-case; IPv6 without brackets */
  char *hostport; /* for the Host header: "host", "host:port", "[v6]:port" */
  char *target;   /* origin-form: "/path?query" */
  char *userinfo; /* "user:password" still percent-encoded, or NULL */
  uint16_t port;
  bool tls;
  bool ipv6;
} tern__url;

/* "GET", shared by every request that keeps the default method (str.c): most requests
 * would otherwise copy it and free the copy. */
extern char tern__method_get[];
/* Frees a request's method unless it is the shared "GET". */
static inline void tern__method_free(char *method) {
  if (method != tern__method_get) free(method);
}

int tern__url_parse(tern__url *u, const char *url);
void tern__url_free(tern__url *u);
/* The absolute URL a Location value names, relative to `base`: *out (malloc'd) or a TERN_E*. */
int tern__url_resolve(const tern__url *base, const char *location, char **out);
/* Whether `host` (lower-case, IPv6 without brackets) matches a NO_PROXY list: comma- or
 * space-separated names (equal, or a subdomain; a leading dot changes nothing), IP addresses and
 * CIDR ranges (never matched by suffix), "*" alone for every host. Ports are ignored. */
bool tern__no_proxy_match(const char *list, const char *host);

/* ---- authentication (auth.c) ---------------------------------------------------------------- */

typedef struct {
  char realm[256], nonce[256], opaque[256], algorithm[32];
  bool qop_auth, stale;
} tern__challenge;

/* ---- NTLM messages (ntlm.c) ---- */

/* A server's CHALLENGE message (type 2): its flags, server challenge and target info (AV pairs,
 * checked to end with MsvAvEOL inside the message; NULL when none). */
typedef struct {
  uint32_t flags;
  unsigned char challenge[8];
  unsigned char *target_info;
  size_t target_info_len;
} tern__ntlm_challenge;

void tern__md4(const void *data, size_t len, unsigned char out[16]);
/* "NTLM <base64 NEGOTIATE message>" appended to out. */
int tern__ntlm_negotiate(tern__str *out);
/* Parses a CHALLENGE message (network input: bounds-checked): 0, TERN_EAUTH when malformed, or
 * TERN_ENOMEM. tern__ntlm_parse_header takes the base64 text after "NTLM ". */
int tern__ntlm_parse_challenge(const unsigned char *m, size_t n, tern__ntlm_challenge *ch);
int tern__ntlm_parse_header(const char *value, tern__ntlm_challenge *ch);
void tern__ntlm_challenge_clear(tern__ntlm_challenge *ch);
/* "NTLM <base64 AUTHENTICATE message>" for user ("DOMAIN\user" or "user") and password:
 * NTLMv2 when the challenge has target info; else NTLMv1 if allow_v1, else TERN_EUNSUPPORTED. */
int tern__ntlm_authenticate(const tern__ntlm_challenge *ch, const char *user, const char *password,
                            bool allow_v1, tern__str *out);
/* The pieces, for MS-NLMP's test vectors: NT hash (MD4 of UTF-16LE), NTOWFv2, the NTLMv2 NT
 * response (NTProofStr || temp, appended to nt) with LMv2, and the NTLMv1 responses. */
int tern__ntlm_nt_hash(const char *password, unsigned char out[16]);
int tern__ntlm_v2_hash(const char *user, const char *domain, const char *password,
                       unsigned char out[16]);
int tern__ntlm_v2_response(const unsigned char v2hash[16], const unsigned char server[8],
                           const unsigned char client[8], uint64_t timestamp,
                           const unsigned char *target_info, size_t ti_len, tern__str *nt,
                           unsigned char lm[24]);
int tern__ntlm_v1_response(const unsigned char nt_hash[16], uint32_t flags,
                           const unsigned char server[8], const unsigned char client[8],
                           unsigned char nt[24], unsigned char lm[24]);

/* Where a request stands with one server's authentication (the origin's or the proxy's). */
typedef struct {
  char *user, *password;
  unsigned schemes;    /* TERN_AUTH_* allowed */
  int scheme;          /* TERN_AUTH_BASIC, _DIGEST or _NTLM once chosen, else 0 */
  tern__challenge *ch; /* the Digest challenge answered (allocated only then: it is 800 bytes,
                        * and every request would zero two of them) */
  unsigned nc;         /* Digest nonce count */
  unsigned tries;      /* challenges answered in this exchange (a preemptive send counts) */
  bool stale_retried;  /* a stale=true challenge was answered once already */
  int ntlm_step;       /* NTLM: 1 NEGOTIATE to send, 2 AUTHENTICATE to send, 3 it was sent, 4 it was
                  * accepted (a later challenge, on another connection, starts again) */
  tern__ntlm_challenge *ntlm; /* NTLM: the server's CHALLENGE (allocated only then) */
} tern__auth;

/* Sets a slot's credentials (copies; Basic alone is sent at once) or clears them (wiping the
 * password). tern__auth_set_userinfo takes a URL's percent-encoded "user:password". */
int tern__auth_set(tern__auth *a, const char *user, const char *password, unsigned schemes);
int tern__auth_set_userinfo(tern__auth *a, const char *userinfo, unsigned schemes);
void tern__auth_clear(tern__auth *a);
bool tern__challenge_find(const char *value, const char *scheme, tern__challenge *ch);
/* Finds an "NTLM" challenge among a header value's challenges; *token is its base64 CHALLENGE
 * message, or NULL when it is bare. */
bool tern__ntlm_challenge_find(const char *value, const char **token);
bool tern__digest_supported(const tern__challenge *ch);
int tern__auth_basic(const char *user, const char *password, tern__str *out);
/* The Digest response hash, hex, for a given cnonce and nc ("00000001"): the algorithm alone,
 * apart from header glue, so it can be checked against RFC 7616's examples. */
int tern__digest_response(const tern__challenge *ch, const char *user, const char *password,
                          const char *method, const char *uri, const char *ncs, const char *cnonce,
                          char resp[129]);
int tern__auth_digest(const tern__challenge *ch, const char *user, const char *password,
                      const char *method, const char *uri, unsigned nc, tern__str *out);
/* A 401 or 407 arrived: picks what the response's `header` challenges offer and slot `a` (1
 * www, 2 proxy) allows, asking the auth callback when it has no (more) credentials. Returns
 * whether the request goes again with an answer. */
bool tern__request_answer_challenge(tern_request_t *req, tern__auth *a, const char *header,
                                    int slot);
/* The Authorization (or Proxy-Authorization) value slot `a` answers with for this hop, or
 * nothing: Basic, Digest, or the NTLM message of the handshake's step. */
int tern__auth_credentials(tern_request_t *req, tern__auth *a, const char *method, const char *uri,
                           tern__str *out);
/* Whether this hop's NTLM handshake must stay on the connection that carried the challenge. */
bool tern__auth_ntlm_pending(const tern__auth *a);
/* Credentials for a CONNECT through the proxy, or "" (for the tunnel's request head). */
int tern__request_proxy_authorization(tern_request_t *req, const char *method, const char *uri,
                                      tern__str *out);

/* ---- hops (hops.c) --------------------------------------------------------------------------- */

/* What a proxy speaks: HTTP (absolute-form requests, CONNECT for https) or SOCKS, which opens
 * a plain TCP tunnel to the origin for every connection. SOCKS4 and SOCKS5 take the origin's
 * address, resolved here; SOCKS4A and SOCKS5H take its name, resolved by the proxy. */
enum {
  TERN__PROXY_KIND_HTTP,
  TERN__PROXY_KIND_SOCKS4,
  TERN__PROXY_KIND_SOCKS4A,
  TERN__PROXY_KIND_SOCKS5,
  TERN__PROXY_KIND_SOCKS5H
};
/* One configured proxy: host NULL when not configured. userinfo (percent-encoded, or NULL) is
 * for this proxy only. */
typedef struct {
  char *host, *userinfo;
  uint16_t port;
  int kind; /* TERN__PROXY_KIND_* */
} tern__proxy_conf;
enum { TERN__PROXY_NONE = -1, TERN__PROXY_ANY, TERN__PROXY_HTTP, TERN__PROXY_HTTPS };
/* Parses "SCHEME://[user:password@]host[:port]" into *out (port 1080 when none), SCHEME being
 * http, socks4, socks4a, socks5 or socks5h. NULL or "" clears it. Returns 0 or a TERN_E* code. */
int tern__proxy_conf_set(tern__proxy_conf *out, const char *proxy_url);
void tern__proxy_conf_clear(tern__proxy_conf *c);
/* Chooses this hop's proxy (scheme proxy, else the general one; none for a no_proxy host) and,
 * when it differs from the last hop's, its credentials: the given ones, else its URL's; never
 * another proxy's. With a proxy list (fixed or from the callback), its entry in use. Returns 0
 * or a TERN_E* code. */
int tern__request_choose_proxy(tern_request_t *req);
/* After a failure to reach this hop's proxy (or the origin, for DIRECT): whether the hop's
 * proxy list has another entry, now chosen (the hop goes again through it). */
bool tern__request_next_proxy(tern_request_t *req, int err);

enum { TERN__HOP_NONE, TERN__HOP_REDIRECT, TERN__HOP_AUTH, TERN__HOP_PROXY_AUTH };
/* After the response head: whether it leads to another hop (redirect, challenge). Sets
 * req->hop.next and req->hop.discard_body. Returns 0 or a TERN_E* code. */
int tern__request_decide_hop(tern_request_t *req);
/* The current hop's response is complete and leads to another hop: rewrite the request for
 * it. Returns 0 or a TERN_E* code (the request then completes with it). */
int tern__request_next_hop(tern_request_t *req);

/* ---- requests -------------------------------------------------------------------------------- */

/* Default fields tern_request_omit_header can drop, in request.c's order. */
enum {
  TERN__OMIT_HOST = 1u << 0,
  TERN__OMIT_USER_AGENT = 1u << 1,
  TERN__OMIT_ACCEPT = 1u << 2,
  TERN__OMIT_ACCEPT_ENCODING = 1u << 3,
  TERN__OMIT_CONNECTION = 1u << 4,
  TERN__OMIT_EXPECT = 1u << 5
};

enum { TERN__BODY_NONE, TERN__BODY_MEM, TERN__BODY_FILE, TERN__BODY_CB, TERN__BODY_SEGMENTS };

typedef struct {
  char *data;                /* memory segment, or NULL for a file segment */
  char *path;                /* file segment */
  uint64_t offset, end, len; /* file range; len is known once the request starts */
  int fd;
} tern__segment;
enum { TERN__SINK_MEM, TERN__SINK_FILE, TERN__SINK_CB };
enum {
  TERN__REQ_NEW,       /* being configured */
  TERN__REQ_SUBMITTED, /* handed to the engine (maybe still in the cross-thread queue) */
  TERN__REQ_DONE       /* completed */
};

typedef struct tern__conn tern__conn;
typedef struct tern__origin tern__origin;

/* The exchange's sending side, one state at a time. Its receiving side is framed by the
 * connection (tern__conn.rstate: head, then a body by length, chunks or close) and recorded in
 * the request's response fields. */
typedef enum {
  TERN__SEND_NOTHING,  /* nothing of the request on the wire */
  TERN__SEND_BODY,     /* the head is out; the body is going out */
  TERN__SEND_WAIT_100, /* the head is out; the body waits for 100 Continue or the expect timer */
  TERN__SEND_DONE,     /* the whole request is out */
  TERN__SEND_SKIPPED,  /* a final response came before the body: the body is not sent */
} tern__send_state;

/* The request is wholly out, or as much of it as the server will get. */
static inline bool tern__request_out(const tern_request_t *req);

struct tern_request {
  /* ---- lifecycle and threads (engine.c, request.c) ---- */
  tern__list node; /* in exactly one of: submit queue, origin wait list, connection queue */
  tern_engine_t *engine;
  atomic_int refs;              /* caller's + engine's */
  atomic_int state;             /* TERN__REQ_* (any thread reads) */
  atomic_bool cancel_requested; /* any thread */
  atomic_bool recv_paused;      /* any thread: tern_request_pause_receive */
  /* `engine` as other threads may read it (cancel, pause): published after submit set it. */
  _Atomic(tern_engine_t *) submitted_to;
  atomic_bool cancel_queued; /* in engine->cancels */
  atomic_bool released;      /* the caller let go: no more callbacks */
  tern__list cancel_node;
  void *user_data;
  uv_timer_t total_timer;
  bool total_timer_live;
  uint64_t start_ns;
  int64_t times_ns[5];
  int error; /* the first failure's code, with its message (tern__request_set_error) */
  char errmsg[256];

  /* ---- what to send (request.c; serialized by request_head.c) ---- */
  char *method; /* malloc'd, or tern__method_get (never freed) */
  bool has_url;
  tern__url url;
  char *url_str;       /* the URL as the caller set it */
  char *effective_url; /* the current hop's URL, after redirects */
  tern__str headers;   /* validated "Name: value\r\n" lines */
  bool user_host, user_agent, user_accept, user_accept_encoding, user_connection_close;
  bool user_authorization, user_proxy_authorization;
  unsigned omit; /* TERN__OMIT_*: default fields not to send (tern_request_omit_header) */
  int64_t expect_min;
  uint64_t expect_wait_ms;
  uint64_t timeouts[4];
  bool persistent, pipelining, http10;
  tern_http_version http_version; /* what the request may speak (tern_request_set_http_version) */
  bool http11_required;           /* an NTLM offer came over HTTP/2: the next hops speak HTTP/1.1 */
  size_t buffer_size;
  uint64_t max_recv_speed;
  int priority;                  /* higher leaves a wait list first (tern_request_set_priority) */
  tern_bandwidth_t *bandwidth;   /* a group budget shared with other requests (a reference) */
  tern_bandwidth_t *send_budget; /* its own sending budget (tern_request_set_max_send_speed) */

  /* ---- waiting (engine.c, pool.c): for a slot of max_active_requests or a connection ---- */
  bool queued;   /* in a wait list (eng->queued or origin->waiting): TERN_STAT_REQUESTS_WAITING */
  bool admitted; /* holds one of the engine's max_active_requests slots until it completes */

  /* ---- the current exchange (request_head.c, pool.c, http1*.c) ---- */
  tern__origin *origin;
  tern__conn *conn;
  char *head; /* serialized request head */
  size_t head_len;
  bool idempotent, is_head, retried, force_new_conn, reused;
  tern__send_state send;  /* how much of the request is on the wire */
  bool expect_continue;   /* this exchange sent Expect: 100-continue */
  uint64_t recv_start_ms; /* uv_now when this hop's body began, for the rate cap */

  /* ---- its HTTP/2 stream, when the exchange goes over HTTP/2 (http2.c) ---- */
  struct {
    int32_t stream_id;   /* 0: none */
    uint32_t close_code; /* the stream's end: RST_STREAM's code, 0 when it ended cleanly */
    bool head;           /* the final head arrived */
    bool got_frames;     /* the server answered on the stream */
    int status;
    tern__str fields; /* the head being received: "name\0value\0" each */
    size_t nfields;
    uint64_t unconsumed; /* body bytes taken while receiving was paused: their window waits */
    unsigned refusals;   /* streams refused (or cut by GOAWAY) so far, across hops */
    uint64_t last_ms;    /* uv_now of the stream's last frame either way: its silence counts */
    bool peer_reset;     /* the server sent RST_STREAM (not our nghttp2) */
    tern__str head_text; /* the head as it went, for tern_request_get_request_head */
  } h2;

  /* ---- the request body's source (body.c) ---- */
  struct {
    int kind; /* TERN__BODY_* */
    void *mem;
    size_t mem_len;
    char *path;
    uint64_t offset, end;
    tern__segment *segments;
    size_t nsegments;
    size_t seg_index;    /* segment holding `sent` */
    uint64_t seg_offset; /* `sent`'s offset within it */
    tern_read_cb cb;
    void *cb_data;
    int64_t cb_length;
    bool gzip;          /* sent gzip-compressed */
    uint64_t len;       /* length on the wire, or UINT64_MAX for chunked */
    uint64_t sent;      /* bytes handed to the socket (before compression) */
    uint64_t plain_len; /* length before compression, UINT64_MAX when unknown */
    tern__encoder *encoder;
    int fd;
    bool waiting; /* the callback had no bytes yet: sending resumes on tern_request_resume_send */
    bool held;    /* this hop goes without the body ("Content-Length: 0"): an NTLM NEGOTIATE */
  } upload;

  /* ---- the response (response.c, http1_read.c) ---- */
  struct {
    int status, minor;
    int version;  /* 10, 11 or 20; 0 before a head */
    char *reason; /* in block */
    char *block;  /* one block: header pointers, NUL-terminated strings, then the reason */
    size_t count;
    /* One bit per field present (response.c's field_bit): a lookup of a name whose bit is clear
     * (most lookups: Content-Encoding, Set-Cookie, Location, ETag) ends without a scan. */
    uint64_t names;
    tern__str body;
    tern__str interim; /* this hop's interim (1xx) heads as received, at most TERN__MAX_INTERIM */
    uint64_t received;
    int64_t content_length;
    uint64_t offset;
  } resp;

  /* ---- where the response body goes (sink.c) ---- */
  struct {
    int kind; /* TERN__SINK_* */
    char *path;
    uint64_t offset, end;
    bool resume;
    bool part_only;  /* TERN_RESUME_PART: continue only a .part, never the target */
    bool any_status; /* a non-2xx body goes to the file too (curl's -o) */
    tern_data_cb data_cb;
    void *data_cb_data;
    int decode_mode;
    uint64_t decoded_max_bytes;
    unsigned decoded_max_ratio;
    int fd;
    bool to_file;         /* this response's body goes to fd */
    char *target_path;    /* the file written: path, or the file its symlink points to */
    char *part_path;      /* target_path + ".part": where a download lands until complete */
    char *validator_path; /* part_path + ".validator": ETag or Last-Modified for If-Range */
    uint64_t resume_from; /* bytes already in the file being continued */
    bool resume_in_place; /* continuing path itself (no .part existed) */
    bool special;         /* path is no regular file (/dev/null, a FIFO, a directory): opened
                            * in place (a directory then fails with EISDIR) */
    bool writing_part;    /* this response's body goes to part_path */
    tern__decoder *decoder;
    const char *decoded_encoding;
    uint64_t delivered;
    bool keep_error_body; /* non-2xx with a file sink: body goes to memory instead */
    uint64_t skip_bytes;  /* leading body bytes to drop (a 200 answering a ranged download) */
    uint64_t range_start; /* first byte asked for (download offset + resumed size) */
    bool range_sent;
    bool range_done; /* 416 on a resumed download: the file was already whole */
  } sink;

  /* ---- redirects and the hop callbacks (hops.c) ---- */
  struct {
    unsigned follow_max, redirect_flags, redirect_count;
    int next;          /* TERN__HOP_*: what the current response leads to */
    bool discard_body; /* an intermediate hop's body: read and dropped */
    bool keep_conn;    /* the next hop goes on this hop's connection (an NTLM handshake) */
    tern__conn *conn;  /* that connection, between this hop's end and the next one's dispatch */
    tern_hop_response_cb response_cb;
    void *response_data;
    tern_hop_request_cb request_cb;
    void *request_data;
    tern__str headers; /* added by the hop-request callback for the hop being prepared */
    bool in_request_cb;
    bool whole_at_completion; /* tern_request_set_whole_at_completion */
    bool whole_now;           /* the head being handled came with all of its body (HTTP/1) */
    bool reported_whole;      /* ...and, final, was left to the complete callback */
  } hop;

  /* ---- credentials (auth.c) ---- */
  struct {
    tern__auth www, proxy;
    bool from_url; /* www.user/password came from the URL's userinfo */
    tern_auth_cb cb;
    void *cb_data;
    int in_cb; /* 1: answering the origin's challenge, 2: the proxy's */
  } auth;

  /* ---- the proxy: chosen per hop from these settings (hops.c) ---- */
  struct {
    char *host; /* this hop's proxy, or NULL: direct */
    int kind;   /* TERN__PROXY_KIND_* of that proxy */
    uint16_t port;
    int chosen; /* TERN__PROXY_* slot this hop's proxy came from; -1 before the first hop */
    tern__proxy_conf conf[3]; /* TERN__PROXY_ANY (tern_request_set_proxy), _HTTP, _HTTPS */
    char *no_proxy;           /* hosts reached directly, curl's NO_PROXY syntax */
    tern__auth given;         /* tern_request_set_proxy_auth: for whichever proxy applies */
    int connect_status;       /* the proxy's answer to this request's last CONNECT, or 0 */
    /* A PAC-style list ("PROXY a:3128; SOCKS5 b:1080; DIRECT") replaces the settings above:
     * given once (list_fixed), or asked of the callback for every hop's URL. The entry in use
     * is list_pos; a connection failure moves on to the next one. */
    tern_proxy_cb list_cb;
    void *list_cb_data;
    char *list_fixed;
    char *list;     /* this hop's list */
    char *list_url; /* the URL it was made for */
    unsigned list_pos;
  } proxy;

  /* ---- TLS settings, and facts of the connection that carried the request (tls.c) ---- */
  struct {
    tern__tls_conf conf;
    /* Set by any tern_request_set_tls_* call: conf is the request's. Otherwise it is the
     * engine's (tern_config_set_tls_*), borrowed at each hop's preparation and never freed by
     * the request: the engine outlives every request it runs. */
    bool own;
    char *id; /* the settings as one string: pool and context key */
    const char *version;
    bool resumed, cert_requested;
  } tls;

  /* ---- completion and progress callbacks (engine.c, body.c, sink.c) ---- */
  struct {
    tern_complete_cb complete;
    void *complete_data;
    tern_progress_cb progress;
    void *progress_data;
    int last_percent, last_up_percent; /* progress already reported, so it never goes back */
  } notify;
};

static inline bool tern__request_out(const tern_request_t *req) {
  return req->send == TERN__SEND_DONE || req->send == TERN__SEND_SKIPPED;
}

/* request.c: the object's lifecycle and setters */
void tern__request_ref(tern_request_t *req);
void tern__request_unref(tern_request_t *req);

/* request_head.c */
/* Builds req->head and opens the upload file. Returns 0 or a TERN_E* code. */
int tern__request_prepare(tern_request_t *req, const tern_config_t *cfg);
/* Makes the request ready to go out again (a retry or the next hop): no response, nothing of
 * it on the wire, no connection. */
void tern__request_rewind(tern_request_t *req);

/* response.c */
/* Records the response head (status, reason, header fields) as one block. */
int tern__request_set_response(tern_request_t *req, int minor, int status, const char *reason,
                               size_t reason_len, const tern__header_t *h, size_t n);
const char *tern__request_header_value(const tern_request_t *req, const char *name);

/* body.c: request body sources */
/* Drops the body (any kind) and its segments: the request then has none. */
void tern__request_clear_body(tern_request_t *req);
/* Opens the body's files and sets body_len and plain_len for an exchange. Returns 0 or a
 * TERN_E* code. */
int tern__request_open_body(tern_request_t *req);
/* The next plaintext piece of a body to compress: *ptr points into the caller's memory body or
 * into `scratch`. Returns bytes (0 at the end) or a TERN_E* code. */
int64_t tern__request_pull_plain(tern_request_t *req, char *scratch, size_t cap, const char **ptr);
/* Reads the next piece of a file or callback body into buf; returns bytes (0 at end) or a
 * TERN_E* code. */
int64_t tern__request_read_plain(tern_request_t *req, char *buf, size_t cap);
/* Whether its body can be sent again: a callback body can only if none of it was read. */
bool tern__request_can_replay(const tern_request_t *req);
/* Progress events; return TERN_ECANCELED when the callback asked to stop. */
int tern__request_progress_upload(tern_request_t *req);

/* sink.c: where the response body goes */
/* A file download's paths, resume point and If-Range validator (into validator[0, cap)), before
 * the head is built. Returns 0 or TERN_ENOMEM. */
int tern__request_prepare_download(tern_request_t *req, char *validator, size_t cap);
/* Chooses where the body goes (decoder, file, memory) once the head is known. */
int tern__request_setup_sink(tern_request_t *req);
/* Appends body bytes to the request's sink. Returns 0 or a TERN_E* code. */
int tern__request_deliver(tern_request_t *req, const char *data, size_t n);
/* The body is complete: finish decoding. Returns 0 or a TERN_E* code. */
int tern__request_body_end(tern_request_t *req);
/* Completion of a file download: move PATH.part into place, or clean up. May turn success into
 * TERN_EFILEWRITE. */
int tern__request_finish_file(tern_request_t *req, int err);
/* Closes the request's files (upload sources, download sink) once it is done. */
void tern__request_close_files(tern_request_t *req);
/* Progress events; return TERN_ECANCELED when the callback asked to stop. */
int tern__request_progress_download(tern_request_t *req, bool final);

/* error.c */
/* The error rule: the FIRST failure explains. The first call records its code and its message
 * together; every later call (a consequence of the first, such as the connection closing under
 * it) changes neither, so tern_request_get_error and tern_request_get_error_message always
 * describe the same failure. The request completes with that code whatever code its
 * completion was called with (engine.c); only a new attempt (tern__request_rewind: a retry or
 * the next hop) clears it, since an abandoned attempt's failure is not the request's. */
void tern__request_set_error(tern_request_t *req, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tern__request_mark(tern_request_t *req, tern_time which);

/* Small helpers shared by the request files (request.c, request_head.c, body.c, sink.c). */
#include <unistd.h>
/* Closes *fd if open and marks it closed. */
static inline void tern__close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}
/* done/total in whole percent, 0 when total is 0, at most 100. */
static inline int tern__percent_of(uint64_t done, uint64_t total) {
  if (total == 0) return 0;
  if (done >= total) return 100;
  if (total > UINT64_MAX / 100) return (int)(done / (total / 100));
  return (int)(done * 100 / total);
}

/* ---- connections and pool ------------------------------------------------------------------- */

enum {
  TERN__CONN_RESOLVING,
  TERN__CONN_CONNECTING,
  TERN__CONN_TUNNEL,    /* CONNECT sent to the proxy, waiting for its answer */
  TERN__CONN_SOCKS,     /* the SOCKS handshake with the proxy is under way */
  TERN__CONN_HANDSHAKE, /* TLS handshake under way */
  TERN__CONN_ACTIVE,    /* has requests */
  TERN__CONN_IDLE,      /* in the pool */
  TERN__CONN_CLOSING
};

enum {
  TERN__TIMER_NONE,
  TERN__TIMER_CONNECT,
  TERN__TIMER_HEADERS,
  TERN__TIMER_BODY,
  TERN__TIMER_IDLE,
  TERN__TIMER_EXPECT,   /* waiting for 100 Continue */
  TERN__TIMER_THROTTLE, /* reading paused by the receive-rate cap */
  TERN__TIMER_STREAMS   /* HTTP/2: the earliest stream's head or body timeout */
};

enum { TERN__RESP_HEAD, TERN__RESP_LENGTH, TERN__RESP_CHUNKED, TERN__RESP_CLOSE };

#define TERN__MAX_HEADERS 256
/* All interim (1xx) heads of one hop together: a server sending 100 Continue for ever must not
 * keep a request alive for ever (curl stops at 300 KB of headers too). */
#define TERN__MAX_INTERIM (300u * 1024u)

/* What a connection (conn.c) reports to the protocol that drives it (http1.c). The protocol
 * installs the table when it opens the connection; conn.c never names a protocol function. */
typedef struct {
  void (*connected)(tern__conn *c); /* TCP is up: start the tunnel, TLS or the exchange */
  void (*ready)(tern__conn *c);     /* the TLS handshake finished */
  /* Bytes were added to c->buf (decrypted already); tls is tern__tls_recv's result: 0, 1 when
   * the peer sent close_notify, or a TERN_E* code. */
  void (*received)(tern__conn *c, int tls);
  void (*eof)(tern__conn *c, int uverr);      /* the peer closed, or reading failed */
  void (*written)(tern__conn *c, int status); /* a tern__conn_write finished */
  void (*timer)(tern__conn *c);               /* the protocol's own timer kinds: EXPECT, THROTTLE */
  /* A request on the connection is canceled or ran out of time: it completes with err. */
  void (*abort)(tern__conn *c, tern_request_t *req, int err);
  /* The connection fails (its timer, a protocol error): `victim` (NULL: the oldest request)
   * gets err; what becomes of the others is the protocol's choice. */
  void (*fail)(tern__conn *c, tern_request_t *victim, int err);
  /* The connection is closing: the requests still on it are settled (retried or failed). */
  void (*closing)(tern__conn *c);
  void (*pause)(tern_request_t *req);       /* tern_request_pause_receive changed */
  void (*resume_send)(tern_request_t *req); /* the body callback has bytes again */
} tern__conn_events;

struct tern__conn {
  tern__list node; /* origin->idle or origin->busy */
  tern__origin *origin;
  tern_engine_t *engine;
  const tern__conn_events *events;
  uv_tcp_t tcp;
  uv_timer_t timer;
  uv_connect_t connect_req;
  uv_getaddrinfo_t gai;
  uv_write_t write_req;
  tern__list wrote_node; /* engine->wrote, while `wrote` */
  bool wrote;            /* the write under way went out whole at once (conn.c: send) */
  tern__list idle_node;  /* engine->went_idle, while `went_idle` */
  bool went_idle;        /* TLS: pooled during this callback; trimmed when it returns */
  struct addrinfo *addrs, *next_addr;
  bool own_addrs; /* addrs built from a pinned entry, not by getaddrinfo */
  int pending;    /* open handles and in-flight libuv requests; freed at 0 after closing */
  int state;
  bool reading, writing, gai_live;
  bool keep_alive; /* the current response allows reuse */
  bool no_more;    /* no further request may be queued here */
  unsigned served; /* responses completed on this connection */
  uint64_t id;     /* for logs: the engine's connection counter */
  int last_error;  /* of the last failed address */

  tern__list requests; /* written or being written, oldest first */
  unsigned nrequests;
  tern_request_t *writing_req; /* request whose bytes are on the wire now */

  /* the one I/O buffer: response bytes in [0, len), reads bounded by rcap; while a request
   * body piece is staged, it lies in [rcap, cap) (http1_write.c) */
  char *buf;
  size_t cap, len, rcap;

  /* response framing for requests.next */
  int rstate;
  size_t last_len;
  uint64_t body_left;
  tern__chunked_t chunked;
  bool read_threshold; /* SO_RCVLOWAT raised on the socket (conn.c: the read threshold) */

  /* timers */
  int timer_kind;
  uint64_t timer_ms;       /* the limit the timer enforces */
  uint64_t timer_due;      /* uv_now when that limit ends (0: none, or the protocol's own) */
  uint64_t timer_fires;    /* uv_now when the timer, if active, fires: at or before timer_due */
  uint64_t last_activity;  /* uv_now at the last read or write */
  uint64_t idle_ms;        /* idle timeout for this connection */
  size_t pending_body;     /* body bytes in the write under way */
  bool last_chunk_pending; /* the write under way ends a chunked body */
  bool write_ends_body;    /* the write under way carries the body's last bytes */
  bool done_after_write;   /* the response ended before that write did: finish it then */
  bool tcp_closing;        /* uv_close called on tcp (reconnect or close) */
  bool http11;             /* the last response was HTTP/1.1 */
  char chunk_line[24];     /* "HEX\r\n" for chunked request bodies */

  /* TLS: ciphertext goes out through a memory BIO detached per write (so OpenSSL never
   * reallocates bytes libuv is still sending) and comes in through the connection buffer. */
  struct ssl_st *ssl;
  bool handshaking;
  bool tls_resumed, cert_requested;
  bool failed;                  /* closed by an error: its TLS session is not offered again */
  struct bio_st *tls_req_bio;   /* ciphertext of the write under way in write_req */
  struct bio_st *tls_extra_bio; /* handshake or alert bytes under way in tls_wreq */
  struct bio_st *tls_spare_bio; /* an emptied output BIO, reused by the next write */
  struct tern__tls_in *tls_in;  /* the read BIO's state (tls.c) */
  uv_write_t tls_wreq;
  char *tunnel_head; /* the CONNECT request while it is being written */

  /* bandwidth budgets (conn.c): debts of the last read and write, each holding a reference
   * to its budget; reading stops, or the write's end is reported late, until they are paid */
  uv_timer_t bw_timer;
  tern__debt debt[2][3]; /* [TERN__RECV or TERN__SEND][engine, group, request] */
  bool bw_wait[2];
  int bw_write_status;   /* of the write whose end waits for its debt */
  size_t tunnel_interim; /* bytes of 1xx heads the proxy sent before answering CONNECT */
  uint64_t tunnel_skip;  /* bytes of a 407's body still to drop before CONNECT goes again on this
                          * connection (an NTLM handshake with the proxy) */

  /* SOCKS (socks.c): the origin's address when the proxy takes addresses (resolved by conn.c
   * before the proxy's own), and where the handshake stands */
  bool resolving_target;
  bool has_target_addr;
  struct sockaddr_storage target_addr;
  int socks_step;

  /* HTTP/2 (http2.c): the session, when ALPN or prior knowledge chose it; NULL for HTTP/1.1 */
  struct tern__h2 *h2;
};

struct tern__origin {
  tern__list node; /* engine->origins */
  char *host;
  uint16_t port;
  bool tls;
  size_t buffer_size;
  tern__list idle;    /* most recently used first */
  tern__list busy;    /* connecting or active */
  tern__list waiting; /* requests waiting for a connection slot */
  unsigned nconns;
  char *tls_id;     /* TLS settings shared by its connections, or NULL */
  char *proxy_host; /* connections go through this proxy, or NULL */
  uint16_t proxy_port;
  int proxy_kind; /* TERN__PROXY_KIND_* */
  char *proxy_id; /* proxy credentials: a tunnel opened for one user is not
                                    * handed to a request with other (or no) credentials */
  char *www_id;   /* origin credentials that may answer NTLM, or NULL: NTLM
                                    * authenticates the connection, so it stays with them */
  int proto;      /* TERN__PROTO_*: what its connections speak (part of the key) */
  int h2_known;   /* 1: the server spoke HTTP/2 here, -1: ALPN chose HTTP/1.1, 0: not known yet */
  tern__tls_ctx *tls_ctx;         /* owned by the engine */
  struct ssl_session_st *session; /* the latest session, offered by new connections */
};

/* What an origin's connections speak: HTTP/1.1 only; HTTP/2 if TLS negotiates it (ALPN "h2",
 * "http/1.1"); HTTP/2 from the first byte (prior knowledge; ALPN "h2" alone over TLS). */
enum { TERN__PROTO_H1, TERN__PROTO_ALPN, TERN__PROTO_H2 };
/* Which of those a request's hop uses (its preference, its URL, proxy and credentials). */
int tern__request_proto(const tern_request_t *req);

/* ---- the engine and what the layers below report to it ---------------------------------------
 * Calls point one way: engine.c -> pool.c -> http1.c -> http1_read.c, http1_write.c, proxy.c ->
 * conn.c -> tls.c -> the request's files -> coding, parsing, URLs, errors. What a lower layer
 * must tell an upper one goes through this table, which the engine installs. */
typedef struct {
  /* Completes a request once: error code, callbacks, statistics, engine reference. */
  void (*complete)(tern_request_t *req, int err);
  /* The request's current hop ended and leads to another: rewrite it and send it again. */
  void (*hop_continue)(tern_request_t *req);
  /* A connection lost a request that never saw a response byte: send it on a fresh one. */
  void (*redispatch)(tern_request_t *req, int err, bool counts_as_retry);
  /* A connection finished its requests and may be reused: hand it to a waiter or park it. */
  void (*release)(tern__conn *c);
  /* A new connection knows its protocol (TLS done, ALPN read): waiters of its origin may go. */
  void (*negotiated)(tern__conn *c);
  /* A connection just closed: wake waiters of its origin. */
  void (*conn_gone)(tern__origin *o);
  /* A closed connection's memory is gone: the engine may finish shutting down. */
  void (*handle_gone)(tern_engine_t *eng);
  /* The outermost engine callback returns: start requests submitted meanwhile. */
  void (*drain)(tern_engine_t *eng);
} tern__owner_ops;

#define TERN__STAT_COUNT 12 /* tern_stat values */

struct tern_engine {
  const tern__owner_ops *ops;
  uv_loop_t *loop;
  uv_loop_t own_loop;
  bool owns_loop;
  uv_thread_t thread;
  uv_thread_t loop_thread;
  uv_async_t async;
  uv_prepare_t kick; /* starts what the loop thread submitted outside our callbacks */
  uv_mutex_t lock;
  tern__list submitted;   /* guarded by lock */
  tern__list cancels;     /* guarded by lock */
  bool stopping;          /* guarded by lock */
  bool stopped;           /* loop thread: shutdown done */
  tern__list ready;       /* loop thread: submitted from a callback, started on return */
  tern__list calls;       /* guarded by lock: tern_engine_call from other threads */
  tern__list ready_calls; /* loop thread: calls run when the outermost callback returns */
  tern__list wrote;       /* loop thread: connections whose write went out whole (conn.c) */
  bool reporting_writes;  /* loop thread: a write's end is being reported (conn.c) */
  tern__list went_idle;   /* loop thread: TLS connections pooled in this callback (conn.c) */
  tern__list finished;    /* loop thread: completed requests, unreferenced after the drain */
  tern__list deferred;    /* loop thread: tern_engine_defer calls, run after `finished` */
  tern__list spare_calls; /* loop thread: run calls' nodes, for the next calls (engine_calls.c) */
  unsigned nspare_calls;  /* loop thread: how many */
  int depth;              /* loop thread: nesting of engine callbacks */
  tern__list queued;      /* loop thread: admitted by max_active_requests later, by priority */
  unsigned nadmitted;     /* loop thread: requests started and not completed */
  tern__list origins;
  tern__list tls_ctxs; /* tern__tls_ctx, one per distinct TLS settings */
  tern__list dns;      /* resolve.c: the resolver's answers, most recently stored first */
  unsigned ndns;
  int handles; /* engine-owned handles still open (embedded mode frees at 0) */
  bool free_when_closed;
  tern_config_t config;
  tern_bandwidth_t *bw; /* the engine-wide budget and meter (tern_engine_set_max_speed) */
  atomic_uint_fast64_t stats[TERN__STAT_COUNT];
};

#define TERN__STAT_ADD(eng, which, n) atomic_fetch_add(&(eng)->stats[which], (uint64_t)(n))
#define TERN__STAT_SUB(eng, which, n) atomic_fetch_sub(&(eng)->stats[which], (uint64_t)(n))

extern atomic_uint_fast64_t tern__requests_live;

/* True on the engine's loop thread. */
static inline bool tern__on_loop_thread(const tern_engine_t *eng) {
  uv_thread_t self = uv_thread_self();
  return uv_thread_equal(&self, &eng->loop_thread);
}

/* engine_calls.c: the functions queued to run on the loop thread (tern_engine_call, _defer). */
/* Takes the first call off a non-empty list, runs it (it may queue more) and keeps its node
 * for the next call made on the loop thread, or frees it. Loop thread. */
void tern__engine_run_first_call(tern_engine_t *eng, tern__list *calls);
/* Frees the nodes of calls that will not run (the engine is going). */
void tern__engine_drop_calls(tern__list *calls);

/* Wait lists (the engine's queue for max_active_requests, an origin's requests waiting for a
 * connection slot) are kept highest priority first, equal priorities in arrival order: a
 * request goes behind every one of its priority or higher. Searching from the tail makes the
 * common case (equal priorities) constant time. */
static inline void tern__wait_insert(tern_engine_t *eng, tern__list *q, tern_request_t *req) {
  tern__list *pos = q->prev;
  while (pos != q && tern__container_of(pos, tern_request_t, node)->priority < req->priority)
    pos = pos->prev;
  tern__list_insert_head(pos, &req->node); /* right after pos */
  req->queued = true;
  TERN__STAT_ADD(eng, TERN_STAT_REQUESTS_WAITING, 1);
}
/* The request no longer waits (it starts, or completes); its node is the caller's to move. */
static inline void tern__wait_leave(tern_engine_t *eng, tern_request_t *req) {
  if (!req->queued) return;
  req->queued = false;
  TERN__STAT_SUB(eng, TERN_STAT_REQUESTS_WAITING, 1);
}
/* Takes the first request off a wait list (NULL when empty). */
static inline tern_request_t *tern__wait_take(tern_engine_t *eng, tern__list *q) {
  if (tern__list_empty(q)) return NULL;
  tern_request_t *req = tern__container_of(q->next, tern_request_t, node);
  tern__list_remove(&req->node);
  tern__wait_leave(eng, req);
  return req;
}

/* Every entry from libuv into the engine is bracketed by enter/leave: requests submitted from
 * inside a callback are started on the way out, never re-entrantly in the middle of connection
 * code, and without a round trip through uv_async. */
static inline void tern__engine_enter(tern_engine_t *eng) { eng->depth++; }
static inline void tern__engine_leave(tern_engine_t *eng) {
  if (eng->depth == 1) eng->ops->drain(eng);
  eng->depth--;
}
static inline void tern__owner_complete(tern_request_t *req, int err) {
  req->engine->ops->complete(req, err);
}
static inline void tern__owner_hop_continue(tern_request_t *req) {
  req->engine->ops->hop_continue(req);
}
static inline void tern__owner_redispatch(tern_request_t *req, int err, bool counts_as_retry) {
  req->engine->ops->redispatch(req, err, counts_as_retry);
}

/* pool.c: origins and the connections they keep */
/* Finds or creates the origin for a request. NULL when out of memory. */
tern__origin *tern__origin_get(tern_engine_t *eng, const tern_request_t *req);
/* Sends or queues a request on its origin's pool. */
void tern__pool_dispatch(tern_request_t *req);
void tern__pool_release(tern__conn *c);
/* A connection kept for an NTLM hop that will not use it: back to the pool, or closed when it
 * is a tunnel not yet open. */
void tern__pool_unkeep(tern__conn *c);
void tern__pool_conn_gone(tern__origin *o);
/* A new connection knows its protocol: an HTTP/2 one takes the origin's waiters up to its
 * streams; after HTTP/1.1 the waiters open connections of their own. */
void tern__pool_negotiated(tern__conn *c);
/* Shutdown: fails every waiting and active request with TERN_ESHUTDOWN, closes every
 * connection and frees the origins. */
void tern__pool_shutdown(tern_engine_t *eng);

/* http1.c: HTTP/1.1 exchanges on a connection */
/* Opens a connection for `first` (taken off whatever list it is on). NULL when out of memory. */
tern__conn *tern__http1_open(tern__origin *o, tern_request_t *first, uint64_t connect_ms);
/* Queues a request on an idle or pipelining connection and writes it when its turn comes. */
void tern__http1_send(tern__conn *c, tern_request_t *req);
bool tern__http1_can_pipeline(const tern__conn *c, const tern_request_t *req, unsigned depth);
/* Sends CONNECT again on a connection whose proxy answered the last one with an NTLM 407. */
void tern__http1_tunnel_again(tern__conn *c, tern_request_t *req);
/* Applies the request's receive pause or resume (loop thread). */
void tern__http1_apply_pause(tern_request_t *req);
/* The request's body callback has bytes again (loop thread). */
void tern__http1_resume_send(tern_request_t *req);

/* http2.c: HTTP/2 on a connection (libnghttp2, sans I/O) */
/* Whether the connection, just ready, speaks HTTP/2 (ALPN chose h2, or prior knowledge). */
bool tern__http2_chosen(const tern__conn *c);
/* Turns a ready connection into an HTTP/2 one and sends its requests as streams. */
void tern__http2_start(tern__conn *c);
/* Whether another stream may start on the connection now. */
bool tern__http2_room(const tern__conn *c);
/* Sends a request as a new stream on an HTTP/2 connection (busy or idle). */
void tern__http2_send(tern__conn *c, tern_request_t *req);

/* http1_write.c: the request's bytes */
/* Composes and starts the next write: the head of the next unsent request and, with it, the
 * first piece of its body, or the next piece of a body under way. */
void tern__http1_write_next(tern__conn *c);
/* The request is wholly on the wire: the head timer starts, reading resumes. */
void tern__http1_request_sent(tern__conn *c, tern_request_t *req);

/* http1_read.c: response framing */
enum {
  TERN__READ_MORE = 0,     /* everything in the buffer is handled: wait for more bytes */
  TERN__READ_DONE = 1,     /* the oldest request's response is complete */
  TERN__READ_CONTINUE = 2, /* a 100 Continue: the held-back body may go now */
};
/* Frames what the buffer holds for the oldest request, up to one event. Returns a
 * TERN__READ_* value or a TERN_E* code for the oldest request. */
int tern__http1_read(tern__conn *c);

/* exchange.c: a final response head was recorded (tern__request_set_response): times, TLS
 * facts, the hop decision, the response callback, the sink. Returns 0 or a TERN_E* code. */
int tern__exchange_head(tern__conn *c, tern_request_t *req);

/* proxy.c: CONNECT tunnels */
/* Sends CONNECT for the connection's origin. Returns 0 or a TERN_E* code. */
int tern__proxy_tunnel_start(tern__conn *c);
/* The proxy's answer so far. Returns 0 (wait, or the tunnel is up and TLS started), or a
 * TERN_E* code. */
int tern__proxy_tunnel_read(tern__conn *c);

/* socks.c: SOCKS4/4A/5/5H tunnels. Start sends the first message to the proxy (the connection
 * is in TERN__CONN_SOCKS); read handles what the proxy sent so far and, once the tunnel is
 * open, starts TLS or reports the connection ready. Both return 0 or a TERN_E* code. */
int tern__socks_start(tern__conn *c);
int tern__socks_read(tern__conn *c);
/* Whether the proxy of this kind takes the origin's address rather than its name. */
static inline bool tern__proxy_resolves_locally(int kind) {
  return kind == TERN__PROXY_KIND_SOCKS4 || kind == TERN__PROXY_KIND_SOCKS5;
}

/* connect.c: a new connection for `first`: resolve, connect (through TLS and tunnels later) */
tern__conn *tern__conn_open(tern__origin *o, tern_request_t *first, uint64_t connect_ms,
                            const tern__conn_events *events);
/* conn.c: a socket with its one buffer, timers, reads, writes (through TLS), close */
/* An idle connection goes back to work: busy, its idle timer stopped. */
void tern__conn_take_idle(tern__conn *c);
/* A request on a connection is canceled or timed out (the protocol decides what else ends). */
void tern__conn_abort(tern__conn *c, tern_request_t *req, int err);
/* The request's receive pause changed, or its body callback has bytes again (loop thread). */
void tern__conn_apply_pause(tern_request_t *req);
void tern__conn_resume_send(tern_request_t *req);
void tern__conn_free_addrs(tern__conn *c);
/* Frees a closed connection once its last handle and libuv request are gone. */
void tern__conn_free_if_done(tern__conn *c);
static inline tern_request_t *tern__conn_first(const tern__conn *c) {
  return tern__list_empty(&c->requests)
             ? NULL
             : tern__container_of(c->requests.next, tern_request_t, node);
}
static inline int tern__conn_head_limit(const tern__conn *c) {
  size_t lim = c->engine->config.max_header_size;
  return (int)(lim < c->cap ? lim : c->cap);
}
/* Drops the first n bytes of the buffer. */
void tern__conn_consume(tern__conn *c, size_t n);
/* Starts the connection timer for `kind`, limited to `ms` (0: none). */
void tern__conn_set_timer(tern__conn *c, int kind, uint64_t ms);
/* (Re)starts the connection timer for c->timer_kind and c->timer_ms. */
void tern__conn_arm_timer(tern__conn *c);
/* Starts a timer of the protocol's own kind (events->timer fires) after `ms`. */
void tern__conn_wait(tern__conn *c, int kind, uint64_t ms);
void tern__conn_start_reading(tern__conn *c);
void tern__conn_stop_reading(tern__conn *c);
/* The most bytes one write of `req` should carry under its bandwidth budgets (SIZE_MAX: no
 * budget applies). */
size_t tern__conn_send_piece(const tern__conn *c, const tern_request_t *req);
#define TERN__MAX_WRITE_BUFS 5 /* pieces in one tern__conn_write */
/* Writes the pieces (encrypted on TLS connections); events->written reports the end, after
 * the write's bytes are paid for when a sending budget is over. Returns
 * 0 or a TERN_E* code (set on req). */
int tern__conn_write(tern__conn *c, tern_request_t *req, const uv_buf_t *bufs, unsigned nb);
/* Reports the ends of the writes that went out whole at once (engine->wrote): the engine
 * calls it when its outermost callback returns. */
void tern__conn_report_writes(tern_engine_t *eng);
/* The pool made the connection idle: on TLS, its OpenSSL buffers are freed when the engine's
 * outermost callback returns (tern__conn_trim_idle) if it is idle still. */
void tern__conn_went_idle(tern__conn *c);
void tern__conn_trim_idle(tern_engine_t *eng);
/* Starts the TLS handshake. Returns 0 or a TERN_E* code (set on the oldest request). */
int tern__conn_start_tls(tern__conn *c);
/* Decrypts what OpenSSL still holds into the buffer's free room. Same results as
 * tern__tls_recv. */
int tern__conn_tls_more(tern__conn *c);
void tern__conn_close(tern__conn *c);
/* Fails the connection: `req` (or the oldest request) gets `err`, the others are retried. */
void tern__conn_fail(tern__conn *c, tern_request_t *req, int err);

/* resolve.c: addresses for a connection */
/* The addresses pinned for host:port, or the resolver's unexpired answer, as a chain of our
 * own (free with tern__addrs_free); NULL when the resolver must be asked. */
struct addrinfo *tern__resolve_known(tern_engine_t *eng, const char *host, uint16_t port);
/* Keeps the resolver's answer for the engine's DNS cache timeout. */
void tern__resolve_remember(tern_engine_t *eng, const char *host, uint16_t port,
                            const struct addrinfo *res);
void tern__resolve_forget_all(tern_engine_t *eng);
void tern__addrs_free(struct addrinfo *a);

/* tls.c: OpenSSL as a filter on a connection's bytes; it reports by its return values */
/* The context for a request's TLS settings; NULL when out of memory. Load failures are kept
 * in the context and reported by tern__tls_start. */
tern__tls_ctx *tern__tls_ctx_get(tern_engine_t *eng, const tern_request_t *req);
void tern__tls_ctx_free_all(tern_engine_t *eng);
/* Starts the handshake on a connected socket. Returns 0 or a TERN_E* (set on the request). */
int tern__tls_start(tern__conn *c);
/* Ciphertext arrived at buf[len, len+n): decrypt in place, driving the handshake (which is
 * done when c->handshaking turns false). Returns 0, 1 when the peer sent close_notify, or a
 * TERN_E* code (set on the oldest request). */
int tern__tls_recv(tern__conn *c, size_t n);
/* The read BIO's state (tls_bio.c): ciphertext OpenSSL reads in place or from a copy kept
 * aside, and the TLS framing of what it has read. */
struct tern__tls_in {
  const char *view; /* ciphertext in c->buf not yet read by OpenSSL, during tern__tls_recv */
  size_t view_len;
  char *held; /* ciphertext kept aside, not yet read (the front is read first) */
  size_t held_len, held_cap;
  /* TLS framing of what OpenSSL has read: bytes of the record it is inside, and its length */
  size_t partial, rec_len;
  unsigned char hdr[5];
};
/* The read BIO's method, made on first use (NULL when out of memory). */
struct bio_method_st *tern__tls_in_method(void);
/* Keeps n bytes of ciphertext aside, after those already kept; false when out of memory. */
bool tern__tls_in_hold(struct tern__tls_in *in, const char *p, size_t n);

/* The same for ciphertext read `gap` bytes past len, at buf[len + gap, len + gap + n): OpenSSL
 * reads it in place when gap >= tern__tls_read_gap(c), else from a copy. */
int tern__tls_recv_at(tern__conn *c, size_t gap, size_t n);
/* How far past len a read should land for OpenSSL to read it in place: the plaintext OpenSSL
 * may write before it reads any of it (what it already holds) never reaches it. */
size_t tern__tls_read_gap(const tern__conn *c);
/* Handshake or alert bytes OpenSSL produced outside a request write, when no such write is
 * under way: *out is set and 1 returned; the bytes stay owned until tern__tls_output_done. */
int tern__tls_take_output(tern__conn *c, uv_buf_t *out);
void tern__tls_output_done(tern__conn *c);
/* Encrypts the plaintext pieces; *out is the ciphertext to write (owned by c->tls_req_bio). */
int tern__tls_encrypt(tern__conn *c, const uv_buf_t *bufs, unsigned nb, uv_buf_t *out);
void tern__tls_conn_free(tern__conn *c);
/* The request write finished: drop its ciphertext. */
void tern__tls_write_done(tern__conn *c);
/* OpenSSL still holds received bytes (plaintext or ciphertext) not yet in the buffer. */
bool tern__tls_pending(tern__conn *c);
/* Frees OpenSSL's record buffers if they hold nothing (an idle connection keeps none); with
 * busy_keeps, not while a reused connection has a request outstanding. */
void tern__tls_release_buffers(tern__conn *c, bool busy_keeps);
/* Whether ALPN chose "h2" on the connection. */
bool tern__tls_alpn_h2(const tern__conn *c);
/* Copies the connection's TLS facts (version, resumption) into the request. */
void tern__tls_note(tern__conn *c, tern_request_t *req);
void tern__tls_origin_free(tern__origin *o);

/* error.c */
int tern__map_uv_error(int uverr, int fallback);
/* Formats and routes one log line. Called through tern__log, which checks the level first. */
TERN__COLD void tern__log_line(const tern_engine_t *eng, tern_log_level level, tern_request_t *req,
                               const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define TERN__LOGGING(eng, level) ((eng)->config.log_cb && (level) >= (eng)->config.log_level)
/* Logs a line when the engine logs at `level`. A statement: the arguments are only evaluated,
 * and the line only formatted, when it does; otherwise each call site is a test and a branch
 * past it (several run for every request). */
#define tern__log(eng, level, req, ...)                                                            \
  do {                                                                                             \
    const tern_engine_t *tern__log_eng_ = (eng);                                                   \
    if (TERN__UNLIKELY(TERN__LOGGING(tern__log_eng_, (level))))                                    \
      tern__log_line(tern__log_eng_, (level), (req), __VA_ARGS__);                                 \
  } while (0)

#endif
