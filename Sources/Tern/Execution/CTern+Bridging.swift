// The only file that calls the C engine (CTern). Engines are created and freed here, and each
// attempt of an execution becomes one tern_request_t whose callbacks (on the engine's loop
// thread) reach the Execution through an Unmanaged reference.
//
// Ownership: a CRequest owns each tern_request_t (freed with the last holder: the complete
// callback's, or a large response body wrapped without a copy; tern_request_free also drops
// any C callback still pending). From tern_engine_submit() until the complete callback the C
// side holds one retain of the Execution and one of the CRequest (passRetained); the complete
// callback, which the engine runs exactly once after a successful submit, takes them back.

internal import CTern
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Engine-level C calls.
enum CEngine {
    static var versionString: String { String(cString: tern_version_string()) }

    static var versionInfo: String { String(cString: tern_version_info()) }

    static func errorName(_ code: Int32) -> String { String(cString: tern_err_name(code)) }

    static func errorDescription(_ code: Int32) -> String {
        String(cString: tern_strerror(code))
    }

    /// The C log level that matches a logger, or `nil` when the logger would drop everything
    /// the engine says (then no C log callback is installed at all).
    static func logLevel(for logger: Logger) -> tern_log_level? {
        switch logger.logLevel {
        case .trace: return TERN_LOG_DEBUG
        case .debug: return TERN_LOG_INFO
        default: return nil
        }
    }

    static func wantsLog(for logger: Logger) -> Bool { logLevel(for: logger) != nil }

    static func makeEngine(_ c: Engine.Configuration, log: LogBridge?) throws(TernError)
        -> OpaquePointer
    {
        var made: OpaquePointer?
        guard tern_config_new(&made) == 0, let config = made else {
            throw TernError(code: .outOfMemory)
        }
        defer { tern_config_free(config) }
        func check(_ r: Int32, _ what: String) throws(TernError) {
            if r != 0 {
                throw TernError(
                    code: TernError.Code(rawValue: r),
                    message: "engine configuration: \(what): \(errorDescription(r))",
                    phase: .setup)
            }
        }
        guard c.bufferSize >= 1024, c.maxHeaderSize > 0, c.maxConnectionsPerOrigin >= 0,
            c.maxActiveRequests >= 0, c.pipelineDepth >= 1, c.idleTimeout >= 0,
            c.dnsCacheTimeout >= 0
        else {
            throw TernError(
                code: .invalidArgument,
                message: "engine configuration: bufferSize must be >= 1024, maxHeaderSize > 0, "
                    + "pipelineDepth >= 1, and idleTimeout, dnsCacheTimeout, "
                    + "maxConnectionsPerOrigin and maxActiveRequests >= 0",
                phase: .setup)
        }
        try check(tern_config_set_buffer_size(config, c.bufferSize), "bufferSize \(c.bufferSize)")
        try check(
            tern_config_set_idle_timeout(config, c.idleTimeout == 0 ? 0 : max(1, milliseconds(c.idleTimeout))),
            "idleTimeout \(c.idleTimeout)")
        if c.dnsCacheTimeout != 60 {
            try check(
                tern_config_set_dns_cache_timeout(
                    config, c.dnsCacheTimeout == 0 ? 0 : max(1, milliseconds(c.dnsCacheTimeout))),
                "dnsCacheTimeout \(c.dnsCacheTimeout)")
        }
        try check(
            tern_config_set_max_header_size(config, c.maxHeaderSize),
            "maxHeaderSize \(c.maxHeaderSize)")
        try check(
            tern_config_set_max_connections_per_origin(
                config, UInt32(clamping: c.maxConnectionsPerOrigin)),
            "maxConnectionsPerOrigin \(c.maxConnectionsPerOrigin)")
        if c.maxActiveRequests != 0 {
            try check(
                tern_config_set_max_active_requests(config, UInt32(clamping: c.maxActiveRequests)),
                "maxActiveRequests \(c.maxActiveRequests)")
        }
        if c.maxReceiveSpeed != 0 {
            try check(
                tern_config_set_max_recv_speed(config, c.maxReceiveSpeed),
                "maxReceiveSpeed \(c.maxReceiveSpeed)")
        }
        if c.maxSendSpeed != 0 {
            try check(
                tern_config_set_max_send_speed(config, c.maxSendSpeed), "maxSendSpeed \(c.maxSendSpeed)")
        }
        try check(
            tern_config_set_pipeline_depth(config, UInt32(clamping: c.pipelineDepth)),
            "pipelineDepth \(c.pipelineDepth)")
        if c.opensHTTP2ConnectionWhenFull {
            try check(tern_config_set_http2_open_when_full(config, 1), "opensHTTP2ConnectionWhenFull")
        }
        if let userAgent = c.userAgent {
            try check(tern_config_set_user_agent(config, userAgent), "userAgent")
        }
        // The engine's TLS options live in the C engine, which lends them to every request
        // without options of its own: set per request, they cost about 800 instructions each.
        try c.tls.apply(
            check: check,
            verify: { tern_config_set_tls_verify(config, $0) },
            caFile: { tern_config_set_tls_ca_file(config, $0) },
            caDirectory: { tern_config_set_tls_ca_path(config, $0) },
            clientCertificate: { tern_config_set_tls_client_cert(config, $0.certificateFile, $0.keyFile, $0.password) })
        if let log, let level = logLevel(for: log.logger) {
            try check(
                tern_config_set_log_cb(
                    config, logCallback, level, Unmanaged.passUnretained(log).toOpaque()),
                "logger")
        }
        var engine: OpaquePointer?
        let r = tern_engine_new(&engine, config)
        guard r == 0, let engine else {
            throw TernError(
                code: TernError.Code(rawValue: r == 0 ? TERN_ENOMEM.rawValue : r),
                message: "cannot start an engine: \(errorDescription(r))", phase: .setup)
        }
        return engine
    }

