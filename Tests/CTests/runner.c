/* The test runner linked into every C test executable: `test-AREA NAME` runs case NAME in this
 * process; `test-AREA --list` prints the cases. A watchdog alarm turns a hang into a failure.
 *
 * In a TERN_TORTURE build (the allocation-failure torture run, torture.c / torture.py) the case
 * runs on a thread of its own. A failed assertion on that thread parks it (its stack, and what
 * it points to, stays alive) and the main thread frees the engines and requests the case left
 * behind, then exits with TORTURE_EXIT_ASSERT, so LeakSanitizer still checks the engine's error
 * paths; exit codes in torture.h. */
#define _DEFAULT_SOURCE
#include "task.h"

#include <signal.h>
#include <unistd.h>

#ifdef TERN_TORTURE
#  include "torture.h"

#  include <pthread.h>
#  include <tern.h>
#endif

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

#ifdef TERN_TORTURE
static pthread_t case_thread;
static _Thread_local int on_case_thread;
static pthread_mutex_t case_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t case_cond = PTHREAD_COND_INITIALIZER;
static int case_state; /* 0 running, 1 returned, 2 failed an assertion */

_Noreturn void test__fail(void) {
  if (!on_case_thread) _exit(TORTURE_EXIT_ASSERT_OTHER_THREAD);
  pthread_mutex_lock(&case_lock);
  case_state = 2;
  pthread_cond_signal(&case_cond);
  pthread_mutex_unlock(&case_lock);
  for (;;) pause();
}

static test_fn case_fn;

static void *case_main(void *arg) {
  (void)arg;
  on_case_thread = 1;
  case_fn();
  pthread_mutex_lock(&case_lock);
  case_state = 1;
  pthread_cond_signal(&case_cond);
  pthread_mutex_unlock(&case_lock);
  return NULL;
}

static void on_free_alarm(int sig) {
  (void)sig;
  static const char msg[] = "tern_engine_free hung after a failed assertion (watchdog)\n";
  ssize_t r = write(2, msg, sizeof msg - 1);
  (void)r;
  _exit(TORTURE_EXIT_FREE_HANG);
}

/* Runs fn on its own thread; returns only when it passed. */
static void run_case(test_fn fn) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 8u << 20);
  case_fn = fn;
  if (pthread_create(&case_thread, &attr, case_main, NULL) != 0) abort();
  pthread_attr_destroy(&attr);
  pthread_mutex_lock(&case_lock);
  while (case_state == 0) pthread_cond_wait(&case_cond, &case_lock);
  int state = case_state;
  pthread_mutex_unlock(&case_lock);
  if (state == 1) {
    pthread_join(case_thread, NULL);
    return;
  }
  signal(SIGALRM, on_free_alarm);
  alarm((unsigned)(test_scaled_ms(20000) / 1000));
  int engines = torture_free_engines();
  int requests = torture_free_requests();
  alarm(0);
  fprintf(stderr, "torture: assertion failed; freed %d engine(s) and %d request(s) the case left\n",
          engines, requests);
  uint64_t live = tern_engine_get_stat(NULL, TERN_STAT_REQUESTS_LIVE);
  if (live != 0) {
    fprintf(stderr, "torture: %" PRIu64 " request object(s) still alive after that\n", live);
    exit(TORTURE_EXIT_LIVE_REQUESTS);
  }
  exit(TORTURE_EXIT_ASSERT);
}
#else
_Noreturn void test__fail(void) { abort(); }

static void run_case(test_fn fn) { fn(); }
#endif

_Noreturn void test_skip(const char *reason) {
  fprintf(stderr, "SKIPPED: %s\n", reason);
  fflush(stderr);
  _exit(TEST_SKIP_EXIT);
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
      run_case(tests[i].fn);
      printf("ok %s\n", tests[i].name);
      return 0;
    }
  }
  fprintf(stderr, "no test named %s\n", argv[1]);
  return 2;
}
