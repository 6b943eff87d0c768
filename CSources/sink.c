/* Where the response body goes: a memory buffer, the data callback, or a file (written as
 * PATH.part and moved into place once complete, resumable with Range and If-Range), through the
 * content decoder when the body is encoded; and download progress. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* A non-2xx response with a file sink keeps at most this much of its body, for the caller to
 * read the server's explanation; the file itself is left alone. */
#define ERROR_BODY_LIMIT (1u << 20)
/* Memory sinks reserve the announced Content-Length up front, but never more than this, so a
 * lying server cannot make one header allocate gigabytes. */
#define PREALLOC_LIMIT   (16u << 20)

/* Where a file download lands and from which byte it continues: the .part and validator paths
 * (beside the file a symlink points to), devices written in place, the size already there, and
 * the validator saved for If-Range (into validator[0, cap), "" when none). Returns 0 or
 * TERN_ENOMEM. */
int tern__request_prepare_download(tern_request_t *req, char *validator, size_t cap) {
  req->sink.range_start = 0;
  req->sink.range_sent = false;
  if (req->sink.kind == TERN__SINK_FILE) {
    if (req->sink.part_path == NULL) {
      /* A symlink is written through: the temporary file goes beside the file it points to,
       * and replaces that file, not the link. A dangling link is written in place (below). */
      struct stat lst;
      char *target = NULL;
      if (lstat(req->sink.path, &lst) == 0 && S_ISLNK(lst.st_mode))
        target = realpath(req->sink.path, NULL);
      if (target == NULL) target = tern__strdup(req->sink.path);
      tern__str pp = { 0 }, vp = { 0 };
      if (target == NULL || tern__str_appendf(&pp, "%s.part", target) ||
          tern__str_appendf(&vp, "%s.part.validator", target)) {
        free(target);
        tern__str_free(&pp);
        tern__str_free(&vp);
        return TERN_ENOMEM;
      }
      req->sink.target_path = target;
      req->sink.part_path = pp.data;
      req->sink.validator_path = vp.data;
    }
    req->sink.resume_from = 0;
    req->sink.resume_in_place = false;
    struct stat dst, lst;
    /* A device or pipe (/dev/null, a FIFO) is written in place: renaming a .part over it would
     * replace it with a regular file. So is a directory, to fail on it with EISDIR and no .part
     * debris, and a dangling symlink (open creates the file it names, as curl does). */
    bool exists = stat(req->sink.target_path, &dst) == 0;
    req->sink.special =
        (exists && !S_ISREG(dst.st_mode)) ||
        strncmp(req->sink.path, "/dev/", 5) == 0 || /* /dev/stdout: the open fd */
        strncmp(req->sink.target_path, "/proc/", 6) == 0 ||
        (!exists && lstat(req->sink.target_path, &lst) == 0 && S_ISLNK(lst.st_mode));
    if (req->sink.resume && !req->sink.special) {
      struct stat st;
      if (stat(req->sink.part_path, &st) == 0 && S_ISREG(st.st_mode)) {
        req->sink.resume_from = (uint64_t)st.st_size;
        FILE *f = fopen(req->sink.validator_path, "r");
        if (f) {
          if (fgets(validator, (int)cap, f) == NULL) validator[0] = '\0';
          validator[strcspn(validator, "\r\n")] = '\0';
          fclose(f);
        }
      } else if (!req->sink.part_only && stat(req->sink.target_path, &st) == 0 &&
                 S_ISREG(st.st_mode)) {
        req->sink.resume_from = (uint64_t)st.st_size;
        req->sink.resume_in_place = true;
      }
    }
    req->sink.range_start = req->sink.offset + req->sink.resume_from;
    req->sink.range_sent = req->sink.range_start > 0 || req->sink.end != 0;
  }
  return 0;
}

/* "bytes 100-199/1000" -> *first = 100. */
static int parse_content_range_start(const char *v, uint64_t *first) {
  if (v == NULL || strncasecmp(v, "bytes ", 6) != 0) return -1;
  v += 6;
  while (*v == ' ') v++;
  if (*v < '0' || *v > '9') return -1;
  uint64_t n = 0;
  for (; *v >= '0' && *v <= '9'; v++) {
    if (n > (UINT64_MAX - 9) / 10) return -1;
    n = n * 10 + (uint64_t)(*v - '0');
  }
  if (*v != '-') return -1;
  *first = n;
  return 0;
}

