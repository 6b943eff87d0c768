/* TLS through OpenSSL over libuv streams.
 *
 * Incoming ciphertext is read into the connection's one buffer and decrypted in place, through
 * the read BIO of tls_bio.c. Outgoing ciphertext collects in a memory BIO that is detached from the
 * SSL object for each write, so OpenSSL cannot reallocate memory libuv is still sending.
 *
 * Contexts (SSL_CTX) are per engine and per distinct TLS settings; sessions are kept per origin
 * so a second connection resumes. */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include <limits.h>
#include <openssl/buffer.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The SSL ex_data slot holding the tern__conn. Made on first use and again after a failure
 * (out of memory), never left at -1 for the process's life as a once-only init would. */
static atomic_int conn_index = -1;
static pthread_mutex_t index_lock = PTHREAD_MUTEX_INITIALIZER;

struct tern__tls_ctx {
  tern__list node;
  char *id;
  SSL_CTX *ctx;
  char *password;
  bool password_asked; /* OpenSSL asked for it: the key file is encrypted */
  int load_error;      /* TERN_ETLSCAFILE or TERN_ETLSCERTFILE when loading failed */
  char load_msg[512];
};

static bool have_index(void) {
  if (atomic_load(&conn_index) >= 0) return true;
  pthread_mutex_lock(&index_lock);
  if (atomic_load(&conn_index) < 0)
    atomic_store(&conn_index, SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL));
  pthread_mutex_unlock(&index_lock);
  return atomic_load(&conn_index) >= 0;
}

static tern__conn *conn_of(const SSL *ssl) { return SSL_get_ex_data(ssl, conn_index); }

/* Empties the error queue for SSL_get_error: a look costs far less than a clear (800 instr.). */
static void clear_errors(void) {
  if (ERR_peek_error() != 0) ERR_clear_error();
}

static void openssl_error_string(char *out, size_t n) {
  unsigned long e = ERR_peek_last_error();
  if (e)
    ERR_error_string_n(e, out, n);
  else
    snprintf(out, n, "no details");
  ERR_clear_error();
}

/* Sessions arrive after the handshake in TLS 1.3: keep the newest per origin. */
static int on_new_session(SSL *ssl, SSL_SESSION *sess) {
  tern__conn *c = conn_of(ssl);
  if (c == NULL || c->origin == NULL) return 0;
  if (c->origin->session) SSL_SESSION_free(c->origin->session);
  c->origin->session = sess;
  return 1; /* we keep the reference */
}

/* Called only when the server asks for a certificate and none is configured. */
static int on_client_cert(SSL *ssl, X509 **x509, EVP_PKEY **pkey) {
  (void)x509;
  (void)pkey;
  tern__conn *c = conn_of(ssl);
  if (c) c->cert_requested = true;
  return 0;
}

static int on_password(char *buf, int size, int rwflag, void *userdata) {
  (void)rwflag;
  tern__tls_ctx *t = userdata;
  t->password_asked = true;
  const char *pw = t->password;
  if (pw == NULL) return 0;
  size_t n = strlen(pw);
  if (n > (size_t)size) return 0;
  memcpy(buf, pw, n);
  return (int)n;
}

/* Records why `path` cannot be used (missing, unreadable, a directory where a file is meant or
 * the other way round) as the context's load error; false when it looks usable. */
static bool unreadable(tern__tls_ctx *t, int code, const char *what, const char *path, bool dir) {
  struct stat st;
  const char *why = NULL;
  if (stat(path, &st) != 0)
    why = strerror(errno);
  else if (dir && !S_ISDIR(st.st_mode))
    why = "not a directory";
  else if (!dir && S_ISDIR(st.st_mode))
    why = "a directory, not a file";
  else if (access(path, R_OK) != 0)
    why = strerror(errno);
  if (why == NULL) return false;
  t->load_error = code;
  snprintf(t->load_msg, sizeof t->load_msg, "%s %.200s: %.100s", what, path, why);
  return true;
}

