"""The synchronous client."""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Callable, Dict, List, NoReturn, Optional, Sequence, Tuple, Union

from ._core import (
    DOWNLOAD_BUFFER,
    INFO,
    UNSET,
    CertTypes,
    EngineHandle,
    METHODS,
    LocalEngine,
    Options,
    ProxiesTypes,
    Scratch,
    Slot,
    ProxyTypes,
    Template,
    VerifyTypes,
    build_response,
    check,
    error_for,
    new_request,
    prepare,
    request_cell,
    response_from,
    take,
    template,
)
from ._models import (
    AuthTypes,
    FilesTypes,
    HeaderTypes,
    ParamTypes,
    Progress,
    Response,
    ResponseHeaders,
    Timeout,
    TimeoutTypes,
)
from ._errors import ClosedError
from ._tern import ffi, lib

ProgressCallback = Callable[[Progress], Optional[bool]]

_NULL = ffi.NULL
_new = object.__new__
_get_ident = threading.get_ident
_call_end = lib.tern_py_call_end

# One waiter (mutex + condition variable, in C) per waiting thread and nesting depth, reused.
_waiters = threading.local()


def _take_waiter() -> Any:
    free: List[Any] = getattr(_waiters, "free", None) or []
    _waiters.free = free
    if free:
        return free.pop()
    w = lib.tern_py_waiter_new()
    if w == ffi.NULL:
        raise MemoryError("tern: cannot allocate a waiter")
    return ffi.gc(w, lib.tern_py_waiter_free)


def _give_waiter(w: Any) -> None:
    _waiters.free.append(w)


_PHASES = ("upload", "download")


def _report(w: Any, progress: ProgressCallback, req: Any, vals: Tuple[Any, Any, Any]) -> None:
    percentp, donep, totalp = vals
    for i in (0, 1):
        if lib.tern_py_waiter_take_progress(w, i, percentp, donep, totalp):
            if progress(Progress(_PHASES[i], percentp[0], int(donep[0]), int(totalp[0]))):
                lib.tern_request_cancel(req)


def run_sync(handle: EngineHandle, req: Any, url: str, progress: Optional[ProgressCallback],
             path: Optional[str] = None) -> Response:
    """Submits a prepared request and waits for it with the GIL released.

    The wait is cut into slices so that Ctrl-C (and other signal handlers) still run; an
    exception from the progress callback or a signal cancels the request, waits for its
    completion, and propagates. The progress callback runs in this thread, never on the engine's.
    """
    w = _take_waiter()
    try:
        check(lib.tern_py_waiter_arm(w, req, 1 if progress is not None else 0), "callbacks")
        handle.submit(req, url)
        vals = (ffi.new("int *"), ffi.new("uint64_t *"), ffi.new("uint64_t *")) if progress else None
        try:
            while True:
                r = lib.tern_py_waiter_wait(w, 200)
                if r == 1:
                    break
                if r == 2 and progress is not None:
                    _report(w, progress, req, vals)  # type: ignore[arg-type]
            if progress is not None:
                _report(w, progress, req, vals)  # type: ignore[arg-type]
        except BaseException:
            lib.tern_request_cancel(req)
            while lib.tern_py_waiter_wait(w, -1) != 1:
                pass
            raise
        status = lib.tern_request_get_error(req)
        if status:
            raise error_for(req, status, url)
        return response_from(req, path)
    finally:
        _give_waiter(w)


def _finish_local(local: LocalEngine, scratch: Scratch, req: Any, url: str,
                  path: Optional[str]) -> Response:
    """The response (or the exception) of a request of the owner's engine that completed."""
    n = take(req, scratch)
    status = scratch.info.error
    if status:
        _raise_failed(local, req, status, url)
    return build_response(scratch, n, path)


def _raise_failed(local: LocalEngine, req: Any, status: int, url: str) -> NoReturn:
    """Raises a failed request's error: ClosedError when the client was closed meanwhile."""
    if local.closing:
        raise ClosedError("the client was closed while the request ran", status, "ESHUTDOWN", url)
    raise error_for(req, status, url)


