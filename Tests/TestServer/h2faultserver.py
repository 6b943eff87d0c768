#!/usr/bin/env python3
"""A scriptable HTTP/2 server for misbehaving peers (Tern's integration tests), the HTTP/2
sibling of faultserver.py: every behaviour is chosen by the request path and query, so a test
drives it with nothing but a URL; what a connection advertises in its SETTINGS is chosen by the
listener (a connection's SETTINGS go out before its first request arrives).

    h2faultserver.py --listen KEY:OPTIONS [--listen ...] [--host 127.0.0.1] [--ports-file F]
                     [--tls-cert PEM --tls-key PEM] [-v]

Each --listen opens one port; OPTIONS are comma-separated: `h2c` (HTTP/2 with prior knowledge
over plain TCP) or `tls` (TLS with ALPN "h2"; a client that offers no "h2" gets no ALPN answer
and is spoken HTTP/2 to all the same), and `max_streams=N` (SETTINGS_MAX_CONCURRENT_STREAMS,
default 128), enforced by this server: a stream opened beyond it (a client may open some before
our SETTINGS arrive) gets RST_STREAM(REFUSED_STREAM), and /stats counts it. Once every listener is bound, --ports-file gets KEY=PORT lines (atomically) and
stdout one line per listener ("listening on 127.0.0.1:PORT (KEY)"). SIGTERM or SIGINT exits 0.

HTTP/2 is the h2 package's (PyPI `h2`, with hpack and hyperframe), so scripts/python-venv.sh
installs it into build/python-venv and servers.py runs this file on that Python. What h2 will
not send (a PUSH_PROMISE to a client that disabled push, a GOAWAY after which streams are still
answered, malformed frames) is written as raw frame bytes beside h2's output.

Endpoints (the body pattern is faultserver.py's: byte i is i % 251). Every well-formed answer
carries x-connection (a per-process connection serial), x-connection-requests (streams opened
on that connection so far) and x-stream-id. `tag=T` on any request counts it under T (see
/stats); `hold=MS` waits that long before answering (all endpoints but /stats).

    /ok?size=16                   200 with `size` pattern bytes (flow control respected)
    /echo                         200 JSON: method, path, headers ([[name, value], ...]),
                                  body_length, body_sha256, connection, stream; also as headers
                                  x-echo-body-length, x-echo-body-sha256
    /stats?tag=T&reset=0          JSON {"requests", "inflight", "max_inflight", "refused",
                                  "connections"}: requests of tag T in progress at once (from
                                  the request head to the answer's last frame), the streams
                                  refused for going over the listener's max_streams (see below),
                                  and the distinct connections that carried them; reset=1 forgets
                                  T after answering
    /goaway?after=K&size=16       counted per connection: the K-th such stream makes the server
                                  send GOAWAY(last-stream-id = that stream, NO_ERROR); streams up
                                  to it are answered, later ones are never processed (the client
                                  must retry them on a new connection), and the connection closes
                                  once the answered ones are done
    /rst?code=2&after=0&head=1    answers the head (head=1) and `after` bytes of a larger body,
                                  then RST_STREAM with error `code` (2: INTERNAL_ERROR)
    /push?size=16                 a PUSH_PROMISE (promised stream 2, 4, ...) on this stream, then
                                  the /ok answer: a client that sent SETTINGS_ENABLE_PUSH=0 must
                                  treat it as a connection error (PROTOCOL_ERROR)
    /stall?size=1000000&after=1000  the head (Content-Length `size`) and `after` bytes, then
                                  nothing on this stream; other streams go on
    /headers?count=10&size=10     200 with `count` fields x-h-I whose values are `size` bytes
                                  (valid HPACK, split into CONTINUATION frames as needed)
    /bad?kind=K                   malformed frames, then silence (the connection stays open, so
                                  a client that misses the error hangs rather than passes):
        frame-size        a DATA frame header announcing 2^24-1 bytes (FRAME_SIZE_ERROR)
        ping-length       a PING of 7 bytes (FRAME_SIZE_ERROR)
        hpack             HEADERS whose block indexes a table entry that does not exist
                          (COMPRESSION_ERROR)
        data0             a DATA frame on stream 0 (PROTOCOL_ERROR)
        rst0              RST_STREAM on stream 0 (PROTOCOL_ERROR)
        data-first        DATA on the request's stream before any HEADERS (PROTOCOL_ERROR)
        no-status         a response head without :status (malformed, RFC 9113 8.1.1)
        bad-status        `:status: 2x0`
        continuation      HEADERS without END_HEADERS followed by DATA (PROTOCOL_ERROR)
        window-overflow   WINDOW_UPDATE on stream 0 taking the window past 2^31-1
                          (FLOW_CONTROL_ERROR)
        garbage           `HTTP/1.1 400 Bad Request` in plain text, read as a frame header
                          announcing 4.7 MB (FRAME_SIZE_ERROR)
"""

