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
]
FAULT_TLS_KEYS = ["TLS_GARBAGE_PORT", "TLS_STALL_PORT", "TLS_REQCERT_PORT"]


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
    for v in (env.get("NGINX_PID"), env.get("FAULT_PID"),
              read_pidfile(os.path.join(state, "nginx.pid")),
              read_pidfile(os.path.join(state, "fault.pid"))):
        try:
            if v and int(v) > 1:
                pids.add(int(v))
        except ValueError:
            pass
    return sorted(pids)


def cmd_stop(state):
    state = os.path.abspath(state)
    pids = [p for p in recorded_pids(state) if ours(p, state)]
    if pids:
        stop_pids(pids)
    left = [p for p in pids if alive(p)]
    for name in ("env", "fault.pid", "fault.port", "fault.tlsports"):
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


def is_our_nginx(host, port, token, family=socket.AF_INET, tls=None):
    """GET /__tern_ready answers with this start's token: the listener is our nginx, not a
    stranger that grabbed the port while nginx was still retrying its bind()."""
    return http_get(host, port, "/__tern_ready", family, tls) == token.encode()


def probe_tls_context(paths):
    """A client context for the readiness probes: no verification (the probes also reach the
    expired, wrong-host and self-signed servers), the test client certificate presented."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(paths["client.pem"], paths["client.key"])
    return ctx


def render_conf(state, www, ports, ipv6, token, certdir):
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
    }
    for key, stem, cert in NGINX_PORTS:
        port = ports[key]
        subs["@%s@" % stem] = str(port)
        six = "LISTEN6" if stem == "PORT" else "LISTEN6_SHORT" if stem == "SHORT_PORT" \
            else "LISTEN6_" + stem
        subs["@%s@" % six] = ("listen [::1]:%d%s default_server;" % (port, " ssl" if cert else "")
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
                 "fault.out", "fault.pid", "fault.port", "fault.tlsports"):
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

    shas = ensure_fixtures(www, FIXTURES)
    big = os.path.join(www, BIG[0])
    if os.path.exists(big) and os.path.getsize(big) == BIG[1]:
        shas.update(ensure_fixtures(www, [BIG]))
    ipv6 = ipv6_loopback()
    wait_s = float(os.environ.get("TERN_TEST_SERVER_WAIT", "10"))
    errlog = os.path.join(state, "error.log")
    nginx_out = os.path.join(state, "nginx.out")
    fault_log = os.path.join(state, "fault.log")
    port_file = os.path.join(state, "fault.port")
    tls_ports_file = os.path.join(state, "fault.tlsports")

    fault = spawn([sys.executable, FAULTSERVER, "--port", "0", "--port-file", port_file,
                   "--tls-ports-file", tls_ports_file, "--tls-cert", cert_paths["server.pem"],
                   "--tls-key", cert_paths["server.key"], "--tls-ca", cert_paths["ca.pem"]],
                  os.path.join(state, "fault.out"), fault_log, state)
    with open(os.path.join(state, "fault.pid"), "w") as f:
        f.write("%d\n" % fault.pid)

    nginx_p = None
    for attempt in range(1, 4):  # a picked port can be taken before nginx binds it: retry
        ports = {}
        for key, _, _ in NGINX_PORTS:
            ports[key] = pick_port(ipv6, avoid=tuple(ports.values()))
        port, short_port = ports["NGINX_PORT"], ports["NGINX_SHORT_PORT"]
        token = os.urandom(12).hex()
        conf = render_conf(state, www, ports, ipv6, token, certdir)
        nginx_p = spawn([nginx, "-p", state + "/", "-c", conf, "-e", errlog], nginx_out, nginx_out,
                        state)
        deadline = time.monotonic() + wait_s
        nginx_up = fault_up = False
        fault_port = None
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
                kill_started(fault)
                die("nginx exited with status %d at start-up (%s -p %s -c %s -e %s)"
                    % (nginx_p.returncode, nginx, state + "/", conf, errlog), errlog, nginx_out)
            if fault.poll() is not None:
                kill_started(nginx_p)
                die("faultserver.py exited with status %d at start-up" % fault.returncode,
                    fault_log, os.path.join(state, "fault.out"))
            if not nginx_up:
                listeners = []
                for key, _, cert in NGINX_PORTS:
                    tls = probe_ctx if cert else None
                    listeners.append(("127.0.0.1", ports[key], socket.AF_INET, tls))
                    if ipv6:
                        listeners.append(("::1", ports[key], socket.AF_INET6, tls))
                nginx_up = all(is_our_nginx(h, p, token, fam, tls) for h, p, fam, tls in listeners)
            if not fault_up:
                fault_port = read_pidfile(port_file)
                fault_up = bool(fault_port) and http_get("127.0.0.1", fault_port,
                                                         "/reset-stats") == b"ok\n"
            if nginx_up and fault_up:
                break
            if time.monotonic() > deadline:
                kill_started(nginx_p, fault)
                die("servers not accepting connections after %gs (nginx up: %s, faultserver "
                    "up: %s, port %s)" % (wait_s, nginx_up, fault_up, fault_port),
                    errlog, nginx_out, fault_log)
            time.sleep(0.01)
        if nginx_p.poll() is None:
            break
        sys.stderr.write("servers.py: nginx port clash, retrying (attempt %d)\n" % attempt)
        try:
            os.unlink(errlog)
        except OSError:
            pass

    fault_tls = read_env_file(tls_ports_file)
    missing = [k for k in FAULT_TLS_KEYS if k not in fault_tls]
    if missing:
        kill_started(nginx_p, fault)
        die("faultserver.py did not report %s in %s" % (", ".join(missing), tls_ports_file),
            fault_log)
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
        (k, fault_tls[k]) for k in FAULT_TLS_KEYS
    ] + [
        ("CERTS", certdir),
        ("CA_PEM", cert_paths["ca.pem"]),
        ("CA_DIR", cert_paths["cadir"]),
        ("CLIENT_CERT", cert_paths["client.pem"]),
        ("CLIENT_KEY", cert_paths["client.key"]),
        ("CLIENT_KEY_ENC", cert_paths["client-enc.key"]),
        ("CLIENT_KEY_PASSWORD", cert_paths["password"]),
    ] + sorted(shas.items())
    tmp = os.path.join(state, "env.tmp")
    with open(tmp, "w") as f:
        for k, v in env:
            f.write("%s=%s\n" % (k, v))
    os.replace(tmp, os.path.join(state, "env"))
    sys.stdout.write("servers started in %.2fs: nginx http://127.0.0.1:%d/ (short keep-alive :%d%s), "
                     "https://localhost:%d/, faultserver http://127.0.0.1:%d/; env in %s\n"
                     % (time.monotonic() - t0, port, short_port, ", also [::1]" if ipv6 else "",
                        ports["TLS_PORT"], fault_port, os.path.join(state, "env")))
    return 0


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
              + [(key, "FAULT_PID") for key in FAULT_TLS_KEYS])
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
