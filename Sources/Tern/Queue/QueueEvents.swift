// Delivers a queue's events in order on its DispatchQueue, to a handler and to async streams.

import Dispatch

/// Events wait here until one drain at a time hands them out on `queue`, so they arrive in the
/// order they were sent even on a concurrent queue.
final class EventPump<Event: Sendable>: @unchecked Sendable {
    let queue: DispatchQueue

    // Guarded by `lock`.
    private let lock = ConditionLock()
    private var handlerStorage: (@Sendable (Event) -> Void)?
    private var streams: [UInt64: AsyncStream<Event>.Continuation] = [:]
    private var nextStream: UInt64 = 0
    private var waiting: [Event] = []
    private var scheduled = false

    init(queue: DispatchQueue) {
        self.queue = queue
    }

    deinit {
        for stream in streams.values { stream.finish() }
    }

    var handler: (@Sendable (Event) -> Void)? {
        get { lock.withLock { handlerStorage } }
        set { lock.withLock { handlerStorage = newValue } }
    }

    /// True when someone listens: senders skip making events otherwise.
    var hasConsumers: Bool { lock.withLock { handlerStorage != nil || !streams.isEmpty } }

    /// A new stream of the events sent from now on.
    func stream() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .unbounded)
        let id: UInt64 = lock.withLock {
            nextStream += 1
            streams[nextStream] = continuation
            return nextStream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.lock.withLock { self?.streams.removeValue(forKey: id) }
        }
        return stream
    }

    func send(_ events: [Event]) {
        guard !events.isEmpty else { return }
        let schedule: Bool = lock.withLock {
            waiting.append(contentsOf: events)
            guard !scheduled else { return false }
            scheduled = true
            return true
        }
        if schedule { queue.async { self.drain() } }
    }

    private func drain() {
        while true {
            let (batch, handler, targets): ([Event], (@Sendable (Event) -> Void)?, [AsyncStream<Event>.Continuation]) =
                lock.withLock {
                    defer { waiting.removeAll() }
                    if waiting.isEmpty { scheduled = false }
                    return (waiting, handlerStorage, Array(streams.values))
                }
            if batch.isEmpty { return }
            for event in batch {
                handler?(event)
                for stream in targets { stream.yield(event) }
            }
        }
    }
}
