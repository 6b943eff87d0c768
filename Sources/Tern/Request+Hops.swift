// The hop settings of a Request: redirects, authentication (credentials, stores, the challenge
// handler), cookies and proxies, plus rate limits, bandwidth budgets and priority. The engine runs every hop of an
// exchange; Swift plugs the cookie jar and credential stores in through its per-hop hooks
// (CTern+Bridging.swift).

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Request {
    /// What a request may do when it follows redirects, beyond the defaults.
    ///
    /// By default, Tern follows 301, 302, 303, 307 and 308 as browsers and curl do: 303, and
    /// 301 or 302 after a POST, become a GET without a body; 307 and 308 keep the method and
    /// body. `Authorization`, `Cookie` and credentials never go to another origin (scheme, host
    /// or port), and an `https` URL never redirects to `http`. Each option relaxes one of these
    /// rules; they map to the C engine's `TERN_REDIRECT_*` flags.
    ///
    /// ```swift
    /// request.redirectPolicy = .rfc2616           // keep POST on 301 and 302
    /// request.redirectPolicy.insert(.allowsDowngrade)
    /// ```
    public struct RedirectPolicy: OptionSet, Sendable, Hashable {
        /// The option bits (the C engine's `TERN_REDIRECT_*` values).
        public let rawValue: UInt32

        /// Creates a policy from option bits.
        public init(rawValue: UInt32) {
            self.rawValue = rawValue
        }

        /// Keeps POST (method and body) on a 301 (curl's `--post301`).
        public static let keepsPOSTOn301 = RedirectPolicy(rawValue: 1)
        /// Keeps POST (method and body) on a 302 (curl's `--post302`).
        public static let keepsPOSTOn302 = RedirectPolicy(rawValue: 2)
        /// Keeps POST (method and body) on a 303 (curl's `--post303`).
        public static let keepsPOSTOn303 = RedirectPolicy(rawValue: 4)
        /// Follows a redirect from `https` to plain `http` (refused by default with
        /// ``TernError/Code/redirectRefused``).
        public static let allowsDowngrade = RedirectPolicy(rawValue: 8)
        /// Keeps sending `Authorization`, `Cookie` (the request's own) and the request's
        /// credentials to other origins after a redirect (curl's `--location-trusted`).
        /// Cookies from ``Request/cookieJar`` always go by the jar's rules.
        public static let trustsCrossOrigin = RedirectPolicy(rawValue: 16)

        /// RFC 2616's reading of 301 and 302, which keep the method: ASIHTTPRequest's
        /// `shouldUseRFC2616RedirectBehaviour`. A 303 still becomes a GET.
        public static let rfc2616: RedirectPolicy = [.keepsPOSTOn301, .keepsPOSTOn302]
    }

    /// The authentication schemes a credential may answer.
    ///
    /// With ``basic`` alone, the credential is sent at once, before any challenge (curl's
    /// `--basic`). Otherwise the server's `401` (or the proxy's `407`) challenge picks the
    /// scheme, NTLM before Digest before Basic (curl's `--anyauth`, `--digest`, `--ntlm`). Digest
    /// is computed by the C engine: MD5, MD5-sess, SHA-256 and SHA-512-256 with `qop=auth`,
    /// `stale=true` honoured. NTLM authenticates the connection: its handshake stays on one
    /// kept-alive connection, which is never handed to a request with other credentials.
    public struct AuthenticationSchemes: OptionSet, Sendable, Hashable {
        /// The option bits (the C engine's `TERN_AUTH_*` values).
        public let rawValue: UInt32

        /// Creates a set of schemes from option bits.
        public init(rawValue: UInt32) {
            self.rawValue = rawValue
        }

        /// Basic (RFC 7617).
        public static let basic = AuthenticationSchemes(rawValue: 1)
        /// Digest (RFC 7616).
        public static let digest = AuthenticationSchemes(rawValue: 2)
        /// NTLM (MS-NLMP) with an NTLMv2 response; the domain comes from
        /// ``Credential/domain`` or a `DOMAIN\user` user name.
        public static let ntlm = AuthenticationSchemes(rawValue: 4)
        /// Lets NTLM answer with an NTLMv1 response when the server's challenge leaves no other
        /// way (it carries no target information). Not part of ``any``; weak, avoid it.
        public static let ntlmV1 = AuthenticationSchemes(rawValue: 8)
        /// Whatever the challenge offers, NTLM first, then Digest, then Basic (as curl's
        /// `CURLAUTH_ANY`, NTLM included).
        public static let any: AuthenticationSchemes = [.basic, .digest, .ntlm]

        /// Whether a credential with these schemes goes out before any challenge.
        var isPreemptive: Bool { self == .basic }
    }

    // MARK: - Redirects

    /// How many redirects to follow (default 20); 0 follows none, so a 3xx is the response.
    ///
    /// One redirect more fails the request with ``TernError/Code/tooManyRedirects`` (curl's
    /// exit 47). Relative `Location` values are resolved per RFC 3986; ``effectiveURL`` and
    /// ``Response/url`` name the last URL, ``redirectCount`` how many were followed. Cookies
    /// from ``cookieJar`` are sent and stored on every hop of the chain.
    public var maxRedirects: Int {
        get { setting(\.maxRedirects) }
        set { set(\.maxRedirects, newValue) }
    }

    /// What following redirects may do beyond the safe defaults (default: nothing more); see
    /// ``RedirectPolicy``.
    public var redirectPolicy: RedirectPolicy {
        get { setting(\.redirectPolicy) }
        set { set(\.redirectPolicy, newValue) }
    }

    // MARK: - Authentication

    /// The user name and password for the request's origin (ASIHTTPRequest's
    /// `username`/`password`); `nil` (the default) uses a `user:password@` part of ``url``,
    /// else the credential stores and ``authenticationHandler``.
    ///
    /// They answer the origin's challenges with the schemes of ``authenticationSchemes``, and
    /// are never sent to another origin after a redirect (unless ``redirectPolicy`` has
    /// ``RedirectPolicy/trustsCrossOrigin``). A request body already sent is sent again whole
    /// with the answer. Once they worked, they are kept according to their
    /// ``Credential/persistence``: in ``sessionCredentialStore`` (the default `.session`), and
    /// also ``persistentCredentialStore`` (`.permanent`). An `Authorization` field in
    /// ``headerFields`` wins over all of this.
    public var credential: Credential? {
        get { setting(\.credential) }
        set { set(\.credential, newValue) }
    }

    /// The schemes the request's credentials may answer (default ``AuthenticationSchemes/any``:
    /// the challenge picks, Digest first); ``AuthenticationSchemes/basic`` alone sends them
    /// before any challenge.
    public var authenticationSchemes: AuthenticationSchemes {
        get { setting(\.authenticationSchemes) }
        set { set(\.authenticationSchemes, newValue) }
    }

    /// Credentials kept for the life of the process (default
    /// ``SessionCredentialStore/shared``; `nil` uses none): ASIHTTPRequest's
    /// `useSessionPersistence`.
    ///
    /// A challenge the request's own credential does not answer is answered from here, and a
    /// credential that worked is stored here for later requests to the same protection space.
    /// When the store knows that an origin uses Basic, later requests to it send the
    /// credential at once, without waiting for a `401` (preemptive Basic). A credential from
    /// this store that the server refuses is removed from it.
    public var sessionCredentialStore: (any CredentialStore)? {
        get { setting(\.sessionCredentialStore) }
        set { set(\.sessionCredentialStore, newValue) }
    }

    /// Credentials kept for good, such as a ``FileCredentialStore`` (default `nil`):
    /// ASIHTTPRequest's `useKeychainPersistence`. Consulted after
    /// ``sessionCredentialStore``; credentials with ``Credential/Persistence/permanent`` that
    /// worked are stored here too.
    public var persistentCredentialStore: (any CredentialStore)? {
        get { setting(\.persistentCredentialStore) }
        set { set(\.persistentCredentialStore, newValue) }
    }

    /// Asked for credentials when a server or proxy challenges the request and neither the
    /// request nor the stores have (more) to offer: ASIHTTPRequest's
    /// `authenticationNeededForRequest`, answered with `retryUsingSuppliedCredentials`
    /// (``AuthenticationChallenge/Disposition/useCredential(_:)``) or `cancelAuthentication`
    /// (``AuthenticationChallenge/Disposition/cancel``, which fails the request with
    /// ``TernError/Code/authenticationFailed``).
    ///
    /// It runs on the engine's thread and must return quickly; see
    /// ``AuthenticationChallenge/Handler``. A handler that keeps supplying refused credentials
    /// is stopped after a few tries, and the `401` becomes the response.
    public var authenticationHandler: AuthenticationChallenge.Handler? {
        get { setting(\.authenticationHandler) }
        set { set(\.authenticationHandler, newValue) }
    }

    // MARK: - Cookies

    /// Whether the request sends cookies from ``cookieJar`` and stores the cookies it
    /// receives there (default `true`): ASIHTTPRequest's `useCookiePersistence`.
    ///
    /// ``cookie`` and a `Cookie` field in ``headerFields`` are sent either way.
    public var usesCookies: Bool {
        get { setting(\.usesCookies) }
        set { set(\.usesCookies, newValue) }
    }

    /// The jar the request's cookies come from and go to (default ``CookieJar/shared``), on
    /// every hop: `Set-Cookie` on a redirect is sent on the next hop when it matches.
    ///
    /// Give requests a jar of their own to keep their cookies apart, such as one per user
    /// account.
    public var cookieJar: CookieJar {
        get { setting(\.cookieJar) }
        set { set(\.cookieJar, newValue) }
    }

    // MARK: - Proxies

    /// An HTTP proxy for this request (mesibo's `proxy`; ASIHTTPRequest's `proxyHost`,
    /// `proxyPort`, `proxyUsername`, `proxyPassword`); `nil` (the default) follows
    /// ``proxyEnvironment``.
    ///
    /// `http` URLs go to the proxy in absolute form; `https` URLs go through a `CONNECT`
    /// tunnel, so the proxy sees only host and port. The proxy's credential answers its
    /// `407` challenges with the schemes of ``proxyAuthenticationSchemes``. The proxy is chosen
    /// once per request: redirects keep it.
    ///
    /// ```swift
    /// request.proxy = try ProxyConfiguration("http://alice:secret@proxy.example:3128")
    /// ```
    public var proxy: ProxyConfiguration? {
        get { setting(\.proxy) }
        set { set(\.proxy, newValue) }
    }

    /// The schemes the proxy's credential may answer (default ``AuthenticationSchemes/any``);
    /// ``AuthenticationSchemes/basic`` alone sends it before any challenge (curl's
    /// `--proxy-basic`).
    public var proxyAuthenticationSchemes: AuthenticationSchemes {
        get { setting(\.proxyAuthenticationSchemes) }
        set { set(\.proxyAuthenticationSchemes, newValue) }
    }

    /// The proxy rules for a request without ``proxy``; `nil` (the default) uses the engine's
    /// ``Engine/Configuration/proxyEnvironment`` (which uses no proxy unless configured).
    ///
    /// The library never reads `http_proxy` and its kin by itself; opt in with
    /// `ProxyEnvironment()`, or bypass an engine's proxies with ``ProxyEnvironment/direct``.
    /// A variable holding a proxy that cannot be used fails the request rather than going
    /// direct.
    public var proxyEnvironment: ProxyEnvironment? {
        get { setting(\.proxyEnvironment) }
        set { set(\.proxyEnvironment, newValue) }
    }

    /// A proxy auto-configuration script that chooses this request's proxies, asked for the
    /// first hop and for every redirect; it wins over ``proxy`` and ``proxyEnvironment``
    /// (default `nil`: none). A proxy of its answer that cannot be reached fails over to the
    /// next one (`"PROXY a:3128; PROXY b:3128; DIRECT"`); ``proxy``'s credential, if any, goes
    /// to whichever proxy is used. The script runs on the engine's thread for each hop, in its
    /// own process (see ``ProxyAutoConfiguration``).
    ///
    /// ```swift
    /// request.proxyAutoConfiguration = try ProxyAutoConfiguration(contentsOfFile: "proxy.pac")
    /// ```
    public var proxyAutoConfiguration: ProxyAutoConfiguration? {
        get { setting(\.proxyAutoConfiguration) }
        set { set(\.proxyAutoConfiguration, newValue) }
    }

    // MARK: - Rates, budgets and order

    /// Caps the response body's receive rate at about this many bytes per second (default 0:
    /// no cap), like curl's `--limit-rate`.
    ///
    /// The engine stops reading while it is ahead of the rate, so the sender is slowed by TCP
    /// flow control and nothing piles up in memory. To cap several requests together, use a
    /// ``BandwidthBudget`` (``bandwidthBudget``) or the engine's
    /// ``Engine/Configuration/maxReceiveSpeed``.
    public var maxReceiveSpeed: UInt64 {
        get { setting(\.maxReceiveSpeed) }
        set { set(\.maxReceiveSpeed, newValue) }
    }

    /// Caps the rate at which this request is sent at about this many bytes per second
    /// (default 0: no cap), head and body, counted on the socket (over TLS, the encrypted
    /// bytes).
    ///
    /// This budget is the request's own, besides its ``bandwidthBudget`` and its engine's
    /// ``Engine/Configuration/maxSendSpeed``; the strictest one sets the pace.
    public var maxSendSpeed: UInt64 {
        get { setting(\.maxSendSpeed) }
        set { set(\.maxSendSpeed, newValue) }
    }

    /// A budget this request shares with the other requests set to it (default `nil`: none).
    ///
    /// The request obeys the group's budget besides its engine's
    /// (``Engine/Configuration/maxReceiveSpeed``, ``Engine/Configuration/maxSendSpeed``) and
    /// its own caps (``maxReceiveSpeed``, ``maxSendSpeed``). The budget is kept alive while
    /// the request runs; changing this property affects the next execution only, but the
    /// budget's rates may change at any time with
    /// ``BandwidthBudget/setMaxSpeed(receive:send:)``.
    ///
    /// ```swift
    /// let budget = BandwidthBudget(receive: 1 << 20)  // 1 MiB/s for the group
    /// first.bandwidthBudget = budget
    /// second.bandwidthBudget = budget
    /// ```
    public var bandwidthBudget: BandwidthBudget? {
        get { setting(\.bandwidthBudget) }
        set { set(\.bandwidthBudget, newValue) }
    }

    /// The request's rank among requests waiting in its engine to start (default 0; higher
    /// starts first, negative values are allowed).
    ///
    /// Requests wait in the engine for a slot of ``Engine/Configuration/maxActiveRequests``,
    /// or for a connection when their origin has ``Engine/Configuration/maxConnectionsPerOrigin``
    /// already. The highest priority waiting then starts first; equal priorities start in the
    /// order they were started. A request already running is never interrupted for one of
    /// higher priority. Values beyond the range of a C `int` are clamped to it. (A
    /// ``RequestQueue`` orders the requests it holds back by the priority given to
    /// ``RequestQueue/add(_:priority:at:)``, before they reach the engine.)
    public var priority: Int {
        get { setting(\.priority) }
        set { set(\.priority, newValue) }
    }
}
