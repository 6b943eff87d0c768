// A request's place in a RequestQueue: its rank, its byte counts for the queue's progress, and
// the hand-over of callers that wait for it (response(), executeAndWait()) to its execution.

/// One request in a ``RequestQueue``, from `add` until its execution ends.
final class QueueEntry: @unchecked Sendable {
    let queue: RequestQueue
    let request: Request
    let priority: Int
    /// Rank among equal priorities: back insertions count up from 0, front ones down from -1
    /// (set under the queue's lock when the entry joins the line).
    var order: Int64 = 0
    /// "host:port", for the per-host limit.
    let host: String
    /// The entry whose download size this HEAD request learns (accurate progress), if any.
    let sizeOf: QueueEntry?

    // Guarded by the queue's lock.
    var isRunning = false
    /// Waits for its HEAD probe (accurate progress) before it may start.
    var awaitsSize = false
    var bytesSent: UInt64 = 0
    var bytesToSend: UInt64?
    var bytesReceived: UInt64 = 0
    var bytesExpected: UInt64?

    // Guarded by `lock`: the execution once the entry leaves the queue, and who waits for it.
    private let lock = ConditionLock()
    private var execution: Execution?
    private var continuations: [CheckedContinuation<Response, any Error>] = []

    init(
        queue: RequestQueue, request: Request, priority: Int, host: String,
        sizeOf: QueueEntry? = nil
    ) {
        self.queue = queue
        self.request = request
        self.priority = priority
        self.host = host
        self.sizeOf = sizeOf
    }

    /// True when this entry goes before `other`: higher priority, then lower order.
    func precedes(_ other: QueueEntry) -> Bool {
        priority != other.priority ? priority > other.priority : order < other.order
    }

    /// Hands the execution to everyone waiting for it (called once, before it starts).
    func resolve(_ run: Execution) {
        let waiting: [CheckedContinuation<Response, any Error>] = lock.withLock {
            execution = run
            lock.broadcast()
            defer { continuations = [] }
            return continuations
        }
        for continuation in waiting { run.addContinuation(continuation) }
    }

    /// Resumes `continuation` with the result of the execution this entry leads to.
    func addContinuation(_ continuation: CheckedContinuation<Response, any Error>) {
        let run: Execution? = lock.withLock {
            if let execution { return execution }
            continuations.append(continuation)
            return nil
        }
        run?.addContinuation(continuation)
    }

    /// Blocks until the entry leaves the queue; returns the execution it led to.
    func waitForExecution() -> Execution {
        lock.lock()
        defer { lock.unlock() }
        while true {
            if let execution { return execution }
            lock.wait()
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
