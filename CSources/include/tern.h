/*
 * tern.h — the public C ABI of the Tern HTTP/1.1 client engine.
 *
 * This is the only header a C user includes. It does not include uv.h: the loop type is
 * forward-declared so that callers who never embed the engine need no libuv headers.
 *
 * Conventions (see docs/c-api.md for the long form):
 *   - Every object is opaque and reached through typed setters and getters, so that no option
 *     changes a struct layout the caller compiled against.
 *   - Functions that can fail return 0 or a negative TERN_E* code; tern_strerror() names it.
 *     If a call that takes a callback returns an error, that callback will not run.
 *   - Strings passed in are copied; the caller may free them as soon as the call returns.
 *   - Codes and options are only ever appended, never renumbered or removed.
 */
#ifndef TERN_H
#define TERN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#  define TERN_API __declspec(dllexport)
#elif defined(__GNUC__) || defined(__clang__)
#  define TERN_API __attribute__((visibility("default")))
#else
#  define TERN_API
#endif

/* The header's version (the library's may differ: tern_version). CMakeLists.txt, tern.pc and
 * the CMake package take their version from these lines. Since 0.1. */
#define TERN_VERSION_MAJOR 0
#define TERN_VERSION_MINOR 5
#define TERN_VERSION_PATCH 0
#define TERN_VERSION_HEX                                                                           \
  ((TERN_VERSION_MAJOR << 16) | (TERN_VERSION_MINOR << 8) | TERN_VERSION_PATCH)

/** The library's version as TERN_VERSION_HEX, which may differ from the header's.
 *  Thread: any. Since 0.1. */
TERN_API unsigned tern_version(void);
/** The library's version as "MAJOR.MINOR.PATCH". Thread: any. Since 0.1. */
TERN_API const char *tern_version_string(void);
/** The versions of the library and of the libraries it runs on, as curl -V prints them:
 *  "libtern/0.5.0 libuv/1.44.2 OpenSSL/3.0.15 zlib/1.2.13 nghttp2/1.52.0", then " brotli/V"
 *  and " zstd/V" when built with those decoders. Read from the libraries at run time; the
 *  string is static. Thread: any. Since 0.5. */
TERN_API const char *tern_version_info(void);

/*
 * Errors. Negative codes; 0 is success. The list is append-only: a code keeps its number for
 * ever. XX(NAME, value, description). The map and tern_errno: since 0.1.
 */
#define TERN_ERRNO_MAP(XX)                                                                         \
  XX(EINVAL, -1, "invalid argument")                                                               \
  XX(ENOMEM, -2, "out of memory")                                                                  \
  XX(EBADURL, -3, "malformed or unsupported URL")                                                  \
  XX(EBADHEADER, -4, "invalid request header name or value")                                       \
  XX(EBUSY, -5, "request already submitted")                                                       \
  XX(ERESOLVE, -6, "could not resolve host")                                                       \
  XX(ECONNREFUSED, -7, "connection refused")                                                       \
  XX(ECONNECT, -8, "could not connect to host")                                                    \
  XX(ECONNRESET, -9, "connection reset by peer")                                                   \
  XX(ECONNECTTIMEOUT, -10, "connect timed out")                                                    \
  XX(EHEADERTIMEOUT, -11, "timed out waiting for response headers")                                \
  XX(EBODYTIMEOUT, -12, "response body stalled")                                                   \
  XX(ETOTALTIMEOUT, -13, "request exceeded its total time limit")                                  \
  XX(EPROTO, -14, "malformed HTTP response")                                                       \
  XX(EHEADERSIZE, -15, "response headers too large")                                               \
  XX(ECHUNKED, -16, "malformed chunked encoding")                                                  \
  XX(EPARTIAL, -17, "response body ended early")                                                   \
  XX(EEMPTYREPLY, -18, "server closed the connection without replying")                            \
  XX(ECANCELED, -19, "request canceled")                                                           \
  XX(EFILEWRITE, -20, "could not write the download file")                                         \
  XX(EFILEREAD, -21, "could not read the upload file")                                             \
  XX(ESHUTDOWN, -22, "engine shut down")                                                           \
  XX(EIO, -23, "network I/O error")                                                                \
  XX(ERANGE, -24, "requested range not satisfiable")                                               \
  XX(ECALLBACK, -25, "a callback reported an error")                                               \
  XX(EUNSUPPORTED, -26, "feature not supported by this build")                                     \
  XX(ETLSHANDSHAKE, -27, "TLS handshake failed")                                                   \
  XX(ETLSCERTEXPIRED, -28, "server certificate has expired")                                       \
  XX(ETLSCERTNOTYETVALID, -29, "server certificate is not yet valid")                              \
  XX(ETLSHOSTNAME, -30, "server certificate does not match the host name")                         \
  XX(ETLSUNKNOWNCA, -31, "server certificate is not signed by a trusted CA")                       \
  XX(ETLSVERIFY, -32, "server certificate verification failed")                                    \
  XX(ETLSCLIENTCERT, -33, "server requires a client certificate")                                  \
  XX(ETLSCERTFILE, -34, "could not load the client certificate or key")                            \
  XX(ETLSCAFILE, -35, "could not load the CA certificates")                                        \
  XX(EDECODE, -36, "malformed compressed body")                                                    \
  XX(EDECODELIMIT, -37, "decompressed body exceeds its size or ratio limit")                       \
  XX(ETOOMANYREDIRECTS, -38, "too many redirects")                                                 \
  XX(EREDIRECT, -39, "redirect refused")                                                           \
  XX(EAUTH, -40, "authentication failed")                                                          \
  XX(EPROXY, -41, "proxy error")                                                                   \
  XX(EQUEUEFULL, -42, "too many requests waiting in the queue")                                    \
  XX(EFILETOOLARGE, -43, "file larger than the server accepts")

typedef enum {
#define TERN_XX_(name, value, desc) TERN_##name = (value),
  TERN_ERRNO_MAP(TERN_XX_)
#undef TERN_XX_
      TERN_OK = 0
} tern_errno;

/** A sentence for an error code ("connection refused"); never NULL. Thread: any. Since 0.1. */
TERN_API const char *tern_strerror(int err);
/** The code's name without prefix ("ECONNREFUSED"); never NULL. Thread: any. Since 0.1. */
TERN_API const char *tern_err_name(int err);
/** Non-zero for the four timeout codes. Thread: any. Since 0.1. */
TERN_API int tern_error_is_timeout(int err);
/** Non-zero for the server-certificate verification codes (curl's exit 60).
 *  Thread: any. Since 0.1. */
TERN_API int tern_error_is_tls_verify(int err);

struct uv_loop_s; /* libuv's loop, for callers that embed the engine */

/* Opaque handles (see docs/c-api.md for their lifetimes). Since 0.1. */
typedef struct tern_engine tern_engine_t;
typedef struct tern_request tern_request_t;
typedef struct tern_config tern_config_t;
/* A bandwidth budget shared by a group of requests (tern_bandwidth_new). Since 0.3. */
typedef struct tern_bandwidth tern_bandwidth_t;

/* ---------------------------------------------------------------------------------------- */
/* Engine configuration                                                                      */
/* ---------------------------------------------------------------------------------------- */

/** A configuration holding defaults, in *out. Returns 0, or TERN_ENOMEM (*out is then NULL).
 *  Free with tern_config_free. Every constructor of the API has this shape:
 *  int tern_X_new(tern_X_t **out, ...). Thread: any. Since 0.1 (this signature since 0.2). */
