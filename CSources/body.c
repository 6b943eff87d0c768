/* Request body sources: memory, a file range, segments (memory and file ranges in order) or a
 * callback; opening their files for an exchange, reading them at upload.sent, and upload
 * progress. The gzip encoder (gzip.c) pulls plaintext from here too. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void free_segments(tern_request_t *req) {
  for (size_t i = 0; i < req->upload.nsegments; i++) {
    free(req->upload.segments[i].data);
    free(req->upload.segments[i].path);
    tern__close_fd(&req->upload.segments[i].fd);
  }
  free(req->upload.segments);
  req->upload.segments = NULL;
  req->upload.nsegments = 0;
}

void tern__request_clear_body(tern_request_t *req) {
  free_segments(req);
  free(req->upload.mem);
  req->upload.mem = NULL;
  req->upload.mem_len = 0;
  free(req->upload.path);
  req->upload.path = NULL;
  req->upload.cb = NULL;
  req->upload.kind = TERN__BODY_NONE;
}

/* Opens bytes [offset, end) of a file for upload: *fd and *len on success. */
static int open_upload_range(tern_request_t *req, const char *path, uint64_t offset, uint64_t end,
                             int *fd_out, uint64_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    tern__request_set_error(req, TERN_EFILEREAD, "open %s: %s", path, strerror(errno));
    return TERN_EFILEREAD;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    tern__request_set_error(req, TERN_EFILEREAD, "stat %s: %s", path, strerror(errno));
    close(fd);
    return TERN_EFILEREAD;
  }
  uint64_t size = (uint64_t)st.st_size;
  if (end == 0) end = size;
  if (end > size || offset > end) {
    tern__request_set_error(
        req, TERN_EFILEREAD, "upload range %llu-%llu lies outside %s (%llu bytes)",
        (unsigned long long)offset, (unsigned long long)end, path, (unsigned long long)size);
    close(fd);
    return TERN_EFILEREAD;
  }
  *fd_out = fd;
  *len = end - offset;
  return 0;
}

static int open_upload(tern_request_t *req) {
  return open_upload_range(req, req->upload.path, req->upload.offset, req->upload.end,
                           &req->upload.fd, &req->upload.len);
}

static int open_segments(tern_request_t *req) {
  uint64_t total = 0;
  for (size_t i = 0; i < req->upload.nsegments; i++) {
    tern__segment *s = &req->upload.segments[i];
    if (s->path && s->fd < 0) {
      int r = open_upload_range(req, s->path, s->offset, s->end, &s->fd, &s->len);
      if (r) return r;
    }
    total += s->len;
  }
  req->upload.len = total;
  return 0;
}

/* Copies the segments' bytes at upload.sent into buf: memory parts copied, file parts read. */
static int64_t read_segments(tern_request_t *req, char *buf, size_t cap) {
  size_t done = 0;
  while (done < cap && req->upload.seg_index < req->upload.nsegments) {
    tern__segment *s = &req->upload.segments[req->upload.seg_index];
    uint64_t left = s->len - req->upload.seg_offset;
    if (left == 0) {
      req->upload.seg_index++;
      req->upload.seg_offset = 0;
      continue;
    }
    size_t n = cap - done < left ? cap - done : (size_t)left;
    if (s->data) {
      memcpy(buf + done, s->data + req->upload.seg_offset, n);
    } else {
      ssize_t k;
      do {
        k = pread(s->fd, buf + done, n, (off_t)(s->offset + req->upload.seg_offset));
      } while (k < 0 && errno == EINTR);
      if (k <= 0) {
        tern__request_set_error(req, TERN_EFILEREAD, "read %s: %s", s->path,
                                k < 0 ? strerror(errno) : "file shrank while uploading");
        return TERN_EFILEREAD;
      }
      n = (size_t)k;
    }
    req->upload.seg_offset += n;
    done += n;
  }
  return (int64_t)done;
}

/* Opens the body's files and fixes its lengths for this exchange: body_len (UINT64_MAX when it
 * goes chunked) and plain_len (before compression). Returns 0 or a TERN_E* code. */
