// tern-pac: evaluates proxy auto-configuration scripts for a parent process, over stdin and
// stdout, one request and one answer per line (docs/pac.md). A process of its own because
// duktape cannot interrupt a script (Debian builds it without DUK_USE_EXEC_TIMEOUT_CHECK): the
// parent kills the process when an answer takes too long.
//
//   SCRIPT <nbytes>\n<nbytes of JavaScript>  ->  OK | ERR <message>
//   FIND <url> <host>\n                      ->  OK <result> | ERR <message>
//   anything else                            ->  ERR unknown request
//   EOF                                      ->  exit 0
#ifndef _DEFAULT_SOURCE
#  define _DEFAULT_SOURCE  // getc_unlocked under -std=c11
#endif
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pac.h"

#define MAX_LINE   (64 * 1024)         // bytes of a request line, the newline not counted
#define MAX_SCRIPT (16 * 1024 * 1024)  // bytes of a script

enum { LINE_OK, LINE_TOO_LONG, LINE_EOF };

// Reads one line without its LF (and a CR before it) into buf (MAX_LINE + 1 bytes). A line
// longer than MAX_LINE is read to its end and dropped. A last line without LF counts as a line.
static int read_line(char *buf, size_t *len) {
  size_t n = 0;
  int too_long = 0, c;
  while ((c = getc_unlocked(stdin)) != EOF && c != '\n') {
    if (n < MAX_LINE)
      buf[n++] = (char)c;
    else
      too_long = 1;
  }
  if (c == EOF && n == 0 && !too_long) return LINE_EOF;
  if (too_long) return LINE_TOO_LONG;
  if (n > 0 && buf[n - 1] == '\r') n--;
  buf[n] = '\0';
  *len = n;
  return LINE_OK;
}

static void answer(const char *status, const char *text, size_t len) {
  fputs(status, stdout);
  if (text) {
    fputc(' ', stdout);
    fwrite(text, 1, len, stdout);
  }
  fputc('\n', stdout);
  fflush(stdout);
}

static void answer_err(const char *msg) { answer("ERR", msg, strlen(msg)); }

// Reads `len` bytes of stdin into buf (or drops them when buf is NULL). Returns -1 at EOF.
static int read_exact(char *buf, unsigned long long len) {
  char sink[8192];
  while (len > 0) {
    size_t want = len > sizeof sink ? sizeof sink : (size_t)len;
    size_t got = fread(buf ? buf : sink, 1, want, stdin);
    if (got == 0) return -1;
    if (buf) buf += got;
    len -= got;
  }
  return 0;
}

// SCRIPT <nbytes>: returns -1 when stdin ended inside the script.
static int handle_script(tern_pac *pac, const char *arg) {
  if (*arg < '0' || *arg > '9' || strlen(arg) > 19) {
    answer_err("usage: SCRIPT <nbytes>");
    return 0;
  }
  char *end;
  errno = 0;
  unsigned long long n = strtoull(arg, &end, 10);
  if (*end != '\0' || errno != 0) {
    answer_err("usage: SCRIPT <nbytes>");
    return 0;
  }
  if (n > MAX_SCRIPT) {
    if (read_exact(NULL, n) != 0) return -1;
    answer_err("script too large (more than 16777216 bytes)");
    return 0;
  }
  char *script = malloc(n ? (size_t)n : 1);
  if (!script) {
    if (read_exact(NULL, n) != 0) return -1;
    answer_err("out of memory");
    return 0;
  }
  if (read_exact(script, n) != 0) {
    free(script);
    return -1;
  }
  char err[TERN_PAC_MAX_MESSAGE + 128];
  if (tern_pac_load(pac, script, (size_t)n, err, sizeof err) == 0)
    answer("OK", NULL, 0);
  else
    answer_err(err);
  free(script);
  return 0;
}

// FIND <url> <host>: the host is the last space-separated word, the URL what is before it.
static void handle_find(tern_pac *pac, const char *arg, size_t len) {
  const char *space = NULL;
  for (size_t i = len; i > 0; i--) {
    if (arg[i - 1] == ' ') {
      space = arg + i - 1;
      break;
    }
  }
  if (!space || space == arg || space + 1 == arg + len) {
    answer_err("usage: FIND <url> <host>");
    return;
  }
  char err[TERN_PAC_MAX_MESSAGE + 128];
  char *result;
  size_t result_len;
  if (tern_pac_find(pac, arg, (size_t)(space - arg), space + 1, (size_t)(arg + len - space - 1),
                    &result, &result_len, err, sizeof err) == 0)
    answer("OK", result, result_len);
  else
    answer_err(err);
  free(result);
}

// The parent kills this process when an answer takes too long. A parent ended by a signal sent
// to it alone (kill PID, or Ctrl-C while the script loads) cannot, and a script looping in its
// top-level code would run on with no one to read its answer: a thread watches for the parent's
// end (this process is then given another parent) and ends the process.
static pid_t parent;

static void *watch_parent(void *arg) {
  (void)arg;
  while (getppid() == parent) usleep(200 * 1000);
  _exit(1);
}

int main(void) {
  parent = getppid();
  pthread_t watcher;
  if (pthread_create(&watcher, NULL, watch_parent, NULL) == 0) pthread_detach(watcher);
  tern_pac *pac = tern_pac_new();
  char *line = malloc(MAX_LINE + 1);
  if (!pac || !line) {
    fputs("tern-pac: out of memory\n", stderr);
    return 1;
  }
  for (;;) {
    size_t len = 0;
    int r = read_line(line, &len);
    if (r == LINE_EOF) break;
    if (r == LINE_TOO_LONG) {
      answer_err("request line too long (more than 65536 bytes)");
      continue;
    }
    if (strncmp(line, "SCRIPT ", 7) == 0) {
      if (handle_script(pac, line + 7) != 0) break;
    } else if (strncmp(line, "FIND ", 5) == 0) {
      handle_find(pac, line + 5, len - 5);
    } else {
      answer_err("unknown request");
    }
  }
  tern_pac_free(pac);
  free(line);
  return 0;
}