TERN_API int tern_config_new(tern_config_t **out);
/** Frees a configuration; NULL is a no-op. Engines made from it keep their own copy.
 *  Thread: any, one at a time per config. Since 0.1. */
TERN_API void tern_config_free(tern_config_t *config);
/** Bytes of the one I/O buffer each connection owns (default 65536, minimum 1024).
 *  Thread: any, one at a time per config. Since 0.1. */
TERN_API int tern_config_set_buffer_size(tern_config_t *config, size_t bytes);
/** How long an idle pooled connection is kept (default 60000 ms; 0 disables pooling).
 *  Thread: any, one at a time per config. Since 0.1. */
TERN_API int tern_config_set_idle_timeout(tern_config_t *config, uint64_t ms);
/** How long a resolved name's addresses are reused by the engine's new connections (default
 *  60000 ms, as curl; 0: every connection asks the resolver). Pinned (tern_config_add_resolve)
 *  and literal addresses never ask it. Thread: any, one at a time per config. Since 0.2. */
TERN_API int tern_config_set_dns_cache_timeout(tern_config_t *config, uint64_t ms);
/** Upper bound on one response head, status line to blank line (default 65536). The head
 *  must also fit the connection buffer, so the effective bound is the smaller of the two.
 *  Thread: any, one at a time per config. Since 0.1. */
TERN_API int tern_config_set_max_header_size(tern_config_t *config, size_t bytes);
/** Connections per origin, busy and idle (default 6, as browsers and URLSession open; 0:
 *  unlimited). Requests beyond them wait for a connection of their origin to come free,
 *  counted by TERN_STAT_REQUESTS_WAITING. The default was 0 (unlimited) before 0.5.
 *  Thread: any, one at a time per config. Since 0.1. */
TERN_API int tern_config_set_max_connections_per_origin(tern_config_t *config, unsigned n);
/** Requests in progress at once in the whole engine (default 0: unlimited). A request is in
 *  progress from the moment it starts (its connection is sought) until it completes, redirects,
 *  challenges and retries included. Beyond `n`, submitted requests wait in the engine, highest
 *  priority first (tern_request_set_priority), equal priorities in submission order, and start
 *  as others complete. A waiting request that is canceled completes at once with
 *  TERN_ECANCELED and never reaches a server. Works beside the per-origin limit
 *  (tern_config_set_max_connections_per_origin): a request admitted here may still wait for a
 *  connection slot of its origin. TERN_STAT_REQUESTS_WAITING counts the waiting ones.
 *  Thread: any, one at a time per config. Since 0.3. */
TERN_API int tern_config_set_max_active_requests(tern_config_t *config, unsigned n);
/** The engine's shared bandwidth budget in bytes per second, for every request of the engine
 *  together (default 0: none): receiving (bytes read from sockets) and sending (request bytes
 *  written to sockets). Counted on the socket, so over TLS the ciphertext counts. Connections
 *  share it about equally; bursts stay within about a tenth of a second of the rate. Change it
 *  while the engine runs with tern_engine_set_max_speed.
 *  Thread: any, one at a time per config. Since 0.3. */
TERN_API int tern_config_set_max_recv_speed(tern_config_t *config, uint64_t bytes_per_second);
/** The sending half of the engine's budget (see tern_config_set_max_recv_speed).
 *  Thread: any, one at a time per config. Since 0.3. */
TERN_API int tern_config_set_max_send_speed(tern_config_t *config, uint64_t bytes_per_second);
/** How many idempotent requests may be queued on one connection (default 1: no pipelining).
 *  A request opts in with tern_request_set_pipelining.
 *  Thread: any, one at a time per config. Since 0.1. */
TERN_API int tern_config_set_pipeline_depth(tern_config_t *config, unsigned depth);
/** What an HTTP/2 origin does with a request when every stream its connections may carry
 *  (the server's SETTINGS_MAX_CONCURRENT_STREAMS) is in use: 0 (default) waits for a stream to
 *  free up; non-zero opens another connection, within tern_config_set_max_connections_per_origin.
 *  Thread: any, one at a time per config. Since 0.4. */
TERN_API int tern_config_set_http2_open_when_full(tern_config_t *config, int enabled);
/** The User-Agent sent when a request sets none (default "tern/VERSION"; NULL or "" sends none).
 *  Thread: any, one at a time per config. Since 0.1. */
TERN_API int tern_config_set_user_agent(tern_config_t *config, const char *user_agent);
/** The TLS settings of every request that sets none of its own (the tern_request_set_tls_*
 *  calls below): verification (default 1; 0 is curl's -k), a CA file or an OpenSSL hashed CA
 *  directory in place of the system store, a client certificate (PEM chain) with its key (NULL:
 *  in the certificate file) and the key's password. A request that calls any
 *  tern_request_set_tls_* function has its own settings instead, starting from the library's
 *  defaults. The engine keeps copies; requests use them without copying. Strings are copied;
 *  NULL clears. Thread: any, one at a time per config. Since 0.4. */
TERN_API int tern_config_set_tls_verify(tern_config_t *config, int verify);
/** See tern_config_set_tls_verify. Thread: any, one at a time per config. Since 0.4. */
TERN_API int tern_config_set_tls_ca_file(tern_config_t *config, const char *path);
/** See tern_config_set_tls_verify. Thread: any, one at a time per config. Since 0.4. */
TERN_API int tern_config_set_tls_ca_path(tern_config_t *config, const char *dir);
/** See tern_config_set_tls_verify. TERN_EINVAL for a key or password without a certificate.
 *  Thread: any, one at a time per config. Since 0.4. */
TERN_API int tern_config_set_tls_client_cert(tern_config_t *config, const char *cert_file,
                                             const char *key_file, const char *password);

/** Log levels, least severe first. Since 0.1. */
typedef enum {
  TERN_LOG_DEBUG = 0, /* connection reuse, addresses tried, timers */
  TERN_LOG_INFO = 1,  /* request lifecycle: sent, status, timing */
  TERN_LOG_WARN = 2,  /* retries, connections dropped by the peer */
  TERN_LOG_ERROR = 3  /* failed requests */
} tern_log_level;
/** Receives the engine's lifecycle log; `message` is valid during the call. `req` is the
 *  request concerned, or NULL for connection-only events.
 *  Thread: called on the loop thread. Since 0.1. */
typedef void (*tern_log_cb)(tern_log_level level, const char *message, tern_request_t *req,
                            void *user_data);
/** Pins a host name to addresses instead of asking DNS, like curl's --resolve:
 *  "HOST:PORT:ADDR[,ADDR...]" (IPv6 addresses in brackets). Addresses are tried in order.
 *  Thread: any, one at a time per config. Since 0.1. */
TERN_API int tern_config_add_resolve(tern_config_t *config, const char *entry);
/** Routes the engine's log to `cb` for levels >= min_level (default: no log).
 *  Thread: any, one at a time per config. Since 0.1. */
TERN_API int tern_config_set_log_cb(tern_config_t *config, tern_log_cb cb, tern_log_level min_level,
                                    void *user_data);

/* ---------------------------------------------------------------------------------------- */
/* Engine                                                                                    */
/* ---------------------------------------------------------------------------------------- */

/** An engine with its own loop thread. `config` may be NULL for defaults; it is copied.
 *  Both constructors open /dev/null on any of descriptors 0-2 that is closed (libuv must never
 *  be handed those numbers) and leave it open. Thread: any. Since 0.1. */