def run_local(local: LocalEngine, req: Any, url: str, progress: Optional[ProgressCallback],
              path: Optional[str] = None) -> Response:
    """Submits a prepared request to the calling thread's engine and runs its loop until the
    request completes, with the GIL released, in slices so that Ctrl-C (and other signal
    handlers) still run. Progress, exceptions and cancellation as in :func:`run_sync`."""
    slot = local.take_slot()
    w = slot.w
    call = slot.call
    try:
        # Held from here to the finally (an exception as the hold is taken is let go there too:
        # the slot's call records it).
        if lib.tern_py_local_hold(call) != 0:
            raise ClosedError("the client is closed", 0, "ESHUTDOWN", url)
        ptr = local.ptr
        check(lib.tern_py_waiter_arm(w, req, 1 if progress is not None else 0), "callbacks")
        vals = (ffi.new("int *"), ffi.new("uint64_t *"), ffi.new("uint64_t *")) if progress else None
        try:
            rc = lib.tern_py_local_submit(ptr, w, req)
            if rc == lib.TERN_ESHUTDOWN:
                raise ClosedError("the client is closed", 0, "ESHUTDOWN", url)
            check(rc, "submit")
            while True:
                r = lib.tern_py_local_run(ptr, w, 200)
                if r == 1:
                    break
                if r == 2 and progress is not None:
                    _report(w, progress, req, vals)  # type: ignore[arg-type]
            if progress is not None:
                _report(w, progress, req, vals)  # type: ignore[arg-type]
        except BaseException:
            # Whatever cut it short (a signal handler's, a progress callback's exception, even
            # one raised as a C call returned): if w's request runs, it is cancelled, run to
            # its end and unlinked (before the caller frees it) in one C call, which no second
            # exception can cut short (a no-op once run saw it complete).
            lib.tern_py_local_abandon(ptr, w)
            raise
        return _finish_local(local, slot.scratch, req, url, path)
    finally:
        lib.tern_py_local_let_go(call)
        local.slots.append(slot)


def _fetch_rest(local: LocalEngine, slot: Slot, url: str) -> Response:
    """A plain call's request that tern_py_local_fetch handed back (in the slot's cell, the
    engine still held): it runs, it failed, or its response outgrew the scratch. Runs it to the
    end (at once when it completed), reads it again into a scratch grown for it; then one C call
    (tern_py_call_end) frees it and lets go of the engine. An exception before this function's
    body runs (a signal handler's, at its entry) is the caller's to end the same way."""
    try:
        cell = slot.cell
        sc = slot.scratch
        w = slot.w
        ptr = local.ptr
        while lib.tern_py_local_run(ptr, w, 200) != 1:
            pass
        n = take(cell[0], sc, cell)
        req = cell[0]
        if req == _NULL:  # succeeded, read whole, freed
            return build_response(sc, n)
        status = sc.info.error
        if status:
            _raise_failed(local, req, status, url)
        return build_response(sc, n)  # before the request is freed: the body is read from it
    finally:
        # A C call straight from here: no Python function's entry (where a pending signal's
        # handler runs) between the request and its end.
        _call_end(slot.call)


class _Engines:
    """A client's engines: one on a loop the creating thread runs while it waits (its requests
    take no thread hop), and, made when another thread first sends, one with its own loop
    thread for the others. Kept apart from the client so its finalizer holds no reference."""

    def __init__(self, settings: Dict[str, Any]) -> None:
        self.settings = settings
        self.local = LocalEngine(**settings)
        self.shared: Optional[EngineHandle] = None
        self.lock = threading.Lock()
        self.closed = False

    def shared_engine(self) -> EngineHandle:
        with self.lock:
            if self.closed:
                raise ClosedError("the client is closed", 0, "ESHUTDOWN", None)
            if self.shared is None:
                self.shared = EngineHandle(**self.settings)
            return self.shared

    def stat(self, which: int) -> int:
        with self.lock:
            shared = self.shared
        return self.local.stat(which) + (shared.stat(which) if shared is not None else 0)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            shared = self.shared
        try:
            self.local.close()
        finally:  # also when Ctrl-C cut the wait short (the local engine's owner frees it)
            if shared is not None:
                shared.close()


