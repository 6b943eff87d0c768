// The only file that calls the C engine (CTern). Engines are created and freed here, and each
// attempt of a request becomes one tern_request_t whose callbacks (on the engine's loop thread)
// are bridged back to its Run through an Unmanaged reference.
//
// Ownership: an Attempt owns its tern_request_t through a CRequest (freed with the last
// holder; tern_request_free also drops any C callback still pending). From tern_engine_submit() until the complete callback the C side
// holds one retain of the Attempt (passRetained); the complete callback, which the engine
// runs exactly once after a successful submit, takes it back.

internal import CTern
import Foundation
import HTTPTypes
import Logging
import Synchronization

/// Engine-level C calls.
enum CEngine {
    static var versionString: String { String(cString: tern_version_string()) }

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
        guard let config = tern_config_new() else { throw TernError(code: .outOfMemory) }
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
            c.pipelineDepth >= 1, c.idleTimeout >= 0
        else {
            throw TernError(
                code: .invalidArgument,
                message: "engine configuration: bufferSize must be >= 1024, maxHeaderSize > 0, "
                    + "pipelineDepth >= 1, and idleTimeout and maxConnectionsPerOrigin >= 0",
                phase: .setup)
        }
        try check(tern_config_set_buffer_size(config, c.bufferSize), "bufferSize \(c.bufferSize)")
        try check(
            tern_config_set_idle_timeout(config, c.idleTimeout == 0 ? 0 : max(1, milliseconds(c.idleTimeout))),
            "idleTimeout \(c.idleTimeout)")
        try check(
            tern_config_set_max_header_size(config, c.maxHeaderSize),
            "maxHeaderSize \(c.maxHeaderSize)")
        try check(
            tern_config_set_max_connections_per_origin(
                config, UInt32(clamping: c.maxConnectionsPerOrigin)),
            "maxConnectionsPerOrigin \(c.maxConnectionsPerOrigin)")
        try check(
            tern_config_set_pipeline_depth(config, UInt32(clamping: c.pipelineDepth)),
            "pipelineDepth \(c.pipelineDepth)")
        if let userAgent = c.userAgent {
            try check(tern_config_set_user_agent(config, userAgent), "userAgent")
        }
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
            requestsLive: stat(TERN_STAT_REQUESTS_LIVE))
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

/// Owns one tern_request_t: freed when the last holder (the Attempt, or a response body
/// wrapped without a copy) lets go. tern_request_free may be called from any thread.
final class CRequest: @unchecked Sendable {
    let pointer: OpaquePointer

    init?() {
        guard let pointer = tern_request_new() else { return nil }
        self.pointer = pointer
    }

    deinit {
        tern_request_free(pointer)
    }
}

// `owner` holds the C request; the other mutable state is touched only from C callbacks,
// which all run on the engine's loop thread, one at a time.
final class Attempt: @unchecked Sendable {
    private let owner: CRequest
    var handle: OpaquePointer { owner.pointer }
    let run: Run
    let number: Int
    /// Unique across all attempts: names this attempt to the stream body it reads.
    private let token = Attempt.nextToken.add(1, ordering: .relaxed).oldValue
    private static let nextToken = Atomic<UInt64>(1)
    /// What a stream body threw, for the error message.
    private var bodyError: String?
    private var pending = Data()
    private let coalesceLimit: Int
    /// The URL of the hop being sent or answered (the hop-response callback gets none).
    private var hopURL: URL
    /// Set once a hop went to another origin than the request's: the caller's own cookies
    /// stay behind for the rest of the chain, as the engine drops its Authorization.
    private var leftOrigin = false
    /// The authentication handler cancelled: the completion becomes an authentication error.
    private var authCancelled = false

    /// Builds the C request for one attempt of `run`; nothing is submitted yet.
    init(run: Run, number: Int, totalMs: UInt64) throws(TernError) {
        guard let owner = CRequest() else { throw TernError(code: .outOfMemory) }
        self.owner = owner
        self.run = run
        self.number = number
        self.coalesceLimit = run.plan.concatData ? run.plan.effectiveBufferSize : 0
        self.hopURL = run.plan.url
        try configure(totalMs: totalMs)
    }

    private func check(_ r: Int32, _ what: @autoclosure () -> String) throws(TernError) {
        guard r != 0 else { return }
        throw TernError(
            code: TernError.Code(rawValue: r),
            message: "\(what()): \(CEngine.errorDescription(r))", host: run.plan.host,
            phase: .setup)
    }