static void ctx_load(tern__tls_ctx *t, const tern_request_t *req) {
  char err[160];
  SSL_CTX *ctx = t->ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  /* No SSL_MODE_RELEASE_BUFFERS: it frees and allocates the read buffer at every record.
   * tern__tls_recv and tern__tls_encrypt free both buffers when they end empty instead. No
   * compression: the read BIO relies on plaintext being shorter than its record. */
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION);
  static const unsigned char alpn[] = "\x08http/1.1";
  SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn - 1);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, on_new_session);
  SSL_CTX_set_client_cert_cb(ctx, on_client_cert);
  SSL_CTX_set_verify(ctx, req->tls.conf.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
  if (req->tls.conf.ca_file || req->tls.conf.ca_path) {
    /* What is wrong with a file is said in its words ("No such file or directory"), before
     * OpenSSL's codes; a CA directory OpenSSL would only consult during the handshake. */
    if ((req->tls.conf.ca_file &&
         unreadable(t, TERN_ETLSCAFILE, "CA file", req->tls.conf.ca_file, false)) ||
        (req->tls.conf.ca_path &&
         unreadable(t, TERN_ETLSCAFILE, "CA directory", req->tls.conf.ca_path, true)))
      return;
    if (SSL_CTX_load_verify_locations(ctx, req->tls.conf.ca_file, req->tls.conf.ca_path) != 1) {
      openssl_error_string(err, sizeof err);
      t->load_error = TERN_ETLSCAFILE;
      snprintf(t->load_msg, sizeof t->load_msg,
               "CA file %.200s holds no usable PEM certificate (%.160s)",
               req->tls.conf.ca_file ? req->tls.conf.ca_file : req->tls.conf.ca_path, err);
      return;
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    openssl_error_string(err, sizeof err);
    t->load_error = TERN_ETLSCAFILE;
    snprintf(t->load_msg, sizeof t->load_msg, "load the system trust store: %.160s", err);
    return;
  }
  /* Always our callback: OpenSSL's default one would prompt on the terminal and block the
   * loop thread when an encrypted key comes without a password. */
  if (req->tls.conf.password) t->password = tern__strdup(req->tls.conf.password);
  SSL_CTX_set_default_passwd_cb(ctx, on_password);
  SSL_CTX_set_default_passwd_cb_userdata(ctx, t);
  if (req->tls.conf.cert) {
    const char *key = req->tls.conf.key ? req->tls.conf.key : req->tls.conf.cert;
    if (unreadable(t, TERN_ETLSCERTFILE, "client certificate", req->tls.conf.cert, false) ||
        unreadable(t, TERN_ETLSCERTFILE, "client key", key, false))
      return;
    t->load_error = TERN_ETLSCERTFILE;
    if (SSL_CTX_use_certificate_chain_file(ctx, req->tls.conf.cert) != 1) {
      openssl_error_string(err, sizeof err);
      snprintf(t->load_msg, sizeof t->load_msg,
               "client certificate %.200s holds no usable PEM certificate (%.160s)",
               req->tls.conf.cert, err);
    } else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
      bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
      openssl_error_string(err, sizeof err);
      if (mismatch)
        snprintf(t->load_msg, sizeof t->load_msg,
                 "client key %.200s does not belong to the certificate %.200s", key,
                 req->tls.conf.cert);
      else if (t->password_asked && t->password == NULL)
        snprintf(t->load_msg, sizeof t->load_msg,
                 "client key %.200s is encrypted and no password was given", key);
      else if (t->password_asked)
        snprintf(t->load_msg, sizeof t->load_msg,
                 "client key %.200s: wrong password (the key could not be decrypted)", key);
      else
        snprintf(t->load_msg, sizeof t->load_msg,
                 "client key %.200s holds no usable PEM key (%.160s)", key, err);
    } else if (SSL_CTX_check_private_key(ctx) != 1) {
      openssl_error_string(err, sizeof err);
      snprintf(t->load_msg, sizeof t->load_msg,
               "client key %.200s does not belong to the certificate %.200s", key,
               req->tls.conf.cert);
    } else {
      t->load_error = 0;
    }
  }
}

