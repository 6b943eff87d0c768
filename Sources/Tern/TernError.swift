// TernError: every failure a request can report, as an extensible struct (not an enum), so that
// codes can be appended without breaking callers who switch over them.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// An error from Tern: what failed, where, and in which phase of the exchange.
///
/// `TernError` is a struct rather than an enum, so new codes can be added without breaking
/// callers. Match errors against the static members, which compare by ``code`` only:
///
/// ```swift
/// do {
///     let response = try await request.response()
/// } catch TernError.connectionRefused {
///     // nobody listens on that port
/// } catch TernError.timedOut {
///     // any of the four timeouts
/// }
/// ```
///
/// The ``message`` says what happened in words, naming the host and phase
/// ("connect to example.com:80: connection refused").
public struct TernError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A numeric error code, the same as the C engine's `TERN_E*` values.
    ///
    /// Codes are append-only: a code keeps its number for ever.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The C engine's value (negative).
        public let rawValue: Int32

        /// Wraps a raw `TERN_E*` value.
        public init(rawValue: Int32) {
            self.rawValue = rawValue
        }

        /// The code's short name without prefix, such as `"ECONNREFUSED"`.
        public var name: String { CEngine.errorName(rawValue) }

        /// A sentence describing the code, such as `"connection refused"`.
        public var description: String { CEngine.errorDescription(rawValue) }

        /// An argument or setting was invalid.
        public static let invalidArgument = Code(rawValue: -1)
        /// Memory ran out.
        public static let outOfMemory = Code(rawValue: -2)
        /// The URL is malformed or uses an unsupported scheme.
        public static let badURL = Code(rawValue: -3)
        /// A request header name or value is invalid, or is one the engine sets itself.
        public static let badHeader = Code(rawValue: -4)
        /// The request was already submitted.
        public static let busy = Code(rawValue: -5)
        /// The host name could not be resolved.
        public static let resolveFailed = Code(rawValue: -6)
        /// The server refused the connection.
        public static let connectionRefused = Code(rawValue: -7)
        /// The connection could not be established (unreachable network or host).
        public static let connectFailed = Code(rawValue: -8)
        /// The peer reset the connection.
        public static let connectionReset = Code(rawValue: -9)
        /// Connecting took longer than the connect timeout.
        public static let connectTimedOut = Code(rawValue: -10)
        /// The response head did not arrive within the headers timeout.
        public static let headersTimedOut = Code(rawValue: -11)
        /// The body stalled for longer than the body timeout.
        public static let bodyTimedOut = Code(rawValue: -12)
        /// The request exceeded its total time limit.
        public static let totalTimedOut = Code(rawValue: -13)
        /// The response was not valid HTTP: a malformed HTTP/1.x response, or a peer that
        /// broke HTTP/2's rules.
        public static let protocolError = Code(rawValue: -14)
        /// The response head was larger than allowed.
        public static let headersTooLarge = Code(rawValue: -15)
        /// The chunked body encoding was malformed.
        public static let badChunkedEncoding = Code(rawValue: -16)
        /// The body ended before its announced length.
        public static let partialBody = Code(rawValue: -17)
        /// The server closed the connection without replying.
        public static let emptyReply = Code(rawValue: -18)
        /// The request was cancelled.
        public static let cancelled = Code(rawValue: -19)
        /// The download file could not be written.
        public static let fileWriteFailed = Code(rawValue: -20)
        /// The upload file could not be read.
        public static let fileReadFailed = Code(rawValue: -21)
        /// The engine shut down before the request completed.
        public static let shutDown = Code(rawValue: -22)
        /// A network read or write failed.
        public static let ioError = Code(rawValue: -23)
        /// The requested range cannot be satisfied or the server answered another range.
        public static let rangeNotSatisfiable = Code(rawValue: -24)
        /// A handler (``Request/dataHandler`` or ``Request/headHandler``) stopped the request.
        public static let callbackAborted = Code(rawValue: -25)
        /// The feature is not supported by this build.
        public static let unsupported = Code(rawValue: -26)
        /// The TLS handshake failed.
        public static let tlsHandshakeFailed = Code(rawValue: -27)
        /// The server certificate has expired.
        public static let tlsCertificateExpired = Code(rawValue: -28)
        /// The server certificate is not yet valid.
        public static let tlsCertificateNotYetValid = Code(rawValue: -29)
        /// The server certificate does not match the host name.
        public static let tlsHostnameMismatch = Code(rawValue: -30)
        /// The server certificate is not signed by a trusted authority.
        public static let tlsUnknownAuthority = Code(rawValue: -31)
        /// Server certificate verification failed for another reason.
        public static let tlsVerifyFailed = Code(rawValue: -32)
        /// The server requires a client certificate.
        public static let tlsClientCertificateRequired = Code(rawValue: -33)
        /// The client certificate or key could not be loaded.
        public static let tlsCertificateFileError = Code(rawValue: -34)
        /// The CA certificates could not be loaded.
        public static let tlsCAFileError = Code(rawValue: -35)
        /// A compressed body was malformed.
        public static let badContentEncoding = Code(rawValue: -36)
        /// A decompressed body exceeded its size or ratio limit.
        public static let decodeLimitExceeded = Code(rawValue: -37)
        /// More redirects than allowed.
        public static let tooManyRedirects = Code(rawValue: -38)
        /// A redirect was refused (such as https to http).
        public static let redirectRefused = Code(rawValue: -39)
        /// Authentication failed.
        public static let authenticationFailed = Code(rawValue: -40)
        /// The proxy failed.
        public static let proxyError = Code(rawValue: -41)
        /// A ``RequestQueue`` already held as many waiting requests as it may: the request was
        /// refused without being sent.
        public static let queueFull = Code(rawValue: -42)
        /// A file transfer's upload is larger than its server's `max_file_size`: refused before
        /// anything was sent.
        public static let fileTooLarge = Code(rawValue: -43)
    }

    /// The stage of the exchange in which an error happened.
    public struct Phase: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// A short lower-case name, such as `"connect"`.
        public let rawValue: String

        /// Wraps a phase name.
        public init(rawValue: String) {
            self.rawValue = rawValue
        }

        public var description: String { rawValue }

        /// Preparing the request, before anything reached the network.
        public static let setup = Phase(rawValue: "setup")
        /// Resolving the host name.
        public static let resolve = Phase(rawValue: "resolve")
        /// Opening the TCP connection.
        public static let connect = Phase(rawValue: "connect")
        /// The TLS handshake.
        public static let tls = Phase(rawValue: "tls")
        /// Sending the request or waiting for and reading the response head.
        public static let headers = Phase(rawValue: "headers")
        /// Receiving the response body.
        public static let body = Phase(rawValue: "body")
        /// The request as a whole (its total time limit).
        public static let total = Phase(rawValue: "total")
        /// Reading the upload file.
        public static let upload = Phase(rawValue: "upload")
        /// Writing the download file.
        public static let download = Phase(rawValue: "download")
        /// A caller's handler or a cancellation.
        public static let caller = Phase(rawValue: "caller")
        /// Following a redirect.
        public static let redirect = Phase(rawValue: "redirect")
        /// Authenticating with the server or the proxy.
        public static let authentication = Phase(rawValue: "authentication")
        /// Talking to the proxy (such as its answer to `CONNECT`).
        public static let proxy = Phase(rawValue: "proxy")
    }

    /// What went wrong, as a code to match on.
    public let code: Code
    /// What went wrong, in words, naming the host and phase where known.
    public var message: String { details.message }
    /// The host the request was talking to, if any.
    public var host: String? { details.host }
    /// The stage of the exchange that failed, if known.
    public var phase: Phase? { details.phase }

    /// The words, host and phase, in one object. Inline, their three strings made
    /// `Result<Response, TernError>` a layout the compiler copies and destroys through the
    /// generic value witnesses (about 140 and 80 instructions each time); every request copies
    /// its result about five times, and only a failure makes an error.
    private final class Details: Sendable {
        let message: String
        let host: String?
        let phase: Phase?

        init(message: String, host: String?, phase: Phase?) {
            self.message = message
            self.host = host
            self.phase = phase
        }
    }
    private let details: Details

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: The error code.
    ///   - message: A description; the code's own description when `nil`.
    ///   - host: The host concerned, if any.
    ///   - phase: The stage that failed; derived from the code when `nil`.
    public init(code: Code, message: String? = nil, host: String? = nil, phase: Phase? = nil) {
        self.code = code
        details = Details(
            message: message ?? code.description, host: host, phase: phase ?? Self.defaultPhase(for: code))
    }

    public var description: String {
        "TernError.\(code.name)(\(message))"
    }

    /// True for the four timeout codes (connect, headers, body, total).
    public var isTimeout: Bool {
        [.connectTimedOut, .headersTimedOut, .bodyTimedOut, .totalTimedOut].contains(code)
    }

    /// True for server-certificate verification failures.
    public var isTLSVerificationFailure: Bool {
        [.tlsCertificateExpired, .tlsCertificateNotYetValid, .tlsHostnameMismatch,
         .tlsUnknownAuthority, .tlsVerifyFailed].contains(code)
    }

    /// Errors compare by ``code`` only, so `error == .connectionRefused` reads naturally.
    public static func == (lhs: TernError, rhs: TernError) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    /// Lets `catch TernError.cancelled` and `case .connectionRefused` match any error with that
    /// code; ``timedOut`` matches any of the four timeouts.
    public static func ~= (pattern: TernError, value: any Error) -> Bool {
        guard let error = value as? TernError else { return false }
        if pattern.code == anyTimeoutCode { return error.isTimeout }
        return pattern.code == error.code
    }

    // A code no engine produces: marks the `timedOut` pattern.
    private static let anyTimeoutCode = Code(rawValue: Int32.min)

    /// A pattern that matches any of the four timeouts in `catch` and `switch`.
    ///
    /// It is not equal (`==`) to any real error; use ``isTimeout`` for a Boolean test.
    public static let timedOut = TernError(code: anyTimeoutCode, message: "timed out")

    /// Matches errors with code ``Code/invalidArgument``: an argument or setting was invalid.
    public static let invalidArgument = TernError(code: .invalidArgument)
    /// Matches errors with code ``Code/outOfMemory``: memory ran out.
    public static let outOfMemory = TernError(code: .outOfMemory)
    /// Matches errors with code ``Code/badURL``: the URL is malformed or uses an unsupported scheme.
    public static let badURL = TernError(code: .badURL)
    /// Matches errors with code ``Code/badHeader``: a request header field is invalid or belongs to the engine.
    public static let badHeader = TernError(code: .badHeader)
    /// Matches errors with code ``Code/resolveFailed``: the host name could not be resolved.
    public static let resolveFailed = TernError(code: .resolveFailed)
    /// Matches errors with code ``Code/connectionRefused``: the server refused the connection.
    public static let connectionRefused = TernError(code: .connectionRefused)
    /// Matches errors with code ``Code/connectFailed``: the connection could not be established.
    public static let connectFailed = TernError(code: .connectFailed)
    /// Matches errors with code ``Code/connectionReset``: the peer reset the connection.
    public static let connectionReset = TernError(code: .connectionReset)
    /// Matches errors with code ``Code/connectTimedOut``: connecting timed out.
    public static let connectTimedOut = TernError(code: .connectTimedOut)
    /// Matches errors with code ``Code/headersTimedOut``: the response head did not arrive in time.
    public static let headersTimedOut = TernError(code: .headersTimedOut)
    /// Matches errors with code ``Code/bodyTimedOut``: the body stalled for too long.
    public static let bodyTimedOut = TernError(code: .bodyTimedOut)
    /// Matches errors with code ``Code/totalTimedOut``: the request exceeded its total time limit.
    public static let totalTimedOut = TernError(code: .totalTimedOut)
    /// Matches errors with code ``Code/protocolError``: the response was not valid HTTP.
    public static let protocolError = TernError(code: .protocolError)
    /// Matches errors with code ``Code/headersTooLarge``: the response head was too large.
    public static let headersTooLarge = TernError(code: .headersTooLarge)
    /// Matches errors with code ``Code/badChunkedEncoding``: the chunked body encoding was malformed.
    public static let badChunkedEncoding = TernError(code: .badChunkedEncoding)
    /// Matches errors with code ``Code/partialBody``: the body ended before its announced length.
    public static let partialBody = TernError(code: .partialBody)
    /// Matches errors with code ``Code/emptyReply``: the server closed the connection without replying.
    public static let emptyReply = TernError(code: .emptyReply)
    /// Matches errors with code ``Code/cancelled``: the request was cancelled.
    public static let cancelled = TernError(code: .cancelled)
    /// Matches errors with code ``Code/fileWriteFailed``: the download file could not be written.
    public static let fileWriteFailed = TernError(code: .fileWriteFailed)
    /// Matches errors with code ``Code/fileReadFailed``: the upload file could not be read.
    public static let fileReadFailed = TernError(code: .fileReadFailed)
    /// Matches errors with code ``Code/shutDown``: the engine shut down first.
    public static let shutDown = TernError(code: .shutDown)
    /// Matches errors with code ``Code/ioError``: a network read or write failed.
    public static let ioError = TernError(code: .ioError)
    /// Matches errors with code ``Code/rangeNotSatisfiable``: the requested range could not be served.
    public static let rangeNotSatisfiable = TernError(code: .rangeNotSatisfiable)
    /// Matches errors with code ``Code/callbackAborted``: a handler stopped the request.
    public static let callbackAborted = TernError(code: .callbackAborted)
    /// Matches errors with code ``Code/unsupported``: the feature is not supported by this build.
    public static let unsupported = TernError(code: .unsupported)
    /// Matches errors with code ``Code/tlsHandshakeFailed``: the TLS handshake failed.
    public static let tlsHandshakeFailed = TernError(code: .tlsHandshakeFailed)
    /// Matches errors with code ``Code/tlsCertificateExpired``: the server certificate has expired.
    public static let tlsCertificateExpired = TernError(code: .tlsCertificateExpired)
    /// Matches errors with code ``Code/tlsCertificateNotYetValid``: the server certificate is not yet valid.
    public static let tlsCertificateNotYetValid = TernError(code: .tlsCertificateNotYetValid)
    /// Matches errors with code ``Code/tlsHostnameMismatch``: the certificate does not name the host.
    public static let tlsHostnameMismatch = TernError(code: .tlsHostnameMismatch)
    /// Matches errors with code ``Code/tlsUnknownAuthority``: the certificate's issuer is not trusted.
    public static let tlsUnknownAuthority = TernError(code: .tlsUnknownAuthority)
    /// Matches errors with code ``Code/tlsVerifyFailed``: verification failed for another reason.
    public static let tlsVerifyFailed = TernError(code: .tlsVerifyFailed)
    /// Matches errors with code ``Code/tlsClientCertificateRequired``: the server requires a client certificate.
    public static let tlsClientCertificateRequired = TernError(code: .tlsClientCertificateRequired)
    /// Matches errors with code ``Code/tlsCertificateFileError``: the client certificate or key could not be loaded.
    public static let tlsCertificateFileError = TernError(code: .tlsCertificateFileError)
    /// Matches errors with code ``Code/tlsCAFileError``: the CA certificates could not be loaded.
    public static let tlsCAFileError = TernError(code: .tlsCAFileError)
    /// Matches errors with code ``Code/badContentEncoding``: a compressed body was malformed.
    public static let badContentEncoding = TernError(code: .badContentEncoding)
    /// Matches errors with code ``Code/decodeLimitExceeded``: a decoded body exceeded its limits.
    public static let decodeLimitExceeded = TernError(code: .decodeLimitExceeded)
    /// Matches errors with code ``Code/tooManyRedirects``: more redirects than allowed.
    public static let tooManyRedirects = TernError(code: .tooManyRedirects)
    /// Matches errors with code ``Code/redirectRefused``: a redirect could not or may not be
    /// followed (a bad `Location`, https to http).
    public static let redirectRefused = TernError(code: .redirectRefused)
    /// Matches errors with code ``Code/authenticationFailed``: authentication was cancelled or
    /// could not be computed.
    public static let authenticationFailed = TernError(code: .authenticationFailed)
    /// Matches errors with code ``Code/proxyError``: the proxy refused or failed the tunnel.
    public static let proxyError = TernError(code: .proxyError)
    /// Matches any error with code ``Code/queueFull``.
    public static let queueFull = TernError(code: .queueFull)
    /// Matches any error with code ``Code/fileTooLarge``.
    public static let fileTooLarge = TernError(code: .fileTooLarge)

    /// The phase a code implies when nothing more precise is known.
    static func defaultPhase(for code: Code) -> Phase? {
        switch code {
        case .invalidArgument, .badURL, .badHeader, .busy, .unsupported, .outOfMemory, .fileTooLarge:
            return .setup
        case .resolveFailed:
            return .resolve
        case .connectionRefused, .connectFailed, .connectTimedOut:
            return .connect
        case .headersTimedOut, .protocolError, .headersTooLarge, .emptyReply:
            return .headers
        case .bodyTimedOut, .badChunkedEncoding, .partialBody, .rangeNotSatisfiable,
            .badContentEncoding, .decodeLimitExceeded:
            return .body
        case .totalTimedOut:
            return .total
        case .fileReadFailed:
            return .upload
        case .fileWriteFailed:
            return .download
        case .cancelled, .callbackAborted:
            return .caller
        case .tooManyRedirects, .redirectRefused:
            return .redirect
        case .authenticationFailed:
            return .authentication
        case .proxyError:
            return .proxy
        default:
            return code.rawValue <= -27 && code.rawValue >= -35 ? .tls : nil
        }
    }
}

/// `dump(_:)` and debuggers show the code, message, host and phase, as when they were stored
/// inline (they share one object now, which a default mirror would show instead).
extension TernError: CustomReflectable {
    public var customMirror: Mirror {
        Mirror(
            self, children: ["code": code, "message": message, "host": host as Any, "phase": phase as Any],
            displayStyle: .struct)
    }
}

extension TernError: LocalizedError {
    /// The message, with the host when the message does not name it, the code and the phase:
    /// "connect to example.com:80: connection refused (ECONNREFUSED, connect phase)". This is
    /// also what `localizedDescription` returns.
    public var errorDescription: String? {
        var text = message
        if let host, !host.isEmpty, !message.contains(host) { text += " (\(host))" }
        text += " [\(code.name)"
        if let phase { text += ", \(phase) phase" }
        return text + "]"
    }
}
