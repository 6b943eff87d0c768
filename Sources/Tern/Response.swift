// Response: an immutable snapshot of a finished exchange, returned by response() and
// executeAndWait() and kept in Request.result.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What came back from a successful request: status, header fields, body and measurements.
///
/// "Successful" means the exchange completed; any status, 404 and 500 included, is a
/// response. Transport failures (refused, timed out, truncated...) are ``TernError``s instead.
public struct Response: Sendable {
    /// When the steps of the final attempt happened, in seconds from its submission.
    public struct Timings: Sendable, Hashable {
        /// The connection was ready (or a pooled one was taken), or `nil` if it never was.
        public var connected: TimeInterval?
        /// The request was fully sent, or `nil` if it never was.
        public var sent: TimeInterval?
        /// The response head was parsed, or `nil` if none arrived.
        public var headers: TimeInterval?
        /// The attempt completed.
        public var total: TimeInterval

        /// Creates timings.
        public init(
            connected: TimeInterval? = nil, sent: TimeInterval? = nil,
            headers: TimeInterval? = nil, total: TimeInterval = 0
        ) {
            self.connected = connected
            self.sent = sent
            self.headers = headers
            self.total = total
        }
    }

    /// The URL of the final response: the URL requested, or where the redirects led
    /// (curl's `url_effective`), without any `user:password@` part.
    public var url: URL { storage.url }
    /// The URL as requested, before any redirect, without any `user:password@` part
    /// (ASIHTTPRequest's `originalURL`).
    public var originalURL: URL { storage.originalURL }
    /// How many redirects were followed to reach ``url`` (0 when none).
    public var redirectCount: Int { storage.redirectCount }
    /// The final status, with its reason phrase.
    ///
    /// A download resumed from a file that was already complete needs no exchange and
    /// reports status 0.
    public var status: HTTPResponse.Status { storage.status }
    /// The HTTP version the response came in, such as ``HTTPVersion/http2``
    /// (``HTTPVersion/http1_1`` for a response from a cache); see ``Request/httpVersion``.
    public var httpVersion: HTTPVersion { storage.head?.httpVersion ?? .http1_1 }
    /// The response's HTTP minor version: 1 for HTTP/1.1, 0 for HTTP/1.0 and HTTP/2. Read
    /// ``httpVersion`` to tell HTTP/2 apart.
    public var httpMinorVersion: Int { httpVersion.minor }
    /// The response header fields, in the order received.
    public var headerFields: HTTPFields { storage.head?.fields ?? [:] }
    /// The body length the server announced (`Content-Length`, or `Content-Size` with a
    /// chunked body), or `nil` when it did not say.
    public var contentLength: Int64? { storage.contentLength }
    /// Where the body starts in the resource: the first byte of a 206 range, or 0.
    public var offset: UInt64 { storage.offset }
    /// Body bytes received by the final attempt.
    public var bytesReceived: UInt64 { storage.bytesReceived }
    /// The body kept in memory. Empty when it went to ``Request/downloadFile`` or
    /// ``Request/dataHandler`` (except the up to 1 MiB kept for a non-2xx status with a
    /// download file).
    public var data: Data { storage.data }
    /// The file that received the body, if any.
    public var downloadFile: String? { storage.downloadFile }
    /// True when the request went out on a connection kept from an earlier request.
    public var isReused: Bool { storage.head?.isReused ?? false }
    /// True when the response came from an ``HTTPCache`` rather than the network.
    public var isFromCache: Bool { storage.isFromCache }
    /// How many attempts the request took (1 without retries).
    public var attempts: Int { storage.attempts }
    /// Timings of the final attempt.
    public var timings: Timings { storage.timings }
    /// The request head as sent (request line and header fields), for logs.
    public var sentRequestHead: String? { storage.sentHead ?? storage.head?.sentHead }
    /// The TLS facts of the connection (version, resumption, client certificate asked),
    /// or `nil` for plain HTTP.
    public var tlsInfo: TLSInfo? { storage.tlsInfo }
    /// The encoding Tern decoded the body from (`"gzip"`, `"deflate"`, `"br"` or `"zstd"`),
    /// or `nil` when
    /// ``data`` is the body as sent.
    public var decodedEncoding: String? { storage.decodedEncoding }
    /// Body bytes delivered to memory, the download file or the data handler: the decoded
    /// size when the body was decoded (``bytesReceived`` counts the wire bytes).
    public var bytesDelivered: UInt64 { storage.bytesDelivered }
    /// True when the server answered before the request body was sent, so the body was
    /// skipped (see ``Request/expectContinue``).
    public var isRequestBodySkipped: Bool { storage.bodySkipped }

    /// The response in one object, so that handing it around (into the request's result, to
    /// each awaiting task) copies one reference: the report the final attempt left (or the one
    /// a cache entry stands for), kept as it is rather than copied field by field.
    private let storage: AttemptReport

    init(report: AttemptReport) {
        storage = report
    }

    /// The status code, such as 200.
    public var statusCode: Int { storage.head?.status ?? 0 }

    /// The response's `Content-Encoding` (such as `"gzip"`), if any.
    public var encoding: String? { headerFields[.contentEncoding] }

    /// The response's `Content-Type`, if any.
    public var contentType: String? { headerFields[.contentType] }

