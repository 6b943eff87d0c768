"""What the sync and async clients share: the engine handle, turning Python arguments into a
``tern_request_t`` (one C setter each), and turning a completed request into a Response or an
exception."""

from __future__ import annotations

import json as _json
import os
import struct
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import urlencode, urlsplit

from . import _errors
from ._models import (
    AnyAuth,
    NTLMAuth,
    AuthTypes,
    BasicAuth,
    DigestAuth,
    File,
    FilesTypes,
    HeaderTypes,
    Headers,
    ParamTypes,
    Response,
    ResponseHeaders,
    Timeout,
    TimeoutTypes,
)
from ._tern import ffi, lib

# Marks an argument the caller did not give, so that the client's default applies.
class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()

VerifyTypes = Union[bool, str, "os.PathLike[str]"]
CertTypes = Union[str, Tuple[str, Optional[str]], Tuple[str, Optional[str], Optional[str]], None]
ProxyTypes = Optional[str]
ProxiesTypes = Optional[Mapping[str, Optional[str]]]

# tern.h's TERN_AUTH_*: ANY is Basic, Digest and NTLM.
_AUTH_BASIC, _AUTH_DIGEST, _AUTH_NTLM, _AUTH_ANY = 1, 2, 4, 7

# Set while Python code runs on an engine's loop thread (the asyncio callbacks), so that an
# engine whose last reference dies there is freed from another thread (an engine cannot join
# its own loop thread).
_engine_thread = threading.local()


def _text(p: Any) -> str:
    return ffi.string(p).decode("utf-8", "replace") if p != ffi.NULL else ""


def raise_code(rc: int, what: str, url: Optional[str] = None) -> None:
    """Raises the exception for a setter's or submit's negative return code."""
    if rc == 0:
        return
    name = ffi.string(lib.tern_err_name(rc)).decode()
    message = f"{what}: {ffi.string(lib.tern_strerror(rc)).decode()}"
    cls = _errors.error_class(name, bool(lib.tern_error_is_tls_verify(rc)))
    raise cls(message, rc, name, url)


def check(rc: int, what: str) -> None:
    if rc != 0:
        raise_code(rc, what)


def _config(
    *,
    user_agent: Optional[str],
    max_connections_per_origin: int,
    max_active_requests: int,
    idle_timeout: Optional[float],
    buffer_size: Optional[int],
    resolve: Sequence[str],
) -> Any:
    """A ``tern_config_t`` from a client's engine settings (free it with tern_config_free)."""
    cfgp = ffi.new("tern_config_t **")
    check(lib.tern_config_new(cfgp), "tern_config_new")
    cfg = cfgp[0]
    try:
        if user_agent is not None:
            check(lib.tern_config_set_user_agent(cfg, user_agent.encode()), "user_agent")
        if max_connections_per_origin is not None:
            check(
                lib.tern_config_set_max_connections_per_origin(cfg, max_connections_per_origin),
                "max_connections_per_origin",
            )
        if max_active_requests:
            check(lib.tern_config_set_max_active_requests(cfg, max_active_requests),
                  "max_active_requests")
        if idle_timeout is not None:
            check(lib.tern_config_set_idle_timeout(cfg, int(idle_timeout * 1000)), "idle_timeout")
        if buffer_size is not None:
            check(lib.tern_config_set_buffer_size(cfg, buffer_size), "buffer_size")
        for entry in resolve:
            check(lib.tern_config_add_resolve(cfg, entry.encode()), f"resolve {entry!r}")
    except BaseException:
        lib.tern_config_free(cfg)
        raise
    return cfg


