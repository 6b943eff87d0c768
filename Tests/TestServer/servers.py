#!/usr/bin/env python3
"""Launcher for the servers Tern's integration tests talk to: a real nginx and faultserver.py
(plain HTTP and TLS).

    servers.py start STATE_DIR    generate fixtures, start both servers detached, write STATE_DIR/env
    servers.py stop STATE_DIR     stop both (by pid), wait; exit 0 even if already gone
    servers.py env STATE_DIR      print STATE_DIR/env
    servers.py status STATE_DIR   exit 0 when both servers are up and accepting, else 1
    servers.py big STATE_DIR      create www/1g.bin (1 GiB) for manual memory measurements

`start` never skips: without nginx, or when a server does not come up within
$TERN_TEST_SERVER_WAIT seconds (default 10), it prints why (with the logs) and exits 1.
The servers run in their own sessions with stdio on files in STATE_DIR, so they outlive the
launcher and never hold the caller's pipes open (ctest waits for those).

Environment: TERN_NGINX=/path/to/nginx overrides the nginx lookup; TERN_TEST_NO_IPV6=1 skips
the [::1] listeners.

TLS: certs.py makes a test CA and server/client certificates in STATE_DIR/certs (cached; made
again when missing) with the `openssl` command; nginx serves TLS on several ports (valid,
expired, not yet valid, wrong host, self-signed, client certificate required) and
faultserver.py adds TLS fault peers (garbage reply, stalled handshake, a Python TLS 1.3 server
requiring a client certificate).

Hops (redirects, authentication, proxies): three more real servers, each an independent
implementation started from a config rendered into STATE_DIR/<name>/ on free loopback ports:
Apache httpd (mod_auth_digest: Digest MD5, qop=auth), lighttpd (mod_auth: Digest SHA-256 and
MD5, Basic) and squid (a forward proxy: one port open, one requiring Basic or Digest proxy
authentication; CONNECT allowed to loopback ports only). nginx adds Basic authentication.
User alice / password wonderland everywhere (bob too, with a password needing URL escapes).
TERN_APACHE, TERN_APACHE_MODULES, TERN_LIGHTTPD, TERN_SQUID, TERN_SQUID_HELPERS override the
lookups; a missing server is an error, never a skip.

NTLM: ntlmserver.py twice, an origin (NTLM_PORT) and a forward proxy (NTLM_PROXY_PORT), each
authenticating connections with pyspnego's NTLM acceptor against STATE_DIR/ntlm/users
(NTLM_DOMAIN\\NTLM_USER / NTLM_PASSWORD, and the same user without a domain). They run on the
Python of build/python-venv (scripts/python-venv.sh installs pyspnego there; TERN_NTLM_PYTHON
overrides it); without pyspnego, `start` fails.

HTTP/2: nginx also listens with `ssl http2` (H2_TLS_PORT: ALPN h2, then http/1.1) and plain
`http2` (H2C_PORT: prior knowledge only); nghttpd (Debian's nghttp2-server, NGHTTPD_PORT, TLS;
TERN_NGHTTPD overrides the lookup) serves the fixtures; h2faultserver.py (the h2 package, on
build/python-venv's Python or TERN_H2_PYTHON) listens on H2FAULT_PORT (h2c), H2FAULT_TLS_PORT
(TLS, ALPN h2) and H2FAULT_STREAMS2_PORT (h2c, SETTINGS_MAX_CONCURRENT_STREAMS 2). Missing
nghttpd or h2 fails `start`.

Files: fileserver.py, the reference server of the signed file transfer (FILE_PORT; its users
and access tokens in FILE_TOKENS as uid=token,...; uploads stored in STATE_DIR/files).

Fixture bytes are reproducible anywhere: a file of S bytes is the first S bytes of the stream
SHAKE-256("tern-fixture-0", 1 MiB) || SHAKE-256("tern-fixture-1", 1 MiB) || ...
so 1k.bin is a prefix of 100m.bin, which is a prefix of 1g.bin. 64k.txt is numbered text lines.
Files of the right size are reused; their SHA-256 is cached in www/.sha256.json.

Stdlib only; Python 3.8+.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import certs  # noqa: E402  (next to this file)

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "nginx.conf.in")
FAULTSERVER = os.path.join(HERE, "faultserver.py")
FILESERVER = os.path.join(HERE, "fileserver.py")
NTLMSERVER = os.path.join(HERE, "ntlmserver.py")
H2FAULTSERVER = os.path.join(HERE, "h2faultserver.py")
# h2faultserver.py's listeners (env key: options, see its --listen): h2c with prior knowledge,
# TLS with ALPN h2, and h2c advertising SETTINGS_MAX_CONCURRENT_STREAMS 2.
H2FAULT_LISTENERS = [("H2FAULT_PORT", "h2c"), ("H2FAULT_TLS_PORT", "tls"),
                     ("H2FAULT_STREAMS2_PORT", "h2c,max_streams=2")]
# The NTLM servers' user (ntlmserver.py): DOMAIN\user with this password, or user alone.
NTLM_USER, NTLM_PASSWORD, NTLM_DOMAIN = "alice", "wonderland-ntlm", "TERNDOM"
# The reference file server's users (uid=access token), also written to the env file.
# 321 is the process test's own (FileTransferProcessTests), so that no other test running at
# the same time moves its upload count.
FILE_TOKENS = "123=token,456=t0ken-456,789=tok789,321=tok321"

MIB = 1 << 20
FIXTURES = [  # (file name, size, env key for its SHA-256)
    ("empty.bin", 0, "SHA_EMPTY"),
    ("1k.bin", 1024, "SHA_1K"),
    ("64k.txt", 65536, "SHA_64K"),
    ("100m.bin", 100 * MIB, "SHA_100M"),
]
BIG = ("1g.bin", 1024 * MIB, "SHA_1G")

# nginx listeners: env key -> (template placeholder stem, TLS certificate name or None).
# The template uses @<stem>@ for the port and @LISTEN6_<stem>@ for the [::1] listen line.
NGINX_PORTS = [
    ("NGINX_PORT", "PORT", None),
    ("NGINX_SHORT_PORT", "SHORT_PORT", None),
    ("TLS_PORT", "TLS_PORT", "server"),
    ("TLS12_PORT", "TLS12_PORT", "server"),
    ("TLS_EXPIRED_PORT", "TLS_EXPIRED_PORT", "expired"),
    ("TLS_NOTYET_PORT", "TLS_NOTYET_PORT", "notyet"),
    ("TLS_WRONGHOST_PORT", "TLS_WRONGHOST_PORT", "wronghost"),
    ("TLS_SELFSIGNED_PORT", "TLS_SELFSIGNED_PORT", "selfsigned"),
    ("TLS_CLIENTCERT_PORT", "TLS_CLIENTCERT_PORT", "server"),
    ("H2_TLS_PORT", "H2_TLS_PORT", "server"),  # listen ... ssl http2 (ALPN h2, http/1.1)
    ("H2C_PORT", "H2C_PORT", None),            # listen ... http2: h2c, prior knowledge only
]
# nginx listeners that speak HTTP/2: their [::1] lines carry `http2`; H2C_PORT answers no
# HTTP/1.x, so its readiness probe speaks HTTP/2 (h2_get).
NGINX_H2_KEYS = {"H2_TLS_PORT", "H2C_PORT"}
FAULT_TLS_KEYS = ["TLS_GARBAGE_PORT", "TLS_STALL_PORT", "TLS_REQCERT_PORT", "SOCKS_FAULT_PORT"]

# Credentials and realms of the authentication servers (also written to the env file).
AUTH_USERS = [("alice", "wonderland"), ("bob", "p@ss:w0rd%")]
REALMS = {
    "BASIC_REALM": "tern-basic",        # nginx auth_basic
    "APACHE_REALM": "tern-apache",      # Apache mod_auth_digest
    "LIGHTTPD_REALM": "tern-lighttpd",  # lighttpd mod_auth
    "SQUID_REALM": "tern-squid",        # squid proxy_auth (Basic and Digest)
}
APACHE_MODULES = ["mpm_event", "authn_core", "authn_file", "authz_core", "authz_user",
                  "auth_digest", "auth_basic", "alias", "mime", "proxy", "proxy_http"]


def die(msg, *logs):
    sys.stderr.write("servers.py: error: %s\n" % msg)
    for path in logs:
        try:
            with open(path, "rb") as f:
                text = f.read()[-8000:].decode("utf-8", "replace")
        except OSError:
            continue
        if not text.strip():
            continue
        sys.stderr.write("---- %s ----\n%s%s" % (path, text, "" if text.endswith("\n") else "\n"))
    sys.stderr.flush()
    sys.exit(1)


# ---- fixtures ------------------------------------------------------------------------------

def _binary_blocks(size):
    i = 0
    while size > 0:
        n = min(size, MIB)
        yield hashlib.shake_256(b"tern-fixture-%d" % i).digest(MIB)[:n]
        size -= n
        i += 1


def _text_bytes(size):
    out = bytearray()
    i = 0
    while len(out) < size:
        out += b"%06d the quick brown fox jumps over the lazy dog 0123456789 ABCDEFGHIJKLM\n" % i
        i += 1
    del out[size:]
    if size:
        out[-1:] = b"\n"
    return bytes(out)


def ensure_fixture(www, name, size, cache):
    """Creates www/name (size bytes) unless present with that size; returns its SHA-256 hex."""
    path = os.path.join(www, name)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    if st is None or st.st_size != size:
        tmp = path + ".tmp%d" % os.getpid()
        h = hashlib.sha256()
        with open(tmp, "wb") as f:
            blocks = [_text_bytes(size)] if name.endswith(".txt") else _binary_blocks(size)
            for block in blocks:
                f.write(block)
                h.update(block)
        os.replace(tmp, path)  # atomic: a right-sized file is always a complete one
        st = os.stat(path)
        cache[name] = [st.st_size, st.st_mtime_ns, h.hexdigest()]
        return h.hexdigest()
    entry = cache.get(name)
    if entry and entry[0] == st.st_size and entry[1] == st.st_mtime_ns:
        return entry[2]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(4 * MIB), b""):
            h.update(block)
    cache[name] = [st.st_size, st.st_mtime_ns, h.hexdigest()]
    return h.hexdigest()


def ensure_fixtures(www, fixtures):
    cache_path = os.path.join(www, ".sha256.json")
    try:
        with open(cache_path) as f:
            cache = json.load(f)
    except (OSError, ValueError):
        cache = {}
    shas = {key: ensure_fixture(www, name, size, cache) for name, size, key in fixtures}
    tmp = cache_path + ".tmp%d" % os.getpid()
    with open(tmp, "w") as f:
        json.dump(cache, f, indent=1)
    os.replace(tmp, cache_path)
    return shas


# ---- processes -----------------------------------------------------------------------------

def find_nginx():
    forced = os.environ.get("TERN_NGINX")
    if forced:
        if os.path.isfile(forced) and os.access(forced, os.X_OK):
            return forced
        die("TERN_NGINX=%s is not an executable file" % forced)
    cands = []
    found = shutil.which("nginx")
    if found:
        cands.append(found)
    cands += ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/bin/nginx",
              "/opt/homebrew/bin/nginx", "/usr/local/nginx/sbin/nginx"]
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    die("nginx not found (looked in PATH and at %s). The integration tests need a real "
        "nginx: install it (Debian/Ubuntu: apt-get install nginx-light; macOS: brew install "
        "nginx) or set TERN_NGINX." % ", ".join(cands[-5:]))


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie nobody reaps (e.g. an init that does not wait) counts as gone
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] != b"Z"
    except (OSError, ValueError):
        return True


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        pass
    try:
        return subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True,
                              text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def ours(pid, state):
    """True when pid still runs one of our servers for this state dir (guards against reuse)."""
    if not alive(pid):
        return False
    cl = cmdline(pid)
    return cl is None or cl == "" or state in cl


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def stop_pids(pids, wait_s=5.0):
    """SIGTERM each (nginx: fast shutdown; master stops its workers), wait, then SIGKILL the
    process group (both servers are session leaders, so their group is exactly theirs)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.02)
    for pid in pids:
        if alive(pid) or group_alive(pid):  # master gone but a worker left behind
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.02)


