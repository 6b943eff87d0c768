"""Value types: headers, responses, timeouts, credentials, files to upload, progress reports."""

from __future__ import annotations

import json as _json
import os
import re
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    MutableMapping,
    Optional,
    Sequence,
    Tuple,
    Union,
    Generic,
    TypeVar,
    overload,
)

from ._errors import HTTPStatusError

HeaderTypes = Union["Headers", Mapping[str, str], Sequence[Tuple[str, str]]]


class Headers(MutableMapping[str, str]):
    """HTTP header fields: a case-insensitive mapping that keeps every field in order.

    ``headers["content-type"]`` and ``headers["Content-Type"]`` are the same field. A name sent
    more than once reads as its values joined with ``", "`` (as httpx does); :meth:`get_list`
    gives them one by one (``Set-Cookie``, say).
    """

    __slots__ = ("_items",)

    def __init__(self, headers: Optional[HeaderTypes] = None) -> None:
        self._items: List[Tuple[str, str]] = []
        if headers is None:
            return
        if isinstance(headers, Headers):
            self._items = list(headers._items)
        elif isinstance(headers, Mapping):
            self._items = [(str(k), str(v)) for k, v in headers.items()]
        else:
            self._items = [(str(k), str(v)) for k, v in headers]

    def get_list(self, name: str) -> List[str]:
        """Every value of a field, in the order received."""
        lower = name.lower()
        return [v for k, v in self._items if k.lower() == lower]

    def multi_items(self) -> List[Tuple[str, str]]:
        """Every (name, value) pair in order, names as sent."""
        return list(self._items)

    def __getitem__(self, name: str) -> str:
        values = self.get_list(name)
        if not values:
            raise KeyError(name)
        return ", ".join(values)

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        """The field's values joined with ``", "``, or ``default`` when it is absent."""
        lower = name.lower()
        values = [v for k, v in self._items if k.lower() == lower]
        return ", ".join(values) if values else default

    def __setitem__(self, name: str, value: str) -> None:
        lower = name.lower()
        self._items = [(k, v) for k, v in self._items if k.lower() != lower]
        self._items.append((name, str(value)))

    def __delitem__(self, name: str) -> None:
        lower = name.lower()
        kept = [(k, v) for k, v in self._items if k.lower() != lower]
        if len(kept) == len(self._items):
            raise KeyError(name)
        self._items = kept

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        lower = name.lower()
        return any(k.lower() == lower for k, _ in self._items)

    def __iter__(self) -> Iterator[str]:
        seen = set()
        for k, _ in self._items:
            if k.lower() not in seen:
                seen.add(k.lower())
                yield k

    def __len__(self) -> int:
        return len({k.lower() for k, _ in self._items})

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (Mapping, list, tuple)):
            return NotImplemented
        other_h = Headers(other)  # type: ignore[arg-type]
        norm = lambda h: sorted((k.lower(), v) for k, v in h._items)  # noqa: E731
        return norm(self) == norm(other_h)

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


_MISSING: Any = object()


# Lookup keys by field name ("\nname\0", the name lowered) for ResponseHeaders' lookup block:
# a program looks up a few names over and over. Bounded, for one that looks up names it reads.
_LOOK_KEYS: Dict[str, bytes] = {}
_LOOK_KEYS_MAX = 512


def _look_key(name: str) -> Optional[bytes]:
    """The lookup key of ``name``, or None for a name the lookup block cannot answer for
    (not ASCII, or holding a NUL or a newline): those are searched the long way."""
    if not name.isascii() or "\0" in name or "\n" in name:
        return None
    key = b"\n" + name.lower().encode("ascii") + b"\0"
    if len(_LOOK_KEYS) < _LOOK_KEYS_MAX:
        _LOOK_KEYS[name] = key
    return key


