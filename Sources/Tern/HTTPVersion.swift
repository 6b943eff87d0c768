// HTTP versions: the one a request may speak (Request.HTTPVersionPreference, set before it
// runs) and the one its response came in (Response.HTTPVersion, read after).

extension Request {
    /// The HTTP versions a request may speak; see ``Request/httpVersion``.
    ///
    /// The choices are curl's: ``automatic`` is curl's default, and the others are its
    /// `--http1.1`, `--http2` and `--http2-prior-knowledge`.
    public enum HTTPVersionPreference: Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// HTTP/2 when the server offers it over TLS (ALPN `h2`, then `http/1.1`), HTTP/1.1
        /// otherwise and on `http` URLs (the default).
        case automatic
        /// HTTP/1.1 only: over TLS, ALPN offers `http/1.1` alone.
        case http1_1
        /// HTTP/2 when TLS negotiates it, HTTP/1.1 otherwise: the same as ``automatic``, as
        /// curl's `--http2` is over TLS. Tern sends no `Upgrade: h2c` on `http` URLs; for
        /// HTTP/2 there, use ``http2PriorKnowledge``.
        case http2
        /// HTTP/2 without negotiation: on `http` URLs straight away (h2c with prior
        /// knowledge, RFC 9113 section 3.3), and over TLS with ALPN offering `h2` alone. A
        /// server that does not speak HTTP/2 fails the request.
        case http2PriorKnowledge

        public var description: String {
            switch self {
            case .automatic: "automatic"
            case .http1_1: "HTTP/1.1"
            case .http2: "HTTP/2"
            case .http2PriorKnowledge: "HTTP/2 with prior knowledge"
            }
        }
    }
}

extension Response {
    /// The HTTP version a response came in, such as ``http1_1`` or ``http2``.
    ///
    /// Versions compare by major, then minor number: `.http1_0 < .http1_1 < .http2`.
    public struct HTTPVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
        /// The major version: 1 or 2.
        public var major: Int
        /// The minor version: 0 or 1 for HTTP/1, 0 for HTTP/2.
        public var minor: Int

        /// Creates a version from its numbers, such as `HTTPVersion(major: 1, minor: 1)`.
        public init(major: Int, minor: Int) {
            self.major = major
            self.minor = minor
        }

        /// HTTP/1.0.
        public static let http1_0 = HTTPVersion(major: 1, minor: 0)
        /// HTTP/1.1.
        public static let http1_1 = HTTPVersion(major: 1, minor: 1)
        /// HTTP/2.
        public static let http2 = HTTPVersion(major: 2, minor: 0)

        /// The version as status lines name it: `"HTTP/1.1"`, `"HTTP/1.0"`, and `"HTTP/2"`
        /// (HTTP/2 and later have no minor version on the wire, RFC 9113 section 8.3.1).
        public var description: String {
            major >= 2 && minor == 0 ? "HTTP/\(major)" : "HTTP/\(major).\(minor)"
        }

        public static func < (lhs: HTTPVersion, rhs: HTTPVersion) -> Bool {
            (lhs.major, lhs.minor) < (rhs.major, rhs.minor)
        }
    }
}
