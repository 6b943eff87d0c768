// Execution: one run of a Request, from execute() to the delivery of its completion. One object
// per run: it is the C callbacks' context for every attempt, keeps the ExecutionMachine (the
// rules) under one lock, and delivers listener and completion events in order on the
// request's callback queue, or inline on a thread blocked in executeAndWait() on that queue.
//
// The fast path: a request with no listener, completion or progress handler never touches a
// DispatchQueue. Its awaiting task is resumed from the engine's thread, and executeAndWait()
// is woken from there.
//
// Threads: `lock` guards the fields marked "guarded"; `local` is touched only by the C
// callbacks of the attempt in flight (the loop thread) and by startAttempt() before that
// attempt is submitted. Attempts never overlap: the next is built after the previous one's
// completion callback.

internal import CTern
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import Logging
import Synchronization

/// An awaiting `response()` call. Unsafe rather than checked: every one is resumed exactly
/// once, by finish() or by addContinuation() after the end, and the checked kind costs an
/// allocation and its checks per request.
typealias ResponseContinuation = UnsafeContinuation<Response, any Error>

/// The tasks awaiting an execution: nearly always one, kept without an array.
struct Waiters {
    private var first: ResponseContinuation?
    private var more: [ResponseContinuation] = []

    mutating func append(_ continuation: ResponseContinuation) {
        if first == nil { first = continuation } else { more.append(continuation) }
    }

    /// Resumes every one with `result`.
    func resume(with result: Result<Response, TernError>) {
        switch result {
        case .success(let response):
            first?.resume(returning: response)
            for continuation in more { continuation.resume(returning: response) }
        case .failure(let error):
            first?.resume(throwing: error)
            for continuation in more { continuation.resume(throwing: error) }
        }
    }
}

/// A listener, progress or completion event, in delivery order.
enum ExecutionEvent: Sendable {
    /// A progress event; `isFinal` marks the closing 100 or -1, delivered even after a cancel.
    case progress(Request.State, Int, isFinal: Bool)
    /// Byte counts for the progress handler.
    case bytes(Request.Progress)
    /// Runs the completion handlers, then resumes awaiting tasks and waiters.
    case completion
}

/// The closures of one execution, copied from the request's settings when it starts and
/// dropped by clearDelegatesAndCancel() or once the completion has been delivered. An
/// execution whose request set none keeps none (`nil`), which most requests are. A class: the
/// execution tests, takes and drops the optional under its lock several times per request,
/// and a reference does each in one step where the struct's six fields were copied and
/// destroyed one by one.
final class Handlers: Sendable {
    let listener: Request.Listener?
    let completions: [Request.Completion]
    let headHandler: Request.HeadHandler?
    let dataHandler: Request.DataHandler?
    let progressHandler: Request.ProgressHandler?
    let progressStreams: [AsyncStream<Request.Progress>.Continuation]

    init(
        listener: Request.Listener? = nil, completions: [Request.Completion] = [],
        headHandler: Request.HeadHandler? = nil, dataHandler: Request.DataHandler? = nil,
        progressHandler: Request.ProgressHandler? = nil,
        progressStreams: [AsyncStream<Request.Progress>.Continuation] = []
    ) {
        self.listener = listener
        self.completions = completions
        self.headHandler = headHandler
        self.dataHandler = dataHandler
        self.progressHandler = progressHandler
        self.progressStreams = progressStreams
    }

    /// The closures the settings hold for one execution, or `nil` when they hold none. The
    /// progress streams are taken: each follows one execution.
    convenience init?(taking settings: inout Request.Settings) {
        guard settings.listener != nil || !settings.completions.isEmpty
            || settings.headHandler != nil || settings.dataHandler != nil
            || settings.progressHandler != nil || !settings.progressStreams.isEmpty
        else { return nil }
        self.init(
            listener: settings.listener, completions: settings.completions,
            headHandler: settings.headHandler, dataHandler: settings.dataHandler,
            progressHandler: settings.progressHandler, progressStreams: settings.progressStreams)
        settings.progressStreams = []
    }

    /// Someone wants byte counts: a handler or a stream.
    var wantsBytes: Bool { progressHandler != nil || !progressStreams.isEmpty }
}

/// What one attempt left behind when it completed, and, for the attempt that ends an
/// execution, the response itself: ``Response`` holds this object. A class: the report goes
/// from the bridging code through the machine's step into the response, and a reference moves
/// where the struct's seventeen fields were copied and destroyed at each step; one object,
/// where a response's own box around the report was one more allocation per request.
final class AttemptReport: Sendable {
    let error: TernError?
    let head: ResponseHead?
    let data: Data
    let bytesReceived: UInt64
    let contentLength: Int64?
    let offset: UInt64
    let timings: Response.Timings
    /// The request head as sent, when no response head carries it.
    let sentHead: String?
    let tlsInfo: TLSInfo?
    let decodedEncoding: String?
    let bytesDelivered: UInt64
    let bodySkipped: Bool
    /// The proxy's answer to this attempt's CONNECT, or 0.
    let connectStatus: Int
    /// Where the redirects led, cleaned; `nil` when no redirect was followed.
    let redirectedURL: URL?
    let redirectCount: Int
    /// The URL the execution started from, cleaned.
    let originalURL: URL
    /// The download file the body went to, if any.
    let downloadFile: String?
    /// The report stands for a stored response.
    let isFromCache: Bool
    /// The attempt's number: the attempts made when it ends the execution.
    let attempts: Int

