// Byte progress: the progress handler and how often it runs.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

extension Request {
    /// Receives byte counts on ``callbackQueue``: the request and its ``Progress`` (the
    /// direction of the event, bytes sent and to send, bytes received and expected).
    public typealias ProgressHandler = @Sendable (Request, Progress) -> Void

    /// Receives byte counts as the request body goes out and the response comes in, on
    /// ``callbackQueue``, at most once per ``progressInterval`` (AeroGear's and
    /// ASIHTTPRequest's byte progress, beside the percent ``listener``).
    ///
    /// The last event of a successful request always arrives, before the completion
    /// handlers, with the final counts; ``response()`` returns only after it was delivered.
    /// Events of one request arrive in order, never concurrently.
    ///
    /// ```swift
    /// request.progressHandler = { _, progress in
    ///     print(progress.bytesReceived, "of", progress.bytesExpected ?? 0)
    /// }
    /// ```
    public var progressHandler: ProgressHandler? {
        get { setting(\.progressHandler) }
        set { set(\.progressHandler, newValue) }
    }

    /// The byte counts of the request's next execution as an asynchronous sequence: the same
    /// events as ``progressHandler`` (at most one per ``progressInterval``, the last one
    /// always), ending when that execution completes, before ``response()`` returns.
    ///
    /// Ask for it before the execution starts; each stream follows one execution:
    ///
    /// ```swift
    /// let events = request.progressEvents
    /// async let response = request.response()
    /// for await progress in events {
    ///     print(progress.bytesReceived, "of", progress.bytesExpected ?? 0)
    /// }
    /// let done = try await response
    /// ```
    ///
    /// A consumer that falls behind misses intermediate events (the newest 16 are kept), never
    /// the end of the sequence.
    public var progressEvents: AsyncStream<Progress> {
        let (stream, continuation) = AsyncStream<Progress>.makeStream(
            bufferingPolicy: .bufferingNewest(16))
        storage.withLock { $0.settings.progressStreams.append(continuation) }
        return stream
    }

    /// The shortest time between two ``progressHandler`` events, in seconds (default 0.1; 0
    /// reports every step of the engine, one per buffer at most).
    public var progressInterval: TimeInterval {
        get { setting(\.progressInterval) }
        set { set(\.progressInterval, newValue) }
    }
}