def read_env(state):
    return read_env_file(os.path.join(state, "env"))


def read_env_file(path):
    env = {}
    try:
        with open(path) as f:
            for line in f:
                k, sep, v = line.rstrip("\n").partition("=")
                if sep:
                    env[k] = v
    except OSError:
        pass
    return env


def read_pidfile(path):
    try:
        with open(path) as f:
            return int(f.read().strip() or "0") or None
    except (OSError, ValueError):
        return None


def recorded_pids(state):
    env = read_env(state)
    pids = set()
    for v in [env.get(k) for k in ("NGINX_PID", "FAULT_PID", "APACHE_PID", "LIGHTTPD_PID",
                                   "SQUID_PID", "FILE_PID", "SOCKS_PID",
                                   "SOCKS_AUTH_PID", "NTLM_PID", "NTLM_PROXY_PID",
                                   "NGHTTPD_PID", "H2FAULT_PID")] + [
            read_pidfile(os.path.join(state, f)) for f in (
                "nginx.pid", "fault.pid", "file.pid", "ntlm.pid", "ntlm-proxy.pid", "h2fault.pid",
                "nghttpd/launched.pid", "apache/httpd.pid", "lighttpd/lighttpd.pid",
                "squid/squid.pid", "squid/launched.pid")]:
        try:
            if v and int(v) > 1:
                pids.add(int(v))
        except ValueError:
            pass
    return sorted(pids)


def cmd_stop(state):
    state = os.path.abspath(state)
    pids = [p for p in recorded_pids(state) if ours(p, state)]
    # squid takes 3 s over a clean shutdown whatever shutdown_lifetime says, and holds nothing
    # worth saving here (no cache): SIGKILL it; its helpers exit when their pipes close.
    env = read_env(state)
    squids = {read_pidfile(os.path.join(state, f)) for f in ("squid/squid.pid",
                                                            "squid/launched.pid")}
    if env.get("SQUID_PID", "").isdigit():
        squids.add(int(env["SQUID_PID"]))
    for pid in pids:
        if pid in squids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    if pids:
        stop_pids(pids)
    remove_squid_shm(state)
    left = [p for p in pids if alive(p)]
    for name in ("env", "fault.pid", "fault.port", "fault.port2", "fault.tlsports",
                 "file.pid", "file.port", "ntlm.pid", "ntlm.port", "ntlm-proxy.pid",
                 "ntlm-proxy.port", "h2fault.pid", "h2fault.ports", "nghttpd/launched.pid",
                 "squid/squid.pid", "squid/launched.pid"):
        try:
            os.unlink(os.path.join(state, name))
        except OSError:
            pass
    if left:
        die("processes still alive after SIGKILL: %s" % left)
    return 0


# ---- start ---------------------------------------------------------------------------------

