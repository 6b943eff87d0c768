// The PAC evaluator: heaps, the byte-counting allocator, the native helpers (DNS, the host's
// address, the clock, alert) and the calls into the script.
#ifndef _DEFAULT_SOURCE
#  define _DEFAULT_SOURCE  // getaddrinfo, inet_ntop and clock_gettime under -std=c11
#endif
#include "pac.h"

#include <arpa/inet.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <duktape.h>

#define DEFAULT_HEAP_LIMIT ((size_t)256 * 1024 * 1024)

struct tern_pac {
  duk_context *ctx;  // NULL: no script loaded
  size_t heap_used;  // bytes handed to duktape, headers included
  size_t heap_limit;
  int have_now;
  double now_ms;      // TERN_PAC_NOW, when have_now
  const char *my_ip;  // TERN_PAC_MY_IP, or NULL
};

// ---- the allocator: every block carries its size, so the total can be bounded ----

typedef union {
  size_t size;
  max_align_t align;
} block_header;

static void *heap_alloc(void *udata, duk_size_t size) {
  tern_pac *pac = udata;
  if (size == 0) return NULL;
  size_t total = size + sizeof(block_header);
  if (total < size || total > pac->heap_limit - pac->heap_used) return NULL;
  block_header *h = malloc(total);
  if (!h) return NULL;
  h->size = total;
  pac->heap_used += total;
  return h + 1;
}

static void heap_free(void *udata, void *ptr) {
  tern_pac *pac = udata;
  if (!ptr) return;
  block_header *h = (block_header *)ptr - 1;
  pac->heap_used -= h->size;
  free(h);
}

static void *heap_realloc(void *udata, void *ptr, duk_size_t size) {
  tern_pac *pac = udata;
  if (!ptr) return heap_alloc(udata, size);
  if (size == 0) {
    heap_free(udata, ptr);
    return NULL;
  }
  block_header *h = (block_header *)ptr - 1;
  size_t old = h->size;
  size_t total = size + sizeof(block_header);
  if (total < size) return NULL;
  if (total > old && total - old > pac->heap_limit - pac->heap_used) return NULL;
  block_header *n = realloc(h, total);
  if (!n) return NULL;  // the old block stays, as duktape expects
  n->size = total;
  pac->heap_used = pac->heap_used - old + total;
  return n + 1;
}

static void heap_fatal(void *udata, const char *msg) {
  (void)udata;
  fprintf(stderr, "tern-pac: fatal duktape error: %s\n", msg ? msg : "(no message)");
  fflush(stderr);
  _exit(70);
}

static tern_pac *pac_of(duk_context *ctx) {
  duk_memory_functions funcs;
  duk_get_memory_functions(ctx, &funcs);
  return funcs.udata;
}

// ---- native helpers, handed to the prelude (prelude.c) ----

// dnsResolve: the first IPv4 address of the name (getaddrinfo), dotted, or null.
static duk_ret_t native_resolve(duk_context *ctx) {
  duk_size_t len;
  const char *host = duk_to_lstring(ctx, 0, &len);
  if (len == 0 || strlen(host) != len) {
    duk_push_null(ctx);
    return 1;
  }
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo *res = NULL;
  char text[INET_ADDRSTRLEN];
  if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res) {
    duk_push_null(ctx);
    return 1;
  }
  const struct sockaddr_in *sin = (const struct sockaddr_in *)res->ai_addr;
  if (res->ai_family == AF_INET && inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text))
    duk_push_string(ctx, text);
  else
    duk_push_null(ctx);
  freeaddrinfo(res);
  return 1;
}

