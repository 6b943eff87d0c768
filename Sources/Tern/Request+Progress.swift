// Byte progress: the progress handler and how often it runs.

public import Foundation

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

    /// The shortest time between two ``progressHandler`` events, in seconds (default 0.1; 0
    /// reports every step of the engine, one per buffer at most).
    public var progressInterval: TimeInterval {
        get { setting(\.progressInterval) }
        set { set(\.progressInterval, newValue) }
    }
}