TERN_API int tern_engine_new(tern_engine_t **out, const tern_config_t *config);
/** An engine on the caller's loop. Callbacks run on that loop's thread. The caller must keep
 *  running the loop; tern_engine_free must then be called on the loop thread, and the loop run
 *  once more so the engine's handles close. A request submitted on the loop's thread starts
 *  when the loop next runs, with no wake-up: a caller that watches uv_backend_fd() instead of
 *  running the loop must run it (UV_RUN_NOWAIT) after submitting. Thread: the loop's thread.
 *  Since 0.1. */
TERN_API int tern_engine_new_on_loop(tern_engine_t **out, struct uv_loop_s *loop,
                                     const tern_config_t *config);
/** Stops the engine: requests still pending complete with TERN_ESHUTDOWN, connections close,
 *  and an owned loop thread is joined. NULL is a no-op.
 *  Thread: for an engine from tern_engine_new, any but its loop thread; for one on the caller's
 *  loop, that loop's thread outside the engine's callbacks. No other call on the engine may
 *  overlap or follow it. Since 0.1. */
TERN_API void tern_engine_free(tern_engine_t *engine);
/** Hands a request to the engine; callable from any thread. On success the engine holds a
 *  reference until the request completes, and the complete callback runs exactly once, on the
 *  loop thread. On error nothing runs and the request may be changed and submitted again.
 *  Thread: any. Since 0.1. */
TERN_API int tern_engine_submit(tern_engine_t *engine, tern_request_t *req);
/** Submits `req` to `engine` and waits on the calling thread until it completes: the blocking
 *  form of tern_engine_submit, for a program with nothing else to do meanwhile. Returns the
 *  request's result, 0 or the TERN_E* code it completed with (as tern_request_get_error); or
 *  the error of tern_engine_submit (TERN_EBUSY, TERN_EBADURL, TERN_ESHUTDOWN...), in which case
 *  nothing ran and tern_request_is_done is 0. An HTTP error status is a completed request
 *  (0): tern_request_get_status gives it. Everything set on the request works as with
 *  tern_engine_submit, its own complete callback included (it runs on the loop thread before
 *  this call returns); afterwards the getters read the response from the calling thread.
 *  Several threads may each perform a request on one engine at once. Another thread may cancel
 *  the request meanwhile (TERN_ECANCELED) but must not free it. For an engine on the caller's
 *  loop (tern_engine_new_on_loop), that loop must keep running on its own thread meanwhile.
 *  It would stall the loop it runs on: on this engine's loop thread it returns TERN_EINVAL at
 *  once and submits nothing, and it must not be called from another engine's callbacks.
 *  Thread: any but the engine's loop thread. Since 0.5. */
TERN_API int tern_request_perform(tern_engine_t *engine, tern_request_t *req);
/** Runs fn(arg) on the engine's loop thread, in the order of the calls: when called from inside
 *  an engine callback, right after that callback returns (no wake-up); from any other thread,
 *  soon, through the loop's wake-up. Lets a caller move work (such as resuming a task) onto
 *  the loop thread. fn must not block. Calls not yet run when the engine is freed are dropped.
 *  Thread: any. Since 0.2. */
TERN_API int tern_engine_call(tern_engine_t *eng, void (*fn)(void *arg), void *arg);
/** Runs fn(arg) on the loop thread once the current callback and everything it set going have
 *  run: requests submitted meanwhile are started (their bytes handed to the socket when it
 *  takes them) and completed requests are released first. For work that must not delay the
 *  next request, such as freeing what a completed one leaves behind. Only from inside an
 *  engine callback on the loop thread; elsewhere it returns TERN_EINVAL and the caller does
 *  the work itself. The call always runs before the outermost callback returns.
 *  Thread: the loop thread, in an engine callback. Since 0.4. */
TERN_API int tern_engine_defer(tern_engine_t *eng, void (*fn)(void *arg), void *arg);

/** Changes the engine's shared budget (tern_config_set_max_recv_speed, _send_speed) while it
 *  runs; 0 lifts a direction's budget. Takes effect within about 0.1 s, also for connections
 *  waiting for the budget. Thread: any. Since 0.3. */
TERN_API int tern_engine_set_max_speed(tern_engine_t *engine, uint64_t recv_bytes_per_second,
                                       uint64_t send_bytes_per_second);
/** The bandwidth the engine actually used, as average bytes per second over about the last
 *  second, socket bytes of every request (ASIHTTPRequest's averageBandwidthUsedPerSecond),
 *  whether a budget is set or not. Either pointer may be NULL.
 *  Thread: any. Since 0.3. */
TERN_API int tern_engine_get_bandwidth_used(tern_engine_t *engine, uint64_t *recv_bytes_per_second,
                                            uint64_t *send_bytes_per_second);

/** A bandwidth budget for a group of requests (a queue, say), in bytes per second for
 *  receiving and for sending (0: no budget for that direction; the meter still counts). A
 *  request under a group budget (tern_request_set_bandwidth) obeys both the group's and its
 *  engine's. Lifetime: reference counted. The caller holds one reference, dropped by
 *  tern_bandwidth_free; every request set to it holds its own until the request is freed, so
 *  the caller may free the budget as soon as it has set it on its requests. One budget may
 *  serve requests of several engines. Returns 0, TERN_EINVAL or TERN_ENOMEM (*out NULL).
 *  Thread: any. Since 0.3. */
TERN_API int tern_bandwidth_new(tern_bandwidth_t **out, uint64_t recv_bytes_per_second,
                                uint64_t send_bytes_per_second);
/** Drops the caller's reference; NULL is a no-op. Requests using the budget keep it alive.
 *  Thread: any, once per tern_bandwidth_new. Since 0.3. */
TERN_API void tern_bandwidth_free(tern_bandwidth_t *bw);
/** Changes a group budget; 0 lifts a direction's budget. Takes effect within about 0.1 s.
 *  Thread: any. Since 0.3. */
TERN_API int tern_bandwidth_set_max_speed(tern_bandwidth_t *bw, uint64_t recv_bytes_per_second,
                                          uint64_t send_bytes_per_second);
/** The bandwidth the group's requests used, average bytes per second over about the last
 *  second (as tern_engine_get_bandwidth_used). Either pointer may be NULL.
 *  Thread: any. Since 0.3. */
TERN_API int tern_bandwidth_get_used(tern_bandwidth_t *bw, uint64_t *recv_bytes_per_second,
                                     uint64_t *send_bytes_per_second);

/** Engine counters, readable from any thread at any time. Since 0.1. */
typedef enum {
  TERN_STAT_CONNECTIONS_OPENED = 0, /* TCP connections opened since start */
  TERN_STAT_CONNECTIONS_OPEN = 1,   /* connections open now (busy or idle) */
  TERN_STAT_CONNECTIONS_IDLE = 2,   /* idle connections in the pool now */
  TERN_STAT_REQUESTS_ACTIVE = 3,    /* submitted and not yet completed */
  TERN_STAT_REQUESTS_COMPLETED = 4, /* completed since start, any outcome */
  TERN_STAT_REUSED = 5,             /* requests sent on a reused connection */
  TERN_STAT_RETRIES = 6,            /* silent retries after a stale pooled connection */
  TERN_STAT_REQUESTS_LIVE = 7,      /* request objects allocated and not yet freed (all engines) */
  TERN_STAT_DNS_LOOKUPS = 8,        /* names handed to the resolver (not pinned, literal or cached);
                                     * since 0.2 */
  TERN_STAT_REQUESTS_WAITING = 9,   /* submitted requests waiting now: for a slot of
                                     * tern_config_set_max_active_requests, or for a connection
                                     * slot of their origin; since 0.3 */
  TERN_STAT_BYTES_RECEIVED = 10,    /* bytes read from sockets (TLS: ciphertext); since 0.3 */
  TERN_STAT_BYTES_SENT = 11         /* bytes of requests written to sockets (TLS: ciphertext;
                                     * handshake bytes not counted); since 0.3 */
} tern_stat;
/** One counter of this engine; TERN_STAT_REQUESTS_LIVE counts every engine's requests (and
 *  `engine` may then be NULL). 0 for an unknown counter. Thread: any. Since 0.1. */
