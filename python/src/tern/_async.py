"""The asyncio client."""

from __future__ import annotations

import asyncio
import itertools
import os
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

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
    engine_stats,
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


def _close(handle: EngineHandle, completers: Dict[Any, _Completer]) -> None:
    """The client's finalizer: frees the engine (its thread joined: no completion comes after),
    then hands each completion queue to its loop to detach (or detaches it here when the loop
    is closed)."""
    handle.close()
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

    ``async with tern.AsyncClient() as client: r = await client.get(url)``. Completions are
    queued in C by the engine's thread and read by the event loop in batches (an eventfd it
    watches with ``add_reader``); nothing blocks the loop. Canceling the awaiting task cancels
    the request in the engine.
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
        max_connections_per_origin: int = 0,
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
        self._handle = EngineHandle(
            user_agent=user_agent, max_connections_per_origin=max_connections_per_origin,
            max_active_requests=max_active_requests, idle_timeout=idle_timeout,
            buffer_size=buffer_size, resolve=resolve,
        )
        # Completion queues per event loop (None: the loop has no add_reader).
        self._completers: Dict[Any, _Completer] = {}
        self._no_reader: Dict[Any, None] = {}
        self._finalizer = weakref.finalize(self, _close, self._handle, self._completers)
        self._download_buffer = _core.DOWNLOAD_BUFFER if buffer_size is None else None
        # A plain call's template, as Client's (made again when the headers change).
        self._tpl: Optional[_core.Template] = None
        self._tpl_items: Any = None

    def _completer(self) -> Optional[_Completer]:
        loop = asyncio.get_running_loop()
        comp = self._completers.get(loop)
        if comp is None and loop not in self._no_reader and self._handle.ptr is not None:
            try:
                comp = self._completers[loop] = _Completer(loop)
            except (NotImplementedError, OSError, MemoryError):
                self._no_reader[loop] = None
        return comp

    async def _plain(self, method: str, url: str) -> Response:
        """A request with nothing but the client's defaults (no keyword argument): made and
        set up from the client's template in one C call."""
        items = self._options.headers._items
        if items is not self._tpl_items:
            self._tpl = _core.template(self._options)
            self._tpl_items = items
        tpl = self._tpl
        if tpl is not None:
            cell = _core.request_cell()
            try:
                if lib.tern_py_make_plain(tpl.c, url.encode(), _core.METHODS[method], cell) == 0:
                    return await run_async(self._handle, cell[0], url, None,
                                           completer=self._completer())
            finally:
                if cell[0] != ffi.NULL:
                    lib.tern_request_free(cell[0])
        return await self.request(method, url)

    @property
    def headers(self) -> Any:
        """The headers sent with every request (a mutable :class:`Headers`)."""
        return self._options.headers

    @property
    def is_closed(self) -> bool:
        return self._handle.ptr is None

    async def aclose(self) -> None:
        """Closes the connections and stops the engine's thread (joined off the event loop);
        requests still running fail with :class:`ClosedError`."""
        if self._finalizer.alive:
            await asyncio.get_running_loop().run_in_executor(None, self._finalizer)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def stats(self) -> Dict[str, int]:
        """The engine's counters (see :meth:`Client.stats`)."""
        return engine_stats(self._handle)

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
            return await run_async(self._handle, req, full, progress,
                                   completer=self._completer())
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
            return await run_async(self._handle, req, full, progress, path=p,
                                   completer=self._completer())
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
