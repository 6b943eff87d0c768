// Request: every field a caller sets before executing, kept in one lock-guarded box. The
// response side lives in Request+Response.swift and execution in Request+Execution.swift.

public import Dispatch
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes
import Synchronization

/// One HTTP exchange: what to send, where the response goes, how to be told, and (once done)
/// everything that came back.
///
/// Set the fields you need, then run the request in one of three ways:
///
/// - ``execute()`` returns at once; the ``listener`` and the completion handlers
///   (``onCompletion(_:)``) run later on ``callbackQueue``.
/// - ``executeAndWait()`` blocks until the request is done, and is safe to call on
///   ``callbackQueue`` itself (see its note).
/// - ``response()`` is the `async` form; cancelling the Swift task cancels the request.
///
/// ```swift
/// let request = Request(url: URL(string: "http://example.com/file.bin")!)
/// request.downloadFile = "/tmp/file.bin"
/// request.resume = true
/// request.listener = { request, state, percent in
///     print(state, percent)  // on callbackQueue, a global queue by default
///     return true            // false cancels
/// }
/// request.execute()
/// ```
///
/// Changing a field while the request runs affects only its next execution: each execution
/// works from a copy of the fields taken when it starts. A finished request may be executed
/// again; its response fields then describe the new execution.
///
/// ## Lifetime and released objects
///
/// A running request is kept alive by Tern until its last callback has been delivered, so
/// `Request(url: u).onCompletion { ... }.execute()` needs no stored reference. Closures are
/// held strongly, like any Swift closure: to avoid reaching an object the caller has let go of,
/// register them with an owner (``setListener(owner:_:)``, ``onCompletion(owner:_:)``), which
/// is held weakly. Once the owner is gone, its closures are never called again and the request
/// is cancelled. ``clearDelegatesAndCancel()`` drops every closure at once and guarantees
/// that none of them starts afterwards.
public final class Request: Sendable {
    /// Which way the bytes a progress event reports are flowing.
    public enum State: Int, Sendable, CustomStringConvertible {
        /// Sending the request body.
        case upload = 1
        /// Receiving the response.
        case download = 2

        public var description: String { self == .upload ? "upload" : "download" }
    }

    /// Receives progress: the request, the direction, and a percent from 0 to 100, or -1 when
    /// the request failed. Return `false` to cancel the request.
    ///
    /// For one execution, percents of each state never decrease, and the last `download`
    /// event of a successful request is 100, delivered exactly once. A failed or cancelled
    /// request ends with one event of percent -1 instead.
    public typealias Listener = @Sendable (Request, State, Int) -> Bool

    /// Runs once per execution, after the last listener event, on ``callbackQueue``.
    public typealias Completion = @Sendable (Request) -> Void

    /// Runs on the engine's thread when a response head arrives; return `false` to stop.
    public typealias HeadHandler = @Sendable (Request) -> Bool

    /// Receives response body bytes on the engine's thread; return `false` to stop.
    public typealias DataHandler = @Sendable (Data) -> Bool

    /// What to do about compressed (`Content-Encoding`) response bodies.
    public enum Decoding: Sendable, Hashable {
        /// Send `Accept-Encoding` (gzip, deflate, and br and zstd when the engine was built
        /// with them) and decode such bodies (the default); an unknown coding is an error.
        case automatic
        /// Send `Accept-Encoding` but keep the body as sent, still encoded.
        case raw
        /// Send no `Accept-Encoding` (unless in ``Request/headerFields``) and decode nothing.
        case none
    }

    /// Time limits per phase of the exchange, in seconds; 0 disables a limit.
    public struct Timeouts: Sendable, Hashable {
        /// Resolving the host and connecting (default 30).
        public var connect: TimeInterval
        /// From the request being sent to the end of the response head (default 60).
        public var headers: TimeInterval
        /// The longest silence while sending or receiving a body (default 60).
        public var body: TimeInterval
        /// The whole request, retries and their delays included (default 0: none).
        public var total: TimeInterval

