/* The lengths and meanings of a SOCKS proxy's answers (RFC 1928, RFC 1929, SOCKS4). */
#include "socks_parse.h"

int tern__socks_answer(int step, const unsigned char *p, size_t n, unsigned *version,
                       unsigned *code) {
  *version = n > 0 ? p[0] : 0;
  *code = n > 1 ? p[1] : 0;
  switch (step) {
    case TERN__SOCKS5_GREETING:
      if (n > 0 && p[0] != 5) return TERN__SOCKS_BAD_VERSION;
      return n < 2 ? TERN__SOCKS_MORE : 2;
    case TERN__SOCKS5_AUTH:
      if (n > 0 && p[0] != 1) return TERN__SOCKS_BAD_VERSION;
      return n < 2 ? TERN__SOCKS_MORE : 2;
    case TERN__SOCKS5_CONNECT: {
      if (n > 0 && p[0] != 5) return TERN__SOCKS_BAD_VERSION;
      if (n < 5) return TERN__SOCKS_MORE;
      size_t addr;
      switch (p[3]) {
        case 1: addr = 4; break;
        case 4: addr = 16; break;
        case 3: addr = 1 + (size_t)p[4]; break;
        default: *code = p[3]; return TERN__SOCKS_BAD_ADDRESS;
      }
      size_t whole = 4 + addr + 2; /* at most 4 + 256 + 2 */
      return n < whole ? TERN__SOCKS_MORE : (int)whole;
    }
    case TERN__SOCKS4_CONNECT:
      /* VN is 0 in the protocol; some servers answer with 4 */
      if (n > 0 && p[0] != 0 && p[0] != 4) return TERN__SOCKS_BAD_VERSION;
      return n < 8 ? TERN__SOCKS_MORE : 8;
    default: return TERN__SOCKS_BAD_STEP;
  }
}