def ipv6_loopback():
    if os.environ.get("TERN_TEST_NO_IPV6") or not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def pick_port(ipv6, avoid=()):
    """A port free on 127.0.0.1 (and on [::1] when ipv6). Racy by nature: start retries."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s4:
            s4.bind(("127.0.0.1", 0))
            port = s4.getsockname()[1]
            if port in avoid:
                continue
            if not ipv6:
                return port
            try:
                with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s6:
                    s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    s6.bind(("::1", port))
                    return port
            except OSError:
                continue
    die("could not find a free port")


def can_connect(host, port, family=socket.AF_INET):
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            s.connect((host, port))
        return True
    except OSError:
        return False


def http_get(host, port, path, family=socket.AF_INET, tls=None):
    """The body of a 200 answer to an HTTP/1.0 GET, or None. tls: an ssl.SSLContext to speak
    https with (SNI "localhost")."""
    try:
        with socket.socket(family, socket.SOCK_STREAM) as raw:
            raw.settimeout(1.0)
            raw.connect((host, port))
            s = tls.wrap_socket(raw, server_hostname="localhost") if tls else raw
            s.sendall(b"GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n" % path.encode())
            data = b""
            while len(data) < 65536:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:  # ssl.SSLError included
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    return body if head.startswith(b"HTTP/1.1 200 ") else None


def is_our_nginx(host, port, token, family=socket.AF_INET, tls=None, h2=False):
    """GET /__tern_ready answers with this start's token: the listener is our nginx, not a
    stranger that grabbed the port while nginx was still retrying its bind(). h2: ask over
    HTTP/2 (prior knowledge, or ALPN h2 with tls)."""
    if h2:
        return h2_get(host, port, "/__tern_ready", family, tls) == token.encode()
    return http_get(host, port, "/__tern_ready", family, tls) == token.encode()


def h2_get(host, port, path, family=socket.AF_INET, tls=None, timeout=1.0):
    """The body of a 200 answer to an HTTP/2 GET (stream 1), or None: h2c with prior knowledge,
    or with tls (true) over TLS with ALPN "h2", SNI "localhost", no verification. Stdlib only, just enough HTTP/2
    for the readiness probes of nginx's h2 ports and nghttpd: the request's header block uses
    static-table names and literal values (no dynamic table, no Huffman), and the answer's
    :status is the first header field, which every server here sends as a static-table entry
    (0x88 is ":status: 200")."""
    import struct

    def frame(ftype, flags, sid, payload):
        return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
            struct.pack(">I", sid) + payload

    def lit(index, value):  # literal header field without indexing, indexed name
        v = value.encode()
        assert index < 15 and len(v) < 127
        return bytes([index, len(v)]) + v

    block = (b"\x82" + (b"\x87" if tls else b"\x86") + lit(4, path)  # GET, scheme, :path
             + lit(1, "localhost:%d" % port))                         # :authority
    try:
        with socket.socket(family, socket.SOCK_STREAM) as raw:
            raw.settimeout(timeout)
            raw.connect((host, port))
            if tls:
                import ssl
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # not the caller's: ALPN h2 here
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                ctx.set_alpn_protocols(["h2"])
                s = ctx.wrap_socket(raw, server_hostname="localhost")
                if s.selected_alpn_protocol() != "h2":
                    return None
            else:
                s = raw
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"")
                      + frame(1, 0x5, 1, block))  # SETTINGS; HEADERS END_STREAM|END_HEADERS
            data, body, status_ok = b"", b"", None
            while True:
                while len(data) >= 9 and len(data) >= 9 + (int.from_bytes(data[:3], "big")):
                    n = int.from_bytes(data[:3], "big")
                    ftype, flags = data[3], data[4]
                    sid = int.from_bytes(data[5:9], "big") & 0x7fffffff
                    payload, data = data[9:9 + n], data[9 + n:]
                    if ftype == 4 and not flags & 1:  # the server's SETTINGS: acknowledge
                        s.sendall(frame(4, 1, 0, b""))
                    elif ftype == 7:  # GOAWAY
                        return None
                    elif sid == 1 and ftype == 1:  # HEADERS (no padding/priority from these)
                        if flags & 0x8 or flags & 0x20:
                            return None
                        status_ok = payload[:1] == b"\x88"
                        if flags & 1:
                            return body if status_ok else None
                    elif sid == 1 and ftype == 0:  # DATA
                        body += payload
                        if flags & 1:
                            return body if status_ok else None
                    elif sid == 1 and ftype == 3:  # RST_STREAM
                        return None
                chunk = s.recv(65536)
                if not chunk:
                    return None
                data += chunk
    except OSError:  # ssl.SSLError included
        return None


def probe_tls_context(paths):
    """A client context for the readiness probes: no verification (the probes also reach the
    expired, wrong-host and self-signed servers), the test client certificate presented."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(paths["client.pem"], paths["client.key"])
    return ctx


def render_conf(state, www, ports, ipv6, token, certdir, fault_port, htpasswd):
    """ports: env key -> port for every NGINX_PORTS entry."""
    for p in (state, www, certdir):
        if re.search(r'["\\$\n;{}]', p):
            die("state dir path %r contains characters nginx.conf cannot carry" % p)
    if os.geteuid() == 0:
        import grp
        import pwd
        user = "user %s %s;" % (pwd.getpwuid(os.geteuid()).pw_name, grp.getgrgid(os.getegid()).gr_name)
    else:
        user = "# (not root: no user directive)"
    subs = {
        "@USER_DIRECTIVE@": user,
        "@STATE@": state,
        "@WWW@": www,
        "@CERTS@": certdir,
        "@TOKEN@": token,
        "@FAULT_PORT@": str(fault_port),
        "@HTPASSWD@": htpasswd,
    }
    for key, stem, cert in NGINX_PORTS:
        port = ports[key]
        subs["@%s@" % stem] = str(port)
        six = "LISTEN6" if stem == "PORT" else "LISTEN6_SHORT" if stem == "SHORT_PORT" \
            else "LISTEN6_" + stem
        flags = (" ssl" if cert else "") + (" http2" if key in NGINX_H2_KEYS else "")
        subs["@%s@" % six] = ("listen [::1]:%d%s default_server;" % (port, flags)
                              if ipv6 else "# no IPv6 loopback")
    with open(TEMPLATE) as f:
        text = f.read()
    for k, v in subs.items():
        text = text.replace(k, v)
    left = re.findall(r"@[A-Z0-9_]+@", text)
    if left:
        die("unsubstituted placeholders in %s: %s" % (TEMPLATE, sorted(set(left))))
    path = os.path.join(state, "nginx.conf")
    with open(path, "w") as f:
        f.write(text)
    return path


