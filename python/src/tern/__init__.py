"""Tern: an HTTP/1.1 client engine in C on libuv, from Python.

The shape is the one of requests and httpx::

    import tern

    r = tern.get("https://example.org/", params={"q": "x"}, timeout=10)
    r.raise_for_status()
    print(r.status_code, r.headers["content-type"], r.json())

    with tern.Client(base_url="https://api.example.org", auth=("user", "pass")) as client:
        client.post("/items", json={"name": "x"})
        client.download("/big.iso", "big.iso", resume=True, progress=print)

    async with tern.AsyncClient() as client:
        r = await client.get("https://example.org/")

The engine runs on its own thread (one per client); a synchronous call waits on a condition
variable with the GIL released, so other Python threads run meanwhile. Module-level functions
use one shared client, made on first use and closed at exit.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any, List, Optional, Union

from ._client import Client
from ._core import requests_live as _requests_live
from ._errors import (
    AuthError,
    BodyTimeout,
    Cancelled,
    ClosedError,
    ConnectError,
    ConnectTimeout,
    DecodeError,
    FileError,
    HeadersTimeout,
    HTTPStatusError,
    InvalidURL,
    NetworkError,
    ProtocolError,
    ProxyError,
    RedirectError,
    TernError,
    TimeoutException,
    TLSError,
    TLSVerifyError,
    TooManyRedirects,
    TotalTimeout,
    UsageError,
)
from ._models import (
    AnyAuth,
    NTLMAuth,
    BasicAuth,
    DigestAuth,
    File,
    Headers,
    Progress,
    Response,
    Timeout,
)
from ._tern import ffi as _ffi
from ._tern import lib as _lib

if TYPE_CHECKING:
    from ._async import AsyncClient

__version__ = "0.5.0"


def __getattr__(name: str) -> Any:
    # AsyncClient is loaded on first use: importing asyncio is half of `import tern`'s time,
    # which a program using only the synchronous API need not pay.
    if name == "AsyncClient":
        from ._async import AsyncClient

        globals()["AsyncClient"] = AsyncClient
        return AsyncClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | {"AsyncClient"})

__all__ = [
    "AnyAuth", "AsyncClient", "AuthError", "BasicAuth", "BodyTimeout", "Cancelled", "Client",
    "ClosedError", "ConnectError", "ConnectTimeout", "DecodeError", "DigestAuth", "File",
    "NTLMAuth",
    "FileError", "HTTPStatusError", "Headers", "HeadersTimeout", "InvalidURL", "NetworkError",
    "Progress", "ProtocolError", "ProxyError", "RedirectError", "Response", "TLSError",
    "TLSVerifyError", "TernError", "Timeout", "TimeoutException", "TooManyRedirects",
    "TotalTimeout", "UsageError", "delete", "download", "engine_version", "get", "head",
    "options", "patch", "post", "put", "request",
]


def engine_version() -> str:
    """The C library's version ("MAJOR.MINOR.PATCH"), from tern_version_string()."""
    return _ffi.string(_lib.tern_version_string()).decode()


_default: Optional[Client] = None
_default_lock = threading.Lock()


def _client() -> Client:
    global _default
    c = _default
    if c is None or c.is_closed:
        with _default_lock:
            if _default is None or _default.is_closed:
                _default = Client()
            c = _default
    return c


def _forget_default_after_fork() -> None:
    # The child has no engine thread: start afresh (the parent's engine is left alone).
    global _default, _default_lock
    _default = None
    _default_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_default_after_fork)


def request(method: str, url: str, **kwargs: Any) -> Response:
    """Sends a request with the shared client (arguments as :meth:`Client.request`)."""
    return _client().request(method, url, **kwargs)


def get(url: str, **kwargs: Any) -> Response:
    """GET with the shared client: ``tern.get(url, params=..., headers=..., timeout=...)``."""
    return _client().request("GET", url, **kwargs)


def head(url: str, **kwargs: Any) -> Response:
    """HEAD with the shared client."""
    return _client().request("HEAD", url, **kwargs)


def options(url: str, **kwargs: Any) -> Response:
    """OPTIONS with the shared client."""
    return _client().request("OPTIONS", url, **kwargs)


def delete(url: str, **kwargs: Any) -> Response:
    """DELETE with the shared client."""
    return _client().request("DELETE", url, **kwargs)


def post(url: str, **kwargs: Any) -> Response:
    """POST with the shared client (``content``, ``data``, ``json`` or ``files``)."""
    return _client().request("POST", url, **kwargs)


def put(url: str, **kwargs: Any) -> Response:
    """PUT with the shared client."""
    return _client().request("PUT", url, **kwargs)


def patch(url: str, **kwargs: Any) -> Response:
    """PATCH with the shared client."""
    return _client().request("PATCH", url, **kwargs)


def download(url: str, path: Union[str, "os.PathLike[str]"], **kwargs: Any) -> Response:
    """Downloads into a file with the shared client (see :meth:`Client.download`)."""
    return _client().download(url, path, **kwargs)