    private func configure(totalMs: UInt64) throws(TernError) {
        let p = run.plan
        let h = handle
        try check(tern_request_set_url(h, p.urlString), "URL \(p.urlString)")
        try check(tern_request_set_method(h, p.method), "method \(p.method)")
        for field in p.headers {
            try check(
                tern_request_add_header(h, field.name, field.value),
                "header field \(field.name)"
                    + (["content-length", "transfer-encoding"].contains(field.name.lowercased())
                        ? " (set by the engine)" : ""))
        }
        try configureHops()
        switch p.body {
        case .none:
            break
        case .data(let data):
            try check(
                data.withUnsafeBytes { tern_request_set_body(h, $0.baseAddress, $0.count) },
                "body")
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
            try check(tern_request_set_body_cb(h, announced, { _, buffer, capacity, context in
                guard let context, let buffer else { return -1 }
                let attempt = Unmanaged<Attempt>.fromOpaque(context).takeUnretainedValue()
                attempt.run.plan.engine.noteLoopThread()
                return attempt.readBody(into: UnsafeMutableRawBufferPointer(start: buffer, count: capacity))
            }, Unmanaged.passUnretained(self).toOpaque()), "body stream")
        }
        if p.compressBody {
            try check(tern_request_set_body_gzip(h, 1), "compressBody")
        }
        let expect = p.expectContinue
        try check(
            tern_request_set_expect_continue(
                h, expect.threshold.map { Int64(clamping: $0) } ?? -1,
                milliseconds(expect.wait)),
            "expectContinue")
        let limits = p.decodingLimits
        let ratio = limits.maxRatio ?? 0
        try check(
            ratio < 0
                ? TERN_EINVAL.rawValue
                : tern_request_set_decoding_limits(h, limits.maxBytes ?? 0, UInt32(clamping: ratio)),
            "decodingLimits (maxRatio \(ratio))")
        // TLS options go on http URLs too: a redirect may lead to https.
        let tls = p.tls
        try check(tern_request_set_tls_verify(h, tls.verifiesPeer ? 1 : 0), "tls.verifiesPeer")
        if let file = tls.caFile {
            try check(tern_request_set_tls_ca_file(h, file), "tls.caFile \(file)")
        }
        if let dir = tls.caDirectory {
            try check(tern_request_set_tls_ca_path(h, dir), "tls.caDirectory \(dir)")
        }
        if let cert = tls.clientCertificate {
            try check(
                tern_request_set_tls_client_cert(h, cert.certificateFile, cert.keyFile, cert.password),
                "tls.clientCertificate \(cert.certificateFile)")
        }
        if let d = p.download {
            try check(
                tern_request_set_download_file(h, d.path, d.offset, d.end, d.resume ? 1 : 0),
                "download file \(d.path) (offset \(d.offset), end \(d.end))")
        }
        try check(tern_request_set_timeout(h, TERN_TIMEOUT_CONNECT, milliseconds(p.timeouts.connect)), "connect timeout")
        try check(tern_request_set_timeout(h, TERN_TIMEOUT_HEADERS, milliseconds(p.timeouts.headers)), "headers timeout")
        try check(tern_request_set_timeout(h, TERN_TIMEOUT_BODY, milliseconds(p.timeouts.body)), "body timeout")
        try check(tern_request_set_timeout(h, TERN_TIMEOUT_TOTAL, totalMs), "total timeout")
        let mode: tern_decode_mode
        switch p.decoding {
        case .automatic: mode = TERN_DECODE_AUTO
        case .raw: mode = TERN_DECODE_RAW
        case .none: mode = TERN_DECODE_OFF
        }
        try check(tern_request_set_decoding(h, mode), "decoding")
        try check(tern_request_set_persistent(h, p.persistent ? 1 : 0), "persistent")
        try check(tern_request_set_http10(h, p.http10 ? 1 : 0), "http10")
        try check(tern_request_set_pipelining(h, p.pipelining ? 1 : 0), "pipelining")
        if p.bufferSize != 0 {
            try check(
                p.bufferSize > 0 ? tern_request_set_buffer_size(h, p.bufferSize) : TERN_EINVAL.rawValue,
                "bufferSize \(p.bufferSize) (must be 1024 bytes to 1 GiB)")
        }
        // The request id (not a pointer) lets the log callback name the request safely even
        // after the Attempt is gone.
        tern_request_set_user_data(h, UnsafeMutableRawPointer(bitPattern: UInt(p.requestID)))

        let context = Unmanaged.passUnretained(self).toOpaque()
        try check(tern_request_set_complete_cb(h, { _, status, context in
            guard let context else { return }
            let attempt = Unmanaged<Attempt>.fromOpaque(context).takeRetainedValue()
            attempt.run.plan.engine.noteLoopThread()
            attempt.didComplete(status: status)
        }, context), "complete callback")
        try check(tern_request_set_progress_cb(h, { _, state, percent, done, total, context in
            guard let context else { return 0 }
            let attempt = Unmanaged<Attempt>.fromOpaque(context).takeUnretainedValue()
            attempt.run.plan.engine.noteLoopThread()
            attempt.run.attemptDidProgress(
                attempt, state: state == TERN_PROGRESS_UPLOAD ? .upload : .download,
                percent: Int(percent), done: done, total: total)
            return 0
        }, context), "progress callback")
        try check(tern_request_set_hop_response_cb(h, { _, status, context in
            guard let context else { return 0 }
            let attempt = Unmanaged<Attempt>.fromOpaque(context).takeUnretainedValue()
            attempt.run.plan.engine.noteLoopThread()
            return attempt.didReceiveHead(status: Int(status)) ? 0 : 1
        }, context), "response callback")
        try check(tern_request_set_hop_request_cb(h, { _, url, context in
            guard let context else { return 0 }
            let attempt = Unmanaged<Attempt>.fromOpaque(context).takeUnretainedValue()
            attempt.run.plan.engine.noteLoopThread()
            attempt.willSendHop(to: url.map { String(cString: $0) })
            return 0
        }, context), "hop request callback")
        if run.authentication != nil {
            try check(tern_request_set_auth_cb(h, { _, isProxy, scheme, realm, context in
                guard let context else { return 0 }
                let attempt = Unmanaged<Attempt>.fromOpaque(context).takeUnretainedValue()
                attempt.run.plan.engine.noteLoopThread()
                return attempt.answerChallenge(
                    isProxy: isProxy != 0, scheme: scheme.map { String(cString: $0) } ?? "",
                    realm: realm.map { String(cString: $0) } ?? "")
            }, context), "auth callback")
        }
        if p.streamsBody {
            try check(tern_request_set_data_cb(h, { _, bytes, count, context in
                guard let context else { return 0 }
                let attempt = Unmanaged<Attempt>.fromOpaque(context).takeUnretainedValue()
                attempt.run.plan.engine.noteLoopThread()
                guard let bytes, count > 0 else { return 0 }
                return attempt.didReceive(UnsafeRawBufferPointer(start: bytes, count: count)) ? 0 : 1
            }, context), "data callback")
        }
    }

