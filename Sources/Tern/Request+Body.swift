// The body-related fields of a Request: the general request body, form post values, request
// compression, Expect: 100-continue, response decoding limits, TLS options, and the facts
// about the response body and connection that the latest execution produced.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

extension Request {
    /// When to send `Expect: 100-continue`: the body then waits until the server says
    /// `100 Continue` (or a short wait passes), so a server that refuses the upload (401,
    /// 413, 417, ...) can say so before the body is sent.
    public struct ExpectContinue: Sendable, Hashable {
        /// Bodies of at least this many bytes, and bodies of unknown length, ask first;
        /// `nil` never asks. Default 1 MiB.
        public var threshold: UInt64?
        /// How long to wait for the `100 Continue` before sending the body anyway, in
        /// seconds (default 1), for servers that never send one.
        public var wait: TimeInterval

        /// Creates the setting.
        ///
        /// - Parameters:
        ///   - threshold: The smallest body that asks first; `nil` never asks.
        ///   - wait: Seconds to wait for the server's `100 Continue`.
        public init(threshold: UInt64? = 1 << 20, wait: TimeInterval = 1) {
            self.threshold = threshold
            self.wait = wait
        }

        /// Never send `Expect: 100-continue`.
        public static let never = ExpectContinue(threshold: nil)

        /// Ask before every non-empty body.
        public static let always = ExpectContinue(threshold: 0)
    }

    /// Bounds on a decoded (gzip, deflate, br or zstd) response body, so a decompression bomb ends with
    /// ``TernError/Code/decodeLimitExceeded`` instead of filling memory or disk.
    public struct DecodingLimits: Sendable, Hashable {
        /// The most decoded bytes accepted, or `nil` for no bound (the default).
        public var maxBytes: UInt64?
        /// The most decoded bytes accepted per received byte (default 200), or `nil` for no
        /// bound, counted once the decoded body passes 16 MiB when it is kept in memory and
        /// 256 MiB when it streams to a file or handler (which cost no memory). Ordinary text
        /// compresses 3–20 times, repetitive JSON or logs a few hundred; a bomb of zeros a
        /// thousand times.
        public var maxRatio: Int?

        /// Creates limits.
        ///
        /// - Parameters:
        ///   - maxBytes: The largest decoded body; `nil` for no bound.
        ///   - maxRatio: The largest expansion ratio (see ``maxRatio``); `nil` for no bound.
        public init(maxBytes: UInt64? = nil, maxRatio: Int? = 200) {
            self.maxBytes = maxBytes
            self.maxRatio = maxRatio
        }

        /// No limit at all.
        public static let unlimited = DecodingLimits(maxBytes: nil, maxRatio: nil)
    }

    // MARK: - What to send

    /// The request body: memory, a file, a URL-encoded form, JSON, a multipart form streamed
    /// from disk, or a stream of unknown length (see ``RequestBody``).
    ///
    /// Any method may carry a body. Its ``RequestBody/contentType`` is sent unless
    /// ``headerFields`` has a `Content-Type`. Set one of this, ``body`` and ``bodyFile``, not
    /// several; ``postValues`` join a multipart body as leading fields.
    public var requestBody: RequestBody? {
        get { setting(\.requestBody) }
        set { set(\.requestBody, newValue) }
    }

    /// Form fields to post (Mesibo's `postBundle`, ASIHTTPRequest's post values).
    ///
    /// Alone, they are sent URL-encoded (`application/x-www-form-urlencoded`); with a
    /// multipart ``requestBody`` they become its first fields, so fields, files and a
    /// ``downloadFile`` combine in one request. A GET request with post values is sent as
    /// POST, as ASIHTTPRequest does.
    public var postValues: URLEncodedForm {
        get { setting(\.postValues) }
        set { set(\.postValues, newValue) }
    }

    /// Sets a post value, replacing any value of that name (ASIHTTPRequest's
    /// `setPostValue:forKey:`).
    ///
    /// - Parameters:
    ///   - value: The value.
    ///   - key: The field's name.
    /// - Returns: The request, for chaining.
    @discardableResult
    public func setPostValue(_ value: String, forKey key: String) -> Self {
        storage.withLock { $0.settings.postValues.set(value, forName: key) }
        return self
    }

