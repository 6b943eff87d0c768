// ExecutionMachine: the life of one execution as a value. It takes what happened (start,
// progress, a head, an attempt's end, a cancel, a retry timer) and answers what to do next
// (submit an attempt, wait, cancel the attempt, finish, deliver an event). It holds no threads,
// sockets, clocks or closures: the Execution feeds it events with the time and carries out its
// answers, so every rule here (retries, Retry-After, the total limit, percent filtering, the
// one final event) is tested without a network (ExecutionMachineTests).

/// The retry, timing and progress rules of one execution.
struct ExecutionMachine: Sendable {
    /// The settings the rules depend on, fixed when the execution starts.
    struct Policy: Sendable, Equatable {
        /// Fresh attempts after the first (``Request/maxRetries``).
        var maxRetries = 0
        /// The delay before the first retry, doubled for each further one.
        var retryDelay: Double = 0
        /// No delay (computed or asked by `Retry-After`) exceeds this.
        var maxRetryDelay: Double = 600
        /// The whole execution's time limit in seconds, 0 for none.
        var totalTimeout: Double = 0
        /// Whether the method may be sent twice (GET, HEAD, PUT, DELETE, OPTIONS, TRACE).
        var idempotent = true
        /// Download bytes between two listener events when coalescing (concatData), else 0.
        var coalesceBytes: UInt64 = 0
    }

    /// Where the execution is.
    enum Phase: Equatable, Sendable {
        case idle
        /// Attempt N is with the engine.
        case attempting(Int)
        /// Attempt N failed; a timer will call ``retryDue(now:)``.
        case waitingToRetry(Int)
        case finished
    }

    /// How an attempt ended, as far as the rules care.
    struct AttemptEnd: Sendable, Equatable {
        /// The engine's error, or `nil` when a response completed.
        var error: TernError.Code?
        /// The final status, 0 when no head arrived.
        var status = 0
        /// What `Retry-After` asked for, in seconds from now.
        var retryAfter: Double?
        /// False when the body cannot be sent again (a stream already read).
        var canReplayBody = true
        /// True when body bytes already went to the caller (a data handler): never repeat them.
        var deliveredBody = false
    }

    /// How the execution ends.
    enum Ending: Equatable, Sendable {
        /// The last attempt's outcome (a response, or its error) is the result.
        case lastAttempt
        case cancelled
        case totalTimedOut
    }

    /// What the Execution does next.
    enum Step: Equatable, Sendable {
        /// Builds and submits attempt N; `timeLeft` bounds it when a total limit is set.
        case submit(attempt: Int, timeLeft: Double?)
        /// Starts a timer that calls ``retryDue(now:)`` after this many seconds.
        case retry(after: Double, attempt: Int)
        /// Cancels the attempt with the engine; its end comes back as an event.
        case cancelAttempt
        case finish(Ending)
        case nothing
    }

    let policy: Policy
    private(set) var phase = Phase.idle
    private(set) var attempts = 0
    private(set) var cancelRequested = false
    private var startedAt = 0.0
    private var lastPercent = (upload: -1, download: -1)
    private var downloadedAtLastEvent: UInt64 = 0
    private var headSeen = false

    init(policy: Policy) {
        self.policy = policy
    }

    var isFinished: Bool { phase == .finished }

    /// The number of the attempt with the engine, if any.
    var currentAttempt: Int? {
        if case .attempting(let n) = phase { return n }
        return nil
    }

    // MARK: - Events

    mutating func start(now: Double) -> Step {
        guard phase == .idle else { return .nothing }
        startedAt = now
        return nextAttempt(now: now)
    }

    mutating func cancel() -> Step {
        switch phase {
        case .finished:
            return .nothing
        case .idle, .waitingToRetry:
            cancelRequested = true
            phase = .finished
            return .finish(.cancelled)
        case .attempting:
            guard !cancelRequested else { return .nothing }
            cancelRequested = true
            return .cancelAttempt
        }
    }

    mutating func retryDue(now: Double) -> Step {
        guard case .waitingToRetry = phase else { return .nothing }
        return nextAttempt(now: now)
    }

