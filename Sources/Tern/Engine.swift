// Engine: the Swift face of tern_engine_t. One engine owns one libuv loop thread, its
// connection pools and its counters. The C calls themselves live in CTern+Bridging.swift, the
// only file that talks to the C engine.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import Logging
import Dispatch
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An HTTP/1.1 and HTTP/2 engine: one I/O thread, keep-alive connection pools per origin, and
/// counters.
///
/// Most programs use ``shared``. Create your own engine when you want a separate I/O thread,
/// separate pools, or a different ``Configuration`` (buffer size, limits, user agent, logger):
///
/// ```swift
/// let engine = try Engine(configuration: .init(maxConnectionsPerOrigin: 8))
/// let request = Request(url: url)
/// request.engine = engine
/// ```
///
/// Requests keep their engine alive while they run. When the last reference to an engine goes
/// (which may happen on any thread, the engine's own included), its thread stops and its idle
/// connections close.
///
/// - Note: Handlers that run on the engine's thread (``Request/dataHandler`` and
///   ``Request/headHandler``) must return quickly and must never wait for another request of
///   the same engine.
public final class Engine: Sendable {
    /// Settings fixed when an engine is created.
    public struct Configuration: Sendable {
        /// Bytes of the one I/O buffer each connection owns (default 65536, minimum 1024).
        ///
        /// Response bodies stream through this buffer; it also bounds ``Request/concatData``.
        public var bufferSize: Int
        /// How long an idle pooled connection is kept, in seconds (default 60; 0 disables
        /// pooling).
        public var idleTimeout: TimeInterval
        /// The largest response head accepted, in bytes (default 65536; never more than
        /// ``bufferSize``).
        public var maxHeaderSize: Int
        /// Connections per origin, busy and idle (default 6, as URLSession; 0: unlimited).
        /// Excess requests wait for a pooled connection, so a burst of requests does not
        /// overflow a small server's listen queue (Python's `http.server` holds 5).
        public var maxConnectionsPerOrigin: Int
        /// Requests in progress at once in the whole engine (default 0: unlimited).
        ///
        /// A request is in progress from the moment it starts looking for a connection until
        /// it completes, redirects, challenges and retries included. Beyond this number,
        /// requests wait in the engine, highest ``Request/priority`` first (equal priorities
        /// in the order they were started), and start as others complete. A waiting request
        /// that is cancelled ends at once and never reaches a server. The per-origin limit,
        /// ``maxConnectionsPerOrigin``, still applies to the requests admitted here.
        public var maxActiveRequests: Int
        /// The engine's receive budget in bytes per second, shared by all of its requests
        /// together (default 0: none).
        ///
        /// Bytes are counted as read from the sockets (over TLS, the encrypted bytes), and the
        /// engine stops reading while over budget, so senders are slowed by TCP flow control.
        /// Connections share the budget about equally. Change it while the engine runs with
        /// ``Engine/setMaxSpeed(receive:send:)``; see also ``BandwidthBudget`` for a budget
        /// of a group of requests.
        public var maxReceiveSpeed: UInt64
        /// The engine's send budget in bytes per second (request heads and bodies written to
        /// the sockets), shared by all of its requests together (default 0: none). See
        /// ``maxReceiveSpeed``.
        public var maxSendSpeed: UInt64
        /// How many idempotent requests may be queued on one connection (default 1: no
        /// pipelining). Requests opt in with ``Request/allowsPipelining``.
        public var pipelineDepth: Int
        /// What a request to an HTTP/2 origin does when every stream its connections may
        /// carry (the server's `SETTINGS_MAX_CONCURRENT_STREAMS`) is in use: `false` (the
        /// default) waits for a stream to free up; `true` opens another connection, within
        /// ``maxConnectionsPerOrigin``.
        public var opensHTTP2ConnectionWhenFull: Bool
        /// The `User-Agent` sent when a request sets none: `nil` sends `tern/VERSION`, `""`
        /// sends none.
        public var userAgent: String?
        /// Where the engine logs request lifecycle events (status, connection reuse, timing).
        ///
        /// Tern logs at `.debug` (one line per request and retry) and `.trace` (connections,
        /// every engine step). The engine's own C log is wired only when this logger's level
        /// is `.debug` or lower, so it costs nothing otherwise.
        public var logger: Logger
        /// TLS options for `https` requests that set no ``Request/tls`` of their own
        /// (default: verify against the system trust store, no client certificate).
        public var tls: TLSOptions
        /// The proxies for requests that set neither ``Request/proxy`` nor
        /// ``Request/proxyEnvironment`` (default ``ProxyEnvironment/direct``: none).
        ///
        /// The library never reads the environment by itself. Opt in to `http_proxy`,
        /// `https_proxy`, `all_proxy` and `no_proxy` with `ProxyEnvironment()`, or send every
        /// request through one proxy:
        ///
        /// ```swift
        /// var proxies = ProxyEnvironment.direct
        /// proxies.explicitProxy = try ProxyConfiguration("http://proxy.example:3128")
        /// let engine = try Engine(configuration: .init(proxyEnvironment: proxies))
        /// ```
        public var proxyEnvironment: ProxyEnvironment
        /// How long a resolved host name's addresses are reused by new connections, in seconds
        /// (default 60, as curl; 0: every connection asks the resolver).
        public var dnsCacheTimeout: TimeInterval