class LocalEngine:
    """An engine on a libuv loop of its own that the thread which made it runs while it waits
    for a request: no loop thread, and no thread hop per request (what pycurl's perform() does
    too). Only that thread submits to it; close() may come from any thread.

    No Python lock: each of the owner's uses holds the engine in C (tern_py_local_fetch, or
    tern_py_local_hold and tern_py_local_let_go), two atomic operations where an ``RLock``'s
    acquire and release cost ~500 instructions per request. The hold and a plain call's handed
    back request are recorded in the slot's ``tern_py_call``, and ended by one C call
    (tern_py_call_end, or let_go in a ``finally``) that Python reaches without entering a Python
    function first, so a signal handler's exception cannot skip it; should a hold or request be
    left there all the same, the slot's next fetch or hold ends it first. close() from another
    thread waits for the last hold to end (in C, in slices: Ctrl-C still interrupts it) before
    it frees the engine and its loop."""

    def __init__(self, **settings: Any) -> None:
        cfg = _config(**settings)
        try:
            errp = ffi.new("int *")
            ptr = lib.tern_py_local_new(cfg, errp)
            if ptr == ffi.NULL:
                raise_code(errp[0] if errp[0] < 0 else -1, "tern_engine_new_on_loop")
        finally:
            lib.tern_config_free(cfg)
        # The struct outlives close() (which frees the engine and loop): the slots point to
        # it, and hold this reference; freed with the last of them.
        self.ptr: Any = ffi.gc(ptr, lib.tern_py_local_release)
        self.owner = threading.get_ident()
        self.pid = os.getpid()
        # Set by close(), before the engine refuses new requests: a request that fails then
        # fails with ClosedError.
        self.closing = False
        # The owner's slots to reuse, one per nesting depth (a progress callback or a signal
        # handler may send a request while another waits); the plain call keeps one apart.
        self.slots: List[Slot] = []
        self.spare: Optional[Slot] = None

    def take_slot(self) -> "Slot":
        """A slot for one of the owner's requests (give it back with ``slots.append``)."""
        return self.slots.pop() if self.slots else Slot(self.ptr)

    def stat(self, which: int) -> int:
        return int(lib.tern_py_local_stat_held(self.ptr, which))

    def close(self) -> None:
        """Frees the engine and its loop, from any thread: new requests are refused and those
        in flight cancelled (they fail with ClosedError); from another thread, it returns once
        the owner no longer uses the engine (the GIL released while it waits), and frees it;
        from the owner's own thread while it uses it (a progress callback's or a signal
        handler's close), the owner frees it as the last use ends. Idempotent."""
        self.closing = True
        if self.pid != os.getpid():
            mode = 2  # a forked child's copy: the parent's loop is not this process's to free
        else:
            mode = 1 if threading.get_ident() == self.owner else 0
        ptr = self.ptr
        lib.tern_py_local_close(ptr, mode)
        if mode == 0:
            # Waits in slices, the GIL released, so that this thread's signal handlers run
            # between them; when one raises (Ctrl-C), the owner's last hold frees the engine.
            try:
                while not lib.tern_py_local_wait_idle(ptr, 200, 0):
                    pass
            except BaseException:
                lib.tern_py_local_wait_idle(ptr, 0, 1)
                raise


class Slot:
    """What one request of a LocalEngine's owner uses: its waiter, the cell that
    tern_py_local_go hands the request back in, the scratch its response is read into, and
    all three with the engine as one ``tern_py_call`` for tern_py_local_fetch."""

    __slots__ = ("w", "cell", "scratch", "call", "local")

    def __init__(self, local_ptr: Any) -> None:
        w = lib.tern_py_waiter_new()
        if w == ffi.NULL:
            raise MemoryError("tern: cannot allocate a waiter")
        self.w = ffi.gc(w, lib.tern_py_waiter_free)
        self.cell = ffi.new("tern_request_t *[1]")
        call = ffi.new("tern_py_call *")
        # The engine's struct never changes (close() frees what it points to, not it).
        self.local = local_ptr
        call.local = local_ptr
        call.waiter = self.w
        call.out = self.cell
        call.slice_ms = 200
        self.call = call
        self.scratch = Scratch(8192, call)