    /// Redirects, credentials (the request's, else a store's to send at once), the proxy and
    /// the receive rate.
    private func configureHops() throws(TernError) {
        let p = run.plan
        let h = handle
        let auth = run.authentication
        try check(tern_request_set_follow_redirects(h, p.maxRedirects), "maxRedirects")
        try check(tern_request_set_redirect_flags(h, p.redirectPolicy.rawValue), "redirectPolicy")
        if let credential = p.credential {
            try check(
                tern_request_set_auth(h, credential.user, credential.password, p.authSchemes.rawValue),
                "credential")
            auth?.noteRequestCredential(
                credential, for: p.url, isProxy: false, sentPreemptively: p.authSchemes.isPreemptive)
        } else if !p.hasExplicitAuthorization,
            let (credential, scheme) = auth?.preemptiveCredential(for: p.url, isProxy: false)
        {
            try check(
                tern_request_set_auth(
                    h, credential.user, credential.password,
                    Self.schemeBits(stored: scheme, allowed: p.authSchemes)),
                "stored credential")
        }
        if let proxy = p.proxy {
            try check(tern_request_set_proxy(h, proxy.url.absoluteString), "proxy \(proxy)")
            if let credential = proxy.credential {
                try check(
                    tern_request_set_proxy_auth(
                        h, credential.user, credential.password, p.proxySchemes.rawValue),
                    "proxy credential")
                auth?.noteRequestCredential(
                    credential, for: proxy.url, isProxy: true,
                    sentPreemptively: p.proxySchemes.isPreemptive)
            } else if let (credential, scheme) = auth?.preemptiveCredential(
                for: proxy.url, isProxy: true)
            {
                try check(
                    tern_request_set_proxy_auth(
                        h, credential.user, credential.password,
                        Self.schemeBits(stored: scheme, allowed: p.proxySchemes)),
                    "stored proxy credential")
            }
        }
        if p.maxReceiveSpeed > 0 {
            try check(tern_request_set_max_recv_speed(h, p.maxReceiveSpeed), "maxReceiveSpeed")
        }
    }