    static func freeEngine(_ engine: OpaquePointer) {
        tern_engine_free(engine)
    }

    static func stats(_ engine: OpaquePointer) -> Engine._Stats {
        func stat(_ s: tern_stat) -> UInt64 { tern_engine_get_stat(engine, s) }
        return Engine._Stats(
            connectionsOpened: stat(TERN_STAT_CONNECTIONS_OPENED),
            connectionsOpen: stat(TERN_STAT_CONNECTIONS_OPEN),
            connectionsIdle: stat(TERN_STAT_CONNECTIONS_IDLE),
            requestsActive: stat(TERN_STAT_REQUESTS_ACTIVE),
            requestsCompleted: stat(TERN_STAT_REQUESTS_COMPLETED),
            reused: stat(TERN_STAT_REUSED),
            retries: stat(TERN_STAT_RETRIES),
            requestsLive: stat(TERN_STAT_REQUESTS_LIVE),
            dnsLookups: stat(TERN_STAT_DNS_LOOKUPS),
            requestsWaiting: stat(TERN_STAT_REQUESTS_WAITING),
            bytesReceived: stat(TERN_STAT_BYTES_RECEIVED),
            bytesSent: stat(TERN_STAT_BYTES_SENT))
    }

    /// Changes the engine's budget; fails only for a NULL engine, which `engine` never is.
    static func setMaxSpeed(_ engine: OpaquePointer, receive: UInt64, send: UInt64) {
        _ = tern_engine_set_max_speed(engine, receive, send)
    }

    static func bandwidthUsed(_ engine: OpaquePointer) -> Bandwidth {
        var receive: UInt64 = 0
        var send: UInt64 = 0
        _ = tern_engine_get_bandwidth_used(engine, &receive, &send)
        return Bandwidth(receive: receive, send: send)
    }
}

/// Calls on a tern_bandwidth_t, all callable from any thread. The C budget is reference
/// counted: ``BandwidthBudget`` holds one reference, and each C request set to it another.
enum CBandwidth {
    /// A new budget, or `nil` when the C side has no memory for it.
    static func make(receive: UInt64, send: UInt64) -> OpaquePointer? {
        var made: OpaquePointer?
        guard tern_bandwidth_new(&made, receive, send) == 0 else { return nil }
        return made
    }

    /// Drops the caller's reference; requests set to the budget keep theirs.
    static func free(_ budget: OpaquePointer) {
        tern_bandwidth_free(budget)
    }

    static func setMaxSpeed(_ budget: OpaquePointer, receive: UInt64, send: UInt64) {
        _ = tern_bandwidth_set_max_speed(budget, receive, send)
    }

    static func used(_ budget: OpaquePointer) -> Bandwidth {
        var receive: UInt64 = 0
        var send: UInt64 = 0
        _ = tern_bandwidth_get_used(budget, &receive, &send)
        return Bandwidth(receive: receive, send: send)
    }
}

/// The engine's log, forwarded to the configuration's logger on the loop thread. Engine steps
/// (connections, addresses) are `.trace`; request lifecycle, retries and failures `.debug`.
private let logCallback: tern_log_cb = { level, message, request, context in
    guard let message, let context else { return }
    let bridge = Unmanaged<LogBridge>.fromOpaque(context).takeUnretainedValue()
    var metadata: Logger.Metadata = [:]
    if let request, let id = tern_request_get_user_data(request) {
        metadata["tern.request"] = "\(UInt(bitPattern: id))"
    }
    bridge.logger.log(
        level: level == TERN_LOG_DEBUG ? .trace : .debug, "\(String(cString: message))",
        metadata: metadata)
}

/// Owns one tern_request_t: freed when the last holder (the execution's attempt, or a response
/// body wrapped without a copy) lets go. tern_request_free may be called from any thread.
final class CRequest: @unchecked Sendable {
    let pointer: OpaquePointer

    init?() {
        var made: OpaquePointer?
        guard tern_request_new(&made) == 0, let pointer = made else { return nil }
        self.pointer = pointer
    }

    deinit {
        tern_request_free(pointer)
    }
}