class EngineHandle:
    """Owns one ``tern_engine_t`` with its own loop thread: made from the client's engine
    settings (see :func:`_config`), freed once by close()."""

    def __init__(self, **settings: Any) -> None:
        self.lock = threading.Lock()
        cfg = _config(**settings)
        try:
            engp = ffi.new("tern_engine_t **")
            check(lib.tern_engine_new(engp, cfg), "tern_engine_new")
        finally:
            lib.tern_config_free(cfg)
        self.ptr: Any = engp[0]
        self.pid = os.getpid()

    def submit(self, req: Any, url: str) -> None:
        with self.lock:
            if self.ptr is None:
                raise _errors.ClosedError("the client is closed", 0, "ESHUTDOWN", url)
            rc = lib.tern_engine_submit(self.ptr, req)
        if rc:
            raise_code(rc, "submit", url)

    def stat(self, which: int) -> int:
        with self.lock:
            return int(lib.tern_engine_get_stat(self.ptr, which)) if self.ptr is not None else 0

    def close(self) -> None:
        """Frees the engine: requests in flight complete with ClosedError. Idempotent."""
        with self.lock:
            ptr, self.ptr = self.ptr, None
        if ptr is None:
            return
        if self.pid != os.getpid():
            return  # a forked child has no loop thread to join: leave the parent's engine be
        if getattr(_engine_thread, "active", False):
            threading.Thread(target=lib.tern_engine_free, args=(ptr,), daemon=True).start()
        else:
            lib.tern_engine_free(ptr)  # cffi releases the GIL while the loop thread is joined


class Options:
    """A client's defaults for every request option."""

    __slots__ = (
        "base_url",
        "headers",
        "params",
        "auth",
        "timeout",
        "follow_redirects",
        "max_redirects",
        "verify",
        "cert",
        "proxy",
        "proxies",
        "no_proxy",
        "proxy_auth",
        "decompress",
    )

    def __init__(
        self,
        *,
        base_url: Optional[str] = None,
        headers: Optional[HeaderTypes] = None,
        params: ParamTypes = None,
        auth: AuthTypes = None,
        timeout: TimeoutTypes = Timeout(),
        follow_redirects: bool = True,
        max_redirects: int = 20,
        verify: VerifyTypes = True,
        cert: CertTypes = None,
        proxy: ProxyTypes = None,
        proxies: ProxiesTypes = None,
        no_proxy: Optional[str] = None,
        proxy_auth: Optional[Tuple[str, str]] = None,
        decompress: bool = True,
    ) -> None:
        self.base_url = base_url
        self.headers = Headers(headers)
        self.params = params
        self.auth = auth
        self.timeout = Timeout.coerce(timeout)
        self.follow_redirects = follow_redirects
        self.max_redirects = max_redirects
        self.verify = verify
        self.cert = cert
        self.proxy = proxy
        self.proxies = proxies
        self.no_proxy = no_proxy
        self.proxy_auth = proxy_auth
        self.decompress = decompress


# The methods a plain call (no keyword argument) sends, as C strings.
METHODS = {m: m.encode() for m in ("GET", "HEAD", "OPTIONS", "DELETE", "POST", "PUT", "PATCH")}


class Template:
    """A client's defaults as one ``tern_py_template`` for :func:`tern_py_local_go`, with the
    C strings it points to kept alive."""

    __slots__ = ("c", "refs")

    def __init__(self, c: Any, refs: List[Any]) -> None:
        self.c = c
        self.refs = refs