    /// ``data`` decoded as text, using the charset of `Content-Type`.
    ///
    /// Without a charset the body is read as ISO-8859-1 (the HTTP/1.1 default), except for
    /// JSON types, which are UTF-8 by definition. An unknown charset falls back to
    /// ISO-8859-1. `nil` when the bytes are invalid in the named charset.
    public var string: String? { decodeText(data, contentType: contentType) }

    /// The body as it came over the wire (ASIHTTPRequest's `rawResponseData`): ``data`` when
    /// Tern decoded nothing (``Request/Decoding/raw`` or ``Request/Decoding/none``, or an
    /// uncompressed response); `nil` when it decoded the body, whose encoded bytes are not
    /// kept.
    public var rawData: Data? { decodedEncoding == nil ? data : nil }

    /// True when the response was compressed (`Content-Encoding` gzip or deflate), whether
    /// or not Tern decoded it (ASIHTTPRequest's `isResponseCompressed`).
    public var isCompressed: Bool { isCompressedEncoding(encoding) }
}

/// A response head as seen when it arrived: the status line, and the fields with the request
/// head that drew them, copied from the engine in one piece and decoded only when first read
/// (most callers look at the status and the body alone, and building `HTTPFields`, a `String`
/// and a validated name per field, was the largest single cost of a small request in Swift).
///
/// A class: the head goes from the head callback to the attempt, the request's outcome and the
/// report, and a reference moves where a struct's fields were copied and destroyed at each
/// step. One object with its fields: a second for the fields was one more allocation, retain
/// and release per response.
///
/// `@unchecked Sendable`: `bytes` is written once, in the initializer, and only read after.
final class ResponseHead: @unchecked Sendable {
    let status: Int
    let reason: String
    let httpVersion: Response.HTTPVersion
    let contentLength: Int64?
    let isReused: Bool
    /// The engine's field block ("name\0value\0" per field), then the request head as sent;
    /// allocated here and freed with the object (an array was one more object, and its generic
    /// appends about 250 instructions more per response). By malloc: the standard library's
    /// `allocate(byteCount:alignment:)` always takes the runtime's aligned path (posix_memalign,
    /// about 50 instructions more), whatever the alignment asked for.
    private let bytes: UnsafeRawBufferPointer
    private let blockLength: Int
    private let hasSentHead: Bool
    private let decoded: Mutex<HTTPFields?>

    /// A head whose fields are known already (a stored response, a made-up one).
    init(
        status: Int, reason: String, httpVersion: Response.HTTPVersion, fields: HTTPFields,
        contentLength: Int64?, isReused: Bool
    ) {
        self.status = status
        self.reason = reason
        self.httpVersion = httpVersion
        self.contentLength = contentLength
        self.isReused = isReused
        bytes = UnsafeRawBufferPointer(start: nil, count: 0)
        blockLength = 0
        hasSentHead = false
        decoded = Mutex(fields)
    }

    /// A head from the engine: copies its field block and, when given, the request head.
    init(
        status: Int, reason: String, httpVersion: Response.HTTPVersion,
        block: UnsafeRawBufferPointer, sentHead: UnsafeRawBufferPointer?, contentLength: Int64?,
        isReused: Bool
    ) {
        self.status = status
        self.reason = reason
        self.httpVersion = httpVersion
        self.contentLength = contentLength
        self.isReused = isReused
        let sent = sentHead ?? UnsafeRawBufferPointer(start: nil, count: 0)
        let total = block.count + sent.count
        if total > 0 {
            guard let copy = malloc(total) else { fatalError("out of memory copying a response head") }
            if let from = block.baseAddress, block.count > 0 { copy.copyMemory(from: from, byteCount: block.count) }
            if let from = sent.baseAddress, sent.count > 0 {
                (copy + block.count).copyMemory(from: from, byteCount: sent.count)
            }
            bytes = UnsafeRawBufferPointer(start: copy, count: total)
        } else {
            bytes = UnsafeRawBufferPointer(start: nil, count: 0)
        }
        blockLength = block.count
        hasSentHead = sentHead != nil
        decoded = Mutex(nil)
    }

    deinit {
        free(UnsafeMutableRawPointer(mutating: bytes.baseAddress))
    }

    /// The fields, decoded on first use.
    var fields: HTTPFields {
        decoded.withLock { cached in
            if let cached { return cached }
            let fields = decode()
            cached = fields
            return fields
        }
    }

    /// The request head as sent, when it was copied.
    var sentHead: String? {
        hasSentHead ? String(decoding: UnsafeRawBufferPointer(rebasing: bytes[blockLength...]), as: UTF8.self) : nil
    }

    private func decode() -> HTTPFields {
        var fields = HTTPFields()
        do {
            let block = UnsafeRawBufferPointer(rebasing: bytes[..<blockLength])
            var at = 0
            // One C string from `at`, NUL excluded; `at` moves past its NUL.
            func next() -> UnsafeRawBufferPointer? {
                guard at < block.count, let end = block[at...].firstIndex(of: 0) else { return nil }
                defer { at = end + 1 }
                return UnsafeRawBufferPointer(rebasing: block[at..<end])
            }
            while let name = next(), let value = next() {
                guard let fieldName = HTTPField.Name(String(decoding: name, as: UTF8.self)) else { continue }
                fields.append(HTTPField(name: fieldName, lenientValue: value))
            }
        }
        return fields
    }
}
