/* Issue 18: the engine against a hostile environment and hostile servers — closed standard
 * descriptors, odd download targets, endless interim responses, decompression limits, unknown
 * codings, header injection — and the hostile-server matrix (every case: a clear error code and
 * message, bounded time, an existing output file left intact). */
#define _DEFAULT_SOURCE
#include "task.h"
#include "testsrv.h"
#include "testutil.h"

#include <tern.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- 1. standard descriptors closed ---- */

/* The process starts with 0, 1 and 2 closed (`prog <&- >&- 2>&-`): the engine must neither hand
 * those numbers to libuv (which asserts they are never closed) nor write on them. */
TEST(hostile_std_fds_closed) {
  int saved = dup(2);
  ASSERT(saved > 2);
  char *dest = test_tmp_path("stdfds.bin");
  close(0);
  close(1);
  close(2);
  tern_engine_t *eng = NULL;
  int r = tern_engine_new(&eng, NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
  int s = tern_request_set_download_file(req, dest, 0, 0, 0);
  int run = r || s ? -1 : test_run(eng, req);
  int status = tern_request_get_status(req);
  tern_request_free(req);
  tern_engine_free(eng); /* aborted here in uv_loop_close before the fix */
  ASSERT_EQ(dup2(saved, 2), 2);
  close(saved);
  ASSERT_EQ(r, 0);
  ASSERT_EQ(s, 0);
  ASSERT_EQ(run, 0);
  ASSERT_EQ(status, 200);
  test_assert_file_sha(dest, "SHA_1K");
  /* 0 and 1 are taken by /dev/null now, never by an engine's socket or epoll. */
  ASSERT(fcntl(0, F_GETFD) != -1);
  ASSERT(fcntl(1, F_GETFD) != -1);
  unlink(dest);
  free(dest);
  test_assert_no_live_requests();
}
