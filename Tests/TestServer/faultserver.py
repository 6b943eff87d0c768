#!/usr/bin/env python3
"""A scriptable HTTP/1.1 server for misbehaving peers (Tern's integration tests).

Every behaviour is chosen by the request path and query, so C, Swift and shell tests drive it
with nothing but a URL. See README.md next to this file for the endpoint list.

    faultserver.py [--host 127.0.0.1] [--port 0] [--port-file FILE] [--second-port-file FILE]
                   [--exchanges DIR] [-v]
                   [--tls-ports-file FILE [--tls-cert PEM --tls-key PEM --tls-ca PEM]]

Prints exactly one line on stdout once listening ("listening on 127.0.0.1:PORT"); errors (and
with -v one line per request) go to stderr. SIGTERM or SIGINT shuts it down cleanly (exit 0).

Stdlib only (asyncio); runs on Python 3.8+ and is tested with 3.11.
"""

import argparse
import asyncio
import hashlib
import json
import os
import re
import signal
import socket
import struct
import sys
import zlib
import traceback
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

# Body pattern shared by every generated body: byte i of a body is i % 251. A prime modulus
# keeps the pattern from lining up with power-of-two buffer sizes, so an off-by-N slip in a
# client's buffer handling shows up as a content mismatch.
PATTERN_MOD = 251
BLOCK = 65536
_PATTERN = bytes(range(PATTERN_MOD)) * (BLOCK // PATTERN_MOD + 2)

MAX_HEAD = 1 << 20  # request head limit (and StreamReader line limit)
LINGER_S = 2.0  # how long a graceful close waits for the peer's FIN
DEFAULT_EXCHANGES = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Fixtures", "exchanges"))

try:  # Linux: bytes in the send queue (unsent + unacknowledged), to flush before an RST.
    import fcntl
    import termios
    _SIOCOUTQ = termios.TIOCOUTQ
except (ImportError, AttributeError):  # pragma: no cover - macOS / other
    fcntl = None
    _SIOCOUTQ = None

_DISCONNECTED = (ConnectionError, BrokenPipeError, asyncio.IncompleteReadError, OSError)


def pattern(offset, n):
    """n (<= BLOCK) bytes of the body pattern starting at body offset `offset`."""
    s = offset % PATTERN_MOD
    return _PATTERN[s:s + n]


def pattern_bytes(n, offset=0):
    out = bytearray()
    while n > 0:
        k = min(n, BLOCK)
        out += pattern(offset, k)
        offset += k
        n -= k
    return bytes(out)


def wire(text):
    """A query value (percent-decoded as UTF-8) as the latin-1 str whose bytes are its UTF-8
    encoding: head_bytes() then puts exactly those bytes on the wire."""
    return text.encode("utf-8", "surrogateescape").decode("latin-1")


def reason(code):
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return "Status %d" % code


class BadRequest(Exception):
    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


class Request:
    def __init__(self, method, target, version, headers):
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers  # [(name, value)] as received, latin-1 decoded
        parts = urlsplit(target)
        self.path = parts.path or "/"
        self.query = parse_qs(parts.query, keep_blank_values=True)
        self.body_length = 0
        self.body_sha256 = hashlib.sha256(b"").hexdigest()
        self.body_read = False
        self.chunked = False
        self.content_length = None
        self.trailers = []

    def header(self, name):
        name = name.lower()
        for n, v in self.headers:
            if n.lower() == name:
                return v
        return None

    def header_tokens(self, name):
        name = name.lower()
        out = []
        for n, v in self.headers:
            if n.lower() == name:
                out += [t.strip().lower() for t in v.split(",") if t.strip()]
        return out

    def q(self, name, default=None):
        v = self.query.get(name)
        return v[-1] if v else default

    def q_int(self, name, default, minimum=0):
        v = self.q(name)
        if v is None or v == "":
            return default
        try:
            n = int(v, 10)
        except ValueError:
            raise BadRequest("query parameter %s=%r is not an integer" % (name, v))
        if n < minimum:
            raise BadRequest("query parameter %s=%d is below %d" % (name, n, minimum))
        return n

    def q_bool(self, name, default=False):
        v = self.q(name)
        if v is None:
            return default
        return v.lower() not in ("0", "false", "no", "off")

    @property
    def is_head(self):
        return self.method == "HEAD"

    @property
    def has_body(self):
        return self.chunked or (self.content_length or 0) > 0

    @property
    def wants_keep_alive(self):
        tokens = self.header_tokens("Connection")
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


class Stats:
    def __init__(self):
        self.accepted = 0  # connections accepted since start (or /reset-stats)
        self.next_conn_id = 0  # never reset: X-Connection stays unique for the process
        self.tags = {}  # tag -> set of connection ids that carried a request with ?tag=
        self.flaky = {}  # /flaky key -> requests seen
        self.probes = {}  # /probe tag -> ProbeStats
        self.cache_hits = {}  # /cacheable key -> requests seen (full answers, 304s)


class ProbeStats:
    """What /probe saw for one tag: requests in flight now, the most at once, arrival order
    (ids, and the method of each)."""

    def __init__(self):
        self.inflight = 0
        self.max_inflight = 0
        self.order = []
        self.methods = []


class Server:
    def __init__(self, exchanges_dir, verbose, idle_timeout):
        self.exchanges_dir = exchanges_dir
        self.verbose = verbose
        self.idle_timeout = idle_timeout
        self.stats = Stats()
        self.conns = set()

    async def on_connect(self, reader, writer):
        self.stats.accepted += 1
        self.stats.next_conn_id += 1
        conn = Connection(self, self.stats.next_conn_id, reader, writer)
        self.conns.add(conn)
        try:
            await conn.serve()
        except asyncio.CancelledError:
            conn.writer.transport.abort()
            raise
        except _DISCONNECTED:
            pass
        except Exception:  # a bug in this server: say so, drop the connection
            sys.stderr.write("faultserver: connection %d: unexpected error\n" % conn.id)
            traceback.print_exc(file=sys.stderr)
            sys.stderr.flush()
        finally:
            self.conns.discard(conn)
            if not conn.writer.transport.is_closing():
                conn.writer.transport.abort()


class Connection:
    def __init__(self, server, conn_id, reader, writer):
        self.server = server
        self.id = conn_id
        self.reader = reader
        self.writer = writer
        self.requests = 0
        self.idle_timeout = None  # seconds for the next wait only; None: server default
        self.close_on_next = None  # "fin" / "rst": drop the next request unanswered
        self.must_close = False  # the request body was left unread
        self.sent_100 = False
        sock = writer.get_extra_info("socket")
        self.sock = sock
        peer = writer.get_extra_info("peername")
        self.peer_port = peer[1] if peer else 0  # through a SOCKS proxy: the proxy's side

    # ---- I/O helpers ---------------------------------------------------------------------

    async def write(self, data):
        self.writer.write(data)
        await self.writer.drain()

    async def close_fin(self):
        """Clean close: flush, send FIN, swallow whatever the peer still sends until it closes
        (so unread input cannot turn our FIN into an RST), then close."""
        try:
            await self.writer.drain()
            if self.writer.can_write_eof():
                self.writer.write_eof()

            async def drain_input():
                while await self.reader.read(65536):
                    pass

            await asyncio.wait_for(drain_input(), LINGER_S)
        except (asyncio.TimeoutError,) + _DISCONNECTED:
            pass
        finally:
            self.writer.close()

    async def close_rst(self):
        """Abortive close: make sure what was written has reached the peer, then RST."""
        try:
            await self.writer.drain()
            await self._wait_send_queue_empty()
        except _DISCONNECTED:
            pass
        try:
            if self.sock is not None:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.writer.transport.abort()

    async def _wait_send_queue_empty(self, limit_s=2.0):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit_s
        if _SIOCOUTQ is None or self.sock is None:
            await asyncio.sleep(0.05)
            return
        while loop.time() < deadline:
            try:
                buf = fcntl.ioctl(self.sock.fileno(), _SIOCOUTQ, struct.pack("i", 0))
                if struct.unpack("i", buf)[0] == 0:
                    return
            except OSError:
                return
            await asyncio.sleep(0.002)

    # ---- request reading -----------------------------------------------------------------

    async def read_head(self):
        """The next request head, or None at a clean EOF between requests."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if e.partial.strip(b"\r\n") == b"":
                return None
            raise
        except asyncio.LimitOverrunError:
            raise BadRequest("request head larger than %d bytes" % MAX_HEAD, 431)
        return head.lstrip(b"\r\n")

    @staticmethod
    def parse_head(head):
        lines = head[:-4].split(b"\r\n")
        try:
            method, target, version = lines[0].decode("latin-1").split(" ")
        except ValueError:
            raise BadRequest("malformed request line")
        if not re.fullmatch(r"HTTP/1\.[01]", version):
            raise BadRequest("unsupported version %r" % version, 505)
        if not method or not target:
            raise BadRequest("malformed request line")
        headers = []
        for raw in lines[1:]:
            line = raw.decode("latin-1")
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip() or line[0] in " \t":
                raise BadRequest("malformed header line %r" % line)
            headers.append((name, value.strip(" \t")))
        req = Request(method, target, version, headers)
        te = req.header_tokens("Transfer-Encoding")
        if te:
            if te[-1] != "chunked":
                raise BadRequest("unsupported transfer coding %r" % req.header("Transfer-Encoding"), 501)
            req.chunked = True
        else:
            cls = [v for n, v in headers if n.lower() == "content-length"]
            if cls:
                values = {v.strip() for c in cls for v in c.split(",")}
                if len(values) != 1 or not values.copy().pop().isdigit():
                    raise BadRequest("bad Content-Length %r" % cls)
                req.content_length = int(values.pop())
        return req

    async def read_body(self, req):
        """Reads (and hashes) the whole request body, streaming: any size, constant memory.
        On /multipart the bytes also feed a streaming multipart/form-data parser."""
        h = hashlib.sha256()
        if req.path == "/multipart":
            req.multipart = MultipartSink(req.header("Content-Type") or "")
            inner = h

            class Tee:
                def update(self, data):
                    inner.update(data)
                    req.multipart.feed(data)

                def hexdigest(self):
                    return inner.hexdigest()
            h = Tee()
        total = 0
        reader = self.reader
        if req.chunked:
            while True:
                line = await reader.readuntil(b"\r\n")
                size_s = line[:-2].split(b";", 1)[0].strip()
                if not size_s or not re.fullmatch(rb"[0-9a-fA-F]{1,15}", size_s):
                    raise BadRequest("bad chunk size line %r" % line[:40])
                left = int(size_s, 16)
                if left == 0:
                    break
                while left:
                    data = await reader.read(min(left, 262144))
                    if not data:
                        raise asyncio.IncompleteReadError(b"", left)
                    h.update(data)
                    total += len(data)
                    left -= len(data)
                if await reader.readexactly(2) != b"\r\n":
                    raise BadRequest("missing CRLF after chunk data")
            while True:  # trailer section
                line = await reader.readuntil(b"\r\n")
                if line == b"\r\n":
                    break
                name, _, value = line[:-2].decode("latin-1").partition(":")
                req.trailers.append((name, value.strip(" \t")))
        else:
            left = req.content_length or 0
            while left:
                data = await reader.read(min(left, 262144))
                if not data:
                    raise asyncio.IncompleteReadError(b"", left)
                h.update(data)
                total += len(data)
                left -= len(data)
        req.body_length = total
        req.body_sha256 = h.hexdigest()
        req.body_read = True

    # ---- responses -----------------------------------------------------------------------

    def std_headers(self):
        return [("Server", "tern-faultserver"), ("X-Connection", str(self.id)),
                ("X-Connection-Requests", str(self.requests))]

    @staticmethod
    def head_bytes(status, headers, reason_phrase=None):
        lines = ["HTTP/1.1 %d %s" % (status, reason(status) if reason_phrase is None else reason_phrase)]
        lines += ["%s: %s" % (n, v) for n, v in headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def respond(self, req, status, headers=(), body=b"", *, size=None, chunked=False,
                      chunk_size=8192, close=False, drip_ms=0, drip_bytes=1024,
                      content_length=None):
        """Sends a complete, well-formed response and returns True when the connection stays
        open. The body is `body`, or `size` bytes of the pattern when size is given. HEAD gets
        the same head and no body; 1xx/204/304 never carry a body."""
        keep = req.wants_keep_alive and not close and not self.must_close
        headers = self.std_headers() + list(headers)
        no_body = status in (204, 304) or 100 <= status < 200
        n = len(body) if size is None else size
        if req.version == "HTTP/1.0" and chunked:
            chunked, keep = False, False  # 1.0 cannot do chunked: close-delimited instead
            content_length = -1
        if not no_body:
            if chunked:
                headers.append(("Transfer-Encoding", "chunked"))
            elif content_length != -1:
                headers.append(("Content-Length", str(n if content_length is None else content_length)))
        if not keep:
            headers.append(("Connection", "close"))
        elif req.version == "HTTP/1.0":
            headers.append(("Connection", "keep-alive"))
        self.writer.write(self.head_bytes(status, headers))
        if not (no_body or req.is_head):
            if size is None:
                if chunked and body:
                    self.writer.write(b"%x\r\n%s\r\n" % (len(body), body))
                elif body:
                    self.writer.write(body)
            else:
                await self.send_pattern(size, chunked, chunk_size, drip_ms, drip_bytes)
            if chunked:
                self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()
        if not keep:
            await self.close_fin()
        return keep

    async def send_pattern(self, size, chunked, chunk_size, drip_ms=0, drip_bytes=1024):
        off = 0
        step = min(chunk_size if chunked else BLOCK, BLOCK)
        if drip_ms:
            step = min(step, max(1, drip_bytes))
        while off < size:
            k = min(step, size - off)
            data = pattern(off, k)
            if chunked:
                self.writer.write(b"%x\r\n" % k)
                self.writer.write(data)
                self.writer.write(b"\r\n")
            else:
                self.writer.write(data)
            off += k
            await self.writer.drain()
            if drip_ms and off < size:
                await asyncio.sleep(drip_ms / 1000)

    async def raw_then_close(self, data, how="fin"):
        self.writer.write(data)
        if how == "rst":
            await self.close_rst()
        else:
            await self.close_fin()
        return False

    # ---- the connection loop -------------------------------------------------------------

    async def serve(self):
        while True:
            timeout = self.idle_timeout if self.idle_timeout is not None else self.server.idle_timeout
            self.idle_timeout = None
            try:
                if timeout:
                    head = await asyncio.wait_for(self.read_head(), timeout)
                else:
                    head = await self.read_head()
            except asyncio.TimeoutError:
                await self.close_fin()  # idle: close without a word, like a real server
                return
            except BadRequest as e:
                await self.error_response(e)
                return
            if head is None:
                self.writer.close()
                return
            if self.close_on_next:
                how, self.close_on_next = self.close_on_next, None
                if how == "rst":
                    await self.close_rst()
                else:
                    await self.close_fin()
                return
            self.requests += 1
            self.must_close = False
            self.sent_100 = False
            try:
                req = self.parse_head(head)
            except BadRequest as e:
                await self.error_response(e)
                return
            if self.server.verbose:
                sys.stderr.write("faultserver: conn=%d req=%d %s %s\n"
                                 % (self.id, self.requests, req.method, req.target))
                sys.stderr.flush()
            try:
                keep = await self.dispatch(req)
            except BadRequest as e:
                await self.error_response(e, req)
                return
            if not keep:
                return

    async def error_response(self, e, req=None):
        body = (str(e) + "\n").encode()
        head = self.head_bytes(e.status, self.std_headers() + [
            ("Content-Type", "text/plain"), ("Content-Length", str(len(body))), ("Connection", "close")])
        if req is not None and req.is_head:
            body = b""
        await self.raw_then_close(head + body)

    async def dispatch(self, req):
        tag = req.q("tag")
        if tag is not None and req.path not in ("/connections", "/reset-stats"):
            self.server.stats.tags.setdefault(tag, set()).add(self.id)
        handler = ROUTES.get(req.path)
        arg = None
        if handler is None:
            for prefix, h in PREFIX_ROUTES:
                if req.path.startswith(prefix):
                    handler, arg = h, req.path[len(prefix):]
                    break
        if handler is None and req.path.startswith("/nest/"):
            # /nest/ANY/PATH/ENDPOINT serves ENDPOINT (the last segment): lets a test resolve
            # relative references ("../echo") against a deep path, and lets the auth servers
            # proxy a protected prefix here unchanged. The echo reports the full path.
            handler = ROUTES.get("/" + req.path.rsplit("/", 1)[-1])
        if handler is None:
            handler = Connection.h_not_found
        if req.has_body:
            expect = "100-continue" in req.header_tokens("Expect")
            mode = req.q("expect", "continue")
            if req.q_bool("early") or (expect and mode == "final"):
                self.must_close = True  # answer without reading the body, then close
            else:
                if expect and mode == "continue":
                    await self.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    self.sent_100 = True
                await self.read_body(req)
        if arg is None:
            return await handler(self, req)
        return await handler(self, req, arg)

    # ---- endpoints -----------------------------------------------------------------------

    async def h_not_found(self, req):
        return await self.respond(req, 404, [("Content-Type", "text/plain")],
                                  b"unknown endpoint %s\n" % req.path.encode("latin-1", "replace"))

    async def h_ok(self, req):
        size = req.q_int("size", 1024)
        delay = req.q_int("delay_ms", 0)
        if delay:
            await asyncio.sleep(delay / 1000)
        drip_ms = req.q_int("drip_ms", 0)
        return await self.respond(
            req, 200, [("Content-Type", "application/octet-stream")], size=size,
            chunked=req.q_bool("chunked"), chunk_size=req.q_int("chunk", 8192, 1),
            close=not req.q_bool("keepalive", True), drip_ms=drip_ms,
            drip_bytes=req.q_int("drip_bytes", 1024, 1))

    async def h_flaky(self, req):
        """Fails the first `fail` requests with the same `key`, then succeeds: how=status answers
        `status` (default 503, with `retry_after` as Retry-After when given); how=truncate sends
        a 200 of `size` bytes cut in half. The success honours `Range: bytes=N-` (with If-Range
        against its ETag), so a retried download can continue. /flaky-count?key= tells how
        many requests a key has seen."""
        key = req.q("key", "")
        seen = self.server.stats.flaky.get(key, 0) + 1
        self.server.stats.flaky[key] = seen
        size = req.q_int("size", 1024)
        etag = '"flaky-%d"' % size
        if seen <= req.q_int("fail", 1):
            if req.q("how", "status") == "truncate":
                head = self.head_bytes(200, self.std_headers() + [
                    ("Content-Type", "application/octet-stream"), ("Content-Length", str(size)),
                    ("ETag", etag), ("Accept-Ranges", "bytes")])
                return await self.raw_then_close(head + pattern_bytes(size // 2), "fin")
            headers = [("Content-Type", "text/plain")]
            if req.q("retry_after") is not None:
                headers.append(("Retry-After", req.q("retry_after")))
            return await self.respond(req, req.q_int("status", 503), headers,
                                      b"failure %d\n" % seen)
        start = 0
        ranged = req.header("Range") or ""
        if ranged.startswith("bytes=") and ranged.endswith("-") and \
                (req.header("If-Range") in (None, etag)):
            start = min(int(ranged[6:-1] or 0), size)
        headers = [("Content-Type", "application/octet-stream"), ("ETag", etag),
                   ("Accept-Ranges", "bytes")]
        if start:
            headers.append(("Content-Range", "bytes %d-%d/%d" % (start, size - 1, size)))
            return await self.respond(req, 206, headers, pattern_bytes(size - start, start))
        return await self.respond(req, 200, headers, size=size)

    async def h_flaky_count(self, req):
        n = self.server.stats.flaky.get(req.q("key", ""), 0)
        return await self.respond(req, 200, [("Content-Type", "text/plain")], b"%d\n" % n)

    async def h_truncate(self, req):
        n = req.q_int("len", 1000)
        m = min(req.q_int("send", n // 2), n)
        head = self.head_bytes(200, self.std_headers() + [
            ("Content-Type", "application/octet-stream"), ("Content-Length", str(n))])
        return await self.raw_then_close(head + pattern_bytes(m), "fin")

    async def h_reset(self, req):
        n = req.q_int("len", 1000)
        m = min(req.q_int("send", n // 2), n)
        head = self.head_bytes(200, self.std_headers() + [
            ("Content-Type", "application/octet-stream"), ("Content-Length", str(n))])
        return await self.raw_then_close(head + pattern_bytes(m), "rst")

    async def h_slowheaders(self, req):
        await asyncio.sleep(req.q_int("delay_ms", 3000) / 1000)
        return await self.respond(req, 200, [("Content-Type", "application/octet-stream")],
                                  size=req.q_int("size", 16))

    async def h_stall(self, req):
        n = req.q_int("len", 1000)
        m = min(req.q_int("send", n // 2), n)
        head = self.head_bytes(200, self.std_headers() + [
            ("Content-Type", "application/octet-stream"), ("Content-Length", str(n))]
            + [("Set-Cookie", c) for c in req.query.get("cookie", [])])
        await self.write(head + pattern_bytes(m))
        # tail=K&gap_ms=G: K more bytes G ms later (a few bytes after a burst), then the stall.
        tail = min(req.q_int("tail", 0), n - m)
        if tail:
            await asyncio.sleep(req.q_int("gap_ms", 100) / 1000)
            await self.write(pattern_bytes(tail, m))
        await asyncio.sleep(req.q_int("stall_ms", 3000) / 1000)
        await self.close_fin()
        return False

    BAD_STATUS = {
        "text": b"HTTP/1.1 abc OK\r\n",
        "proto": b"HTTPX/1.1 200 OK\r\n",
        "bigcode": b"HTTP/1.1 2000 OK\r\n",
        "shortcode": b"HTTP/1.1 20 OK\r\n",
        "nospace": b"HTTP/1.1200 OK\r\n",
        "version": b"HTTP/3.7 200 OK\r\n",
        "garbage": b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\xfe\xed\xfa\xce\x00\xff\r\n",
        "nul": b"HTTP/1.1 200 OK\r\nX-Bad: a\x00b\r\n",
        "spacecolon": b"HTTP/1.1 200 OK\r\nX-Bad : v\r\n",
        "obsfold": b"HTTP/1.1 200 OK\r\nX-Folded: first\r\n  second\r\n",
        "badname": b"HTTP/1.1 200 OK\r\nX(Bad): v\r\n",
        "nocolon": b"HTTP/1.1 200 OK\r\nX-No-Colon\r\n",
        "http09": None,  # no status line at all, just body bytes
        "empty": b"",  # close without a single byte (an "empty reply")
    }

    async def h_badstatus(self, req):
        variant = req.q("variant", "text")
        if variant not in self.BAD_STATUS:
            raise BadRequest("variant must be one of: %s" % ", ".join(sorted(self.BAD_STATUS)))
        start = self.BAD_STATUS[variant]
        if variant == "http09":
            data = b"hello, this is not HTTP/1.x\r\n"
        elif variant == "empty":
            data = b""
        else:
            data = start + b"Content-Length: 5\r\nConnection: close\r\n\r\nhello"
        return await self.raw_then_close(data)

    async def h_bigheaders(self, req):
        size = req.q_int("size", 70000)
        headers = self.std_headers() + [("Content-Length", "2"), ("Connection", "close")]
        if req.q_bool("single"):
            headers.append(("X-Filler", "x" * size))
        else:
            i = 0
            while len(self.head_bytes(200, headers)) <= size:
                headers.append(("X-Filler-%05d" % i, "x" * 100))
                i += 1
        return await self.raw_then_close(self.head_bytes(200, headers) + b"ok")

    BAD_CHUNK = {
        "hex": b"5\r\nhello\r\nzz\r\nhello\r\n0\r\n\r\n",
        "overflow": b"5\r\nhello\r\nffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
        "negative": b"5\r\nhello\r\n-5\r\nhello\r\n0\r\n\r\n",
        "nocrlf": b"5\r\nhelloXX5\r\nhello\r\n0\r\n\r\n",
        "truncated": b"5\r\nhello\r\n100\r\n" + pattern_bytes(50),
        "nolast": b"5\r\nhello\r\n5\r\nworld\r\n",
        "badtrailer": b"5\r\nhello\r\n0\r\nX-Trailer no colon\r\n\r\n",
    }

    async def h_badchunk(self, req):
        variant = req.q("variant", "hex")
        if variant not in self.BAD_CHUNK:
            raise BadRequest("variant must be one of: %s" % ", ".join(sorted(self.BAD_CHUNK)))
        head = self.head_bytes(200, self.std_headers() + [
            ("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked")])
        return await self.raw_then_close(head + self.BAD_CHUNK[variant])

    async def h_random(self, req):
        """`size` random-looking bytes (deterministic from `seed`) instead of a response, then
        FIN: no status line at all."""
        import random
        rng = random.Random(req.q_int("seed", 1))
        return await self.raw_then_close(bytes(rng.getrandbits(8) for _ in range(req.q_int("size", 4096))))

    async def h_endless(self, req):
        """A 200 whose body never ends: chunked (`chunked=1`, the default) or close-delimited,
        pattern bytes as fast as the client reads, until it goes."""
        chunked = req.q_bool("chunked", True)
        headers = [("Content-Type", "application/octet-stream")]
        headers += [("Transfer-Encoding", "chunked")] if chunked else [("Connection", "close")]
        await self.write(self.head_bytes(200, self.std_headers() + headers))
        block = pattern(0, BLOCK)
        data = (b"%x\r\n" % len(block)) + block + b"\r\n" if chunked else block
        while True:
            await self.write(data)

    LENGTHS = {
        "conflict": b"Content-Length: 5\r\nContent-Length: 6\r\n",
        "negative": b"Content-Length: -5\r\n",
        "huge": b"Content-Length: 99999999999999999999999\r\n",
        "garbage": b"Content-Length: 12abc\r\n",
        "te-and-cl": b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n",
        "te-unknown": b"Transfer-Encoding: snappy\r\n",
        "short": b"Content-Length: 100000\r\n",
    }

    async def h_lengths(self, req):
        """Bad or conflicting framing (`variant=`, see LENGTHS), a little body, then FIN."""
        variant = req.q("variant", "conflict")
        if variant not in self.LENGTHS:
            raise BadRequest("variant must be one of: %s" % ", ".join(sorted(self.LENGTHS)))
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + self.LENGTHS[variant] + b"\r\n"
        return await self.raw_then_close(head + b"5\r\nhello\r\n")

    async def h_closepooled(self, req):
        keep = await self.respond(req, 200, [("Content-Type", "text/plain")], b"ok\n")
        self.idle_timeout = max(req.q_int("after_ms", 50), 1) / 1000
        return keep

    async def h_closenext(self, req):
        mode = req.q("mode", "fin")
        if mode not in ("fin", "rst"):
            raise BadRequest("mode must be fin or rst")
        keep = await self.respond(req, 200, [("Content-Type", "text/plain")], b"ok\n")
        self.close_on_next = mode
        return keep

    # Request headers a hop test wants to see without parsing JSON: each occurrence comes back
    # as X-Echo-<name> (absent when the request carried none).
    ECHOED_CREDENTIALS = ("Authorization", "Proxy-Authorization", "Cookie")

    @classmethod
    def credential_echo(cls, req):
        out = []
        for name in cls.ECHOED_CREDENTIALS:
            out += [("X-Echo-" + name, v) for n, v in req.headers if n.lower() == name.lower()]
        return out

    async def h_echo(self, req):
        doc = {
            "method": req.method,
            "target": req.target,
            "path": req.path,
            "version": req.version,
            "headers": [[n, v] for n, v in req.headers],
            "body_length": req.body_length,
            "body_sha256": req.body_sha256,
            "body_read": req.body_read,
            "chunked": req.chunked,
            "trailers": [[n, v] for n, v in req.trailers],
            "connection": self.id,
            "peer_port": self.peer_port,
            "connection_requests": self.requests,
        }
        # One top-level key per line, compact values: easy to read and to strstr() from C.
        body = ("{\n" + ",\n".join(" %s: %s" % (json.dumps(k), json.dumps(v))
                                    for k, v in doc.items()) + "\n}\n").encode()
        # The essentials again as headers, so a test can check them without parsing JSON.
        return await self.respond(req, 200, [
            ("Content-Type", "application/json"), ("X-Echo-Method", req.method),
            ("X-Echo-Body-Length", str(req.body_length)), ("X-Echo-Body-Sha256", req.body_sha256),
            ("X-Echo-Chunked", "1" if req.chunked else "0"),
            ("X-Remote-Port", str(self.peer_port)),
            ("X-Echo-Header-Count", str(len(req.headers)))] + self.credential_echo(req), body)

    # ---- redirects and challenges (hop tests) ----------------------------------------------

    REDIRECT_CODES = (300, 301, 302, 303, 305, 307, 308)

    def redirect_headers(self, req, status, location, cookies):
        headers = [("Content-Type", "text/plain"), ("X-Echo-Method", req.method),
                   ("X-Echo-Body-Length", str(req.body_length)),
                   ("X-Echo-Body-Sha256", req.body_sha256)] + self.credential_echo(req)
        if location is not None:
            headers.append(("Location", location))
        headers += [("Set-Cookie", c) for c in cookies]
        return headers

    async def h_redirect(self, req):
        """status (302) with Location: `to`, verbatim (percent-decoded once from the query, so
        any byte sequence can be sent); without `to`, the same as /echo (so a query-only
        Location like "?x=1" lands on an echo). nolocation=1 sends no Location at all;
        cookie=NAME=VALUE (repeatable) adds Set-Cookie; the request's method, body hash and
        credentials come back as X-Echo-* headers; body "redirect\n" (size=N: N pattern bytes)."""
        to = req.q("to")
        if to is None:
            return await self.h_echo(req)
        to = wire(to)
        status = req.q_int("status", 302)
        if not 300 <= status <= 399:
            raise BadRequest("status must be 3xx")
        if req.q_bool("nolocation"):
            to = None
        headers = self.redirect_headers(req, status, to, req.query.get("cookie", []))
        size = req.q("size")
        if size is not None:
            return await self.respond(req, status, headers, size=req.q_int("size", 0))
        return await self.respond(req, status, headers, b"redirect\n")

    async def h_redirect_chain(self, req):
        """n (3) redirects, then the echo: hop i (i=0..n-1) answers `status` (302) with
        Location /redirect-chain?n=N&i=I+1&status=S (absolute=1: http://HOST/..., from the
        request's Host) and Set-Cookie: chainI=I; i >= n answers like /echo."""
        n = req.q_int("n", 3)
        i = req.q_int("i", 0)
        if i >= n:
            return await self.h_echo(req)
        status = req.q_int("status", 302)
        loc = "%s?n=%d&i=%d&status=%d" % (req.path, n, i + 1, status)
        if req.q_bool("absolute"):
            loc = "http://%s%s&absolute=1" % (req.header("Host") or "127.0.0.1", loc)
        headers = self.redirect_headers(req, status, loc, ["chain%d=%d; Path=/" % (i, i)])
        return await self.respond(req, status, headers, b"redirect %d of %d\n" % (i + 1, n))

    async def h_redirect_loop(self, req):
        """A redirect to itself, for ever: `status` (302), Location = the request target."""
        status = req.q_int("status", 302)
        return await self.respond(req, status, self.redirect_headers(req, status, req.target, []),
                                  b"loop\n")

    async def h_challenge(self, req):
        """401 with one WWW-Authenticate per `www=` value, verbatim (percent-decoded once from
        the query); proxy=1: 407 with Proxy-Authenticate instead. Always a challenge, whatever
        credentials come; they are echoed as X-Echo-* headers."""
        proxy = req.q_bool("proxy")
        name = "Proxy-Authenticate" if proxy else "WWW-Authenticate"
        headers = [("Content-Type", "text/plain")] + self.credential_echo(req)
        headers += [(name, wire(v)) for v in req.query.get("www", [])]
        return await self.respond(req, 407 if proxy else 401, headers, b"challenge\n")

    async def h_status(self, req, spec):
        m = re.fullmatch(r"(\d{3})((?:-then-\d{3})*)", spec)
        if not m:
            raise BadRequest("use /status/NNN or /status/1xx-then-NNN")
        codes = [int(c) for c in re.findall(r"\d{3}", spec)]
        if any(c < 100 or c > 599 for c in codes):
            raise BadRequest("status codes must be 100..599")
        interim, final = codes[:-1], codes[-1]
        if any(c >= 200 or c == 101 for c in interim):
            raise BadRequest("only 1xx (not 101) may come before the final status")
        if 100 <= final < 200:  # a lone 1xx: follow it with a 200 so the exchange completes
            interim, final = codes, 200
        for c in interim:
            extra = "Link: </style.css>; rel=preload\r\n" if c == 103 else ""
            self.writer.write(("HTTP/1.1 %d %s\r\n%s\r\n" % (c, reason(c), extra)).encode())
        headers = [("Content-Type", "application/octet-stream")]
        loc = req.q("location")
        if loc is not None:
            headers.append(("Location", loc))
        for h in req.query.get("header", []):
            name, sep, value = h.partition(":")
            if not sep:
                raise BadRequest("header=NAME:VALUE")
            headers.append((name.strip(), value.strip()))
        return await self.respond(req, final, headers, size=req.q_int("size", 0),
                                  chunked=req.q_bool("chunked"))

    async def h_interim(self, req):
        """100 and 103 before a 200 of `size` bytes; with count=N (0: for ever, until the client
        goes) instead N interim 102 heads, each padded with a field of pad=BYTES."""
        if req.q("count") is not None:
            count = req.q_int("count", 0)
            pad = req.q_int("pad", 0)
            one = b"HTTP/1.1 102 Processing\r\n" + (
                b"X-Pad: " + b"p" * pad + b"\r\n" if pad else b"") + b"\r\n"
            sent = 0
            while count == 0 or sent < count:
                await self.write(one * 16 if count == 0 else one)
                sent += 16 if count == 0 else 1
            return await self.respond(req, 200, [("Content-Type", "application/octet-stream")],
                                      size=req.q_int("size", 64))
        if not self.sent_100:
            self.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self.writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
        return await self.respond(req, 200, [("Content-Type", "application/octet-stream")],
                                  size=req.q_int("size", 64))

    async def h_contentsize(self, req):
        size = req.q_int("size", 1000)
        announce = req.q_int("announce", size)
        return await self.respond(req, 200, [("Content-Type", "application/octet-stream"),
                                             ("Content-Size", str(announce))],
                                  size=size, chunked=True, chunk_size=req.q_int("chunk", 8192, 1))

    async def h_headlen(self, req):
        return await self.respond(req, 200, [("Content-Type", "application/octet-stream")],
                                  size=req.q_int("len", 1000))

    async def h_close_delimited(self, req):
        size = req.q_int("size", 1000)
        head = self.head_bytes(200, self.std_headers() + [
            ("Content-Type", "application/octet-stream"), ("Connection", "close")])
        self.writer.write(head)
        if not req.is_head:
            await self.send_pattern(size, False, BLOCK)
        await self.close_fin()
        return False

    async def h_cacheable(self, req):
        """A response with caching headers of the test's choosing, counting requests per `key`
        (/cacheable-count?key= tells them as JSON {"requests", "full", "not_modified"}):
        `cc` (Cache-Control), `etag`, `lm` (Last-Modified), `expires`, `vary`, `status` (200),
        `size` pattern bytes (default 100), `v` (a version number that ends the body and the
        ETag when `etag=auto`), `fail_after` (N: the key's requests after the N-th get a 503),
        `then_cc` (the Cache-Control of the key's requests after the first, instead of `cc`).
        Every answer carries X-Request-Number (the key's requests so far, this one included).
        A request whose If-None-Match matches the ETag, or whose If-Modified-Since equals `lm`,
        gets a 304 with the same caching headers."""
        key = req.q("key", "")
        counts = self.server.stats.cache_hits.setdefault(key, [0, 0, 0])
        counts[0] += 1
        version = req.q("v", "1")
        etag = req.q("etag")
        if etag == "auto":
            etag = '"%s-v%s"' % (key, version)
        headers = [("X-Request-Number", str(counts[0]))]
        cc = req.q("then_cc") if counts[0] > 1 and req.q("then_cc") is not None else req.q("cc")
        if cc is not None:
            headers.append(("Cache-Control", cc))
        if etag:
            headers.append(("ETag", etag))
        if req.q("lm"):
            headers.append(("Last-Modified", req.q("lm")))
        if req.q("expires"):
            headers.append(("Expires", req.q("expires")))
        if req.q("vary"):
            headers.append(("Vary", req.q("vary")))
        inm = req.header("If-None-Match")
        ims = req.header("If-Modified-Since")
        if (etag and inm and etag in [t.strip() for t in inm.split(",")]) or \
                (req.q("lm") and ims == req.q("lm") and not inm):
            counts[2] += 1
            return await self.respond(req, 304, headers)
        fail_after = req.q_int("fail_after", 0)
        if fail_after and counts[0] > fail_after:
            return await self.respond(req, 503, [("Content-Type", "text/plain")], b"down\n")
        counts[1] += 1
        body = pattern_bytes(req.q_int("size", 100)) + ("v%s" % version).encode()
        headers.append(("Content-Type", "application/octet-stream"))
        return await self.respond(req, req.q_int("status", 200), headers, body)

    async def h_cacheable_count(self, req):
        counts = self.server.stats.cache_hits.get(req.q("key", ""), [0, 0, 0])
        body = json.dumps({"requests": counts[0], "full": counts[1], "not_modified": counts[2]})
        return await self.respond(req, 200, [("Content-Type", "application/json")],
                                  body.encode() + b"\n")

    async def h_probe(self, req):
        """Counts requests with the same `tag` that are in progress at once (from the head read
        to the response written), records their `id` and method in arrival order, holds each
        `hold_ms` (default 50), then answers `size` pattern bytes. /probe-stats?tag= reports
        them."""
        probes = self.server.stats.probes
        stats = probes.setdefault(req.q("tag", ""), ProbeStats())
        stats.inflight += 1
        stats.max_inflight = max(stats.max_inflight, stats.inflight)
        stats.order.append(req.q("id", ""))
        stats.methods.append(req.method)
        try:
            await asyncio.sleep(req.q_int("hold_ms", 50) / 1000)
            return await self.respond(req, 200, [("Content-Type", "application/octet-stream")],
                                      size=req.q_int("size", 16))
        finally:
            stats.inflight -= 1

    async def h_probe_stats(self, req):
        """JSON {"count", "inflight", "max_inflight", "order", "methods"} for /probe's `tag`
        (methods[i] is the method of order[i]); reset=1 forgets the tag after answering."""
        tag = req.q("tag", "")
        stats = self.server.stats.probes.get(tag, ProbeStats())
        body = json.dumps({"count": len(stats.order), "inflight": stats.inflight,
                           "max_inflight": stats.max_inflight, "order": stats.order,
                           "methods": stats.methods})
        if req.q_bool("reset"):
            self.server.stats.probes.pop(tag, None)
        return await self.respond(req, 200, [("Content-Type", "application/json")],
                                  body.encode() + b"\n")

    async def h_connections(self, req):
        tag = req.q("tag")
        stats = self.server.stats
        n = len(stats.tags.get(tag, ())) if tag is not None else stats.accepted
        return await self.respond(req, 200, [("Content-Type", "text/plain")], b"%d\n" % n)

    async def h_socks_mode(self, req):
        """Sets how SOCKS_FAULT_PORT answers the next connections, and clears its log."""
        mode = req.q("m") or "ok"
        if mode not in SOCKS_MODES:
            return await self.respond(req, 400, [("Content-Type", "text/plain")],
                                      b"unknown SOCKS mode\n")
        SOCKS_STATE["mode"] = mode
        SOCKS_STATE["log"] = []
        return await self.respond(req, 200, [("Content-Type", "text/plain")], b"ok\n")

    async def h_socks_log(self, req):
        """What SOCKS_FAULT_PORT was asked since the last /socks-mode, as JSON lines."""
        body = "".join(json.dumps(e) + "\n" for e in SOCKS_STATE["log"]).encode()
        return await self.respond(req, 200, [("Content-Type", "application/json")], body)

    async def h_reset_stats(self, req):
        tag = req.q("tag")
        stats = self.server.stats
        if tag is not None:
            stats.tags.pop(tag, None)
        else:
            stats.accepted = 0
            stats.tags.clear()
        return await self.respond(req, 200, [("Content-Type", "text/plain")], b"ok\n")

    async def h_keepalive_timeout(self, req):
        timeout = req.q_int("timeout", 1)
        value = "timeout=%d" % timeout
        if req.q("max") is not None:
            value += ", max=%d" % req.q_int("max", 0)
        keep = await self.respond(req, 200, [("Content-Type", "application/octet-stream"),
                                             ("Keep-Alive", value)], size=req.q_int("size", 16))
        if req.q_bool("enforce", True):
            self.idle_timeout = max(timeout, 0.001)
        return keep

    async def h_exchange(self, req, name):
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name) or ".." in name:
            raise BadRequest("bad exchange name %r" % name)
        path = os.path.join(self.server.exchanges_dir, name + ".http")
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return await self.respond(req, 404, [("Content-Type", "text/plain")],
                                      b"no exchange fixture %s\n" % path.encode())
        return await self.raw_then_close(data)

    async def h_gzip(self, req):
        """A compressed body made here, for what nginx cannot produce: kind=gzip|deflate|rawdeflate|
        br|zstd (Content-Encoding gzip, deflate, br or zstd; rawdeflate is a deflate body without
        its zlib wrapper; br and zstd through the system's libbrotlienc and libzstd), coding=X
        sends X as the Content-Encoding instead, members=N splits gzip (zstd) into N
        concatenated members (frames), truncate=K drops the last
        K encoded bytes, corrupt=I flips bits of encoded byte I, zeros=1 compresses zeros instead of the pattern (a bomb when size is
        large), chunked=1 sends it chunked. The decoded body is `size` bytes of the pattern."""
        size = req.q_int("size", 100000)
        kind = req.q("kind", "gzip")
        members = max(1, req.q_int("members", 1))
        zeros = req.q_bool("zeros")
        key = (size, kind, members, zeros)
        data = GZIP_CACHE.get(key)
        if data is None and kind in ("br", "zstd"):
            parts, step = [], -(-size // members) if size else 0
            for m in range(members if kind == "zstd" else 1):
                start, end = (m * step, min(size, (m + 1) * step)) if kind == "zstd" else (0, size)
                block = bytes(end - start) if zeros else pattern_bytes(end - start, start)
                parts.append(native_compress(kind, block))
            data = b"".join(parts)
            GZIP_CACHE[key] = data
        if data is None:
            if kind not in ("gzip", "deflate", "rawdeflate"):
                raise BadRequest("kind=gzip|deflate|rawdeflate|br|zstd")
            wbits = {"gzip": 31, "deflate": 15, "rawdeflate": -15}[kind]
            parts, step = [], -(-size // members) if size else 0
            for m in range(members):
                c = zlib.compressobj(6, zlib.DEFLATED, wbits)
                start, end = m * step, min(size, (m + 1) * step)
                pos = start
                while pos < end:
                    n = min(1 << 20, end - pos)
                    block = bytes(n) if zeros else pattern_bytes(n, pos)
                    parts.append(c.compress(block))
                    pos += n
                parts.append(c.flush())
            data = b"".join(parts)
            GZIP_CACHE[key] = data
        cut = req.q_int("truncate", 0)
        if cut:
            data = data[:max(0, len(data) - cut)]
        bad = req.q_int("corrupt", -1)
        if 0 <= bad < len(data):
            data = data[:bad] + bytes([data[bad] ^ 0x55]) + data[bad + 1:]
        coding = req.q("coding") or {"rawdeflate": "deflate"}.get(kind, kind)
        return await self.respond(req, 200, [("Content-Type", "application/octet-stream"),
                                             ("Content-Encoding", coding)], data,
                                  chunked=req.q_bool("chunked"))

    async def h_multipart(self, req):
        """Reports what a multipart/form-data body held, part by part: name, filename, content
        type, size and SHA-256 of each part's content (parsed while streaming: a 200 MiB file
        part costs no memory)."""
        mp = getattr(req, "multipart", None)
        if mp is None:
            return await self.respond(req, 400, [("Content-Type", "text/plain")], b"no body\n")
        ok = mp.finish()
        body = json.dumps({"ok": ok, "error": mp.error, "parts": mp.parts}).encode()
        return await self.respond(req, 200 if ok else 422, [
            ("Content-Type", "application/json"),
            ("X-Multipart-Parts", str(len(mp.parts)))], body)


class MultipartSink:
    """Streaming multipart/form-data parser (RFC 7578): feed() any chunks, finish() at the end."""

    def __init__(self, content_type):
        m = re.search(r'boundary="?([^";]+)"?', content_type)
        self.delim = b"\r\n--" + m.group(1).encode("latin-1") if m else None
        self.error = None if m else "no boundary in Content-Type"
        self.buf = b"\r\n"  # the first delimiter has no CRLF before it
        self.state = "preamble"
        self.parts, self.part, self.hash = [], None, None

    def feed(self, data):
        if self.error or self.state == "done":
            return
        self.buf += data
        while True:
            if self.state in ("preamble", "body"):
                i = self.buf.find(self.delim)
                if i < 0:
                    keep = len(self.delim) - 1  # a delimiter may straddle two chunks
                    if len(self.buf) > keep:
                        self._content(self.buf[:-keep])
                        self.buf = self.buf[-keep:]
                    return
                self._content(self.buf[:i])
                self._close_part()
                self.buf = self.buf[i + len(self.delim):]
                self.state = "after-delim"
            if self.state == "after-delim":
                if len(self.buf) < 2:
                    return
                if self.buf[:2] == b"--":
                    self.state = "done"
                    return
                j = self.buf.find(b"\r\n\r\n")
                if j < 0:
                    if len(self.buf) > 16384:
                        self.error = "part headers too long"
                    return
                self._open_part(self.buf[:j])
                self.buf = self.buf[j + 4:]
                self.state = "body"

    def _open_part(self, raw):
        lines = raw.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:] if lines and lines[0] == "" else lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        disp = headers.get("content-disposition", "")
        name = re.search(r'\bname="([^"]*)"', disp)
        fname = re.search(r'filename="([^"]*)"', disp)
        self.part = {"name": name.group(1) if name else None,
                     "filename": fname.group(1) if fname else None,
                     "content_type": headers.get("content-type"), "size": 0}
        self.fields = sorted(headers)
        self.hash = hashlib.sha256()

    def _content(self, data):
        if self.state == "body" and data:
            self.part["size"] += len(data)
            self.hash.update(data)

    def _close_part(self):
        if self.state == "body":
            self.part["sha256"] = self.hash.hexdigest()
            self.part["fields"] = self.fields  # last: tests match the keys before it verbatim
            self.parts.append(self.part)
            self.part = None

    def finish(self):
        if self.error is None and self.state != "done":
            self.error = "body ended before the closing delimiter"
        return self.error is None


GZIP_CACHE = {}


def native_compress(kind, data):
    """br or zstd through the system libraries (ctypes: the standard library has neither)."""
    import ctypes
    import ctypes.util
    if kind == "br":
        lib = ctypes.CDLL(ctypes.util.find_library("brotlienc") or "libbrotlienc.so.1")
        lib.BrotliEncoderMaxCompressedSize.restype = ctypes.c_size_t
        lib.BrotliEncoderMaxCompressedSize.argtypes = [ctypes.c_size_t]
        lib.BrotliEncoderCompress.restype = ctypes.c_int
        lib.BrotliEncoderCompress.argtypes = [
            ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p]
        cap = ctypes.c_size_t(max(lib.BrotliEncoderMaxCompressedSize(len(data)), 1024))
        out = ctypes.create_string_buffer(cap.value)
        if not lib.BrotliEncoderCompress(5, 22, 0, len(data), data, ctypes.byref(cap), out):
            raise BadRequest("brotli compression failed", 500)
        return out.raw[:cap.value]
    lib = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    lib.ZSTD_compressBound.restype = ctypes.c_size_t
    lib.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
    lib.ZSTD_compress.restype = ctypes.c_size_t
    lib.ZSTD_compress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                  ctypes.c_size_t, ctypes.c_int]
    lib.ZSTD_isError.restype = ctypes.c_uint
    lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
    cap = lib.ZSTD_compressBound(len(data))
    out = ctypes.create_string_buffer(cap)
    n = lib.ZSTD_compress(out, cap, data, len(data), 3)
    if lib.ZSTD_isError(n):
        raise BadRequest("zstd compression failed", 500)
    return out.raw[:n]


ROUTES = {
    "/gzip": Connection.h_gzip,
    "/flaky": Connection.h_flaky,
    "/flaky-count": Connection.h_flaky_count,
    "/multipart": Connection.h_multipart,
    "/ok": Connection.h_ok,
    "/truncate": Connection.h_truncate,
    "/reset": Connection.h_reset,
    "/slowheaders": Connection.h_slowheaders,
    "/stall": Connection.h_stall,
    "/badstatus": Connection.h_badstatus,
    "/bigheaders": Connection.h_bigheaders,
    "/badchunk": Connection.h_badchunk,
    "/closepooled": Connection.h_closepooled,
    "/random": Connection.h_random,
    "/endless": Connection.h_endless,
    "/lengths": Connection.h_lengths,
    "/closenext": Connection.h_closenext,
    "/echo": Connection.h_echo,
    "/redirect": Connection.h_redirect,
    "/redirect-chain": Connection.h_redirect_chain,
    "/redirect-loop": Connection.h_redirect_loop,
    "/challenge": Connection.h_challenge,
    "/interim": Connection.h_interim,
    "/contentsize": Connection.h_contentsize,
    "/headlen": Connection.h_headlen,
    "/close-delimited": Connection.h_close_delimited,
    "/connections": Connection.h_connections,
    "/probe": Connection.h_probe,
    "/cacheable": Connection.h_cacheable,
    "/cacheable-count": Connection.h_cacheable_count,
    "/probe-stats": Connection.h_probe_stats,
    "/reset-stats": Connection.h_reset_stats,
    "/socks-mode": Connection.h_socks_mode,
    "/socks-log": Connection.h_socks_log,
    "/keepalive-timeout": Connection.h_keepalive_timeout,
}
PREFIX_ROUTES = [
    ("/status/", Connection.h_status),
    ("/exchange/", Connection.h_exchange),
]



# ---- a SOCKS peer (only with --tls-ports-file, whose file also names its port) --------------
#
# SOCKS_FAULT_PORT  a SOCKS4/4A/5 server to loopback whose behaviour for new connections is set
#                   with GET /socks-mode?m=MODE on the HTTP port (default "ok"); /socks-log lists
#                   what it was asked since (version, command, address type, host, port, user,
#                   password). Modes: ok (a working proxy; for SOCKS5 it picks user name and
#                   password when offered), auth-refuse (refuses any credentials), close (closes
#                   at once), stall (never answers), greeting-version (answers the greeting as
#                   version 4), no-method (0xFF), auth-unoffered (picks method 2 whatever was
#                   offered), refuse (reply 5 / SOCKS4 91), bad-atyp (reply with address type
#                   9), truncated (half a reply, then close), trailing (bytes after the reply),
#                   long-domain (a success reply whose bound address is a 255-byte name).
SOCKS_MODES = ("ok", "auth-refuse", "close", "stall", "greeting-version", "no-method",
               "auth-unoffered", "refuse", "bad-atyp", "truncated", "trailing", "long-domain")
SOCKS_STATE = {"mode": "ok", "log": []}


async def _socks_relay(reader, writer, host, port):
    try:
        tr, tw = await asyncio.open_connection(host, port)
    except OSError:
        return False

    async def pump(src, dst):
        try:
            while True:
                data = await src.read(65536)
                if not data:
                    break
                dst.write(data)
                await dst.drain()
        except _DISCONNECTED:
            pass
        finally:
            try:
                if dst.can_write_eof():
                    dst.write_eof()
            except (OSError, RuntimeError):
                pass

    try:
        await asyncio.gather(pump(reader, tw), pump(tr, writer))
    finally:
        tw.close()
    return True


async def _read_nul(reader, limit=1024):
    out = b""
    while len(out) < limit:
        c = await reader.readexactly(1)
        if c == b"\0":
            return out
        out += c
    raise ValueError("no NUL")


async def on_socks(reader, writer):
    mode = SOCKS_STATE["mode"]
    entry = {}
    try:
        if mode == "close":
            return
        if mode == "stall":
            await asyncio.sleep(60)
            return
        ver = (await reader.readexactly(1))[0]
        entry["version"] = ver
        SOCKS_STATE["log"].append(entry)
        if ver == 4:
            cd, port, ip = struct.unpack("!BH4s", await reader.readexactly(7))
            entry.update(command=cd, port=port, user=(await _read_nul(reader)).decode("latin-1"))
            if ip[:3] == b"\0\0\0" and ip[3] != 0:
                entry.update(atyp="name", host=(await _read_nul(reader)).decode("latin-1"))
            else:
                entry.update(atyp="ipv4", host=socket.inet_ntoa(ip))
            if mode == "refuse":
                writer.write(b"\x00\x5b" + b"\0" * 6)
                await writer.drain()
                return
            writer.write(b"\x00\x5a" + b"\0" * 6)
            await writer.drain()
            await _socks_relay(reader, writer, entry["host"], port)
            return
        if ver != 5:
            return
        methods = await reader.readexactly((await reader.readexactly(1))[0])
        entry["methods"] = list(methods)
        if mode == "greeting-version":
            writer.write(b"\x04\x00")
        elif mode == "no-method":
            writer.write(b"\x05\xff")
        elif mode == "auth-unoffered":
            writer.write(b"\x05\x02")
        if mode in ("greeting-version", "no-method", "auth-unoffered"):
            await writer.drain()
            await asyncio.sleep(5)  # the client must give up and close
            return
        if 2 in methods:
            writer.write(b"\x05\x02")
            await writer.drain()
            av = (await reader.readexactly(1))[0]
            user = await reader.readexactly((await reader.readexactly(1))[0])
            password = await reader.readexactly((await reader.readexactly(1))[0])
            entry.update(auth_version=av, user=user.decode("latin-1"),
                         password=password.decode("latin-1"))
            if mode == "auth-refuse":
                writer.write(b"\x01\x01")
                await writer.drain()
                return
            writer.write(b"\x01\x00")
        else:
            writer.write(b"\x05\x00")
        await writer.drain()
        _, cmd, _, atyp = await reader.readexactly(4)
        if atyp == 1:
            host = socket.inet_ntoa(await reader.readexactly(4))
            entry["atyp"] = "ipv4"
        elif atyp == 4:
            host = socket.inet_ntop(socket.AF_INET6, await reader.readexactly(16))
            entry["atyp"] = "ipv6"
        else:
            host = (await reader.readexactly((await reader.readexactly(1))[0])).decode("latin-1")
            entry["atyp"] = "name"
        port = struct.unpack("!H", await reader.readexactly(2))[0]
        entry.update(command=cmd, host=host, port=port)
        ok = b"\x05\x00\x00\x01\x7f\x00\x00\x01\x04\x38"
        if mode == "refuse":
            writer.write(b"\x05\x05\x00\x01\x00\x00\x00\x00\x00\x00")
        elif mode == "bad-atyp":
            writer.write(b"\x05\x00\x00\x09\x00\x00\x00\x00\x00\x00")
        elif mode == "truncated":
            writer.write(ok[:6])
        elif mode == "trailing":
            writer.write(ok + b"HTTP/1.1 200 OK\r\n\r\n")
        if mode in ("refuse", "bad-atyp", "truncated", "trailing"):
            await writer.drain()
            if mode == "trailing":
                await asyncio.sleep(5)
            return
        if mode == "long-domain":
            writer.write(b"\x05\x00\x00\x03\xff" + b"a" * 255 + b"\x04\x38")
        else:
            writer.write(ok)
        await writer.drain()
        await _socks_relay(reader, writer, host, port)
    except (asyncio.IncompleteReadError, ValueError) + _DISCONNECTED:
        pass
    finally:
        writer.transport.abort()


# ---- TLS fault peers (only with --tls-ports-file) ------------------------------------------
#
# TLS_GARBAGE_PORT  reads the ClientHello, answers with plain text ("HTTP/1.1 400 Bad
#                   Request\r\n\r\n"), then closes: the client's handshake must fail.
# TLS_STALL_PORT    accepts and reads, never answers: the client's handshake must time out.
# TLS_REQCERT_PORT  a real TLS 1.3 server (Python's ssl module) that REQUIRES a client
#                   certificate signed by --tls-ca at the handshake: without one it fails the
#                   handshake with a certificate_required alert; with one it serves keep-alive
#                   200s (body "reqcert ok CN=...\n", headers X-Client-CN, X-TLS-Version).
#                   Blocking sockets in threads, so the alert really reaches the peer (asyncio's
#                   SSL transport drops it when a server-side handshake fails).

GARBAGE_REPLY = b"HTTP/1.1 400 Bad Request\r\n\r\n"


async def _drain_and_close(reader, writer, limit_s=LINGER_S):
    try:
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()

        async def drain_input():
            while await reader.read(65536):
                pass

        await asyncio.wait_for(drain_input(), limit_s)
    except (asyncio.TimeoutError,) + _DISCONNECTED:
        pass
    finally:
        writer.close()


async def on_tls_garbage(reader, writer):
    try:
        await asyncio.wait_for(reader.read(65536), 10)  # (part of) the ClientHello
        writer.write(GARBAGE_REPLY)
        await _drain_and_close(reader, writer)
    except (asyncio.TimeoutError,) + _DISCONNECTED:
        writer.transport.abort()


async def on_tls_stall(reader, writer, idle_timeout):
    try:  # swallow whatever arrives, say nothing, until the peer gives up
        while await asyncio.wait_for(reader.read(65536), idle_timeout or None):
            pass
    except (asyncio.TimeoutError,) + _DISCONNECTED:
        pass
    finally:
        writer.transport.abort()


class ReqCertServer:
    """Threaded TLS 1.3 server demanding a client certificate (see above)."""

    IDLE_S = 30.0

    def __init__(self, host, cert, key, ca, verbose):
        import ssl
        import threading
        self.ssl = ssl
        self.threading = threading
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.load_cert_chain(cert, key)
        ctx.load_verify_locations(cafile=ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.set_alpn_protocols(["http/1.1"])
        self.ctx = ctx
        self.verbose = verbose
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept_loop, name="reqcert-accept", daemon=True).start()

    def log(self, msg):
        if self.verbose:
            sys.stderr.write("faultserver: reqcert: %s\n" % msg)
            sys.stderr.flush()

    def accept_loop(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.threading.Thread(target=self.handle, args=(conn,), name="reqcert-conn",
                                  daemon=True).start()

    @staticmethod
    def linger_close(sock):
        """FIN, then read until the peer closes (up to LINGER_S) so that unread input cannot
        turn the close into an RST that would overtake the alert or response."""
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(LINGER_S)
            while sock.recv(65536):
                pass
        except OSError:
            pass
        finally:
            sock.close()

    def handle(self, conn):
        ssl = self.ssl
        conn.settimeout(self.IDLE_S)
        tls = self.ctx.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        try:
            tls.do_handshake()
        except (ssl.SSLError, OSError) as e:
            self.log("handshake failed: %s" % e)
            self.linger_close(tls)  # the alert is already on the wire
            return
        cn = ""
        for rdn in (tls.getpeercert() or {}).get("subject", ()):
            for k, v in rdn:
                if k == "commonName":
                    cn = v
        version = tls.version() or ""
        buf = b""
        nreq = 0
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = tls.recv(65536)
                    if not data:
                        tls.close()
                        return
                    buf += data
                    if len(buf) > MAX_HEAD:
                        tls.close()
                        return
                head, _, buf = buf.partition(b"\r\n\r\n")
                nreq += 1
                lines = head.decode("latin-1").split("\r\n")
                self.log("%s (CN=%s, %s)" % (lines[0], cn, version))
                close = any(ln.lower().replace(" ", "") == "connection:close" for ln in lines[1:])
                body = ("reqcert ok CN=%s\n" % cn).encode("latin-1", "replace")
                hdrs = ["HTTP/1.1 200 OK", "Server: tern-faultserver-reqcert",
                        "Content-Type: text/plain", "Content-Length: %d" % len(body),
                        "X-Client-CN: %s" % cn, "X-TLS-Version: %s" % version,
                        "X-Connection-Requests: %d" % nreq]
                if close:
                    hdrs.append("Connection: close")
                tls.sendall(("\r\n".join(hdrs) + "\r\n\r\n").encode("latin-1") + body)
                if close:
                    try:
                        tls = tls.unwrap()  # close_notify
                    except (ssl.SSLError, OSError):
                        pass
                    self.linger_close(tls)
                    return
        except (ssl.SSLError, OSError) as e:
            self.log("connection error: %s" % e)
            tls.close()


async def main_async(args):
    server = Server(args.exchanges, args.verbose, args.idle_timeout)
    srv = await asyncio.start_server(server.on_connect, args.host, args.port, limit=MAX_HEAD,
                                     backlog=1024, reuse_address=True)
    port = srv.sockets[0].getsockname()[1]
    extra = []
    if args.tls_ports_file:  # before the port file: its presence means everything listens
        g = await asyncio.start_server(on_tls_garbage, args.host, 0, backlog=128,
                                       reuse_address=True)
        st = await asyncio.start_server(
            lambda r, w: on_tls_stall(r, w, args.idle_timeout), args.host, 0, backlog=128,
            reuse_address=True)
        sk = await asyncio.start_server(on_socks, args.host, 0, backlog=128,
                                        reuse_address=True)
        extra += [g, st, sk]
        lines = ["TLS_GARBAGE_PORT=%d" % g.sockets[0].getsockname()[1],
                 "TLS_STALL_PORT=%d" % st.sockets[0].getsockname()[1],
                 "SOCKS_FAULT_PORT=%d" % sk.sockets[0].getsockname()[1]]
        if args.tls_cert:
            rc = ReqCertServer(args.host, args.tls_cert, args.tls_key, args.tls_ca, args.verbose)
            lines.append("TLS_REQCERT_PORT=%d" % rc.port)
        tmp = args.tls_ports_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, args.tls_ports_file)
    if args.second_port_file:  # a second origin (another port) with the same endpoints
        srv2 = await asyncio.start_server(server.on_connect, args.host, 0, limit=MAX_HEAD,
                                          backlog=1024, reuse_address=True)
        extra.append(srv2)
        tmp = args.second_port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % srv2.sockets[0].getsockname()[1])
        os.replace(tmp, args.second_port_file)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, args.port_file)
    sys.stdout.write("listening on %s:%d\n" % (args.host, port))
    sys.stdout.flush()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()

    srv.close()
    for x in extra:
        x.close()
    for conn in list(server.conns):
        conn.writer.transport.abort()
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=2)


