/* Response bodies: content decoding (gzip, deflate) with bomb limits, and safe downloads
 * (temporary .part file, If-Range resume, restart on change). Against nginx and the
 * fault-injection server. */
#define _DEFAULT_SOURCE
#include "task.h"
#include "testsrv.h"
#include "testutil.h"

#include <tern.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char *with_suffix(const char *path, const char *suffix) {
  size_t n = strlen(path) + strlen(suffix) + 1;
  char *p = malloc(n);
  snprintf(p, n, "%s%s", path, suffix);
  return p;
}

/* ---- decoding ---- */

TEST(body_gzip_from_nginx_100m) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/gzip/100m.bin");
  char *dest = test_tmp_path("gz100m.bin");
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 0), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_STR_EQ(tern_request_get_header(req, "Content-Encoding"), "gzip");
  ASSERT_STR_EQ(tern_request_get_decoded_encoding(req), "gzip");
  ASSERT_UEQ(tern_request_get_bytes_delivered(req), 100u << 20);
  test_assert_file_sha(dest, "SHA_100M");
  unlink(dest);
  free(dest);
  tern_request_free(req);
  test_finish(eng);
}

TEST(body_gzip_compressible_text) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/gzip/64k.txt");
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_STR_EQ(tern_request_get_decoded_encoding(req), "gzip");
  ASSERT_LT(tern_request_get_bytes_received(req), tern_request_get_bytes_delivered(req));
  test_assert_req_body_sha(req, "SHA_64K");
  size_t hl;
  const char *head = tern_request_get_request_head(req, &hl);
  ASSERT(strstr(head, "\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n") != NULL);
  tern_request_free(req);
  test_finish(eng);
}

/* tern_request_take_body hands over the very buffer get_body showed, once; the request then
 * holds no body and frees none. */
TEST(body_taken_once_without_a_copy) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/gzip/64k.txt");
  ASSERT_EQ(test_run(eng, req), 0);
  test_assert_req_body_sha(req, "SHA_64K");
  size_t shown_len = 0, taken_len = 0;
  const void *shown = tern_request_get_body(req, &shown_len);
  void *taken = tern_request_take_body(req, &taken_len);
  ASSERT(taken != NULL && taken == shown);
  ASSERT_UEQ(taken_len, shown_len);
  ASSERT_UEQ(taken_len, 65536);
  size_t after = 1;
  ASSERT(tern_request_get_body(req, &after) == NULL);
  ASSERT_UEQ(after, 0);
  after = 1;
  ASSERT(tern_request_take_body(req, &after) == NULL);
  ASSERT_UEQ(after, 0);
  tern_request_free(req);
  free(taken); /* outlives the request that made it */
  after = 1;
  ASSERT(tern_request_take_body(NULL, &after) == NULL);
  ASSERT_UEQ(after, 0);
  test_finish(eng);
}

TEST(body_raw_and_off_modes) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* RAW: the gzip bytes as sent. */
  tern_request_t *req = test_request("NGINX_PORT", "/gzip/64k.txt");
  ASSERT_EQ(tern_request_set_decoding(req, TERN_DECODE_RAW), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT(tern_request_get_decoded_encoding(req) == NULL);
  ASSERT_STR_EQ(tern_request_get_header(req, "Content-Encoding"), "gzip");
  size_t len = 0;
  const unsigned char *b = tern_request_get_body(req, &len);
  ASSERT(len > 2 && b[0] == 0x1f && b[1] == 0x8b);
  ASSERT_UEQ(tern_request_get_bytes_delivered(req), len);
  tern_request_free(req);
  /* OFF: no Accept-Encoding, so nginx sends identity. */
  req = test_request("NGINX_PORT", "/gzip/64k.txt");
  ASSERT_EQ(tern_request_set_decoding(req, TERN_DECODE_OFF), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT(tern_request_get_header(req, "Content-Encoding") == NULL);
  test_assert_req_body_sha(req, "SHA_64K");
  size_t hl;
  ASSERT(strstr(tern_request_get_request_head(req, &hl), "Accept-Encoding") == NULL);
  tern_request_free(req);
  test_finish(eng);
}

/* ---- safe downloads ---- */

static int cancel_after_bytes(tern_request_t *req, tern_progress_state state, int percent,
                              uint64_t done, uint64_t total, void *ud) {
  (void)req;
  (void)percent;
  (void)total;
  uint64_t limit = *(uint64_t *)ud;
  return state == TERN_PROGRESS_DOWNLOAD && done >= limit;
}

TEST(body_canceled_download_leaves_old_file) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *dest = test_tmp_path("keep.bin");
  char *part = with_suffix(dest, ".part");
  test_write_file(dest, "old and good", 12);
  tern_request_t *req = test_request("NGINX_PORT", "/100m.bin");
  static uint64_t limit = 10u << 20;
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 0), 0);
  ASSERT_EQ(tern_request_set_progress_cb(req, cancel_after_bytes, &limit), 0);
  ASSERT_EQ(test_run(eng, req), TERN_ECANCELED);
  char hex[65], want[65];
  testsrv_sha256_mem("old and good", 12, want);
  ASSERT_EQ(testsrv_sha256_file(dest, hex), 0);
  ASSERT_STR_EQ(hex, want);
  ASSERT(!test_exists(part)); /* no resume asked: no debris */
  tern_request_free(req);
  unlink(dest);
  free(dest);
  free(part);
  test_finish(eng);
}