        /// Creates time limits; every parameter has the engine's default.
        public init(
            connect: TimeInterval = 30, headers: TimeInterval = 60, body: TimeInterval = 60,
            total: TimeInterval = 0
        ) {
            self.connect = connect
            self.headers = headers
            self.body = body
            self.total = total
        }
    }

    /// How far a request has got: the last event reported and the byte counts behind it.
    public struct Progress: Sendable, Hashable {
        /// The direction of the last event, or `nil` before the first one.
        public var state: State?
        /// The percent of the last event (0–100), or -1 after a failure.
        public var percent: Int
        /// Request body bytes sent.
        public var bytesSent: UInt64
        /// Request body bytes to send, or `nil` when unknown.
        public var bytesToSend: UInt64?
        /// Position reached in the resource: body bytes received, plus the offset of a resumed
        /// or ranged download.
        public var bytesReceived: UInt64
        /// The position at which the body ends, or `nil` when the server did not say.
        public var bytesExpected: UInt64?

        /// An empty progress: nothing sent or received yet.
        public init(
            state: State? = nil, percent: Int = 0, bytesSent: UInt64 = 0,
            bytesToSend: UInt64? = nil, bytesReceived: UInt64 = 0, bytesExpected: UInt64? = nil
        ) {
            self.state = state
            self.percent = percent
            self.bytesSent = bytesSent
            self.bytesToSend = bytesToSend
            self.bytesReceived = bytesReceived
            self.bytesExpected = bytesExpected
        }
    }

    // Everything a caller may set. Planned (Plan) when an execution starts.
    //
    // Only what nearly every request sets or hands over per execution is stored inline; the
    // sixty settings callers rarely change live in `Options`, behind one copy-on-write box.
    // A request that changes none of them shares `OptionsBox.defaults` with every other such
    // request: creating it, planning it and freeing it skip those fields, and "all defaults"
    // is one identity check (the plan and the C request's set-up rely on it).
    @dynamicMemberLookup
    struct Settings: Sendable {
        var url: URL
        var method: HTTPRequest.Method
        var headerFields = HTTPFields()
        var callbackQueue: DispatchQueue = Request.defaultCallbackQueue
        var engine: Engine?
        var listener: Listener?
        var completions: [Completion] = []
        var headHandler: HeadHandler?
        var dataHandler: DataHandler?
        var progressHandler: ProgressHandler?
        /// Streams handed out by progressEvents, fed by the next execution only.
        var progressStreams: [AsyncStream<Progress>.Continuation] = []
        /// A name given to setHeader(_:_:) that cannot be sent: the execution fails with it.
        var invalidHeader: String?
        /// The rarely set settings; shared, and copied before the first change.
        var options = OptionsBox.defaults

        init(url: URL, method: HTTPRequest.Method) {
            self.url = url
            self.method = method
        }

        /// True while no rarely set setting was changed (not even to its default value).
        var hasDefaultOptions: Bool { options === OptionsBox.defaults }

        subscript<T>(dynamicMember key: KeyPath<Options, T>) -> T {
            options.value[keyPath: key]
        }

        subscript<T>(dynamicMember key: WritableKeyPath<Options, T>) -> T {
            get { options.value[keyPath: key] }
            set {
                if !isKnownUniquelyReferenced(&options) { options = OptionsBox(options.value) }
                options.value[keyPath: key] = newValue
            }
        }
    }