class ResponseHeaders(Headers):
    """A response's header fields, kept as the engine glue's block and split into pairs only
    when something needs them. ``_raw`` holds, from offset ``_start``, the fields (latin-1
    names and values, each NUL-terminated, one NUL first: ``b"\\0name\\0value\\0..."``),
    then from offset ``_look`` (0: none) a lookup block (``b"\\nname\\0value"`` per distinct
    name, lowered, the values of repeated fields joined with ``", "``, then ``b"\\n"``; see
    ``tern_py_put_look``); what comes before ``_start`` is not a field (the response's other
    strings, which then hold no newline). A response's fields are read far more often one by
    one than all at once: looking one up (:meth:`get`, ``[]``, ``in``) is one search of the
    block for ``b"\\nname\\0"``, which can only match in the lookup block (the glue makes one
    only when nothing before it holds a newline); without one, the fields are lowered once and
    searched. Once changed, they behave as any :class:`Headers`.

    Made only by ``build_response`` (and tests), which set ``_raw``, ``_start`` and ``_look``
    (``_low`` and ``_pairs``, the lowered fields and the pairs, are set when first made; a
    store each per response saved): object's ``__init__``,
    not Headers', makes ``ResponseHeaders()`` a plain allocation, a third cheaper than
    ``object.__new__(ResponseHeaders)``."""

    __slots__ = ("_raw", "_start", "_look", "_low", "_pairs")

    __init__ = object.__init__  # type: ignore[assignment]

    def _fields(self) -> bytes:
        """The field part of the block."""
        return self._raw[self._start:self._look] if self._look else self._raw[self._start:]

    @property  # type: ignore[override]
    def _items(self) -> List[Tuple[str, str]]:
        try:
            pairs = self._pairs
        except AttributeError:  # not split yet
            pairs = None
        if pairs is None:
            parts = self._fields()[1:].decode("latin-1").split("\0")
            pairs = self._pairs = list(zip(parts[0:-1:2], parts[1::2]))
        return pairs

    @_items.setter
    def _items(self, value: List[Tuple[str, str]]) -> None:
        self._pairs = value
        self._raw = None  # the block no longer says what the fields are
        self._look = 0

    def _find(self, name: str) -> Optional[str]:
        """The field's values joined with ``", "`` (None: absent), from the fields, lowered
        once. Field names are tokens (ASCII): a name that is not ASCII is looked up among the
        pairs."""
        if "\0" in name:
            return None
        try:
            low = self._low
        except AttributeError:  # not lowered yet
            low = None
        if low is None:
            low = self._low = self._fields().lower()
        key = b"\0" + name.lower().encode("ascii") + b"\0"
        raw = self._raw
        start = self._start
        found = None
        i = low.find(key)
        while i >= 0:
            # A name when an even number of NULs comes before (the block is NUL, name, NUL,
            # value, NUL, ...); otherwise a value that happens to read the same.
            if not low.count(b"\0", 0, i) & 1:
                j = start + i + len(key)
                value = raw[j:raw.index(b"\0", j)].decode("latin-1")
                found = value if found is None else found + ", " + value
            i = low.find(key, i + 1)
        return found

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        """The field's values joined with ``", "``, or ``default`` when it is absent."""
        if self._look:
            try:
                key = _LOOK_KEYS[name]
            except (KeyError, TypeError):  # a name not seen yet (TypeError: not a str)
                key = _look_key(name) if isinstance(name, str) else None
            if key is not None:
                found = self._raw.partition(key)
                if not found[1]:
                    return default
                return found[2].partition(b"\n")[0].decode("latin-1")
        if self._raw is None or not name.isascii():
            return Headers.get(self, name, default)
        value = self._find(name)
        return default if value is None else value

    def __getitem__(self, name: str) -> str:
        value = self.get(name, _MISSING)
        if value is _MISSING:
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        return self.get(name, _MISSING) is not _MISSING


@dataclass(frozen=True)
class Timeout:
    """Per-phase time limits in seconds; ``None`` (or 0) means no limit for that phase.

    ``connect``: DNS, TCP and the TLS handshake. ``headers``: from the request sent to the
    response head. ``body``: the longest silence while sending or receiving a body. ``total``:
    the whole request, redirects and retries included. The defaults are the engine's.

    Wherever a ``timeout`` is taken, a number ``t`` means ``Timeout(t, t, t)`` (each phase
    limited to ``t``, as in httpx), a pair ``(c, r)`` means ``Timeout(connect=c, headers=r,
    body=r)`` (as requests' ``(connect, read)``), and ``None`` means no limit at all.
    """

    connect: Optional[float] = 30.0
    headers: Optional[float] = 60.0
    body: Optional[float] = 60.0
    total: Optional[float] = None

    @classmethod
    def coerce(cls, value: "TimeoutTypes") -> "Timeout":
        if isinstance(value, Timeout):
            return value
        if value is None:
            return cls(None, None, None, None)
        if isinstance(value, (int, float)):
            return cls(value, value, value, None)
        if isinstance(value, tuple) and len(value) == 2:
            return cls(value[0], value[1], value[1], None)
        raise TypeError(f"timeout must be a number, a (connect, read) pair, a Timeout or None: {value!r}")


TimeoutTypes = Union[Timeout, float, int, Tuple[Optional[float], Optional[float]], None]


