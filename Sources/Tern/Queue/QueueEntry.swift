// A request's place in a RequestQueue: its rank, its byte counts for the queue's progress, and
// the hand-over of callers that wait for it (response(), executeAndWait()) to its execution.

import Dispatch
import Synchronization

/// One request in a ``RequestQueue``, from `add` until its execution ends.
final class QueueEntry: @unchecked Sendable {
    let queue: RequestQueue
    let request: Request
    let priority: Int
    /// The entry whose download size this HEAD request learns (accurate progress), if any.
    let sizeOf: QueueEntry?

    // Guarded by the queue's lock.
    /// Rank among equal priorities: back insertions count up from 0, front ones down from -1.
    var order: Int64 = 0
    /// "host:port", worked out when a per-host limit first needs it.
    var host: String?
    /// The host this entry counts against while running (per-host limit), if any.
    var countedHost: String?
    var isRunning = false
    /// Waits for its HEAD probe (accurate progress) before it may start.
    var awaitsSize = false
    /// Guarded by the request's storage lock: cancel() was called while no execution ran.
    var cancelRequested = false

    // Byte counts: written by the engine's thread as the request moves (no lock: a progress
    // callback costs a relaxed store), read and settled under the queue's lock. UInt64.max
    // stands for a size not known.
    private let sent = Atomic<UInt64>(0)
    private let toSend = Atomic<UInt64>(.max)
    private let received = Atomic<UInt64>(0)
    private let expected = Atomic<UInt64>(.max)

    var bytesSent: UInt64 {
        get { sent.load(ordering: .relaxed) }
        set { sent.store(newValue, ordering: .relaxed) }
    }
    var bytesToSend: UInt64? {
        get { Self.known(toSend.load(ordering: .relaxed)) }
        set { toSend.store(newValue ?? .max, ordering: .relaxed) }
    }
    var bytesReceived: UInt64 {
        get { received.load(ordering: .relaxed) }
        set { received.store(newValue, ordering: .relaxed) }
    }
    var bytesExpected: UInt64? {
        get { Self.known(expected.load(ordering: .relaxed)) }
        set { expected.store(newValue ?? .max, ordering: .relaxed) }
    }

    private static func known(_ value: UInt64) -> UInt64? { value == .max ? nil : value }

    /// Records the bytes moved so far (the engine's thread; a retry may start again from 0),
    /// and the size when it was not known.
    func moved(upload: Bool, done: UInt64, total: UInt64) {
        if upload {
            if done > bytesSent { bytesSent = done }
        } else {
            if done > bytesReceived { bytesReceived = done }
        }
        if total > 0 { learnSize(total, upload: upload) }
    }

    /// Sets the size unless one is known already.
    func learnSize(_ size: UInt64, upload: Bool) {
        if upload {
            _ = toSend.compareExchange(expected: .max, desired: size, ordering: .relaxed)
        } else {
            _ = expected.compareExchange(expected: .max, desired: size, ordering: .relaxed)
        }
    }

    // Guarded by the request's storage lock, the lock under which the request leaves the queue:
    // who waits for the execution the entry leads to. (The entry keeps no reference to that
    // execution: the execution holds the entry as its observer.)
    var continuations: [ResponseContinuation] = []
    var waiters: [Turn] = []

    init(queue: RequestQueue, request: Request, priority: Int, sizeOf: QueueEntry? = nil) {
        self.queue = queue
        self.request = request
        self.priority = priority
        self.sizeOf = sizeOf
    }

    /// True when this entry goes before `other`: higher priority, then lower order.
    func precedes(_ other: QueueEntry) -> Bool {
        priority != other.priority ? priority > other.priority : order < other.order
    }

    /// A thread blocked in executeAndWait() until the request leaves the queue.
    final class Turn: @unchecked Sendable {
        private let arrived = DispatchSemaphore(value: 0)
        // Written before `arrived` is signalled, read after waiting for it.
        private var run: Execution?

        func wait() -> Execution? {
            arrived.wait()
            return run
        }

        func hand(_ run: Execution) {
            self.run = run
            arrived.signal()
        }
    }

    /// Takes who waits for the execution; the request's storage lock is held.
    func takeWaiting(for run: Execution) -> Handover {
        defer {
            continuations = []
            waiters = []
        }
        return Handover(run: run, continuations: continuations, waiters: waiters)
    }

    /// Callers that waited for a queued request, handed to its execution outside the lock.
    struct Handover {
        let run: Execution
        let continuations: [ResponseContinuation]
        let waiters: [Turn]

        func complete() {
            for continuation in continuations { run.addContinuation(continuation) }
            for waiter in waiters { waiter.hand(run) }
        }
    }

    /// The request was cancelled while waiting for its turn.
    func cancelWhileWaiting() {
        queue.cancelWaiting(self)
    }
}

extension QueueEntry: ExecutionObserver {
    func executionReceivedHead(_ execution: Execution, contentLength: Int64?) {
        queue.entryReceivedHead(self, contentLength: contentLength)
    }

    func executionProgressed(_ execution: Execution, upload: Bool, done: UInt64, total: UInt64) {
        queue.entryProgressed(self, upload: upload, done: done, total: total)
    }

    func executionFinished(_ execution: Execution, result: Result<Response, TernError>) {
        queue.entryFinished(self, result: result)
    }
}