def template(options: Options) -> Optional[Template]:
    """The template of a request with nothing but ``options``, or None when they hold more than
    a template carries (a base URL, params, auth, a client certificate, proxies) or a value the
    long way should judge (and name when refused)."""
    if (options.base_url or options.params or options.auth is not None or options.cert
            or options.proxy or options.proxies or options.no_proxy or options.proxy_auth
            or options.max_redirects < 0):
        return None
    try:
        t = options.timeout
        c = ffi.new("tern_py_template *")
        refs: List[Any] = []
        c.connect_ms = _ms(t.connect)
        c.headers_ms = _ms(t.headers)
        c.body_ms = _ms(t.body)
        c.total_ms = _ms(t.total)
        c.follow_max = options.max_redirects if options.follow_redirects else -1
        v = options.verify
        c.verify = 0 if v is False else 1
        if v is not False and v is not True and v is not None:
            is_dir = _ca_is_dir.get(v)
            if is_dir is None:
                is_dir = _ca_is_dir[v] = os.path.isdir(v)
            path = ffi.new("char[]", _b(v))
            refs.append(path)
            if is_dir:
                c.ca_path = path
            else:
                c.ca_file = path
        c.decode_off = 0 if options.decompress else 1
        block = bytearray()
        for k, val in options.headers._items:
            kb, vb = k.encode("latin-1"), val.encode("latin-1")
            if b"\0" in kb or b"\0" in vb:
                return None
            block += kb + b"\0" + vb + b"\0"
        if block:
            hb = ffi.new("char[]", bytes(block))
            refs.append(hb)
            c.headers = hb
            c.headers_len = len(block)
    except Exception:  # noqa: BLE001  (the long way raises it, with its name)
        return None
    return Template(c, refs)


def build_url(options: Options, url: str, params: ParamTypes) -> str:
    if options.base_url and not urlsplit(url).scheme:
        url = options.base_url.rstrip("/") + "/" + url.lstrip("/")
    for p in (options.params, params):
        if not p:
            continue
        query = p if isinstance(p, str) else urlencode(p, doseq=True)  # type: ignore[arg-type]
        if query:
            base, _, frag = url.partition("#")
            sep = "&" if "?" in base else "?"
            url = base + sep + query + ("#" + frag if frag else "")
    return url


def _ms(seconds: Optional[float]) -> int:
    if not seconds:
        return 0
    return max(1, int(round(seconds * 1000)))


def _b(s: Union[str, "os.PathLike[str]"]) -> bytes:
    return os.fsencode(s)


def _quote(name: str) -> str:
    return name.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def _file_source(value: Any) -> Tuple[Optional[str], Any, Optional[str]]:
    """(filename, source, content type) for one entry of ``files``."""
    filename: Optional[str] = None
    ctype: Optional[str] = None
    if isinstance(value, tuple):
        if len(value) == 2:
            filename, value = value
        elif len(value) == 3:
            filename, value, ctype = value
        else:
            raise TypeError("a files entry tuple is (filename, source) or (filename, source, type)")
    if isinstance(value, File):
        filename = filename or value.filename or os.path.basename(os.fspath(value.path))
        ctype = ctype or value.content_type
    elif isinstance(value, (str, os.PathLike)):
        filename = filename or os.path.basename(os.fspath(value))
    elif isinstance(value, (bytes, bytearray, memoryview)):
        filename = filename or "upload"
    elif hasattr(value, "fileno") and isinstance(getattr(value, "name", None), str):
        filename = filename or os.path.basename(value.name)
    else:
        raise TypeError(
            f"cannot stream {type(value).__name__} from disk: give a path, tern.File, an open "
            "file with a name on disk, or bytes"
        )
    if ctype is None:
        import mimetypes  # here: its tables take longer to load than the rest of tern

        ctype = mimetypes.guess_type(filename or "")[0] or "application/octet-stream"
    return filename, value, ctype


def _add_file_segment(req: Any, source: Any) -> None:
    if isinstance(source, File):
        check(lib.tern_request_add_body_segment_file(req, _b(source.path), source.offset, source.end),
              f"file {os.fspath(source.path)!r}")
    elif isinstance(source, (str, os.PathLike)):
        check(lib.tern_request_add_body_segment_file(req, _b(source), 0, 0), f"file {source!r}")
    elif isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        check(lib.tern_request_add_body_segment(req, data, len(data)), "multipart part")
    else:  # an open file: from its current position on
        check(lib.tern_request_add_body_segment_file(req, _b(source.name), source.tell(), 0),
              f"file {source.name!r}")


