/*
 * get URL — prints the response's status line (to stderr) and its body (to stdout), with the
 * blocking call tern_request_perform and nothing but tern.h.
 *
 * Build against an installed libtern:  cc get.c $(pkg-config --cflags --libs tern) -o get
 * Exit status: 0 on a 2xx response, 1 on another status, 2 when the request failed.
 */
/* README: begin */
#include <stdio.h>
#include <tern.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s URL\n", argv[0]);
    return 2;
  }
  tern_engine_t *engine = NULL;
  tern_request_t *req = NULL;
  int r = tern_engine_new(&engine, NULL); /* the engine runs its own loop thread */
  if (r == 0) r = tern_request_new(&req);
  if (r == 0) r = tern_request_set_url(req, argv[1]);
  if (r == 0) r = tern_request_perform(engine, req); /* submits, waits for the end */
  int status = r == 0 ? tern_request_get_status(req) : 0;
  if (r == 0) {
    size_t len = 0;
    const void *body = tern_request_get_body(req, &len);
    fprintf(stderr, "HTTP %d %s, %zu bytes\n", status, tern_request_get_reason(req), len);
    if (len > 0) fwrite(body, 1, len, stdout);
  } else if (tern_request_is_done(req)) { /* says what failed and where */
    fprintf(stderr, "get: %s (%s)\n", tern_request_get_error_message(req), tern_err_name(r));
  } else {
    fprintf(stderr, "get: %s\n", tern_strerror(r));
  }
  tern_request_free(req);
  tern_engine_free(engine);
  return r != 0 ? 2 : status >= 200 && status <= 299 ? 0 : 1;
}
/* README: end */