/// Cancels from any thread; the complete callback follows with TERN_ECANCELED.
func cancelCRequest(_ request: CRequest) {
    tern_request_cancel(request.pointer)
}

/// Pauses or resumes reading the response, from any thread.
func pauseReceiving(_ request: CRequest, _ paused: Bool) {
    _ = tern_request_pause_receive(request.pointer, paused ? 1 : 0)
}

/// A waiting body has bytes again (TERN_READ_WAIT): the engine calls the body callback anew.
/// Any thread; harmless when the request no longer waits. Should the engine have no memory to
/// queue the wake-up, the request is canceled rather than left waiting for good.
func resumeSending(_ request: CRequest) {
    if tern_request_resume_send(request.pointer) != 0 { tern_request_cancel(request.pointer) }
}

/// A number unique to each attempt in the process: names the attempt to the stream body it
/// reads.
func nextAttemptToken() -> UInt64 {
    attemptTokens.add(1, ordering: .relaxed).oldValue
}
private let attemptTokens = Atomic<UInt64>(1)

// The C callbacks: each recovers the Execution from its context pointer.

/// Runs `body` with the Execution behind a context pointer, borrowed: the submit's retain
/// keeps it alive until after its complete callback, so the callbacks take no retain and
/// release of their own.
private func withExecution<Result>(_ context: UnsafeMutableRawPointer, _ body: (Execution) -> Result) -> Result {
    Unmanaged<Execution>.fromOpaque(context)._withUnsafeGuaranteedRef { execution in
        execution.plan.engine.noteLoopThread()
        return body(execution)
    }
}

private let completeCallback: tern_complete_cb = { _, status, context in
    guard let context else { return }
    let retained = Unmanaged<Execution>.fromOpaque(context)
    let execution = retained.takeUnretainedValue()
    let engine = execution.plan.engine
    engine.noteLoopThread()
    if let owner = execution.local.owner {
        execution.local.owner = nil
        execution.didComplete(owner, status: status)
    }
    // The submit's retain is released once the engine has started what this completion set
    // going: when it is the last, the execution, its plan, its request and response are freed
    // after the next request's bytes are sent, not on the way to them (at one connection
    // that way is every round trip's client time).
    if tern_engine_defer(engine.handle, releaseExecution, context) != 0 { retained.release() }
}

private let releaseExecution: @convention(c) (UnsafeMutableRawPointer?) -> Void = { context in
    guard let context else { return }
    Unmanaged<Execution>.fromOpaque(context).release()
}

private let progressCallback: tern_progress_cb = { _, state, percent, done, total, context in
    guard let context else { return 0 }
    withExecution(context) {
        $0.didProgress(upload: state == TERN_PROGRESS_UPLOAD, percent: Int(percent), done: done, total: total)
    }
    return 0
}

private let hopResponseCallback: tern_hop_response_cb = { handle, status, context in
    guard let context, let handle else { return 0 }
    return withExecution(context) { $0.didReceiveHead(handle, status: Int(status)) } ? 0 : 1
}

private let hopRequestCallback: tern_hop_request_cb = { handle, url, context in
    guard let context, let handle else { return 0 }
    withExecution(context) { $0.willSendHop(handle, url: url) }
    return 0
}

private let authCallback: tern_auth_cb = { handle, isProxy, scheme, realm, context in
    guard let context, let handle else { return 0 }
    return withExecution(context) {
        $0.answerChallenge(
            handle, isProxy: isProxy != 0, scheme: scheme.map { String(cString: $0) } ?? "",
            realm: realm.map { String(cString: $0) } ?? "")
    }
}

/// The PAC script's answer for a hop, copied into the engine's buffer; a failure ends the
/// request with its message.
private let proxyListCallback: tern_proxy_cb = { _, url, host, out, capacity, context in
    guard let context, let out, capacity > 0 else { return TERN_EINVAL.rawValue }
    let answer: String
    var code: Int32 = 0
    if let pac = withExecution(context, { $0.plan.proxyAutoConfiguration }) {
        do throws(TernError) {
            answer = try pac.findProxy(
                url: url.map { String(cString: $0) } ?? "", host: host.map { String(cString: $0) } ?? "")
        } catch {
            answer = error.message
            code = error.code.rawValue
        }
    } else {
        answer = "DIRECT"
    }
    let bytes = Array(answer.utf8.prefix(capacity - 1))
    for (i, byte) in bytes.enumerated() { out[i] = CChar(bitPattern: byte) }
    out[bytes.count] = 0
    return code < 0 ? code : 0
}

private let dataCallback: tern_data_cb = { _, bytes, count, context in
    guard let context else { return 0 }
    guard let bytes, count > 0 else { return 0 }
    return withExecution(context) { $0.didReceive(UnsafeRawBufferPointer(start: bytes, count: count)) } ? 0 : 1
}

private let bodyCallback: tern_read_cb = { _, buffer, capacity, context in
    guard let context, let buffer else { return -1 }
    return withExecution(context) {
        $0.readBody(into: UnsafeMutableRawBufferPointer(start: buffer, count: capacity))
    }
}