        /// Creates a configuration; every parameter has the engine's default.
        public init(
            bufferSize: Int = 65536,
            idleTimeout: TimeInterval = 60,
            maxHeaderSize: Int = 65536,
            maxConnectionsPerOrigin: Int = 6,
            maxActiveRequests: Int = 0,
            maxReceiveSpeed: UInt64 = 0,
            maxSendSpeed: UInt64 = 0,
            pipelineDepth: Int = 1,
            userAgent: String? = nil,
            logger: Logger = Logger(label: "tern"),
            tls: TLSOptions = .default,
            proxyEnvironment: ProxyEnvironment = .direct,
            dnsCacheTimeout: TimeInterval = 60,
            opensHTTP2ConnectionWhenFull: Bool = false
        ) {
            self.dnsCacheTimeout = dnsCacheTimeout
            self.opensHTTP2ConnectionWhenFull = opensHTTP2ConnectionWhenFull
            self.tls = tls
            self.proxyEnvironment = proxyEnvironment
            self.bufferSize = bufferSize
            self.idleTimeout = idleTimeout
            self.maxHeaderSize = maxHeaderSize
            self.maxConnectionsPerOrigin = maxConnectionsPerOrigin
            self.maxActiveRequests = maxActiveRequests
            self.maxReceiveSpeed = maxReceiveSpeed
            self.maxSendSpeed = maxSendSpeed
            self.pipelineDepth = pipelineDepth
            self.userAgent = userAgent
            self.logger = logger
        }
    }

    /// Counters read from the engine, for tests and diagnostics. Not API: the leading `_`
    /// means it may change in any release.
    public struct _Stats: Sendable, Equatable, CustomStringConvertible {
        /// TCP connections opened since the engine started.
        public var connectionsOpened: UInt64
        /// Connections open now, busy or idle.
        public var connectionsOpen: UInt64
        /// Idle connections in the pool now.
        public var connectionsIdle: UInt64
        /// Requests submitted and not yet completed.
        public var requestsActive: UInt64
        /// Requests completed since start, any outcome.
        public var requestsCompleted: UInt64
        /// Requests sent on a reused connection.
        public var reused: UInt64
        /// Silent retries after a stale pooled connection.
        public var retries: UInt64
        /// C request objects allocated and not yet freed, across all engines.
        public var requestsLive: UInt64
        /// Host names handed to the resolver (not answered from the DNS cache).
        public var dnsLookups: UInt64
        /// Requests waiting now: for a slot of ``Configuration/maxActiveRequests``, or for a
        /// connection of their origin.
        public var requestsWaiting: UInt64
        /// Bytes read from sockets since start (over TLS, the encrypted bytes).
        public var bytesReceived: UInt64
        /// Bytes of requests written to sockets since start (over TLS, the encrypted bytes;
        /// handshakes not counted).
        public var bytesSent: UInt64