    /// A response head arrived for `attempt`.
    mutating func headArrived(attempt: Int) {
        if currentAttempt == attempt { headSeen = true }
    }

    /// Filters engine progress into listener percents: returns the percent to report, or `nil`
    /// to stay quiet. Percents of each direction only rise; a download's 100 is kept for the
    /// end (a retry may follow); with coalescing, downloads report at most once per
    /// ``Policy/coalesceBytes``.
    mutating func progress(attempt: Int, upload: Bool, percent: Int, bytes: UInt64) -> Int? {
        guard percent >= 0, currentAttempt == attempt, !cancelRequested else { return nil }
        let p = upload ? percent : min(percent, 99)
        let last = upload ? lastPercent.upload : lastPercent.download
        guard last < 0 || p > last else { return nil }
        if upload {
            lastPercent.upload = p
            return p
        }
        if policy.coalesceBytes > 0, last >= 0, bytes &- downloadedAtLastEvent < policy.coalesceBytes {
            return nil
        }
        lastPercent.download = p
        downloadedAtLastEvent = bytes
        return p
    }

    /// Attempt `attempt` ended: retry, or finish.
    mutating func attemptEnded(attempt: Int, _ end: AttemptEnd, now: Double) -> Step {
        guard currentAttempt == attempt else { return .nothing }
        if cancelRequested {
            phase = .finished
            return .finish(.lastAttempt)  // the engine's own cancelled error, or what came first
        }
        guard attempts <= policy.maxRetries, isRetryable(end), end.canReplayBody,
            !end.deliveredBody
        else {
            phase = .finished
            return .finish(.lastAttempt)
        }
        let exponent = Double(min(attempts - 1, 60))
        var delay = min(policy.retryDelay * pow2(exponent), policy.maxRetryDelay)
        if let asked = end.retryAfter { delay = max(delay, min(asked, policy.maxRetryDelay)) }
        if policy.totalTimeout > 0, now - startedAt + delay >= policy.totalTimeout {
            phase = .finished
            return .finish(.lastAttempt)
        }
        phase = .waitingToRetry(attempt)
        return .retry(after: delay, attempt: attempt + 1)
    }

    /// The closing listener event: a download's 100 once after success (unless already
    /// reported), else one -1 in the direction the failure happened.
    mutating func finalEvent(success: Bool) -> (upload: Bool, percent: Int)? {
        if success {
            guard lastPercent.download != 100 else { return nil }
            lastPercent.download = 100
            return (false, 100)
        }
        return (!headSeen, -1)
    }

    // MARK: - Rules

    private mutating func nextAttempt(now: Double) -> Step {
        if cancelRequested {
            phase = .finished
            return .finish(.cancelled)
        }
        var timeLeft: Double?
        if policy.totalTimeout > 0 {
            let left = policy.totalTimeout - (now - startedAt)
            if left <= 0 {
                phase = .finished
                return .finish(.totalTimedOut)
            }
            timeLeft = left
        }
        attempts += 1
        headSeen = false
        phase = .attempting(attempts)
        return .submit(attempt: attempts, timeLeft: timeLeft)
    }

    /// Failures before anything reached the server are retried for every method; failures
    /// after it and the retryable statuses only for idempotent methods, except 408 and 429,
    /// whose senders say the request was not processed.
    private func isRetryable(_ end: AttemptEnd) -> Bool {
        if let code = end.error {
            switch code {
            case .connectionRefused, .connectFailed, .connectTimedOut:
                return true
            case .connectionReset, .emptyReply, .ioError, .headersTimedOut, .bodyTimedOut,
                .partialBody:
                return policy.idempotent
            default:
                return false
            }
        }
        switch end.status {
        case 408, 429: return true
        case 500, 502, 503, 504: return policy.idempotent
        default: return false
        }
    }

    private func pow2(_ exponent: Double) -> Double {
        var result = 1.0
        var e = Int(exponent)
        while e > 0 {
            result *= 2
            e -= 1
        }
        return result
    }
}