    /// The settings callers rarely change (see ``Settings``), all with their defaults.
    struct Options: Sendable {
        var userAgent: String?
        var referrer: String?
        var origin: String?
        var cookie: String?
        var body: Data?
        var bodyFile: String?
        var uploadOffset: UInt64 = 0
        var uploadEnd: UInt64 = 0
        var downloadFile: String?
        var downloadOffset: UInt64 = 0
        var downloadEnd: UInt64 = 0
        var resume = false
        var downloadsErrorBodies = false
        var headOnly = false
        var persistent = true
        var allowsPipelining = false
        var bufferSize = 0
        var timeouts = Timeouts()
        var maxRetries = 0
        var retryDelay: TimeInterval = 0
        var maxRetryDelay: TimeInterval = 600
        var tag = 0
        var userData: (any Sendable)?
        var encoding: String?
        var cacheControl: String?
        var ims: Date?
        var sendCacheHeader = false
        var decoding = Decoding.automatic
        var decodingLimits = DecodingLimits()
        var requestBody: RequestBody?
        var postValues = URLEncodedForm()
        var compressBody = false
        var expectContinue = ExpectContinue()
        var tls: TLSOptions?
        var concatData = false
        var http10 = false
        var httpVersion = HTTPVersionPreference.automatic
        var maxReceiveSpeed: UInt64 = 0
        var maxSendSpeed: UInt64 = 0
        var bandwidthBudget: BandwidthBudget?
        var cache: HTTPCache?
        var cachePolicy: HTTPCache.Policy = .useDefault
        var cacheStoragePolicy: HTTPCache.StoragePolicy?
        var secondsToCache: TimeInterval?
        var priority = 0
        var maxRedirects = 20
        var redirectPolicy = RedirectPolicy()
        var credential: Credential?
        var authenticationSchemes = AuthenticationSchemes.any
        var sessionCredentialStore: (any CredentialStore)? = SessionCredentialStore.shared
        var persistentCredentialStore: (any CredentialStore)?
        var authenticationHandler: AuthenticationChallenge.Handler?
        var usesCookies = true
        var cookieJar: CookieJar = .shared
        var proxy: ProxyConfiguration?
        var proxyAuthenticationSchemes = AuthenticationSchemes.any
        var proxyEnvironment: ProxyEnvironment?
        var proxyAutoConfiguration: ProxyAutoConfiguration?
        var omittedHeaderFields: [String] = []
        var progressInterval: TimeInterval = 0.1
    }

    /// Holds ``Options`` for copy-on-write. Unchecked: `value` changes only through
    /// ``Settings``'s subscript, under the request's storage lock, and only while the box is
    /// referenced by that one request (a plan or another request holding it makes the next
    /// change copy it first).
    final class OptionsBox: @unchecked Sendable {
        @exclusivity(unchecked) var value: Options

        init(_ value: Options) { self.value = value }

        /// Shared by every request that changed none of its options.
        static let defaults = OptionsBox(Options())
    }

    // Guarded state: the settings, the outcome of the latest execution, that execution, and
    // the queue entry of a request waiting in a RequestQueue (never both run and entry).
    struct Storage: Sendable {
        var settings: Settings
        var outcome = Outcome()
        var run: Execution?
        var queueEntry: QueueEntry?
    }

    #if TERN_PTHREAD_LOCKS
    /// ThreadSanitizer builds (scripts/test.sh defines the flag): the pthread lock it
    /// understands (see Locked.swift).
    typealias StorageLock = Locked<Storage>
    #else
    /// The standard library's mutex, stored inline: no allocation of its own and a futex
    /// rather than a pthread mutex (about 1,000 instructions less per request than
    /// ``Locked``). ThreadSanitizer cannot see its futex path, hence the flag above.
    typealias StorageLock = Mutex<Storage>
    #endif

    let storage: StorageLock

    /// The global queue, fetched once: on Linux each `DispatchQueue.global()` makes a new
    /// wrapper object, one allocation per request.
    static let defaultCallbackQueue = DispatchQueue.global()

    /// A number unique to this request within the process, used in log metadata.
    public let id: UInt64

    private static let nextID = Atomic<UInt64>(1)

    /// Creates a request.
    ///
    /// - Parameters:
    ///   - url: An `http` or `https` URL. A `user:password@` part is the request's
    ///     credential when ``credential`` is `nil` (see ``credential``), and never goes into
    ///     the request line.
    ///   - method: The request method (default GET).
    public init(url: URL, method: HTTPRequest.Method = .get) {
        self.id = Self.nextID.add(1, ordering: .relaxed).oldValue
        self.storage = StorageLock(Storage(settings: Settings(url: url, method: method)))
    }