TERN_API uint64_t tern_engine_get_stat(const tern_engine_t *engine, tern_stat stat);

/* ---------------------------------------------------------------------------------------- */
/* Requests                                                                                  */
/* ---------------------------------------------------------------------------------------- */

/** Which phase a progress report is about. Since 0.1. */
typedef enum { TERN_PROGRESS_UPLOAD = 1, TERN_PROGRESS_DOWNLOAD = 2 } tern_progress_state;

/** Runs once per request with 0 or a TERN_E* code.
 *  Thread: called on the loop thread. Since 0.1. */
typedef void (*tern_complete_cb)(tern_request_t *req, int status, void *user_data);
/** Progress: percent is 0..100 and never decreases; it stays 0 while the total is unknown and
 *  reaches 100 exactly once per state when that phase completes. -1 reports a failure (once, just
 *  before the complete callback). Return non-zero to cancel (completion with TERN_ECANCELED).
 *  Thread: called on the loop thread. Since 0.1. */
typedef int (*tern_progress_cb)(tern_request_t *req, tern_progress_state state, int percent,
                                uint64_t done, uint64_t total, void *user_data);
/** Runs when a final (non-1xx) response head of a hop has been parsed, before any of its body;
 *  the header getters work inside it, and tern_request_is_final_hop says whether the engine
 *  follows or answers this head (since 0.2: the hop is decided before the callback, so for a
 *  401 or 407 the auth callback, when consulted, has run already). Return non-zero to cancel.
 *  Thread: called on the loop thread. Since 0.1. */
typedef int (*tern_hop_response_cb)(tern_request_t *req, int status, void *user_data);
/** Receives body bytes as they arrive (the sink of tern_request_set_data_cb). Return non-zero
 *  to abort with TERN_ECALLBACK. Thread: called on the loop thread. Since 0.1. */
typedef int (*tern_data_cb)(tern_request_t *req, const void *data, size_t len, void *user_data);
/** Supplies request body bytes: fill at most `cap` bytes of `buf`, return the count, 0 at the
 *  end, TERN_READ_WAIT when no bytes are ready yet (sending waits until
 *  tern_request_resume_send; since 0.2), or another negative value to abort with
 *  TERN_EFILEREAD. It must not block: the engine's other requests wait while it runs.
 *  Thread: called on the loop thread. Since 0.1. */
typedef int64_t (*tern_read_cb)(tern_request_t *req, void *buf, size_t cap, void *user_data);

/** A new request in *out: method GET, no URL. Returns 0, or TERN_ENOMEM (*out is then NULL).
 *  Free with tern_request_free. Thread: any. Since 0.1 (this signature since 0.2). */
TERN_API int tern_request_new(tern_request_t **out);
/** Drops the caller's reference. A request still in flight is canceled and none of its
 *  callbacks run any more; its memory goes when the engine lets go of it. NULL is a no-op.
 *  Thread: any. Since 0.1. */
TERN_API void tern_request_free(tern_request_t *req);
/** Cancels from any thread: the request completes with TERN_ECANCELED unless it already
 *  completed. Idempotent. Thread: any. Since 0.1. */
TERN_API void tern_request_cancel(tern_request_t *req);

/* Setters: valid before submission; after it they return TERN_EBUSY. */

/** http:// URL (https:// with TLS). Rejects control characters, spaces and bad ports.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_url(tern_request_t *req, const char *url);
/** Any token method ("GET", "PROPFIND"); HEAD reads no body.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_method(tern_request_t *req, const char *method);
/** Adds a header. Names must be tokens; values must hold no CR, LF or NUL. Host, User-Agent and
 *  Accept set here replace the engine's own; "Connection: close" makes the request
 *  non-persistent. Content-Length and Transfer-Encoding are the engine's to frame the body:
 *  setting them is TERN_EBADHEADER. Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_add_header(tern_request_t *req, const char *name, const char *value);
/** Does not send the engine's own field of this name (curl's -H "Name:"): Host, User-Agent,
 *  Accept, Accept-Encoding, Connection and Expect (which then also skips the wait for 100
 *  Continue) are generated by default; other names change nothing. Fields the caller adds
 *  with tern_request_add_header are still sent (an empty value goes out as "Name:", curl's
 *  -H "Name;"). Content-Length and Transfer-Encoding frame the body: TERN_EBADHEADER.
 *  Thread: the request's owner, before submit. Since 0.2. */
TERN_API int tern_request_omit_header(tern_request_t *req, const char *name);
/** A body from memory; copied. Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_body(tern_request_t *req, const void *data, size_t len);
/** A body from a file, bytes [offset, end) (end 0: to the end of the file). Read through the
 *  connection buffer while sending; never loaded whole.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_body_file(tern_request_t *req, const char *path, uint64_t offset,
                                        uint64_t end);
/** Appends a memory segment (copied) to a body made of segments, sent in order: the shape of
 *  multipart/form-data, where part headers come from memory and file contents from disk.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_add_body_segment(tern_request_t *req, const void *data, size_t len);
/** Appends bytes [offset, end) of a file (end 0: to its end) to a body made of segments. The
 *  file is read through the connection buffer while sending, never loaded whole; its size is
 *  taken when the request starts, so the body's Content-Length is known up front.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_add_body_segment_file(tern_request_t *req, const char *path,
                                                uint64_t offset, uint64_t end);
/** A body from a callback. length -1 sends it chunked.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_body_cb(tern_request_t *req, int64_t length, tern_read_cb cb,
                                      void *user_data);
/** Writes a 2xx body into a file instead of memory (another status keeps up to 1 MiB of its body
 *  in memory and leaves the file alone; the file is opened only once a 2xx head arrives).
 *  offset/end select bytes [offset, end) (end 0: open-ended) with a Range request, and the file
 *  receives exactly the bytes returned. With resume (1), an existing
 *  file is continued from its current size (Range from offset+size) and a 416 on a complete
 *  file counts as success; a server ignoring the range restarts the file from zero.
 *  The body goes to PATH.part, which replaces PATH only when complete; an existing PATH stays
 *  that file: a symlink is written through, mode, owner and hard links are kept, a file the
 *  caller may not write fails with TERN_EFILEWRITE before any byte, and where no .part can be
 *  made beside it (read-only directory) PATH is written in place. Devices, pipes and /dev/
 *  names are written in place; a directory fails with TERN_EFILEWRITE.
 *  TERN_RESUME_PART (2) continues only what an earlier attempt left in FILE.part (never FILE
 *  itself) and keeps FILE.part when this attempt fails: the mode for retries, whose caller
 *  removes FILE.part once it gives up (since 0.2).
 *  Thread: the request's owner, before submit. Since 0.1. */
