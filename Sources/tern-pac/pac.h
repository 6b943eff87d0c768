// The PAC evaluator behind tern-pac: one duktape heap per loaded script, the standard helper
// functions defined before the script runs, and a byte-counting allocator that bounds the heap.
#ifndef TERN_PAC_H
#define TERN_PAC_H

#include <stddef.h>

// At most this many bytes of a FindProxyForURL result or an error message are answered.
#define TERN_PAC_MAX_RESULT  (64 * 1024)
#define TERN_PAC_MAX_MESSAGE 1024

typedef struct tern_pac tern_pac;

// The evaluator's settings, from the environment (TERN_PAC_NOW, TERN_PAC_MY_IP,
// TERN_PAC_HEAP_LIMIT); returns NULL when out of memory.
tern_pac *tern_pac_new(void);
void tern_pac_free(tern_pac *pac);

// Drops the loaded script (if any), then compiles and runs `script` in a fresh heap. Returns 0,
// or -1 with a one-line message in `err` (then no script is loaded).
int tern_pac_load(tern_pac *pac, const char *script, size_t len, char *err, size_t err_cap);

// Calls FindProxyForURL(url, host). Returns 0 with the result in *out (malloc'd and
// NUL-terminated, *out_len bytes, CR and LF replaced by spaces), or -1 with a message in `err`
// (it threw, returned a non-string or more than TERN_PAC_MAX_RESULT bytes, or no script).
int tern_pac_find(tern_pac *pac, const char *url, size_t url_len, const char *host, size_t host_len,
                  char **out, size_t *out_len, char *err, size_t err_cap);

// The JavaScript that defines the helper functions (prelude.c): a function expression taking
// the global object and an object of native functions.
extern const char tern_pac_prelude[];

#endif