    /// Creates a request from a URL string, or returns `nil` when the string is not an
    /// absolute `http` or `https` URL with a host (and a port from 1 to 65535, if any).
    ///
    /// - Parameters:
    ///   - string: The URL, such as `"http://example.com/"`.
    ///   - method: The request method (default GET).
    public convenience init?(string: String, method: HTTPRequest.Method = .get) {
        guard let url = URL(string: string), Self.isSupported(url) else { return nil }
        self.init(url: url, method: method)
    }

    /// True for an absolute http(s) URL with a host and a port in range.
    static func isSupported(_ url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = url.host, !host.isEmpty
        else { return false }
        if let port = url.port, !(1...65535).contains(port) { return false }
        return true
    }

    // MARK: - What to send

    /// The URL to request.
    ///
    /// A `user:password@` part (percent-encoded) answers the origin's authentication
    /// challenges when ``credential`` is `nil`, with the schemes of
    /// ``authenticationSchemes``; it never goes into the request line. Redirects do not
    /// change this property: see ``effectiveURL`` and ``originalURL``.
    public var url: URL {
        get { setting(\.url) }
        set { set(\.url, newValue) }
    }

    /// The request method (default GET). ``headOnly`` overrides it with HEAD.
    public var method: HTTPRequest.Method {
        get { setting(\.method) }
        set { set(\.method, newValue) }
    }

    /// Header fields to send, in order.
    ///
    /// The dedicated properties (``userAgent``, ``referrer``, ``origin``, ``cookie``,
    /// ``encoding``, ``cacheControl``, ``ims``, ``sendCacheHeader``) replace fields of the same
    /// name here. `Content-Length` and `Transfer-Encoding` are the engine's: setting them fails
    /// the request with ``TernError/Code/badHeader``. `Connection: close` makes the request
    /// non-persistent.
    public var headerFields: HTTPFields {
        get { setting(\.headerFields) }
        set { set(\.headerFields, newValue) }
    }

    /// Names of fields the engine adds by itself not to send (curl's `-H "Name:"`): `Host`,
    /// `User-Agent`, `Accept`, `Accept-Encoding`, `Connection` and `Expect`; other names change
    /// nothing. Fields in ``headerFields`` are still sent.
    public var omittedHeaderFields: [String] {
        get { setting(\.omittedHeaderFields) }
        set { set(\.omittedHeaderFields, newValue) }
    }

    /// The `User-Agent` field; `nil` leaves the engine's (`tern/VERSION` by default).
    public var userAgent: String? {
        get { setting(\.userAgent) }
        set { set(\.userAgent, newValue) }
    }

    /// The `Referer` field.
    public var referrer: String? {
        get { setting(\.referrer) }
        set { set(\.referrer, newValue) }
    }

    /// The `Origin` field.
    public var origin: String? {
        get { setting(\.origin) }
        set { set(\.origin, newValue) }
    }

    /// The `Cookie` field, such as `"a=1; b=2"` (mesibo's `cookie`).
    ///
    /// These cookies are sent as they are, in one `Cookie` field together with those of
    /// ``cookieJar`` for the URL (the jar's first), and only to the request's own origin: a
    /// redirect to another scheme, host or port drops them for the rest of the chain (unless
    /// ``redirectPolicy`` has ``RedirectPolicy/trustsCrossOrigin``). A `Cookie` field in
    /// ``headerFields`` is treated the same way.
    public var cookie: String? {
        get { setting(\.cookie) }
        set { set(\.cookie, newValue) }
    }

    /// The request body, from memory (copied when the request starts).
    ///
    /// Set one of this, ``bodyFile`` and ``requestBody``, not several (``requestBody`` also
    /// takes forms, JSON, multipart forms and streams). POST, PUT and PATCH without a body
    /// send `Content-Length: 0`.
    public var body: Data? {
        get { setting(\.body) }
        set { set(\.body, newValue) }
    }

    /// A file whose bytes ``uploadOffset``..<``uploadEnd`` are the request body (the same as
    /// ``requestBody`` set to ``RequestBody/file(_:offset:end:contentType:)``).
    ///
    /// The file is streamed through the connection buffer, never loaded whole.
    public var bodyFile: String? {
        get { setting(\.bodyFile) }
        set { set(\.bodyFile, newValue) }
    }