int tern__request_open_body(tern_request_t *req) {
  int r;
  switch (req->upload.kind) {
    case TERN__BODY_MEM: req->upload.len = req->upload.mem_len; break;
    case TERN__BODY_FILE:
      if (req->upload.fd < 0 && (r = open_upload(req)) != 0) return r;
      break;
    case TERN__BODY_SEGMENTS:
      if ((r = open_segments(req)) != 0) return r;
      req->upload.seg_index = 0;
      req->upload.seg_offset = 0;
      break;
    case TERN__BODY_CB:
      if (req->upload.cb_length < 0 && req->http10) {
        tern__request_set_error(req, TERN_EINVAL, "a body of unknown length needs HTTP/1.1");
        return TERN_EINVAL;
      }
      req->upload.len = req->upload.cb_length < 0 ? UINT64_MAX : (uint64_t)req->upload.cb_length;
      break;
    default: req->upload.len = 0; break;
  }
  req->upload.plain_len = req->upload.len;
  if (req->upload.gzip && req->upload.kind != TERN__BODY_NONE) {
    if (req->http10) {
      tern__request_set_error(req, TERN_EINVAL,
                              "a compressed body is sent chunked: needs HTTP/1.1");
      return TERN_EINVAL;
    }
    req->upload.len = UINT64_MAX; /* the compressed length is known only at the end */
  }
  return 0;
}

bool tern__request_can_replay(const tern_request_t *req) {
  /* A body skipped before any of it was read counts as unread. */
  return req->upload.kind != TERN__BODY_CB || req->upload.sent == 0;
}

int tern__request_progress_upload(tern_request_t *req) {
  if (req->notify.progress == NULL || atomic_load(&req->released)) return 0;
  bool unknown = req->upload.plain_len == UINT64_MAX;
  uint64_t total = unknown ? 0 : req->upload.plain_len;
  int percent = unknown ? 0 : tern__percent_of(req->upload.sent, total);
  if (percent <= req->notify.last_up_percent && !(unknown && percent == 0)) return 0;
  req->notify.last_up_percent = percent;
  if (req->notify.progress(req, TERN_PROGRESS_UPLOAD, percent, req->upload.sent, total,
                           req->notify.progress_data)) {
    tern__request_set_error(req, TERN_ECANCELED, "canceled by the progress callback");
    return TERN_ECANCELED;
  }
  return 0;
}

int64_t tern__request_pull_plain(tern_request_t *req, char *scratch, size_t cap, const char **ptr) {
  if (req->upload.kind == TERN__BODY_MEM) {
    uint64_t left = req->upload.plain_len - req->upload.sent;
    size_t n = left < (1u << 20) ? (size_t)left : (1u << 20);
    *ptr = (const char *)req->upload.mem + req->upload.sent;
    req->upload.sent += n;
    return (int64_t)n;
  }
  int64_t n = tern__request_read_plain(req, scratch, cap);
  if (n > 0) req->upload.sent += (uint64_t)n;
  *ptr = scratch;
  return n;
}

/* The next bytes of a file or callback body, at upload.sent, bounded by its plain length. */
int64_t tern__request_read_plain(tern_request_t *req, char *buf, size_t cap) {
  uint64_t left =
      req->upload.plain_len == UINT64_MAX ? UINT64_MAX : req->upload.plain_len - req->upload.sent;
  if (left == 0) return 0;
  if (cap > left) cap = (size_t)left;
  if (req->upload.kind == TERN__BODY_SEGMENTS) return read_segments(req, buf, cap);
  if (req->upload.kind == TERN__BODY_FILE) {
    ssize_t n;
    do {
      n = pread(req->upload.fd, buf, cap, (off_t)(req->upload.offset + req->upload.sent));
    } while (n < 0 && errno == EINTR);
    if (n <= 0) {
      tern__request_set_error(req, TERN_EFILEREAD, "read %s: %s", req->upload.path,
                              n < 0 ? strerror(errno) : "file shrank while uploading");
      return TERN_EFILEREAD;
    }
    return n;
  }
  if (atomic_load(&req->released)) return TERN_ECANCELED; /* freed: no more callbacks */
  int64_t n = req->upload.cb(req, buf, cap, req->upload.cb_data);
  if (n == TERN_READ_WAIT) return TERN__PULL_WAIT;
  if (n < 0 || (uint64_t)n > cap || (n == 0 && req->upload.plain_len != UINT64_MAX)) {
    tern__request_set_error(req, TERN_EFILEREAD, "the body callback %s",
                            n == 0 ? "ended before the announced length" : "reported an error");
    return TERN_EFILEREAD;
  }
  return n;
}
