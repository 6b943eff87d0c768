"""The asyncio client."""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _core
from ._core import (
    UNSET,
    CertTypes,
    EngineHandle,
    Options,
    ProxiesTypes,
    ProxyTypes,
    VerifyTypes,
    check,
    error_for,
    new_request,
    prepare,
    request_cell,
    response_from,
)
from ._models import (
    AuthTypes,
    FilesTypes,
    HeaderTypes,
    ParamTypes,
    Progress,
    Response,
    Timeout,
    TimeoutTypes,
)
from ._errors import ClosedError
from ._tern import ffi, lib

ProgressCallback = Callable[[Progress], Any]

# Requests in flight: id (the C user_data) -> (loop, future, progress callback). A request
# canceled by its task leaves this table before tern_request_free, so a completion already
# on its way finds nothing and does nothing.
_pending: Dict[int, Tuple[asyncio.AbstractEventLoop, "asyncio.Future[int]", Optional[ProgressCallback]]] = {}
_ids = itertools.count(1)
_PHASES = {lib.TERN_PROGRESS_UPLOAD: "upload", lib.TERN_PROGRESS_DOWNLOAD: "download"}


def _resolve(fut: "asyncio.Future[int]", status: int) -> None:
    if not fut.done():
        fut.set_result(status)


# The two functions below run on the engine's loop thread, holding the GIL (cffi takes it).
# They only hand over to the event loop's thread, and never let an exception reach C.


@ffi.def_extern()
def _tern_async_complete(req: Any, status: int, user_data: Any) -> None:
    _core._engine_thread.active = True
    try:
        entry = _pending.pop(int(ffi.cast("intptr_t", user_data)), None)
        if entry is not None:
            entry[0].call_soon_threadsafe(_resolve, entry[1], status)
    except BaseException:  # the loop is closed: nobody is waiting any more
        pass
    finally:
        _core._engine_thread.active = False


@ffi.def_extern()
def _tern_async_progress(req: Any, state: int, percent: int, done: int, total: int,
                         user_data: Any) -> int:
    _core._engine_thread.active = True
    try:
        entry = _pending.get(int(ffi.cast("intptr_t", user_data)))
        if entry is not None and entry[2] is not None:
            report = Progress(_PHASES.get(state, "download"), percent, int(done), int(total))
            entry[0].call_soon_threadsafe(_call_progress, entry[2], report)
    except BaseException:
        pass
    finally:
        _core._engine_thread.active = False
    return 0


def _call_progress(cb: ProgressCallback, report: Progress) -> None:
    try:
        cb(report)
    except Exception as exc:  # reported like any callback error of the loop
        asyncio.get_running_loop().call_exception_handler(
            {"message": "tern: exception in a progress callback", "exception": exc}
        )


