// RequestQueue: runs requests a few at a time, in priority order, with pause, cancel-all,
// queue events and aggregate progress (Mesibo's HttpQueue, ORA's priorities, ASINetworkQueue).

public import Dispatch
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// Runs requests at most ``Configuration-swift.struct/maxSimultaneous`` at a time and keeps
/// the rest waiting, highest ``Priority-swift.struct`` first.
///
/// ```swift
/// let queue = RequestQueue(maxSimultaneous: 4)
/// for url in urls {
///     let request = Request(url: url)
///     request.downloadFile = "/tmp/\(url.lastPathComponent)"
///     queue.add(request)
/// }
/// for await event in queue.events {
///     if case .allFinished = event { break }
/// }
/// ```
///
/// A request added to a queue runs like one started with ``Request/execute()``: its listener,
/// progress and completion handlers run on its own ``Request/callbackQueue``, and
/// ``Request/response()`` or ``Request/executeAndWait()`` wait for its turn and then for its
/// result. ``Request/cancel()`` takes a waiting request out of the queue (it ends as
/// cancelled). The queue's own ``Event``s go to ``eventHandler`` and ``events``, in order, on
/// the configuration's ``Configuration-swift.struct/callbackQueue``.
///
/// A queue stays alive while it holds requests, like a `DispatchQueue`. Several queues and
/// plain requests may share one ``Engine``; the engine's per-origin connection limit still
/// applies beneath every queue.
public final class RequestQueue: Sendable {
    /// How soon a request runs: a higher priority starts before any waiting lower one; equal
    /// priorities start in the order they were added (front insertions first).
    public struct Priority: RawRepresentable, Comparable, Hashable, Sendable {
        /// The rank; higher runs first.
        public var rawValue: Int

        /// Wraps a rank.
        public init(rawValue: Int) {
            self.rawValue = rawValue
        }

        /// Below normal: runs when nothing else waits.
        public static let low = Priority(rawValue: -100)
        /// The default.
        public static let normal = Priority(rawValue: 0)
        /// Before normal requests.
        public static let high = Priority(rawValue: 100)
        /// Before everything else (ORA's Immediate).
        public static let immediate = Priority(rawValue: 1000)

        public static func < (a: Priority, b: Priority) -> Bool { a.rawValue < b.rawValue }
    }

    /// Where a request joins the requests of its priority.
    public enum Position: Sendable {
        /// After every waiting request of the same priority (the default).
        case back
        /// Before every waiting request of the same priority (Mesibo's front insertion).
        case front
    }

    /// How ``progress`` counts (ASIHTTPRequest's `showAccurateProgress`).
    public enum ProgressMode: Sendable {
        /// Each request is one unit: the percent moves as requests finish.
        case simple
        /// Bytes: the sizes of request bodies are known when added; the size of each GET's
        /// response is learned first with a HEAD request (run through the queue at the front,
        /// at ``Priority-swift.struct/immediate``) unless its head arrives earlier.
        case accurate
    }

    /// What a queue allows and how it reports.
    public struct Configuration: Sendable {
        /// Requests running at once (Mesibo's `maxSimultaneous`; default 4, at least 1).
        public var maxSimultaneous: Int
        /// Requests waiting at once (Mesibo's `maxPending`): one more is refused with
        /// ``TernError/Code/queueFull`` without being sent (default `Int.max`).
        public var maxPending: Int
        /// Requests running at once to one host and port (default 0: no limit beyond
        /// ``maxSimultaneous``).
        public var maxSimultaneousPerHost: Int
        /// Cancels every other request when one fails (ASINetworkQueue's
        /// `shouldCancelAllRequestsOnFailure`; default `false`). A failure is a thrown error:
        /// a response with a 4xx or 5xx status is not one, and a cancelled request is not one.
        public var cancelsAllOnFailure: Bool
        /// How ``RequestQueue/progress`` counts (default ``ProgressMode/simple``).
        public var progressMode: ProgressMode
        /// Where ``RequestQueue/eventHandler`` runs (default: a serial queue of the
        /// queue's own). Events arrive in order, one at a time, even on a concurrent queue.
        public var callbackQueue: DispatchQueue
        /// The shortest time between two ``Event/progress(_:)`` events, in seconds (default
        /// 0.1); the last one (at 100) always arrives.
        public var progressInterval: TimeInterval
        /// A bandwidth budget shared by the queue's requests (ASIHTTPRequest's throttle for one
        /// queue), applied to each request that has no ``Request/bandwidthBudget`` of its own,
        /// besides its engine's budget (default `nil`: none).
        public var bandwidthBudget: BandwidthBudget?