#define TERN_RESUME_PART 2
TERN_API int tern_request_set_download_file(tern_request_t *req, const char *path, uint64_t offset,
                                            uint64_t end, int resume);
/** Non-zero sends the body of a final non-2xx response to the download file too, replacing
 *  the file when complete as a 2xx body would (curl's -o without -f); ignored with resume, so a
 *  partial download is never overwritten by an error page. Default 0.
 *  Thread: the request's owner, before submit. Since 0.2. */
TERN_API int tern_request_set_download_any_status(tern_request_t *req, int enabled);
/** Pauses (non-zero) or resumes (0) reading this request's response from its connection, for
 *  a consumer that fell behind: bytes already read are still delivered, then the connection
 *  reads nothing more (TCP flow control slows the server) until resumed; the body timeout does
 *  not run while paused. Thread: any, before or during the request. Since 0.2. */
TERN_API int tern_request_pause_receive(tern_request_t *req, int paused);
/** What a body callback (tern_read_cb) returns when it has no bytes yet but has not ended:
 *  the request head and what was read so far are sent, the response is read meanwhile (an
 *  early 413 or 401 ends the upload), and no body timeout runs while it waits.
 *  Thread: any. Since 0.2. */
#define TERN_READ_WAIT INT64_MIN
/** The body callback has bytes again: it is called anew. Harmless when the request is not
 *  waiting (or done). Returns 0, or TERN_ENOMEM.
 *  Thread: any. Since 0.2. */
TERN_API int tern_request_resume_send(tern_request_t *req);
/** Streams the body to `cb` instead of keeping it; nothing is accumulated.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_data_cb(tern_request_t *req, tern_data_cb cb, void *user_data);
/** The callback run once when the request completes (see tern_complete_cb).
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_complete_cb(tern_request_t *req, tern_complete_cb cb,
                                          void *user_data);
/** Upload and download progress reports (see tern_progress_cb).
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_progress_cb(tern_request_t *req, tern_progress_cb cb,
                                          void *user_data);

/** Non-zero: a response that arrives whole in one read (its final head, with no body or all
 *  of its Content-Length body in the same bytes) is reported by the complete callback alone.
 *  The hop-response callback does not run for that final head and the progress callback does
 *  not report the download's 100; nothing else runs on the loop thread between the head and
 *  the completion, so a caller that only records them (cookies, byte counts) reads the same
 *  after completion: tern_request_is_final_hop, the header getters, tern_request_get_offset
 *  and tern_request_get_bytes_received. Heads the engine follows or answers (redirects,
 *  challenges), and responses read over more than one read or over HTTP/2, are reported as
 *  without it. For callers that wait for the end anyway: it saves two callbacks per small
 *  response. Default 0. Thread: the request's owner, before submit. Since 0.4. */
TERN_API int tern_request_set_whole_at_completion(tern_request_t *req, int on);

/** The callback run for each hop's final response head (see tern_hop_response_cb).
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_hop_response_cb(tern_request_t *req, tern_hop_response_cb cb,
                                              void *user_data);

/** Sends "Expect: 100-continue" when the body holds at least min_body bytes or has no known
 *  length (default 1 MiB; -1: never), then waits up to wait_ms (default 1000) for the server's
 *  100 before sending the body anyway. A final response in the meantime (401, 413, 417, ...)
 *  ends the exchange without the body being sent, and that connection is not reused.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_expect_continue(tern_request_t *req, int64_t min_body,
                                              uint64_t wait_ms);
/** Non-zero sends the body gzip-compressed on the fly ("Content-Encoding: gzip", chunked),
 *  streaming through zlib as it is sent; the body is never compressed whole in memory.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_body_gzip(tern_request_t *req, int enabled);
/** Non-zero when a final response arrived before the request body was sent (see above).
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API int tern_request_is_body_skipped(const tern_request_t *req);

/* ---- Hops: redirects, authentication, proxies ----
 * A request is one exchange as the user sees it; it may take several hops (redirects, 401/407
 * challenges, a CONNECT through a proxy). Every hop's response head reaches the hop-response
 * callback; the hop-request callback runs before each hop is sent. Only the last hop's body
 * reaches the sink. */

/** Follows 301, 302, 303, 307 and 308 up to `max` times (0: not at all, the default);
 *  one more is TERN_ETOOMANYREDIRECTS. 303, and 301/302 after POST, become GET without a body,
 *  as browsers and curl do; 307/308 keep the method and body (a callback body cannot be
 *  replayed: TERN_EREDIRECT). Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_follow_redirects(tern_request_t *req, unsigned max);
/** Flags for tern_request_set_redirect_flags. Since 0.1. */
typedef enum {
  TERN_REDIRECT_POST_301 = 1,           /* keep POST on 301 (curl --post301) */
  TERN_REDIRECT_POST_302 = 2,           /* keep POST on 302 (curl --post302) */
  TERN_REDIRECT_POST_303 = 4,           /* keep POST on 303 (curl --post303) */
  TERN_REDIRECT_ALLOW_DOWNGRADE = 8,    /* follow https -> http (refused by default) */
  TERN_REDIRECT_TRUST_CROSS_ORIGIN = 16 /* keep Authorization/Cookie/credentials across origins */
} tern_redirect_flags;
/** TERN_REDIRECT_* flags, OR-ed together (default 0); unknown bits are TERN_EINVAL.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_redirect_flags(tern_request_t *req, unsigned flags);
/** Runs before each hop is sent, with the hop's URL; headers added with
 *  tern_request_add_hop_header inside it go on that hop only (e.g. Cookie for that URL).
 *  Return non-zero to cancel. Thread: called on the loop thread. Since 0.1. */
typedef int (*tern_hop_request_cb)(tern_request_t *req, const char *url, void *user_data);
/** The callback run before each hop is sent (see tern_hop_request_cb).
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_hop_request_cb(tern_request_t *req, tern_hop_request_cb cb,
                                             void *user_data);
/** Adds a header to the hop being prepared (TERN_EINVAL outside the hop-request callback).
 *  Thread: the loop thread, inside the hop-request callback. Since 0.1. */
TERN_API int tern_request_add_hop_header(tern_request_t *req, const char *name, const char *value);
/** The URL of the last hop (after redirects); the URL as set before.
 *  Thread: the request's owner before submit; then as the getters: after completion, or inside
 *  its callbacks on the loop thread. Since 0.1. */
TERN_API const char *tern_request_get_effective_url(const tern_request_t *req);
/** Inside the hop-response callback: non-zero when the head just received is the request's
 *  final response (its body goes to the sink), 0 when the engine follows it (a redirect) or
 *  answers it (a 401 or 407 with credentials) in another hop, which may still fail (too many
 *  redirects, a refused downgrade). After completion: non-zero when the last head received
 *  ended the hops. 0 before any head.
 *  Thread: inside the hop-response callback on the loop thread, or after completion.
 *  Since 0.2. */
TERN_API int tern_request_is_final_hop(const tern_request_t *req);
/** How many redirects were followed.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API unsigned tern_request_get_redirect_count(const tern_request_t *req);

/** Authentication schemes, OR-ed. TERN_AUTH_NTLM (since 0.3) authenticates the connection, not
 *  the request (MS-NLMP): the NEGOTIATE and AUTHENTICATE messages go on the one kept-alive
 *  connection that carried the challenge, and a connection that took part in it is never handed
 *  to a request with other (or no) credentials. The user may name a domain ("DOMAIN\\user").
 *  The response is NTLMv2; NTLMv1 only with TERN_AUTH_NTLM_V1 too, and only when the server's
 *  challenge carries no target information (so NTLMv2 cannot be computed); otherwise such a
 *  challenge is not answered. TERN_AUTH_ANY includes NTLM (as curl's CURLAUTH_ANY does; it was
 *  Basic and Digest before 0.3) but not NTLMv1. With a choice, NTLM is preferred to Digest, and
 *  Digest to Basic. Since 0.1. */