// myIpAddress: the source address of a UDP socket "connected" to a public address (connect on
// a datagram socket only picks the route; nothing is sent), else 127.0.0.1.
static duk_ret_t native_my_ip(duk_context *ctx) {
  tern_pac *pac = pac_of(ctx);
  if (pac->my_ip) {
    duk_push_string(ctx, pac->my_ip);
    return 1;
  }
  char text[INET_ADDRSTRLEN] = "127.0.0.1";
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0) {
    struct sockaddr_in to;
    memset(&to, 0, sizeof to);
    to.sin_family = AF_INET;
    to.sin_port = htons(53);
    to.sin_addr.s_addr = htonl(0x08080808);  // 8.8.8.8
    struct sockaddr_in me;
    socklen_t me_len = sizeof me;
    if (connect(fd, (struct sockaddr *)&to, sizeof to) == 0 &&
        getsockname(fd, (struct sockaddr *)&me, &me_len) == 0 && me.sin_family == AF_INET &&
        me.sin_addr.s_addr != htonl(INADDR_ANY)) {
      inet_ntop(AF_INET, &me.sin_addr, text, sizeof text);
    }
    close(fd);
  }
  duk_push_string(ctx, text);
  return 1;
}

// The clock of the date and time functions, in milliseconds since the epoch.
static duk_ret_t native_now(duk_context *ctx) {
  tern_pac *pac = pac_of(ctx);
  if (pac->have_now) {
    duk_push_number(ctx, pac->now_ms);
    return 1;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  duk_push_number(ctx, (double)ts.tv_sec * 1000.0 + (double)(ts.tv_nsec / 1000000));
  return 1;
}

static duk_ret_t native_alert(duk_context *ctx) {
  duk_size_t len;
  const char *msg = duk_to_lstring(ctx, 0, &len);
  fputs("alert: ", stderr);
  fwrite(msg, 1, len, stderr);
  fputc('\n', stderr);
  fflush(stderr);
  return 0;
}

// ---- the evaluator ----

tern_pac *tern_pac_new(void) {
  tern_pac *pac = calloc(1, sizeof *pac);
  if (!pac) return NULL;
  pac->heap_limit = DEFAULT_HEAP_LIMIT;
  const char *limit = getenv("TERN_PAC_HEAP_LIMIT");
  if (limit && *limit) {
    char *end;
    unsigned long long v = strtoull(limit, &end, 10);
    if (*end == '\0' && v > 0 && v <= SIZE_MAX) pac->heap_limit = (size_t)v;
  }
  const char *now = getenv("TERN_PAC_NOW");
  if (now && *now) {
    char *end;
    double v = strtod(now, &end);
    if (*end == '\0' && isfinite(v)) {
      pac->have_now = 1;
      pac->now_ms = v * 1000.0;
    }
  }
  const char *my_ip = getenv("TERN_PAC_MY_IP");
  if (my_ip && *my_ip) pac->my_ip = my_ip;
  return pac;
}

static void drop_heap(tern_pac *pac) {
  if (pac->ctx) duk_destroy_heap(pac->ctx);
  pac->ctx = NULL;
}

void tern_pac_free(tern_pac *pac) {
  if (!pac) return;
  drop_heap(pac);
  free(pac);
}

// Writes prefix and the value at `idx` (converted without letting a throw escape) into err, on
// one line and cut to err_cap - 1 bytes.
static void error_text(duk_context *ctx, duk_idx_t idx, const char *prefix, char *err,
                       size_t err_cap) {
  duk_size_t len = 0;
  const char *text = "";
  if (ctx) {
    duk_safe_to_string(ctx, idx);
    text = duk_get_lstring(ctx, idx, &len);
    if (!text) text = "";
  }
  snprintf(err, err_cap, "%s%.*s", prefix,
           (int)(len > TERN_PAC_MAX_MESSAGE ? TERN_PAC_MAX_MESSAGE : len), text);
  for (char *p = err; *p; p++)
    if (*p == '\r' || *p == '\n') *p = ' ';
}

int tern_pac_load(tern_pac *pac, const char *script, size_t len, char *err, size_t err_cap) {
  drop_heap(pac);
  duk_context *ctx = duk_create_heap(heap_alloc, heap_realloc, heap_free, pac, heap_fatal);
  if (!ctx) {
    snprintf(err, err_cap, "out of memory creating the script heap");
    return -1;
  }
  // The prelude is a function expression; call it with the global object and the natives.
  if (duk_peval_string(ctx, tern_pac_prelude) != 0) {
    error_text(ctx, -1, "internal error in the helper prelude: ", err, err_cap);
    duk_destroy_heap(ctx);
    return -1;
  }
  duk_push_global_object(ctx);
  duk_push_object(ctx);
  duk_push_c_function(ctx, native_resolve, 1);
  duk_put_prop_string(ctx, -2, "resolve");
  duk_push_c_function(ctx, native_my_ip, 0);
  duk_put_prop_string(ctx, -2, "myIp");
  duk_push_c_function(ctx, native_now, 0);
  duk_put_prop_string(ctx, -2, "now");
  duk_push_c_function(ctx, native_alert, 1);
  duk_put_prop_string(ctx, -2, "alert");
  if (duk_pcall(ctx, 2) != 0) {
    error_text(ctx, -1, "internal error in the helper prelude: ", err, err_cap);
    duk_destroy_heap(ctx);
    return -1;
  }
  duk_pop(ctx);

  duk_push_string(ctx, "PAC script");
  if (duk_pcompile_lstring_filename(ctx, 0, script, len) != 0) {
    error_text(ctx, -1, "", err, err_cap);
    duk_destroy_heap(ctx);
    return -1;
  }
  if (duk_pcall(ctx, 0) != 0) {
    error_text(ctx, -1, "the script threw: ", err, err_cap);
    duk_destroy_heap(ctx);
    return -1;
  }
  duk_pop(ctx);
  duk_get_global_string(ctx, "FindProxyForURL");
  int ok = duk_is_function(ctx, -1);
  duk_pop(ctx);
  if (!ok) {
    snprintf(err, err_cap, "the script defines no FindProxyForURL function");
    duk_destroy_heap(ctx);
    return -1;
  }
  pac->ctx = ctx;
  return 0;
}

int tern_pac_find(tern_pac *pac, const char *url, size_t url_len, const char *host, size_t host_len,
                  char **out, size_t *out_len, char *err, size_t err_cap) {
  duk_context *ctx = pac->ctx;
  *out = NULL;
  *out_len = 0;
  if (!ctx) {
    snprintf(err, err_cap, "no script loaded");
    return -1;
  }
  duk_get_global_string(ctx, "FindProxyForURL");
  if (!duk_is_function(ctx, -1)) {
    duk_pop(ctx);
    snprintf(err, err_cap, "FindProxyForURL is no longer a function");
    return -1;
  }
  duk_push_lstring(ctx, url, url_len);
  duk_push_lstring(ctx, host, host_len);
  if (duk_pcall(ctx, 2) != 0) {
    error_text(ctx, -1, "FindProxyForURL threw: ", err, err_cap);
    duk_pop(ctx);
    return -1;
  }
  if (!duk_is_string(ctx, -1)) {
    static const char *const names[] = { "nothing",   "undefined",  "null",      "a boolean",
                                         "a number",  "a string",   "an object", "a buffer",
                                         "a pointer", "a lightfunc" };
    duk_int_t type = duk_get_type(ctx, -1);
    snprintf(err, err_cap, "FindProxyForURL returned %s, not a string",
             type >= 0 && type < (duk_int_t)(sizeof names / sizeof names[0]) ? names[type]
                                                                             : "a non-string");
    duk_pop(ctx);
    return -1;
  }
  duk_size_t len;
  const char *s = duk_get_lstring(ctx, -1, &len);
  if (len > TERN_PAC_MAX_RESULT) {
    snprintf(err, err_cap, "FindProxyForURL returned %lu bytes, more than %d", (unsigned long)len,
             TERN_PAC_MAX_RESULT);
    duk_pop(ctx);
    return -1;
  }
  char *copy = malloc(len + 1);
  if (!copy) {
    duk_pop(ctx);
    snprintf(err, err_cap, "out of memory");
    return -1;
  }
  for (duk_size_t i = 0; i < len; i++) copy[i] = (s[i] == '\r' || s[i] == '\n') ? ' ' : s[i];
  copy[len] = '\0';
  duk_pop(ctx);
  *out = copy;
  *out_len = len;
  return 0;
}