/* Interrupted with resume on: the .part stays with its validator, and a second attempt
 * continues it with If-Range and moves it into place. */
TEST(body_resume_part_with_if_range) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *dest = test_tmp_path("resume.bin");
  char *part = with_suffix(dest, ".part");
  char *validator = with_suffix(dest, ".part.validator");
  unlink(dest);
  tern_request_t *req = test_request("NGINX_PORT", "/100m.bin");
  static uint64_t limit = 20u << 20;
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 1), 0);
  ASSERT_EQ(tern_request_set_progress_cb(req, cancel_after_bytes, &limit), 0);
  ASSERT_EQ(test_run(eng, req), TERN_ECANCELED);
  tern_request_free(req);
  ASSERT(!test_exists(dest));
  ASSERT(test_exists(part));
  ASSERT(test_exists(validator));

  req = test_request("NGINX_PORT", "/100m.bin");
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 1), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 206);
  size_t hl;
  ASSERT(strstr(tern_request_get_request_head(req, &hl), "\r\nIf-Range: ") != NULL);
  test_assert_file_sha(dest, "SHA_100M");
  ASSERT(!test_exists(part));
  ASSERT(!test_exists(validator));
  tern_request_free(req);
  unlink(dest);
  free(dest);
  free(part);
  free(validator);
  test_finish(eng);
}

/* The resource changed between attempts: nginx's ETag no longer matches the If-Range, it sends
 * the new version whole, and the result is the new version, not a splice. */
TEST(body_resume_after_resource_changed) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *www = testsrv_www_path("changing.bin");
  size_t size = 4u << 20;
  unsigned char *v1 = malloc(size), *v2 = malloc(size + 100);
  for (size_t i = 0; i < size; i++) v1[i] = (unsigned char)(i * 7);
  for (size_t i = 0; i < size + 100; i++) v2[i] = (unsigned char)(i * 13 + 1);
  test_write_file(www, v1, size);
  char *dest = test_tmp_path("changing.bin");
  char *part = with_suffix(dest, ".part");
  unlink(dest);
  tern_request_t *req = test_request("NGINX_PORT", "/changing.bin");
  static uint64_t limit = 1u << 20;
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 1), 0);
  ASSERT_EQ(tern_request_set_progress_cb(req, cancel_after_bytes, &limit), 0);
  ASSERT_EQ(test_run(eng, req), TERN_ECANCELED);
  tern_request_free(req);
  ASSERT(test_exists(part));

  sleep(1); /* a different mtime, so a different ETag */
  test_write_file(www, v2, size + 100);
  req = test_request("NGINX_PORT", "/changing.bin");
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 1), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  char hex[65], want[65];
  testsrv_sha256_mem(v2, size + 100, want);
  ASSERT_EQ(testsrv_sha256_file(dest, hex), 0);
  ASSERT_STR_EQ(hex, want);
  ASSERT(!test_exists(part));
  tern_request_free(req);
  unlink(dest);
  unlink(www);
  free(www);
  free(dest);
  free(part);
  free(v1);
  free(v2);
  test_finish(eng);
}