typedef enum {
  TERN_AUTH_BASIC = 1,
  TERN_AUTH_DIGEST = 2,
  TERN_AUTH_NTLM = 4,
  TERN_AUTH_ANY = 7,
  TERN_AUTH_NTLM_V1 = 8
} tern_auth_scheme;
/** Credentials for the origin (and only it: never sent to another origin after a redirect
 *  unless TERN_REDIRECT_TRUST_CROSS_ORIGIN). With TERN_AUTH_BASIC alone, Basic is sent
 *  preemptively; otherwise the server's 401 challenge picks the scheme (Digest: MD5, MD5-sess,
 *  SHA-256, SHA-512-256, qop=auth, stale=true; NTLM: see tern_auth_scheme, its NEGOTIATE goes
 *  without the body). A body already sent is sent again whole.
 *  user:password in the URL count as credentials when none are set.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_auth(tern_request_t *req, const char *user, const char *password,
                                   unsigned schemes);
/** Called on a 401 or 407 challenge for which no (more) credentials are known; supply them with
 *  tern_request_supply_auth inside the callback and return non-zero to retry, or return 0 to
 *  stop and complete with the challenge response. `scheme` is the one the engine would answer
 *  ("NTLM", "Digest", "Basic", or "" when none; NTLM since 0.3, with realm "").
 *  Thread: called on the loop thread. Since 0.1. */
typedef int (*tern_auth_cb)(tern_request_t *req, int is_proxy, const char *scheme,
                            const char *realm, void *user_data);
/** The callback asked for credentials on a 401 or 407 challenge (see tern_auth_cb).
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_auth_cb(tern_request_t *req, tern_auth_cb cb, void *user_data);
/** Credentials for the challenge the auth callback was called for (TERN_EINVAL outside it).
 *  Thread: the loop thread, inside the auth callback. Since 0.1. */
TERN_API int tern_request_supply_auth(tern_request_t *req, const char *user, const char *password);
/** Sends the request through a proxy, "SCHEME://[user:password@]host:port" (port 1080 when
 *  none; NULL or "": no proxy). SCHEME http: an HTTP proxy, http URLs in absolute form, https
 *  URLs through a CONNECT tunnel. SCHEME socks5 or socks5h (since 0.2): a SOCKS5 proxy (RFC
 *  1928) that opens a TCP tunnel to the origin for every connection, with the user name and
 *  password of RFC 1929 when credentials are given; socks5 resolves the host name here and
 *  gives the proxy an address, socks5h gives the proxy the name. socks4 and socks4a likewise
 *  (SOCKS4 takes IPv4 addresses only; the user name goes as its user id). A SOCKS proxy's
 *  failures are TERN_EPROXY with its reply in the message. Connections are pooled per proxy.
 *  The proxy is chosen again for every hop (since 0.2): a scheme's own proxy (tern_request_set_scheme_proxy) wins over this one, and a host
 *  of the no-proxy list goes direct. Credentials in a proxy URL go to that proxy only.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_proxy(tern_request_t *req, const char *proxy_url);
/** Proxy credentials (Basic preemptive with TERN_AUTH_BASIC alone; else per 407 challenge)
 *  for whichever proxy a hop uses (curl's -U); they win over credentials in a proxy URL. A
 *  NULL user sets only the schemes, for the credentials of proxy URLs (default TERN_AUTH_ANY;
 *  since 0.2).
 *  Credentials supplied in the auth callback stay with the proxy that asked: a hop through
 *  another proxy starts again from these (or that proxy's URL's).
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_proxy_auth(tern_request_t *req, const char *user,
                                         const char *password, unsigned schemes);
/** The proxy for hops to URLs of one scheme, "http" or "https" (curl's http_proxy and
 *  https_proxy), instead of the one of tern_request_set_proxy; NULL or "" removes it. Same
 *  syntax as tern_request_set_proxy; other schemes are TERN_EINVAL. A redirect from http to
 *  https moves to the https proxy.
 *  Thread: the request's owner, before submit. Since 0.2. */
TERN_API int tern_request_set_scheme_proxy(tern_request_t *req, const char *scheme,
                                           const char *proxy_url);
/** Hosts reached without a proxy, checked for every hop (curl's NO_PROXY and --noproxy):
 *  comma- or space-separated names, each matching itself and its subdomains (a leading dot
 *  changes nothing: "example.com" and ".example.com" both match www.example.com, not
 *  myexample.com), IP addresses and CIDR ranges ("10.0.0.0/8", "fd00::/8"; an address never
 *  matches by suffix), ports ignored, case ignored; "*" alone matches every host. NULL or ""
 *  clears the list. Thread: the request's owner, before submit. Since 0.2. */
TERN_API int tern_request_set_no_proxy(tern_request_t *req, const char *hosts);
/** The proxies to try, in the syntax of a proxy auto-configuration (PAC) script's answer:
 *  entries separated by ";", each "DIRECT", "PROXY host:port" (or "HTTP host:port": an HTTP
 *  proxy), "SOCKS host:port" or "SOCKS4 host:port" (SOCKS4), "SOCKS5 host:port" (SOCKS5, names
 *  resolved by the proxy); others (e.g. "HTTPS") are skipped. The first entry is used; when it
 *  cannot be reached (refused, unreachable, unresolvable, connect timeout) the hop goes again
 *  through the next one, as browsers fail over. Replaces tern_request_set_proxy, the scheme
 *  proxies and the no-proxy list for every hop; proxy credentials
 *  (tern_request_set_proxy_auth) go to whichever proxy is used. NULL or "": no list.
 *  Thread: the request's owner, before submit. Since 0.2. */
TERN_API int tern_request_set_proxy_list(tern_request_t *req, const char *list);
/** Asked for every hop (the first, and each redirect), on the loop thread: which proxies to try
 *  for `url` (whose host is `host`), written into `out` (`cap` bytes, NUL-terminated) in the
 *  syntax of tern_request_set_proxy_list; return 0. Return a negative TERN_E* code to end the
 *  request with it, `out` then holding the message. It may take time (a PAC script's
 *  evaluation), which holds the loop meanwhile: keep it bounded.
 *  Thread: the loop thread. Since 0.2. */
typedef int (*tern_proxy_cb)(tern_request_t *req, const char *url, const char *host, char *out,
                             size_t cap, void *user_data);
/** Sets the callback above (NULL: none); it wins over tern_request_set_proxy_list.
 *  Thread: the request's owner, before submit. Since 0.2. */
TERN_API int tern_request_set_proxy_callback(tern_request_t *req, tern_proxy_cb cb,
                                             void *user_data);
/** The status of the proxy's answer to the last CONNECT this request sent (200 when a tunnel
 *  opened, 407, 403, ...), or 0 when it sent none (no proxy, plain http, or a tunnel reused
 *  from the pool): curl's %{http_connect}.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.2. */
TERN_API int tern_request_get_connect_status(const tern_request_t *req);