def _items(mapping: Any) -> List[Tuple[str, Any]]:
    if mapping is None:
        return []
    return list(mapping.items()) if isinstance(mapping, Mapping) else list(mapping)


def _set_body(
    req: Any,
    headers: Headers,
    content: Any,
    data: Any,
    json: Any,
    files: FilesTypes,
) -> None:
    """Sets the body and, unless the caller gave one, its Content-Type in ``headers``."""
    if files:
        import secrets  # here: it imports random, which a program without forms never needs

        boundary = "tern-" + secrets.token_hex(16)
        for name, value in _items(data):
            values = value if isinstance(value, (list, tuple)) else [value]
            for v in values:
                v = v if isinstance(v, bytes) else str(v).encode()
                part = (
                    f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(name)}"\r\n\r\n'
                ).encode() + v + b"\r\n"
                check(lib.tern_request_add_body_segment(req, part, len(part)), "multipart field")
        for name, value in _items(files):
            filename, source, ctype = _file_source(value)
            head = (
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"{_quote(name)}\"; "
                f"filename=\"{_quote(filename or '')}\"\r\nContent-Type: {ctype}\r\n\r\n"
            ).encode()
            check(lib.tern_request_add_body_segment(req, head, len(head)), "multipart part")
            _add_file_segment(req, source)
            check(lib.tern_request_add_body_segment(req, b"\r\n", 2), "multipart part")
        tail = f"--{boundary}--\r\n".encode()
        check(lib.tern_request_add_body_segment(req, tail, len(tail)), "multipart end")
        headers.setdefault("Content-Type", f"multipart/form-data; boundary={boundary}")
        return
    if json is not None:
        body = _json.dumps(json, separators=(",", ":"), ensure_ascii=False).encode()
        headers.setdefault("Content-Type", "application/json")
    elif data is not None and not isinstance(data, (bytes, bytearray, str)):
        body = urlencode(_items(data), doseq=True).encode()
        headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
    else:
        body = content if content is not None else data
    if body is None:
        return
    if isinstance(body, File):
        check(lib.tern_request_set_body_file(req, _b(body.path), body.offset, body.end),
              f"file {os.fspath(body.path)!r}")
        if body.content_type:
            headers.setdefault("Content-Type", body.content_type)
    elif isinstance(body, str):
        raw = body.encode()
        check(lib.tern_request_set_body(req, raw, len(raw)), "body")
    elif isinstance(body, (bytes, bytearray, memoryview)):
        raw = bytes(body)
        check(lib.tern_request_set_body(req, raw, len(raw)), "body")
    elif hasattr(body, "fileno") and isinstance(getattr(body, "name", None), str):
        check(lib.tern_request_set_body_file(req, _b(body.name), body.tell(), 0),
              f"file {body.name!r}")
    else:
        raise TypeError(f"content must be bytes, str, tern.File or an open file: {type(body).__name__}")


def _auth(auth: AuthTypes) -> Optional[Tuple[str, str, int]]:
    if auth is None:
        return None
    if isinstance(auth, BasicAuth):
        return auth.username, auth.password, _AUTH_BASIC
    if isinstance(auth, DigestAuth):
        return auth.username, auth.password, _AUTH_DIGEST
    if isinstance(auth, NTLMAuth):
        user = f"{auth.domain}\\{auth.username}" if auth.domain else auth.username
        return user, auth.password, _AUTH_NTLM
    if isinstance(auth, AnyAuth):
        return auth.username, auth.password, _AUTH_ANY
    if isinstance(auth, tuple) and len(auth) == 2:
        return str(auth[0]), str(auth[1]), _AUTH_BASIC
    raise TypeError("auth must be a (user, password) pair or tern.BasicAuth/DigestAuth/NTLMAuth/"
                    f"AnyAuth: {auth!r}")


