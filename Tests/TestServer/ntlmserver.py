#!/usr/bin/env python3
"""An NTLM acceptor for Tern's tests: a keep-alive HTTP/1.1 server (or forward proxy) that
authenticates each connection with NTLM, checking the client's AUTHENTICATE message with
pyspnego's NTLM acceptor against the users of $NTLM_USER_FILE (lines "DOMAIN:USER:PASSWORD";
an empty DOMAIN is a user named without one).

    ntlmserver.py --port 0 --port-file F [--proxy]

Origin mode: a request on a connection not yet authenticated gets 401 with
"WWW-Authenticate: NTLM" (a bare challenge), an "Authorization: NTLM <NEGOTIATE>" gets 401 with
"WWW-Authenticate: NTLM <CHALLENGE>", an "Authorization: NTLM <AUTHENTICATE>" that checks out
authenticates the connection (every later request on it is served), and one that does not gets
401 with "NTLM authentication failed: ..." in the body. Every 401 keeps the connection open.
A served request's body is one line of facts the tests check:

    ok user=DOMAIN\\user conn=N requests=R negotiate_conn=N authenticate_conn=N method=GET path=/x

conn is this connection's number (counted from 1 by the server), requests how many requests it
has carried, negotiate_conn and authenticate_conn the connections the two NTLM messages came on
(the handshake is on one connection when both equal conn). A request body, if any, is counted
(body_bytes=N), and the body of the NEGOTIATE request (negotiate_body=N). Paths beginning /ntlmv1 send a CHALLENGE without target info (an old server:
NTLMv2 cannot be computed) and accept NTLMv1 responses. Every response of the server itself names its connection: "X-NTLM-Conn: N". Paths beginning /close-after-challenge send the CHALLENGE with
"Connection: close" (the client cannot finish the handshake).

Proxy mode (--proxy): the same with 407 and Proxy-Authenticate/Proxy-Authorization; once the
connection is authenticated, absolute-form requests are forwarded to their origin (plain http)
and the answer relayed with "X-NTLM-Proxy: <facts>" added; CONNECT to a loopback port opens a
tunnel (its 200 carries X-NTLM-Proxy), after the same handshake on CONNECT requests.

Needs pyspnego (scripts/python-venv.sh installs it into build/python-venv).
"""

import argparse
import base64
import http.client
import itertools
import os
import select
import socket
import socketserver
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler

try:
    import spnego
except ImportError:  # servers.py runs this with the venv's python; say what is missing
    sys.exit("ntlmserver.py: the pyspnego package is missing (scripts/python-venv.sh installs it)")

COUNTER = itertools.count(1)
COUNTER_LOCK = threading.Lock()
ENV_LOCK = threading.Lock()


def acceptor(v1):
    """pyspnego's NTLM acceptor; with v1, one that accepts NTLMv1 too (LM_COMPAT_LEVEL 2, read
    when the context is made)."""
    if not v1:
        return spnego.server(protocol="ntlm")
    with ENV_LOCK:
        old = os.environ.get("LM_COMPAT_LEVEL")
        os.environ["LM_COMPAT_LEVEL"] = "2"
        try:
            return spnego.server(protocol="ntlm")
        finally:
            if old is None:
                del os.environ["LM_COMPAT_LEVEL"]
            else:
                os.environ["LM_COMPAT_LEVEL"] = old