static int open_download(tern_request_t *req, bool part, bool truncate, uint64_t position) {
  if (req->sink.special) { /* devices and pipes: no .part, no truncation, no seek */
    part = truncate = false;
    position = 0;
  }
  const char *path = part ? req->sink.part_path : req->sink.target_path;
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0);
  int fd;
  if (part) {
    /* Refuse what the target refuses (a read-only file: curl's exit 23) before any byte is
     * written; the .part would otherwise replace a file the caller may not write. */
    struct stat st;
    if (stat(req->sink.target_path, &st) == 0) {
      int probe = open(req->sink.target_path, O_WRONLY | O_CLOEXEC);
      if (probe < 0) {
        tern__request_set_error(req, TERN_EFILEWRITE, "open %s: %s", req->sink.target_path,
                                strerror(errno));
        return TERN_EFILEWRITE;
      }
      close(probe);
    }
    fd = open(path, flags, 0666);
    if (fd < 0 && (errno == EACCES || errno == EPERM || errno == EROFS)) {
      /* No temporary file can be made beside the target (a read-only directory): write the
       * target in place, as curl does. A failure then leaves it partial. */
      part = false;
      path = req->sink.target_path;
      flags |= O_TRUNC;
      position = 0;
      fd = open(path, flags, 0666);
    }
  } else {
    fd = open(path, flags, 0666);
  }
  if (fd < 0) {
    tern__request_set_error(req, TERN_EFILEWRITE, "open %s: %s", path, strerror(errno));
    return TERN_EFILEWRITE;
  }
  if (!req->sink.special && lseek(fd, (off_t)position, SEEK_SET) < 0) {
    tern__request_set_error(req, TERN_EFILEWRITE, "seek %s: %s", path, strerror(errno));
    close(fd);
    return TERN_EFILEWRITE;
  }
  req->sink.fd = fd;
  req->sink.to_file = true;
  req->sink.writing_part = part;
  return 0;
}

/* Keeps the strong ETag, else Last-Modified, beside the partial file for a later If-Range. */
static void save_validator(tern_request_t *req) {
  if (req->sink.special) return;
  const char *etag = tern__request_header_value(req, "etag");
  const char *lm = tern__request_header_value(req, "last-modified");
  const char *v = etag && strncmp(etag, "W/", 2) != 0 ? etag : lm;
  if (v == NULL || strpbrk(v, "\r\n")) {
    unlink(req->sink.validator_path);
    return;
  }
  FILE *f = fopen(req->sink.validator_path, "w");
  if (f == NULL) return; /* resume then restarts from zero: safe, only slower */
  fprintf(f, "%s\n", v);
  fclose(f);
}

static int choose_sink(tern_request_t *req) {
  int status = req->resp.status;
  if (req->hop.discard_body) return 0;
  /* Decode the body unless asked not to; a coding this build cannot undo is an error then
   * (curl's 61), never the encoded bytes passed off as the body. */
  const char *coding = tern__request_header_value(req, "content-encoding");
  if (coding && req->sink.decode_mode == TERN_DECODE_AUTO && !req->is_head && status != 204 &&
      status != 304) {
    int kind = tern__decoder_kind(coding, strlen(coding));
    if (kind == TERN__CODING_UNKNOWN) {
      tern__request_set_error(req, TERN_EDECODE, "%s: unsupported Content-Encoding \"%.64s\"",
                              req->url.hostport, coding);
      return TERN_EDECODE;
    }
    if (kind >= 0) {
      req->sink.decoder = tern__decoder_new(kind);
      if (req->sink.decoder == NULL) return TERN_ENOMEM;
      req->sink.decoded_encoding = tern__decoder_name(kind);
    }
  }

  if (req->sink.kind != TERN__SINK_FILE) return 0;
  if (status >= 200 && status < 300) {
    if (status == 206 && req->sink.range_sent) {
      uint64_t first;
      if (parse_content_range_start(tern__request_header_value(req, "content-range"), &first) ||
          first != req->sink.range_start) {
        tern__request_set_error(req, TERN_ERANGE,
                                "%s: asked for bytes from %llu, got Content-Range \"%s\"",
                                req->url.hostport, (unsigned long long)req->sink.range_start,
                                tern__request_header_value(req, "content-range")
                                    ? tern__request_header_value(req, "content-range")
                                    : "");
        return TERN_ERANGE;
      }
      req->resp.offset = first;
      if (req->sink.resume_in_place) return open_download(req, false, false, req->sink.resume_from);
      int r = open_download(req, true, req->sink.resume_from == 0, req->sink.resume_from);
      if (!r && req->sink.resume_from == 0) save_validator(req);
      return r;
    }
    /* A full representation (new, changed, or a server that ignores Range): the download
     * restarts from zero in the .part file, and when the caller wanted it from an offset the
     * bytes before that are skipped rather than spliced in. */
    req->sink.skip_bytes = req->sink.offset;
    req->sink.resume_from = 0;
    int r = open_download(req, true, true, 0);
    if (!r) save_validator(req);
    return r;
  }
  if (status == 416 && req->sink.resume && req->sink.resume_from > 0) {
    req->sink.range_done = true; /* the partial file is already whole */
  } else if (req->sink.any_status && !req->sink.resume && !req->hop.discard_body) {
    /* The caller wants whatever the final response says in the file, as curl's -o does; it
     * is not a piece of the resource, so nothing is kept to resume it. */
    req->sink.skip_bytes = 0;
    req->sink.resume_from = 0;
    return open_download(req, true, true, 0);
  }
  req->sink.keep_error_body = true;
  return 0;
}

