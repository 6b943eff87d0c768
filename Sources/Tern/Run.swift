// Run: one execution of a Request, from execute() to the delivery of its completion. It owns
// the attempts (one C request each; retries make more), filters engine progress into listener
// events, and delivers those events in order on the request's callback queue, or inline on a
// thread blocked in executeAndWait() on that queue.

import Dispatch
import Foundation
import HTTPTypes
import Logging

/// A listener or completion event, in delivery order.
enum RunEvent: Sendable {
    /// A progress event; `isFinal` marks the closing 100 or -1, delivered even after a cancel.
    case progress(Request.State, Int, isFinal: Bool)
    /// Runs the completion handlers, then releases waiters.
    case completion
}

/// The closures of one execution, copied from the request's settings when it starts and
/// dropped by clearDelegatesAndCancel() or once the completion has been delivered.
struct Handlers: Sendable {
    var listener: Request.Listener?
    var completions: [Request.Completion]
    var headHandler: Request.HeadHandler?
    var dataHandler: Request.DataHandler?
}

/// What an attempt reports when its C request completes.
struct AttemptReport: Sendable {
    var errorCode: Int32
    var errorMessage: String
    var head: ResponseHead?
    var data: Data
    var bytesReceived: UInt64
    var contentLength: Int64?
    var offset: UInt64
    var timings: Response.Timings
    var isReused: Bool
    var sentHead: String?
    var tlsInfo: TLSInfo?
    var decodedEncoding: String?
    var bytesDelivered: UInt64
    var bodySkipped: Bool
    /// The URL of the last hop, as the engine has it.
    var effectiveURL: String?
    var redirectCount: Int
}

/// A response head as seen when it arrived.
struct ResponseHead: Sendable {
    var status: Int
    var reason: String
    var httpMinorVersion: Int
    var fields: HTTPFields
    var contentLength: Int64?
    var isReused: Bool
}

// Mutable state is guarded: `state` by its lock, the delivery fields by `delivery` (an
// NSCondition), and engine-thread handler calls by `handlerLock`.
final class Run: @unchecked Sendable {
    struct State {
        var handlers: Handlers?
        var attempt: Attempt?
        var attemptCount = 0
        var finished = false
        var result: Result<Response, TernError>?
        var cancelRequested = false
        var waitingRetry = false
        var continuations: [CheckedContinuation<Response, any Error>] = []
        /// Last percent delivered per state (index: State.rawValue), -1 before the first.
        var lastPercent = [-1, -1, -1]
        var downloadedAtLastEvent: UInt64 = 0
        var streamedBytes: UInt64 = 0
        var headSeen = false
    }

    let request: Request
    let plan: Plan
    let logger: Logger
    /// Picks credentials for challenges and records those that worked; `nil` when the request
    /// has no credential store and no handler.
    let authentication: AuthenticationCoordinator?
    private let started = ContinuousClock.now
    private let state: Locked<State>
    // Held while a handler runs on the engine thread, so that clearDelegatesAndCancel() can
    // wait for one in progress; recursive so a handler may clear its own request.
    private let handlerLock = NSRecursiveLock()

    // Delivery, guarded by `delivery`.
    private let delivery = NSCondition()
    private var events: [RunEvent] = []
    private var scheduled = false
    private var draining = false
    private var drainer: UInt = 0
    private var completionDelivered = false
    private var inlineWaiters = 0

    init(request: Request, plan: Plan, handlers: Handlers) {
        self.request = request
        self.plan = plan
        var logger = plan.engine.logger
        logger[metadataKey: "tern.request"] = "\(plan.requestID)"
        self.logger = logger
        self.state = Locked(State(handlers: handlers))
        if plan.sessionStore != nil || plan.persistentStore != nil || plan.authHandler != nil {
            authentication = AuthenticationCoordinator(
                sessionStore: plan.sessionStore, persistentStore: plan.persistentStore,
                handler: plan.authHandler)
        } else {
            authentication = nil
        }
    }

    // MARK: - Lifecycle