def without_target_info(challenge):
    """The CHALLENGE message with no target info (flag and field cleared), as an old server
    sends it: the client cannot compute NTLMv2 then."""
    m = bytearray(challenge)
    flags = int.from_bytes(m[20:24], "little") & ~0x00800000
    m[20:24] = flags.to_bytes(4, "little")
    m[40:44] = b"\0\0\0\0"
    return bytes(m)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    proxy_mode = False

    def setup(self):
        super().setup()
        with COUNTER_LOCK:
            self.conn_id = next(COUNTER)
        self.requests = 0
        self.ctx = None
        self.user = None
        self.negotiate_conn = 0
        self.authenticate_conn = 0
        self.negotiate_body = -1

    def log_message(self, fmt, *args):  # stderr goes to the state dir's log
        sys.stderr.write("conn %d: %s\n" % (self.conn_id, fmt % args))

    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = b""
        while len(data) < n:
            chunk = self.rfile.read(n - len(data))
            if not chunk:
                break
            data += chunk
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        return data

    def _send(self, status, body, headers=(), close=False):
        body = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", "text/plain")
        self.send_header("X-NTLM-Conn", str(self.conn_id))
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def facts(self, body_bytes):
        return ("ok user=%s conn=%d requests=%d negotiate_conn=%d authenticate_conn=%d "
                "method=%s path=%s body_bytes=%d negotiate_body=%d" % (
                    self.user, self.conn_id, self.requests, self.negotiate_conn,
                    self.authenticate_conn, self.command, self.path, body_bytes,
                    self.negotiate_body))

    def handle_any(self):
        self.requests += 1
        body = self._read_body()
        status = 407 if self.proxy_mode else 401
        ask = "Proxy-Authenticate" if self.proxy_mode else "WWW-Authenticate"
        given = self.headers.get("Proxy-Authorization" if self.proxy_mode else "Authorization")
        if self.command == "CONNECT" and not self.proxy_mode:
            self._send(405, "CONNECT is for the proxy\n", close=True)
            return
        if self.user is None:
            token = None
            if given and given[:5].lower() == "ntlm ":
                try:
                    token = base64.b64decode(given[5:].strip(), validate=True)
                except ValueError:
                    token = None
            if token is None:
                self._send(status, "NTLM required\n", [(ask, "NTLM")])
                return
            msg_type = token[8] if len(token) > 8 and token[:8] == b"NTLMSSP\0" else 0
            if msg_type == 1:
                self.negotiate_body = len(body)
                v1 = self.path.startswith("/ntlmv1")
                self.ctx = acceptor(v1)
                self.negotiate_conn = self.conn_id
                try:
                    out = self.ctx.step(token)
                    if v1:
                        out = without_target_info(out)
                except Exception as e:  # noqa: BLE001  a test server says what went wrong
                    self.ctx = None
                    self._send(status, "NTLM negotiate refused: %s\n" % e, [(ask, "NTLM")])
                    return
                close = self.path.startswith("/close-after-challenge")
                self._send(status, "NTLM challenge\n",
                           [(ask, "NTLM " + base64.b64encode(out).decode())], close=close)
                return
            if msg_type != 3 or self.ctx is None:
                self._send(status, "NTLM authentication failed: AUTHENTICATE without a "
                           "NEGOTIATE on this connection\n", [(ask, "NTLM")])
                return
            self.authenticate_conn = self.conn_id
            try:
                self.ctx.step(token)
                if not self.ctx.complete:
                    raise ValueError("the handshake did not complete")
                self.user = self.ctx.client_principal
            except Exception as e:  # noqa: BLE001
                self.ctx = None
                self._send(status, "NTLM authentication failed: %s\n" % e, [(ask, "NTLM")])
                return
        if not self.proxy_mode:
            self._send(200, self.facts(len(body)) + "\n", [("X-NTLM-User", self.user)])
            return
        if self.command == "CONNECT":
            self.tunnel()
            return
        self.forward(body)

    def tunnel(self):
        """CONNECT host:port (loopback only): 200 with the facts in X-NTLM-Proxy, then bytes
        both ways until either side closes."""
        host, _, port = self.path.rpartition(":")
        host = host.strip("[]")
        if host not in ("127.0.0.1", "localhost", "::1") or not port.isdigit():
            self._send(403, "loopback targets only\n", close=True)
            return
        try:
            upstream = socket.create_connection((host, int(port)), timeout=10)
        except OSError as e:
            self._send(502, "connect failed: %s\n" % e, close=True)
            return
        self.send_response(200, "Connection established")
        self.send_header("X-NTLM-Proxy", self.facts(0))
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        client = self.connection
        upstream.settimeout(None)
        client.settimeout(None)
        try:
            while True:
                readable, _, _ = select.select([client, upstream], [], [], 30)
                if not readable:
                    break
                done = False
                for src in readable:
                    dst = upstream if src is client else client
                    data = src.recv(65536)
                    if not data:
                        done = True
                        break
                    dst.sendall(data)
                if done:
                    break
        except OSError:
            pass
        finally:
            upstream.close()

    def forward(self, body):
        u = urllib.parse.urlsplit(self.path)
        if u.scheme != "http" or not u.hostname:
            self._send(400, "absolute http URL expected\n")
            return
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("proxy-authorization", "proxy-connection", "connection",
                                        "content-length", "transfer-encoding")}
        try:
            c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=10)
            c.request(self.command, (u.path or "/") + ("?" + u.query if u.query else ""),
                      body=body if body or self.command in ("POST", "PUT") else None,
                      headers=headers)
            r = c.getresponse()
            data = r.read()
            c.close()
        except OSError as e:
            self._send(502, "forwarding failed: %s\n" % e)
            return
        self.send_response(r.status, r.reason)
        for k, v in r.getheaders():
            if k.lower() not in ("connection", "keep-alive", "transfer-encoding", "content-length"):
                self.send_header(k, v)
        self.send_header("X-NTLM-Proxy", self.facts(len(body)))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_CONNECT = handle_any


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--proxy", action="store_true")
    args = ap.parse_args()
    if not os.environ.get("NTLM_USER_FILE"):
        sys.exit("ntlmserver.py: NTLM_USER_FILE is not set")
    Handler.proxy_mode = args.proxy
    srv = Server(("127.0.0.1", args.port), Handler)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(srv.server_address[1]))
        os.replace(tmp, args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