    /// The first byte of ``bodyFile`` to send (default 0).
    public var uploadOffset: UInt64 {
        get { setting(\.uploadOffset) }
        set { set(\.uploadOffset, newValue) }
    }

    /// The byte of ``bodyFile`` after the last one to send; 0 sends to the end of the file.
    public var uploadEnd: UInt64 {
        get { setting(\.uploadEnd) }
        set { set(\.uploadEnd, newValue) }
    }

    /// The `Content-Encoding` of the request body (such as `"gzip"`); the body is sent as
    /// given. To have Tern compress the body, use ``compressBody`` instead.
    public var encoding: String? {
        get { setting(\.encoding) }
        set { set(\.encoding, newValue) }
    }

    /// The `Cache-Control` field to send, such as `"max-age=0"`.
    public var cacheControl: String? {
        get { setting(\.cacheControl) }
        set { set(\.cacheControl, newValue) }
    }

    /// Sends `If-Modified-Since` with this date, so an unchanged resource answers 304.
    public var ims: Date? {
        get { setting(\.ims) }
        set { set(\.ims, newValue) }
    }

    /// Asks caches and proxies on the way not to answer from their store:
    /// `Cache-Control: no-cache` (unless ``cacheControl`` is set) and `Pragma: no-cache`.
    public var sendCacheHeader: Bool {
        get { setting(\.sendCacheHeader) }
        set { set(\.sendCacheHeader, newValue) }
    }

    /// Whether to ask for compressed responses and decode them (default ``Decoding/automatic``).
    ///
    /// Decoded bodies stream through the connection buffer, in fixed zlib buffers, whatever
    /// their size; ``Response/encoding`` still names the encoding the server used and
    /// ``Response/decodedEncoding`` the one Tern undid. ``decodingLimits`` stops
    /// decompression bombs. With ``Decoding/raw`` the body is kept as sent
    /// (``rawResponseData``).
    public var decoding: Decoding {
        get { setting(\.decoding) }
        set { set(\.decoding, newValue) }
    }

    /// Sends HEAD and reads no body, whatever ``method`` says.
    public var headOnly: Bool {
        get { setting(\.headOnly) }
        set { set(\.headOnly, newValue) }
    }

    /// Keeps the connection open for later requests (default `true`); `false` sends
    /// `Connection: close`.
    public var persistent: Bool {
        get { setting(\.persistent) }
        set { set(\.persistent, newValue) }
    }

    /// Lets this request be pipelined behind others on a busy connection when it is
    /// idempotent and has no body (needs an engine ``Engine/Configuration/pipelineDepth``
    /// above 1).
    public var allowsPipelining: Bool {
        get { setting(\.allowsPipelining) }
        set { set(\.allowsPipelining, newValue) }
    }

    /// Speaks HTTP/1.0 (ASIHTTPRequest's `useHTTPVersionOne`): no chunked request bodies, and
    /// keep-alive only when the server offers it.
    ///
    /// It wins over ``httpVersion``: a request that speaks HTTP/1.0 never speaks HTTP/2.
    public var http10: Bool {
        get { setting(\.http10) }
        set { set(\.http10, newValue) }
    }

    /// The HTTP versions the request may speak (default ``HTTPVersionPreference/automatic``:
    /// HTTP/2 when the server offers it over TLS, HTTP/1.1 otherwise, as curl does).
    ///
    /// ``Response/httpVersion`` tells which version the response came in. Requests that
    /// differ here never share a connection. Whatever is set, HTTP/1.1 is spoken by:
    ///
    /// - requests whose credential is for NTLM alone (``authenticationSchemes`` is
    ///   ``AuthenticationSchemes/ntlm``): NTLM authenticates a connection, which HTTP/2 would
    ///   share with other requests. With other schemes allowed too (the default), a request
    ///   starts on HTTP/2 and, when a server offers NTLM there, goes on over HTTP/1.1 (as curl
    ///   does when told HTTP/1.1 is required);
    /// - `http` requests sent through an HTTP proxy without a tunnel;
    /// - requests with a ``maxReceiveSpeed``, a ``maxSendSpeed`` or a ``bandwidthBudget``,
    ///   which count the bytes of a connection of their own.
    ///
    /// With ``http10``, HTTP/1.0 is.
    ///
    /// ```swift
    /// let request = Request(url: URL(string: "http://127.0.0.1:8080/")!)
    /// request.httpVersion = .http2PriorKnowledge  // h2c: HTTP/2 without TLS
    /// let response = try await request.response()
    /// print(response.httpVersion)                 // HTTP/2
    /// ```
    public var httpVersion: HTTPVersionPreference {
        get { setting(\.httpVersion) }
        set { set(\.httpVersion, newValue) }
    }