# verify= paths seen, and whether each is a directory (CA path) or a file.
_ca_is_dir: Dict[Any, bool] = {}


def request_cell() -> Any:
    """A cell for one request (NULL until :func:`new_request` fills it), so that the
    ``finally`` that frees it finds the request even when an exception (a signal handler's) is
    raised as tern_request_new returns."""
    return ffi.new("tern_request_t *[1]")


def new_request(cell: Any = None) -> Any:
    if cell is None:
        cell = request_cell()
    check(lib.tern_request_new(cell), "tern_request_new")
    return cell[0]



def prepare(
    req: Any,
    options: Options,
    method: str,
    url: str,
    *,
    params: ParamTypes = None,
    headers: Optional[HeaderTypes] = None,
    content: Any = None,
    data: Any = None,
    json: Any = None,
    files: FilesTypes = None,
    auth: Any = UNSET,
    timeout: Any = UNSET,
    follow_redirects: Any = UNSET,
    verify: Any = UNSET,
    cert: Any = UNSET,
    proxy: Any = UNSET,
    download: Optional[Tuple[str, int, int, int]] = None,
    download_buffer: Optional[int] = None,
) -> str:
    """Configures ``req`` (URL, method, timeouts and redirects in one C call, then a setter per
    other option given); returns the URL."""
    full = build_url(options, url, params)
    t = options.timeout if timeout is UNSET else Timeout.coerce(timeout)
    follow = options.follow_redirects if follow_redirects is UNSET else follow_redirects
    m = method.upper()
    rc = lib.tern_py_setup(req, full.encode(), m.encode(), _ms(t.connect), _ms(t.headers),
                           _ms(t.body), _ms(t.total), options.max_redirects if follow else -1)
    if rc:  # the setters one by one, to say which value was refused
        rc = lib.tern_request_set_url(req, full.encode())
        if rc:
            raise_code(rc, f"URL {full!r}", full)
        check(lib.tern_request_set_method(req, m.encode()), f"method {method!r}")
        check(lib.tern_request_set_timeout(req, lib.TERN_TIMEOUT_CONNECT, _ms(t.connect)), "timeout")
        check(lib.tern_request_set_timeout(req, lib.TERN_TIMEOUT_HEADERS, _ms(t.headers)), "timeout")
        check(lib.tern_request_set_timeout(req, lib.TERN_TIMEOUT_BODY, _ms(t.body)), "timeout")
        check(lib.tern_request_set_timeout(req, lib.TERN_TIMEOUT_TOTAL, _ms(t.total)), "timeout")
        if follow:
            check(lib.tern_request_set_follow_redirects(req, options.max_redirects),
                  "follow_redirects")

    if headers:
        # The call's fields replace the client's of the same name; all of the call's values go.
        given = Headers(headers).multi_items()
        names = {k.lower() for k, _ in given}
        merged = Headers([(k, v) for k, v in options.headers.multi_items()
                          if k.lower() not in names] + given)
    else:
        merged = Headers(options.headers)
    if content is not None or data is not None or json is not None or files:
        _set_body(req, merged, content, data, json, files)
    for k, v in merged._items:
        rc = lib.tern_request_add_header(req, k.encode("latin-1"), v.encode("latin-1"))
        if rc:
            raise_code(rc, f"header {k!r}", full)

    creds = _auth(options.auth if auth is UNSET else auth)
    if creds is not None:
        check(lib.tern_request_set_auth(req, creds[0].encode(), creds[1].encode(), creds[2]), "auth")

    v = options.verify if verify is UNSET else verify
    if v is False:
        check(lib.tern_request_set_tls_verify(req, 0), "verify")
    elif v is not True and v is not None:
        # Whether a CA path is a directory is asked once per path, not per request.
        is_dir = _ca_is_dir.get(v)
        if is_dir is None:
            is_dir = _ca_is_dir[v] = os.path.isdir(v)
        if is_dir:
            check(lib.tern_request_set_tls_ca_path(req, _b(v)), f"verify {v!r}")
        else:
            check(lib.tern_request_set_tls_ca_file(req, _b(v)), f"verify {v!r}")

    c = options.cert if cert is UNSET else cert
    if c:
        if isinstance(c, (str, os.PathLike)):
            c = (c, None, None)
        cert_file, key_file, password = (tuple(c) + (None, None))[:3]
        check(
            lib.tern_request_set_tls_client_cert(
                req,
                _b(cert_file),
                _b(key_file) if key_file else ffi.NULL,
                password.encode() if password else ffi.NULL,
            ),
            "cert",
        )

    p = options.proxy if proxy is UNSET else proxy
    if p:
        check(lib.tern_request_set_proxy(req, p.encode()), f"proxy {p!r}")
    for scheme, purl in (options.proxies or {}).items():
        check(lib.tern_request_set_scheme_proxy(req, scheme.encode(), (purl or "").encode()),
              f"proxies[{scheme!r}]")
    if options.no_proxy:
        check(lib.tern_request_set_no_proxy(req, options.no_proxy.encode()), "no_proxy")
    if options.proxy_auth:
        user, password = options.proxy_auth
        check(lib.tern_request_set_proxy_auth(req, user.encode(), password.encode(), _AUTH_ANY),
              "proxy_auth")
    if not options.decompress:
        check(lib.tern_request_set_decoding(req, lib.TERN_DECODE_OFF), "decompress")
    if download is not None:
        path, offset, end, resume = download
        check(lib.tern_request_set_download_file(req, _b(path), offset, end, resume),
              f"download to {path!r}")
        if download_buffer:
            check(lib.tern_request_set_buffer_size(req, download_buffer), "buffer_size")
    return full


