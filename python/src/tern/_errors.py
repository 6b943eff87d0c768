"""Exceptions: one base, :class:`TernError`, and a subclass per family of engine errors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # pragma: no cover
    from ._models import Response


class TernError(Exception):
    """A request failed in the engine, or an option was refused.

    ``message`` is the engine's sentence saying what failed and where (``"connect to
    127.0.0.1:1: connection refused"``), ``code`` the negative ``TERN_E*`` code, ``name`` its
    name without prefix (``"ECONNREFUSED"``, from ``tern_err_name``) and ``url`` the request's
    URL when there is one.
    """

    def __init__(self, message: str, code: int = 0, name: str = "", url: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.name = name
        self.url = url

    def __str__(self) -> str:
        return f"{self.message} [{self.name}]" if self.name else self.message


class UsageError(TernError, ValueError):
    """The request could not be built: bad URL, header or option (EINVAL, EBADURL, ...)."""


class InvalidURL(UsageError):
    """A malformed or unsupported URL (EBADURL)."""


class ConnectError(TernError, ConnectionError):
    """The host could not be resolved or reached (ERESOLVE, ECONNREFUSED, ECONNECT)."""


class NetworkError(TernError, ConnectionError):
    """The connection broke mid-exchange (ECONNRESET, EIO, EPARTIAL, EEMPTYREPLY)."""


class TimeoutException(TernError, TimeoutError):
    """A phase took too long; the subclass says which."""


class ConnectTimeout(TimeoutException):
    """DNS + TCP (+ TLS handshake) took longer than the connect timeout (ECONNECTTIMEOUT)."""


class HeadersTimeout(TimeoutException):
    """The response head did not arrive in time (EHEADERTIMEOUT)."""


class BodyTimeout(TimeoutException):
    """The body stalled longer than the body timeout (EBODYTIMEOUT)."""


class TotalTimeout(TimeoutException):
    """The whole request exceeded its total time limit (ETOTALTIMEOUT)."""


class ProtocolError(TernError):
    """The server's response was malformed (EPROTO, EHEADERSIZE, ECHUNKED, ERANGE)."""


class TLSError(TernError):
    """The TLS handshake or its configuration failed (ETLS*)."""


class TLSVerifyError(TLSError):
    """The server's certificate did not verify (expired, unknown CA, wrong host, ...)."""


class DecodeError(TernError):
    """A compressed body was malformed or too large once decoded (EDECODE, EDECODELIMIT)."""


class TooManyRedirects(TernError):
    """More redirects than allowed (ETOOMANYREDIRECTS)."""


class RedirectError(TernError):
    """A redirect was refused (EREDIRECT): an https to http downgrade, say."""


class AuthError(TernError):
    """Authentication failed (EAUTH)."""


class ProxyError(TernError):
    """The proxy refused or failed the request (EPROXY)."""


class FileError(TernError, OSError):
    """The download file could not be written or the upload file read (EFILEWRITE, EFILEREAD)."""


class Cancelled(TernError):
    """The request was canceled, by a progress callback returning True (ECANCELED)."""


class ClosedError(TernError):
    """The client was closed while the request ran, or before (ESHUTDOWN)."""


class HTTPStatusError(TernError):
    """Raised by :meth:`Response.raise_for_status` for a 4xx or 5xx response."""

    def __init__(self, message: str, response: "Response"):
        super().__init__(message, 0, "HTTPSTATUS", response.url)
        self.response = response


_BY_NAME = {
    "EINVAL": UsageError,
    "EBADURL": InvalidURL,
    "EBADHEADER": UsageError,
    "EBUSY": UsageError,
    "EUNSUPPORTED": UsageError,
    "ERESOLVE": ConnectError,
    "ECONNREFUSED": ConnectError,
    "ECONNECT": ConnectError,
    "ECONNRESET": NetworkError,
    "EIO": NetworkError,
    "EPARTIAL": NetworkError,
    "EEMPTYREPLY": NetworkError,
    "ECONNECTTIMEOUT": ConnectTimeout,
    "EHEADERTIMEOUT": HeadersTimeout,
    "EBODYTIMEOUT": BodyTimeout,
    "ETOTALTIMEOUT": TotalTimeout,
    "EPROTO": ProtocolError,
    "EHEADERSIZE": ProtocolError,
    "ECHUNKED": ProtocolError,
    "ERANGE": ProtocolError,
    "EDECODE": DecodeError,
    "EDECODELIMIT": DecodeError,
    "ETOOMANYREDIRECTS": TooManyRedirects,
    "EREDIRECT": RedirectError,
    "EAUTH": AuthError,
    "EPROXY": ProxyError,
    "EFILEWRITE": FileError,
    "EFILEREAD": FileError,
    "ECANCELED": Cancelled,
    "ESHUTDOWN": ClosedError,
}


def error_class(name: str, is_tls_verify: bool) -> type:
    """The exception class for an engine error name."""
    if is_tls_verify:
        return TLSVerifyError
    if name.startswith("ETLS"):
        return TLSError
    return _BY_NAME.get(name, TernError)
