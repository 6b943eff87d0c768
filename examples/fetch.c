/*
 * fetch URL FILE [--resume] — downloads URL into FILE with nothing but tern.h.
 *
 * Build against an installed libtern:  cc fetch.c $(pkg-config --cflags --libs tern) -o fetch
 * Exit status: 0 on a 2xx response, 1 on an HTTP error status, 2 on a transfer error.
 */
#include <tern.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct wait {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int done;
};

static void on_complete(tern_request_t *req, int status, void *user_data) {
  (void)req;
  (void)status;
  struct wait *w = user_data;
  pthread_mutex_lock(&w->lock);
  w->done = 1;
  pthread_cond_signal(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

static void wait_for(struct wait *w) {
  pthread_mutex_lock(&w->lock);
  while (!w->done) pthread_cond_wait(&w->cond, &w->lock);
  pthread_mutex_unlock(&w->lock);
}

static int fail(const char *what, int err) {
  fprintf(stderr, "fetch: %s: %s\n", what, tern_strerror(err));
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 3 || (argc == 4 && strcmp(argv[3], "--resume") != 0) || argc > 4) {
    fprintf(stderr, "usage: %s URL FILE [--resume]\n", argv[0]);
    return 2;
  }
  const char *url = argv[1], *file = argv[2];
  int resume = argc == 4;
  struct wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

  /* README: begin */
  tern_engine_t *engine;
  int r = tern_engine_new(&engine, NULL); /* runs its own loop thread */
  if (r != 0) return fail("engine", r);
  tern_request_t *req = NULL;
  /* The body goes to FILE.part and becomes FILE only when complete; resume continues it. */
  if ((r = tern_request_new(&req)) != 0 || (r = tern_request_set_url(req, url)) != 0 ||
      (r = tern_request_set_download_file(req, file, 0, 0, resume)) != 0 ||
      (r = tern_request_set_complete_cb(req, on_complete, &w)) != 0 ||
      (r = tern_engine_submit(engine, req)) != 0) {
    tern_request_free(req);
    tern_engine_free(engine);
    return fail(url, req ? r : TERN_ENOMEM);
  }
  wait_for(&w); /* on_complete runs once, on the engine's thread */
  int err = tern_request_get_error(req), status = tern_request_get_status(req);
  if (err != 0) /* the message says what failed and where */
    fprintf(stderr, "fetch: %s (%s)\n", tern_request_get_error_message(req), tern_err_name(err));
  /* README: end */
  else if (status == 416 && resume)
    fprintf(stderr, "fetch: %s was already complete\n", file);
  else if (status < 200 || status > 299)
    fprintf(stderr, "fetch: %s: HTTP %d %s\n", url, status, tern_request_get_reason(req));
  else
    fprintf(stderr, "fetch: %llu bytes in %.3f s\n",
            (unsigned long long)tern_request_get_bytes_received(req),
            tern_request_get_time(req, TERN_TIME_END));
  int rc = err != 0 ? 2 : (status == 416 && resume) || (status >= 200 && status <= 299) ? 0 : 1;
  tern_request_free(req);
  tern_engine_free(engine);
  return rc;
}