import argparse
import asyncio
import hashlib
import json
import os
import signal
import ssl
import struct
import sys
from urllib.parse import parse_qs, urlsplit

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    import h2.settings
    from h2.errors import ErrorCodes
except ImportError as e:  # never a skip: servers.py checks first and names the fix
    sys.stderr.write("h2faultserver.py: the h2 package is missing (%s): run "
                     "scripts/python-venv.sh\n" % e)
    sys.exit(1)

PATTERN_MOD = 251
BLOCK = 65536
_PATTERN = bytes(range(PATTERN_MOD)) * (BLOCK // PATTERN_MOD + 2)

VERBOSE = False


def log(msg):
    if VERBOSE:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()


def pattern(offset, n):
    s = offset % PATTERN_MOD
    return _PATTERN[s:s + n]


def frame(ftype, flags, sid, payload, length=None):
    """Raw frame bytes; `length` overrides the header's length field (a lie, for /bad)."""
    n = len(payload) if length is None else length
    return struct.pack(">I", n)[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def lit(name, value):
    """An HPACK literal header field without indexing, new name, no Huffman: it leaves the
    peer's dynamic table alone, so raw header blocks never desynchronise h2's encoder."""
    n, v = name.encode(), value.encode()
    assert len(n) < 127 and len(v) < 127
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


class TagStats:
    def __init__(self):
        self.requests = 0
        self.inflight = 0
        self.max_inflight = 0
        self.refused = 0
        self.connections = set()


class Server:
    def __init__(self):
        self.conn_serial = 0
        self.tags = {}

    def tag(self, name):
        if name not in self.tags:
            self.tags[name] = TagStats()
        return self.tags[name]


class Stream:
    def __init__(self, sid, headers):
        self.sid = sid
        self.headers = headers
        self.method = headers.get(":method", "")
        self.target = headers.get(":path", "/")
        u = urlsplit(self.target)
        self.path = u.path
        self.q = parse_qs(u.query, keep_blank_values=True)
        self.hasher = hashlib.sha256()
        self.body_length = 0
        self.ended = asyncio.Event()
        self.reset = False
        self.ignored = False
        self.goaway_trigger = False
        self.tagstats = None

    def arg(self, name, default=None):
        v = self.q.get(name)
        return v[0] if v else default

    def int_arg(self, name, default):
        v = self.arg(name)
        return default if v is None or v == "" else int(v)


class Connection:
    def __init__(self, server, reader, writer, opts):
        self.server, self.reader, self.writer, self.opts = server, reader, writer, opts
        server.conn_serial += 1
        self.serial = server.conn_serial
        cfg = h2.config.H2Configuration(client_side=False, header_encoding="utf-8",
                                        validate_inbound_headers=False)
        self.conn = h2.connection.H2Connection(config=cfg)
        # h2 treats a stream over its own advertised limit as a connection error, but RFC 9113
        # 5.1.2 makes it a stream error, and a client may legitimately open more streams than
        # the limit before our SETTINGS reach it. So h2 gets a limit no test reaches, the real
        # one goes out in a raw SETTINGS frame right behind h2's, and this server enforces it
        # itself: an excess stream gets RST_STREAM(REFUSED_STREAM), which the client retries.
        self.max_streams = opts.get("max_streams", 128)
        self.conn.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100000,
        })
        self.streams = {}
        self.window = asyncio.Event()
        self.opened = 0          # streams opened on this connection
        self.goaway_count = 0    # /goaway streams seen on this connection
        self.goaway_last = None  # last-stream-id once a GOAWAY went out
        self.active = set()      # streams being answered
        self.next_push = 2
        self.broken = False      # raw malformed bytes went out: stop speaking HTTP/2
        self.closed = False

    def flush(self):
        data = self.conn.data_to_send()
        if data and not self.closed:
            self.writer.write(data)

    def raw(self, data):
        self.flush()
        if not self.closed:
            self.writer.write(data)

    async def run(self):
        self.conn.initiate_connection()
        self.raw(frame(4, 0, 0, struct.pack(">HI", 0x3, self.max_streams)))
        try:
            while True:
                data = await self.reader.read(65536)
                if not data:
                    break
                if self.broken:
                    continue  # after malformed output: read (and drop) until the client closes
                try:
                    events = self.conn.receive_data(data)
                except h2.exceptions.ProtocolError as e:
                    log("conn %d: protocol error from client: %r" % (self.serial, e))
                    self.flush()
                    break
                for ev in events:
                    self.on_event(ev)
                self.flush()
                await self.writer.drain()
        except (ConnectionError, OSError, ssl.SSLError):
            pass
        finally:
            self.close()

    def close(self):
        if self.closed:
            return
        self.closed = True
        for st in self.streams.values():
            st.reset = True
            st.ended.set()
        self.window.set()
        try:
            self.writer.close()
        except Exception:
            pass

    def on_event(self, ev):
        if isinstance(ev, h2.events.RequestReceived):
            headers = {}
            for k, v in ev.headers:
                headers[k] = v
            st = Stream(ev.stream_id, headers)
            st.header_list = list(ev.headers)
            self.streams[ev.stream_id] = st
            self.opened += 1
            if self.goaway_last is not None and ev.stream_id > self.goaway_last:
                st.ignored = True  # after our GOAWAY: never processed
                log("conn %d: stream %d ignored (after GOAWAY)" % (self.serial, ev.stream_id))
                return
            log("conn %d stream %d: %s %s" % (self.serial, ev.stream_id, st.method, st.target))
            if st.path == "/goaway":  # counted in arrival order, decided at once
                self.goaway_count += 1
                if self.goaway_count == st.int_arg("after", 1):
                    self.goaway_last = ev.stream_id
                    st.goaway_trigger = True
            tag = st.arg("tag")
            if tag is not None and st.path != "/stats":
                ts = self.server.tag(tag)
                ts.requests += 1
                ts.connections.add(self.serial)
                st.tagstats = ts
                if len(self.active) < self.max_streams:
                    ts.inflight += 1
                    ts.max_inflight = max(ts.max_inflight, ts.inflight)
                else:
                    ts.inflight += 1  # undone with the refusal below
            if len(self.active) >= self.max_streams:
                log("conn %d: stream %d refused (%d streams open)"
                    % (self.serial, ev.stream_id, len(self.active)))
                if st.tagstats is not None:
                    st.tagstats.inflight -= 1
                    st.tagstats.refused += 1
                self.conn.reset_stream(ev.stream_id, ErrorCodes.REFUSED_STREAM)
                return
            self.active.add(ev.stream_id)
            asyncio.ensure_future(self.serve(st))
        elif isinstance(ev, h2.events.DataReceived):
            st = self.streams.get(ev.stream_id)
            if st is not None:
                st.hasher.update(ev.data)
                st.body_length += len(ev.data)
            try:  # the body is consumed at once: keep the client's window open
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            except h2.exceptions.StreamClosedError:
                pass
        elif isinstance(ev, h2.events.StreamEnded):
            st = self.streams.get(ev.stream_id)
            if st is not None:
                st.ended.set()
        elif isinstance(ev, h2.events.StreamReset):
            st = self.streams.get(ev.stream_id)
            if st is not None:
                st.reset = True
                st.ended.set()
            self.window.set()
        elif isinstance(ev, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            self.window.set()
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.close()

    # ---- answering ----

    def head(self, st, status=200, extra=(), length=None):
        h = [(":status", str(status)), ("x-connection", str(self.serial)),
             ("x-connection-requests", str(self.opened)), ("x-stream-id", str(st.sid))]
        if length is not None:
            h.append(("content-length", str(length)))
        h.extend(extra)
        return h

    async def send_data(self, st, total, offset=0, end=True, data=None):
        """Sends `total` pattern bytes (or `data`) within the flow-control windows."""
        if data is not None:
            total = len(data)
        sent = 0
        while sent < total or (total == 0 and end):
            if st.reset or self.closed:
                return False
            try:
                win = self.conn.local_flow_control_window(st.sid)
            except h2.exceptions.StreamClosedError:
                return False
            n = min(win, self.conn.max_outbound_frame_size, total - sent, BLOCK)
            if n <= 0 and total > 0:
                self.window.clear()
                await self.window.wait()
                continue
            chunk = data[sent:sent + n] if data is not None else pattern(offset + sent, n)
            sent += n
            try:
                self.conn.send_data(st.sid, chunk, end_stream=end and sent >= total)
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
                return False
            self.flush()
            try:
                await self.writer.drain()
            except (ConnectionError, OSError):
                return False
            if total == 0:
                break
        return True

    async def serve(self, st):
        try:
            await self.answer(st)
        except Exception as e:  # a bug here must show, not hang the client silently
            log("conn %d stream %d: %r" % (self.serial, st.sid, e))
            if not self.closed and not self.broken:
                try:
                    self.conn.reset_stream(st.sid, ErrorCodes.INTERNAL_ERROR)
                    self.flush()
                except h2.exceptions.ProtocolError:
                    pass
        finally:
            if st.tagstats is not None:
                st.tagstats.inflight -= 1
            self.active.discard(st.sid)
            if self.goaway_last is not None and not self.active and not self.closed:
                self.flush()
                try:
                    await self.writer.drain()
                except (ConnectionError, OSError):
                    pass
                self.close()

    async def answer(self, st):
        p = st.path
        if p != "/stats":
            hold = st.int_arg("hold", 0)
            if hold:
                await asyncio.sleep(hold / 1000.0)
        if p == "/goaway":
            if st.goaway_trigger:
                log("conn %d: GOAWAY last-stream-id %d" % (self.serial, st.sid))
                self.raw(frame(7, 0, 0, struct.pack(">II", st.sid, 0)))
            p = "/ok"
        if p in ("/ok", "/push"):
            size = st.int_arg("size", 16)
            if p == "/push":
                block = (b"\x82" + b"\x87" + b"\x84"  # GET, https, /
                         + b"\x01" + bytes([len(b"localhost")]) + b"localhost")
                promised = self.next_push
                self.next_push += 2
                self.raw(frame(5, 0x4, st.sid, struct.pack(">I", promised) + block))
            self.conn.send_headers(st.sid, self.head(st, length=size), end_stream=size == 0)
            self.flush()
            if size:
                await self.send_data(st, size)
        elif p == "/echo":
            await st.ended.wait()
            if st.reset:
                return
            body = json.dumps({
                "method": st.method, "path": st.target,
                "headers": [[k, v] for k, v in st.header_list],
                "body_length": st.body_length, "body_sha256": st.hasher.hexdigest(),
                "connection": self.serial, "stream": st.sid,
            }, indent=0).encode() + b"\n"
            self.conn.send_headers(st.sid, self.head(st, length=len(body), extra=[
                ("content-type", "application/json"),
                ("x-echo-body-length", str(st.body_length)),
                ("x-echo-body-sha256", st.hasher.hexdigest())]))
            self.flush()
            await self.send_data(st, 0, data=body)
        elif p == "/stats":
            tag = st.arg("tag", "")
            ts = self.server.tags.get(tag) or TagStats()
            body = json.dumps({"requests": ts.requests, "inflight": ts.inflight,
                               "max_inflight": ts.max_inflight, "refused": ts.refused,
                               "connections": len(ts.connections)}).encode() + b"\n"
            if st.arg("reset") == "1":
                self.server.tags.pop(tag, None)
            self.conn.send_headers(st.sid, self.head(st, length=len(body), extra=[
                ("content-type", "application/json")]))
            self.flush()
            await self.send_data(st, 0, data=body)
        elif p == "/rst":
            after = st.int_arg("after", 0)
            if st.arg("head", "1") == "1":
                self.conn.send_headers(st.sid, self.head(st, length=after + 1000))
                self.flush()
                if after:
                    await self.send_data(st, after, end=False)
            if not st.reset and not self.closed:
                self.conn.reset_stream(st.sid, st.int_arg("code", 2))
                self.flush()
        elif p == "/stall":
            size = st.int_arg("size", 1000000)
            after = st.int_arg("after", 1000)
            self.conn.send_headers(st.sid, self.head(st, length=size))
            self.flush()
            if after:
                await self.send_data(st, after, end=False)
            await st.ended.wait()  # the request body's end, then the client's RST_STREAM
            while not st.reset and not self.closed:
                await asyncio.sleep(0.05)
        elif p == "/headers":
            count, size = st.int_arg("count", 10), st.int_arg("size", 10)
            extra = [("x-h-%d" % i, ("v%d-" % i + "x" * size)[:size]) for i in range(count)]
            self.conn.send_headers(st.sid, self.head(st, length=2, extra=extra))
            self.flush()
            await self.send_data(st, 0, data=b"ok")
        elif p == "/bad":
            self.bad(st, st.arg("kind", ""))
        else:
            body = b"not found\n"
            self.conn.send_headers(st.sid, self.head(st, 404, length=len(body)))
            self.flush()
            await self.send_data(st, 0, data=body)
        self.flush()

    def bad(self, st, kind):
        sid = st.sid
        frames = {
            "frame-size": lambda: frame(0, 0, sid, b"x" * 64, length=(1 << 24) - 1),
            "ping-length": lambda: frame(6, 0, 0, b"1234567"),
            "hpack": lambda: frame(1, 0x5, sid, b"\xff\xff\xff\x0f"),
            "data0": lambda: frame(0, 0, 0, b"hello"),
            "rst0": lambda: frame(3, 0, 0, struct.pack(">I", 1)),
            "data-first": lambda: frame(0, 0, sid, b"hello"),
            "no-status": lambda: frame(1, 0x5, sid, lit("x-a", "b")),
            "bad-status": lambda: frame(1, 0x5, sid, b"\x08\x032x0"),
            "continuation": lambda: frame(1, 0, sid, b"\x88") + frame(0, 1, sid, b"x"),
            "window-overflow": lambda: frame(8, 0, 0, struct.pack(">I", 0x7fffffff)),
            "garbage": lambda: b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
        }
        if kind not in frames:
            body = b"unknown kind\n"
            self.conn.send_headers(sid, self.head(st, 400, length=len(body)))
            self.conn.send_data(sid, body, end_stream=True)
            return
        log("conn %d stream %d: malformed output %s" % (self.serial, sid, kind))
        self.raw(frames[kind]())
        self.broken = True


def parse_listen(spec):
    key, _, optstr = spec.partition(":")
    opts = {"tls": False}
    for o in filter(None, optstr.split(",")):
        if o == "h2c":
            opts["tls"] = False
        elif o == "tls":
            opts["tls"] = True
        elif o.startswith("max_streams="):
            opts["max_streams"] = int(o.split("=", 1)[1])
        else:
            raise SystemExit("h2faultserver.py: unknown listener option %r in %r" % (o, spec))
    if not key:
        raise SystemExit("h2faultserver.py: --listen needs KEY:OPTIONS")
    return key, opts


async def main_async(args):
    server = Server()
    tls_ctx = None
    listeners = [parse_listen(s) for s in args.listen]
    if any(o["tls"] for _, o in listeners):
        if not (args.tls_cert and args.tls_key):
            raise SystemExit("h2faultserver.py: a tls listener needs --tls-cert and --tls-key")
        tls_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls_ctx.load_cert_chain(args.tls_cert, args.tls_key)
        tls_ctx.set_alpn_protocols(["h2"])
    servers, ports = [], []
    for key, opts in listeners:
        def handler(reader, writer, opts=opts):
            return Connection(server, reader, writer, opts).run()
        srv = await asyncio.start_server(handler, args.host, 0,
                                         ssl=tls_ctx if opts["tls"] else None)
        servers.append(srv)
        ports.append((key, srv.sockets[0].getsockname()[1]))
    if args.ports_file:
        tmp = args.ports_file + ".tmp%d" % os.getpid()
        with open(tmp, "w") as f:
            for key, port in ports:
                f.write("%s=%d\n" % (key, port))
        os.replace(tmp, args.ports_file)
    for key, port in ports:
        sys.stdout.write("listening on %s:%d (%s)\n" % (args.host, port, key))
    sys.stdout.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for srv in servers:
        srv.close()


def main():
    global VERBOSE
    ap = argparse.ArgumentParser(description="Scriptable misbehaving HTTP/2 server for tests.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--listen", action="append", required=True,
                    help="KEY:OPTIONS, e.g. H2FAULT_PORT:h2c or X:tls,max_streams=2")
    ap.add_argument("--ports-file", help="write KEY=PORT lines here once all are bound")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    VERBOSE = args.verbose
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