    func start() {
        logger.debug("\(plan.method) \(plan.urlString): started")
        if let problem = plan.setupError {
            finish(.failure(problem))
            return
        }
        startAttempt()
    }

    private enum Step {
        case submit(Attempt)
        case fail(TernError)
        case nothing
    }

    /// Builds and submits the next attempt, unless the run finished or was cancelled.
    private func startAttempt() {
        let step: Step = state.withLock { s in
            guard !s.finished else { return .nothing }
            s.waitingRetry = false
            if s.cancelRequested { return .fail(cancelledError()) }
            var totalMs: UInt64 = 0
            if plan.timeouts.total > 0 {
                let left = plan.timeouts.total - elapsed
                if left <= 0 {
                    return .fail(TernError(
                        code: .totalTimedOut,
                        message: "\(plan.host): request exceeded its total limit of "
                            + "\(plan.timeouts.total) s", host: plan.host, phase: .total))
                }
                totalMs = milliseconds(left)
            }
            s.attemptCount += 1
            s.headSeen = false
            do throws(TernError) {
                let attempt = try Attempt(run: self, number: s.attemptCount, totalMs: totalMs)
                s.attempt = attempt
                return .submit(attempt)
            } catch {
                return .fail(error)
            }
        }
        switch step {
        case .submit(let attempt):
            do {
                try attempt.submit()
            } catch {
                state.withLock { if $0.attempt === attempt { $0.attempt = nil } }
                finish(.failure(error))
            }
        case .fail(let error):
            finish(.failure(error))
        case .nothing:
            break
        }
    }

    /// Cancels the run: the current attempt, a pending retry, or the start.
    func cancel() {
        enum Action { case attempt(Attempt), finishNow, nothing }
        let action: Action = state.withLock { s in
            guard !s.finished else { return .nothing }
            s.cancelRequested = true
            if let attempt = s.attempt { return .attempt(attempt) }
            if s.waitingRetry {
                s.waitingRetry = false
                return .finishNow
            }
            return .nothing  // startAttempt() sees cancelRequested
        }
        switch action {
        case .attempt(let attempt): attempt.cancel()
        case .finishNow: finish(.failure(cancelledError()))
        case .nothing: break
        }
    }

    /// Drops every closure: none starts after this returns (one running on the engine thread
    /// is waited for).
    func silence() {
        handlerLock.lock()
        state.withLock { $0.handlers = nil }
        handlerLock.unlock()
    }

    /// Finishes the run once: records the result, resumes awaiting tasks and queues the final
    /// events.
    func finish(_ result: Result<Response, TernError>) {
        let closing: (conts: [CheckedContinuation<Response, any Error>], event: RunEvent?)? =
            state.withLock { s in
                guard !s.finished else { return nil }
                s.finished = true
                s.result = result
                s.waitingRetry = false
                s.attempt = nil
                let conts = s.continuations
                s.continuations = []
                var event: RunEvent?
                switch result {
                case .success:
                    if s.lastPercent[Request.State.download.rawValue] != 100 {
                        event = .progress(.download, 100, isFinal: true)
                        s.lastPercent[Request.State.download.rawValue] = 100
                    }
                case .failure:
                    event = .progress(s.headSeen ? .download : .upload, -1, isFinal: true)
                }
                return (conts, event)
            }
        guard let closing else { return }
        let attempts = state.withLock { $0.attemptCount }
        request.storage.withLock { s in
            s.outcome.result = result
            s.outcome.endDate = Date()
            s.outcome.attempts = attempts
            if case .failure(let error) = result, error.code == .cancelled {
                s.outcome.isCancelled = true
            }
            if case .progress(let st, let percent, _) = closing.event {
                s.outcome.progress.state = st
                s.outcome.progress.percent = percent
            }
            if s.run === self { s.run = nil }
        }
        logSummary(result, attempts: attempts)
        for continuation in closing.conts {
            continuation.resume(with: result.mapError { $0 as any Error })
        }
        if let event = closing.event { post(event) }
        post(.completion)
    }