extension Execution {
    // The failure is built out of line and the branch marked unlikely, so that the set-up's
    // fast path lies on a few contiguous cache lines: each request runs it once, with the
    // instruction cache cold (bench/HISTORY-swift-path.md).
    @inline(__always)
    private func check(_ r: Int32, _ what: @autoclosure () -> String) throws(TernError) {
        if _slowPath(r != 0) { throw setupError(r, what()) }
    }

    @inline(never)
    private func setupError(_ r: Int32, _ what: String) -> TernError {
        TernError(
            code: TernError.Code(rawValue: r), message: "\(what): \(CEngine.errorDescription(r))",
            host: plan.host, phase: .setup)
    }

    /// Builds the C request of one attempt from the plan. Settings equal to the engine's
    /// defaults are not sent: the engine starts from them.
    func makeCRequest(attempt: Int, timeLeft: Double?) throws(TernError) -> CRequest {
        guard let owner = CRequest() else { throw TernError(code: .outOfMemory) }
        let h = owner.pointer
        // withCString: a URL's string is often not native, and the implicit conversion copied it
        // to the heap (utf8CString) where withCString uses a stack buffer.
        let accepted = plan.urlString.withCString { tern_request_set_url(h, $0) }
        // The engine refuses a port outside 1-65535; the message says which part is wrong.
        if _slowPath(accepted != 0), let port = plan.url.port, !(1...65535).contains(port) {
            throw TernError(
                code: .badURL, message: "port \(port) of \(plan.urlString) is out of range (1-65535)",
                host: plan.host, phase: .setup)
        }
        try check(accepted, "URL \(plan.urlString)")
        if _slowPath(plan.method != "GET") { try check(tern_request_set_method(h, plan.method), "method \(plan.method)") }
        for field in plan.headers {
            try check(
                tern_request_add_header(h, field.name, field.value),
                "header field \(field.name)"
                    + (["content-length", "transfer-encoding"].contains(field.name.lowercased())
                        ? " (set by the engine)" : ""))
        }
        // Unwrapped first: `?? [:]` built an empty HTTPFields (its storage and arrays) per
        // request.
        if let conditions = cacheStage?.conditionalFields {
            for field in conditions {
                try check(tern_request_add_header(h, field.name.rawName, field.value), "header field \(field.name)")
            }
        }
        try configureHops(h)
        // A request that changed no rarely set setting has nothing more to say: no body,
        // download, own TLS options, timeouts or protocol choices.
        if _slowPath(!plan.hasDefaultOptions) { try configureOptions(h, attempt: attempt) }
        if _slowPath(timeLeft != nil), let timeLeft {
            try check(tern_request_set_timeout(h, TERN_TIMEOUT_TOTAL, milliseconds(timeLeft)), "total timeout")
        }
        // The request id (not a pointer) lets the log callback name the request safely even
        // after the execution is gone.
        tern_request_set_user_data(h, UnsafeMutableRawPointer(bitPattern: UInt(plan.requestID)))

        let context = Unmanaged.passUnretained(self).toOpaque()
        try check(tern_request_set_complete_cb(h, completeCallback, context), "complete callback")
        try check(tern_request_set_progress_cb(h, progressCallback, context), "progress callback")
        try check(tern_request_set_hop_response_cb(h, hopResponseCallback, context), "response callback")
        try check(tern_request_set_hop_request_cb(h, hopRequestCallback, context), "hop request callback")
        if answersChallenges {
            try check(tern_request_set_auth_cb(h, authCallback, context), "auth callback")
        }
        if readsHeadsLate { tern_request_set_whole_at_completion(h, 1) }
        if _slowPath(plan.streamsBody) {
            try check(tern_request_set_data_cb(h, dataCallback, context), "data callback")
        }
        return owner
    }