        public var description: String {
            "opened=\(connectionsOpened) open=\(connectionsOpen) idle=\(connectionsIdle) "
                + "active=\(requestsActive) completed=\(requestsCompleted) reused=\(reused) "
                + "retries=\(retries) live=\(requestsLive) lookups=\(dnsLookups) "
                + "waiting=\(requestsWaiting) received=\(bytesReceived) sent=\(bytesSent)"
        }
    }

    /// The engine every request uses unless told otherwise.
    ///
    /// It is created on first use with the default ``Configuration`` (taking the `Logger`
    /// from whatever `LoggingSystem` is bootstrapped by then) and never shut down.
    public static let shared: Engine = {
        do {
            return try Engine()
        } catch {
            fatalError("Tern: cannot start the shared engine: \(error)")
        }
    }()

    /// The version of the C engine in use, such as `"0.5.0"`.
    public static var version: String { CEngine.versionString }

    /// The versions of the C engine and of the libraries it runs on, read at run time, as
    /// `curl -V` lists them: `"libtern/0.5.0 libuv/1.44.2 OpenSSL/3.0.15 zlib/1.2.13
    /// nghttp2/1.52.0"`, then `brotli/…` and `zstd/…` when the engine decodes those.
    public static var libraryVersions: String { CEngine.versionInfo }

    /// The settings this engine was created with.
    public let configuration: Configuration

    /// Owns the tern_engine_t: freed when the engine and every task that prefers its
    /// ``executor`` are gone.
    let core: EngineCore
    /// The tern_engine_t. Only passed to C calls documented as callable from any thread
    /// (submit, call, stats, free), so sharing the pointer across threads is safe.
    var handle: OpaquePointer { core.handle }

    /// A task executor that runs jobs on this engine's I/O thread.
    ///
    /// A task that prefers it runs on the engine's thread between network events, so that
    /// submitting a request and resuming after its response involve no thread switch (the
    /// fastest way to run many small requests from async code):
    ///
    /// ```swift
    /// await withTaskGroup(of: Void.self) { group in
    ///     for url in urls {
    ///         group.addTask(executorPreference: engine.executor) {
    ///             let request = Request(url: url)
    ///             request.engine = engine
    ///             _ = try? await request.response()
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// Code on this executor shares the thread with every request of the engine: keep it
    /// short, and never block it (no `executeAndWait()`, no waiting on a semaphore or lock
    /// another task holds). Tasks that prefer it keep the engine's thread alive.
    public let executor: EngineExecutor

    var logger: Logger { configuration.logger }

    /// The configuration's proxy environment names no proxy (most machines): a request with
    /// no proxy settings of its own goes direct, with nothing to choose per request.
    let proxyEnvironmentNamesNoProxy: Bool

    /// The logger takes debug lines: only then are a request's lines built. Read once, as the
    /// engine decides once whether its C side logs.
    let logsDebug: Bool

    /// The budget now: the configuration's until ``setMaxSpeed(receive:send:)`` changes it.
    /// The lock also orders concurrent changes, so the C engine ends with the last one.
    private let speed: Mutex<Bandwidth>

    /// Starts an engine with its own I/O thread.
    ///
    /// - Parameter configuration: Buffer size, limits, user agent and logger.
    /// - Throws: ``TernError`` with ``TernError/Code/invalidArgument`` for a setting out of
    ///   range, or ``TernError/Code/outOfMemory`` when the engine cannot start.
    public init(configuration: Configuration = Configuration()) throws(TernError) {
        self.configuration = configuration
        proxyEnvironmentNamesNoProxy = configuration.proxyEnvironment.namesNoProxy
        logsDebug = configuration.logger.logLevel <= .debug
        let bridge =
            CEngine.wantsLog(for: configuration.logger)
            ? LogBridge(logger: configuration.logger) : nil
        core = EngineCore(handle: try CEngine.makeEngine(configuration, log: bridge), logBridge: bridge)
        executor = EngineExecutor(core: core)
        speed = Mutex(
            Bandwidth(receive: configuration.maxReceiveSpeed, send: configuration.maxSendSpeed))
    }