    /// The connection buffer size for connections this request opens, in bytes; 0 (the
    /// default) uses the engine's ``Engine/Configuration/bufferSize``. Pooled connections are
    /// shared only between requests asking the same size.
    public var bufferSize: Int {
        get { setting(\.bufferSize) }
        set { set(\.bufferSize, newValue) }
    }

    /// Time limits per phase.
    public var timeouts: Timeouts {
        get { setting(\.timeouts) }
        set { set(\.timeouts, newValue) }
    }

    /// How many times a transient failure is retried with a fresh attempt (default 0).
    ///
    /// Failures before anything was sent (connection refused, connect failed or timed out)
    /// are retried for every method. Resets, empty replies, header and body timeouts, I/O
    /// errors and truncated bodies are retried only for idempotent methods (GET, HEAD, PUT,
    /// DELETE, OPTIONS, TRACE). So are responses with status 500, 502, 503 and 504; 408 and
    /// 429 (whose senders say the request was not processed) are retried for every method.
    /// When every retry is spent, the last response (such as a 503) is the result.
    ///
    /// Nothing is retried once body bytes were handed to ``dataHandler``, after a stream body
    /// was read, or after a cancel. A retried ``downloadFile`` continues from what the failed
    /// attempt left in its `.part` file (with `If-Range`, so a changed resource restarts).
    /// The ``Timeouts/total`` limit spans all attempts and delays. This is ORA's
    /// `retryCount` and ASIHTTPRequest's `numberOfTimesToRetryOnTimeout` in one setting.
    public var maxRetries: Int {
        get { setting(\.maxRetries) }
        set { set(\.maxRetries, newValue) }
    }

    /// Seconds to wait before the first retry, doubled before each further one (default 0:
    /// retry at once).
    ///
    /// A `Retry-After` field on a 408, 429 or 503 response asks for a longer wait, which is
    /// honoured up to ``maxRetryDelay``. A retry whose wait would end past the
    /// ``Timeouts/total`` limit is not made: the failure at hand is the result.
    public var retryDelay: TimeInterval {
        get { setting(\.retryDelay) }
        set { set(\.retryDelay, newValue) }
    }

    /// The longest wait before a retry, whether doubled or asked by `Retry-After`, in seconds
    /// (default 600, as curl).
    public var maxRetryDelay: TimeInterval {
        get { setting(\.maxRetryDelay) }
        set { set(\.maxRetryDelay, newValue) }
    }

    // MARK: - Where the response goes

    /// A file that receives a 2xx response body instead of memory.
    ///
    /// The body is written to ``temporaryDownloadFile`` (this path plus `.part`), opened only
    /// once a 2xx head arrives, and moved over this path only when the whole body arrived
    /// (ASIHTTPRequest's `temporaryFileDownloadPath`). So a failed or cancelled request
    /// never truncates or half-overwrites a good file: the file at this path is either the
    /// old one or the complete new one. Without ``resume`` a failed transfer removes its
    /// `.part` file. Another status keeps up to 1 MiB of its body in ``data`` and leaves the
    /// files alone. Devices and pipes (such as `/dev/null`) are written in place. With
    /// ``downloadOffset`` or ``downloadEnd`` a `Range` is requested and the file receives
    /// exactly the bytes returned.
    ///
    /// A download file combines with any request body, such as a multipart upload whose
    /// answer is saved to disk.
    public var downloadFile: String? {
        get { setting(\.downloadFile) }
        set { set(\.downloadFile, newValue) }
    }