    /// The rarely set settings: omitted fields, the body, the download, the request's own TLS
    /// options, timeouts, decoding and protocol choices.
    private func configureOptions(_ h: OpaquePointer, attempt: Int) throws(TernError) {
        for name in plan.omittedFields {
            try check(tern_request_omit_header(h, name), "omitted header field \(name)")
        }
        switch plan.body {
        case .none:
            break
        case .data(let data):
            try check(
                data.withUnsafeBytes { tern_request_set_body(h, $0.baseAddress, $0.count) }, "body")
        case .file(let path, let offset, let end):
            try check(tern_request_set_body_file(h, path, offset, end), "body file \(path)")
        case .segments(let segments):
            for segment in segments {
                switch segment {
                case .data(let data):
                    try check(
                        data.withUnsafeBytes {
                            tern_request_add_body_segment(h, $0.baseAddress, $0.count)
                        }, "body segment")
                case .file(let path, let offset, let end):
                    try check(
                        tern_request_add_body_segment_file(h, path, offset, end),
                        "body segment file \(path)")
                }
            }
        case .stream(let length, _):
            let announced = length.map { Int64(clamping: $0) } ?? -1
            try check(
                tern_request_set_body_cb(h, announced, bodyCallback, Unmanaged.passUnretained(self).toOpaque()),
                "body stream")
        }
        if plan.compressBody { try check(tern_request_set_body_gzip(h, 1), "compressBody") }
        let expect = plan.expectContinue
        if expect != Request.ExpectContinue() {
            try check(
                tern_request_set_expect_continue(
                    h, expect.threshold.map { Int64(clamping: $0) } ?? -1, milliseconds(expect.wait)),
                "expectContinue")
        }
        let limits = plan.decodingLimits
        if limits != Request.DecodingLimits() {
            let ratio = limits.maxRatio ?? 0
            try check(
                ratio < 0
                    ? TERN_EINVAL.rawValue
                    : tern_request_set_decoding_limits(h, limits.maxBytes ?? 0, UInt32(clamping: ratio)),
                "decodingLimits (maxRatio \(ratio))")
        }
        // TLS options go on http URLs too: a redirect may lead to https.
        if let own = plan.tls { try configureTLS(h, own) }
        if let d = plan.download {
            // With retries, each attempt keeps its .part for the next to continue; the first
            // starts clean, and the execution removes the .part when it gives up.
            var mode: Int32 = d.resume ? 1 : 0
            if !d.resume, plan.policy.maxRetries > 0 {
                mode = TERN_RESUME_PART
                if attempt == 1 { removePartialDownload(d.path) }
            }
            try check(
                tern_request_set_download_file(h, d.path, d.offset, d.end, mode),
                "download file \(d.path) (offset \(d.offset), end \(d.end))")
            if d.anyStatus {
                try check(tern_request_set_download_any_status(h, 1), "downloadsErrorBodies")
            }
        }
        let t = plan.timeouts
        if t.connect != 30 {
            try check(tern_request_set_timeout(h, TERN_TIMEOUT_CONNECT, milliseconds(t.connect)), "connect timeout")
        }
        if t.headers != 60 {
            try check(tern_request_set_timeout(h, TERN_TIMEOUT_HEADERS, milliseconds(t.headers)), "headers timeout")
        }
        if t.body != 60 {
            try check(tern_request_set_timeout(h, TERN_TIMEOUT_BODY, milliseconds(t.body)), "body timeout")
        }
        switch plan.decoding {
        case .automatic: break
        case .raw: try check(tern_request_set_decoding(h, TERN_DECODE_RAW), "decoding")
        case .none: try check(tern_request_set_decoding(h, TERN_DECODE_OFF), "decoding")
        }
        if !plan.persistent { try check(tern_request_set_persistent(h, 0), "persistent") }
        if plan.http10 { try check(tern_request_set_http10(h, 1), "http10") }
        // HTTP/1.0 never negotiates HTTP/2: http10 wins over the preference.
        let version = plan.http10 ? .http1_1 : plan.httpVersion
        if version != .automatic {
            try check(tern_request_set_http_version(h, version.engineValue), "httpVersion \(version)")
        }
        if plan.pipelining { try check(tern_request_set_pipelining(h, 1), "pipelining") }
        if plan.bufferSize != 0 {
            try check(
                plan.bufferSize > 0 ? tern_request_set_buffer_size(h, plan.bufferSize) : TERN_EINVAL.rawValue,
                "bufferSize \(plan.bufferSize) (must be 1024 bytes to 1 GiB)")
        }
    }

    /// The request's own TLS options, read in place (a copy of them costs about 100
    /// instructions). They replace the engine's whole.
    private func configureTLS(_ h: OpaquePointer, _ tls: borrowing TLSOptions) throws(TernError) {
        try tls.apply(
            check: { (r, what) throws(TernError) in try check(r, what) },
            verify: { tern_request_set_tls_verify(h, $0) },
            caFile: { tern_request_set_tls_ca_file(h, $0) },
            caDirectory: { tern_request_set_tls_ca_path(h, $0) },
            clientCertificate: { tern_request_set_tls_client_cert(h, $0.certificateFile, $0.keyFile, $0.password) })
    }