    /// Basic alone (sent at once) when a store knows the space takes Basic and the request
    /// allows it; otherwise the request's schemes, and the challenge picks.
    private static func schemeBits(
        stored: AuthenticationScheme?, allowed: Request.AuthenticationSchemes
    ) -> UInt32 {
        stored == .basic && allowed.contains(.basic) ? TERN_AUTH_BASIC.rawValue : allowed.rawValue
    }

    /// Hands the request to the engine; the engine keeps this attempt alive until it completes.
    func submit() throws(TernError) {
        let retained = Unmanaged.passRetained(self)
        let r = tern_engine_submit(run.plan.engine.handle, handle)
        if r != 0 {
            retained.release()
            try check(r, "submit \(run.plan.method) \(run.plan.urlString)")
        }
    }

    /// Cancels from any thread; the complete callback follows with TERN_ECANCELED.
    func cancel() {
        tern_request_cancel(handle)
    }

    // MARK: - Callbacks (loop thread)

    /// Fills the engine's buffer from the stream body; -1 (with the reason kept) on error.
    fileprivate func readBody(into buffer: UnsafeMutableRawBufferPointer) -> Int64 {
        guard case .stream(_, let stream) = run.plan.body else { return -1 }
        do {
            return Int64(try stream.read(into: buffer, for: token))
        } catch {
            bodyError = "\(error)"
            return -1
        }
    }

    /// Before each hop: remembers its URL and adds its `Cookie` field, the jar's cookies for
    /// that URL then the caller's own (while the chain stays on the request's origin).
    fileprivate func willSendHop(to urlString: String?) {
        let p = run.plan
        let url = urlString.flatMap { URL(string: $0) } ?? p.url
        hopURL = url
        if !Self.sameOrigin(url, p.url), !p.redirectPolicy.contains(.trustsCrossOrigin) {
            leftOrigin = true
        }
        run.attemptWillSendHop(self, url: url)
        var cookies: [String] = []
        if let jar = p.cookieJar, let header = jar.cookieHeader(for: url) {
            cookies.append(header)
        }
        if let own = p.manualCookie, !leftOrigin { cookies.append(own) }
        if !cookies.isEmpty {
            // The values were checked when planned (the caller's) or stored (the jar's).
            _ = tern_request_add_hop_header(handle, "Cookie", cookies.joined(separator: "; "))
        }
    }

    /// A hop's response head: its cookies go to the jar (a proxy's 407 sets none for the
    /// origin), the credential coordinator learns whether credentials worked, then the head
    /// handler runs.
    private func didReceiveHead(status: Int) -> Bool {
        let head = readHead()
        if let jar = run.plan.cookieJar, status != 407 {
            let values = head.fields[values: .setCookie]
            if !values.isEmpty { _ = jar.store(setCookieHeaders: values, from: hopURL) }
        }
        if let auth = run.authentication {
            let challenges =
                status == 401
                ? head.fields[values: .wwwAuthenticate]
                : status == 407 ? head.fields[values: .proxyAuthenticate] : []
            auth.hopResponded(status: status, url: hopURL, challenges: challenges)
        }
        return run.attemptDidReceiveHead(self, head: head, sentHead: readSentHead())
    }

    /// The engine's auth callback: credentials from the stores or the handler, or none.
    fileprivate func answerChallenge(isProxy: Bool, scheme: String, realm: String) -> Int32 {
        let p = run.plan
        guard let auth = run.authentication, isProxy || !p.hasExplicitAuthorization else {
            return 0
        }
        let action = run.whileHandlersLive(AuthenticationCoordinator.Action.stop) {
            auth.respond(
                isProxy: isProxy, scheme: scheme, realm: realm, url: hopURL,
                proxyURL: p.proxy?.url)
        }
        switch action {
        case .supply(let credential):
            return tern_request_supply_auth(handle, credential.user, credential.password) == 0
                ? 1 : 0
        case .stop:
            return 0
        case .cancel:
            authCancelled = true
            return 0
        }
    }