def error_for(req: Any, status: int, url: str) -> _errors.TernError:
    """The exception for a request that completed with a TERN_E* code."""
    name = ffi.string(lib.tern_err_name(status)).decode()
    message = _text(lib.tern_request_get_error_message(req)) or ffi.string(
        lib.tern_strerror(status)
    ).decode()
    cls = _errors.error_class(name, bool(lib.tern_error_is_tls_verify(status)))
    return cls(message, status, name, url)


# A download's connection buffer when the client sets none (buffer_size): the engine reads the
# socket and writes the file through it, so 1 MiB takes 16 times fewer read and write calls
# than the 64 KiB default (measured: about half the CPU per GB on loopback). Connections are
# pooled per buffer size, so downloads share theirs with each other, not with other requests.
DOWNLOAD_BUFFER = 1 << 20


# The scalar fields at the start of a tern_py_response, each 8 bytes (see _tern_build.py), read
# in one call: status, error, http_minor, http_version, redirects, reused, offset, elapsed,
# body_end, fields_at, body_len, look_at, body_at.
INFO = struct.Struct("=qqqqqqQdQQQQQ")
if INFO.size != ffi.offsetof("tern_py_response", "body"):  # pragma: no cover
    raise ImportError("tern: tern_py_response's layout does not match _core.INFO")

# Bodies up to this size are copied with the head into a Scratch (grown for them when needed),
# so that the request is freed as it is read; larger ones are copied from the request.
SCRATCH_BODY_MAX = 256 * 1024


