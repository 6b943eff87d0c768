/* The SOCKS proxy's answers as bytes: how long each one is and what it says, with no connection
 * in sight (socks.c acts on them; Tests/Fuzz/fuzz_socks.c fuzzes this). */
#ifndef TERN_SOCKS_PARSE_H
#define TERN_SOCKS_PARSE_H

#include <stddef.h>

/* Which answer the client waits for. */
enum {
  TERN__SOCKS5_GREETING, /* VER, METHOD */
  TERN__SOCKS5_AUTH,     /* VER 1, STATUS (RFC 1929) */
  TERN__SOCKS5_CONNECT,  /* VER, REP, RSV, ATYP, BND.ADDR, BND.PORT */
  TERN__SOCKS4_CONNECT   /* VN, CD, DSTPORT, DSTIP */
};

enum {
  TERN__SOCKS_MORE = 0,         /* incomplete: wait for more bytes */
  TERN__SOCKS_BAD_VERSION = -1, /* the version byte is not the expected one */
  TERN__SOCKS_BAD_ADDRESS = -2, /* a SOCKS5 reply with an unknown address type */
  TERN__SOCKS_BAD_STEP = -3     /* no such step */
};

/* The answer at `step` in p[0..n): TERN__SOCKS_MORE while it is incomplete, its length once it
 * is whole, or a negative TERN__SOCKS_BAD_*. *version gets its version byte and *code what it
 * says (the method chosen, the authentication status, the reply code, SOCKS4's CD; the address
 * type with TERN__SOCKS_BAD_ADDRESS) as soon as they are there. Reads nothing past p[n - 1]. */
int tern__socks_answer(int step, const unsigned char *p, size_t n, unsigned *version,
                       unsigned *code);

#endif