    /// Where the response came from: the redirects' end, else the original URL.
    var url: URL { redirectedURL ?? originalURL }

    /// The final status with its reason phrase (status 0, no phrase, without a head).
    var status: HTTPResponse.Status {
        guard let head else { return HTTPResponse.Status(code: 0, reasonPhrase: "") }
        if head.status == 200, head.reason == "OK" { return .ok }
        return HTTPResponse.Status(code: head.status, reasonPhrase: head.reason)
    }

    init(
        error: TernError?, head: ResponseHead?, data: Data, bytesReceived: UInt64,
        contentLength: Int64?, offset: UInt64, timings: Response.Timings, sentHead: String?,
        tlsInfo: TLSInfo?, decodedEncoding: String?, bytesDelivered: UInt64, bodySkipped: Bool,
        connectStatus: Int, redirectedURL: URL?, redirectCount: Int, originalURL: URL,
        downloadFile: String?, isFromCache: Bool, attempts: Int
    ) {
        self.error = error
        self.head = head
        self.data = data
        self.bytesReceived = bytesReceived
        self.contentLength = contentLength
        self.offset = offset
        self.timings = timings
        self.sentHead = sentHead
        self.tlsInfo = tlsInfo
        self.decodedEncoding = decodedEncoding
        self.bytesDelivered = bytesDelivered
        self.bodySkipped = bodySkipped
        self.connectStatus = connectStatus
        self.redirectedURL = redirectedURL
        self.redirectCount = redirectCount
        self.originalURL = originalURL
        self.downloadFile = downloadFile
        self.isFromCache = isFromCache
        self.attempts = attempts
    }
}

/// What a ``RequestQueue`` learns from an execution it started. Called on the engine's thread
/// (the end also on a thread that cancelled); must be quick and must not call user code.
protocol ExecutionObserver: AnyObject, Sendable {
    /// The final response's head arrived.
    func executionReceivedHead(_ execution: Execution, contentLength: Int64?)
    /// Bytes sent or received so far, with the total when known (0 when not).
    func executionProgressed(_ execution: Execution, upload: Bool, done: UInt64, total: UInt64)
    /// The result is recorded (the request's fields are set); completions may not have run.
    func executionFinished(_ execution: Execution, result: Result<Response, TernError>)
}

final class Execution: @unchecked Sendable {
    let request: Request
    let plan: Plan
    /// The request has a credential store or a challenge handler: the engine's challenges
    /// come to ``authentication``.
    let answersChallenges: Bool
    /// Made when first needed (a credential to note, a stored one to send, a challenge): most
    /// requests never need one, and making and freeing it cost about 1,200 instructions.
    /// Touched only by the thread running the current attempt, as `local` is.
    @exclusivity(unchecked) private var madeAuthentication: AuthenticationCoordinator?

    /// Picks credentials for challenges and records those that worked; `nil` when the request
    /// has no credential store and no handler. Called by the thread of the current attempt.
    var authentication: AuthenticationCoordinator? {
        guard answersChallenges else { return nil }
        if let made = madeAuthentication { return made }
        let made = AuthenticationCoordinator(
            sessionStore: plan.sessionStore, persistentStore: plan.persistentStore,
            handler: plan.authHandler)
        madeAuthentication = made
        return made
    }
    /// Listener, completion or progress handlers exist: events go through `callbackQueue`.
    let deliversOnQueue: Bool
    /// Held while a handler runs on the engine thread, so that clearDelegatesAndCancel() can
    /// wait for one in progress; recursive so a handler may clear its own request. Only made
    /// when such a handler exists.
    private let handlerGate: ConditionLock?
    /// Guards the fields below. A thread blocked in executeAndWait() sleeps on a semaphore of
    /// its own in `sleepers` rather than on a condition variable, so that the lock can be the
    /// standard library's inline mutex: no allocation, and no pthread call per round trip.
    private let lock = StateLock(())