class Scratch:
    """Where tern_py_response_take puts a response: the scalar fields and a block of strings
    (and the body, when it fits), with buffer views over both for reading them in few calls.
    With a ``tern_py_call`` (a Slot's), that points at the same info and buffer, grown with it."""

    __slots__ = ("info", "infoview", "buf", "view", "cap", "call")

    def __init__(self, cap: int, call: Any = None) -> None:
        self.info = ffi.new("tern_py_response *")
        self.infoview = ffi.buffer(self.info)
        self.call = call
        if call is not None:
            call.info = self.info
        self.grow(cap)

    def grow(self, cap: int) -> None:
        self.buf = ffi.new("char[]", cap)
        self.view = ffi.buffer(self.buf)
        self.cap = cap
        call = self.call
        if call is not None:
            call.buf = self.buf
            call.cap = cap


_new = object.__new__
_NULL = ffi.NULL


def take(req: Any, scratch: Scratch, cell: Any = _NULL) -> int:
    """Fills ``scratch`` from a completed request (one C call, two when its block outgrows the
    buffer, which then grows); returns the block's length. ``scratch.info.error`` is the
    request's error code. With ``cell`` (a ``tern_request_t *[1]`` holding ``req``), a request
    that succeeded is freed once all of its response is in ``scratch`` (the cell emptied)."""
    n = lib.tern_py_response_take(req, scratch.info, scratch.buf, scratch.cap, cell)
    if n > scratch.cap:
        body_len = scratch.info.body_len
        scratch.grow(n + (body_len if body_len <= SCRATCH_BODY_MAX else 0))
        n = lib.tern_py_response_take(req, scratch.info, scratch.buf, scratch.cap, cell)
    return n


def build_response(scratch: Scratch, n: int, path: Optional[str] = None) -> Response:
    """The Response of a request whose fields :func:`take` put in ``scratch`` (a body not
    copied there is copied from the request, which must then not be freed before). The header
    fields are split only when first read. ``Client``'s plain call (``_client._method``) has
    the same steps inline, for a response read whole: keep the two in step."""
    info = INFO.unpack_from(scratch.infoview)  # kept whole: the rarely read fields wait there
    view = scratch.view
    # The strings, fields and lookup block in one slice (each costs ~800 instructions): the
    # response decodes its strings when first read, the headers search it from the fields on.
    # Every offset is as the glue computed it: each Python operation here costs ~30
    # instructions; and the headers' _low and _pairs stay unset until needed.
    raw = view[0:n]
    headers = ResponseHeaders()
    headers._raw = raw
    headers._start = info[9]
    headers._look = info[11]
    r = _new(Response)
    r.status_code = info[0]
    r.headers = headers
    body_at = info[12]
    if body_at:
        r.content = view[body_at:info[8]]
    else:
        body_len = info[10]
        if body_len:
            r.content = ffi.unpack(scratch.info.body, body_len)
            if n + body_len <= SCRATCH_BODY_MAX:
                scratch.grow(n + body_len)  # the next such body fits
        else:
            r.content = b""
    r._raw = raw
    r._info = info
    r.path = path
    return r


def response_from(req: Any, path: Optional[str] = None) -> Response:
    """A Response from a request that completed without error (one C call for every field and
    a small body)."""
    scratch = Scratch(2048)
    return build_response(scratch, take(req, scratch), path)


def engine_stats(handle: EngineHandle) -> Dict[str, int]:
    return {
        "connections_opened": handle.stat(lib.TERN_STAT_CONNECTIONS_OPENED),
        "connections_open": handle.stat(lib.TERN_STAT_CONNECTIONS_OPEN),
        "connections_idle": handle.stat(lib.TERN_STAT_CONNECTIONS_IDLE),
        "requests_active": handle.stat(lib.TERN_STAT_REQUESTS_ACTIVE),
        "requests_completed": handle.stat(lib.TERN_STAT_REQUESTS_COMPLETED),
        "reused": handle.stat(lib.TERN_STAT_REUSED),
    }


def requests_live() -> int:
    """Request objects allocated in the C engine and not yet freed (every engine)."""
    return int(lib.tern_engine_get_stat(ffi.NULL, lib.TERN_STAT_REQUESTS_LIVE))