@dataclass(frozen=True)
class BasicAuth:
    """Basic credentials, sent with the first request (no challenge needed)."""

    username: str
    password: str


@dataclass(frozen=True)
class DigestAuth:
    """Digest credentials (MD5, SHA-256, SHA-512-256; qop=auth), answered to a 401 challenge."""

    username: str
    password: str


@dataclass(frozen=True)
class NTLMAuth:
    """NTLM credentials (NTLMv2), answered to a 401 challenge on one kept-alive connection.
    ``domain`` (or a ``"DOMAIN\\user"`` username) names the user's domain."""

    username: str
    password: str
    domain: str = ""


@dataclass(frozen=True)
class AnyAuth:
    """Credentials for whichever scheme (Basic, Digest or NTLM) the server's challenge asks
    for, the strongest offered."""

    username: str
    password: str


AuthTypes = Union[BasicAuth, DigestAuth, NTLMAuth, AnyAuth, Tuple[str, str], None]


@dataclass(frozen=True)
class File:
    """A file streamed from disk as a request body, or as a part of a multipart form.

    Bytes ``[offset, end)`` are sent (``end`` 0: to the end of the file); the engine reads them
    through its connection buffer while sending, so the file is never loaded whole.
    ``filename`` and ``content_type`` are used in a multipart form (defaults: the file's base
    name and a type guessed from it).
    """

    path: Union[str, "os.PathLike[str]"]
    filename: Optional[str] = None
    content_type: Optional[str] = None
    offset: int = 0
    end: int = 0


@dataclass(frozen=True)
class Progress:
    """One progress report: ``phase`` is ``"upload"`` or ``"download"``, ``percent`` 0..100
    (0 while the total is unknown; -1 when the request failed), ``done`` and ``total`` bytes
    (``total`` 0 when unknown)."""

    phase: str
    percent: int
    done: int
    total: int


# tern_request_get_http_version's values as a response names them (0: no head arrived).
_HTTP_VERSIONS = {10: "HTTP/1.0", 11: "HTTP/1.1", 20: "HTTP/2"}

_CHARSET = re.compile(r";\s*charset\s*=\s*\"?([^\";\s]+)", re.I)


_T = TypeVar("_T")


class _Decoded(Generic[_T]):
    """A :class:`Response` field read from what the engine wrote (``_raw``, ``_info``) when first
    asked, then kept in the slot named after it with a leading underscore; settable like a plain
    attribute. One descriptor for the nine such fields instead of a property and setter each."""

    def __init__(self, decode: Callable[[Any], _T], doc: str) -> None:
        self._decode = decode
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = getattr(owner, "_" + name)  # the slot's member descriptor

    @overload
    def __get__(self, obj: None, owner: Any = None) -> "_Decoded[_T]": ...

    @overload
    def __get__(self, obj: object, owner: Any = None) -> _T: ...

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        slot = self._slot
        try:
            return slot.__get__(obj)
        except AttributeError:
            value = self._decode(obj)
            slot.__set__(obj, value)
            return value

    def __set__(self, obj: Any, value: _T) -> None:
        self._slot.__set__(obj, value)