    // Guarded by `lock`. `@exclusivity(unchecked)`: the lock (or, for `local`, the one thread
    // that runs an attempt's callbacks) already keeps accesses apart, and the runtime's dynamic
    // checks cost about 60 instructions per access, some thirty accesses per request.
    @exclusivity(unchecked) private var machine: ExecutionMachine
    @exclusivity(unchecked) private var handlers: Handlers?
    /// clearDelegatesAndCancel() dropped the closures: none starts again, the request's
    /// authentication handler included.
    @exclusivity(unchecked) private var silenced = false
    @exclusivity(unchecked) private var current: CRequest?
    @exclusivity(unchecked) private var recorded = false
    @exclusivity(unchecked) private(set) var resultStorage: Result<Response, TernError>?
    @exclusivity(unchecked) private var continuations = Waiters()
    @exclusivity(unchecked) private var events: [ExecutionEvent] = []
    @exclusivity(unchecked) private var scheduled = false
    @exclusivity(unchecked) private var draining = false
    @exclusivity(unchecked) private var drainer: UInt = 0
    @exclusivity(unchecked) private var completionDelivered = false
    @exclusivity(unchecked) private var inlineWaiters = 0
    /// Threads blocked in waitForCompletion(), woken by wakeSleepers().
    @exclusivity(unchecked) private var sleepers: [DispatchSemaphore] = []
    @exclusivity(unchecked) private var streamedBytes: UInt64 = 0
    @exclusivity(unchecked) private var lastBytesEvent = -Double.infinity
    @exclusivity(unchecked) private var bytesEventPending = false

    /// Per-attempt state of the loop thread (see the threads note above).
    struct AttemptLocal {
        var number = 0
        var token: UInt64 = 0
        var bodyError: String?
        var pending = Data()
        var hopURL: URL
        var hops = 0
        var leftOrigin = false
        var authCancelled = false
        /// didReceiveHead saw the final head: with ``readsHeadsLate``, a response that came whole
        /// in one read reaches only the complete callback (tern_request_set_whole_at_completion).
        var finalHeadSeen = false
        var lastHead: ResponseHead?
        /// The C request in flight, from submit to its complete callback.
        var owner: CRequest?
        /// The attempt's report, kept so that it is freed with the execution (after the next
        /// request is written, see releaseExecution) rather than on the way to resuming the
        /// caller.
        var report: AttemptReport?
    }
    @exclusivity(unchecked) var local: AttemptLocal
    /// The queue entry that started this execution, told of its head, progress and end.
    let observer: (any ExecutionObserver)?
    /// The cache's part in this execution, when the request uses a cache.
    let cacheStage: CacheStage?
    /// Nobody can look at a head before the end: no head, data or authentication handler,
    /// no listener or progress handler, no queue observer and no cache. Unless a hop brings
    /// credentials to settle, its head then only hands its cookies to the jar, and the final
    /// head is read once, at completion (``Request/statusCode`` is documented as readable from the
    /// first listener event and in the head handler, which such a request has not).
    let readsHeadsLate: Bool

    init(request: Request, plan: consuming Plan, handlers: Handlers?, observer: (any ExecutionObserver)? = nil) {
        self.request = request
        self.observer = observer
        cacheStage = plan.cache.map(CacheStage.init)
        answersChallenges =
            plan.sessionStore != nil || plan.persistentStore != nil || plan.authHandler != nil
        if let handlers {
            deliversOnQueue =
                handlers.listener != nil || !handlers.completions.isEmpty || handlers.wantsBytes
        } else {
            deliversOnQueue = false
        }
        handlerGate =
            handlers?.headHandler != nil || handlers?.dataHandler != nil || plan.authHandler != nil
            ? ConditionLock(recursive: true) : nil
        self.handlers = handlers
        readsHeadsLate =
            handlerGate == nil && !deliversOnQueue && observer == nil && cacheStage == nil
        machine = ExecutionMachine(policy: plan.policy)
        local = AttemptLocal(hopURL: plan.url)
        // Last: the plan moves in, read above without a copy.
        self.plan = plan
    }

    // MARK: - Lifecycle

    func start() {
        if _slowPath(plan.logsDebug) { logStart() }
        if _slowPath(plan.setupError != nil), let problem = plan.setupError {
            fail(beforeStart: problem)
            return
        }
        if _slowPath(cacheStage != nil), let stage = cacheStage, answerFromCache(stage) { return }
        let step = lock.withLock { _ in machine.start(now: monotonicSeconds()) }
        perform(step, report: nil)
    }

    @inline(never)
    private func logStart() {
        plan.engine.logger.debug("\(plan.method) \(plan.urlString): started", metadata: logMetadata)
    }

    /// Ends an execution that never submitted anything (a setup error, or a queued request
    /// refused or cancelled before its turn): the listener's -1 and the completions still run.
    func fail(beforeStart error: TernError) {
        finishWithoutAttempt(.failure(error))
    }

    /// Ends an execution that submits nothing (answered from the cache, or failed early).
    func finishWithoutAttempt(_ result: Result<Response, TernError>) {
        _ = lock.withLock { _ in machine.cancel() }  // idle → finished, nothing submitted
        finish(result, attempts: 0)
    }

