// Bodies that arrive over time: an AsyncSequence of byte chunks, consumed by a task into a
// small bounded buffer that the engine's body callback drains on the loop thread. The
// callback never waits: with the buffer empty it answers TERN_READ_WAIT and the producer
// wakes the request (tern_request_resume_send) when it adds bytes; with the buffer full the
// producer stops pulling until the engine has taken some (back-pressure).

extension RequestBody {
    /// Bytes that arrive over time, from an asynchronous sequence of chunks: a socket, a pipe,
    /// a microphone, another response, or anything that can `yield` bytes to an `AsyncStream`.
    ///
    /// Sending starts as soon as the request is under way; a task reads the sequence into a
    /// small buffer (up to about 256 KiB, then it stops pulling until the connection has taken
    /// some) and the engine sends whatever has arrived. Waiting for the next chunk blocks
    /// nothing: the engine's other requests go on, the response is read meanwhile (an early
    /// 413 or 401 ends the upload), and the request's body timeout does not run while the
    /// sequence has nothing to give. The body ends when the sequence does.
    ///
    /// ```swift
    /// let (chunks, feed) = AsyncStream.makeStream(of: [UInt8].self)
    /// request.requestBody = .stream(chunks, contentType: "text/plain")
    /// request.execute()  // starts sending; returns at once
    /// feed.yield(Array("first line\n".utf8))
    /// feed.yield(Array("second line\n".utf8))  // whenever it is ready
    /// feed.finish()  // the end of the body
    /// let response = try await request.response()
    /// ```
    ///
    /// An error thrown by the sequence fails the request with
    /// ``TernError/Code/fileReadFailed``, the error's description in its message. Canceling
    /// the request (or the task awaiting it) stops reading the sequence, as does the end of
    /// the request in any other way.
    ///
    /// A sequence can be read once, like any stream body: a request with this body is not
    /// retried once reading began, cannot follow a 307/308 redirect, and executing the request
    /// again fails with ``TernError/Code/fileReadFailed`` unless a new body is set.
    ///
    /// - Parameters:
    ///   - chunks: The body's bytes, in pieces of any size (`[UInt8]`, `ArraySlice<UInt8>`,
    ///     `Data`, ...); empty pieces are skipped.
    ///   - length: The body's length when known (sent as `Content-Length`; the sequence must
    ///     then yield exactly that many bytes); `nil` sends it chunked.
    ///   - contentType: Its media type, if any.
    public static func stream<Chunks: AsyncSequence & Sendable>(
        _ chunks: Chunks, length: UInt64? = nil, contentType: String? = nil
    ) -> RequestBody where Chunks.Element: Sequence<UInt8> {
        RequestBody(.stream(length: length, SequenceBody(chunks)), contentType: contentType)
    }
}

/// A body fed by a task that reads an AsyncSequence into a bounded buffer.
///
/// Threads: the buffer is guarded by `state`'s lock; the engine reads it on the loop thread,
/// the producer task fills it from wherever it runs. No user code runs under the lock.
final class SequenceBody: BodyStream, @unchecked Sendable {
    /// The producer stops pulling once this much is buffered.
    static let capacity = 256 * 1024

    private struct State {
        /// Buffered chunks from `head` on; `offset` bytes of `chunks[head]` are already sent.
        var chunks: [[UInt8]] = []
        var head = 0
        var offset = 0
        /// Bytes buffered.
        var count = 0
        /// The sequence ended (`failure` set when it threw).
        var ended = false
        var failure: String?
        /// The attempt reading the body; its end stops the producer.
        var reader: UInt64?
        /// That attempt ended: nothing is buffered or read any more.
        var stopped = false
        /// The C request waiting for bytes (its callback answered TERN_READ_WAIT).
        var waiter: CRequest?
        /// The producer, waiting for room in a full buffer.
        var roomWaiter: CheckedContinuation<Void, Never>?
        var producer: Task<Void, Never>?
    }

    private let state = Locked(State())
    private let produce: @Sendable (SequenceBody) async -> Void