    /// Adds a post value, keeping earlier values of that name (ASIHTTPRequest's
    /// `addPostValue:forKey:`).
    ///
    /// - Parameters:
    ///   - value: The value.
    ///   - key: The field's name.
    /// - Returns: The request, for chaining.
    @discardableResult
    public func addPostValue(_ value: String, forKey key: String) -> Self {
        storage.withLock { $0.settings.postValues.add(value, forName: key) }
        return self
    }

    /// Sends the body gzip-compressed (ASIHTTPRequest's `shouldCompressRequestBody`).
    ///
    /// The body streams through zlib as it is sent, never compressed whole in memory, with
    /// `Content-Encoding: gzip`; as its compressed length is known only at the end it goes
    /// chunked, which needs HTTP/1.1 (with ``http10`` the request fails with
    /// ``TernError/Code/invalidArgument``). Only servers that decode request bodies accept
    /// this. Default `false`.
    public var compressBody: Bool {
        get { setting(\.compressBody) }
        set { set(\.compressBody, newValue) }
    }

    /// When to send `Expect: 100-continue` before the body (default: bodies of 1 MiB or more
    /// and of unknown length, waiting up to a second).
    ///
    /// When the server answers with a final status instead (such as 401 or 413), the body is
    /// not sent at all, ``Response/isRequestBodySkipped`` is `true`, and that connection is
    /// not reused.
    public var expectContinue: ExpectContinue {
        get { setting(\.expectContinue) }
        set { set(\.expectContinue, newValue) }
    }

    /// Bounds on decoded response bodies (default: any size, but at most 200 times the bytes
    /// received once past 16 MiB in memory or 256 MiB streamed).
    public var decodingLimits: DecodingLimits {
        get { setting(\.decodingLimits) }
        set { set(\.decodingLimits, newValue) }
    }

    /// TLS options for `https` URLs; `nil` (the default) uses the engine's
    /// ``Engine/Configuration/tls``.
    public var tls: TLSOptions? {
        get { setting(\.tls) }
        set { set(\.tls, newValue) }
    }

    /// Where a download to ``downloadFile`` is written until it is complete: the same path
    /// plus `.part` (ASIHTTPRequest's `temporaryFileDownloadPath`), or `nil` without a
    /// download file.
    public var temporaryDownloadFile: String? { downloadFile.map { $0 + ".part" } }

    // MARK: - What came back

    /// The TLS facts of the latest response's connection, or `nil` for plain HTTP (and
    /// before a response arrived).
    public var tlsInfo: TLSInfo? { storage.withLock { $0.outcome.tlsInfo } }

    /// The body as it came over the wire (ASIHTTPRequest's `rawResponseData`): ``data``
    /// when the engine decoded nothing (``Decoding/raw``, ``Decoding/none``, or a response
    /// without `Content-Encoding`), `nil` when it decoded the body, whose encoded bytes are
    /// not kept.
    public var rawResponseData: Data? {
        storage.withLock { $0.outcome.decodedEncoding == nil ? $0.outcome.data : nil }
    }

    /// True when the latest response was compressed (`Content-Encoding` gzip or deflate),
    /// whether or not Tern decoded it (ASIHTTPRequest's `isResponseCompressed`).
    public var isResponseCompressed: Bool { isCompressedEncoding(responseEncoding) }

    /// The encoding the engine decoded the latest response from (`"gzip"`, `"deflate"`,
    /// `"br"` or `"zstd"`),
    /// or `nil` when the body was delivered as sent.
    public var decodedEncoding: String? { storage.withLock { $0.outcome.decodedEncoding } }

    /// Body bytes delivered by the latest attempt (to memory, the file or ``dataHandler``):
    /// the decoded size when the body was decoded; ``bytesReceived`` counts the wire bytes.
    public var bytesDelivered: UInt64 { storage.withLock { $0.outcome.bytesDelivered } }

    /// True when the server answered before the request body was sent, which was then
    /// skipped (see ``expectContinue``).
    public var isRequestBodySkipped: Bool { storage.withLock { $0.outcome.bodySkipped } }
}

/// True for content codings the engine can decode.
func isCompressedEncoding(_ value: String?) -> Bool {
    guard let value else { return false }
    return value.split(separator: ",").contains { coding in
        ["gzip", "x-gzip", "deflate"].contains(coding.trimmingWhitespace().lowercased())
    }
}