/* A complete .part: nginx answers 416, which counts as done, and the part moves into place. */
TEST(body_resume_complete_part_416) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *dest = test_tmp_path("whole.bin");
  char *part = with_suffix(dest, ".part");
  unlink(dest);
  char *src = testsrv_www_path("1k.bin");
  int in = open(src, O_RDONLY);
  char buf[1024];
  ASSERT_EQ(read(in, buf, sizeof buf), 1024);
  close(in);
  test_write_file(part, buf, sizeof buf);
  tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 1), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 416);
  test_assert_file_sha(dest, "SHA_1K");
  ASSERT(!test_exists(part));
  tern_request_free(req);
  unlink(dest);
  free(dest);
  free(part);
  free(src);
  test_finish(eng);
}

/* The fault server ignores Range: a 200 restarts the .part from zero, no splice. */
TEST(body_resume_server_ignores_range) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *dest = test_tmp_path("norange.bin");
  char *part = with_suffix(dest, ".part");
  unlink(dest);
  test_write_file(part, "garbage that must not survive", 29);
  tern_request_t *req = test_request("FAULT_PORT", "/ok?size=100000");
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 1), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  char hex[65], want[65];
  testsrv_pattern_sha256(100000, want);
  ASSERT_EQ(testsrv_sha256_file(dest, hex), 0);
  ASSERT_STR_EQ(hex, want);
  ASSERT(!test_exists(part));
  tern_request_free(req);
  unlink(dest);
  free(dest);
  free(part);
  test_finish(eng);
}

/* ---- Expect: 100-continue ---- */

static tern_request_t *upload_request(const char *path, size_t size, unsigned char **data) {
  tern_request_t *req = test_request("FAULT_PORT", path);
  ASSERT_EQ(tern_request_set_method(req, "PUT"), 0);
  *data = malloc(size);
  for (size_t i = 0; i < size; i++) (*data)[i] = (unsigned char)(i * 31 + 7);
  ASSERT_EQ(tern_request_set_body(req, *data, size), 0);
  return req;
}

TEST(body_expect_continue_answered) {
  tern_engine_t *eng = test_engine_new(NULL);
  unsigned char *data;
  size_t size = 2u << 20;
  tern_request_t *req = upload_request("/echo", size, &data);
  ASSERT_EQ(tern_request_set_expect_continue(req, 1 << 20, 5000), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  size_t hl;
  ASSERT(strstr(tern_request_get_request_head(req, &hl), "\r\nExpect: 100-continue\r\n") != NULL);
  char want[65];
  testsrv_sha256_mem(data, size, want);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-Echo-Body-Sha256"), want);
  ASSERT_EQ(tern_request_is_body_skipped(req), 0);
  /* The 100 came at once: the body did not wait for the 5 s limit. */
  ASSERT_LT(tern_request_get_time(req, TERN_TIME_END), 4.0);
  tern_request_free(req);
  free(data);
  test_finish(eng);
}

TEST(body_expect_continue_ignored_sends_after_wait) {
  tern_engine_t *eng = test_engine_new(NULL);
  unsigned char *data;
  size_t size = 64u << 10;
  tern_request_t *req = upload_request("/echo?expect=ignore", size, &data);
  ASSERT_EQ(tern_request_set_expect_continue(req, 0, 300), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  char want[65];
  testsrv_sha256_mem(data, size, want);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-Echo-Body-Sha256"), want);
  ASSERT_GE(tern_request_get_time(req, TERN_TIME_SENT), 0.29);
  tern_request_free(req);
  free(data);
  test_finish(eng);
}

TEST(body_expect_continue_final_answer_skips_body) {
  tern_engine_t *eng = test_engine_new(NULL);
  unsigned char *data;
  size_t size = 4u << 20;
  tern_request_t *req = upload_request("/status/413?expect=final", size, &data);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 413);
  ASSERT_EQ(tern_request_is_body_skipped(req), 1);
  tern_request_free(req);
  /* The next request gets a fresh connection and works. */
  req = test_request("FAULT_PORT", "/ok?size=10");
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_is_reused(req), 0);
  tern_request_free(req);
  free(data);
  test_finish(eng);
}