/** Response decoding modes. Since 0.1. */
typedef enum {
  TERN_DECODE_AUTO = 0, /* send Accept-Encoding: gzip, deflate (and br, zstd when built in) and
                         * decode such bodies (default); a coding the build cannot decode, or
                         * several stacked, fails the request with TERN_EDECODE */
  TERN_DECODE_RAW = 1,  /* send Accept-Encoding, deliver the body as sent (still encoded) */
  TERN_DECODE_OFF = 2   /* send no Accept-Encoding (unless added as a header); decode nothing */
} tern_decode_mode;
/** How the response's Content-Encoding is asked for and decoded (default TERN_DECODE_AUTO).
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_decoding(tern_request_t *req, tern_decode_mode mode);
/** Bounds on a decoded body: at most max_bytes (0: no bound) and at most max_ratio decoded
 *  bytes per received byte (default 200; 0: no bound) once past 16 MiB for a body kept in
 *  memory, or past 256 MiB for one streamed to a file or callback (so real, very compressible
 *  bodies pass; a bomb is stopped there). Beyond them the request fails with
 *  TERN_EDECODELIMIT. Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_decoding_limits(tern_request_t *req, uint64_t max_bytes,
                                              unsigned max_ratio);

/** Timeout phases. Since 0.1. */
typedef enum {
  TERN_TIMEOUT_CONNECT = 0, /* DNS + TCP (+ TLS handshake); default 30000 ms */
  TERN_TIMEOUT_HEADERS = 1, /* request sent to end of response head; default 60000 ms */
  TERN_TIMEOUT_BODY = 2,    /* longest silence while sending or receiving a body; default 60000 */
  TERN_TIMEOUT_TOTAL = 3    /* whole request, queueing and retries included; default 0 (none) */
} tern_timeout;
/** A per-phase limit in milliseconds; 0 disables it.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_timeout(tern_request_t *req, tern_timeout which, uint64_t ms);
/** 0 sends "Connection: close" and never pools the connection (default 1).
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_persistent(tern_request_t *req, int persistent);
/** Non-zero lets an idempotent bodiless request be pipelined (needs a pipeline depth > 1).
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_pipelining(tern_request_t *req, int enabled);
/** Non-zero speaks HTTP/1.0: no chunked bodies, keep-alive only when the server offers it.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_http10(tern_request_t *req, int enabled);
/** The HTTP versions a request may speak. Since 0.4. */
typedef enum {
  /** HTTP/2 over TLS when the server offers it (ALPN "h2", then "http/1.1"), HTTP/1.1 otherwise
   *  and on http:// URLs: curl's default. */
  TERN_HTTP_VERSION_DEFAULT = 0,
  /** HTTP/1.1 only (ALPN offers "http/1.1" alone). */
  TERN_HTTP_VERSION_1_1 = 1,
  /** The same as the default: HTTP/2 when TLS negotiates it (no h2c upgrade on http://). */
  TERN_HTTP_VERSION_2 = 2,
  /** HTTP/2 without negotiation on http:// (h2c with prior knowledge, RFC 9113 3.3); over TLS
   *  the same as the default (ALPN decides), as curl does. */
  TERN_HTTP_VERSION_2_PRIOR_KNOWLEDGE = 3
} tern_http_version;
/** Which HTTP versions the request may speak (default TERN_HTTP_VERSION_DEFAULT). Requests that
 *  differ here never share a connection. Requests with credentials for NTLM alone (and the next
 *  hops of one that met an NTLM offer over HTTP/2 and may answer it), requests through an HTTP proxy without a tunnel (http:// URLs), and
 *  requests with a receive-rate cap, a sending budget or a group budget (which count the bytes
 *  of a connection of their own) speak HTTP/1.1 whatever is set.
 *  Returns 0 or TERN_EINVAL. Thread: the request's owner, before submit. Since 0.4. */
TERN_API int tern_request_set_http_version(tern_request_t *req, tern_http_version version);
/* TLS (https:// URLs). Verification is on by default against the system trust store. A request
 * that calls none of these uses its engine's settings (tern_config_set_tls_verify and the
 * calls after it); the first of them gives the request settings of its own, starting from
 * these defaults. Requests with different TLS settings never share a pooled connection. */

/** 0 disables certificate and host name verification (curl's -k). Default 1.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_tls_verify(tern_request_t *req, int verify);
/** Trusts the PEM certificates in this file instead of the system store.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_tls_ca_file(tern_request_t *req, const char *path);
/** Trusts the certificates in this OpenSSL hashed directory instead of the system store.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_tls_ca_path(tern_request_t *req, const char *dir);
/** A client certificate (PEM chain) and its key (PEM; NULL: in the certificate file), with the
 *  key's password or NULL. Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_tls_client_cert(tern_request_t *req, const char *cert_file,
                                              const char *key_file, const char *password);

/** Caps the response body's receive rate at about `bytes_per_second` (0: no cap), like
 *  curl's --limit-rate: the engine stops reading while ahead of the rate, so the sender is
 *  slowed by TCP flow control and nothing piles up in memory.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_max_recv_speed(tern_request_t *req, uint64_t bytes_per_second);

/** Puts the request under a group budget (tern_bandwidth_new) besides its engine's; NULL
 *  removes it. The request takes its own reference to `bw` (dropped when the request is
 *  freed), so the caller's may be freed at once.
 *  Thread: the request's owner, before submit. Since 0.3. */
TERN_API int tern_request_set_bandwidth(tern_request_t *req, tern_bandwidth_t *bw);
/** Caps the rate at which this request's bytes are written (0: no cap), a budget of its own
 *  besides its group's and its engine's, in socket bytes (head and body; TLS: ciphertext).
 *  Thread: the request's owner, before submit. Since 0.3. */
TERN_API int tern_request_set_max_send_speed(tern_request_t *req, uint64_t bytes_per_second);
/** The request's priority among requests waiting to start (default 0; higher starts first,
 *  negative values are allowed): waiting for a slot of the engine's max_active_requests, or
 *  for a connection of its origin when max_connections_per_origin is reached. Equal
 *  priorities start in submission order. A request already started is never preempted.
 *  Thread: the request's owner, before submit. Since 0.3. */
TERN_API int tern_request_set_priority(tern_request_t *req, int priority);

/** This request's connection buffer size when it opens a connection (0: engine default).
 *  Pooled connections are shared only between requests asking the same size.
 *  Thread: the request's owner, before submit. Since 0.1. */
TERN_API int tern_request_set_buffer_size(tern_request_t *req, size_t bytes);
/** A pointer kept for the caller; the engine never reads it.
 *  Thread: the request's owner, at any time; it is not synchronised with the loop thread, so set
 *  it before submit if callbacks read it. Since 0.1. */
TERN_API void tern_request_set_user_data(tern_request_t *req, void *user_data);
/** The pointer set with tern_request_set_user_data, or NULL.
 *  Thread: the request's owner, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API void *tern_request_get_user_data(const tern_request_t *req);

/* Getters: valid from the complete callback on (headers from the first progress callback). */

/** The final HTTP status, or 0 when no response head arrived.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API int tern_request_get_status(const tern_request_t *req);
/** The reason phrase of the final status line ("" when none).
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API const char *tern_request_get_reason(const tern_request_t *req);
/** The response's HTTP minor version (0 or 1), or -1 when no response head arrived.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API int tern_request_get_http_minor(const tern_request_t *req);
/** The HTTP version the final response came in: 10 (HTTP/1.0), 11 (HTTP/1.1) or 20 (HTTP/2);
 *  0 when no response head arrived.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.4. */