    /// The first byte of the resource to download into ``downloadFile`` (default 0).
    public var downloadOffset: UInt64 {
        get { setting(\.downloadOffset) }
        set { set(\.downloadOffset, newValue) }
    }

    /// The byte after the last one to download; 0 (the default) downloads to the end.
    public var downloadEnd: UInt64 {
        get { setting(\.downloadEnd) }
        set { set(\.downloadEnd, newValue) }
    }

    /// Whether the body of a final response with a non-2xx status also goes to
    /// ``downloadFile``, replacing the file once complete as a 2xx body would (curl's `-o`
    /// without `-f`). Default `false`: an error status keeps up to 1 MiB of its body in
    /// ``data`` and leaves the file alone, so an error page never replaces a good download.
    ///
    /// Either way, a transfer that fails (reset, timeout, truncated) never replaces the file,
    /// and with ``resume`` an error page never overwrites the partial file.
    public var downloadsErrorBodies: Bool {
        get { setting(\.downloadsErrorBodies) }
        set { set(\.downloadsErrorBodies, newValue) }
    }

    /// Continues an earlier, interrupted download of ``downloadFile``.
    ///
    /// The partial file is ``temporaryDownloadFile`` when a previous attempt left one (a
    /// failed or cancelled request with `resume` keeps it), else ``downloadFile`` itself
    /// (curl's `-C -`); it continues from its current size with a `Range` request.
    ///
    /// The partial file remembers the resource's strong `ETag` (else its `Last-Modified`) in
    /// `downloadFile.part.validator`, sent back as `If-Range`: if the resource changed in the
    /// meantime, the server sends it whole and the download restarts from zero instead of
    /// splicing two versions. A server that ignores the range (200 instead of 206) restarts
    /// the file cleanly too, and a `416` on a file that is already complete counts as
    /// success.
    public var resume: Bool {
        get { setting(\.resume) }
        set { set(\.resume, newValue) }
    }

    /// Receives the response body as it arrives instead of keeping it in ``data``.
    ///
    /// The handler runs on the engine's thread, synchronously: the engine reads no further
    /// bytes of any of its connections until it returns, which bounds memory whatever the
    /// body's size (the `tern` CLI streams to stdout this way). Nothing is accumulated:
    /// ``data`` stays empty, and each piece (decoded when ``decoding`` decodes) is yours
    /// alone. Keep it short, never wait for
    /// another request of the same engine, and return `false` to stop the request, which then
    /// fails with ``TernError/Code/callbackAborted``. With ``concatData`` the pieces are
    /// coalesced up to ``bufferSize`` bytes first.
    ///
    /// Set either this or ``downloadFile``, not both.
    public var dataHandler: DataHandler? {
        get { setting(\.dataHandler) }
        set { set(\.dataHandler, newValue) }
    }

    /// Runs on the engine's thread when a response head arrives, before any body byte;
    /// ``statusCode``, ``responseHeaders``, ``sentRequestHead`` and ``effectiveURL`` are
    /// readable inside it. Return `false` to stop the request (it fails with
    /// ``TernError/Code/cancelled``).
    ///
    /// It runs once per hop: for each redirect and each `401`/`407` challenge on the way, then
    /// for the final response (the head of a redirect the engine is about to follow looks like
    /// any other head; ``effectiveURL`` names the URL it answers).
    ///
    /// The same rules as for ``dataHandler`` apply: keep it short.
    public var headHandler: HeadHandler? {
        get { setting(\.headHandler) }
        set { set(\.headHandler, newValue) }
    }

    /// Coalesces response data up to the buffer size before anyone is told (mesibo's
    /// `concatData`): ``dataHandler`` receives pieces of ``bufferSize`` bytes (the last may be
    /// shorter), and the listener gets at most one `download` event per ``bufferSize`` bytes
    /// received, besides the first and the final one.
    public var concatData: Bool {
        get { setting(\.concatData) }
        set { set(\.concatData, newValue) }
    }