    /// Carries out what the machine decided.
    private func perform(_ step: ExecutionMachine.Step, report: AttemptReport?) {
        switch step {
        case .submit(let number, let timeLeft):
            startAttempt(number, timeLeft: timeLeft)
        case .retry(let delay, let number):
            scheduleRetry(after: delay, attempt: number, report: report)
        case .cancelAttempt:
            let target = lock.withLock { _ in current }
            if let target { cancelCRequest(target) }
        case .finish(let ending):
            switch ending {
            case .lastAttempt:
                guard let report else {
                    finish(.failure(cancelledError()), attempts: attemptsMade)
                    return
                }
                var result: Result<Response, TernError> =
                    if _slowPath(report.error != nil), let error = report.error {
                        .failure(error)
                    } else {
                        // The machine finishes with the attempt it numbered last, whose report
                        // counts the attempts made: the report is the response.
                        .success(Response(report: report))
                    }
                if _slowPath(cacheStage != nil), let stage = cacheStage { result = afterExchange(result, stage: stage) }
                // The report's number is the machine's count of attempts (it numbered this one
                // last): read there rather than under the lock once more.
                finish(result, attempts: report.attempts)
            case .cancelled:
                finish(.failure(cancelledError()), attempts: attemptsMade)
            case .totalTimedOut:
                finish(.failure(totalTimeoutError()), attempts: attemptsMade)
            }
        case .nothing:
            break
        }
    }

    // Out of line, as the timeout's error below: the path every request takes (submit, then
    // finish) stays on few cache lines (bench/HISTORY-swift-path.md).
    @inline(never)
    private func scheduleRetry(after delay: Double, attempt number: Int, report: AttemptReport?) {
        if plan.logsDebug {
            let reason = report?.error?.message ?? "status \(report?.head?.status ?? 0)"
            let line = "\(plan.method) \(plan.urlString): attempt \(number - 1) failed (\(reason)); "
                + "retry \(number - 1) of \(plan.policy.maxRetries) in \(delay) s"
            plan.engine.logger.debug("\(line)", metadata: logMetadata)
        }
        if delay <= 0 {
            retryDue()
        } else {
            DispatchQueue.global().asyncAfter(deadline: .now() + delay) { self.retryDue() }
        }
    }

    @inline(never)
    private func totalTimeoutError() -> TernError {
        TernError(
            code: .totalTimedOut,
            message: "\(plan.host): request exceeded its total limit of \(plan.timeouts.total) s",
            host: plan.host, phase: .total)
    }

    private func retryDue() {
        let step = lock.withLock { _ in machine.retryDue(now: monotonicSeconds()) }
        perform(step, report: nil)
    }

    /// Builds the C request of attempt `number` and submits it.
    private func startAttempt(_ number: Int, timeLeft: Double?) {
        if _fastPath(local.number == 0) {
            // The first attempt finds the state the initializer made: numbered in place, not
            // rebuilt (a new one released and retained each of its references).
            local.number = number
            local.token = nextAttemptToken()
        } else {
            local = AttemptLocal(number: number, token: nextAttemptToken(), hopURL: plan.url)
        }
        cacheStage?.attemptStarted()
        let built: CRequest
        do throws(TernError) {
            built = try makeCRequest(attempt: number, timeLeft: timeLeft)
        } catch {
            attemptFailedLocally(number, error)
            return
        }
        // A cancel that came while the request was built found no C request to cancel.
        let cancelled = lock.withLock { _ in
            current = built
            return machine.cancelRequested
        }
        if _slowPath(cancelled) { cancelCRequest(built) }  // the engine completes it as cancelled
        do throws(TernError) {
            try submit(built)
        } catch {
            lock.withLock { _ in current = nil }
            attemptFailedLocally(number, error)
        }
    }

    /// The attempts the machine has numbered so far.
    private var attemptsMade: Int { lock.withLock { _ in machine.attempts } }

    /// An attempt that never reached the engine ends the execution with its error.
    private func attemptFailedLocally(_ number: Int, _ error: TernError) {
        let step = lock.withLock { _ in
            machine.attemptEnded(
                attempt: number, .init(error: error.code, canReplayBody: false), now: monotonicSeconds())
        }
        if case .finish = step { finish(.failure(error), attempts: attemptsMade) }
    }

    /// Pauses or resumes reading the current attempt's response (a streamed body whose
    /// consumer fell behind).
    func setReceivePaused(_ paused: Bool) {
        if let target = lock.withLock({ _ in current }) { pauseReceiving(target, paused) }
    }

    /// Cancels the execution: the current attempt, a pending retry, or the start.
    func cancel() {
        let step = lock.withLock { _ in machine.cancel() }
        perform(step, report: nil)
    }

    /// Drops every closure: none starts after this returns (one running on the engine thread
    /// is waited for).
    func silence() {
        handlerGate?.lock()
        let streams = lock.withLock { _ in
            defer {
                handlers = nil
                silenced = true
            }
            return handlers?.progressStreams ?? []
        }
        handlerGate?.unlock()
        for stream in streams { stream.finish() }
    }

