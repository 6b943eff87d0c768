// TLSOptions: how an https request checks the server and proves who the client is, set on a
// Request or as an Engine's default; TLSInfo: what the TLS connection turned out to be.

/// How `https` requests verify the server and, optionally, present a client certificate.
///
/// Verification is on by default, against the system's trust store (Debian's CA bundle):
/// the server's chain must lead to a trusted authority, be within its validity dates, and
/// name the host (DNS name or IP address). Give your own authorities with ``caFile`` or
/// ``caDirectory`` (Mesibo's `caCertificateFile`), which then replace the system store.
///
/// Set options per request with ``Request/tls``, or for every request of an engine with
/// ``Engine/Configuration/tls``:
///
/// ```swift
/// request.tls = TLSOptions(caFile: "/etc/myapp/ca.pem")
/// request.tls = TLSOptions(clientCertificate: .init(
///     certificateFile: "client.pem", keyFile: "client.key", password: "secret"))
/// request.tls = .insecure  // curl's -k: no verification at all
/// ```
///
/// Requests with different options never share a pooled connection.
public struct TLSOptions: Sendable, Hashable {
    /// A client certificate to present when the server asks for one.
    public struct ClientCertificate: Sendable, Hashable {
        /// A PEM file holding the certificate (and its chain, and possibly the key).
        public var certificateFile: String
        /// A PEM file holding the private key, or `nil` when it is in ``certificateFile``.
        public var keyFile: String?
        /// The password of an encrypted key, or `nil` for a plain one. Tern never prompts
        /// for it.
        public var password: String?

        /// Creates a client certificate reference; the files are read when a request
        /// connects.
        ///
        /// - Parameters:
        ///   - certificateFile: The PEM certificate (chain) file.
        ///   - keyFile: The PEM key file; `nil` when the key is in `certificateFile`.
        ///   - password: The key's password, if it is encrypted.
        public init(certificateFile: String, keyFile: String? = nil, password: String? = nil) {
            self.certificateFile = certificateFile
            self.keyFile = keyFile
            self.password = password
        }
    }

    /// Whether the server's certificate and host name are checked (default `true`).
    ///
    /// `false` is curl's `-k`/`--insecure`: any certificate is accepted, so anyone on the
    /// path can read and change the exchange. Use it for tests only.
    public var verifiesPeer: Bool
    /// A PEM file of trusted authorities, used instead of the system trust store.
    public var caFile: String?
    /// An OpenSSL hashed directory of trusted authorities (`c_rehash`), used instead of the
    /// system trust store.
    public var caDirectory: String?
    /// The certificate to present when the server asks for one.
    public var clientCertificate: ClientCertificate?

    /// Creates TLS options; the defaults verify against the system trust store and present
    /// no client certificate.
    ///
    /// - Parameters:
    ///   - verifiesPeer: Whether to check the server's certificate and host name.
    ///   - caFile: A PEM file of trusted authorities.
    ///   - caDirectory: A hashed directory of trusted authorities.
    ///   - clientCertificate: A certificate to present when asked.
    public init(
        verifiesPeer: Bool = true, caFile: String? = nil, caDirectory: String? = nil,
        clientCertificate: ClientCertificate? = nil
    ) {
        self.verifiesPeer = verifiesPeer
        self.caFile = caFile
        self.caDirectory = caDirectory
        self.clientCertificate = clientCertificate
    }

    /// Verification against the system trust store, no client certificate.
    public static let `default` = TLSOptions()

    /// No verification at all (curl's `-k`); for tests against self-made certificates only.
    public static let insecure = TLSOptions(verifiesPeer: false)
}

/// What the TLS connection of a response turned out to be.
public struct TLSInfo: Sendable, Hashable {
    /// The protocol version, such as `"TLSv1.3"`.
    public var version: String
    /// True when the connection resumed an earlier TLS session of the same origin (an
    /// abbreviated handshake).
    public var isSessionResumed: Bool
    /// True when the server asked for a client certificate and none was configured.
    ///
    /// Servers such as nginx then complete the handshake and answer `400`; this tells that
    /// case apart from other `400`s.
    public var wasClientCertificateRequested: Bool

    /// Creates TLS facts (for tests and mocks; Tern fills them in from the connection).
    public init(version: String, isSessionResumed: Bool, wasClientCertificateRequested: Bool) {
        self.version = version
        self.isSessionResumed = isSessionResumed
        self.wasClientCertificateRequested = wasClientCertificateRequested
    }
}