tern__tls_ctx *tern__tls_ctx_get(tern_engine_t *eng, const tern_request_t *req) {
  for (tern__list *n = eng->tls_ctxs.next; n != &eng->tls_ctxs; n = n->next) {
    tern__tls_ctx *t = tern__container_of(n, tern__tls_ctx, node);
    if (strcmp(t->id, req->tls.id) == 0) return t;
  }
  if (!have_index()) return NULL;
  tern__tls_ctx *t = tern__calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  t->id = tern__strdup(req->tls.id);
  t->ctx = SSL_CTX_new(TLS_client_method());
  if (t->id == NULL || t->ctx == NULL) {
    SSL_CTX_free(t->ctx);
    free(t->id);
    free(t);
    return NULL;
  }
  ctx_load(t, req);
  tern__list_insert_tail(&eng->tls_ctxs, &t->node);
  return t;
}

void tern__tls_ctx_free_all(tern_engine_t *eng) {
  while (!tern__list_empty(&eng->tls_ctxs)) {
    tern__tls_ctx *t = tern__container_of(eng->tls_ctxs.next, tern__tls_ctx, node);
    tern__list_remove(&t->node);
    SSL_CTX_free(t->ctx);
    free(t->password);
    free(t->id);
    free(t);
  }
}

void tern__tls_origin_free(tern__origin *o) {
  if (o->session) SSL_SESSION_free(o->session);
  o->session = NULL;
  free(o->tls_id);
  o->tls_id = NULL;
}