TEST(body_small_upload_has_no_expect) {
  tern_engine_t *eng = test_engine_new(NULL);
  unsigned char *data;
  tern_request_t *req = upload_request("/echo", 1000, &data);
  ASSERT_EQ(test_run(eng, req), 0);
  size_t hl;
  ASSERT(strstr(tern_request_get_request_head(req, &hl), "Expect:") == NULL);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-Echo-Body-Length"), "1000");
  tern_request_free(req);
  free(data);
  test_finish(eng);
}

/* ---- hand-made compressed streams (fault server) ---- */

static void expect_pattern_body(tern_request_t *req, uint64_t size) {
  char want[65], got[65];
  testsrv_pattern_sha256(size, want);
  test_req_body_sha256(req, got);
  ASSERT_STR_EQ(got, want);
  ASSERT_UEQ(tern_request_get_bytes_delivered(req), size);
}

TEST(body_gzip_concatenated_members) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("FAULT_PORT", "/gzip?size=300000&members=3&chunked=1");
  ASSERT_EQ(test_run(eng, req), 0);
  expect_pattern_body(req, 300000);
  tern_request_free(req);
  test_finish(eng);
}

TEST(body_deflate_zlib_and_raw) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("FAULT_PORT", "/gzip?size=200000&kind=deflate");
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_STR_EQ(tern_request_get_decoded_encoding(req), "deflate");
  expect_pattern_body(req, 200000);
  tern_request_free(req);
  req = test_request("FAULT_PORT", "/gzip?size=200000&kind=rawdeflate");
  ASSERT_EQ(test_run(eng, req), 0);
  expect_pattern_body(req, 200000);
  tern_request_free(req);
  test_finish(eng);
}

TEST(body_gzip_truncated_stream) {
  tern_engine_t *eng = test_engine_new(NULL);
  /* The HTTP framing is intact; the gzip stream inside it lacks its end. */
  tern_request_t *req = test_request("FAULT_PORT", "/gzip?size=200000&truncate=20");
  ASSERT_EQ(test_run(eng, req), TERN_EDECODE);
  ASSERT(strstr(tern_request_get_error_message(req), "truncated") != NULL);
  tern_request_free(req);
  /* Corrupt data in the middle is a clear error too. */
  req = test_request("FAULT_PORT", "/gzip?size=200000&corrupt=500");
  ASSERT_EQ(test_run(eng, req), TERN_EDECODE);
  tern_request_free(req);
  test_finish(eng);
}

/* 1 GiB of zeros in about 1 MiB of gzip: refused by the ratio limit, early and clearly. */
TEST(body_gzip_bomb_refused) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *dest = test_tmp_path("bomb.bin");
  tern_request_t *req = test_request("FAULT_PORT", "/gzip?size=1073741824&zeros=1");
  ASSERT_EQ(tern_request_set_download_file(req, dest, 0, 0, 0), 0);
  ASSERT_EQ(test_run(eng, req), TERN_EDECODELIMIT);
  ASSERT(strstr(tern_request_get_error_message(req), "decompression bomb") != NULL);
  ASSERT_LT(tern_request_get_bytes_delivered(req), 300u << 20); /* stopped past the grace */
  ASSERT(!test_exists(dest));
  tern_request_free(req);
  /* An explicit byte limit refuses an ordinary body too. */
  req = test_request("FAULT_PORT", "/gzip?size=300000");
  ASSERT_EQ(tern_request_set_decoding_limits(req, 100000, 0), 0);
  ASSERT_EQ(test_run(eng, req), TERN_EDECODELIMIT);
  tern_request_free(req);
  free(dest);
  test_finish(eng);
}

/* ---- compressed request bodies ---- */

#include <zlib.h>

/* PUT with a gzip-compressed body to nginx's WebDAV location, which stores the bytes as sent;
 * GET them back and gunzip here: the original comes out. Memory and file bodies both. */