def _method(method: str, doc: str) -> Callable[..., Response]:
    """Client's method ``method``: with a keyword argument, :meth:`Client.request`; without (a
    request with nothing but the client's defaults), on the creating thread, made, set up,
    submitted, run and, when it completes in the first slice (the usual case), read and freed
    by one C call (tern_py_local_fetch) from the client's template; otherwise, or when the
    engine refuses it as set up, the long way (which says why). One function per method, made
    here, not a method calling a shared one: each Python call costs about 500 instructions, a
    tenth of what a request spends in Python."""
    cmethod = METHODS[method]
    fetch = lib.tern_py_local_fetch  # a closure cell: cffi's lib looks a name up per use
    end = lib.tern_py_call_end
    unpack = INFO.unpack_from

    def call(self: Client, url: str, **kwargs: Any) -> Response:
        if kwargs:
            return self.request(method, url, **kwargs)
        local = self._local
        if _get_ident() != local.owner:
            return self.request(method, url)
        items = self._options.headers._items
        if items is not self._tpl_items:
            self._tpl = template(self._options)
            self._tpl_items = items
        tpl = self._tpl
        if tpl is None:
            return self.request(method, url)
        # The spare slot (a nested call, rare, takes another: local.take_slot()).
        slot = local.spare
        if slot is None:
            slot = local.take_slot()
        else:
            local.spare = None
        try:
            sc = slot.scratch
            try:
                # The engine held in C for the call (no Python lock; see LocalEngine).
                n = fetch(slot.call, tpl.c, url.encode(), cmethod)
                if n > 0:  # completed, read whole into the scratch, freed, engine let go
                    # build_response(sc, n), inline (a Python call costs ~500 instructions;
                    # keep the two the same). The body is in the scratch (body_at), or empty:
                    # fetch frees a request only then.
                    info = unpack(sc.infoview)
                    view = sc.view
                    raw = view[0:n]
                    headers = ResponseHeaders()
                    headers._raw = raw
                    headers._start = info[9]
                    headers._look = info[11]
                    r = _new(Response)
                    r.status_code = info[0]
                    r.headers = headers
                    body_at = info[12]
                    r.content = view[body_at:info[8]] if body_at else b""
                    r._raw = raw
                    r._info = info
                    r.path = None
                    return r
                if n == 0:  # handed back, the engine still held
                    return _fetch_rest(local, slot, url)
            except BaseException:
                # Whatever cut it short (a signal handler's exception as fetch returned, or at
                # _fetch_rest's entry, say): the slot's cell and call say what is left, and
                # one C call, called from here with no Python function entered first (where a
                # second signal's handler could cut it short), frees and lets go of it. Should
                # even that be cut, the slot's next fetch or hold ends it first.
                end(slot.call)
                raise
        finally:
            # The spare again (a nested call's slot, put there before, is dropped: fewer
            # steps than a list's pop and append, ~250 instructions).
            local.spare = slot
        # Refused as set up, or the client closed (the long way says which).
        return self.request(method, url)

    call.__name__ = method.lower()
    call.__qualname__ = "Client." + call.__name__
    call.__doc__ = doc
    return call


