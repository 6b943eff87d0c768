#!/usr/bin/env python3
"""The reference file server of Mesibo's signed file transfer (issue 13), for Tern's tests and
for customers who want to see the server side.

    fileserver.py --dir DIR --tokens UID=TOKEN[,UID=TOKEN...] [--host 127.0.0.1] [--port 0]
                  [--port-file FILE] [--max-file-size BYTES] [--window SECONDS]

POST /upload, a multipart form with the fields v (1), op (upload), uid, device, ts, signed,
sig = sha256(uid-ts-token) and the file (any field name with a filename): checks the signature
(the token looked up by uid, ts within --window seconds of the clock, compared in constant
time), stores the file under DIR and answers JSON
    {"result": true, "url": "http://HOST/files/ID/NAME", "max_file_size": N}
or {"result": false, "max_file_size": N, "error": "..."} (signature refused: status 403; file
too large: 413). `?max_file_size=N` on the upload URL sets a smaller limit for that request
(tests); `?result=false` answers a good upload with HTTP 200 {"result": false, ...} and stores
nothing (tests: the protocol's refusal that is not an HTTP error). The body is spooled to disk,
never held in memory.

GET /files/ID/NAME serves a stored file, with Range (one range). When the upload said
signed=1, the query must carry v=1&uid=&ts=&sig = sha256(url-uid-ts-token), url being
http://HOST/files/ID/NAME without the query; a bad, missing or expired signature gets 403.
`rate=BYTES_PER_SECOND` in the query slows the body down (tests).

GET /stats?uid=UID answers {"uploads": N, "downloads": N}: requests seen for that uid, signed
or not, accepted or not (tests check that a refused-early upload never reached the server).

Prints "listening on HOST:PORT" on stdout once bound; writes PORT to --port-file. SIGTERM
stops it. Stdlib only; Python 3.8+. The signature is computed here independently of the C
engine, so the two implementations check each other.
"""

import argparse
import hashlib
import hmac
import json
import mmap
import os
import re
import signal
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

CHUNK = 65536


def signature(*parts):
    return hashlib.sha256("-".join(str(p) for p in parts).encode("utf-8")).hexdigest()


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_uid = {}

    def count(self, uid, what):
        with self.lock:
            entry = self.by_uid.setdefault(uid or "", {"uploads": 0, "downloads": 0})
            entry[what] += 1

    def get(self, uid):
        with self.lock:
            return dict(self.by_uid.get(uid, {"uploads": 0, "downloads": 0}))