def h2_python():
    """The Python that has the h2 package for h2faultserver.py: $TERN_H2_PYTHON, else
    build/python-venv's. Never a skip: without it `start` fails and says how to get it."""
    py = os.environ.get("TERN_H2_PYTHON") or os.path.join(HERE, "..", "..", "build",
                                                           "python-venv", "bin", "python")
    if not os.path.isfile(py):
        die("no Python with the h2 package for the HTTP/2 fault server: %s is missing; run "
            "scripts/python-venv.sh (scripts/setup.sh does) or set TERN_H2_PYTHON" % py)
    r = subprocess.run([py, "-c", "import h2.connection"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        die("%s cannot import h2: run scripts/python-venv.sh, or set TERN_H2_PYTHON to a "
            "Python that has it" % py)
    return py


def render_nghttpd(state, www, port, token, certdir):
    """nghttpd (Debian's nghttp2-server), a second HTTP/2 implementation: TLS with ALPN h2 on
    127.0.0.1, serving STATE/nghttpd/htdocs (symlinks to the docroot's fixtures, so their
    SHA_* digests hold, and __tern_ready with this start's token). --echo-upload: a POST or PUT
    gets its own body back."""
    exe = find_exe("TERN_NGHTTPD", ["nghttpd"], ["/usr/sbin", "/usr/local/sbin", "/usr/bin",
                   "/usr/local/bin", "/opt/homebrew/bin"], "nghttpd",
                   "Debian/Ubuntu: apt-get install nghttp2-server")
    d = os.path.join(state, "nghttpd", "htdocs")
    os.makedirs(d, exist_ok=True)
    for name, _, _ in FIXTURES:
        link = os.path.join(d, name)
        if os.path.islink(link) or os.path.exists(link):
            os.unlink(link)
        os.symlink(os.path.join(www, name), link)
    write_file(os.path.join(d, "__tern_ready"), token)
    return [exe, "--address=127.0.0.1", "--htdocs=" + d, "--echo-upload",
            "--max-concurrent-streams=128", str(port), os.path.join(certdir, "server.key"),
            os.path.join(certdir, "server.pem")]


def ntlm_python():
    """The Python that has pyspnego: $TERN_NTLM_PYTHON, else build/python-venv's. Never a skip:
    without it the NTLM tests could not run, so `start` fails and says how to get it."""
    py = os.environ.get("TERN_NTLM_PYTHON") or os.path.join(HERE, "..", "..", "build",
                                                             "python-venv", "bin", "python")
    if not os.path.isfile(py):
        die("no Python with pyspnego for the NTLM test server: %s is missing; run "
            "scripts/python-venv.sh (scripts/setup.sh does) or set TERN_NTLM_PYTHON" % py)
    r = subprocess.run([py, "-c", "import spnego"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        die("%s cannot import spnego (pyspnego): run scripts/python-venv.sh, or set "
            "TERN_NTLM_PYTHON to a Python that has it" % py)
    return py


def spawn(argv, out_path, err_path, cwd):
    with open(out_path, "wb") as out, open(err_path, "ab") as err:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd,
                                close_fds=True, start_new_session=True)


def kill_started(*procs):
    for p in procs:
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                p.kill()
            p.wait()


# ---- hop servers: Apache httpd, lighttpd, squid ------------------------------------------------

def find_exe(env_key, names, dirs, what, hint):
    forced = os.environ.get(env_key)
    if forced:
        if os.path.isfile(forced) and os.access(forced, os.X_OK):
            return forced
        die("%s=%s is not an executable file" % (env_key, forced))
    cands = [c for c in (shutil.which(n) for n in names) if c]
    cands += [os.path.join(d, n) for d in dirs for n in names]
    for c in cands:
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    die("%s not found (looked for %s in PATH and %s). The hop tests need it: %s, or set %s."
        % (what, "/".join(names), ", ".join(dirs), hint, env_key))


def find_dir(env_key, cands, probe, what, hint):
    forced = os.environ.get(env_key)
    for d in ([forced] if forced else cands):
        if os.path.isfile(os.path.join(d, probe)):
            return d
    die("%s not found (no %s in %s): %s, or set %s."
        % (what, probe, forced or ", ".join(cands), hint, env_key))


def drop_user(candidates):
    """(user, group) of the first existing candidate, for a server that must not stay root;
    None when we are not root (the server then runs as the current user)."""
    if os.geteuid() != 0:
        return None
    import grp
    import pwd
    for user in candidates:
        try:
            pw = pwd.getpwnam(user)
        except KeyError:
            continue
        return pw.pw_name, grp.getgrgid(pw.pw_gid).gr_name, pw.pw_uid, pw.pw_gid
    die("running as root, but none of the users %s exists to run a server as" % (candidates,))


def check_world_readable(paths, who):
    """Apache and squid drop root for an unprivileged user: what they read must be reachable."""
    for path in paths:
        p = os.path.abspath(path)
        while True:
            st = os.stat(p)
            need = 0o005 if os.path.isdir(p) else 0o004
            if st.st_mode & need != need:
                die("%s runs as an unprivileged user and cannot reach %s: %s has mode %o "
                    "(needs o+%s). Use a state dir under a world-readable path (e.g. /tmp)."
                    % (who, path, p, st.st_mode & 0o777, "rx" if os.path.isdir(p) else "r"))
            parent = os.path.dirname(p)
            if parent == p:
                break
            p = parent


def write_file(path, text, mode=0o644):
    tmp = path + ".tmp%d" % os.getpid()
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def make_auth_files(state):
    """STATE/auth: htpasswd (apr1, for nginx and squid's basic_ncsa_auth), htdigest (Apache),
    plain (user:password, for lighttpd and squid's digest_file_auth). Remade every start."""
    d = os.path.join(state, "auth")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o755)
    try:
        openssl = certs._openssl()
    except certs.CertError as e:
        die(str(e))
    r = subprocess.run([openssl, "passwd", "-apr1"] + [pw for _, pw in AUTH_USERS],
                       capture_output=True, text=True)
    hashes = r.stdout.split()
    if r.returncode != 0 or len(hashes) != len(AUTH_USERS):
        die("openssl passwd -apr1 failed: %s" % r.stderr.strip())
    paths = {k: os.path.join(d, k) for k in ("htpasswd", "htdigest", "plain", "squid-digest")}
    write_file(paths["htpasswd"], "".join("%s:%s\n" % (u, h)
                                          for (u, _), h in zip(AUTH_USERS, hashes)))
    realm = REALMS["APACHE_REALM"]
    write_file(paths["htdigest"], "".join(
        "%s:%s:%s\n" % (u, realm, hashlib.md5(("%s:%s:%s" % (u, realm, pw)).encode()).hexdigest())
        for u, pw in AUTH_USERS))
    write_file(paths["plain"], "".join("%s:%s\n" % (u, pw) for u, pw in AUTH_USERS))
    # digest_file_auth reads "user:password" (or "user:realm:HA1" with -c): alice only, as a
    # password holding ':' would read as the second form.
    write_file(paths["squid-digest"], "%s:%s\n" % AUTH_USERS[0])
    return paths


def render_apache(state, www, port, token, fault_port, auth):
    exe = find_exe("TERN_APACHE", ["apache2", "httpd"], ["/usr/sbin", "/usr/local/sbin",
                   "/usr/local/bin", "/opt/homebrew/bin"], "Apache httpd",
                   "Debian/Ubuntu: apt-get install apache2")
    mods = find_dir("TERN_APACHE_MODULES", ["/usr/lib/apache2/modules", "/usr/lib64/httpd/modules",
                    "/usr/lib/httpd/modules", "/usr/libexec/apache2", "/opt/homebrew/lib/httpd/modules",
                    "/usr/local/lib/httpd/modules"], "mod_auth_digest.so",
                    "Apache's module directory", "Debian/Ubuntu: apt-get install apache2")
    d = os.path.join(state, "apache")
    for sub in ("", "htdocs", "run"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
        os.chmod(os.path.join(d, sub), 0o755)
    write_file(os.path.join(d, "htdocs", "__tern_ready"), token)
    user = drop_user(["www-data", "apache", "daemon", "nobody"])
    if user:
        check_world_readable([os.path.join(www, "1k.bin"), auth["htdigest"],
                              os.path.join(d, "htdocs", "__tern_ready")], "Apache")
    loads = "\n".join('LoadModule %s_module "%s/mod_%s.so"' % (m, mods, m) for m in APACHE_MODULES)
    realm = REALMS["APACHE_REALM"]
    conf = """# Rendered by Tests/TestServer/servers.py: Apache httpd for the hop tests.
# /digest/NAME  the docroot behind Digest (MD5, qop=auth, realm "{realm}")
# /nest/...     faultserver.py behind the same Digest (/nest/apache/echo: what passed)
ServerRoot "{d}"
Listen 127.0.0.1:{port}
{loads}
{user}
ServerName 127.0.0.1
PidFile "{d}/httpd.pid"
DefaultRuntimeDir "{d}/run"
ErrorLog "{d}/error.log"
LogLevel warn
TypesConfig /dev/null
AddType text/plain .txt
StartServers 1
ServerLimit 1
ThreadsPerChild 16
ThreadLimit 16
MaxRequestWorkers 16
MinSpareThreads 1
MaxSpareThreads 16
KeepAliveTimeout 65
MaxKeepAliveRequests 0
DocumentRoot "{d}/htdocs"
<Directory />
  Require all granted
</Directory>
Alias "/digest/" "{www}/"
<Location "/digest/">
  AuthType Digest
  AuthName "{realm}"
  AuthDigestDomain /digest/ /nest/
  AuthDigestProvider file
  AuthUserFile "{htdigest}"
  Require valid-user
</Location>
<Location "/nest/">
  AuthType Digest
  AuthName "{realm}"
  AuthDigestDomain /digest/ /nest/
  AuthDigestProvider file
  AuthUserFile "{htdigest}"
  Require valid-user
  ProxyPass "http://127.0.0.1:{fault}/nest/"
</Location>
""".format(d=d, port=port, loads=loads, realm=realm, www=www, htdigest=auth["htdigest"],
           fault=fault_port,
           user="User %s\nGroup %s" % user[:2] if user else "# (not root: no User/Group)")
    path = os.path.join(d, "httpd.conf")
    write_file(path, conf)
    return [exe, "-f", path, "-DFOREGROUND"]


def render_lighttpd(state, www, port, token, fault_port, auth):
    exe = find_exe("TERN_LIGHTTPD", ["lighttpd"], ["/usr/sbin", "/usr/local/sbin",
                   "/opt/homebrew/bin"], "lighttpd", "Debian/Ubuntu: apt-get install lighttpd")
    d = os.path.join(state, "lighttpd")
    for sub in ("", "htdocs", "tmp"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    write_file(os.path.join(d, "htdocs", "__tern_ready"), token)
    realm = REALMS["LIGHTTPD_REALM"]

    def req(method, alg=None):
        a = ', "algorithm" => "%s"' % alg if alg else ""
        return ('( "method" => "%s"%s, "realm" => "%s", "require" => "valid-user" )'
                % (method, a, realm))
    conf = """# Rendered by Tests/TestServer/servers.py: lighttpd for the hop tests (realm "{realm}").
# /digest/NAME      the docroot behind Digest SHA-256 (qop=auth)
# /digest-md5/NAME  the same behind Digest MD5
# /digest-any/NAME  the same, offering SHA-256 and MD5 (two WWW-Authenticate fields)
# /digest-sha512-256/NAME  the same behind Digest SHA-512-256
# /basic/NAME       the same behind Basic
# /nest/...         faultserver.py behind Digest SHA-256 (/nest/lighttpd/echo: what passed)
server.modules = ( "mod_access", "mod_alias", "mod_auth", "mod_authn_file", "mod_proxy",
                   "mod_staticfile" )
server.bind = "127.0.0.1"
server.port = {port}
server.document-root = "{d}/htdocs"
server.errorlog = "{d}/error.log"
server.pid-file = "{d}/lighttpd.pid"
server.upload-dirs = ( "{d}/tmp" )
server.max-keep-alive-requests = 1000
server.max-keep-alive-idle = 65
mimetype.assign = ( ".txt" => "text/plain", "" => "application/octet-stream" )
alias.url = ( "/digest/" => "{www}/", "/digest-md5/" => "{www}/", "/digest-any/" => "{www}/",
              "/digest-sha512-256/" => "{www}/", "/basic/" => "{www}/" )
auth.backend = "plain"
auth.backend.plain.userfile = "{plain}"
auth.require = (
  "/digest/" => {sha},
  "/digest-md5/" => {md5},
  "/digest-any/" => {any},
  "/digest-sha512-256/" => {sha512},
  "/basic/" => {basic},
  "/nest/" => {sha},
)
$HTTP["url"] =^ "/nest/" {{
  proxy.server = ( "" => ( ( "host" => "127.0.0.1", "port" => {fault} ) ) )
}}
""".format(realm=realm, port=port, d=d, www=www, plain=auth["plain"], fault=fault_port,
           sha=req("digest", "SHA-256"), md5=req("digest", "MD5"),
           any=req("digest", "SHA-256|MD5"), sha512=req("digest", "SHA-512-256"),
           basic=req("basic"))
    path = os.path.join(d, "lighttpd.conf")
    write_file(path, conf)
    return [exe, "-D", "-f", path]


def render_squid(state, ports, token, auth):
    exe = find_exe("TERN_SQUID", ["squid"], ["/usr/sbin", "/usr/local/sbin", "/opt/homebrew/sbin",
                   "/opt/homebrew/bin"], "squid", "Debian/Ubuntu: apt-get install squid")
    helpers = find_dir("TERN_SQUID_HELPERS", ["/usr/lib/squid", "/usr/lib64/squid",
                       "/usr/libexec/squid", "/opt/homebrew/libexec/squid"], "basic_ncsa_auth",
                       "squid's authentication helpers", "Debian/Ubuntu: apt-get install squid")
    d = os.path.join(state, "squid")
    os.makedirs(d, exist_ok=True)
    user = drop_user(["proxy", "squid", "nobody"])
    if user:  # squid will not stay root: it becomes cache_effective_user, which must write here
        check_world_readable([auth["htpasswd"], auth["squid-digest"]], "squid")
        os.chown(d, user[2], user[3])
        for name in os.listdir(d):
            os.chown(os.path.join(d, name), user[2], user[3])
    realm = REALMS["SQUID_REALM"]
    conf = """# Rendered by Tests/TestServer/servers.py: squid, the forward proxy of the hop tests.
# SQUID_PORT       no authentication
# SQUID_AUTH_PORT  407 until Basic or Digest proxy credentials (realm "{realm}") check out
# Requests and CONNECT tunnels go to loopback addresses only, any port; nothing is cached.
http_port 127.0.0.1:{open} name=open
http_port 127.0.0.1:{auth} name=auth
auth_param digest program {helpers}/digest_file_auth {digestfile}
auth_param digest children 4 startup=1 idle=1
auth_param digest realm {realm}
auth_param basic program {helpers}/basic_ncsa_auth {htpasswd}
auth_param basic children 4 startup=1 idle=1
auth_param basic realm {realm}
acl openport myportname open
acl authport myportname auth
acl loopsrc src 127.0.0.0/8
acl loopdst dst 127.0.0.0/8
acl authed proxy_auth REQUIRED
http_access deny !loopsrc
http_access deny !loopdst
http_access allow openport
http_access allow authport authed
http_access deny all
cache deny all
cache_mem 0 MB
access_log stdio:{d}/access.log
cache_log {d}/cache.log
cache_store_log none
pid_filename {d}/squid.pid
coredump_dir {d}
netdb_filename none
pinger_enable off
shutdown_lifetime 0 seconds
icp_port 0
htcp_port 0
client_persistent_connections on
server_persistent_connections on
visible_hostname tern-squid-{token}
{user}
""".format(realm=realm, open=ports["SQUID_PORT"], auth=ports["SQUID_AUTH_PORT"],
           helpers=helpers, digestfile=auth["squid-digest"], htpasswd=auth["htpasswd"], d=d,
           token=token, user="cache_effective_user %s" % user[0] if user
           else "# (not root: runs as the current user)")
    path = os.path.join(d, "squid.conf")
    write_file(path, conf)
    if user:
        os.chown(path, user[2], user[3])
    remove_squid_shm(state)
    return [exe, "-n", squid_service(state), "-N", "-f", path]


SOCKS_USER, SOCKS_PASSWORD = "ternsocks", "socks-wonderland"


def render_dante(state, name, port, auth):
    """Dante (danted), the SOCKS4/SOCKS5 proxy of the SOCKS tests: on loopback, to loopback.
    With auth, SOCKS5 clients must give SOCKS_USER's system password (RFC 1929): Dante checks
    user names against the system's password database, so scripts/setup.sh creates that user
    (without a shell or home) and the server runs as root to read the shadow file."""
    exe = find_exe("TERN_DANTED", ["danted", "sockd"], ["/usr/sbin", "/usr/local/sbin"], "danted",
                   "Debian/Ubuntu: apt-get install dante-server")
    if auth:
        import pwd
        try:
            pwd.getpwnam(SOCKS_USER)
        except KeyError:
            die("the SOCKS tests need the system user %r with password %r (scripts/setup.sh "
                "creates it): Dante checks SOCKS5 passwords against the system's users"
                % (SOCKS_USER, SOCKS_PASSWORD))
        if os.geteuid() != 0:
            die("the authenticating SOCKS server must run as root to check passwords")
    d = os.path.join(state, "dante")
    os.makedirs(d, exist_ok=True)
    user = drop_user(["nobody"])
    conf = """# Rendered by Tests/TestServer/servers.py: Dante, {what}.
logoutput: {d}/{name}.log
internal: 127.0.0.1 port = {port}
external: 127.0.0.1
socksmethod: {method}
clientmethod: none
{users}
client pass {{ from: 127.0.0.0/8 to: 0.0.0.0/0 }}
client block {{ from: 0.0.0.0/0 to: 0.0.0.0/0 }}
socks pass {{
  from: 127.0.0.0/8 to: 127.0.0.0/8
  command: connect
  log: connect
}}
socks block {{ from: 0.0.0.0/0 to: 0.0.0.0/0 }}
""".format(what="SOCKS5 with a user name and password" if auth else "SOCKS4/4A/5 without "
           "authentication", d=d, name=name, port=port,
           method="username" if auth else "none",
           users="user.privileged: root\nuser.unprivileged: %s" % user[0] if user else "")
    path = os.path.join(d, name + ".conf")
    write_file(path, conf)
    return [exe, "-f", path, "-p", os.path.join(d, name + ".pid"), "-N", "1"]


def socks_ready(port, auth):
    """A SOCKS5 greeting offering the one method the server should pick: 0 open, 2 with auth."""
    method = 2 if auth else 0
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(bytes([5, 1, method]))
            return sock.recv(2) == bytes([5, method])
    except OSError:
        return False


def squid_service(state):
    """squid's service name, which also names its shared memory segments (/dev/shm/NAME-*):
    one per state dir, so that squids of several state dirs (or users) never clash."""
    return "tern" + hashlib.sha1(state.encode()).hexdigest()[:12]


def remove_squid_shm(state):
    """A killed squid leaves its segments behind; another user's would block the next start."""
    prefix = squid_service(state) + "-"
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return
    for name in names:
        if name.startswith(prefix):
            try:
                os.unlink(os.path.join("/dev/shm", name))
            except OSError:
                pass


def http_raw(host, port, request, limit=65536):
    """Sends raw request bytes, returns (head, body) of the answer (head as str) or None."""
    try:
        with socket.create_connection((host, port), timeout=1.0) as s:
            s.sendall(request)
            data = b""
            while len(data) < limit:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), body


class HopServer:
    """One of Apache, lighttpd, squid: renders its config on fresh ports, spawns it, probes it,
    and starts it again on other ports when a port was taken meanwhile (up to 3 tries)."""

    def __init__(self, name, keys, render, probe, logs, state, pidfile=None):
        self.name, self.keys, self.render, self.probe = name, keys, render, probe
        self.logs, self.state, self.pidfile = logs, state, pidfile
        self.proc, self.ports, self.attempt, self.up = None, {}, 0, False

    def start(self, avoid):
        self.attempt += 1
        self.ports = {}
        for k in self.keys:
            self.ports[k] = pick_port(False, avoid=tuple(avoid) + tuple(self.ports.values()))
        for log in self.logs:
            try:
                os.unlink(log)
            except OSError:
                pass
        argv = self.render(self.ports)
        out = os.path.join(self.state, "%s.out" % self.name)
        self.argv = argv
        self.proc = spawn(argv, out, out, self.state)
        self.logs = [l for l in self.logs if l != out] + [out]
        if self.pidfile:  # the pid as launched, for stop (the server's own file may lag)
            with open(self.pidfile, "w") as f:
                f.write("%d\n" % self.proc.pid)

    def bind_failed(self):
        for log in self.logs:
            try:
                with open(log, "rb") as f:
                    text = f.read()
            except OSError:
                continue
            if b"Address already in use" in text or b"Cannot bind" in text:
                return True
        return False

    def poll(self, avoid):
        """None while starting, "" once up, else why it failed. Restarts on a port clash."""
        if self.up:
            return ""
        clash = self.bind_failed()
        exited = self.proc.poll() is not None
        if exited or clash:
            if clash and self.attempt < 3:
                sys.stderr.write("servers.py: %s port clash, retrying\n" % self.name)
                kill_started(self.proc)
                self.start(avoid)
                return None
            return ("exited with status %d at start-up (%s)" % (self.proc.returncode,
                                                             " ".join(self.argv))
                    if exited else "could not bind its ports")
        self.up = self.probe(self.ports)
        return "" if self.up else None


def cmd_start(state):
    t0 = time.monotonic()
    state = os.path.abspath(state)
    nginx = find_nginx()
    os.makedirs(state, exist_ok=True)
    if recorded_pids(state):  # left over from a run that never stopped: clear it first
        cmd_stop(state)
    www = os.path.join(state, "www")
    for d in ("www", "uploads", "tmp", "tmp/client_body", "tmp/proxy", "tmp/fastcgi",
              "tmp/uwsgi", "tmp/scgi"):
        os.makedirs(os.path.join(state, d), exist_ok=True)
    for name in ("env", "error.log", "access.log", "nginx.out", "nginx.pid", "fault.log",
                 "file.pid", "file.port", "file.out",
                 "fault.out", "fault.pid", "fault.port", "fault.port2", "fault.tlsports",
                 "apache.out", "lighttpd.out", "squid.out", "squid/launched.pid",
                 # squid refuses to start while its pid file names a live process, and a
                 # killed squid nobody reaped (a zombie) still counts as one.
                 "squid/squid.pid", "apache/httpd.pid", "lighttpd/lighttpd.pid"):
        try:
            os.unlink(os.path.join(state, name))
        except OSError:
            pass

    certdir = os.path.join(state, "certs")
    try:
        cert_paths = certs.ensure(certdir)
    except (certs.CertError, OSError) as e:
        die("could not make the TLS test certificates in %s: %s" % (certdir, e))
    probe_ctx = probe_tls_context(cert_paths)

    wait_s = float(os.environ.get("TERN_TEST_SERVER_WAIT", "10"))
    errlog = os.path.join(state, "error.log")
    nginx_out = os.path.join(state, "nginx.out")
    fault_log = os.path.join(state, "fault.log")
    port_file = os.path.join(state, "fault.port")
    port2_file = os.path.join(state, "fault.port2")
    tls_ports_file = os.path.join(state, "fault.tlsports")

    # faultserver.py first: nginx, Apache and lighttpd proxy to it, so their configs need its
    # port. Python's start-up overlaps with the fixtures and the auth files.
    fault = spawn([sys.executable, FAULTSERVER, "--port", "0", "--port-file", port_file,
                   "--second-port-file", port2_file,
                   "--tls-ports-file", tls_ports_file, "--tls-cert", cert_paths["server.pem"],
                   "--tls-key", cert_paths["server.key"], "--tls-ca", cert_paths["ca.pem"]],
                  os.path.join(state, "fault.out"), fault_log, state)
    with open(os.path.join(state, "fault.pid"), "w") as f:
        f.write("%d\n" % fault.pid)
    # The reference file server of the signed file transfer (fileserver.py).
    file_port_file = os.path.join(state, "file.port")
    file_log = os.path.join(state, "file.log")
    filesrv = spawn([sys.executable, FILESERVER, "--port", "0", "--port-file", file_port_file,
                     "--dir", os.path.join(state, "files"), "--tokens", FILE_TOKENS],
                    os.path.join(state, "file.out"), file_log, state)
    with open(os.path.join(state, "file.pid"), "w") as f:
        f.write("%d\n" % filesrv.pid)

    # The NTLM acceptors (ntlmserver.py, on the venv's Python: pyspnego).
    ntlm_py = ntlm_python()
    os.makedirs(os.path.join(state, "ntlm"), exist_ok=True)
    ntlm_users = os.path.join(state, "ntlm", "users")
    with open(ntlm_users, "w") as f:
        f.write("%s:%s:%s\n:%s:%s\n" % (NTLM_DOMAIN, NTLM_USER, NTLM_PASSWORD, NTLM_USER,
                                        NTLM_PASSWORD))
    ntlm_env = dict(os.environ, NTLM_USER_FILE=ntlm_users)
    ntlm_procs = {}
    for name, extra in (("ntlm", []), ("ntlm-proxy", ["--proxy"])):
        pf = os.path.join(state, name + ".port")
        with open(os.path.join(state, name + ".out"), "wb") as out, \
                open(os.path.join(state, name + ".log"), "ab") as err:
            ntlm_procs[name] = (subprocess.Popen(
                [ntlm_py, NTLMSERVER, "--port", "0", "--port-file", pf] + extra,
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=state, close_fds=True,
                start_new_session=True, env=ntlm_env), pf)
        with open(os.path.join(state, name + ".pid"), "w") as f:
            f.write("%d\n" % ntlm_procs[name][0].pid)

    # The HTTP/2 fault server (h2faultserver.py, on the venv's Python: the h2 package).
    h2fault_ports_file = os.path.join(state, "h2fault.ports")
    h2fault_log = os.path.join(state, "h2fault.log")
    try:
        os.unlink(h2fault_ports_file)
    except OSError:
        pass
    h2fault = spawn([h2_python(), H2FAULTSERVER, "--ports-file", h2fault_ports_file,
                     "--tls-cert", cert_paths["server.pem"], "--tls-key", cert_paths["server.key"]]
                    + [a for k, o in H2FAULT_LISTENERS for a in ("--listen", "%s:%s" % (k, o))],
                    os.path.join(state, "h2fault.out"), h2fault_log, state)
    with open(os.path.join(state, "h2fault.pid"), "w") as f:
        f.write("%d\n" % h2fault.pid)

    shas = ensure_fixtures(www, FIXTURES)
    big = os.path.join(www, BIG[0])
    if os.path.exists(big) and os.path.getsize(big) == BIG[1]:
        shas.update(ensure_fixtures(www, [BIG]))
    ipv6 = ipv6_loopback()
    auth = make_auth_files(state)

    deadline = time.monotonic() + wait_s
    fault_port = None
    while fault_port is None:  # the port file appears once every listener is bound
        fault_port = read_pidfile(port_file)
        if fault_port:
            break
        if fault.poll() is not None:
            die("faultserver.py exited with status %d at start-up" % fault.returncode,
                fault_log, os.path.join(state, "fault.out"))
        if time.monotonic() > deadline:
            kill_started(fault)
            die("faultserver.py wrote no port file within %gs" % wait_s, fault_log)
        time.sleep(0.005)
    fault2_port = read_pidfile(port2_file)

    # Apache, lighttpd and squid boot while nginx does.
    token = os.urandom(12).hex()
    hop_servers = [
        HopServer("apache", ["APACHE_PORT"],
                  lambda p: render_apache(state, www, p["APACHE_PORT"], token, fault_port, auth),
                  lambda p: ready_file(p["APACHE_PORT"], token),
                  [os.path.join(state, "apache", "error.log")], state),
        HopServer("lighttpd", ["LIGHTTPD_PORT"],
                  lambda p: render_lighttpd(state, www, p["LIGHTTPD_PORT"], token, fault_port,
                                            auth),
                  lambda p: ready_file(p["LIGHTTPD_PORT"], token),
                  [os.path.join(state, "lighttpd", "error.log")], state),
        HopServer("squid", ["SQUID_PORT", "SQUID_AUTH_PORT"],
                  lambda p: render_squid(state, p, token, auth),
                  lambda p: squid_ready(p, token, fault_port),
                  [os.path.join(state, "squid", "cache.log")], state,
                  pidfile=os.path.join(state, "squid", "launched.pid")),
        HopServer("dante", ["SOCKS_PORT"],
                  lambda p: render_dante(state, "open", p["SOCKS_PORT"], False),
                  lambda p: socks_ready(p["SOCKS_PORT"], False),
                  [os.path.join(state, "dante", "open.log")], state),
        HopServer("dante-auth", ["SOCKS_AUTH_PORT"],
                  lambda p: render_dante(state, "auth", p["SOCKS_AUTH_PORT"], True),
                  lambda p: socks_ready(p["SOCKS_AUTH_PORT"], True),
                  [os.path.join(state, "dante", "auth.log")], state),
        HopServer("nghttpd", ["NGHTTPD_PORT"],
                  lambda p: render_nghttpd(state, www, p["NGHTTPD_PORT"], token, certdir),
                  lambda p: h2_get("127.0.0.1", p["NGHTTPD_PORT"], "/__tern_ready",
                                   tls=True) == token.encode(),
                  [], state, pidfile=os.path.join(state, "nghttpd", "launched.pid")),
    ]
    taken = {fault_port, fault2_port}
    for hs in hop_servers:
        hs.start(taken)
        taken.update(hs.ports.values())

    def kill_all(*more):
        kill_started(fault, filesrv, h2fault, *[hs.proc for hs in hop_servers],
                     *[proc for proc, _ in ntlm_procs.values()], *more)

    nginx_p = None
    for attempt in range(1, 4):  # a picked port can be taken before nginx binds it: retry
        ports = {}
        for key, _, _ in NGINX_PORTS:
            ports[key] = pick_port(ipv6, avoid=tuple(ports.values()) + tuple(taken))
        port, short_port = ports["NGINX_PORT"], ports["NGINX_SHORT_PORT"]
        conf = render_conf(state, www, ports, ipv6, token, certdir, fault_port,
                           auth["htpasswd"])
        nginx_p = spawn([nginx, "-p", state + "/", "-c", conf, "-e", errlog], nginx_out, nginx_out,
                        state)
        deadline = time.monotonic() + wait_s
        nginx_up = fault_up = False
        while True:
            try:
                with open(errlog, "rb") as f:
                    in_use = b"Address already in use" in f.read()
            except OSError:
                in_use = False
            if in_use and attempt < 3:  # nginx would retry bind() for 2.5 s: don't wait
                kill_started(nginx_p)
                break
            if nginx_p.poll() is not None:
                kill_all()
                die("nginx exited with status %d at start-up (%s -p %s -c %s -e %s)"
                    % (nginx_p.returncode, nginx, state + "/", conf, errlog), errlog, nginx_out)
            if fault.poll() is not None:
                kill_all(nginx_p)
                die("faultserver.py exited with status %d at start-up" % fault.returncode,
                    fault_log, os.path.join(state, "fault.out"))
            if not nginx_up:
                listeners = []
                for key, _, cert in NGINX_PORTS:
                    tls = probe_ctx if cert else None
                    h2 = key in NGINX_H2_KEYS  # proves HTTP/2 works there, not just TCP
                    listeners.append(("127.0.0.1", ports[key], socket.AF_INET, tls, h2))
                    if ipv6:
                        listeners.append(("::1", ports[key], socket.AF_INET6, tls, h2))
                nginx_up = all(is_our_nginx(h, p, token, fam, tls, h2)
                               for h, p, fam, tls, h2 in listeners)
            if not fault_up:
                fault_up = http_get("127.0.0.1", fault_port, "/reset-stats") == b"ok\n"
            hop_states = {}
            for hs in hop_servers:
                hop_states[hs.name] = hs.poll(taken | set(ports.values()))
                taken.update(hs.ports.values())
            failed = [(hs, st) for hs in hop_servers for st in [hop_states[hs.name]] if st]
            if failed:
                hs, why = failed[0]
                kill_all(nginx_p)
                die("%s %s" % (hs.name, why), *hs.logs)
            if nginx_up and fault_up and all(st == "" for st in hop_states.values()):
                break
            if time.monotonic() > deadline:
                kill_all(nginx_p)
                down = [hs for hs in hop_servers if not hs.up]
                die("servers not accepting connections after %gs (nginx up: %s, faultserver "
                    "up: %s, port %s%s)" % (wait_s, nginx_up, fault_up, fault_port,
                                           "".join(", %s not up" % hs.name for hs in down)),
                    errlog, nginx_out, fault_log, *[log for hs in down for log in hs.logs])
            time.sleep(0.01)
        if nginx_p.poll() is None:
            break
        sys.stderr.write("servers.py: nginx port clash, retrying (attempt %d)\n" % attempt)
        try:
            os.unlink(errlog)
        except OSError:
            pass

    file_port = None
    while file_port is None:  # written once it listens; it started long ago
        file_port = read_pidfile(file_port_file)
        if file_port:
            break
        if filesrv.poll() is not None or time.monotonic() > deadline:
            kill_all(nginx_p)
            die("fileserver.py did not start", file_log, os.path.join(state, "file.out"))
        time.sleep(0.005)
    ntlm_ports = {}
    for name, (proc, pf) in ntlm_procs.items():
        while name not in ntlm_ports:
            ntlm_ports[name] = read_pidfile(pf)
            if ntlm_ports[name]:
                break
            del ntlm_ports[name]
            if proc.poll() is not None or time.monotonic() > deadline:
                kill_all(nginx_p)
                die("ntlmserver.py (%s) did not start" % name,
                    os.path.join(state, name + ".log"), os.path.join(state, name + ".out"))
            time.sleep(0.005)
    h2fault_ports = {}
    while True:  # written (atomically) once every listener is bound
        h2fault_ports = read_env_file(h2fault_ports_file)
        if all(k in h2fault_ports for k, _ in H2FAULT_LISTENERS):
            break
        if h2fault.poll() is not None or time.monotonic() > deadline:
            kill_all(nginx_p)
            die("h2faultserver.py did not start", h2fault_log,
                os.path.join(state, "h2fault.out"))
        time.sleep(0.005)
    fault_tls = read_env_file(tls_ports_file)
    missing = [k for k in FAULT_TLS_KEYS if k not in fault_tls]
    if missing:
        kill_all(nginx_p)
        die("faultserver.py did not report %s in %s" % (", ".join(missing), tls_ports_file),
            fault_log)
    hop = {hs.name: hs for hs in hop_servers}
    env = [
        ("STATE", state),
        ("WWW", www),
        ("NGINX_PORT", port),
        ("NGINX_SHORT_PORT", short_port),
        ("NGINX_IPV6", 1 if ipv6 else 0),
        ("FAULT_PORT", fault_port),
        ("NGINX_PID", nginx_p.pid),
        ("FAULT_PID", fault.pid),
    ] + [(key, ports[key]) for key, _, cert in NGINX_PORTS if cert] + [
        ("H2C_PORT", ports["H2C_PORT"]),
    ] + [
        (k, fault_tls[k]) for k in FAULT_TLS_KEYS
    ] + [
        ("CERTS", certdir),
        ("CA_PEM", cert_paths["ca.pem"]),
        ("CA_DIR", cert_paths["cadir"]),
        ("CLIENT_CERT", cert_paths["client.pem"]),
        ("CLIENT_KEY", cert_paths["client.key"]),
        ("CLIENT_KEY_ENC", cert_paths["client-enc.key"]),
        ("CLIENT_KEY_PASSWORD", cert_paths["password"]),
    ] + sorted(shas.items()) + [
        ("FAULT2_PORT", fault2_port),
        ("APACHE_PORT", hop["apache"].ports["APACHE_PORT"]),
        ("APACHE_PID", hop["apache"].proc.pid),
        ("LIGHTTPD_PORT", hop["lighttpd"].ports["LIGHTTPD_PORT"]),
        ("LIGHTTPD_PID", hop["lighttpd"].proc.pid),
        ("SQUID_PORT", hop["squid"].ports["SQUID_PORT"]),
        ("SQUID_AUTH_PORT", hop["squid"].ports["SQUID_AUTH_PORT"]),
        ("SQUID_PID", hop["squid"].proc.pid),
        ("SOCKS_PORT", hop["dante"].ports["SOCKS_PORT"]),
        ("SOCKS_PID", hop["dante"].proc.pid),
        ("SOCKS_AUTH_PORT", hop["dante-auth"].ports["SOCKS_AUTH_PORT"]),
        ("SOCKS_AUTH_PID", hop["dante-auth"].proc.pid),
        ("SOCKS_USER", SOCKS_USER),
        ("SOCKS_PASSWORD", SOCKS_PASSWORD),
        ("FILE_PORT", file_port),
        ("FILE_PID", filesrv.pid),
        ("FILE_TOKENS", FILE_TOKENS),
        ("NTLM_PORT", ntlm_ports["ntlm"]),
        ("NTLM_PID", ntlm_procs["ntlm"][0].pid),
        ("NTLM_PROXY_PORT", ntlm_ports["ntlm-proxy"]),
        ("NTLM_PROXY_PID", ntlm_procs["ntlm-proxy"][0].pid),
        ("NGHTTPD_PORT", hop["nghttpd"].ports["NGHTTPD_PORT"]),
        ("NGHTTPD_PID", hop["nghttpd"].proc.pid),
    ] + [(k, h2fault_ports[k]) for k, _ in H2FAULT_LISTENERS] + [
        ("H2FAULT_PID", h2fault.pid),
        ("NTLM_USER", NTLM_USER),
        ("NTLM_PASSWORD", NTLM_PASSWORD),
        ("NTLM_DOMAIN", NTLM_DOMAIN),
        ("AUTH_USER", AUTH_USERS[0][0]),
        ("AUTH_PASSWORD", AUTH_USERS[0][1]),
        ("AUTH_USER2", AUTH_USERS[1][0]),
        ("AUTH_PASSWORD2", AUTH_USERS[1][1]),
    ] + sorted(REALMS.items())
    tmp = os.path.join(state, "env.tmp")
    with open(tmp, "w") as f:
        for k, v in env:
            f.write("%s=%s\n" % (k, v))
    os.replace(tmp, os.path.join(state, "env"))
    sys.stdout.write("servers started in %.2fs: nginx http://127.0.0.1:%d/ (short keep-alive :%d%s), "
                     "https://localhost:%d/, faultserver http://127.0.0.1:%d/ (and :%d), "
                     "apache :%d, lighttpd :%d, squid :%d (auth :%d), dante :%d (auth :%d); env in %s\n"
                     % (time.monotonic() - t0, port, short_port, ", also [::1]" if ipv6 else "",
                        ports["TLS_PORT"], fault_port, fault2_port,
                        hop["apache"].ports["APACHE_PORT"], hop["lighttpd"].ports["LIGHTTPD_PORT"],
                        hop["squid"].ports["SQUID_PORT"], hop["squid"].ports["SQUID_AUTH_PORT"],
                        hop["dante"].ports["SOCKS_PORT"],
                        hop["dante-auth"].ports["SOCKS_AUTH_PORT"], os.path.join(state, "env")))
    return 0


def ready_file(port, token):
    """The docroot's __tern_ready holds this start's token: the listener is ours."""
    r = http_raw("127.0.0.1", port, b"GET /__tern_ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
    return r is not None and re.match(r"HTTP/1\.[01] 200 ", r[0]) is not None \
        and r[1] == token.encode()


def squid_ready(ports, token, fault_port):
    """Our squid (its Via names this start's token) forwards on the open port and challenges on
    the authenticated one."""
    via = "tern-squid-" + token
    r = http_raw("127.0.0.1", ports["SQUID_PORT"],
                 b"GET http://127.0.0.1:%d/ok?size=2 HTTP/1.0\r\n\r\n" % fault_port)
    if r is None or not r[0].startswith("HTTP/1.1 200 ") or via not in r[0]:
        return False
    r = http_raw("127.0.0.1", ports["SQUID_AUTH_PORT"],
                 b"GET http://127.0.0.1:%d/ok?size=2 HTTP/1.0\r\n\r\n" % fault_port)
    return r is not None and r[0].startswith("HTTP/1.1 407 ") and via in r[0]


def cmd_env(state):
    path = os.path.join(os.path.abspath(state), "env")
    try:
        with open(path) as f:
            sys.stdout.write(f.read())
    except OSError as e:
        die("%s: %s (servers not started?)" % (path, e.strerror))
    return 0


def cmd_status(state):
    state = os.path.abspath(state)
    env = read_env(state)
    ok = bool(env)
    checks = ([(key, "NGINX_PID") for key, _, _ in NGINX_PORTS] + [("FAULT_PORT", "FAULT_PID")]
              + [(key, "FAULT_PID") for key in FAULT_TLS_KEYS + ["FAULT2_PORT"]]
              + [("APACHE_PORT", "APACHE_PID"), ("LIGHTTPD_PORT", "LIGHTTPD_PID"),
                 ("SQUID_PORT", "SQUID_PID"), ("SQUID_AUTH_PORT", "SQUID_PID"),
                 ("FILE_PORT", "FILE_PID"), ("SOCKS_PORT", "SOCKS_PID"),
                 ("SOCKS_AUTH_PORT", "SOCKS_AUTH_PID"), ("NTLM_PORT", "NTLM_PID"),
                 ("NTLM_PROXY_PORT", "NTLM_PROXY_PID"), ("NGHTTPD_PORT", "NGHTTPD_PID")]
              + [(key, "H2FAULT_PID") for key, _ in H2FAULT_LISTENERS])
    for key, pidkey in checks:
        up = (key in env and ours(int(env.get(pidkey, "0") or 0), state)
              and can_connect("127.0.0.1", int(env[key])))
        sys.stdout.write("%s %s\n" % (key, "up" if up else "down"))
        ok = ok and up
    return 0 if ok else 1


def cmd_big(state):
    state = os.path.abspath(state)
    www = os.path.join(state, "www")
    os.makedirs(www, exist_ok=True)
    sha = ensure_fixtures(www, [BIG])[BIG[2]]
    env_path = os.path.join(state, "env")
    env = read_env(state)
    if env and env.get(BIG[2]) != sha:
        with open(env_path, "a") as f:
            f.write("%s=%s\n" % (BIG[2], sha))
    sys.stdout.write("%s %s\n" % (sha, os.path.join(www, BIG[0])))
    return 0


def main(argv):
    cmds = {"start": cmd_start, "stop": cmd_stop, "env": cmd_env, "status": cmd_status,
            "big": cmd_big}
    if len(argv) != 3 or argv[1] not in cmds:
        sys.stderr.write("usage: %s {%s} STATE_DIR\n" % (os.path.basename(argv[0]), "|".join(cmds)))
        return 2
    return cmds[argv[1]](argv[2])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