    /// Records the result once, updates the request's fields, then resumes awaiting tasks and
    /// waiters, directly or after the completion handlers ran on the callback queue.
    func finish(_ result: Result<Response, TernError>, attempts: Int) {
        let success = if case .success = result { true } else { false }
        // The closing event is taken with the result, in one step: nothing else changes the
        // machine's progress once the result is recorded.
        let recording: (upload: Bool, percent: Int)?? = lock.withLock { _ -> (upload: Bool, percent: Int)?? in
            guard !recorded else { return nil }
            recorded = true
            resultStorage = result
            current = nil
            return .some(machine.finalEvent(success: success))
        }
        guard let closing = recording else { return }
        if _slowPath(!success), let download = plan.download, !download.resume, plan.policy.maxRetries > 0 {
            removePartialDownload(download.path)  // kept for retries that will not come
        }
        let snapshot: Request.Progress = request.storage.withLock { s in
            s.outcome.result = result
            s.outcome.endDate = Date()
            s.outcome.attempts = attempts
            if case .failure(let error) = result, error.code == .cancelled {
                s.outcome.isCancelled = true
            }
            if let closing {
                s.outcome.progress.state = closing.upload ? .upload : .download
                s.outcome.progress.percent = closing.percent
            }
            if s.run === self { s.run = nil }
            return s.outcome.progress
        }
        if _slowPath(plan.logsDebug) { logSummary(result, attempts: attempts) }
        observer?.executionFinished(self, result: result)
        if _slowPath(deliversOnQueue) {
            var schedule = false
            lock.withLock { _ in
                if let closing, handlers?.listener != nil {
                    schedule = enqueue(.progress(closing.upload ? .upload : .download, closing.percent, isFinal: true)) || schedule
                }
                if handlers?.wantsBytes == true, bytesEventPending || success {
                    bytesEventPending = false
                    schedule = enqueue(.bytes(snapshot)) || schedule
                }
                schedule = enqueue(.completion) || schedule
            }
            if schedule { plan.queue.async { self.drainFromQueue() } }
        } else {
            let waiting: Waiters = lock.withLock { _ in
                completionDelivered = true
                handlers = nil  // release what the closures captured
                wakeSleepers()
                defer { continuations = Waiters() }
                return continuations
            }
            waiting.resume(with: result)
        }
    }

    /// Adds an awaiting task; resumes it at once when the execution is already complete.
    func addContinuation(_ continuation: ResponseContinuation) {
        let done: Result<Response, TernError>? = lock.withLock { _ in
            if completionDelivered { return resultStorage }
            continuations.append(continuation)
            return nil
        }
        if let done { continuation.resume(with: done.mapError { $0 as any Error }) }
    }

    /// The result, once finished.
    var result: Result<Response, TernError>? { lock.withLock { _ in resultStorage } }

    // MARK: - Engine events (loop thread)

    /// A hop is about to be sent: remembers its URL and adds its `Cookie` field, the jar's
    /// cookies for that URL then the caller's own (while the chain stays on the request's
    /// origin).
    func willSendHop(_ handle: OpaquePointer, url urlString: UnsafePointer<CChar>?) {
        local.hops += 1
        // The first hop's URL is the plan's, which the attempt started with.
        if local.hops > 1 {
            var url = plan.url
            if let urlString {
                // Later hops are redirects (or a retried challenge): parse what the engine says.
                url = URL(string: String(cString: urlString)) ?? plan.url
                if !sameOrigin(url, plan.url), !plan.redirectPolicy.contains(.trustsCrossOrigin) {
                    local.leftOrigin = true
                }
                request.storage.withLock { $0.outcome.hopURL = url }
            }
            local.hopURL = url
        }
        var cookies: String?
        if let jar = plan.cookieJar, !jar.isEmpty, let header = jar.cookieHeader(for: local.hopURL) {
            cookies = header
        }
        if let own = plan.manualCookie, !local.leftOrigin {
            cookies = cookies.map { $0 + "; " + own } ?? own
        }
        if let cookies {
            // The values were checked when planned (the caller's) or stored (the jar's).
            _ = tern_request_add_hop_header(handle, "Cookie", cookies)
        }
    }

    /// A hop's response head: its cookies go to the jar (a proxy's 407 sets none for the
    /// origin), the credential coordinator learns whether credentials worked, then the head
    /// handler runs. The fields are read now only when someone may look at them before the
    /// end (a handler, a listener, the coordinator on a challenge); otherwise once, at
    /// completion.
    func didReceiveHead(_ handle: OpaquePointer, status: Int) -> Bool {
        let challenged = status == 401 || status == 407
        if readsHeadsLate, tern_request_is_final_hop(handle) != 0 { local.finalHeadSeen = true }
        // Credentials to settle: a challenge to answer, or a coordinator with attempts.
        if readsHeadsLate, !(challenged && answersChallenges), madeAuthentication == nil {
            storeCookies(handle, status: status)
            let attempt = local.number
            lock.withLock { _ in machine.headArrived(attempt: attempt) }
            return true
        }
        let head = readHead(handle)
        local.lastHead = head
        storeCookies(handle, status: status)
        // Without a challenge, only a coordinator already made can have attempts to settle.
        if let auth = challenged ? authentication : madeAuthentication, challenged || auth.hasAttempts {
            let challenges =
                status == 401
                ? head.fields[values: .wwwAuthenticate]
                : status == 407 ? head.fields[values: .proxyAuthenticate] : []
            auth.hopResponded(status: status, url: local.hopURL, challenges: challenges)
        }
        let attempt = local.number
        lock.withLock { _ in machine.headArrived(attempt: attempt) }
        if let observer, tern_request_is_final_hop(handle) != 0 {
            observer.executionReceivedHead(self, contentLength: head.contentLength)
        }
        let interim = readInterimHeads(handle)
        request.storage.withLock { s in
            s.outcome.head = head
            s.outcome.interimHeads = interim
        }
        if let stage = cacheStage,
            cacheHoldsHead(head, status: status, finalHop: tern_request_is_final_hop(handle) != 0, stage: stage)
        {
            return true
        }
        return callOnEngineThread({ $0.headHandler }) { $0(request) }
    }