void tern__tls_conn_free(tern__conn *c) {
  if (c->ssl) {
    SSL_set_ex_data(c->ssl, conn_index, NULL);
    /* OpenSSL marks the session of an SSL freed without a shutdown as not resumable; a
     * connection that ended well (idle timeout, server close, Connection: close) keeps its
     * session usable for the next connection. We do not wait to send close_notify. */
    if (!c->failed) SSL_set_shutdown(c->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(c->ssl); /* frees its BIOs */
    c->ssl = NULL;
  }
  BIO_free(c->tls_req_bio);
  BIO_free(c->tls_extra_bio);
  BIO_free(c->tls_spare_bio);
  c->tls_req_bio = c->tls_extra_bio = c->tls_spare_bio = NULL;
  if (c->tls_in) free(c->tls_in->held);
  free(c->tls_in);
  c->tls_in = NULL;
}

static tern_request_t *oldest(tern__conn *c) {
  return tern__list_empty(&c->requests)
             ? NULL
             : tern__container_of(c->requests.next, tern_request_t, node);
}

/* Takes the ciphertext OpenSSL has written so far, leaving it an empty BIO (the spare one
 * when there is one: no allocation per request). */
static BIO *detach_output(tern__conn *c) {
  BIO *fresh = c->tls_spare_bio;
  c->tls_spare_bio = NULL;
  if (fresh == NULL) {
    fresh = BIO_new(BIO_s_mem());
    if (fresh == NULL) return NULL;
    BIO_set_mem_eof_return(fresh, -1);
  }
  BIO *old = SSL_get_wbio(c->ssl);
  BIO_up_ref(old);
  SSL_set0_wbio(c->ssl, fresh);
  return old;
}

int tern__tls_take_output(tern__conn *c, uv_buf_t *out) {
  if (c->tls_extra_bio || BIO_ctrl_pending(SSL_get_wbio(c->ssl)) == 0) return 0;
  BIO *bio = detach_output(c);
  if (bio == NULL) return TERN_ENOMEM;
  char *data;
  long n = BIO_get_mem_data(bio, &data);
  c->tls_extra_bio = bio;
  *out = uv_buf_init(data, (unsigned)n);
  return 1;
}

void tern__tls_output_done(tern__conn *c) {
  BIO_free(c->tls_extra_bio);
  c->tls_extra_bio = NULL;
}

int tern__tls_start(tern__conn *c) {
  tern_request_t *req = oldest(c);
  tern__tls_ctx *t = c->origin->tls_ctx;
  if (t->load_error) {
    tern__request_set_error(req, t->load_error, "%s", t->load_msg);
    return t->load_error;
  }
  BIO_METHOD *in_m = tern__tls_in_method();
  if (in_m == NULL) return TERN_ENOMEM;
  c->tls_in = tern__calloc(1, sizeof *c->tls_in);
  if (c->tls_in == NULL) return TERN_ENOMEM;
  SSL *ssl = SSL_new(t->ctx);
  BIO *rb = BIO_new(in_m), *wb = BIO_new(BIO_s_mem());
  if (ssl == NULL || rb == NULL || wb == NULL) {
    SSL_free(ssl);
    BIO_free(rb);
    BIO_free(wb);
    return TERN_ENOMEM;
  }
  BIO_set_data(rb, c->tls_in);
  BIO_set_init(rb, 1);
  BIO_set_mem_eof_return(wb, -1);
  SSL_set_bio(ssl, rb, wb);
  if (SSL_set_ex_data(ssl, conn_index, c) != 1) {
    SSL_free(ssl); /* frees its BIOs */
    return TERN_ENOMEM;
  }
  c->ssl = ssl;
  const char *host = c->origin->host;
  unsigned char ip[16];
  bool is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
  if (!is_ip) SSL_set_tlsext_host_name(ssl, host); /* SNI carries names, never addresses */
  if (req->tls.conf.verify) {
    X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
    int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host) : SSL_set1_host(ssl, host);
    if (ok != 1) return TERN_ENOMEM;
  }
  /* ALPN offers what the origin may speak, HTTP/2 first (RFC 9113 3.2, RFC 7301). Over TLS an
   * origin is either TERN__PROTO_ALPN or HTTP/1.1 (prior knowledge is ALPN there). */
  static const unsigned char h2_h1[] = "\x02h2\x08http/1.1", h1[] = "\x08http/1.1";
  bool h2 = c->origin->proto == TERN__PROTO_ALPN;
  const unsigned char *alpn = h2 ? h2_h1 : h1;
  size_t alpn_len = h2 ? sizeof h2_h1 - 1 : sizeof h1 - 1;
  if (SSL_set_alpn_protos(ssl, alpn, (unsigned)alpn_len) != 0) return TERN_ENOMEM;
  if (c->origin->session) SSL_set_session(ssl, c->origin->session);
  SSL_set_connect_state(ssl);
  c->handshaking = true;
  c->state = TERN__CONN_HANDSHAKE;
  return tern__tls_recv(c, 0);
}

static int verify_error(tern__conn *c, tern_request_t *req) {
  long v = SSL_get_verify_result(c->ssl);
  const char *host = req->url.hostport;
  int err;
  switch (v) {
    case X509_V_OK: return 0;
    case X509_V_ERR_CERT_HAS_EXPIRED: err = TERN_ETLSCERTEXPIRED; break;
    case X509_V_ERR_CERT_NOT_YET_VALID: err = TERN_ETLSCERTNOTYETVALID; break;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH: err = TERN_ETLSHOSTNAME; break;
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE: err = TERN_ETLSUNKNOWNCA; break;
    default: err = TERN_ETLSVERIFY; break;
  }
  tern__request_set_error(req, err, "TLS handshake with %s: certificate verification failed: %s",
                          host, X509_verify_cert_error_string(v));
  return err;
}