    /// Adds an awaiting task; resumes it at once when the run already finished.
    func addContinuation(_ continuation: CheckedContinuation<Response, any Error>) {
        let done: Result<Response, TernError>? = state.withLock { s in
            if s.finished { return s.result }
            s.continuations.append(continuation)
            return nil
        }
        if let done { continuation.resume(with: done.mapError { $0 as any Error }) }
    }

    /// The result, once finished.
    var result: Result<Response, TernError>? { state.withLock { $0.result } }

    // MARK: - Attempt callbacks (engine thread)

    func attemptDidReceiveHead(_ attempt: Attempt, head: ResponseHead, sentHead: String?) -> Bool {
        state.withLock { if $0.attempt === attempt { $0.headSeen = true } }
        request.storage.withLock { s in
            s.outcome.head = head
            s.outcome.sentHead = sentHead
        }
        return callOnEngineThread({ $0.headHandler }) { $0(request) }
    }

    /// A hop is about to be sent to `url`: it becomes the request's effective URL.
    func attemptWillSendHop(_ attempt: Attempt, url: URL) {
        let isCurrent = state.withLock { $0.attempt === attempt }
        guard isCurrent else { return }
        request.storage.withLock { $0.outcome.effectiveURL = url }
    }

    /// Runs `body` (a caller's closure, on the engine thread) unless the run was silenced by
    /// clearDelegatesAndCancel(), which waits for one in progress; `fallback` otherwise.
    func whileHandlersLive<T>(_ fallback: T, _ body: () -> T) -> T {
        handlerLock.lock()
        defer { handlerLock.unlock() }
        guard state.withLock({ $0.handlers != nil }) else { return fallback }
        return body()
    }

    func attemptDidProgress(
        _ attempt: Attempt, state st: Request.State, percent: Int, done: UInt64, total: UInt64
    ) {
        request.storage.withLock { s in
            if st == .upload {
                s.outcome.progress.bytesSent = done
                s.outcome.progress.bytesToSend = total > 0 ? total : nil
            } else {
                s.outcome.progress.bytesReceived = done
                s.outcome.progress.bytesExpected = total > 0 ? total : nil
            }
        }
        guard percent >= 0 else { return }  // failures end with one -1 from finish()
        let delivered: Int? = state.withLock { s in
            guard s.attempt === attempt, !s.finished, !s.cancelRequested else { return nil }
            // 100 for downloads is kept for the end of the run: an attempt that reaches it may
            // still be followed by a retry, and the listener hears 100 exactly once.
            let p = st == .download ? min(percent, 99) : percent
            let last = s.lastPercent[st.rawValue]
            guard last < 0 || p > last else { return nil }
            if st == .download, plan.concatData, last >= 0,
                done &- s.downloadedAtLastEvent < UInt64(plan.effectiveBufferSize)
            {
                return nil
            }
            s.lastPercent[st.rawValue] = p
            if st == .download { s.downloadedAtLastEvent = done }
            if s.handlers?.listener != nil { post(.progress(st, p, isFinal: false)) }
            return p
        }
        if let delivered {
            request.storage.withLock { s in
                s.outcome.progress.state = st
                s.outcome.progress.percent = delivered
            }
        }
    }

    func attemptDidReceiveData(_ attempt: Attempt, _ data: Data) -> Bool {
        state.withLock { $0.streamedBytes += UInt64(data.count) }
        return callOnEngineThread({ $0.dataHandler }) { $0(data) }
    }