TERN_API int tern_request_get_http_version(const tern_request_t *req);
/** 0, or the TERN_E* code the request completed with.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API int tern_request_get_error(const tern_request_t *req);
/** A message saying what failed and where ("connect to example.com:80: connection refused");
 *  "" on success.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API const char *tern_request_get_error_message(const tern_request_t *req);
/** Number of response header fields, in the order received.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API size_t tern_request_get_header_count(const tern_request_t *req);
/** The i-th response header; returns 0 or TERN_EINVAL when out of range.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API int tern_request_get_header_at(const tern_request_t *req, size_t i, const char **name,
                                        const char **value);
/** All response header fields in one block, for a binding that copies them at once and parses
 *  them later: "name\0value\0" for each field, in the order received (tern_request_get_header_count
 *  fields); NULL with *len 0 when there are none. Valid until the next hop's head replaces it
 *  or the request is freed.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.4. */
TERN_API const char *tern_request_get_header_block(const tern_request_t *req, size_t *len);
/** The first response header with this name (case-insensitive), or NULL.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API const char *tern_request_get_header(const tern_request_t *req, const char *name);
/** The body kept in memory (the default sink); NULL with *len 0 for other sinks.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API const void *tern_request_get_body(const tern_request_t *req, size_t *len);
/** Moves the body kept in memory out of the request: the buffer tern_request_get_body showed,
 *  now the caller's to release with free() (it outlives the request), with its length in *len;
 *  NULL with *len 0 when there is none. The request keeps no body afterwards. A binding that
 *  wraps the body in its own buffer type takes it this way instead of copying it.
 *  Thread: after completion. Since 0.4. */
TERN_API void *tern_request_take_body(tern_request_t *req, size_t *len);
/** The interim (1xx) response heads of the last hop, as received (status line, fields and blank
 *  line each, in order), for curl's -i and -v; NULL with *len 0 when none came. At most 300 KiB
 *  of them are accepted per hop: more (a server sending 100 Continue for ever) fails the request
 *  with TERN_EHEADERSIZE.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API const char *tern_request_get_interim_heads(const tern_request_t *req, size_t *len);
/** Body bytes received for this request as they came over the wire (after any resume offset).
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API uint64_t tern_request_get_bytes_received(const tern_request_t *req);
/** Body bytes delivered to the sink: the decoded size when the body was decoded.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API uint64_t tern_request_get_bytes_delivered(const tern_request_t *req);
/** The response's Content-Encoding when the engine decoded it ("gzip", "deflate", "br",
 *  "zstd"), else NULL.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API const char *tern_request_get_decoded_encoding(const tern_request_t *req);
/** The body length the server announced (Content-Length, or Content-Size with chunked),
 *  or -1 when unknown.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API int64_t tern_request_get_content_length(const tern_request_t *req);
/** Where the body landed in the resource: the start of a 206 range, or 0.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API uint64_t tern_request_get_offset(const tern_request_t *req);
/** The request head as last sent (request line, headers, blank line), for logs and `-v`;
 *  NULL before the request was prepared.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API const char *tern_request_get_request_head(const tern_request_t *req, size_t *len);
/** The TLS version of the request's connection ("TLSv1.3"), or NULL for plain HTTP.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API const char *tern_request_get_tls_version(const tern_request_t *req);
/** Non-zero when the request's TLS connection resumed an earlier session.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API int tern_request_is_tls_resumed(const tern_request_t *req);
/** Non-zero when the server asked for a client certificate and none was configured (servers
 *  such as nginx then answer 400 instead of failing the handshake).
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API int tern_request_was_client_cert_requested(const tern_request_t *req);
/** Non-zero when the request was sent on a pooled connection.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API int tern_request_is_reused(const tern_request_t *req);
/** Non-zero once the request completed. Thread: any. Since 0.1. */
TERN_API int tern_request_is_done(const tern_request_t *req);

/** Moments of a request's life for tern_request_get_time. Since 0.1. */
typedef enum {
  TERN_TIME_START = 0,     /* submission */
  TERN_TIME_CONNECTED = 1, /* connection ready (or reused) */
  TERN_TIME_SENT = 2,      /* request fully written */
  TERN_TIME_HEADERS = 3,   /* response head parsed */
  TERN_TIME_END = 4        /* completion */
} tern_time;
/** Seconds from TERN_TIME_START to the given event, or -1 when it did not happen.
 *  Thread: after completion, or inside its callbacks on the loop thread. Since 0.1. */
TERN_API double tern_request_get_time(const tern_request_t *req, tern_time which);

/* ---------------------------------------------------------------------------------------- */
/* Signed file transfer (Mesibo's protocol; docs/c-api.md, "File transfer signatures"): the
 * client signs an upload or a download with the user's access token and a timestamp; the server
 * that hosts the files looks the token up by uid, recomputes the signature and checks the
 * timestamp. Pure functions: no engine, no I/O. Since 0.3. */

/* Hex digits of a signature (SHA-256); buffers hold TERN_SIGNATURE_LEN + 1 bytes. Since 0.3. */
#define TERN_SIGNATURE_LEN    64
/* The usual window of tern_signature_verify, in seconds either side of now. Since 0.3. */
#define TERN_SIGNATURE_WINDOW 300

/** The upload signature: lower-case hex SHA-256 of uid "-" ts "-" access_token (ts in decimal),
 *  written with its NUL into out (TERN_SIGNATURE_LEN + 1 bytes). uid and access_token must be
 *  non-empty. Returns 0, TERN_EINVAL, or TERN_ENOMEM (OpenSSL could not allocate).
 *  Thread: any. Since 0.3. */
TERN_API int tern_signature_upload(const char *uid, int64_t ts, const char *access_token,
                                   char *out);
/** The download signature: lower-case hex SHA-256 of url "-" uid "-" ts "-" access_token, where
 *  url is the file's URL without its query and fragment (anything from the first '?' or '#' on
 *  is left out, so the URL may be given with them). Writes, returns and fails as
 *  tern_signature_upload; url must be non-empty. Thread: any. Since 0.3. */
TERN_API int tern_signature_download(const char *url, const char *uid, int64_t ts,
                                     const char *access_token, char *out);

/** What tern_signature_verify found. Since 0.3. */
typedef enum {
  TERN_SIGNATURE_OK = 0,       /* the signature matches and ts is within the window */
  TERN_SIGNATURE_MISSING = 1,  /* sig, uid or the token is NULL or empty */
  TERN_SIGNATURE_MISMATCH = 2, /* sig is not the signature of these values (tampered) */
  TERN_SIGNATURE_EXPIRED = 3   /* ts is more than window seconds from now (a replay) */
} tern_signature_result;

/** Checks a signature as a file server does: url NULL for an upload (tern_signature_upload),
 *  the file's URL for a download (tern_signature_download). The timestamp must lie within
 *  window seconds of now (both epoch seconds; pass time(NULL) and TERN_SIGNATURE_WINDOW), the
 *  signature must match, compared in constant time (hex digits in either case). Returns a
 *  tern_signature_result, checked in that order (missing, expired, mismatch), or TERN_EINVAL
 *  for a negative window or an empty url, TERN_ENOMEM when OpenSSL could not allocate.
 *  Thread: any. Since 0.3. */
TERN_API int tern_signature_verify(const char *url, const char *uid, int64_t ts,
                                   const char *access_token, const char *sig, int64_t now,
                                   int64_t window);

#ifdef __cplusplus
}
#endif
#endif /* TERN_H */
