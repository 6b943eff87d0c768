/*
 * torture.h — what runner.c needs from the torture harness (torture.c) in a TERN_TORTURE build.
 *
 * Exit codes of a test executable in that build, for the driver (torture.py):
 *   0   the case passed (LeakSanitizer checked the whole run at exit)
 *   3   the case failed an assertion on its own thread; its engines and requests were freed,
 *       then LeakSanitizer checked the run at exit (expected under injection)
 *   4   the case failed an assertion on another thread (a callback on the loop thread); the
 *       process ended at once, without leak check (expected under injection)
 *   5   after a failed assertion and that clean-up, request objects were still alive: a lost
 *       reference (a defect)
 *   23  AddressSanitizer / LeakSanitizer / UBSan report (ASAN_OPTIONS=exitcode=23): a defect
 *   124 the runner's watchdog: a hang
 *   125 tern_engine_free hung while freeing the engines of a failed case: a hang
 * Anything else (a signal, SIGABRT from an assert() in the engine) is a crash.
 */
#ifndef TERN_TEST_TORTURE_H
#define TERN_TEST_TORTURE_H

#define TORTURE_EXIT_ASSERT              3
#define TORTURE_EXIT_ASSERT_OTHER_THREAD 4
#define TORTURE_EXIT_LIVE_REQUESTS       5
#define TORTURE_EXIT_FREE_HANG           125

/* Frees the engines a failed case left behind (tern_engine_free on each); returns how many. */
int torture_free_engines(void);

/* Then drops the case's references to the requests it had not freed; returns how many. */
int torture_free_requests(void);

#endif