    /// Same scheme, host and port (default ports filled in).
    static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        HostName.scheme(of: a) == HostName.scheme(of: b)
            && HostName.canonical(of: a) == HostName.canonical(of: b)
            && HostName.port(of: a) == HostName.port(of: b)
    }

    /// Coalesces to exactly `coalesceLimit` bytes with concatData, else passes pieces on.
    private func didReceive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard coalesceLimit > 0 else { return run.attemptDidReceiveData(self, Data(bytes)) }
        var rest = bytes[...]
        while !rest.isEmpty {
            let take = min(coalesceLimit - pending.count, rest.count)
            pending.append(contentsOf: rest.prefix(take))
            rest = rest.dropFirst(take)
            if pending.count == coalesceLimit {
                let chunk = pending
                pending = Data(capacity: coalesceLimit)
                if !run.attemptDidReceiveData(self, chunk) { return false }
            }
        }
        return true
    }

    private func didComplete(status: Int32) {
        if !pending.isEmpty {
            // Bytes that arrived are handed over even when the request failed afterwards.
            _ = run.attemptDidReceiveData(self, pending)
            pending = Data()
        }
        run.attemptDidComplete(self, report: report(status: status))
    }

    // MARK: - Reading the C request (loop thread, from the callbacks on)

    private func readHead() -> ResponseHead {
        let h = handle
        var fields = HTTPFields()
        for i in 0..<tern_request_get_header_count(h) {
            var name: UnsafePointer<CChar>?
            var value: UnsafePointer<CChar>?
            guard tern_request_get_header_at(h, i, &name, &value) == 0, let name, let value,
                let fieldName = HTTPField.Name(String(cString: name))
            else { continue }
            let bytes = UnsafeRawBufferPointer(start: value, count: strlen(value))
            fields.append(HTTPField(name: fieldName, lenientValue: bytes))
        }
        let length = tern_request_get_content_length(h)
        return ResponseHead(
            status: Int(tern_request_get_status(h)),
            reason: String(cString: tern_request_get_reason(h)),
            httpMinorVersion: Int(tern_request_get_http_minor(h)),
            fields: fields,
            contentLength: length >= 0 ? length : nil,
            isReused: tern_request_is_reused(h) != 0)
    }

    private func readSentHead() -> String? {
        var length = 0
        guard let head = tern_request_get_request_head(handle, &length), length > 0 else {
            return nil
        }
        return String(decoding: UnsafeRawBufferPointer(start: head, count: length), as: UTF8.self)
    }

    // Bodies up to this size are copied so the C request can go at once; larger ones are
    // wrapped without a copy and keep the C request (not the Attempt, which would make a
    // cycle through the Request holding the Data) alive as long as the Data.
    private static let copyLimit = 256 * 1024

    private func report(status: Int32) -> AttemptReport {
        let h = handle
        var length = 0
        var data = Data()
        if let body = tern_request_get_body(h, &length), length > 0 {
            if length <= Self.copyLimit {
                data = Data(bytes: body, count: length)
            } else {
                data = Data(
                    bytesNoCopy: UnsafeMutableRawPointer(mutating: body), count: length,
                    deallocator: .custom { [owner] _, _ in withExtendedLifetime(owner) {} })
            }
        }
        func time(_ which: tern_time) -> TimeInterval? {
            let t = tern_request_get_time(h, which)
            return t >= 0 ? t : nil
        }
        var status = status != 0 ? status : tern_request_get_error(h)
        let length64 = tern_request_get_content_length(h)
        let gotHead = tern_request_get_status(h) != 0
        var message = status == 0 ? "" : String(cString: tern_request_get_error_message(h))
        if status == 0, authCancelled {
            status = TERN_EAUTH.rawValue
            let space = hopURL.host.map { "\($0)" } ?? run.plan.host
            message = "\(space): authentication cancelled by the authentication handler"
        }
        if status == TERN_EFILEREAD.rawValue, let bodyError {
            message += message.isEmpty ? bodyError : ": \(bodyError)"
        }
        var tlsInfo: TLSInfo?
        if let version = tern_request_get_tls_version(h) {
            tlsInfo = TLSInfo(
                version: String(cString: version),
                isSessionResumed: tern_request_is_tls_resumed(h) != 0,
                wasClientCertificateRequested: tern_request_was_client_cert_requested(h) != 0)
        }
        return AttemptReport(
            errorCode: status,
            errorMessage: message,
            head: gotHead ? readHead() : nil,
            data: data,
            bytesReceived: tern_request_get_bytes_received(h),
            contentLength: length64 >= 0 ? length64 : nil,
            offset: tern_request_get_offset(h),
            timings: Response.Timings(
                connected: time(TERN_TIME_CONNECTED), sent: time(TERN_TIME_SENT),
                headers: time(TERN_TIME_HEADERS), total: time(TERN_TIME_END) ?? 0),
            isReused: tern_request_is_reused(h) != 0,
            sentHead: readSentHead(),
            tlsInfo: tlsInfo,
            decodedEncoding: tern_request_get_decoded_encoding(h).map { String(cString: $0) },
            bytesDelivered: tern_request_get_bytes_delivered(h),
            bodySkipped: tern_request_is_body_skipped(h) != 0,
            effectiveURL: tern_request_get_effective_url(h).map { String(cString: $0) },
            redirectCount: Int(tern_request_get_redirect_count(h)))
    }
}
