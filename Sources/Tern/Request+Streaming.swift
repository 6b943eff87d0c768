// A response whose body arrives as an asynchronous sequence, with back-pressure: when the
// consumer falls behind, the engine stops reading that response (TCP slows the server) until
// the consumer catches up, so a large body is processed without buffering it and without
// blocking the engine's thread.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

/// A response whose body is still arriving; see ``Request/streamingResponse()``.
public struct StreamingResponse: Sendable {
    /// The final status.
    public let status: HTTPResponse.Status
    /// The response header fields.
    public let headerFields: HTTPFields
    /// The body, piece by piece (decoded when the request decodes); ends when the response
    /// completes, or throws the ``TernError`` that ended it.
    public let body: Body

    /// The status code, such as 200.
    public var statusCode: Int { status.code }

    /// The pieces of a streamed body, in order.
    public struct Body: AsyncSequence, Sendable {
        public typealias Element = Data
        let pipe: BodyPipe

        public func makeAsyncIterator() -> Iterator { Iterator(pipe: pipe) }

        /// Reads the next piece; `nil` at the end.
        public struct Iterator: AsyncIteratorProtocol {
            let pipe: BodyPipe

            public mutating func next() async throws -> Data? { try await pipe.next() }
        }
    }
}

extension Request {
    /// Runs the request and returns once its response head arrived; the body follows through
    /// ``StreamingResponse/body``.
    ///
    /// ```swift
    /// let response = try await request.streamingResponse()
    /// for try await chunk in response.body {
    ///     try handle.write(contentsOf: chunk)
    /// }
    /// ```
    ///
    /// At most about `bufferLimit` bytes wait for the consumer: beyond it the engine stops
    /// reading this response until the consumer has taken half of them, so memory stays
    /// bounded whatever the body's size and however slow the consumer; other requests of the
    /// engine go on meanwhile. Cancelling the consuming task cancels the request.
    ///
    /// This uses the request's ``dataHandler`` and ``headHandler`` (replacing any set), and
    /// cannot be combined with ``downloadFile``.
    ///
    /// - Parameter bufferLimit: Bytes that may wait for the consumer (default 1 MiB).
    /// - Returns: The status and fields, and the body to read.
    /// - Throws: ``TernError`` when the request failed before its head arrived.
    public func streamingResponse(bufferLimit: Int = 1 << 20) async throws -> StreamingResponse {
        let pipe = BodyPipe(limit: max(1, bufferLimit))
        pipe.request = self
        headHandler = { [pipe] request in
            pipe.noteHead(request)
            return true
        }
        dataHandler = { [pipe] data in pipe.push(data) }
        onCompletion { [pipe] request in pipe.finish(request) }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                pipe.awaitHead(continuation)
                execute()
                // A task cancelled before this point ran onCancel while nothing was running.
                if Task.isCancelled { self.cancel() }
            }
        } onCancel: {
            self.cancel()
        }
    }
}

/// Between the engine's thread (push, finish) and the consumer (next): the waiting pieces and
/// whether reading is paused. Guarded by `lock`.
final class BodyPipe: @unchecked Sendable {
    private let lock = ConditionLock()
    private let limit: Int
    weak var request: Request?
    private var pieces: [Data] = []
    private var first = 0
    private var buffered = 0
    private var paused = false
    private var ended: Result<Void, TernError>?
    private var consumerGone = false
    private var waiter: CheckedContinuation<Data?, any Error>?
    private var headWaiter: CheckedContinuation<StreamingResponse, any Error>?
    private var head: (HTTPResponse.Status, HTTPFields)?
    private var mostBuffered = 0
    /// The most bytes that ever waited, for tests (read under the lock, so it may be read
    /// while the engine's thread pushes).
    var highWater: Int { lock.withLock { mostBuffered } }
    /// For tests: runs on the engine's thread between a pause decision and telling the engine,
    /// where a preempted thread would let the consumer's resume overtake it. Guarded by `lock`.
    private var pauseDecidedHook: (@Sendable () -> Void)?

    func setPauseDecidedHook(_ hook: (@Sendable () -> Void)?) {
        lock.withLock { pauseDecidedHook = hook }
    }

    init(limit: Int) {
        self.limit = limit
    }

    /// Serializes the calls that tell the engine whether to read.
    private let pauseSync = ConditionLock()