def parse_multipart(path, boundary):
    """Fields (name -> str) and the file part (filename, start, end offsets in path) of the
    multipart body spooled at path; memory stays flat (the file is mapped)."""
    fields, upload = {}, None
    size = os.path.getsize(path)
    if size == 0:
        return fields, upload
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        delim = b"--" + boundary
        pos = m.find(delim)
        while pos >= 0:
            pos += len(delim)
            if m[pos:pos + 2] == b"--":
                break
            head_end = m.find(b"\r\n\r\n", pos)
            if head_end < 0:
                break
            head = m[pos:head_end].decode("utf-8", "replace")
            start = head_end + 4
            nxt = m.find(b"\r\n" + delim, start)
            if nxt < 0:
                break
            disp = re.search(r'(?im)^content-disposition:(.*)$', head)
            disp = disp.group(1) if disp else ""
            name = re.search(r'\bname="([^"]*)"', disp)
            filename = re.search(r'\bfilename="([^"]*)"', disp)
            if filename:
                upload = (filename.group(1), start, nxt)
            elif name:
                fields[name.group(1)] = m[start:nxt].decode("utf-8", "replace")
            pos = nxt + 2
    return fields, upload


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "tern-fileserver/1"

    def log_message(self, fmt, *args):  # quiet unless -v
        if self.server.verbose:
            sys.stderr.write("fileserver: " + (fmt % args) + "\n")

    def answer_json(self, status, obj, close=False):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def answer_text(self, status, text):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def check(self, url, uid, ts, sig):
        """None when the signature is good, else why not."""
        token = self.server.tokens.get(uid or "")
        if not sig or not uid or token is None:
            return "missing signature, uid or unknown uid"
        try:
            ts_n = int(ts)
        except (TypeError, ValueError):
            return "bad ts"
        if abs(int(time.time()) - ts_n) > self.server.window:
            return "expired signature"
        want = signature(url, uid, ts_n, token) if url else signature(uid, ts_n, token)
        if not hmac.compare_digest(want.encode(), sig.lower().encode()):
            return "signature mismatch"
        return None

    # ---- upload ----
    def do_POST(self):
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        if parts.path != "/upload":
            return self.answer_text(404, "not found\n")
        limit = self.server.max_file_size
        if "max_file_size" in query:
            limit = int(query["max_file_size"][0])
        ctype = self.headers.get("Content-Type", "")
        m = re.search(r'boundary="?([^";]+)"?', ctype)
        length = self.headers.get("Content-Length")
        if not m or not ctype.startswith("multipart/form-data") or length is None:
            self.server.stats.count("", "uploads")
            return self.answer_json(400, {"result": False, "error": "multipart with a length"},
                                    close=True)
        length = int(length)
        if length > limit + 64 * 1024:  # the form's fields cannot take that much
            self.server.stats.count("", "uploads")
            return self.answer_json(413, {"result": False, "max_file_size": limit,
                                          "error": "file too large"}, close=True)
        fd, spool = tempfile.mkstemp(dir=self.server.tmp)
        try:
            with os.fdopen(fd, "wb") as out:
                left = length
                while left > 0:
                    chunk = self.rfile.read(min(CHUNK, left))
                    if not chunk:
                        self.close_connection = True
                        return
                    out.write(chunk)
                    left -= len(chunk)
            fields, upload = parse_multipart(spool, m.group(1).encode())
            uid = fields.get("uid")
            self.server.stats.count(uid, "uploads")
            if fields.get("v") != "1" or fields.get("op") != "upload" or upload is None:
                return self.answer_json(400, {"result": False, "max_file_size": limit,
                                              "error": "need v=1, op=upload and a file"})
            why = self.check(None, uid, fields.get("ts"), fields.get("sig"))
            if why:
                return self.answer_json(403, {"result": False, "error": why})
            filename, start, end = upload
            if end - start > limit:
                return self.answer_json(413, {"result": False, "max_file_size": limit,
                                              "error": "file too large"})
            if query.get("result", [""])[0] == "false":
                return self.answer_json(200, {"result": False, "max_file_size": limit,
                                              "error": "refused on request (?result=false)"})
            fid = uuid.uuid4().hex
            name = os.path.basename(filename) or "file"
            folder = os.path.join(self.server.dir, fid)
            os.makedirs(folder)
            with open(spool, "rb") as src, open(os.path.join(folder, name), "wb") as dst:
                src.seek(start)
                left = end - start
                while left > 0:
                    chunk = src.read(min(CHUNK, left))
                    dst.write(chunk)
                    left -= len(chunk)
            meta = {"signed": fields.get("signed") == "1", "uid": uid,
                    "device": fields.get("device")}
            with open(os.path.join(folder, ".meta.json"), "w") as f:
                json.dump(meta, f)
            host = self.headers.get("Host") or "%s:%d" % self.server.server_address[:2]
            url = "http://%s/files/%s/%s" % (host, fid, quote(name))
            return self.answer_json(200, {"result": True, "url": url, "max_file_size": limit})
        finally:
            os.unlink(spool)

    # ---- download ----
    def do_GET(self):
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if parts.path == "/stats":
            return self.answer_json(200, self.server.stats.get(query.get("uid", "")))
        m = re.fullmatch(r"/files/([0-9a-f]{32})/([^/]+)", parts.path)
        if not m:
            return self.answer_text(404, "not found\n")
        folder = os.path.join(self.server.dir, m.group(1))
        path = os.path.join(folder, os.path.basename(unquote(m.group(2))))
        try:
            with open(os.path.join(folder, ".meta.json")) as f:
                meta = json.load(f)
            size = os.path.getsize(path)
        except OSError:
            return self.answer_text(404, "not found\n")
        self.server.stats.count(query.get("uid"), "downloads")
        if meta.get("signed"):
            host = self.headers.get("Host", "")
            url = "http://%s%s" % (host, parts.path)
            why = "need v=1" if query.get("v") != "1" else self.check(
                url, query.get("uid"), query.get("ts"), query.get("sig"))
            if why:
                return self.answer_text(403, why + "\n")
        start, end, status = 0, size, 200
        rng = self.headers.get("Range")
        if rng:
            r = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            if r and (r.group(1) or r.group(2)):
                if r.group(1):
                    start = int(r.group(1))
                    end = min(size, int(r.group(2)) + 1) if r.group(2) else size
                else:
                    start = max(0, size - int(r.group(2)))
                if start >= size or start >= end:
                    self.send_response(416)
                    self.send_header("Content-Range", "bytes */%d" % size)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(end - start))
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size))
        self.end_headers()
        rate = int(query.get("rate", "0") or 0)
        with open(path, "rb") as f:
            f.seek(start)
            left = end - start
            while left > 0:
                n = min(CHUNK if not rate else max(1, rate // 20), left)
                chunk = f.read(n)
                if not chunk:
                    break
                try:
                    self.wfile.write(chunk)
                except OSError:
                    return
                left -= len(chunk)
                if rate:
                    time.sleep(len(chunk) / rate)


def main(argv):
    ap = argparse.ArgumentParser(description="Reference server of the signed file transfer.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--dir", required=True, help="where uploaded files are stored")
    ap.add_argument("--tokens", required=True, help="UID=TOKEN[,UID=TOKEN...]")
    ap.add_argument("--max-file-size", type=int, default=100 << 20)
    ap.add_argument("--window", type=int, default=300)
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args(argv)
    tokens = dict(item.split("=", 1) for item in args.tokens.split(",") if "=" in item)
    os.makedirs(args.dir, exist_ok=True)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    server.dir = args.dir
    server.tmp = os.path.join(args.dir, ".spool")
    os.makedirs(server.tmp, exist_ok=True)
    server.tokens = tokens
    server.max_file_size = args.max_file_size
    server.window = args.window
    server.verbose = args.v
    server.stats = Stats()
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, args.port_file)
    sys.stdout.write("listening on %s:%d\n" % (args.host, port))
    sys.stdout.flush()
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
