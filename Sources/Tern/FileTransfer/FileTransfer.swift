// FileTransfer: one upload or download of Mesibo's signed file transfer, as the app and its
// FileTransferHandler see it.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// One signed upload or download run by a ``FileTransferManager``.
///
/// It carries Mesibo's transfer fields (``isUpload``, ``priority``, ``mid``, ``source``,
/// ``ts``, ``origin``, ``path``, ``url``) and, as it runs, its ``progress``, ``status``,
/// ``resultURL`` and ``error``. The manager's ``FileTransferManager/onProgress`` and
/// ``FileTransferManager/onResult`` see every change, on the manager's callback queue; an
/// async caller awaits ``result()``.
public final class FileTransfer: Sendable {
    /// Where the message of a transfer came from.
    public enum Origin: Int, Sendable {
        /// A message that arrived in real time.
        case realtime = 0
        /// A message read back from the database.
        case database = 1
    }

    /// Where a transfer stands.
    public enum Status: Sendable, Hashable {
        /// Waiting to be offered to the handler or to run.
        case waiting
        /// The handler deferred it; it will be offered again.
        case deferred
        /// The handler took it over.
        case handledByApp
        /// The built-in transfer runs it (through the manager's ``RequestQueue``).
        case running
        /// It ended well: ``FileTransfer/resultURL`` is set.
        case succeeded
        /// It failed: ``FileTransfer/error`` says why.
        case failed
        /// It was stopped or cancelled.
        case cancelled

        /// Whether the transfer is over.
        public var isFinished: Bool { self == .succeeded || self == .failed || self == .cancelled }
    }

    /// `true` for an upload, `false` for a download.
    public let isUpload: Bool
    /// How soon it runs among the manager's transfers.
    public let priority: RequestQueue.Priority
    /// The message id the file belongs to.
    public let mid: UInt64
    /// The app's code for who asked for the transfer.
    public let source: Int
    /// The message's timestamp (epoch seconds), for the app's use.
    public let ts: Int64
    /// Whether the message came in real time or from the database.
    public let origin: Origin
    /// The local file: the one uploaded, or where the download goes.
    public let path: String
    /// The upload server's URL, or the file's URL for a download.
    public let url: URL
    /// For an upload: whether the download URL the server makes must require a signature.
    public let signed: Bool

    struct State {
        var status: Status = .waiting
        var progress = 0
        var resultURL: URL?
        var error: TernError?
        var request: Request?
        var offers = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    let manager: FileTransferManager
    let state = Locked(State())

    init(
        manager: FileTransferManager, isUpload: Bool, path: String, url: URL,
        options: FileTransferManager.Options
    ) {
        self.manager = manager
        self.isUpload = isUpload
        self.path = path
        self.url = url
        self.priority = options.priority
        self.mid = options.mid
        self.source = options.source
        self.ts = options.ts
        self.origin = options.origin
        self.signed = options.signed
    }

    /// The percent done, 0 to 100.
    public var progress: Int { state.withLock { $0.progress } }
    /// Where the transfer stands.
    public var status: Status { state.withLock { $0.status } }
    /// For a finished upload, the URL the server gave the file; for a download, the file's URL.
    public var resultURL: URL? { state.withLock { $0.resultURL } }
    /// Why the transfer failed, when it did.
    public var error: TernError? { state.withLock { $0.error } }
    /// How many times the transfer was offered to the handler.
    public var offerCount: Int { state.withLock { $0.offers } }

    /// Reports progress of a transfer the handler took over (0 to 100).
    public func setProgress(_ percent: Int) {
        manager.reportProgress(self, percent: max(0, min(100, percent)))
    }

    /// Reports the end of a transfer the handler took over.
    ///
    /// - Parameters:
    ///   - ok: Whether it succeeded.
    ///   - url: For an upload, the URL the file got.
    public func setResult(ok: Bool, url: URL?) {
        if ok {
            manager.finish(self, status: .succeeded, url: url ?? (isUpload ? nil : self.url))
        } else {
            manager.finish(
                self, status: .failed, error: TernError(code: .callbackAborted,
                message: "the file transfer handler reported a failure", phase: .caller))
        }
    }

    /// Hands a transfer the handler took over back to the built-in transfer.
    ///
    /// - Parameters:
    ///   - url: Where to upload to, or the file to download; `nil` for the transfer's own
    ///     (then signed as usual).
    ///   - post: For an upload, the form fields to send with the file instead of the signed
    ///     ones (the server answers the same JSON); ignored for a download.
    public func start(url: URL? = nil, post: [String: String]? = nil) {
        manager.runBuiltIn(self, url: url, post: post)
    }

    /// Gives a transfer up: with `retry`, it is deferred and offered again later; without, it
    /// ends as cancelled.
    /// A running built-in request is cancelled either way.
    public func cancel(retry: Bool) {
        manager.cancel(self, retry: retry)
    }

    /// Aborts the transfer now: a running request is cancelled, a handler that took it over
    /// gets ``FileTransferHandler/onStop(_:)``. The transfer ends as cancelled.
    public func stop() {
        manager.stop(self)
    }

    /// Waits until the transfer is over.
    ///
    /// - Returns: ``resultURL``.
    /// - Throws: ``error`` (``TernError/cancelled`` when it was stopped or cancelled).
    @discardableResult
    public func result() async throws(TernError) -> URL? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { s -> Bool in
                if s.status.isFinished { return true }
                s.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
        let (status, url, error) = state.withLock { ($0.status, $0.resultURL, $0.error) }
        if status == .succeeded { return url }
        throw error ?? .cancelled
    }
}
