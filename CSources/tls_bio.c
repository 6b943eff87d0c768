/* tls_bio.c — the read BIO, through which OpenSSL takes a connection's ciphertext (tls.c).
 *
 * OpenSSL reads ciphertext from the connection buffer itself (the "view", set only while
 * tern__tls_recv runs) and writes the plaintext it decrypts at c->len, in the same buffer. That
 * is safe as long as no plaintext lands on ciphertext OpenSSL has not read yet. Without
 * read-ahead, OpenSSL reads a record exactly (its 5-byte header, then its body) and writes its
 * plaintext only once the whole record is read; a record's plaintext is shorter than the record
 * (no compression: SSL_OP_NO_COMPRESSION). So plaintext written since the view began never
 * passes the view's read position, except by what OpenSSL could write without reading from the
 * view: plaintext it already decrypted (SSL_pending), the start of a record it has taken in
 * part (`partial`), and ciphertext kept aside here (`held`). Their sum is the gap
 * (tern__tls_read_gap): conn.c reads ciphertext that far past c->len; when it could not (no
 * room), the bytes are copied aside (`held`) and OpenSSL reads them from there. */
#include "internal.h"

#include <openssl/bio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* Follows the record framing over bytes handed to OpenSSL. */
static void in_track(struct tern__tls_in *in, const unsigned char *p, size_t n) {
  while (n > 0) {
    if (in->partial < 5) {
      in->hdr[in->partial++] = *p++;
      n--;
      if (in->partial == 5) in->rec_len = 5 + ((size_t)in->hdr[3] << 8 | in->hdr[4]);
    } else {
      size_t take = in->rec_len - in->partial < n ? in->rec_len - in->partial : n;
      in->partial += take;
      p += take;
      n -= take;
    }
    if (in->partial == in->rec_len) in->partial = in->rec_len = 0;
  }
}

static int in_read(BIO *b, char *out, int len) {
  struct tern__tls_in *in = BIO_get_data(b);
  BIO_clear_retry_flags(b);
  size_t want = len > 0 ? (size_t)len : 0, got = 0;
  if (in->held_len > 0 && want > 0) { /* rare: no need to avoid moving the rest down */
    got = in->held_len < want ? in->held_len : want;
    memcpy(out, in->held, got);
    memmove(in->held, in->held + got, in->held_len - got);
    in->held_len -= got;
  }
  if (in->view_len > 0 && want > got) {
    size_t k = in->view_len < want - got ? in->view_len : want - got;
    memcpy(out + got, in->view, k);
    in->view += k;
    in->view_len -= k;
    got += k;
  }
  if (got == 0) {
    BIO_set_retry_read(b);
    return -1;
  }
  in_track(in, (const unsigned char *)out, got);
  return (int)got;
}

static long in_ctrl(BIO *b, int cmd, long num, void *ptr) {
  (void)num, (void)ptr;
  const struct tern__tls_in *in = BIO_get_data(b);
  if (cmd == BIO_CTRL_PENDING) return (long)(in->held_len + in->view_len);
  return cmd == BIO_CTRL_FLUSH; /* nothing else applies */
}

/* The BIO_METHOD, made on first use and again after a failure (out of memory). */
static BIO_METHOD *_Atomic in_method;
static pthread_mutex_t method_lock = PTHREAD_MUTEX_INITIALIZER;

BIO_METHOD *tern__tls_in_method(void) {
  BIO_METHOD *m = atomic_load(&in_method);
  if (m) return m;
  pthread_mutex_lock(&method_lock);
  m = atomic_load(&in_method);
  if (m == NULL) { /* a read-only BIO: OpenSSL never writes to the read side */
    int type = BIO_get_new_index();
    m = type == -1 ? NULL : BIO_meth_new(type | BIO_TYPE_SOURCE_SINK, "tern ciphertext in");
    if (m && (BIO_meth_set_read(m, in_read) != 1 || BIO_meth_set_ctrl(m, in_ctrl) != 1)) {
      BIO_meth_free(m);
      m = NULL;
    }
    atomic_store(&in_method, m);
  }
  pthread_mutex_unlock(&method_lock);
  return m;
}

/* Keeps n bytes of ciphertext aside, after those already kept. */
bool tern__tls_in_hold(struct tern__tls_in *in, const char *p, size_t n) {
  if (n == 0) return true;
  if (in->held_cap - in->held_len < n) {
    size_t cap = in->held_len + n;
    char *h = tern__realloc(in->held, cap);
    if (h == NULL) return false;
    in->held = h;
    in->held_cap = cap;
  }
  memcpy(in->held + in->held_len, p, n);
  in->held_len += n;
  return true;
}