    /// A hop's cookies go to the jar; a proxy's 407 sets none for the origin.
    private func storeCookies(_ handle: OpaquePointer, status: Int) {
        guard let jar = plan.cookieJar, status != 407 else { return }
        let values = setCookieValues(handle)
        if !values.isEmpty { _ = jar.store(setCookieHeaders: values, from: local.hopURL) }
    }

    func didProgress(upload: Bool, percent: Int, done: UInt64, total: UInt64) {
        observer?.executionProgressed(self, upload: upload, done: done, total: total)
        let attempt = local.number
        var schedule = false
        var delivered: Int?
        var wantsBytes = false
        lock.withLock { _ in
            delivered = machine.progress(attempt: attempt, upload: upload, percent: percent, bytes: done)
            // Without a listener or progress handler there is nothing to queue (and looking
            // into the optional handlers copies them).
            guard deliversOnQueue else { return }
            if let p = delivered, handlers?.listener != nil {
                schedule = enqueue(.progress(upload ? .upload : .download, p, isFinal: false))
            }
            if handlers?.wantsBytes == true, !machine.cancelRequested {
                let now = monotonicSeconds()
                if now - lastBytesEvent >= plan.progressInterval {
                    lastBytesEvent = now
                    bytesEventPending = false
                    wantsBytes = true
                } else {
                    bytesEventPending = true
                }
            }
        }
        let snapshot: Request.Progress = request.storage.withLock { s in
            if upload {
                s.outcome.progress.bytesSent = done
                s.outcome.progress.bytesToSend = total > 0 ? total : nil
            } else {
                s.outcome.progress.bytesReceived = done
                s.outcome.progress.bytesExpected = total > 0 ? total : nil
            }
            if let delivered {
                s.outcome.progress.state = upload ? .upload : .download
                s.outcome.progress.percent = delivered
            }
            return s.outcome.progress
        }
        if wantsBytes {
            var progress = snapshot
            progress.state = upload ? .upload : .download
            schedule = lock.withLock { _ in enqueue(.bytes(progress)) } || schedule
        }
        if schedule { plan.queue.async { self.drainFromQueue() } }
    }

