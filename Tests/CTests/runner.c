/* The test runner linked into every C test executable: `test-AREA NAME` runs case NAME in this
 * process; `test-AREA --list` prints the cases. A watchdog alarm turns a hang into a failure. */
#include "task.h"

#include <signal.h>
#include <unistd.h>

#define MAX_TESTS 512

static struct {
  const char *name;
  test_fn fn;
} tests[MAX_TESTS];
static size_t test_count;

void test__register(const char *name, test_fn fn) {
  if (test_count == MAX_TESTS) {
    fprintf(stderr, "too many tests in one file\n");
    abort();
  }
  tests[test_count].name = name;
  tests[test_count].fn = fn;
  test_count++;
}

uint64_t test_scaled_ms(uint64_t ms) {
  const char *m = getenv("TERN_TEST_TIMEOUT_MULTIPLIER");
  long k = m ? strtol(m, NULL, 10) : 1;
  return ms * (uint64_t)(k > 0 ? k : 1);
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "test timed out (watchdog)\n";
  ssize_t r = write(2, msg, sizeof msg - 1);
  (void)r;
  _exit(124);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s --list | NAME\n", argv[0]);
    return 2;
  }
  if (strcmp(argv[1], "--list") == 0) {
    for (size_t i = 0; i < test_count; i++) printf("%s\n", tests[i].name);
    return 0;
  }
  for (size_t i = 0; i < test_count; i++) {
    if (strcmp(tests[i].name, argv[1]) == 0) {
      signal(SIGPIPE, SIG_IGN);
      signal(SIGALRM, on_alarm);
      alarm((unsigned)(test_scaled_ms(120000) / 1000));
      tests[i].fn();
      printf("ok %s\n", tests[i].name);
      return 0;
    }
  }
  fprintf(stderr, "no test named %s\n", argv[1]);
  return 2;
}
