// Running a request: execute(), executeAndWait(), response() and the two cancels.

import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension Request {
    /// Starts the request and returns at once.
    ///
    /// The ``listener`` and completion handlers run later on ``callbackQueue``. A request
    /// that is already running, or waiting in a ``RequestQueue``, is left alone; a finished
    /// one starts over.
    ///
    /// - Returns: `true` when this call started the request, `false` when it was already
    ///   running or waiting in a queue.
    @discardableResult
    public func execute() -> Bool {
        if case .started = admit(waiting: .none) { return true }
        return false
    }

    /// Runs the request and blocks until it is done and its completion handlers have run.
    ///
    /// If the request is already running, this waits for that execution; if it waits in a
    /// ``RequestQueue``, this waits for its turn and then for its execution.
    ///
    /// - Note: Calling this on ``callbackQueue`` itself (for example on the main thread with
    ///   the default `.main` queue) does not deadlock: the waiting thread is the one the
    ///   queue would have used, so it delivers the listener and completion events itself,
    ///   in order, while it waits, and they still run "on the callback queue". Called from any
    ///   other thread, the events go to ``callbackQueue`` as usual and this call returns once
    ///   the completion handlers have run there, so that queue must not be blocked waiting
    ///   for this thread. "On the queue" means running a block of that very queue (a queue
    ///   that merely targets it is not recognised) or, for the main queue, being on the main
    ///   thread. Calling this from the engine's own thread (inside a ``dataHandler`` or
    ///   ``headHandler``) or from this request's own listener would deadlock, and throws
    ///   ``TernError/Code/invalidArgument`` instead.
    ///
    /// - Returns: The response.
    /// - Throws: ``TernError`` when the request failed or was cancelled.
    @discardableResult
    public func executeAndWait() throws(TernError) -> Response {
        let engine = self.engine
        if engine.isLoopThread {
            throw TernError(
                code: .invalidArgument,
                message: "executeAndWait() called on the engine's thread would deadlock",
                phase: .setup)
        }
        let run: Execution
        let turn = QueueEntry.Turn()
        switch admit(waiting: .turn(turn)) {
        case .started(let started), .joined(let started): run = started
        case .queued:
            guard let started = turn.wait() else {
                throw TernError(code: .invalidArgument, message: "queued request has no execution")
            }
            run = started
        }
        if run.isDeliveringOnCurrentThread {
            throw TernError(
                code: .invalidArgument,
                message: "executeAndWait() called from the request's own listener would deadlock",
                phase: .setup)
        }
        run.waitForCompletion(inline: CallbackQueue.isCurrent(run.plan.queue))
        guard let result = run.result else {
            throw TernError(code: .invalidArgument, message: "request has no result")
        }
        return try result.get()
    }

    /// Runs the request and returns its response once done.
    ///
    /// If the request is already running, this awaits that execution; if it waits in a
    /// ``RequestQueue``, this awaits its turn and then its execution. Cancelling the calling
    /// task cancels the request, which then throws ``TernError/cancelled``. The listener and
    /// completion handlers still run on ``callbackQueue``; this call does not wait for them.
    ///
    /// The call starts the request on the caller's own executor (`nonisolated(nonsending)`):
    /// an actor or a task running on ``Engine/executor`` does not hop to the global executor
    /// first.
    ///
    /// - Returns: The response, whatever its status.
    /// - Throws: ``TernError`` when the request failed or was cancelled.
    public nonisolated(nonsending) func response() async throws -> Response {
        // The standard library's executor-inheriting form of withTaskCancellationHandler (the
        // Swift 5 entry point, kept for ABI): the same cancellation record, without the two
        // executor switches of the isolation-taking form (on entry and on return; each looks
        // the task's executor preference up under its status lock), about 1,100 instructions
        // per request (bench/HISTORY-swift-path.md).
        try await _unsafeInheritExecutor_withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation {
                (continuation: ResponseContinuation) in
                switch self.admit(waiting: .continuation(continuation)) {
                case .started(let run), .joined(let run): run.addContinuation(continuation)
                case .queued: break  // its entry hands the continuation to the execution
                }
                if Task.isCancelled { self.cancel() }
            }
        } onCancel: {
            self.cancel()
        }
    }

    /// Cancels the request from any thread.
    ///
    /// The request fails with ``TernError/cancelled`` unless it already completed; its
    /// listener gets one final -1 event and its completion handlers run. Does nothing when the
    /// request is not running.
    public func cancel() {
        cancelTarget().cancel()
    }

    /// What a cancel acts on, taken in one step under the storage lock; acting on it is the
    /// second step, after the lock is released.
    struct CancelTarget: Sendable {
        let run: Execution?
        let entry: QueueEntry?

        func cancel() {
            if let run {
                run.cancel()
            } else if let entry {
                entry.cancelWhileWaiting()
            }
        }
    }

    /// The first step of ``cancel()``. A queue may have picked the entry already and start it
    /// before the second step, where the queue no longer finds it among the waiting:
    /// startQueued() sees the mark set here instead.
    func cancelTarget() -> CancelTarget {
        storage.withLock { s in
            if s.run == nil { s.queueEntry?.cancelRequested = true }
            return CancelTarget(run: s.run, entry: s.queueEntry)
        }
    }

    /// Cancels the request and drops every closure it holds (ASIHTTPRequest's
    /// `clearDelegatesAndCancel`).
    ///
    /// After this returns, no listener, completion, head, data or authentication handler of
    /// this request starts again, including events already queued, and the closures (with whatever they
    /// captured) are released. A handler running on the engine thread at that moment is
    /// waited for. ``executeAndWait()`` and ``response()`` still return (with
    /// ``TernError/cancelled``).
    public func clearDelegatesAndCancel() {
        let run: Execution? = storage.withLock { s in
            s.settings.listener = nil
            s.settings.completions = []
            s.settings.headHandler = nil
            s.settings.dataHandler = nil
            s.settings.authenticationHandler = nil
            return s.run
        }
        run?.silence()
        run?.cancel()
        if run == nil { cancel() }  // waiting in a queue: it ends now, with no handlers left
    }

    /// How a call that runs the request finds it.
    enum Admission {
        /// This call started a new execution.
        case started(Execution)
        /// An execution was already running.
        case joined(Execution)
        /// The request waits in a ``RequestQueue``: its entry hands out the execution.
        case queued(QueueEntry)
    }

    /// Who waits for a request that may be queued.
    enum Waiting {
        case none
        case continuation(ResponseContinuation)
        /// A thread blocked until the queue hands the request its execution.
        case turn(QueueEntry.Turn)
    }

    /// The running execution, the queue entry of a waiting request (which then takes
    /// `waiting`), or a new execution started from the current settings.
    func admit(waiting: Waiting) -> Admission {
        let admission: Admission = storage.withLock { s in
            if let run = s.run { return .joined(run) }
            if let entry = s.queueEntry {
                switch waiting {
                case .none: break
                case .continuation(let continuation): entry.continuations.append(continuation)
                case .turn(let turn): entry.waiters.append(turn)
                }
                return .queued(entry)
            }
            return .started(Self.makeExecution(&s, request: self, observer: nil))
        }
        if case .started(let run) = admission { run.start() }
        return admission
    }

    /// How ``startQueued(_:budget:beforeStart:)`` went.
    enum QueuedStart {
        case started(Execution)
        /// It had left the queue already (ended by whoever took it out).
        case left
        /// `cancel()` came after the queue picked it and before it started: it ended unstarted,
        /// with this error, as a request cancelled while waiting does.
        case cancelled(TernError)
    }

    /// Starts a request its queue picked, unless it stopped waiting meanwhile; `beforeStart`
    /// runs first (the queue's "started" event goes before any the execution causes).
    func startQueued(_ entry: QueueEntry, budget: BandwidthBudget?, beforeStart: () -> Void) -> QueuedStart {
        var cancelled = false
        let handover: QueueEntry.Handover? = storage.withLock { s in
            guard s.queueEntry === entry, s.run == nil else { return nil }
            s.queueEntry = nil
            // The mark is set under this lock by a cancel() that found no execution.
            cancelled = entry.cancelRequested
            let run = Self.makeExecution(
                &s, request: self, observer: cancelled ? nil : entry, budget: budget)
            return entry.takeWaiting(for: run)
        }
        guard let handover else { return .left }
        handover.complete()
        if cancelled {
            let error = TernError.cancelledInQueue(self)
            handover.run.fail(beforeStart: error)
            return .cancelled(error)
        }
        beforeStart()
        handover.run.start()
        return .started(handover.run)
    }

    /// Ends a request that leaves its queue before its turn (refused, cancelled): its
    /// listener gets -1 and its completions run, as for any failure. False when it had
    /// already left.
    @discardableResult
    func failQueued(_ entry: QueueEntry, _ error: TernError) -> Bool {
        let handover: QueueEntry.Handover? = storage.withLock { s in
            guard s.queueEntry === entry, s.run == nil else { return nil }
            s.queueEntry = nil
            return entry.takeWaiting(for: Self.makeExecution(&s, request: self, observer: nil))
        }
        guard let handover else { return false }
        handover.complete()
        handover.run.fail(beforeStart: error)
        return true
    }

    /// Makes the execution of the current settings and records it as running; `budget`
    /// (a queue's) applies when the request has no budget of its own.
    private static func makeExecution(
        _ s: inout Storage, request: Request, observer: (any ExecutionObserver)?,
        budget: BandwidthBudget? = nil
    ) -> Execution {
        // Read in place: a copy of the settings costs as much as building the plan.
        let plan = Plan(settings: s.settings, requestID: request.id, queueBudget: budget)
        let handlers = Handlers(taking: &s.settings)
        // Moved into the execution, which keeps it inline: not copied.
        let run = Execution(request: request, plan: consume plan, handlers: handlers, observer: observer)
        s.run = run
        if s.outcome.startDate == nil {
            // The first execution: the outcome is still empty, two fields say it started
            // (where a new Outcome was built, moved in and the empty one destroyed); the effective
            // URL is the original one until a redirect sets its own.
            s.outcome.startDate = Date()
            s.outcome.originalURL = run.plan.url
        } else {
            s.outcome = Outcome(startDate: Date(), originalURL: run.plan.url)
        }
        return run
    }
}