static int handshake_failed(tern__conn *c, int ssl_err) {
  tern_request_t *req = oldest(c);
  if (req == NULL) return TERN_ETLSHANDSHAKE;
  int v = verify_error(c, req);
  if (v) return v;
  unsigned long e = ERR_peek_last_error();
  int reason = ERR_GET_REASON(e);
  char detail[160];
  openssl_error_string(detail, sizeof detail);
  if (c->cert_requested && (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
                            reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE ||
                            reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE)) {
    tern__request_set_error(req, TERN_ETLSCLIENTCERT,
                            "TLS handshake with %s: the server requires a client certificate (%s)",
                            req->url.hostport, detail);
    return TERN_ETLSCLIENTCERT;
  }
  tern__request_set_error(req, TERN_ETLSHANDSHAKE, "TLS handshake with %s failed: %s",
                          req->url.hostport,
                          ssl_err == SSL_ERROR_SYSCALL ? "connection closed" : detail);
  return TERN_ETLSHANDSHAKE;
}

static int handshake_step(tern__conn *c) {
  clear_errors();
  int r = SSL_do_handshake(c->ssl);
  if (r == 1) {
    c->handshaking = false;
    c->tls_resumed = SSL_session_reused(c->ssl) != 0;
    return 0;
  }
  int e = SSL_get_error(c->ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
  return handshake_failed(c, e);
}

size_t tern__tls_read_gap(const tern__conn *c) {
  const struct tern__tls_in *in = c->tls_in;
  if (in == NULL) return 0;
  int pending = SSL_pending(c->ssl);
  return in->partial + in->held_len + (pending > 0 ? (size_t)pending : 0);
}

/* Frees OpenSSL's record buffers when empty (never with a record begun or plaintext pending:
 * CVE-2024-4741). After a receive or a send (busy_keeps) a reused connection keeps them while
 * a request is outstanding and frees them as it idles (conn.c); a first exchange frees them at
 * once, as connections opened together would fragment the heap (docs/engine.md, TLS). */
void tern__tls_release_buffers(tern__conn *c, bool busy_keeps) {
  if (busy_keeps && c->served > 0 && !tern__list_empty(&c->requests)) return;
  if (c->ssl && c->tls_in->partial == 0 && SSL_pending(c->ssl) <= 0) SSL_free_buffers(c->ssl);
}

/* Drives the handshake and decrypts into buf[base + produced, rcap) until OpenSSL wants more
 * ciphertext or the room is full. */
static int decrypt(tern__conn *c, size_t base, size_t *produced, int *closed) {
  if (c->handshaking) {
    int r = handshake_step(c);
    if (r) return r;
    if (c->handshaking) return 0;
  }
  /* One clear per call, not per record: successful reads leave the queue empty. */
  clear_errors();
  for (;;) {
    size_t room = c->rcap - (base + *produced);
    if (room == 0) return 0;
    int k = SSL_read(c->ssl, c->buf + base + *produced, room > INT_MAX ? INT_MAX : (int)room);
    if (k > 0) {
      *produced += (size_t)k;
      /* Nothing left to read: no ciphertext handed over, none buffered in OpenSSL. Another
       * SSL_read would only fail with WANT_READ, at more cost than the record's decryption. */
      if (c->tls_in->view_len == 0 && c->tls_in->held_len == 0 && !SSL_has_pending(c->ssl))
        return 0;
      continue;
    }
    int e = SSL_get_error(c->ssl, k);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
    if (e == SSL_ERROR_ZERO_RETURN) {
      *closed = 1;
      return 0;
    }
    c->len = base + *produced;
    tern_request_t *req = oldest(c);
    /* TLS 1.3 finishes the client's handshake before the server checks its certificate, so
     * a refused (missing) certificate shows up here, on the first read. */
    int reason = ERR_GET_REASON(ERR_peek_last_error());
    int err = reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ? TERN_ETLSCLIENTCERT : TERN_EIO;
    char detail[160];
    openssl_error_string(detail, sizeof detail);
    if (req) {
      tern__tls_note(c, req);
      tern__request_set_error(
          req, err, "TLS receive from %s failed: %s%s", req->url.hostport, detail,
          err == TERN_ETLSCLIENTCERT ? " (the server requires a client certificate)" : "");
    }
    return err;
  }
}

int tern__tls_recv_at(tern__conn *c, size_t gap, size_t n) {
  struct tern__tls_in *in = c->tls_in;
  size_t base = c->len, produced = 0;
  const char *cipher = c->buf + base + gap;
  int closed = 0;
  /* Read in place when the bytes lie past the gap (the common case); else keep them aside. */
  if (gap >= tern__tls_read_gap(c)) {
    in->view = cipher;
    in->view_len = n;
  } else if (!tern__tls_in_hold(in, cipher, n)) {
    return TERN_ENOMEM;
  }
  int r = decrypt(c, base, &produced, &closed);
  /* Whatever OpenSSL did not read (after close_notify or an error) must not stay a view of a
   * buffer that changes once this returns. */
  bool kept = r < 0 || tern__tls_in_hold(in, in->view, in->view_len);
  in->view = NULL;
  in->view_len = 0;
  if (r < 0) return r;
  if (!kept) return TERN_ENOMEM;
  c->len = base + produced;
  if (in->held_len == 0 && in->held_cap > 0) {
    free(in->held);
    in->held = NULL;
    in->held_cap = 0;
  }
  tern__tls_release_buffers(c, true);
  return closed;
}

int tern__tls_recv(tern__conn *c, size_t n) { return tern__tls_recv_at(c, 0, n); }

int tern__tls_encrypt(tern__conn *c, const uv_buf_t *bufs, unsigned nb, uv_buf_t *out) {
  clear_errors();
  for (unsigned i = 0; i < nb; i++) {
    if (bufs[i].len == 0) continue;
    int k = SSL_write(c->ssl, bufs[i].base, (int)bufs[i].len);
    if (k <= 0) {
      tern_request_t *req = oldest(c);
      char detail[160];
      openssl_error_string(detail, sizeof detail);
      if (req)
        tern__request_set_error(req, TERN_EIO, "TLS send to %s failed: %s", req->url.hostport,
                                detail);
      return TERN_EIO;
    }
  }
  tern__tls_release_buffers(c, true);
  BIO *bio = detach_output(c);
  if (bio == NULL) return TERN_ENOMEM;
  char *data;
  long n = BIO_get_mem_data(bio, &data);
  c->tls_req_bio = bio;
  *out = uv_buf_init(data, (unsigned)n);
  return 0;
}

bool tern__tls_pending(tern__conn *c) {
  return c->ssl && (SSL_pending(c->ssl) > 0 || c->tls_in->held_len > 0);
}

/* Keeps a small emptied BIO for the next write; a large one (a body piece) is freed so idle
 * pooled connections hold little memory. */
static void recycle(tern__conn *c, BIO *bio) {
  BUF_MEM *mem = NULL;
  BIO_get_mem_ptr(bio, &mem);
  if (c->tls_spare_bio == NULL && mem && mem->max <= 16384 && BIO_reset(bio) == 1)
    c->tls_spare_bio = bio;
  else
    BIO_free(bio);
}

void tern__tls_write_done(tern__conn *c) {
  if (c->tls_req_bio) recycle(c, c->tls_req_bio);
  c->tls_req_bio = NULL;
}

bool tern__tls_alpn_h2(const tern__conn *c) {
  const unsigned char *p = NULL;
  unsigned n = 0;
  if (c->ssl) SSL_get0_alpn_selected(c->ssl, &p, &n);
  return n == 2 && memcmp(p, "h2", 2) == 0;
}

void tern__tls_note(tern__conn *c, tern_request_t *req) {
  req->tls.version = SSL_get_version(c->ssl);
  req->tls.resumed = c->tls_resumed;
  req->tls.cert_requested = c->cert_requested;
}