    /// Redirects, credentials (the request's, else a store's to send at once), the proxy, the
    /// rates and budget, and the priority.
    private func configureHops(_ h: OpaquePointer) throws(TernError) {
        try check(tern_request_set_follow_redirects(h, plan.maxRedirects), "maxRedirects")
        if _slowPath(plan.redirectPolicy.rawValue != 0) {
            try check(tern_request_set_redirect_flags(h, plan.redirectPolicy.rawValue), "redirectPolicy")
        }
        if let credential = plan.credential {
            try check(
                tern_request_set_auth(h, credential.engineUser, credential.password, plan.authSchemes.rawValue),
                "credential")
            authentication?.noteRequestCredential(
                credential, for: plan.url, isProxy: false, sentPreemptively: plan.authSchemes.isPreemptive)
        } else if !plan.hasExplicitAuthorization, answersChallenges,
            _slowPath(
                AuthenticationCoordinator.mayHoldCredentials(plan.sessionStore)
                    || AuthenticationCoordinator.mayHoldCredentials(plan.persistentStore)),
            let (credential, scheme) = authentication?.preemptiveCredential(for: plan.url, isProxy: false)
        {
            try check(
                tern_request_set_auth(
                    h, credential.engineUser, credential.password,
                    Self.schemeBits(stored: scheme, allowed: plan.authSchemes)),
                "stored credential")
        }
        if _slowPath(plan.proxyAutoConfiguration != nil) {
            try check(
                tern_request_set_proxy_callback(
                    h, proxyListCallback, Unmanaged.passUnretained(self).toOpaque()),
                "PAC callback")
            if let credential = plan.proxyAutoConfigurationCredential {
                try check(
                    tern_request_set_proxy_auth(
                        h, credential.engineUser, credential.password, plan.proxySchemes.rawValue),
                    "proxy credential")
            }
        } else if let rules = plan.proxyRules, !rules.namesNoProxy, plan.maxRedirects > 0,
            try configureProxyRules(h, rules)
        {
            // The engine picks each hop's proxy by the environment's rules, each proxy with its
            // own credentials; the first hop's is known to the coordinator.
            if let proxy = plan.proxy, let credential = proxy.credential {
                authentication?.noteRequestCredential(
                    credential, for: proxy.url, isProxy: true, sentPreemptively: false)
            }
        } else if let proxy = plan.proxy {
            try check(tern_request_set_proxy(h, proxy.url.absoluteString), "proxy \(proxy)")
            if let credential = proxy.credential {
                try check(
                    tern_request_set_proxy_auth(
                        h, credential.engineUser, credential.password, plan.proxySchemes.rawValue),
                    "proxy credential")
                authentication?.noteRequestCredential(
                    credential, for: proxy.url, isProxy: true,
                    sentPreemptively: plan.proxySchemes.isPreemptive)
            } else if let (credential, scheme) = authentication?.preemptiveCredential(
                for: proxy.url, isProxy: true)
            {
                try check(
                    tern_request_set_proxy_auth(
                        h, credential.engineUser, credential.password,
                        Self.schemeBits(stored: scheme, allowed: plan.proxySchemes)),
                    "stored proxy credential")
            }
        }
        if _slowPath(plan.maxReceiveSpeed > 0) {
            try check(tern_request_set_max_recv_speed(h, plan.maxReceiveSpeed), "maxReceiveSpeed")
        }
        if _slowPath(plan.maxSendSpeed > 0) {
            try check(tern_request_set_max_send_speed(h, plan.maxSendSpeed), "maxSendSpeed")
        }
        // The C request takes its own reference to the budget; the plan keeps the Swift
        // object (and so the caller's reference) alive while any attempt may still be made.
        if let budget = plan.bandwidthBudget {
            try check(tern_request_set_bandwidth(h, budget.handle), "bandwidthBudget")
        }
        if _slowPath(plan.priority != 0) {
            try check(tern_request_set_priority(h, Int32(clamping: plan.priority)), "priority")
        }
    }

    /// Hands the environment's proxies and no-proxy list to the engine, which applies them to
    /// every hop (a redirect from http to https, or to a no_proxy host, changes the proxy, as in
    /// curl). Each proxy URL carries its own credentials, so none reaches another proxy.
    /// Returns false, setting nothing, when the rules name no proxy.
    private func configureProxyRules(_ h: OpaquePointer, _ rules: ProxyEnvironment)
        throws(TernError) -> Bool
    {
        func url(_ proxy: ProxyConfiguration?) -> String? { proxy?.engineURL }
        let general: ProxyConfiguration?
        let http: ProxyConfiguration?
        let https: ProxyConfiguration?
        func parse(_ string: String?) throws(TernError) -> ProxyConfiguration? {
            guard let string, rules.explicitProxy == nil else { return nil }
            return try ProxyConfiguration(string)
        }
        do throws(TernError) {
            if let explicit = rules.explicitProxy { general = explicit } else { general = try parse(rules.allProxy) }
            http = try parse(rules.httpProxy)
            https = try parse(rules.httpsProxy)
        } catch {
            return false  // the first hop's proxy failed already, or a later hop may not need it
        }
        guard general != nil || http != nil || https != nil else { return false }
        if let general = url(general) {
            try check(tern_request_set_proxy(h, general), "proxy \(general)")
        }
        if let http = url(http) { try check(tern_request_set_scheme_proxy(h, "http", http), "http proxy") }
        if let https = url(https) {
            try check(tern_request_set_scheme_proxy(h, "https", https), "https proxy")
        }
        if let list = rules.noProxy {
            try check(tern_request_set_no_proxy(h, list.rawValue), "no-proxy list")
        }
        try check(
            tern_request_set_proxy_auth(h, nil, nil, plan.proxySchemes.rawValue), "proxy schemes")
        return true
    }