/// Tells whether the calling thread is running a given queue's work.
enum CallbackQueue {
    // Each queue asked about gets a unique number as a queue-specific value; getSpecific() on
    // the current thread finds it only while that queue (or one targeting it) runs. Numbers
    // are never reused, unlike object addresses.
    private static let key = DispatchSpecificKey<UInt64>()
    private static let nextToken = Atomic<UInt64>(1)

    static func isCurrent(_ queue: DispatchQueue) -> Bool {
        let isMain = queue.label == DispatchQueue.main.label
        // Blocking the main thread blocks the main queue even outside its blocks (where no
        // specific is visible). DispatchQueue.main is a new wrapper per access on Linux, hence
        // the label.
        if isMain && isMainThread() { return true }
        // Global queues take no specifics, and blocking one of their threads blocks nothing.
        if queue.label.hasPrefix("com.apple.root.") { return false }
        var token = queue.getSpecific(key: key)
        if token == nil {
            let fresh = nextToken.add(1, ordering: .relaxed).oldValue
            queue.setSpecific(key: key, value: fresh)
            token = queue.getSpecific(key: key)  // whichever of two racing writers won
        }
        return DispatchQueue.getSpecific(key: key) == token
    }
}

/// True on the process's main thread (Foundation's `Thread.isMainThread`).
func isMainThread() -> Bool {
    #if canImport(Darwin)
    return pthread_main_np() != 0
    #else
    // The main thread's id is the process id. Without gettid (glibc before 2.30), false:
    // executeAndWait then does not detect a wait on the main queue from the main thread.
    guard let gettid = linuxGettid else { return false }
    return gettid() == getpid()
    #endif
}

#if !canImport(Darwin)
/// gettid(), looked up at run time: the Glibc module does not import it (it needs
/// `_GNU_SOURCE`), and glibc has it only since 2.30.
private let linuxGettid: (@convention(c) () -> pid_t)? = {
    guard let symbol = dlsym(nil, "gettid") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) () -> pid_t).self)
}()
#endif
