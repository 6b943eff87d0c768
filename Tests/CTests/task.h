/*
 * task.h — the C test harness (libuv's test/task.h in spirit).
 *
 * Each test file defines cases with TEST(name) { ... }. Cases register themselves at start-up;
 * runner.c's main() runs the one named on the command line, so ctest gives every case its own
 * process and its own timeout. CMake finds the names by scanning the sources for "TEST(".
 */
#ifndef TERN_TEST_TASK_H
#define TERN_TEST_TASK_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*test_fn)(void);
void test__register(const char *name, test_fn fn);

/* Ends the running case as failed (runner.c): abort() normally; in a TERN_TORTURE build (the
 * allocation-failure torture run) an exit code the driver tells apart from a crash. */
_Noreturn void test__fail(void);

/* Ends the running case as skipped, with the reason on stderr: exit code TEST_SKIP_EXIT, which
 * ctest reports as a skip (SKIP_RETURN_CODE) and scripts/test.sh fails on. For a case whose
 * premise the system does not meet, never for a missing server. */
#define TEST_SKIP_EXIT 77
_Noreturn void test_skip(const char *reason);

#define TEST(name)                                                                                 \
  static void test_##name(void);                                                                   \
  __attribute__((constructor)) static void test_register_##name(void) {                            \
    test__register(#name, test_##name);                                                            \
  }                                                                                                \
  static void test_##name(void)

#define TEST_FAIL_(...)                                                                            \
  do {                                                                                             \
    fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                                \
    fprintf(stderr, __VA_ARGS__);                                                                  \
    fprintf(stderr, "\n");                                                                         \
    fflush(stderr);                                                                                \
    test__fail();                                                                                  \
  } while (0)

#define ASSERT(expr)                                                                               \
  do {                                                                                             \
    if (!(expr)) TEST_FAIL_("assertion failed: %s", #expr);                                        \
  } while (0)

#define ASSERT_BASE_(a, op, b, type, fmt)                                                          \
  do {                                                                                             \
    type a_ = (type)(a);                                                                           \
    type b_ = (type)(b);                                                                           \
    if (!(a_ op b_))                                                                               \
      TEST_FAIL_("assertion failed: %s %s %s (" fmt " vs " fmt ")", #a, #op, #b, a_, b_);          \
  } while (0)

#define ASSERT_EQ(a, b)  ASSERT_BASE_(a, ==, b, int64_t, "%" PRId64)
#define ASSERT_NE(a, b)  ASSERT_BASE_(a, !=, b, int64_t, "%" PRId64)
#define ASSERT_LT(a, b)  ASSERT_BASE_(a, <, b, int64_t, "%" PRId64)
#define ASSERT_LE(a, b)  ASSERT_BASE_(a, <=, b, int64_t, "%" PRId64)
#define ASSERT_GT(a, b)  ASSERT_BASE_(a, >, b, int64_t, "%" PRId64)
#define ASSERT_GE(a, b)  ASSERT_BASE_(a, >=, b, int64_t, "%" PRId64)
#define ASSERT_UEQ(a, b) ASSERT_BASE_(a, ==, b, uint64_t, "%" PRIu64)

#define ASSERT_STR_EQ(a, b)                                                                        \
  do {                                                                                             \
    const char *a_ = (a);                                                                          \
    const char *b_ = (b);                                                                          \
    if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)                                           \
      TEST_FAIL_("assertion failed: %s == %s (\"%s\" vs \"%s\")", #a, #b, a_ ? a_ : "(null)",      \
                 b_ ? b_ : "(null)");                                                              \
  } while (0)

#define ASSERT_MEM_EQ(a, b, n)                                                                     \
  do {                                                                                             \
    if (memcmp((a), (b), (n)) != 0) TEST_FAIL_("assertion failed: memory %s == %s", #a, #b);       \
  } while (0)

/* Milliseconds scaled by TERN_TEST_TIMEOUT_MULTIPLIER (sanitizer and valgrind runs are slow). */
uint64_t test_scaled_ms(uint64_t ms);

#endif
