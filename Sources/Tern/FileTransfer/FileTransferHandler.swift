// FileTransferHandler: an app that takes over file transfers (Mesibo's FileTransferHandler).

/// An app's own file transfer code, installed as ``FileTransferManager/handler``.
///
/// The manager offers each transfer to the handler before running it, on the manager's
/// ``FileTransferManager/Configuration-swift.struct/callbackQueue``:
///
/// - ``onStart(_:)`` returns `true` to take the transfer over: the app then reports
///   ``FileTransfer/setProgress(_:)`` and ``FileTransfer/setResult(ok:url:)``, or hands it back
///   with ``FileTransfer/start(url:post:)`` (the built-in transfer, with the app's own form
///   fields), or gives up with ``FileTransfer/cancel(retry:)``. It returns `false` to defer
///   it: the transfer is offered again later
///   (``FileTransferManager/Configuration-swift.struct/retryInterval``).
/// - ``onStop(_:)`` tells the app to abort a transfer it took over, now
///   (``FileTransfer/stop()`` was called); the transfer has already ended as cancelled.
public protocol FileTransferHandler: AnyObject, Sendable {
    /// Offers a transfer; `true` takes it over, `false` defers it (offered again later).
    func onStart(_ transfer: FileTransfer) -> Bool
    /// Asks the app to abort a transfer it took over, at once.
    func onStop(_ transfer: FileTransfer)
}