    // MARK: - Bandwidth

    /// The engine's bandwidth budget now, in bytes per second for each direction (0: none).
    ///
    /// It starts as the configuration's ``Configuration/maxReceiveSpeed`` and
    /// ``Configuration/maxSendSpeed``, and changes with ``setMaxSpeed(receive:send:)``
    /// (``configuration`` keeps the values the engine was created with).
    public var maxSpeed: Bandwidth { speed.withLock { $0 } }

    /// Changes the engine's bandwidth budget while it runs; 0 lifts a direction's budget.
    ///
    /// The budget is shared by every request of the engine together, requests already
    /// transferring included, and the change takes effect within about a tenth of a second.
    /// Callable from any thread.
    ///
    /// ```swift
    /// engine.setMaxSpeed(receive: 8 << 20, send: 1 << 20)  // 8 MiB/s down, 1 MiB/s up
    /// ```
    ///
    /// - Parameters:
    ///   - receive: Bytes per second read from the sockets, for all requests together.
    ///   - send: Bytes per second of requests written to the sockets.
    public func setMaxSpeed(receive: UInt64, send: UInt64) {
        speed.withLock { current in
            CEngine.setMaxSpeed(handle, receive: receive, send: send)
            current = Bandwidth(receive: receive, send: send)
        }
    }

    /// The bandwidth the engine's requests actually used, in average bytes per second over
    /// about the last second (ASIHTTPRequest's `averageBandwidthUsedPerSecond`), whether a
    /// budget is set or not.
    ///
    /// Counts the bytes on the sockets, as the budget does: over TLS, the encrypted bytes.
    public var bandwidthUsed: Bandwidth { CEngine.bandwidthUsed(handle) }

    /// The engine's counters right now. Not API (see ``_Stats``).
    public var _stats: _Stats { CEngine.stats(handle) }

    /// True on the engine's loop thread (known after its first callback).
    var isLoopThread: Bool { core.isLoopThread }

    /// Called from every callback: remembers which thread is the loop thread.
    func noteLoopThread() { core.noteLoopThread() }
}

/// The C engine's lifetime and loop thread, shared by the Engine and its executor.
final class EngineCore: Sendable {
    nonisolated(unsafe) let handle: OpaquePointer
    // Receives the C log; kept alive until after tern_engine_free, which stops all logging.
    private let logBridge: LogBridge?
    // The loop thread's id once a callback has seen it (0 before): lets deinit and
    // executeAndWait() avoid blocking the loop thread on itself.
    private let loopThread = Atomic<UInt>(0)

    init(handle: OpaquePointer, logBridge: LogBridge?) {
        self.handle = handle
        self.logBridge = logBridge
    }

    deinit {
        // tern_engine_free joins the loop thread, so it must not run on it. The last
        // reference can go there (a completing request held it): hand the join to another
        // thread then. The log bridge is captured so it outlives the engine.
        if isLoopThread {
            let doomed = UncheckedBox((handle, logBridge))
            DispatchQueue.global().async {
                CEngine.freeEngine(doomed.value.0)
                _ = doomed.value.1
            }
        } else {
            CEngine.freeEngine(handle)
        }
    }

    var isLoopThread: Bool {
        let id = loopThread.load(ordering: .relaxed)
        return id != 0 && id == currentThreadID()
    }

    func noteLoopThread() {
        if loopThread.load(ordering: .relaxed) == 0 {
            loopThread.store(currentThreadID(), ordering: .relaxed)
        }
    }
}

/// Receives C log lines and forwards them to a `Logger`.
final class LogBridge: Sendable {
    let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }
}

/// Carries a value the compiler cannot prove Sendable across a thread hop whose safety the
/// call site documents.
struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value

    init(_ value: Value) {
        self.value = value
    }
}

/// A number identifying the calling thread.
func currentThreadID() -> UInt {
    #if canImport(Darwin)
    return UInt(bitPattern: pthread_self())
    #else
    return UInt(pthread_self())
    #endif
}