int tern__request_setup_sink(tern_request_t *req) {
  int r = choose_sink(req);
  /* The decoder's bounds, once the sink is known: a body kept in memory gets a smaller grace
   * before the ratio limit counts. */
  if (!r && req->sink.decoder)
    tern__decoder_set_limits(req->sink.decoder, req->sink.decoded_max_bytes,
                             req->sink.decoded_max_ratio,
                             req->sink.kind == TERN__SINK_MEM && !req->sink.to_file);
  return r;
}

/* A decoder's failure, with its reason, becomes the request's error (a sink failure already
 * is). */
static int decode_failed(tern_request_t *req, int err) {
  const char *why = err ? tern__decoder_message(req->sink.decoder) : NULL;
  if (why) tern__request_set_error(req, err, "%s: %s", req->url.hostport, why);
  return err;
}

static int sink_write(void *ctx, const char *data, size_t n) {
  tern_request_t *req = ctx;
  if (req->sink.skip_bytes) {
    size_t k = n < req->sink.skip_bytes ? n : (size_t)req->sink.skip_bytes;
    req->sink.skip_bytes -= k;
    data += k;
    n -= k;
    if (n == 0) return 0;
  }
  req->sink.delivered += n;
  if (req->sink.to_file) {
    while (n > 0) {
      ssize_t w = write(req->sink.fd, data, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        tern__request_set_error(
            req, TERN_EFILEWRITE, "write %s: %s",
            req->sink.writing_part ? req->sink.part_path : req->sink.target_path, strerror(errno));
        return TERN_EFILEWRITE;
      }
      data += w;
      n -= (size_t)w;
    }
    return 0;
  }
  if (req->sink.kind == TERN__SINK_CB && !req->sink.keep_error_body) {
    /* The caller let go (tern_request_free): its callback is not called again; the queued
     * cancel ends the request. */
    if (atomic_load(&req->released)) return TERN_ECANCELED;
    if (req->sink.data_cb(req, data, n, req->sink.data_cb_data) != 0) {
      tern__request_set_error(req, TERN_ECALLBACK, "the data callback stopped the body from %s",
                              req->url.hostport);
      return TERN_ECALLBACK;
    }
    return 0;
  }
  if (req->sink.keep_error_body) {
    if (req->resp.body.len >= ERROR_BODY_LIMIT) return 0;
    if (n > ERROR_BODY_LIMIT - req->resp.body.len) n = ERROR_BODY_LIMIT - req->resp.body.len;
  } else if (req->resp.body.cap == 0 && req->resp.content_length > 0) {
    uint64_t want = (uint64_t)req->resp.content_length;
    if (tern__str_reserve(&req->resp.body, want < PREALLOC_LIMIT ? (size_t)want : PREALLOC_LIMIT))
      return TERN_ENOMEM;
  }
  return tern__str_append(&req->resp.body, data, n);
}

int tern__request_deliver(tern_request_t *req, const char *data, size_t n) {
  req->resp.received += n;
  if (req->hop.discard_body) return 0; /* an intermediate hop's body */
  if (req->sink.decoder)
    return decode_failed(req, tern__decoder_write(req->sink.decoder, data, n, sink_write, req));
  return sink_write(req, data, n);
}

void tern__request_close_files(tern_request_t *req) {
  tern__close_fd(&req->sink.fd);
  tern__close_fd(&req->upload.fd);
  for (size_t i = 0; i < req->upload.nsegments; i++) tern__close_fd(&req->upload.segments[i].fd);
}

int tern__request_body_end(tern_request_t *req) {
  return req->sink.decoder ? decode_failed(req, tern__decoder_end(req->sink.decoder)) : 0;
}

/* Copies the finished .part into the existing target in place (keeping its inode: hard links,
 * owner, mode, ACLs), through a bounded stack buffer, then removes the .part. */
