/* Where a connection's addresses come from: entries pinned by tern_config_add_resolve, and a
 * cache of the resolver's answers shared by an engine's connections. An answer is kept for the
 * engine's DNS cache timeout (60 s by default, like curl's), so a burst of connections to one
 * host costs one lookup; getaddrinfo tells no TTL, so the timeout stands in for it. */
#include "internal.h"

#include <stdio.h>
#include <strings.h>
#include <sys/socket.h>

/* At most this many host:port answers are kept; the least recently stored go first. */
#define DNS_CACHE_MAX 64

typedef struct {
  tern__list node; /* eng->dns, most recently stored first */
  char *host;
  uint16_t port;
  uint64_t expires; /* uv_now */
  struct addrinfo *addrs;
} dns_entry;

/* An addrinfo node of our own, with room for its address. */
typedef struct {
  struct addrinfo ai;
  struct sockaddr_storage ss;
} own_node;

void tern__addrs_free(struct addrinfo *a) {
  while (a) {
    struct addrinfo *next = a->ai_next;
    free(tern__container_of(a, own_node, ai));
    a = next;
  }
}

/* Appends a copy of one TCP address to the chain ending at *tail. */
static bool append(struct addrinfo ***tail, int family, const struct sockaddr *addr,
                   socklen_t len) {
  if (len > sizeof(struct sockaddr_storage)) return false;
  own_node *node = tern__calloc(1, sizeof *node);
  if (node == NULL) return false;
  memcpy(&node->ss, addr, len);
  node->ai.ai_family = family;
  node->ai.ai_socktype = SOCK_STREAM;
  node->ai.ai_addr = (struct sockaddr *)&node->ss;
  node->ai.ai_addrlen = len;
  **tail = &node->ai;
  *tail = &node->ai.ai_next;
  return true;
}

static struct addrinfo *copy_chain(const struct addrinfo *a) {
  struct addrinfo *head = NULL, **tail = &head;
  for (; a; a = a->ai_next) {
    if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
    if (!append(&tail, a->ai_family, a->ai_addr, a->ai_addrlen)) {
      tern__addrs_free(head);
      return NULL;
    }
  }
  return head;
}

/* The addresses pinned for host:port, as a chain of our own; NULL when none is pinned. Entries
 * were validated when added. */
static struct addrinfo *pinned(const tern_config_t *cfg, const char *host, uint16_t port) {
  const char *p = cfg->resolve.data;
  const char *end = p ? p + cfg->resolve.len : NULL;
  while (p && p < end) {
    const char *tab1 = memchr(p, '\t', (size_t)(end - p));
    const char *tab2 = tab1 ? memchr(tab1 + 1, '\t', (size_t)(end - tab1 - 1)) : NULL;
    const char *nl = tab2 ? memchr(tab2, '\n', (size_t)(end - tab2)) : NULL;
    if (nl == NULL) return NULL;
    if ((size_t)(tab1 - p) == strlen(host) && strncasecmp(p, host, (size_t)(tab1 - p)) == 0 &&
        strtoul(tab1 + 1, NULL, 10) == port) {
      struct addrinfo *head = NULL, **tail = &head;
      for (const char *a = tab2 + 1; a < nl;) {
        size_t n = strcspn(a, ",\n");
        char ip[64];
        snprintf(ip, sizeof ip, "%.*s", (int)n, a);
        char *bare = ip;
        if (bare[0] == '[') {
          bare[strlen(bare) - 1] = '\0';
          bare++;
        }
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof ss);
        bool ok;
        if (uv_ip4_addr(bare, port, (struct sockaddr_in *)&ss) == 0)
          ok = append(&tail, AF_INET, (struct sockaddr *)&ss, sizeof(struct sockaddr_in));
        else if (uv_ip6_addr(bare, port, (struct sockaddr_in6 *)&ss) == 0)
          ok = append(&tail, AF_INET6, (struct sockaddr *)&ss, sizeof(struct sockaddr_in6));
        else
          ok = true;
        if (!ok) break;
        a += n;
        if (*a == ',') a++;
      }
      return head;
    }
    p = nl + 1;
  }
  return NULL;
}

static void drop(tern_engine_t *eng, dns_entry *e) {
  tern__list_remove(&e->node);
  eng->ndns--;
  tern__addrs_free(e->addrs);
  free(e->host);
  free(e);
}

struct addrinfo *tern__resolve_known(tern_engine_t *eng, const char *host, uint16_t port) {
  struct addrinfo *a = pinned(&eng->config, host, port);
  if (a) return a;
  uint64_t now = uv_now(eng->loop);
  for (tern__list *n = eng->dns.next; n != &eng->dns; n = n->next) {
    dns_entry *e = tern__container_of(n, dns_entry, node);
    if (e->port != port || strcasecmp(e->host, host) != 0) continue;
    if (now >= e->expires) {
      drop(eng, e);
      return NULL;
    }
    return copy_chain(e->addrs);
  }
  return NULL;
}

void tern__resolve_remember(tern_engine_t *eng, const char *host, uint16_t port,
                            const struct addrinfo *res) {
  uint64_t ttl = eng->config.dns_cache_ms;
  if (ttl == 0) return;
  uint64_t now = uv_now(eng->loop);
  for (tern__list *n = eng->dns.next; n != &eng->dns;) {
    dns_entry *e = tern__container_of(n, dns_entry, node);
    n = n->next;
    if (now >= e->expires || (e->port == port && strcasecmp(e->host, host) == 0)) drop(eng, e);
  }
  dns_entry *e = tern__calloc(1, sizeof *e);
  if (e == NULL) return;
  e->host = tern__strdup(host);
  e->addrs = copy_chain(res);
  if (e->host == NULL || e->addrs == NULL) {
    tern__addrs_free(e->addrs);
    free(e->host);
    free(e);
    return;
  }
  e->port = port;
  e->expires = now + ttl;
  tern__list_insert_head(&eng->dns, &e->node);
  if (++eng->ndns > DNS_CACHE_MAX) drop(eng, tern__container_of(eng->dns.prev, dns_entry, node));
}

void tern__resolve_forget_all(tern_engine_t *eng) {
  while (!tern__list_empty(&eng->dns))
    drop(eng, tern__container_of(eng->dns.next, dns_entry, node));
}