class _Completer:
    """One client's completions for one event loop, without Python on the engine's thread: the
    engine's thread queues each request's id and status in C (tern_py_queue) and writes an
    eventfd once per batch; the loop reads the batch when the eventfd is readable (add_reader)
    and resolves the futures. The C queue is freed only after the client's engine (detach)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        q = lib.tern_py_queue_new()
        if q == ffi.NULL:
            raise MemoryError("tern: cannot make a completion queue")
        self.q: Any = q
        self.loop = loop
        self.fd = lib.tern_py_queue_fd(q)
        self.futures: Dict[int, "asyncio.Future[int]"] = {}
        self.ids = ffi.new("int64_t[]", 256)
        self.statuses = ffi.new("int[]", 256)
        try:
            loop.add_reader(self.fd, self.drain)
        except BaseException:
            lib.tern_py_queue_free(q)
            raise

    def drain(self) -> None:
        q, ids, statuses, futures = self.q, self.ids, self.statuses, self.futures
        while q is not None:
            n = lib.tern_py_queue_take(q, ids, statuses, 256)
            for i in range(n):
                fut = futures.pop(ids[i], None)
                if fut is not None and not fut.done():
                    fut.set_result(statuses[i])
            if n < 256:
                break

    def detach(self) -> None:
        """On the loop's thread, once the engine is freed: the last completions, then the
        queue goes."""
        if self.q is None:
            return
        try:
            self.drain()
        finally:
            q, self.q = self.q, None
            try:
                self.loop.remove_reader(self.fd)
            except Exception:  # noqa: BLE001  (a closed loop has nothing registered)
                pass
            lib.tern_py_queue_free(q)


class _LoopEngine:
    """A client's engine on one event loop's own thread: a libuv loop of its own (no engine
    thread) whose backend fd the event loop watches with ``add_reader``; when it is readable
    (a socket's bytes), after a submit (one run per pass) and at the engine's timers the event
    loop runs it once without waiting, in C, and the completions it queued (in C, no eventfd:
    same thread) are taken in one call and resolve their futures. The engine's timers get one
    event-loop timer, moved only when the engine's next deadline comes earlier. Requests
    submitted during one pass of the event loop are written together on its next pass: no
    thread hop, no lock contention, no wake-up per request."""

    __slots__ = ("loop", "ptr", "q", "fd", "pid", "futures", "ids", "statuses", "tmo",
                 "timer", "timer_at", "scratch", "run_due")

    def __init__(self, loop: asyncio.AbstractEventLoop, settings: Dict[str, Any]) -> None:
        cfg = _core._config(**settings)
        try:
            errp = ffi.new("int *")
            ptr = lib.tern_py_local_new(cfg, errp)
            if ptr == ffi.NULL:
                _core.raise_code(errp[0] if errp[0] < 0 else -1, "tern_engine_new_on_loop")
        finally:
            lib.tern_config_free(cfg)
        q = lib.tern_py_queue_new_local()
        if q == ffi.NULL:
            lib.tern_py_local_free(ptr)
            raise MemoryError("tern: cannot make a completion queue")
        self.loop = loop
        self.ptr: Any = ptr
        self.q: Any = q
        self.fd = lib.tern_py_local_fd(ptr)
        self.pid = os.getpid()
        self.futures: Dict[int, "asyncio.Future[int]"] = {}
        self.ids = ffi.new("int64_t[]", 256)
        self.statuses = ffi.new("int[]", 256)
        self.tmo = ffi.new("int *")
        self.timer: Optional[asyncio.TimerHandle] = None
        self.timer_at = 0.0
        # Where responses are read (take, then build: no await between, one task at a time).
        self.scratch = _core.Scratch(8192)
        self.run_due = False
        try:
            loop.add_reader(self.fd, self.run)
        except BaseException:
            lib.tern_py_local_free(ptr)
            lib.tern_py_queue_free(q)
            raise
        self.run()  # puts the engine's wake-up descriptor in the loop's epoll set

    def run(self) -> None:
        """Runs the engine's loop once without waiting and resolves what completed."""
        self.run_due = False
        ptr = self.ptr
        if ptr is None:
            return
        ids, statuses, futures = self.ids, self.statuses, self.futures
        n = lib.tern_py_aio_run(ptr, self.q, ids, statuses, 256, self.tmo)
        while True:
            for i in range(n):
                fut = futures.pop(ids[i], None)
                if fut is not None and not fut.done():
                    fut.set_result(statuses[i])
            q = self.q
            if n < 256 or q is None:  # None: closed by a finalizer the callbacks set off
                break
            n = lib.tern_py_queue_take(q, ids, statuses, 256)
        ms = self.tmo[0]
        if ms >= 0:
            self._wake_in(ms)

    def run_soon(self) -> None:
        """Runs the engine's loop on the event loop's next pass, once however often asked: after
        a submit (on the loop's own thread the engine sends itself no wake-up, so the backend fd
        does not turn readable for it; one run starts every request submitted in this pass) and
        when the engine has work due at once."""
        if not self.run_due:
            self.run_due = True
            self.loop.call_soon(self.run)

    def _wake_in(self, ms: int) -> None:
        """The engine's loop is to run again within ms (its next timer)."""
        if ms == 0:
            self.run_soon()
            return
        loop = self.loop
        at = loop.time() + ms / 1000.0
        timer = self.timer
        if timer is not None:
            if self.timer_at <= at + 0.001:
                return  # already due no later: it runs the loop, which says what is next
            timer.cancel()
        self.timer_at = at
        self.timer = loop.call_at(at, self._on_timer)

    def _on_timer(self) -> None:
        self.timer = None
        self.run()

    def stat(self, which: int) -> int:
        return int(lib.tern_py_local_stat(self.ptr, which)) if self.ptr is not None else 0

    def close(self) -> None:
        """On the loop's thread (or once it is closed or not running): frees the engine; the
        requests in flight complete with ClosedError."""
        ptr, self.ptr = self.ptr, None
        if ptr is None:
            return
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        try:
            self.loop.remove_reader(self.fd)
        except Exception:  # noqa: BLE001  (a closed loop has nothing registered)
            pass
        q = self.q
        if self.pid != os.getpid():
            return  # a forked child: the parent's engine is not ours to free
        lib.tern_py_local_free(ptr)  # requests in flight complete (ESHUTDOWN) into q
        ids, statuses, futures = self.ids, self.statuses, self.futures
        live = not self.loop.is_closed()
        while True:
            n = lib.tern_py_queue_take(q, ids, statuses, 256)
            for i in range(n):
                fut = futures.pop(ids[i], None)
                if live and fut is not None and not fut.done():
                    fut.set_result(statuses[i])
            if n < 256:
                break
        for fut in futures.values():
            if live and not fut.done():
                fut.set_result(lib.TERN_ESHUTDOWN)
        futures.clear()
        self.q = None
        lib.tern_py_queue_free(q)

    def close_soon(self) -> None:
        """From any thread: closes on the loop's thread when the loop runs elsewhere."""
        loop = self.loop
        if (asyncio._get_running_loop() is loop or loop.is_closed()
                or not loop.is_running()):
            self.close()
            return
        try:
            loop.call_soon_threadsafe(self.close)
        except RuntimeError:  # closed meanwhile
            self.close()


class _State:
    """What a client's finalizer frees, kept apart from the client: the engines on event loops
    (one per loop), the engine with a thread of its own (made on first need: progress
    callbacks and downloads), and that engine's completion queues per loop."""

    __slots__ = ("settings", "lock", "closed", "handle", "loop_engines", "completers",
                 "no_reader")

    def __init__(self, settings: Dict[str, Any]) -> None:
        self.settings = settings
        self.lock = threading.Lock()
        self.closed = False
        self.handle: Optional[EngineHandle] = None
        self.loop_engines: Dict[Any, _LoopEngine] = {}
        self.completers: Dict[Any, _Completer] = {}
        self.no_reader: Dict[Any, None] = {}


def _close(state: _State) -> None:
    """The client's finalizer: closes the engines on event loops (each on its loop's thread
    when that loop runs elsewhere), then frees the threaded engine (its thread joined: no
    completion comes after) and hands each of its completion queues to its loop to detach (or
    detaches it here when the loop is closed)."""
    with state.lock:
        state.closed = True
        handle, state.handle = state.handle, None
    for loop, le in list(state.loop_engines.items()):
        state.loop_engines.pop(loop, None)
        le.close_soon()
    if handle is not None:
        handle.close()
    completers = state.completers
    for loop, comp in list(completers.items()):
        completers.pop(loop, None)
        try:
            if loop.is_closed():
                raise RuntimeError("closed")
            loop.call_soon_threadsafe(comp.detach)
        except RuntimeError:
            comp.detach()


async def run_async(handle: EngineHandle, req: Any, url: str,
                    progress: Optional[ProgressCallback], path: Optional[str] = None,
                    completer: Optional[_Completer] = None) -> Response:
    loop = asyncio.get_running_loop()
    fut: "asyncio.Future[int]" = loop.create_future()
    rid = next(_ids)
    pending: Dict[int, Any]
    if completer is not None and progress is None and completer.q is not None:
        check(lib.tern_py_queue_arm(completer.q, req, rid), "callbacks")
        pending = completer.futures
        pending[rid] = fut
    else:
        ud = ffi.cast("void *", rid)
        check(lib.tern_request_set_complete_cb(req, lib._tern_async_complete, ud), "callbacks")
        if progress is not None:
            check(lib.tern_request_set_progress_cb(req, lib._tern_async_progress, ud),
                  "callbacks")
        pending = _pending
        pending[rid] = (loop, fut, progress)
    try:
        handle.submit(req, url)
    except BaseException:
        pending.pop(rid, None)
        raise
    try:
        status = await fut
    except BaseException:  # the task was canceled: so is the request
        pending.pop(rid, None)
        lib.tern_request_cancel(req)
        raise
    if status:
        raise error_for(req, status, url)
    return response_from(req, path)


class AsyncClient:
    """The asyncio form of :class:`Client`: same arguments, awaitable methods.

    ``async with tern.AsyncClient() as client: r = await client.get(url)``. Requests run on an
    engine of the event loop's own (per loop): its libuv loop is watched by the event loop
    (``add_reader``) and run without waiting when it has work, so no thread hop, lock or
    wake-up is paid per request; the engine never waits in the loop. Downloads and requests
    with a progress callback run on an engine with a thread of its own (made on first use),
    completions queued in C and read by the event loop in batches, so that file writes stay off
    the loop. Canceling the awaiting task cancels the request in the engine.
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
        import weakref

        self._options = Options(
            base_url=base_url, headers=headers, params=params, auth=auth, timeout=timeout,
            follow_redirects=follow_redirects, max_redirects=max_redirects, verify=verify,
            cert=cert, proxy=proxy, proxies=proxies, no_proxy=no_proxy, proxy_auth=proxy_auth,
            decompress=decompress,
        )
        settings = dict(
            user_agent=user_agent, max_connections_per_origin=max_connections_per_origin,
            max_active_requests=max_active_requests, idle_timeout=idle_timeout,
            buffer_size=buffer_size, resolve=tuple(resolve),
        )
        # The engines are made when first needed: the settings are checked now.
        lib.tern_config_free(_core._config(**settings))
        self._state = _State(settings)
        # Per event loop: its engine (_LoopEngine), or, on the threaded engine, its completion
        # queue (None: the loop has no add_reader).
        self._loop_engines = self._state.loop_engines
        self._completers = self._state.completers
        self._finalizer = weakref.finalize(self, _close, self._state)
        self._download_buffer = _core.DOWNLOAD_BUFFER if buffer_size is None else None
        # A plain call's template, as Client's (made again when the headers change).
        self._tpl: Optional[_core.Template] = None
        self._tpl_items: Any = None

    def _threaded(self) -> EngineHandle:
        """The engine with a thread of its own (made on first use)."""
        st = self._state
        with st.lock:
            if st.closed:
                raise ClosedError("the client is closed", 0, "ESHUTDOWN", None)
            if st.handle is None:
                st.handle = EngineHandle(**st.settings)
            return st.handle

    def _completer(self) -> Optional[_Completer]:
        """The threaded engine's completion queue for the running loop."""
        loop = asyncio.get_running_loop()
        st = self._state
        comp = st.completers.get(loop)
        if comp is None and loop not in st.no_reader and not st.closed:
            try:
                comp = st.completers[loop] = _Completer(loop)
            except (NotImplementedError, OSError, MemoryError):
                st.no_reader[loop] = None
        return comp

    def _loop_engine(self, loop: asyncio.AbstractEventLoop) -> Optional[_LoopEngine]:
        """The running loop's engine (made on first use), or None when the loop cannot watch
        a descriptor (the threaded engine serves it). Raises ClosedError once closed."""
        st = self._state
        le = st.loop_engines.get(loop)
        if le is not None and le.ptr is not None:
            return le
        if st.closed:
            raise ClosedError("the client is closed", 0, "ESHUTDOWN", None)
        if loop in st.no_reader:
            return None
        try:
            le = st.loop_engines[loop] = _LoopEngine(loop, st.settings)
        except NotImplementedError:
            st.no_reader[loop] = None
            return None
        return le

    async def _send(self, req: Any, url: str, progress: Optional[ProgressCallback],
                    path: Optional[str] = None, loop_ok: bool = True) -> Response:
        """Submits a prepared request: to the loop's engine, or (progress, downloads, a loop
        without add_reader) to the threaded one."""
        if loop_ok and progress is None:
            loop = asyncio.get_running_loop()
            le = self._loop_engine(loop)
            if le is not None:
                rid = next(_ids)
                check(lib.tern_py_aio_submit(le.ptr, le.q, req, rid), "submit")
                le.run_soon()
                fut = loop.create_future()
                futures = le.futures
                futures[rid] = fut
                try:
                    status = await fut
                except BaseException:  # the task was canceled: so is the request
                    futures.pop(rid, None)
                    lib.tern_request_cancel(req)
                    raise
                if status:
                    raise error_for(req, status, url)
                sc = le.scratch
                return _core.build_response(sc, _core.take(req, sc), path)
        return await run_async(self._threaded(), req, url, progress, path=path,
                               completer=self._completer())

    async def _plain(self, method: str, url: str) -> Response:
        """A request with nothing but the client's defaults (no keyword argument): made and
        set up from the client's template in one C call."""
        items = self._options.headers._items
        if items is not self._tpl_items:
            self._tpl = _core.template(self._options)
            self._tpl_items = items
        tpl = self._tpl
        if tpl is not None:
            loop = asyncio.get_running_loop()
            le = self._loop_engine(loop)
            if le is not None:
                cell = ffi.new("tern_request_t *[1]")
                rid = next(_ids)
                try:
                    if lib.tern_py_aio_go(le.ptr, le.q, tpl.c, url.encode(),
                                          _core.METHODS[method], rid, cell) == 0:
                        le.run_soon()
                        fut = loop.create_future()
                        futures = le.futures
                        futures[rid] = fut
                        try:
                            status = await fut
                        except BaseException:  # the task was canceled: so is the request
                            futures.pop(rid, None)
                            lib.tern_request_cancel(cell[0])
                            raise
                        req = cell[0]
                        if status:
                            raise error_for(req, status, url)
                        sc = le.scratch
                        return _core.build_response(sc, _core.take(req, sc, cell))
                finally:
                    if cell[0] != ffi.NULL:  # inline: a call here could be cut at its start
                        lib.tern_request_free(cell[0])
        return await self.request(method, url)

    @property
    def headers(self) -> Any:
        """The headers sent with every request (a mutable :class:`Headers`)."""
        return self._options.headers

    @property
    def is_closed(self) -> bool:
        return self._state.closed

    async def aclose(self) -> None:
        """Closes the connections and stops the engines (a thread's joined off the event loop);
        requests still running fail with :class:`ClosedError`."""
        st = self._state
        loop = asyncio.get_running_loop()
        with st.lock:
            st.closed = True
        le = st.loop_engines.pop(loop, None)
        if le is not None:
            le.close()  # here, on its loop's thread
        if self._finalizer.alive:
            if st.handle is not None:
                await loop.run_in_executor(None, self._finalizer)
            else:
                self._finalizer()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def stats(self) -> Dict[str, int]:
        """The engines' counters, summed (see :meth:`Client.stats`)."""
        st = self._state
        engines: List[Any] = list(st.loop_engines.values())
        if st.handle is not None:
            engines.append(st.handle)
        names = (("connections_opened", lib.TERN_STAT_CONNECTIONS_OPENED),
                 ("connections_open", lib.TERN_STAT_CONNECTIONS_OPEN),
                 ("connections_idle", lib.TERN_STAT_CONNECTIONS_IDLE),
                 ("requests_active", lib.TERN_STAT_REQUESTS_ACTIVE),
                 ("requests_completed", lib.TERN_STAT_REQUESTS_COMPLETED),
                 ("reused", lib.TERN_STAT_REUSED))
        return {name: sum(e.stat(which) for e in engines) for name, which in names}

    async def request(
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
        """Sends one request (arguments as :meth:`Client.request`). ``progress`` is called on
        the event loop's thread; cancel the task to cancel the request."""
        cell = request_cell()
        try:
            req = new_request(cell)
            full = prepare(
                req, self._options, method, url, params=params, headers=headers,
                content=content, data=data, json=json, files=files, auth=auth, timeout=timeout,
                follow_redirects=follow_redirects, verify=verify, cert=cert, proxy=proxy,
            )
            return await self._send(req, full, progress)
        finally:
            if cell[0] != ffi.NULL:  # inline: a function call here could be cut at its start
                lib.tern_request_free(cell[0])

    async def download(
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
        """Downloads into ``path`` (see :meth:`Client.download`)."""
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
            return await self._send(req, full, progress, path=p, loop_ok=False)
        finally:
            if cell[0] != ffi.NULL:  # inline: a function call here could be cut at its start
                lib.tern_request_free(cell[0])

    async def get(self, url: str, **kwargs: Any) -> Response:
        """A GET request."""
        if kwargs:
            return await self.request("GET", url, **kwargs)
        return await self._plain("GET", url)

    async def head(self, url: str, **kwargs: Any) -> Response:
        """A HEAD request."""
        if kwargs:
            return await self.request("HEAD", url, **kwargs)
        return await self._plain("HEAD", url)

    async def options(self, url: str, **kwargs: Any) -> Response:
        """An OPTIONS request."""
        if kwargs:
            return await self.request("OPTIONS", url, **kwargs)
        return await self._plain("OPTIONS", url)

    async def delete(self, url: str, **kwargs: Any) -> Response:
        """A DELETE request."""
        if kwargs:
            return await self.request("DELETE", url, **kwargs)
        return await self._plain("DELETE", url)

    async def post(self, url: str, **kwargs: Any) -> Response:
        """A POST request."""
        if kwargs:
            return await self.request("POST", url, **kwargs)
        return await self._plain("POST", url)

    async def put(self, url: str, **kwargs: Any) -> Response:
        """A PUT request."""
        if kwargs:
            return await self.request("PUT", url, **kwargs)
        return await self._plain("PUT", url)

    async def patch(self, url: str, **kwargs: Any) -> Response:
        """A PATCH request."""
        if kwargs:
            return await self.request("PATCH", url, **kwargs)
        return await self._plain("PATCH", url)