        /// Creates a configuration; every parameter has the default described on its property.
        public init(
            maxSimultaneous: Int = 4, maxPending: Int = .max, maxSimultaneousPerHost: Int = 0,
            cancelsAllOnFailure: Bool = false, progressMode: ProgressMode = .simple,
            callbackQueue: DispatchQueue? = nil, progressInterval: TimeInterval = 0.1,
            bandwidthBudget: BandwidthBudget? = nil
        ) {
            self.bandwidthBudget = bandwidthBudget
            self.maxSimultaneous = maxSimultaneous
            self.maxPending = maxPending
            self.maxSimultaneousPerHost = maxSimultaneousPerHost
            self.cancelsAllOnFailure = cancelsAllOnFailure
            self.progressMode = progressMode
            self.callbackQueue = callbackQueue ?? DispatchQueue(label: "tern.request-queue")
            self.progressInterval = progressInterval
        }
    }

    /// Something that happened to the queue or one of its requests.
    public enum Event: Sendable {
        /// The request left the waiting line and was submitted.
        case started(Request)
        /// The request's final response head arrived (after redirects and challenges).
        case receivedHead(Request)
        /// The request completed with a response, whatever its status.
        case finished(Request)
        /// The request failed or was cancelled (then the error's code is
        /// ``TernError/Code/cancelled``); a request refused by a full queue also ends here.
        case failed(Request, TernError)
        /// The aggregate progress moved (at most once per ``Configuration-swift.struct/progressInterval``).
        case progress(Progress)
        /// Nothing runs or waits any more (ASINetworkQueue's `queueDidFinish`): sent once per
        /// batch of requests, after the last request's event.
        case allFinished
    }

    /// Receives the queue's events on ``Configuration-swift.struct/callbackQueue``.
    public typealias EventHandler = @Sendable (Event) -> Void

    /// Byte and request counts over the queue's current batch: the requests added since it
    /// was last idle.
    public struct Progress: Sendable, Hashable {
        /// Requests of the batch, finished or not (HEAD requests of accurate progress excluded).
        public var requestsTotal: Int
        /// Requests of the batch that ended, whatever the outcome.
        public var requestsFinished: Int
        /// Request body bytes sent.
        public var bytesSent: UInt64
        /// Request body bytes to send, over the bodies whose size is known.
        public var bytesToSend: UInt64
        /// Response body bytes received.
        public var bytesReceived: UInt64
        /// Response body bytes expected, over the responses whose size is known.
        public var bytesExpected: UInt64
        /// 0 to 100: requests finished (simple mode) or bytes moved (accurate mode). Never goes
        /// backwards within a batch, and is 100 only once the batch is done.
        public var percent: Int
    }

    let state: Locked<QueueState>
    let eventPump: EventPump<Event>

    /// Creates a queue.
    ///
    /// - Parameter configuration: Limits and reporting (see ``Configuration-swift.struct``).
    public init(configuration: Configuration = Configuration()) {
        state = Locked(QueueState(configuration: configuration))
        eventPump = EventPump(queue: configuration.callbackQueue)
    }

    /// Creates a queue that runs at most `maxSimultaneous` requests and keeps at most
    /// `maxPending` waiting (Mesibo's `HttpQueue(maxSimultaneous, maxPending)`).
    public convenience init(maxSimultaneous: Int, maxPending: Int = .max) {
        self.init(configuration: Configuration(maxSimultaneous: maxSimultaneous, maxPending: maxPending))
    }

    /// The queue's limits and reporting. Changed limits apply to the next request to start;
    /// ``Configuration-swift.struct/callbackQueue`` is fixed when the queue is created.
    public var configuration: Configuration {
        get { state.withLock { $0.configuration } }
        set {
            state.withLock {
                $0.configuration = newValue
                $0.configuration.callbackQueue = eventPump.queue
            }
            pump()
        }
    }

    /// Receives the queue's events (see ``Event``); `nil` (the default) receives none.
    public var eventHandler: EventHandler? {
        get { eventPump.handler }
        set { eventPump.handler = newValue }
    }