    init<Chunks: AsyncSequence & Sendable>(_ chunks: Chunks) where Chunks.Element: Sequence<UInt8> {
        produce = { body in
            do {
                for try await chunk in chunks {
                    let bytes = Array(chunk)
                    if bytes.isEmpty { continue }
                    guard await body.append(bytes) else { return }
                }
                // A sequence may end early because its task was canceled: that is a stop,
                // not the end of the body (stop() ignores the end then).
                if Task.isCancelled { return }
                body.end(failure: nil)
            } catch {
                body.end(failure: "the body sequence failed: \(error)")
            }
        }
    }

    override func readNext(
        into buffer: UnsafeMutableRawBufferPointer, for token: UInt64, waker: CRequest?
    ) throws -> Int {
        var room: CheckedContinuation<Void, Never>?
        let n: Int = try state.withLock { s in
            if s.reader == nil, !s.stopped {
                s.reader = token
                let produce = self.produce
                s.producer = Task { await produce(self) }  // runs once this lock is released
            }
            if let failure = s.failure { throw BodyStreamError(description: failure) }
            guard s.count > 0 else {
                if s.ended { return 0 }
                guard let waker else {
                    throw BodyStreamError(description: "no request to resume the body for")
                }
                s.waiter = waker
                return Self.notReady
            }
            guard let base = buffer.baseAddress else { return 0 }
            var done = 0
            while done < buffer.count, s.head < s.chunks.count {
                let chunk = s.chunks[s.head]
                let take = min(chunk.count - s.offset, buffer.count - done)
                chunk.withUnsafeBytes { source in
                    (base + done).copyMemory(from: source.baseAddress! + s.offset, byteCount: take)
                }
                done += take
                s.offset += take
                if s.offset == chunk.count {
                    s.chunks[s.head] = []
                    s.head += 1
                    s.offset = 0
                }
            }
            s.count -= done
            if s.head == s.chunks.count {
                s.chunks.removeAll(keepingCapacity: true)
                s.head = 0
            } else if s.head >= 64, s.head * 2 >= s.chunks.count {
                s.chunks.removeFirst(s.head)
                s.head = 0
            }
            if s.count < Self.capacity {
                room = s.roomWaiter
                s.roomWaiter = nil
            }
            return done
        }
        room?.resume()
        return n
    }

    /// Adds a chunk, first waiting for room in a full buffer, and wakes a waiting request.
    /// False once the attempt ended: the producer stops.
    private func append(_ bytes: [UInt8]) async -> Bool {
        enum Outcome {
            case stopped, full
            case added(wake: CRequest?)
        }
        while true {
            let outcome: Outcome = state.withLock { s in
                if s.stopped { return .stopped }
                if s.count >= Self.capacity { return .full }
                s.chunks.append(bytes)
                s.count += bytes.count
                defer { s.waiter = nil }
                return .added(wake: s.waiter)
            }
            switch outcome {
            case .stopped:
                return false
            case .added(let waiter):
                if let waiter { resumeSending(waiter) }
                return true
            case .full:
                await withCheckedContinuation { (room: CheckedContinuation<Void, Never>) in
                    let now = state.withLock { s in
                        if s.stopped || s.count < Self.capacity { return true }
                        s.roomWaiter = room
                        return false
                    }
                    if now { room.resume() }
                }
            }
        }
    }

    /// The sequence ended, or threw (`failure`); wakes a waiting request to learn it.
    private func end(failure: String?) {
        let waiter: CRequest? = state.withLock { s in
            guard !s.stopped, !s.ended else { return nil }
            s.ended = true
            s.failure = failure
            defer { s.waiter = nil }
            return s.waiter
        }
        if let waiter { resumeSending(waiter) }
    }

    /// The reading attempt completed: the producer stops (the body cannot be sent again), and
    /// the buffer and the C request it would have woken are let go.
    override func attemptEnded(_ token: UInt64) {
        let (room, producer): (CheckedContinuation<Void, Never>?, Task<Void, Never>?) =
            state.withLock { s in
                guard s.reader == token, !s.stopped else { return (nil, nil) }
                s.stopped = true
                s.waiter = nil
                s.chunks = []
                s.head = 0
                s.offset = 0
                s.count = 0
                defer {
                    s.roomWaiter = nil
                    s.producer = nil
                }
                return (s.roomWaiter, s.producer)
            }
        producer?.cancel()
        room?.resume()
    }
}
