// The response side of a Request: what the latest execution produced, readable at any time
// (head fields from the moment the head arrived, the rest once finished).

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

/// What the latest execution of a request produced so far.
struct Outcome: Sendable {
    var startDate: Date?
    var endDate: Date?
    var head: ResponseHead?
    var interimHeads: String?
    var progress = Request.Progress()
    var result: Result<Response, TernError>?
    var attempts = 0
    var isCancelled = false
    var originalURL: URL?
    /// The latest hop's URL once a redirect was followed; `nil`: the original URL's (one URL
    /// copy, two retains and their releases, fewer per request).
    var hopURL: URL?
    var effectiveURL: URL? { hopURL ?? originalURL }
    /// The latest completed attempt's report (or a stored response's), whose fields the ones
    /// below read: held, not copied field by field, at every completion.
    var report: AttemptReport?

    var data: Data? { report?.data }
    var bytesReceived: UInt64 { report?.bytesReceived ?? 0 }
    var contentLength: Int64? { report?.contentLength }
    var offset: UInt64 { report?.offset ?? 0 }
    var timings: Response.Timings? { report?.timings }
    var tlsInfo: TLSInfo? { report?.tlsInfo }
    var decodedEncoding: String? { report?.decodedEncoding }
    var bytesDelivered: UInt64 { report?.bytesDelivered ?? 0 }
    var bodySkipped: Bool { report?.bodySkipped ?? false }
    var connectStatus: Int { report?.connectStatus ?? 0 }
    var redirectCount: Int { report?.redirectCount ?? 0 }
}

extension Request {
    private func outcome<T: Sendable>(_ key: KeyPath<Outcome, T>) -> T {
        storage.withLock { $0.outcome[keyPath: key] }
    }

    /// The result of the latest execution, or `nil` while it runs or before the first.
    public var result: Result<Response, TernError>? { outcome(\.result) }

    /// The error of the latest execution, when it failed (the error code and message).
    public var error: TernError? {
        if case .failure(let error)? = outcome(\.result) { return error }
        return nil
    }

    /// True while an execution runs.
    public var isExecuting: Bool { storage.withLock { $0.run != nil } }

    /// True once an execution has finished, successfully or not.
    public var isFinished: Bool { outcome(\.result) != nil }

    /// True when the latest execution ended by being cancelled.
    public var isCancelled: Bool { outcome(\.isCancelled) }

    /// The URL the latest execution started from, without any `user:password@` part
    /// (ASIHTTPRequest's `originalURL`); `nil` before the first execution.
    public var originalURL: URL? { outcome(\.originalURL) }

    /// The URL of the hop being sent or answered, then of the final response: where the
    /// redirects led (curl's `url_effective`); `nil` before the first execution.
    ///
    /// Inside ``headHandler`` it names the URL that the head answers.
    public var effectiveURL: URL? { outcome(\.effectiveURL) }

    /// How many redirects the latest execution followed, once finished.
    public var redirectCount: Int { outcome(\.redirectCount) }

    /// The HTTP status code, or 0 before a response head arrived.
    ///
    /// Readable from the first `download` listener event, and in ``headHandler``.
    public var statusCode: Int { outcome(\.head)?.status ?? 0 }

    /// The final status with its reason phrase, once a response head arrived.
    public var status: HTTPResponse.Status? {
        outcome(\.head).map { HTTPResponse.Status(code: $0.status, reasonPhrase: $0.reason) }
    }

    /// The HTTP version the response came in (such as ``Response/HTTPVersion/http2``), once
    /// a response head arrived; see ``httpVersion`` for the versions the request may speak.
    ///
    /// Readable from the first `download` listener event, and in ``headHandler``.
    public var responseHTTPVersion: Response.HTTPVersion? { outcome(\.head)?.httpVersion }

    /// The response's HTTP minor version (1 for HTTP/1.1, 0 for HTTP/1.0 and HTTP/2), once a
    /// response head arrived. Read ``responseHTTPVersion`` to tell HTTP/2 apart.
    public var responseHTTPMinorVersion: Int? { outcome(\.head)?.httpVersion.minor }

    /// The response header fields, once a response head arrived (empty before).
    public var responseHeaders: HTTPFields { outcome(\.head)?.fields ?? [:] }

    /// The body length the server announced, or `nil` when unknown.
    public var contentLength: Int64? {
        outcome(\.contentLength) ?? outcome(\.head)?.contentLength
    }

    /// Where the body starts in the resource: the first byte of a 206 range, or 0.
    public var offset: UInt64 { outcome(\.offset) }

    /// Body bytes received by the latest attempt (after any resume offset), once finished.
    public var bytesReceived: UInt64 { outcome(\.bytesReceived) }

    /// The response's `Content-Encoding` (mesibo's response `encoding`), if any.
    public var responseEncoding: String? { outcome(\.head)?.fields[.contentEncoding] }

    /// True when the response came from the request's ``cache`` (Mesibo's `respCached`):
    /// fresh, or confirmed by a 304.
    public var isFromCache: Bool {
        if case .success(let response)? = outcome(\.result) { return response.isFromCache }
        return false
    }

    /// True when the latest attempt went out on a connection kept from an earlier request.
    public var isReused: Bool { outcome(\.head)?.isReused ?? false }

    /// The status of the proxy's answer to the `CONNECT` this request sent for an `https` URL
    /// (200 when the tunnel opened), or 0 when it sent none (curl's `%{http_connect}`).
    public var proxyConnectStatusCode: Int { outcome(\.connectStatus) }

    /// Progress of the latest execution: last event and byte counts.
    public var progress: Progress { outcome(\.progress) }

    /// The direction of the latest progress event, or `nil` before the first.
    public var state: State? { outcome(\.progress).state }

    /// When the latest execution started.
    public var startDate: Date? { outcome(\.startDate) }

    /// When the latest execution finished.
    public var endDate: Date? { outcome(\.endDate) }

    /// Timings of the latest attempt, once it completed.
    public var timings: Response.Timings? { outcome(\.timings) }

    /// How many attempts the latest execution took.
    public var attempts: Int { outcome(\.attempts) }

    /// The request head as last sent (request line and header fields), once the response
    /// head arrived or the request finished; for logs and curl-style `-v` output.
    public var sentRequestHead: String? {
        // The current head's, else (no head came) the report's text: a report has one only then.
        storage.withLock { $0.outcome.head?.sentHead ?? $0.outcome.report?.sentHead }
    }

    /// The interim (1xx) response heads that came before the head of the latest hop, as
    /// received (status line, fields and blank line for each, such as `100 Continue` or
    /// `103 Early Hints`), or `nil` when none came. Readable in ``headHandler`` and after;
    /// at most 300 KiB of them are accepted per hop.
    public var interimResponseHeads: String? { outcome(\.interimHeads) }

    /// The body kept in memory by the latest attempt, once finished; also set for failures
    /// (holding what arrived) and `nil` while running.
    public var data: Data? { outcome(\.data) }

    /// ``data`` decoded as text with the charset of `Content-Type` (ISO-8859-1 when none is
    /// given); see ``Response/string``.
    public var string: String? {
        guard let data else { return nil }
        return decodeText(data, contentType: responseHeaders[.contentType])
    }
}