    // MARK: - How to be told

    /// The queue that runs the ``listener``, the ``progressHandler`` and the completion
    /// handlers (default: a global concurrent queue, `.global()`, as for ``Client``).
    ///
    /// Events of one request are delivered one at a time and in order, even on a concurrent
    /// queue. The default never waits for a queue the program may not serve: a command-line
    /// tool or a service that blocks its main thread would never see events sent to `.main`.
    /// An app that updates its UI from the handlers sets `.main` (ASIHTTPRequest's and
    /// mesibo's default), whose events then run on the main thread.
    public var callbackQueue: DispatchQueue {
        get { setting(\.callbackQueue) }
        set { set(\.callbackQueue, newValue) }
    }

    /// The engine that runs the request (default ``Engine/shared``).
    public var engine: Engine {
        get { setting(\.engine) ?? .shared }
        set { set(\.engine, newValue) }
    }

    /// Receives progress events on ``callbackQueue``; see ``Listener``.
    ///
    /// The closure is held strongly until it is replaced or ``clearDelegatesAndCancel()`` is
    /// called. To hold an object weakly, use ``setListener(owner:_:)``.
    public var listener: Listener? {
        get { setting(\.listener) }
        set { set(\.listener, newValue) }
    }

    /// Sets a listener that holds `owner` weakly.
    ///
    /// Once `owner` has been deallocated the listener is never called again, and the next
    /// event cancels the request, so no callback can reach an object the caller released.
    ///
    /// - Parameters:
    ///   - owner: The object the listener works for, such as a view controller.
    ///   - listener: Receives the owner (while it lives), the request, state and percent.
    /// - Returns: The request, for chaining.
    @discardableResult
    public func setListener<Owner: AnyObject & Sendable>(
        owner: Owner, _ listener: @escaping @Sendable (Owner, Request, State, Int) -> Bool
    ) -> Self {
        let weakOwner = WeakReference(owner)
        self.listener = { request, state, percent in
            guard let owner = weakOwner.value else { return false }
            return listener(owner, request, state, percent)
        }
        return self
    }

    /// Adds a closure that runs once per execution, after the last listener event, on
    /// ``callbackQueue``.
    ///
    /// - Parameter handler: Receives the finished request; read ``result`` or the response
    ///   fields from it.
    /// - Returns: The request, for chaining.
    @discardableResult
    public func onCompletion(_ handler: @escaping Completion) -> Self {
        storage.withLock { $0.settings.completions.append(handler) }
        return self
    }

    /// Adds a completion handler that holds `owner` weakly and is skipped once the owner has
    /// been deallocated.
    ///
    /// - Parameters:
    ///   - owner: The object the handler works for.
    ///   - handler: Receives the owner and the finished request.
    /// - Returns: The request, for chaining.
    @discardableResult
    public func onCompletion<Owner: AnyObject & Sendable>(
        owner: Owner, _ handler: @escaping @Sendable (Owner, Request) -> Void
    ) -> Self {
        let weakOwner = WeakReference(owner)
        return onCompletion { request in
            if let owner = weakOwner.value { handler(owner, request) }
        }
    }

    /// A number for the caller's own use (default 0).
    public var tag: Int {
        get { setting(\.tag) }
        set { set(\.tag, newValue) }
    }

    /// A value for the caller's own use.
    public var userData: (any Sendable)? {
        get { setting(\.userData) }
        set { set(\.userData, newValue) }
    }

    // MARK: - Storage helpers

    func setting<T: Sendable>(_ key: KeyPath<Settings, T>) -> T {
        storage.withLock { $0.settings[keyPath: key] }
    }

    func set<T: Sendable>(_ key: WritableKeyPath<Settings, T>, _ value: T) {
        storage.withLock { $0.settings[keyPath: key] = value }
    }
}

/// A weak reference that may cross threads.
final class WeakReference<Object: AnyObject & Sendable>: Sendable {
    weak let value: Object?

    init(_ value: Object) {
        self.value = value
    }
}