    /// The queue's events as an asynchronous sequence, from now on; it ends when the queue is
    /// released. Each access makes a new sequence.
    public var events: AsyncStream<Event> { eventPump.stream() }

    /// Requests running now.
    public var runningCount: Int { state.withLock { $0.running.count } }

    /// Requests waiting for their turn.
    public var pendingCount: Int { state.withLock { $0.pending.count } }

    /// True between ``pause(cancellingRunning:)`` and ``resume()``.
    public var isPaused: Bool { state.withLock { $0.isPaused } }

    /// The aggregate progress of the current batch (see ``Progress``).
    public var progress: Progress { state.withLock { $0.progressNow() } }

    // MARK: - Adding

    /// Adds a request to wait for its turn.
    ///
    /// Returns `false` without running the request when it is already running or waiting,
    /// and `false` when ``Configuration-swift.struct/maxPending`` requests already wait: then
    /// the request ends at once with ``TernError/Code/queueFull`` (its listener gets -1, its
    /// completions run, ``Event/failed(_:_:)`` is sent) and nothing is sent.
    ///
    /// - Parameters:
    ///   - request: The request; its own settings (engine, callbacks, retries) apply.
    ///   - priority: How soon it runs (default ``Priority-swift.struct/normal``).
    ///   - position: Before or after the waiting requests of the same priority.
    /// - Returns: `true` when the request joined the queue.
    @discardableResult
    public func add(_ request: Request, priority: Priority = .normal, at position: Position = .back)
        -> Bool
    {
        enqueue(request, priority: priority.rawValue, position: position, continuation: nil)
    }

    /// Adds a request, then returns its response once it ran.
    ///
    /// Cancelling the calling task cancels the request (waiting or running).
    ///
    /// - Parameters:
    ///   - request: The request.
    ///   - priority: How soon it runs.
    ///   - position: Before or after the waiting requests of the same priority.
    /// - Returns: The response, whatever its status.
    /// - Throws: ``TernError``: ``TernError/Code/queueFull`` when the queue was full,
    ///   ``TernError/Code/busy`` when the request was already running or waiting, or the
    ///   request's own failure.
    public func response(
        for request: Request, priority: Priority = .normal, at position: Position = .back
    ) async throws -> Response {
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation {
                (continuation: ResponseContinuation) in
                enqueue(request, priority: priority.rawValue, position: position, continuation: continuation)
                if Task.isCancelled { request.cancel() }
            }
        } onCancel: {
            request.cancel()
        }
    }

    // MARK: - Control

    /// Stops starting requests. Waiting requests wait; running ones finish, or are cancelled
    /// when `cancellingRunning` is true (ORA's pause when an app leaves the foreground).
    public func pause(cancellingRunning: Bool = false) {
        let running: [QueueEntry] = state.withLock { s in
            s.isPaused = true
            return cancellingRunning ? Array(s.running.values) : []
        }
        for entry in running { entry.request.cancel() }
    }

    /// Starts requests again after ``pause(cancellingRunning:)``.
    public func resume() {
        state.withLock { $0.isPaused = false }
        pump()
    }

    /// Cancels every waiting and running request: each ends with ``TernError/cancelled``, its
    /// listener getting -1 exactly once.
    public func cancelAll() {
        cancelEverything()
    }

    /// Blocks the calling thread until nothing runs or waits. Do not call it on the
    /// configuration's callback queue or a request's, when its events must run for the queue to
    /// empty.
    public func waitUntilAllRequestsAreFinished() {
        let done = DispatchSemaphore(value: 0)
        let idle: Bool = state.withLock { s in
            if s.isIdle { return true }
            s.idleWaiters.append { done.signal() }
            return false
        }
        if !idle { done.wait() }
    }

    /// Returns once nothing runs or waits.
    public func allRequestsFinished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle: Bool = state.withLock { s in
                if s.isIdle { return true }
                s.idleWaiters.append { continuation.resume() }
                return false
            }
            if idle { continuation.resume() }
        }
    }
}

extension TernError {
    static func cancelledInQueue(_ request: Request) -> TernError {
        let host = request.url.host ?? ""
        return TernError(
            code: .cancelled, message: "request to \(host) cancelled while waiting in its queue",
            host: host, phase: .caller)
    }
}