    /// Body bytes for the data handler; coalesced to exactly the buffer size with concatData.
    func didReceive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if let stage = cacheStage, stage.settings.streamsBody {
            // A 5xx the stored response answers for is not handed over; a storable body
            // goes into the cache as it arrives.
            let sink = stage.streamSink  // one lock per chunk
            if sink.holdsBack { return true }
            sink.writer?.append(bytes)
        }
        let limit = plan.concatData ? plan.effectiveBufferSize : 0
        guard limit > 0 else { return deliverData(Data(bytes)) }
        var rest = bytes[...]
        while !rest.isEmpty {
            let take = min(limit - local.pending.count, rest.count)
            local.pending.append(contentsOf: rest.prefix(take))
            rest = rest.dropFirst(take)
            if local.pending.count == limit {
                let chunk = local.pending
                local.pending = Data(capacity: limit)
                if !deliverData(chunk) { return false }
            }
        }
        return true
    }

    /// Whether some of the body reached the data handler.
    var hasStreamedBody: Bool { lock.withLock { _ in streamedBytes > 0 } }

    func deliverData(_ data: Data) -> Bool {
        lock.withLock { _ in streamedBytes += UInt64(data.count) }
        return callOnEngineThread({ $0.dataHandler }) { $0(data) }
    }

    /// The engine's auth callback: credentials from the stores or the handler, or none.
    func answerChallenge(_ handle: OpaquePointer, isProxy: Bool, scheme: String, realm: String)
        -> Int32
    {
        guard let auth = authentication, isProxy || !plan.hasExplicitAuthorization else { return 0 }
        let action = whileHandlersLive(AuthenticationCoordinator.Action.stop) {
            auth.respond(
                isProxy: isProxy, scheme: scheme, realm: realm, url: local.hopURL,
                proxyURL: plan.proxy?.url)
        }
        switch action {
        case .supply(let credential):
            return tern_request_supply_auth(handle, credential.engineUser, credential.password) == 0 ? 1 : 0
        case .stop:
            return 0
        case .cancel:
            local.authCancelled = true
            return 0
        }
    }

    /// Fills the engine's buffer from the stream body; -1 (with the reason kept) on error,
    /// TERN_READ_WAIT (`Int64.min`) when the stream has no bytes yet and will resume the
    /// attempt's C request once it has.
    func readBody(into buffer: UnsafeMutableRawBufferPointer) -> Int64 {
        guard case .stream(_, let stream) = plan.body else { return -1 }
        do {
            let n = try stream.read(into: buffer, for: local.token, waker: local.owner)
            return n == BodyStream.notReady ? Int64.min : Int64(n)
        } catch {
            local.bodyError = "\(error)"
            return -1
        }
    }

    /// Hands the bytes coalesced for the data handler (concatData) over, if any; false when
    /// the handler refused them.
    func flushPending() -> Bool {
        guard !local.pending.isEmpty else { return true }
        defer { local.pending = Data() }
        return deliverData(local.pending)
    }

    /// The attempt's C request completed: record what it left, then retry or finish.
    func didComplete(_ owner: CRequest, status: Int32) {
        // Bytes that arrived are handed over even when the request failed afterwards.
        _ = flushPending()
        // A response that came whole in one read, left to this callback by the engine: what
        // the head and progress callbacks would have done (cookies, credentials, byte counts).
        let h = owner.pointer
        var quietBytes: (done: UInt64, total: UInt64)?
        if readsHeadsLate, !local.finalHeadSeen, tern_request_is_final_hop(h) != 0 {
            let finalStatus = Int(tern_request_get_status(h))
            if finalStatus != 0 {
                _ = didReceiveHead(h, status: finalStatus)
                let offset = tern_request_get_offset(h)
                let done = offset &+ tern_request_get_bytes_received(h)
                let length = tern_request_get_content_length(h)
                quietBytes = (done, length > 0 ? UInt64(length) &+ offset : done)
            }
        }
        let report = makeReport(owner, status: status)
        local.report = report
        let interim = readsHeadsLate ? readInterimHeads(h) : nil
        request.storage.withLock { s in
            if let quietBytes {
                s.outcome.progress.bytesReceived = quietBytes.done
                s.outcome.progress.bytesExpected = quietBytes.total
            }
            if readsHeadsLate { s.outcome.interimHeads = interim }
            s.outcome.head = report.head
            s.outcome.report = report
            if let url = report.redirectedURL { s.outcome.hopURL = url }
        }
        var end = ExecutionMachine.AttemptEnd(error: report.error?.code, status: report.head?.status ?? 0)
        if case .stream(_, let stream) = plan.body {
            stream.attemptEnded(local.token)  // a sequence's producer stops feeding this attempt
            if stream.hasStarted { end.canReplayBody = false }
        }
        if report.error == nil, let status = report.head?.status, [429, 503].contains(status) || status == 408 {
            end.retryAfter = report.head?.fields[.retryAfter].flatMap(retryAfterSeconds)
        }
        let attempt = local.number
        let step: ExecutionMachine.Step = lock.withLock { _ in
            end.deliveredBody = streamedBytes > 0
            current = nil
            return machine.attemptEnded(attempt: attempt, end, now: monotonicSeconds())
        }
        perform(step, report: report)
    }

    // MARK: - Delivery

    /// Queues an event; returns true when the caller must schedule a drain on the callback
    /// queue (none is scheduled, and no thread blocked in executeAndWait() delivers inline).
    /// Called with `lock` held.
    private func enqueue(_ event: ExecutionEvent) -> Bool {
        events.append(event)
        wakeSleepers()  // an inline waiter delivers it
        guard !scheduled, inlineWaiters == 0 else { return false }
        scheduled = true
        return true
    }

    /// Wakes every thread blocked in waitForCompletion() to look again. Called with `lock`
    /// held.
    private func wakeSleepers() {
        guard !sleepers.isEmpty else { return }
        for sleeper in sleepers { sleeper.signal() }
        sleepers.removeAll()
    }

    private func drainFromQueue() {
        let claimed = lock.withLock { _ in
            scheduled = false
            return claimDrain()
        }
        if claimed { drainClaimed() }
    }

    /// Makes the calling thread the one that drains, unless one already does. Called with
    /// `lock` held.
    private func claimDrain() -> Bool {
        guard !draining else { return false }
        draining = true
        drainer = currentThreadID()
        return true
    }

    /// Delivers queued events one batch at a time, on the thread that claimed the drain; only
    /// one thread drains at a time, which keeps events in order even on a concurrent queue.
    private func drainClaimed() {
        while true {
            let batch: [ExecutionEvent] = lock.withLock { _ in
                guard !events.isEmpty else {
                    draining = false
                    drainer = 0
                    wakeSleepers()  // an inline waiter may drain now
                    return []
                }
                defer { events.removeAll() }
                return events
            }
            if batch.isEmpty { return }
            for event in batch { deliver(event) }
        }
    }

    /// Blocks until the completion has been delivered. With `inline`, the calling thread (which
    /// is on the callback queue, so the queue cannot run the events itself) delivers them.
    func waitForCompletion(inline: Bool) {
        enum Next { case done, drain, sleep }
        let wake = DispatchSemaphore(value: 0)
        if inline { lock.withLock { _ in inlineWaiters += 1 } }
        defer { if inline { lock.withLock { _ in inlineWaiters -= 1 } } }
        while true {
            let next: Next = lock.withLock { _ -> Next in
                if completionDelivered { return .done }
                if inline, !events.isEmpty, claimDrain() { return .drain }
                sleepers.append(wake)  // signalled once, by the next wakeSleepers()
                return .sleep
            }
            switch next {
            case .done: return
            case .drain: drainClaimed()
            case .sleep: wake.wait()
            }
        }
    }

    /// True when the calling thread is delivering this execution's events right now.
    var isDeliveringOnCurrentThread: Bool {
        lock.withLock { _ in draining && drainer == currentThreadID() }
    }

    private func deliver(_ event: ExecutionEvent) {
        switch event {
        case .progress(let state, let percent, let isFinal):
            let listener: Request.Listener? = lock.withLock { _ -> Request.Listener? in
                if machine.cancelRequested && !isFinal { return nil }
                return handlers?.listener
            }
            if let listener, !listener(request, state, percent) { cancel() }
        case .bytes(let progress):
            let (handler, streams) = lock.withLock { _ in
                (handlers?.progressHandler, handlers?.progressStreams ?? [])
            }
            handler?(request, progress)
            for stream in streams { stream.yield(progress) }
        case .completion:
            let (completions, streams) = lock.withLock { _ in
                (handlers?.completions ?? [], handlers?.progressStreams ?? [])
            }
            for stream in streams { stream.finish() }
            for completion in completions { completion(request) }
            let (waiting, result) = lock.withLock { _ in
                handlers = nil  // release what the closures captured
                completionDelivered = true
                wakeSleepers()
                defer { continuations = Waiters() }
                return (continuations, resultStorage)
            }
            if let result { waiting.resume(with: result) }
        }
    }

    // MARK: - Helpers

    /// Runs `body` (a caller's closure, on the engine thread) unless the execution was
    /// silenced by clearDelegatesAndCancel(), which waits for one in progress; `fallback`
    /// otherwise.
    func whileHandlersLive<T>(_ fallback: T, _ body: () -> T) -> T {
        handlerGate?.lock()
        defer { handlerGate?.unlock() }
        guard lock.withLock({ _ in !silenced }) else { return fallback }
        return body()
    }

    /// Calls a handler on the engine thread unless the execution was silenced; `true` without
    /// one.
    func callOnEngineThread<H>(_ pick: (Handlers) -> H?, _ call: (H) -> Bool) -> Bool {
        guard let gate = handlerGate else { return true }
        gate.lock()
        defer { gate.unlock() }
        guard let handler = lock.withLock({ _ in handlers }).flatMap(pick) else { return true }
        return call(handler)
    }

    func cancelledError() -> TernError {
        TernError(
            code: .cancelled, message: "request to \(plan.host) cancelled", host: plan.host,
            phase: .caller)
    }

    var logMetadata: Logger.Metadata { ["tern.request": "\(plan.requestID)"] }

    private func logSummary(_ result: Result<Response, TernError>, attempts: Int) {
        var line = "\(plan.method) \(plan.urlString): "
        switch result {
        case .success(let response):
            func t(_ v: TimeInterval?) -> String {
                guard let v else { return "-" }
                return "\((v * 1000).rounded() / 1000) s"
            }
            let timings = response.timings
            line += "status \(response.statusCode), \(response.bytesReceived) body bytes, "
            line += "connection \(response.isReused ? "reused" : "new"), "
            line += "connected \(t(timings.connected)), first byte \(t(timings.headers)), "
            line += "total \(t(timings.total)), attempts \(attempts)"
        case .failure(let error):
            line += "failed after \(attempts) attempt(s): \(error.code.name) \(error.message)"
        }
        plan.engine.logger.debug("\(line)", metadata: logMetadata)
    }
}

/// `Retry-After` as seconds from now: a number of seconds, or an HTTP date.
func retryAfterSeconds(_ value: String) -> Double? {
    let trimmed = value.trimmingWhitespace()
    if let seconds = UInt64(trimmed) { return Double(seconds) }
    guard let date = Cookie.parseDate(trimmed) else { return nil }
    return max(0, date.timeIntervalSinceNow)
}

/// Same scheme, host and port (default ports filled in).
func sameOrigin(_ a: URL, _ b: URL) -> Bool {
    HostName.scheme(of: a) == HostName.scheme(of: b)
        && HostName.canonical(of: a) == HostName.canonical(of: b)
        && HostName.port(of: a) == HostName.port(of: b)
}

/// Seconds on a monotonic clock. Read directly: `DispatchTime.now()` went through
/// libdispatch's `dispatch_time` (about 100 instructions and a dozen cache lines of its own),
/// twice per request.
func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// Converts seconds to whole milliseconds for the engine (rounded up; 0 for none).
func milliseconds(_ seconds: TimeInterval) -> UInt64 {
    guard seconds > 0, seconds.isFinite else { return 0 }
    return UInt64(min((seconds * 1000).rounded(.up), 1e15))
}