    func attemptDidComplete(_ attempt: Attempt, report: AttemptReport) {
        let error: TernError? =
            report.errorCode == 0
            ? nil
            : TernError(
                code: TernError.Code(rawValue: report.errorCode), message: report.errorMessage,
                host: plan.host,
                phase: phase(for: TernError.Code(rawValue: report.errorCode),
                             headSeen: report.head != nil))
        request.storage.withLock { s in
            s.outcome.head = report.head
            s.outcome.sentHead = report.sentHead ?? s.outcome.sentHead
            s.outcome.data = report.data
            s.outcome.bytesReceived = report.bytesReceived
            s.outcome.offset = report.offset
            s.outcome.timings = report.timings
            s.outcome.tlsInfo = report.tlsInfo
            s.outcome.decodedEncoding = report.decodedEncoding
            s.outcome.bytesDelivered = report.bytesDelivered
            s.outcome.bodySkipped = report.bodySkipped
            s.outcome.redirectCount = report.redirectCount
            if let effective = report.effectiveURL.flatMap(Self.cleanURL) {
                s.outcome.effectiveURL = effective
            }
            if let length = report.contentLength { s.outcome.contentLength = length }
        }
        enum Next { case retry(TimeInterval, Int), finish, nothing }
        let next: Next = state.withLock { s in
            guard s.attempt === attempt else { return .nothing }
            s.attempt = nil
            guard !s.finished else { return .nothing }
            guard let error, !s.cancelRequested, s.attemptCount <= plan.maxRetries,
                s.streamedBytes == 0, plan.isRetryable(error)
            else { return .finish }
            let delay = plan.retryDelay * pow(2, Double(s.attemptCount - 1))
            if plan.timeouts.total > 0, elapsed + delay >= plan.timeouts.total { return .finish }
            s.waitingRetry = true
            return .retry(delay, s.attemptCount)
        }
        switch next {
        case .retry(let delay, let count):
            let reason = error?.message ?? ""
            let line = "\(plan.method) \(plan.urlString): attempt \(count) failed (\(reason)); "
                + "retry \(count) of \(plan.maxRetries) in \(delay) s"
            logger.debug("\(line)")
            if delay <= 0 {
                startAttempt()
            } else {
                DispatchQueue.global().asyncAfter(deadline: .now() + delay) { self.startAttempt() }
            }
        case .finish:
            if let error {
                finish(.failure(error))
            } else {
                finish(.success(makeResponse(report)))
            }
        case .nothing:
            break
        }
    }

    // MARK: - Delivery

    /// Queues an event; wakes inline waiters, or schedules a drain on the callback queue when
    /// there are none (a queue that is blocked by its waiter, or never runs, such as the main
    /// queue of a command-line tool, then holds nothing of this run).
    func post(_ event: RunEvent) {
        delivery.lock()
        events.append(event)
        let schedule = !scheduled && inlineWaiters == 0
        if schedule { scheduled = true }
        delivery.broadcast()
        delivery.unlock()
        if schedule {
            plan.queue.async { self.drainFromQueue() }
        }
    }

    private func drainFromQueue() {
        delivery.lock()
        scheduled = false
        if !draining { drainLocked() }
        delivery.unlock()
    }

    /// Delivers queued events one batch at a time. Called with `delivery` locked and nobody
    /// draining; only one thread drains at a time, which keeps events in order even on a
    /// concurrent queue.
    private func drainLocked() {
        draining = true
        drainer = currentThreadID()
        while !events.isEmpty {
            let batch = events
            events.removeAll()
            delivery.unlock()
            for event in batch { deliver(event) }
            delivery.lock()
        }
        draining = false
        drainer = 0
        delivery.broadcast()
    }

    /// Blocks until the completion has been delivered. With `inline`, the calling thread (which
    /// is on the callback queue, so the queue cannot run the events itself) delivers them.
    func waitForCompletion(inline: Bool) {
        delivery.lock()
        if inline { inlineWaiters += 1 }
        defer {
            if inline { inlineWaiters -= 1 }
            delivery.unlock()
        }
        while !completionDelivered {
            if inline, !draining, !events.isEmpty {
                drainLocked()
                continue
            }
            delivery.wait()
        }
    }

    /// True when the calling thread is delivering this run's events right now.
    var isDeliveringOnCurrentThread: Bool {
        delivery.lock()
        defer { delivery.unlock() }
        return draining && drainer == currentThreadID()
    }