class Client:
    """An HTTP client with its own engine: a keep-alive connection pool and TLS session reuse.
    The thread that makes the client runs the engine's loop itself while it waits (no thread
    hop per request); other threads share a second engine with a loop thread. Use it as a
    context manager, or call :meth:`close`.

    Every argument sets a default for the client's requests (a request's own argument wins):

    - ``base_url``: prefixed to relative URLs; ``headers``, ``params``: added to every request;
    - ``auth``: ``(user, password)`` or :class:`BasicAuth` (sent at once), :class:`DigestAuth`
      or :class:`AnyAuth` (answered to a 401 challenge);
    - ``timeout``: a :class:`Timeout`, seconds per phase, ``(connect, read)`` or ``None``;
    - ``follow_redirects`` (default True) up to ``max_redirects`` (20);
    - ``verify``: True (system CAs), False (no verification), or a CA file or directory;
      ``cert``: a client certificate file, ``(cert, key)`` or ``(cert, key, password)``;
    - ``proxy``: ``"http://[user:pass@]host:port"`` for every scheme (or a SOCKS proxy:
      ``socks5h://``, ``socks5://``, ``socks4a://``, ``socks4://``), ``proxies``: per scheme
      (``{"http": ..., "https": ...}``), ``no_proxy``: hosts reached directly (curl's syntax),
      ``proxy_auth``: ``(user, password)`` for the proxy (Basic or Digest);
    - ``decompress``: ask for gzip/deflate (and br, zstd when built in) and decode (default);
    - engine settings: ``user_agent``, ``max_connections_per_origin`` (default 6, as
      browsers and URLSession; 0: unlimited), ``max_active_requests`` (0: unlimited), ``idle_timeout`` (seconds a pooled connection is kept),
      ``buffer_size`` (the I/O buffer of each connection), ``resolve`` (curl's ``--resolve``
      entries ``"HOST:PORT:ADDR"``).

    A client may be used from several threads at once.
    """

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
        user_agent: Optional[str] = None,
        max_connections_per_origin: int = 6,
        max_active_requests: int = 0,
        idle_timeout: Optional[float] = None,
        buffer_size: Optional[int] = None,
        resolve: Sequence[str] = (),
    ) -> None:
        self._options = Options(
            base_url=base_url, headers=headers, params=params, auth=auth, timeout=timeout,
            follow_redirects=follow_redirects, max_redirects=max_redirects, verify=verify,
            cert=cert, proxy=proxy, proxies=proxies, no_proxy=no_proxy, proxy_auth=proxy_auth,
            decompress=decompress,
        )
        self._engines = _Engines(dict(
            user_agent=user_agent, max_connections_per_origin=max_connections_per_origin,
            max_active_requests=max_active_requests, idle_timeout=idle_timeout,
            buffer_size=buffer_size, resolve=tuple(resolve),
        ))
        # Frees the engines when the client is collected unclosed, or at interpreter exit.
        self._finalizer = weakref.finalize(self, self._engines.close)
        self._local = self._engines.local  # the plain call's, one attribute away
        # A plain call's template (see _method), made again when the headers change (every
        # change gives Headers a new list).
        self._tpl: Optional[Template] = None
        self._tpl_items: Any = None
        self._download_buffer = DOWNLOAD_BUFFER if buffer_size is None else None

    @property
    def headers(self) -> Any:
        """The headers sent with every request (a mutable :class:`Headers`)."""
        return self._options.headers

    @property
    def is_closed(self) -> bool:
        return self._engines.closed

    def close(self) -> None:
        """Closes the connections and stops the engines; requests still running in other
        threads fail with :class:`ClosedError`."""
        self._finalizer()

    def _run(self, req: Any, url: str, progress: Optional[ProgressCallback],
             path: Optional[str] = None) -> Response:
        engines = self._engines
        if threading.get_ident() == engines.local.owner:
            return run_local(engines.local, req, url, progress, path)
        return run_sync(engines.shared_engine(), req, url, progress, path)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def stats(self) -> Dict[str, int]:
        """The engine's counters: connections opened/open/idle, requests active/completed,
        requests sent on a reused connection."""
        e = self._engines
        return {
            "connections_opened": e.stat(lib.TERN_STAT_CONNECTIONS_OPENED),
            "connections_open": e.stat(lib.TERN_STAT_CONNECTIONS_OPEN),
            "connections_idle": e.stat(lib.TERN_STAT_CONNECTIONS_IDLE),
            "requests_active": e.stat(lib.TERN_STAT_REQUESTS_ACTIVE),
            "requests_completed": e.stat(lib.TERN_STAT_REQUESTS_COMPLETED),
            "reused": e.stat(lib.TERN_STAT_REUSED),
        }

    def request(
        self,
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
        progress: Optional[ProgressCallback] = None,
    ) -> Response:
        """Sends one request and returns its final response.

        The body is one of: ``content`` (bytes, str, :class:`File` or an open binary file,
        streamed from disk), ``data`` (a dict: form-encoded; bytes/str: as is), ``json`` (any
        JSON value), or ``files`` (a multipart form, with ``data`` as its plain fields; each
        file a path, :class:`File`, open file, bytes, or a ``(filename, source[, type])``
        tuple; files are streamed from disk, never read whole).

        ``progress`` is called in this thread with a :class:`Progress` while the body is sent
        and received; returning True cancels the request (:class:`Cancelled`).

        Raises a :class:`TernError` subclass when no response arrives.
        """
        cell = request_cell()
        try:
            req = new_request(cell)
            full = prepare(
                req, self._options, method, url, params=params, headers=headers,
                content=content, data=data, json=json, files=files, auth=auth, timeout=timeout,
                follow_redirects=follow_redirects, verify=verify, cert=cert, proxy=proxy,
            )
            return self._run(req, full, progress)
        finally:
            if cell[0] != ffi.NULL:  # inline: a function call here could be cut at its start
                lib.tern_request_free(cell[0])

    def download(
        self,
        url: str,
        path: Union[str, "os.PathLike[str]"],
        *,
        resume: bool = False,
        offset: int = 0,
        end: int = 0,
        progress: Optional[ProgressCallback] = None,
        method: str = "GET",
        params: ParamTypes = None,
        headers: Optional[HeaderTypes] = None,
        auth: Any = UNSET,
        timeout: Any = UNSET,
        follow_redirects: Any = UNSET,
        verify: Any = UNSET,
        cert: Any = UNSET,
        proxy: Any = UNSET,
    ) -> Response:
        """Downloads a 2xx body into ``path``, written by the engine as it reads the socket,
        through a 1 MiB connection buffer unless the client sets ``buffer_size`` (downloads
        then share pooled connections with each other, not with other requests).

        The body goes to ``PATH.part``, which replaces ``path`` only when complete, so a failed
        download never truncates a good file. ``resume=True`` continues an existing file from
        its size (a Range request; a server ignoring it restarts the file). ``offset``/``end``
        ask for bytes ``[offset, end)`` (``end`` 0: to the end). Another status leaves the file
        alone and keeps its body (up to 1 MiB) in ``response.content``. The returned response
        has ``path`` set and an empty ``content`` on success.
        """
        cell = request_cell()
        try:
            req = new_request(cell)
            p = os.fspath(path)
            full = prepare(
                req, self._options, method, url, params=params, headers=headers, auth=auth,
                timeout=timeout, follow_redirects=follow_redirects, verify=verify, cert=cert,
                proxy=proxy, download=(p, offset, end, 1 if resume else 0),
                download_buffer=self._download_buffer,
            )
            return self._run(req, full, progress, path=p)
        finally:
            if cell[0] != ffi.NULL:
                lib.tern_request_free(cell[0])

    get = _method("GET", "A GET request (see :meth:`request` for the arguments).")
    head = _method("HEAD", "A HEAD request (no body is read).")
    options = _method("OPTIONS", "An OPTIONS request.")
    delete = _method("DELETE", "A DELETE request.")
    post = _method("POST", "A POST request (``content``, ``data``, ``json`` or ``files`` give the "
                   "body).")
    put = _method("PUT", "A PUT request.")
    patch = _method("PATCH", "A PATCH request.")