    /// Basic alone (sent at once) when a store knows the space takes Basic and the request
    /// allows it; otherwise the request's schemes, and the challenge picks.
    private static func schemeBits(
        stored: AuthenticationScheme?, allowed: Request.AuthenticationSchemes
    ) -> UInt32 {
        stored == .basic && allowed.contains(.basic) ? TERN_AUTH_BASIC.rawValue : allowed.rawValue
    }

    /// Hands the C request to the engine, which keeps this execution alive until the attempt
    /// completes.
    func submit(_ owner: CRequest) throws(TernError) {
        local.owner = owner
        let retained = Unmanaged.passRetained(self)
        let r = tern_engine_submit(plan.engine.handle, owner.pointer)
        if r != 0 {
            local.owner = nil
            retained.release()
            try check(r, "submit \(plan.method) \(plan.urlString)")
        }
    }

    // MARK: - Reading the C request (loop thread, from the callbacks on)

    /// The current head, its fields and the request head that drew it copied in one piece
    /// (decoded only when someone reads them).
    func readHead(_ h: OpaquePointer) -> ResponseHead {
        var blockLength = 0
        let block = tern_request_get_header_block(h, &blockLength)
        var sentLength = 0
        let sent = tern_request_get_request_head(h, &sentLength)
        let length = tern_request_get_content_length(h)
        return ResponseHead(
            status: Int(tern_request_get_status(h)),
            reason: Self.reason(tern_request_get_reason(h)),
            httpVersion: Self.responseVersion(h),
            block: UnsafeRawBufferPointer(start: block, count: block == nil ? 0 : blockLength),
            sentHead: sent.flatMap { sentLength > 0 ? UnsafeRawBufferPointer(start: $0, count: sentLength) : nil },
            contentLength: length >= 0 ? length : nil,
            isReused: tern_request_is_reused(h) != 0)
    }

    /// The reason phrase; "OK", most heads' phrase, without measuring and validating it.
    private static func reason(_ phrase: UnsafePointer<CChar>) -> String {
        if phrase[0] == 0x4F, phrase[1] == 0x4B, phrase[2] == 0 { return "OK" }
        return String(cString: phrase)
    }

    /// The version of the current head: the engine's 10, 11 or 20, else its HTTP/1 minor
    /// version.
    private static func responseVersion(_ h: OpaquePointer) -> Response.HTTPVersion {
        switch tern_request_get_http_version(h) {
        case 10: return .http1_0
        case 11: return .http1_1
        case let version where version >= 20:
            return Response.HTTPVersion(major: Int(version / 10), minor: Int(version % 10))
        default: return tern_request_get_http_minor(h) == 0 ? .http1_0 : .http1_1
        }
    }

    /// The `Set-Cookie` values of the current head, without reading the other fields.
    func setCookieValues(_ h: OpaquePointer) -> [String] {
        // One lookup in C first: most heads set no cookie.
        guard tern_request_get_header(h, "set-cookie") != nil else { return [] }
        var values: [String] = []
        for i in 0..<tern_request_get_header_count(h) {
            var name: UnsafePointer<CChar>?
            var value: UnsafePointer<CChar>?
            // The first letter first: most fields are not Set-Cookie.
            guard tern_request_get_header_at(h, i, &name, &value) == 0, let name, let value,
                UInt8(bitPattern: name[0]) | 0x20 == UInt8(ascii: "s"), strcasecmp(name, "set-cookie") == 0
            else { continue }
            values.append(String(decoding: UnsafeRawBufferPointer(start: value, count: strlen(value)), as: UTF8.self))
        }
        return values
    }