TEST(body_gzip_request_body) {
  tern_engine_t *eng = test_engine_new(NULL);
  size_t size = 3u << 20;
  unsigned char *data = malloc(size);
  for (size_t i = 0; i < size; i++) data[i] = (unsigned char)((i / 7) % 97); /* compressible */
  char want[65];
  testsrv_sha256_mem(data, size, want);
  char *src = test_tmp_path("plain.bin");
  test_write_file(src, data, size);
  for (int from_file = 0; from_file < 2; from_file++) {
    char path[64];
    snprintf(path, sizeof path, "/upload/%d-gz-%d.bin", (int)getpid(), from_file);
    tern_request_t *req = test_request("NGINX_PORT", path);
    ASSERT_EQ(tern_request_set_method(req, "PUT"), 0);
    if (from_file)
      ASSERT_EQ(tern_request_set_body_file(req, src, 0, 0), 0);
    else
      ASSERT_EQ(tern_request_set_body(req, data, size), 0);
    ASSERT_EQ(tern_request_set_body_gzip(req, 1), 0);
    ASSERT_EQ(test_run(eng, req), 0);
    int status = tern_request_get_status(req);
    ASSERT(status == 201 || status == 204);
    size_t hl;
    const char *head = tern_request_get_request_head(req, &hl);
    ASSERT(strstr(head, "\r\nContent-Encoding: gzip\r\n") != NULL);
    ASSERT(strstr(head, "\r\nTransfer-Encoding: chunked\r\n") != NULL);
    tern_request_free(req);

    req = test_request("NGINX_PORT", path);
    ASSERT_EQ(tern_request_set_decoding(req, TERN_DECODE_OFF), 0);
    ASSERT_EQ(test_run(eng, req), 0);
    ASSERT_EQ(tern_request_get_status(req), 200);
    size_t zlen = 0;
    const unsigned char *z = tern_request_get_body(req, &zlen);
    ASSERT(zlen > 0 && zlen < size / 4); /* it really was compressed */
    test_assert_gunzip_sha(z, zlen, size, want);
    tern_request_free(req);
  }
  unlink(src);
  free(src);
  free(data);
  test_finish(eng);
}

/* ---- bodies made of segments: multipart/form-data streamed from disk ---- */

#include <sys/resource.h>

static long peak_rss_kib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* A 200 MiB file part plus fields, as multipart/form-data built from segments: the receiver
 * parses it while streaming and reports each part; the client's memory stays flat. */