static int copy_into_target(tern_request_t *req) {
  int in = open(req->sink.part_path, O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    tern__request_set_error(req, TERN_EFILEWRITE, "open %s: %s", req->sink.part_path,
                            strerror(errno));
    return TERN_EFILEWRITE;
  }
  int out = open(req->sink.target_path, O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (out < 0) {
    tern__request_set_error(req, TERN_EFILEWRITE, "open %s: %s", req->sink.target_path,
                            strerror(errno));
    close(in);
    return TERN_EFILEWRITE;
  }
  char buf[16384];
  int r = 0;
  for (;;) {
    ssize_t n = read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      tern__request_set_error(req, TERN_EFILEWRITE, "read %s: %s", req->sink.part_path,
                              strerror(errno));
      r = TERN_EFILEWRITE;
      break;
    }
    if (n == 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(out, buf + off, (size_t)(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        tern__request_set_error(req, TERN_EFILEWRITE, "write %s: %s", req->sink.target_path,
                                strerror(errno));
        r = TERN_EFILEWRITE;
        break;
      }
      off += w;
    }
    if (r) break;
  }
  close(in);
  if (close(out) != 0 && r == 0) {
    tern__request_set_error(req, TERN_EFILEWRITE, "close %s: %s", req->sink.target_path,
                            strerror(errno));
    r = TERN_EFILEWRITE;
  }
  if (r == 0) unlink(req->sink.part_path);
  return r;
}

/* The finished .part becomes the target. A new target is simply renamed into place. An
 * existing one keeps what makes it that file: its mode and owner are given to the .part before
 * the rename, and when that cannot be done (another owner) or a rename would cut hard links,
 * the bytes are copied into the target instead. */
static int replace_target(tern_request_t *req) {
  struct stat st;
  if (stat(req->sink.target_path, &st) == 0 && S_ISREG(st.st_mode)) {
    bool copy = st.st_nlink > 1;
    if (!copy && (st.st_uid != geteuid() || st.st_gid != getegid()) &&
        chown(req->sink.part_path, st.st_uid, st.st_gid) != 0)
      copy = true;
    if (!copy && chmod(req->sink.part_path, st.st_mode & 07777) != 0) copy = true;
    if (copy) return copy_into_target(req);
  }
  if (rename(req->sink.part_path, req->sink.target_path) != 0) {
    tern__request_set_error(req, TERN_EFILEWRITE, "rename %s to %s: %s", req->sink.part_path,
                            req->sink.target_path, strerror(errno));
    return TERN_EFILEWRITE;
  }
  return 0;
}

int tern__request_finish_file(tern_request_t *req, int err) {
  if (req->sink.kind != TERN__SINK_FILE || req->sink.part_path == NULL) return err;
  tern__close_fd(&req->sink.fd);
  bool part_done =
      !err && (req->sink.writing_part || (req->sink.range_done && !req->sink.resume_in_place));
  if (part_done) {
    int r = replace_target(req);
    if (r) {
      if (!req->sink.resume) unlink(req->sink.part_path);
      return r;
    }
    unlink(req->sink.validator_path);
  } else if (err && req->sink.writing_part && !req->sink.resume) {
    /* Nothing will continue this attempt: leave no debris. */
    unlink(req->sink.part_path);
    unlink(req->sink.validator_path);
  }
  return err;
}

int tern__request_progress_download(tern_request_t *req, bool final) {
  if (req->notify.progress == NULL || atomic_load(&req->released)) return 0;
  uint64_t total = req->resp.content_length > 0 ? (uint64_t)req->resp.content_length : 0;
  uint64_t done = req->resp.offset + req->resp.received;
  if (total) total += req->resp.offset;
  /* 100 means the phase is over, which only the framing knows: a body that reached its
   * announced size may still await its last chunk. */
  int percent = final ? 100 : (total ? tern__percent_of(done, total) : 0);
  if (!final && percent > 99) percent = 99;
  /* Percent never goes back, and 100 is reported once. */
  if (percent <= req->notify.last_percent &&
      !(percent == 0 && req->notify.last_percent == 0 && !total))
    return 0;
  if (percent == 100 && req->notify.last_percent == 100) return 0;
  req->notify.last_percent = percent;
  if (final && total == 0) total = done;
  if (req->notify.progress(req, TERN_PROGRESS_DOWNLOAD, percent, done, total,
                           req->notify.progress_data)) {
    tern__request_set_error(req, TERN_ECANCELED, "canceled by the progress callback");
    return TERN_ECANCELED;
  }
  return 0;
}