class Response:
    """A completed exchange: the final hop's status, headers and body.

    HTTP error statuses are responses, not exceptions (call :meth:`raise_for_status`).
    """

    __slots__ = (
        "status_code",
        "headers",
        "content",
        "path",
        "_encoding",
        # What a response of build_response reads when first asked (or as set): the engine's
        # strings from _raw (reason phrase, URL, TLS version, decoded encoding, each
        # NUL-terminated, at its start), the other fields from _info (_core.INFO's values).
        "_raw",
        "_info",
        "_reason_phrase",
        "_url",
        "_tls_version",
        "_decoded_encoding",
        "_http_version",
        "_elapsed",
        "_num_redirects",
        "_reused_connection",
        "_offset",
    )

    def __init__(
        self,
        status_code: int,
        headers: Headers,
        content: bytes,
        url: str,
        *,
        reason_phrase: str = "",
        http_version: str = "HTTP/1.1",
        elapsed: float = 0.0,
        num_redirects: int = 0,
        reused_connection: bool = False,
        tls_version: Optional[str] = None,
        decoded_encoding: Optional[str] = None,
        offset: int = 0,
        path: Optional[str] = None,
    ) -> None:
        self.status_code = status_code
        self.reason_phrase = reason_phrase
        self.http_version = http_version
        self.headers = headers
        self.content = content
        self.url = url
        self.elapsed = elapsed
        self.num_redirects = num_redirects
        self.reused_connection = reused_connection
        self.tls_version = tls_version
        self.decoded_encoding = decoded_encoding
        self.offset = offset
        self.path = path
        self._encoding: Optional[str] = None

    def _string(self, i: int) -> str:
        """The i-th of the engine's strings in ``_raw`` (a response of build_response)."""
        part = self._raw.split(b"\0", i + 1)[i]
        try:
            return part.decode()
        except UnicodeDecodeError:
            return part.decode("utf-8", "replace")

    reason_phrase: _Decoded[str] = _Decoded(
        lambda r: r._string(0), "The reason phrase of the final status line.")
    url: _Decoded[str] = _Decoded(
        lambda r: r._string(1), "The URL of the final response (after redirects).")
    tls_version: _Decoded[Optional[str]] = _Decoded(
        lambda r: r._string(2) or None, "The TLS version the connection negotiated (None: not TLS).")
    decoded_encoding: _Decoded[Optional[str]] = _Decoded(
        lambda r: r._string(3) or None, "The content coding the engine decoded (None: none).")
    http_version: _Decoded[str] = _Decoded(
        lambda r: _HTTP_VERSIONS.get(r._info[3], ""),
        '''``"HTTP/1.1"``, ``"HTTP/1.0"`` or ``"HTTP/2"`` ("" when no response head came).''')
    elapsed: _Decoded[float] = _Decoded(
        lambda r: r._info[7] if r._info[7] > 0.0 else 0.0,
        "Seconds from the start of the request to the end of the response.")
    num_redirects: _Decoded[int] = _Decoded(
        lambda r: r._info[4], "Redirects followed to reach this response.")
    reused_connection: _Decoded[bool] = _Decoded(
        lambda r: r._info[5] != 0,
        "Whether the response came on a kept-alive connection an earlier request used.")
    offset: _Decoded[int] = _Decoded(
        lambda r: r._info[6], "Where the body starts in the resource: the start of a 206 range, or 0.")

    @property
    def encoding(self) -> str:
        """The charset of :attr:`text`: Content-Type's ``charset``, else UTF-8. Settable."""
        try:  # unset in a response of build_response (a store per response saved)
            encoding = self._encoding
        except AttributeError:
            encoding = None
        if encoding is None:
            match = _CHARSET.search(self.headers.get("content-type", ""))
            encoding = self._encoding = match.group(1) if match else "utf-8"
        return encoding

    @encoding.setter
    def encoding(self, value: str) -> None:
        self._encoding = value

    @property
    def text(self) -> str:
        """The body decoded with :attr:`encoding` (undecodable bytes replaced)."""
        try:
            return self.content.decode(self.encoding, errors="replace")
        except LookupError:
            return self.content.decode("utf-8", errors="replace")

    def json(self, **kwargs: Any) -> Any:
        """The body parsed as JSON (``json.loads`` keyword arguments pass through)."""
        return _json.loads(self.content, **kwargs)

    @property
    def ok(self) -> bool:
        """True for a status below 400 (requests' meaning)."""
        return self.status_code < 400

    @property
    def is_success(self) -> bool:
        """True for a 2xx status."""
        return 200 <= self.status_code < 300

    @property
    def is_redirect(self) -> bool:
        """True for a redirect status with a Location (one that was not followed)."""
        return self.status_code in (301, 302, 303, 307, 308) and "location" in self.headers

    def raise_for_status(self) -> "Response":
        """Raises :class:`HTTPStatusError` for a 4xx or 5xx status; returns the response else."""
        if self.status_code >= 400:
            kind = "Client" if self.status_code < 500 else "Server"
            raise HTTPStatusError(
                f"{kind} error '{self.status_code} {self.reason_phrase}' for url '{self.url}'", self
            )
        return self

    def iter_bytes(self, chunk_size: int = 65536) -> Iterable[bytes]:
        """The body in pieces of ``chunk_size`` bytes."""
        for i in range(0, len(self.content), chunk_size):
            yield self.content[i : i + chunk_size]

    def __repr__(self) -> str:
        return f"<Response [{self.status_code} {self.reason_phrase}]>"


ParamTypes = Union[Mapping[str, Any], Sequence[Tuple[str, Any]], str, None]
FileTypes = Union[
    File,
    "os.PathLike[str]",
    Any,  # an open binary file with a name on disk
    Tuple[Optional[str], Any],
    Tuple[Optional[str], Any, Optional[str]],
]
FilesTypes = Union[Mapping[str, FileTypes], Sequence[Tuple[str, FileTypes]], None]
HeadersOut = Dict[str, str]