TEST(body_multipart_200m_from_disk) {
  tern_engine_t *eng = test_engine_new(NULL);
  char *big = test_tmp_path("big200.bin");
  char *src = testsrv_www_path("100m.bin");
  int out = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT(out >= 0);
  char *chunk = malloc(1 << 20);
  for (int copy = 0; copy < 2; copy++) {
    int in = open(src, O_RDONLY);
    ssize_t n;
    while ((n = read(in, chunk, 1 << 20)) > 0) ASSERT_EQ(write(out, chunk, (size_t)n), n);
    close(in);
  }
  close(out);
  free(chunk);
  char big_sha[65];
  ASSERT_EQ(testsrv_sha256_file(big, big_sha), 0);

  long rss_before = peak_rss_kib();
  tern_request_t *req = test_request("FAULT_PORT", "/multipart");
  ASSERT_EQ(tern_request_set_method(req, "POST"), 0);
  ASSERT_EQ(tern_request_add_header(req, "Content-Type", "multipart/form-data; boundary=XyZ42"), 0);
  const char *p1 =
      "--XyZ42\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello world\r\n";
  const char *p2 =
      "--XyZ42\r\nContent-Disposition: form-data; name=\"upload\"; filename=\"big.bin\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\n";
  const char *p3 =
      "\r\n--XyZ42\r\nContent-Disposition: form-data; name=\"slice\"; filename=\"s.bin\"\r\n"
      "Content-Type: application/x-slice\r\n\r\n";
  const char *end = "\r\n--XyZ42--\r\n";
  ASSERT_EQ(tern_request_add_body_segment(req, p1, strlen(p1)), 0);
  ASSERT_EQ(tern_request_add_body_segment(req, p2, strlen(p2)), 0);
  ASSERT_EQ(tern_request_add_body_segment_file(req, big, 0, 0), 0);
  ASSERT_EQ(tern_request_add_body_segment(req, p3, strlen(p3)), 0);
  ASSERT_EQ(tern_request_add_body_segment_file(req, src, 1000, 5000), 0); /* a byte range */
  ASSERT_EQ(tern_request_add_body_segment(req, end, strlen(end)), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_STR_EQ(tern_request_get_header(req, "X-Multipart-Parts"), "3");
  size_t len;
  const char *json = tern_request_get_body(req, &len);
  char *copy = strndup(json, len);
  char expect[512];
  snprintf(expect, sizeof expect,
           "{\"name\": \"upload\", \"filename\": \"big.bin\", \"content_type\": "
           "\"application/octet-stream\", \"size\": %llu, \"sha256\": \"%s\"",
           (unsigned long long)(200u << 20), big_sha);
  if (strstr(copy, expect) == NULL) TEST_FAIL_("multipart report lacks the file part: %s", copy);
  char slice_sha[65];
  test_www_sha256_slice("100m.bin", 1000, 4000, slice_sha);
  snprintf(expect, sizeof expect,
           "\"content_type\": \"application/x-slice\", \"size\": 4000, \"sha256\": \"%s\"",
           slice_sha);
  ASSERT(strstr(copy, expect) != NULL);
  ASSERT(strstr(copy,
                "\"name\": \"title\", \"filename\": null, \"content_type\": null, \"size\": 11") !=
         NULL);
  /* Content-Length was known up front: no chunked framing. */
  size_t hl;
  ASSERT(strstr(tern_request_get_request_head(req, &hl), "Transfer-Encoding") == NULL);
  long grown = peak_rss_kib() - rss_before;
  ASSERT_LT(grown, 20 * 1024); /* 200 MiB went out through a 64 KiB buffer */
  free(copy);
  tern_request_free(req);
  unlink(big);
  free(big);
  free(src);
  test_finish(eng);
}

/* A download to a device is written in place: /dev/null stays /dev/null (a .part renamed over
 * it would replace the device with a regular file). */
TEST(body_download_to_dev_null_keeps_device) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(tern_request_set_download_file(req, "/dev/null", 0, 0, 0), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(tern_request_get_status(req), 200);
  ASSERT_UEQ(tern_request_get_bytes_delivered(req), 1024);
  struct stat st;
  ASSERT_EQ(stat("/dev/null", &st), 0);
  ASSERT(S_ISCHR(st.st_mode));
  ASSERT(!test_exists("/dev/null.part"));
  tern_request_free(req);
  /* With resume too. */
  req = test_request("NGINX_PORT", "/1k.bin");
  ASSERT_EQ(tern_request_set_download_file(req, "/dev/null", 0, 0, 1), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_EQ(stat("/dev/null", &st), 0);
  ASSERT(S_ISCHR(st.st_mode));
  tern_request_free(req);
  test_finish(eng);
}

/* A body that fits in one read is paced too: the cap sizes the reads (a twentieth of a second
 * each), where a read of the whole buffer let 20,000 bytes at 40,000 B/s through at once. The
 * last read is not waited for (as curl), so the floor is (20,000 - 2,000) / 40,000 s. */
TEST(body_receive_rate_cap_paces_a_small_body) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("FAULT_PORT", "/ok?size=20000");
  ASSERT_EQ(tern_request_set_max_recv_speed(req, 40000), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  size_t len = 0;
  ASSERT(tern_request_get_body(req, &len) != NULL);
  ASSERT_UEQ(len, 20000);
  double body_time =
      tern_request_get_time(req, TERN_TIME_END) - tern_request_get_time(req, TERN_TIME_HEADERS);
  if (body_time < 0.44 || body_time > 3.0)
    TEST_FAIL_("20,000 B at 40,000 B/s took %.3f s", body_time);
  tern_request_free(req);
  test_finish(eng);
}

/* --limit-rate: 3 MiB at 6 MiB/s takes about half a second, and arrives whole. */
TEST(body_receive_rate_cap) {
  tern_engine_t *eng = test_engine_new(NULL);
  tern_request_t *req = test_request("NGINX_PORT", "/100m.bin");
  ASSERT_EQ(tern_request_set_download_file(req, "/dev/null", 0, 3u << 20, 0), 0);
  ASSERT_EQ(tern_request_set_max_recv_speed(req, 6u << 20), 0);
  ASSERT_EQ(test_run(eng, req), 0);
  ASSERT_UEQ(tern_request_get_bytes_delivered(req), 3u << 20);
  double body_time =
      tern_request_get_time(req, TERN_TIME_END) - tern_request_get_time(req, TERN_TIME_HEADERS);
  if (body_time < 0.4 || body_time > 2.0) TEST_FAIL_("3 MiB at 6 MiB/s took %.3f s", body_time);
  tern_request_free(req);
  test_finish(eng);
}