def main():
    ap = argparse.ArgumentParser(description="Scriptable misbehaving HTTP/1.1 server for tests.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port (printed)")
    ap.add_argument("--port-file", help="also write the port to this file (atomically)")
    ap.add_argument("--second-port-file",
                    help="also listen on a second port (another origin, same endpoints) and "
                         "write it to this file, before --port-file")
    ap.add_argument("--exchanges", default=DEFAULT_EXCHANGES,
                    help="directory of NAME.http fixtures for /exchange/NAME")
    ap.add_argument("--idle-timeout", type=float, default=600.0,
                    help="seconds an idle connection is kept (0: forever)")
    ap.add_argument("--tls-ports-file",
                    help="also start the TLS fault peers and write KEY=PORT lines here")
    ap.add_argument("--tls-cert", help="server certificate (PEM) for TLS_REQCERT_PORT")
    ap.add_argument("--tls-key", help="its key (PEM)")
    ap.add_argument("--tls-ca", help="CA (PEM) the TLS_REQCERT_PORT client certificate needs")
    ap.add_argument("-v", "--verbose", action="store_true", help="log each request to stderr")
    args = ap.parse_args()
    if args.tls_cert and not (args.tls_key and args.tls_ca and args.tls_ports_file):
        ap.error("--tls-cert needs --tls-key, --tls-ca and --tls-ports-file")
    try:
        asyncio.run(main_async(args))
    except OSError as e:
        sys.stderr.write("faultserver: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