    /// Tells the engine to read or not, as `paused` says now. The engine keeps the last value it
    /// was given, so the decision is read again inside `pauseSync`: with the decision passed in,
    /// the engine thread could decide "pause", be preempted, the consumer decide and send
    /// "resume", and the stale "pause" land last, leaving reading stopped with nobody to
    /// resume it (seen as a hung stream under ThreadSanitizer's slower scheduling).
    private func syncReceivePaused() {
        pauseSync.withLock {
            let paused = lock.withLock { self.paused }
            request?.storage.withLock { $0.run }?.setReceivePaused(paused)
        }
    }

    func awaitHead(_ continuation: CheckedContinuation<StreamingResponse, any Error>) {
        lock.withLock { headWaiter = continuation }
    }

    /// A hop's head: the final one is the last before the body or the end.
    func noteHead(_ request: Request) {
        let status = request.status ?? HTTPResponse.Status(code: request.statusCode)
        let fields = request.responseHeaders
        lock.withLock { head = (status, fields) }
    }

    /// Hands the head to the caller once the body starts (or the response ends).
    private func releaseHeadLocked() -> (CheckedContinuation<StreamingResponse, any Error>, StreamingResponse)? {
        guard let waiter = headWaiter, let head else { return nil }
        headWaiter = nil
        return (waiter, StreamingResponse(status: head.0, headerFields: head.1, body: .init(pipe: self)))
    }

    /// A piece from the engine's thread: queued, and reading paused past the limit. False
    /// stops the request (the consumer went away).
    func push(_ data: Data) -> Bool {
        var pause = false
        var gone = false
        var hook: (@Sendable () -> Void)?
        let (release, resume): ((CheckedContinuation<StreamingResponse, any Error>, StreamingResponse)?, CheckedContinuation<Data?, any Error>?) = lock.withLock {
            if consumerGone {
                gone = true
                return (nil, nil)
            }
            let release = releaseHeadLocked()
            if let waiter {
                self.waiter = nil
                return (release, waiter)
            }
            pieces.append(data)
            buffered += data.count
            mostBuffered = max(mostBuffered, buffered)
            if buffered >= limit, !paused {
                paused = true
                pause = true
                hook = pauseDecidedHook
            }
            return (release, nil)
        }
        if gone { return false }
        if pause {
            hook?()
            syncReceivePaused()
        }
        release.map { $0.0.resume(returning: $0.1) }
        resume?.resume(returning: data)
        return true
    }

    /// The end of the response: the rest of the pieces, then the end or the error.
    func finish(_ request: Request) {
        let result: Result<Void, TernError> = request.error.map { .failure($0) } ?? .success(())
        let (release, resume, failHead): ((CheckedContinuation<StreamingResponse, any Error>, StreamingResponse)?, CheckedContinuation<Data?, any Error>?, CheckedContinuation<StreamingResponse, any Error>?) = lock.withLock {
            ended = result
            var failHead: CheckedContinuation<StreamingResponse, any Error>?
            var release: (CheckedContinuation<StreamingResponse, any Error>, StreamingResponse)?
            if headWaiter != nil {
                if case .failure = result {
                    failHead = headWaiter  // no body came: the call itself fails
                    headWaiter = nil
                } else {
                    if head == nil {
                        head = (request.status ?? HTTPResponse.Status(code: request.statusCode),
                                request.responseHeaders)
                    }
                    release = releaseHeadLocked()
                }
            }
            let waiting = pieces.count == first ? waiter : nil
            if waiting != nil { waiter = nil }
            return (release, waiting, failHead)
        }
        if let failHead, case .failure(let error) = result { failHead.resume(throwing: error) }
        release.map { $0.0.resume(returning: $0.1) }
        if let resume {
            switch result {
            case .success: resume.resume(returning: nil)
            case .failure(let error): resume.resume(throwing: error)
            }
        }
    }

    /// The consumer's next piece; resumes reading once half the limit was taken.
    func next() async throws -> Data? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Data?, any Error>) in
                var resumeReading = false
                let ready: Result<Data?, TernError>? = lock.withLock {
                    if first < pieces.count {
                        let piece = pieces[first]
                        first += 1
                        buffered -= piece.count
                        if first == pieces.count {
                            pieces.removeAll(keepingCapacity: true)
                            first = 0
                        }
                        if paused, buffered <= limit / 2 {
                            paused = false
                            resumeReading = true
                        }
                        return .success(piece)
                    }
                    if let ended {
                        switch ended {
                        case .success: return .success(nil)
                        case .failure(let error): return .failure(error)
                        }
                    }
                    waiter = continuation
                    return nil
                }
                if resumeReading { syncReceivePaused() }
                if let ready { continuation.resume(with: ready.mapError { $0 as any Error }) }
            }
        } onCancel: {
            lock.withLock { consumerGone = true }
            request?.cancel()
        }
    }
}