    private func deliver(_ event: RunEvent) {
        switch event {
        case .progress(let st, let percent, let isFinal):
            let listener: Request.Listener? = state.withLock { s in
                if s.cancelRequested && !isFinal { return nil }
                return s.handlers?.listener
            }
            if let listener, !listener(request, st, percent) {
                cancel()
            }
        case .completion:
            let completions = state.withLock { $0.handlers?.completions ?? [] }
            for completion in completions { completion(request) }
            state.withLock { $0.handlers = nil }  // release what the closures captured
            delivery.lock()
            completionDelivered = true
            delivery.broadcast()
            delivery.unlock()
        }
    }

    // MARK: - Helpers

    /// Calls a handler on the engine thread unless the run was silenced; `true` without one.
    private func callOnEngineThread<H>(_ pick: (Handlers) -> H?, _ call: (H) -> Bool) -> Bool {
        handlerLock.lock()
        defer { handlerLock.unlock() }
        let handlers = state.withLock { $0.handlers }
        guard let handler = handlers.flatMap(pick) else { return true }
        return call(handler)
    }

    private var elapsed: TimeInterval {
        let d = ContinuousClock.now - started
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    private func cancelledError() -> TernError {
        TernError(
            code: .cancelled, message: "request to \(plan.host) cancelled", host: plan.host,
            phase: .caller)
    }

    private func phase(for code: TernError.Code, headSeen: Bool) -> TernError.Phase? {
        switch code {
        case .connectionReset, .ioError:
            return headSeen ? .body : .headers
        default:
            return TernError.defaultPhase(for: code)
        }
    }

    /// A URL from the engine without user info or fragment, as ``Response/url`` promises.
    static func cleanURL(_ string: String) -> URL? {
        guard var components = URLComponents(string: string) else { return URL(string: string) }
        if components.user == nil && components.password == nil && components.fragment == nil {
            return components.url
        }
        components.user = nil
        components.password = nil
        components.fragment = nil
        return components.url
    }

    private func makeResponse(_ report: AttemptReport) -> Response {
        let head = report.head
        return Response(
            url: report.effectiveURL.flatMap(Self.cleanURL) ?? plan.url,
            originalURL: plan.url,
            redirectCount: report.redirectCount,
            status: HTTPResponse.Status(code: head?.status ?? 0, reasonPhrase: head?.reason ?? ""),
            httpMinorVersion: head?.httpMinorVersion ?? 1,
            headerFields: head?.fields ?? [:],
            contentLength: report.contentLength,
            offset: report.offset,
            bytesReceived: report.bytesReceived,
            data: report.data,
            downloadFile: plan.download?.path,
            isReused: report.isReused,
            isFromCache: false,
            attempts: state.withLock { $0.attemptCount },
            timings: report.timings,
            sentRequestHead: report.sentHead,
            tlsInfo: report.tlsInfo,
            decodedEncoding: report.decodedEncoding,
            bytesDelivered: report.bytesDelivered,
            isRequestBodySkipped: report.bodySkipped)
    }

    private func logSummary(_ result: Result<Response, TernError>, attempts: Int) {
        guard logger.logLevel <= .debug else { return }
        var line = "\(plan.method) \(plan.urlString): "
        switch result {
        case .success(let response):
            func t(_ v: TimeInterval?) -> String { v.map { String(format: "%.3f s", $0) } ?? "-" }
            let timings = response.timings
            line += "status \(response.statusCode), \(response.bytesReceived) body bytes, "
            line += "connection \(response.isReused ? "reused" : "new"), "
            line += "connected \(t(timings.connected)), first byte \(t(timings.headers)), "
            line += "total \(t(timings.total)), attempts \(attempts)"
        case .failure(let error):
            line += "failed after \(attempts) attempt(s): \(error.code.name) \(error.message)"
        }
        logger.debug("\(line)")
    }
}

/// Converts seconds to whole milliseconds for the engine (rounded up; 0 for none).
func milliseconds(_ seconds: TimeInterval) -> UInt64 {
    guard seconds > 0, seconds.isFinite else { return 0 }
    return UInt64(min((seconds * 1000).rounded(.up), 1e15))
}