    func readInterimHeads(_ h: OpaquePointer) -> String? {
        var length = 0
        guard let heads = tern_request_get_interim_heads(h, &length), length > 0 else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: heads, count: length), as: UTF8.self)
    }

    func readSentHead(_ h: OpaquePointer) -> String? {
        var length = 0
        guard let head = tern_request_get_request_head(h, &length), length > 0 else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: head, count: length), as: UTF8.self)
    }

    /// The attempt's failure: the engine's code and message, or an authentication the handler
    /// cancelled. Out of line: most attempts succeed.
    @inline(never)
    private func attemptError(_ h: OpaquePointer, code engineCode: Int32, hasHead: Bool) -> TernError? {
        var code = engineCode
        var message = code == 0 ? "" : String(cString: tern_request_get_error_message(h))
        if code == 0, local.authCancelled {
            code = TERN_EAUTH.rawValue
            let space = local.hopURL.host ?? plan.host
            message = "\(space): authentication cancelled by the authentication handler"
        }
        guard code != 0 else { return nil }
        if code == TERN_EFILEREAD.rawValue, let bodyError = local.bodyError {
            message += message.isEmpty ? bodyError : ": \(bodyError)"
        }
        let errorCode = TernError.Code(rawValue: code)
        let phase: TernError.Phase?
        switch errorCode {
        case .connectionReset, .ioError: phase = hasHead ? .body : .headers
        default: phase = TernError.defaultPhase(for: errorCode)
        }
        return TernError(code: errorCode, message: message, host: plan.host, phase: phase)
    }

    /// Everything the completed attempt left, read once; the head is the one the last hop
    /// callback read when it has its fields.
    func makeReport(_ owner: CRequest, status: Int32) -> AttemptReport {
        let h = owner.pointer
        var length = 0
        var data = Data()
        // The body's buffer itself becomes the Data's: no copy, and the C request can go at once.
        if let body = tern_request_take_body(h, &length) {
            data = Data(bytesNoCopy: body, count: length, deallocator: .free)
        }
        func time(_ which: tern_time) -> TimeInterval? {
            let t = tern_request_get_time(h, which)
            return t >= 0 ? t : nil
        }
        let code = status != 0 ? status : tern_request_get_error(h)
        let finalStatus = Int(tern_request_get_status(h))
        var head: ResponseHead?
        if finalStatus != 0 {
            if let last = local.lastHead, last.status == finalStatus {
                head = last
            } else {
                head = readHead(h)
            }
        }
        var error: TernError?
        if _slowPath(code != 0 || local.authCancelled) { error = attemptError(h, code: code, hasHead: head != nil) }
        var tlsInfo: TLSInfo?
        let tlsVersion = tern_request_get_tls_version(h)
        if _slowPath(tlsVersion != nil), let version = tlsVersion {
            tlsInfo = TLSInfo(
                version: String(cString: version),
                isSessionResumed: tern_request_is_tls_resumed(h) != 0,
                wasClientCertificateRequested: tern_request_was_client_cert_requested(h) != 0)
        }
        let redirects = Int(tern_request_get_redirect_count(h))
        var redirected: URL?
        if _slowPath(redirects > 0), let effective = tern_request_get_effective_url(h) {
            redirected = cleanURL(String(cString: effective))
        }
        let length64 = tern_request_get_content_length(h)
        return AttemptReport(
            error: error,
            head: head,
            data: data,
            bytesReceived: tern_request_get_bytes_received(h),
            contentLength: length64 >= 0 ? length64 : nil,
            offset: tern_request_get_offset(h),
            timings: Response.Timings(
                connected: time(TERN_TIME_CONNECTED), sent: time(TERN_TIME_SENT),
                headers: time(TERN_TIME_HEADERS), total: time(TERN_TIME_END) ?? 0),
            sentHead: head == nil ? readSentHead(h) : nil,
            tlsInfo: tlsInfo,
            decodedEncoding: tern_request_get_decoded_encoding(h).map { String(cString: $0) },
            bytesDelivered: tern_request_get_bytes_delivered(h),
            bodySkipped: tern_request_is_body_skipped(h) != 0,
            connectStatus: Int(tern_request_get_connect_status(h)),
            redirectedURL: redirected,
            redirectCount: redirects,
            originalURL: plan.url,
            downloadFile: plan.download?.path,
            isFromCache: false,
            attempts: local.number)
    }
}

extension TLSOptions {
    /// Hands the options to the engine's four TLS setters, an engine config's or one C
    /// request's, checking each result under the option's name: one list for both, so an
    /// option added reaches both. Verification is always set: on a C request, the first TLS
    /// setter gives it settings of its own, in place of the engine's, even when they are the
    /// defaults.
    func apply(
        check: (Int32, String) throws(TernError) -> Void,
        verify: (Int32) -> Int32,
        caFile setCAFile: (String) -> Int32,
        caDirectory setCADirectory: (String) -> Int32,
        clientCertificate setClientCertificate: (ClientCertificate) -> Int32
    ) throws(TernError) {
        try check(verify(verifiesPeer ? 1 : 0), "tls.verifiesPeer")
        if let file = caFile { try check(setCAFile(file), "tls.caFile \(file)") }
        if let dir = caDirectory { try check(setCADirectory(dir), "tls.caDirectory \(dir)") }
        if let cert = clientCertificate {
            try check(setClientCertificate(cert), "tls.clientCertificate \(cert.certificateFile)")
        }
    }
}

extension Request.HTTPVersionPreference {
    /// The engine's name for the preference.
    var engineValue: tern_http_version {
        switch self {
        case .automatic: TERN_HTTP_VERSION_DEFAULT
        case .http1_1: TERN_HTTP_VERSION_1_1
        case .http2: TERN_HTTP_VERSION_2
        case .http2PriorKnowledge: TERN_HTTP_VERSION_2_PRIOR_KNOWLEDGE
        }
    }
}

/// A URL from the engine without user info or fragment, as ``Response/url`` promises.
func cleanURL(_ string: String) -> URL? {
    guard var components = URLComponents(string: string) else { return URL(string: string) }
    if components.user == nil && components.password == nil && components.fragment == nil {
        return components.url
    }
    components.user = nil
    components.password = nil
    components.fragment = nil
    return components.url
}

/// Removes what an interrupted download of `path` left: `path.part` and its validator.
func removePartialDownload(_ path: String) {
    unlink(path + ".part")
    unlink(path + ".part.validator")
}
