// FileTransferManager: Mesibo's signed file transfer on top of Request and RequestQueue —
// signed multipart uploads streamed from disk, signed downloads with resume, the app's
// FileTransferHandler with deferral and stop, and each server's max_file_size remembered on
// disk.

public import Dispatch
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs signed uploads and downloads (Mesibo's file transfer protocol) through a
/// ``RequestQueue``, by priority.
///
/// ```swift
/// let files = FileTransferManager(configuration: .init(
///     uploadURL: URL(string: "https://files.example.com/upload")!,
///     uid: "123", accessToken: token, stateFolder: appSupport + "/transfers"))
/// let upload = files.upload(file: "/tmp/photo.jpg", options: .init(signed: true))
/// let url = try await upload.result()          // the URL the server gave the file
/// let download = files.download(url: url!, to: "/tmp/copy.jpg")
/// try await download.result()
/// ```
///
/// An upload is a `POST` of a multipart form with the fields `v` (1), `op` (`upload`), `uid`,
/// `device`, `ts`, `signed`, `sig` (``FileTransferSignature/upload(uid:timestamp:accessToken:)``)
/// and the file, streamed from disk; the server answers
/// `{"result": true, "url": "...", "max_file_size": N}` or `{"result": false}`. The
/// `max_file_size` is remembered per upload URL (in ``Configuration-swift.struct/stateFolder``,
/// across restarts), and a larger upload then fails at once with
/// ``TernError/Code/fileTooLarge`` without sending anything. A download appends
/// `?v=1&uid=&ts=&sig=` to the file's URL and resumes an interrupted file.
///
/// With a ``handler`` installed, every transfer is first offered to the app
/// (``FileTransferHandler``). Progress and results reach ``onProgress`` and ``onResult`` on the
/// configuration's ``Configuration-swift.struct/callbackQueue``.
public final class FileTransferManager: Sendable {
    /// The client platform sent as the `device` field.
    public struct Device: RawRepresentable, Hashable, Sendable {
        /// The protocol's number.
        public var rawValue: Int
        /// Wraps a number.
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// Android (1).
        public static let android = Device(rawValue: 1)
        /// iOS (2).
        public static let iOS = Device(rawValue: 2)
        /// JavaScript (5).
        public static let javascript = Device(rawValue: 5)
    }

    /// The manager's settings.
    public struct Configuration: Sendable {
        /// Where uploads are posted.
        public var uploadURL: URL
        /// The user's id, sent and signed with every transfer.
        public var uid: String
        /// The user's access token, which signs transfers (never sent).
        public var accessToken: String
        /// The `device` field (default ``Device/iOS``).
        public var device: Device
        /// A folder the app gives for the manager's small state (each server's
        /// `max_file_size`); `nil` keeps it in memory only.
        public var stateFolder: String?
        /// The queue transfers run through (default: one running 2 at a time).
        public var queue: RequestQueue
        /// Where ``FileTransferHandler`` calls, ``onProgress`` and ``onResult`` run.
        public var callbackQueue: DispatchQueue
        /// How long a deferred transfer waits before it is offered again (default 5 s).
        public var retryInterval: TimeInterval
        /// The engine that runs the requests (default ``Engine/shared``).
        public var engine: Engine?

        /// Creates a configuration; see the properties for the defaults.
        public init(
            uploadURL: URL, uid: String, accessToken: String, device: Device = .iOS,
            stateFolder: String? = nil, queue: RequestQueue? = nil,
            callbackQueue: DispatchQueue? = nil, retryInterval: TimeInterval = 5,
            engine: Engine? = nil
        ) {
            self.uploadURL = uploadURL
            self.uid = uid
            self.accessToken = accessToken
            self.device = device
            self.stateFolder = stateFolder
            self.queue = queue ?? RequestQueue(configuration: .init(maxSimultaneous: 2))
            self.callbackQueue = callbackQueue ?? DispatchQueue(label: "tern.file-transfer")
            self.retryInterval = retryInterval
            self.engine = engine
        }
    }

    /// The fields of a transfer besides its file and URL (Mesibo's FileTransfer fields).
    public struct Options: Sendable {
        /// How soon it runs (default normal).
        public var priority: RequestQueue.Priority
        /// The message id.
        public var mid: UInt64
        /// Who asked for it, in the app's terms.
        public var source: Int
        /// The message's timestamp.
        public var ts: Int64
        /// Real time or database.
        public var origin: FileTransfer.Origin
        /// For an upload: the download URL must require a signature (`signed=1`).
        public var signed: Bool

        /// Creates options; every field defaults to zero, normal or false.
        public init(
            priority: RequestQueue.Priority = .normal, mid: UInt64 = 0, source: Int = 0,
            ts: Int64 = 0, origin: FileTransfer.Origin = .realtime, signed: Bool = false
        ) {
            self.priority = priority
            self.mid = mid
            self.source = source
            self.ts = ts
            self.origin = origin
            self.signed = signed
        }
    }

    /// Receives a transfer whose progress changed, and its percent done at that moment.
    public typealias ProgressHandler = @Sendable (FileTransfer, Int) -> Void
    /// Receives a transfer that ended (read its status, result URL and error).
    public typealias ResultHandler = @Sendable (FileTransfer) -> Void

    struct State {
        var handler: (any FileTransferHandler)?
        var onProgress: ProgressHandler?
        var onResult: ResultHandler?
        var maxFileSizes: [String: UInt64] = [:]
        var loaded = false
    }

    /// The settings the manager was made with.
    public let configuration: Configuration
    let state = Locked(State())

    /// Creates a manager.
    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// The app's own transfer code; `nil` (the default) runs every transfer built in.
    public var handler: (any FileTransferHandler)? {
        get { state.withLock { $0.handler } }
        set { state.withLock { $0.handler = newValue } }
    }

    /// Whether a ``handler`` is installed (Mesibo's `isFileTransferEnabled`).
    public var isFileTransferEnabled: Bool { handler != nil }

    /// Called on the callback queue when a transfer's progress changes.
    public var onProgress: ProgressHandler? {
        get { state.withLock { $0.onProgress } }
        set { state.withLock { $0.onProgress = newValue } }
    }

    /// Called on the callback queue once when a transfer ends.
    public var onResult: ResultHandler? {
        get { state.withLock { $0.onResult } }
        set { state.withLock { $0.onResult = newValue } }
    }

    /// The largest upload the server at `uploadURL` said it accepts, if it said so.
    public func maxFileSize(for uploadURL: URL) -> UInt64? {
        loadLimits()
        return state.withLock { $0.maxFileSizes[uploadURL.absoluteString] }
    }

    /// Uploads a file to the configuration's upload URL.
    ///
    /// - Parameters:
    ///   - path: The file, streamed from disk.
    ///   - options: The transfer's fields.
    /// - Returns: The transfer, already on its way; await ``FileTransfer/result()`` or watch
    ///   ``onResult``.
    @discardableResult
    public func upload(file path: String, options: Options = Options()) -> FileTransfer {
        let transfer = FileTransfer(
            manager: self, isUpload: true, path: path, url: configuration.uploadURL,
            options: options)
        begin(transfer)
        return transfer
    }

    /// Downloads a file with a signed URL into `path`, resuming a partial file left by an
    /// earlier attempt.
    ///
    /// - Parameters:
    ///   - url: The file's URL, as an upload's result gave it.
    ///   - path: Where the file goes.
    ///   - options: The transfer's fields.
    /// - Returns: The transfer, already on its way.
    @discardableResult
    public func download(url: URL, to path: String, options: Options = Options()) -> FileTransfer {
        let transfer = FileTransfer(
            manager: self, isUpload: false, path: path, url: url, options: options)
        begin(transfer)
        return transfer
    }

    // MARK: - Running

    private func begin(_ transfer: FileTransfer) {
        configuration.callbackQueue.async { self.offer(transfer) }
    }

    /// Offers a waiting or deferred transfer to the handler, or runs it. On the callback queue.
    private func offer(_ transfer: FileTransfer) {
        let proceed = transfer.state.withLock { s -> Bool in
            guard s.status == .waiting || s.status == .deferred else { return false }
            s.status = .waiting
            return true
        }
        guard proceed else { return }
        if transfer.isUpload, let refusal = sizeRefusal(transfer.path, server: transfer.url) {
            finish(transfer, status: .failed, error: refusal)
            return
        }
        guard let handler else {
            runBuiltIn(transfer, url: nil, post: nil)
            return
        }
        // Unless stop() came in meanwhile, from another thread.
        let offered = transfer.state.withLock { s -> Bool in
            guard s.status == .waiting else { return false }
            s.offers += 1
            s.status = .handledByApp
            return true
        }
        guard offered else { return }
        if !handler.onStart(transfer) {
            deferTransfer(transfer)
        }
    }

    func cancel(_ transfer: FileTransfer, retry: Bool) {
        let request = transfer.state.withLock { s -> Request? in
            defer { s.request = nil }
            return s.status.isFinished ? nil : s.request
        }
        if retry {
            deferTransfer(transfer)
        } else {
            finish(transfer, status: .cancelled, error: .cancelled)
        }
        request?.cancel()
    }

    func deferTransfer(_ transfer: FileTransfer) {
        let deferred = transfer.state.withLock { s -> Bool in
            guard s.status == .handledByApp || s.status == .waiting || s.status == .running
            else { return false }
            s.status = .deferred
            s.request = nil
            return true
        }
        guard deferred else { return }
        configuration.callbackQueue.asyncAfter(
            deadline: .now() + configuration.retryInterval
        ) { self.offer(transfer) }
    }

    func stop(_ transfer: FileTransfer) {
        let (previous, request) = transfer.state.withLock { s in (s.status, s.request) }
        guard !previous.isFinished else { return }
        request?.cancel()
        finish(transfer, status: .cancelled, error: .cancelled)
        if previous == .handledByApp, let handler {
            configuration.callbackQueue.async { handler.onStop(transfer) }
        }
    }

    func reportProgress(_ transfer: FileTransfer, percent: Int) {
        let changed = transfer.state.withLock { s -> Bool in
            guard !s.status.isFinished, s.progress != percent else { return false }
            s.progress = percent
            return true
        }
        guard changed else { return }
        configuration.callbackQueue.async {
            if let onProgress = self.onProgress { onProgress(transfer, percent) }
        }
    }

    func finish(
        _ transfer: FileTransfer, status: FileTransfer.Status, url: URL? = nil,
        error: TernError? = nil
    ) {
        let waiters = transfer.state.withLock { s -> [CheckedContinuation<Void, Never>]? in
            guard !s.status.isFinished else { return nil }
            s.status = status
            s.resultURL = url
            s.error = error
            s.request = nil
            if status == .succeeded { s.progress = 100 }
            defer { s.waiters = [] }
            return s.waiters
        }
        guard let waiters else { return }
        configuration.callbackQueue.async {
            if let onResult = self.onResult { onResult(transfer) }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Runs the transfer with the library's own requests; `url` and `post` as the handler's
    /// ``FileTransfer/start(url:post:)`` gives them.
    func runBuiltIn(_ transfer: FileTransfer, url: URL?, post: [String: String]?) {
        let request: Request
        do {
            request =
                transfer.isUpload
                ? try uploadRequest(transfer, url: url ?? transfer.url, post: post)
                : try downloadRequest(transfer, url: url, signed: url == nil)
        } catch {
            finish(transfer, status: .failed, error: error)
            return
        }
        let started = transfer.state.withLock { s -> Bool in
            guard s.status == .waiting || s.status == .handledByApp else { return false }
            s.status = .running
            s.request = request
            return true
        }
        guard started else { return }
        request.callbackQueue = configuration.callbackQueue
        if let engine = configuration.engine { request.engine = engine }
        request.listener = { [weak transfer] _, state, percent in
            guard let transfer else { return false }
            let upload = transfer.isUpload
            if percent >= 0, (state == .upload) == upload {
                transfer.manager.reportProgress(transfer, percent: percent)
            }
            return !transfer.status.isFinished
        }
        request.onCompletion { request in
            self.complete(transfer, request: request, server: url ?? transfer.url)
        }
        configuration.queue.add(request, priority: transfer.priority)
    }

    private func uploadRequest(
        _ transfer: FileTransfer, url: URL, post: [String: String]?
    ) throws(TernError) -> Request {
        var form = MultipartForm()
        if let post {
            for key in post.keys.sorted() { form.addField(key, value: post[key]!) }
        } else {
            let ts = Int64(Date().timeIntervalSince1970.rounded(.down))
            guard
                let sig = FileTransferSignature.upload(
                    uid: configuration.uid, timestamp: ts, accessToken: configuration.accessToken)
            else {
                throw TernError(
                    code: .invalidArgument, message: "file transfer needs a uid and an access token",
                    phase: .setup)
            }
            form.addField("v", value: "1")
            form.addField("op", value: "upload")
            form.addField("uid", value: configuration.uid)
            form.addField("device", value: String(configuration.device.rawValue))
            form.addField("ts", value: String(ts))
            form.addField("signed", value: transfer.signed ? "1" : "0")
            form.addField("sig", value: sig)
        }
        form.addFile(at: transfer.path, name: "file")
        let request = Request(url: url, method: .post)
        request.requestBody = .multipart(form)
        return request
    }

    private func downloadRequest(
        _ transfer: FileTransfer, url: URL?, signed: Bool
    ) throws(TernError) -> Request {
        var target = url ?? transfer.url
        if signed {
            let ts = Int64(Date().timeIntervalSince1970.rounded(.down))
            guard
                let query = FileTransferSignature.downloadQuery(
                    url: target.absoluteString, uid: configuration.uid, timestamp: ts,
                    accessToken: configuration.accessToken)
            else {
                throw TernError(
                    code: .invalidArgument, message: "file transfer needs a uid and an access token",
                    phase: .setup)
            }
            // After any query the URL has (the signature covers the URL without it).
            do {
                target = try appendingQuery(query, to: target)
            } catch {
                throw error as? TernError ?? TernError(code: .badURL, phase: .setup)
            }
        }
        let request = Request(url: target)
        request.downloadFile = transfer.path
        request.resume = true
        return request
    }

    /// Ends a built-in transfer from its request. On the callback queue.
    private func complete(_ transfer: FileTransfer, request: Request, server: URL) {
        // A request the transfer has since let go of (cancelled to retry, or stopped).
        guard transfer.state.withLock({ $0.request === request }) else { return }
        let response: Response
        switch request.result {
        case .success(let r)?: response = r
        case .failure(let error)?:
            finish(transfer, status: error.code == .cancelled ? .cancelled : .failed, error: error)
            return
        case nil:
            finish(transfer, status: .failed, error: .cancelled)
            return
        }
        let status = response.statusCode
        if !transfer.isUpload {
            if status == 200 || status == 206 {
                finish(transfer, status: .succeeded, url: transfer.url)
            } else {
                finish(transfer, status: .failed, error: httpError(status, server: request.url))
            }
            return
        }
        let answer = try? JSONDecoder().decode(UploadAnswer.self, from: response.data)
        if let limit = answer?.max_file_size { remember(limit, for: server) }
        if status == 200, let answer, answer.result, let text = answer.url,
            let fileURL = URL(string: text)
        {
            finish(transfer, status: .succeeded, url: fileURL)
        } else if status == 413, let limit = answer?.max_file_size {
            finish(
                transfer, status: .failed,
                error: TernError(
                    code: .fileTooLarge,
                    message: "\(server) accepts files of at most \(limit) bytes (max_file_size)",
                    host: server.host, phase: .upload))
        } else if status != 200 {
            finish(transfer, status: .failed, error: httpError(status, server: server))
        } else {
            let why = answer == nil ? "an answer that is not the protocol's JSON" : "result false"
            finish(
                transfer, status: .failed,
                error: TernError(
                    code: .protocolError, message: "upload to \(server): \(why)",
                    host: server.host, phase: .body))
        }
    }

    private func httpError(_ status: Int, server: URL) -> TernError {
        var plain = URLComponents(url: server, resolvingAgainstBaseURL: true)
        plain?.query = nil
        let name = plain?.url?.absoluteString ?? server.host ?? "the file server"
        if status == 401 || status == 403 {
            return TernError(
                code: .authenticationFailed,
                message: "\(name) refused the transfer's signature (HTTP \(status))",
                host: server.host, phase: .authentication)
        }
        return TernError(
            code: .protocolError, message: "\(name) answered HTTP \(status)", host: server.host,
            phase: .headers)
    }

    private struct UploadAnswer: Decodable {
        var result: Bool
        var url: String?
        // The protocol's own name.
        // swiftlint:disable:next identifier_name
        var max_file_size: UInt64?
    }

    // MARK: - max_file_size, remembered per upload URL

    private var limitsPath: String? {
        configuration.stateFolder.map { $0 + "/file-transfer-limits.json" }
    }

    private func loadLimits() {
        let needed = state.withLock { s -> Bool in
            defer { s.loaded = true }
            return !s.loaded
        }
        guard needed, let limitsPath, let data = try? readFile(at: limitsPath),
            let stored = try? JSONDecoder().decode([String: UInt64].self, from: data)
        else { return }
        state.withLock { s in s.maxFileSizes.merge(stored) { current, _ in current } }
    }

    private func remember(_ limit: UInt64, for server: URL) {
        loadLimits()
        let snapshot = state.withLock { s -> [String: UInt64]? in
            guard s.maxFileSizes[server.absoluteString] != limit else { return nil }
            s.maxFileSizes[server.absoluteString] = limit
            return s.maxFileSizes
        }
        guard let snapshot, let limitsPath, let folder = configuration.stateFolder else { return }
        try? FileManager.default.createDirectory(
            atPath: folder, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        if let data = try? encoder.encode(snapshot) {
            try? writeAtomically(data, to: limitsPath, permissions: 0o600)
        }
    }

    /// The error for an upload larger than the server's remembered limit, else `nil`.
    private func sizeRefusal(_ path: String, server: URL) -> TernError? {
        guard let limit = maxFileSize(for: server) else { return nil }
        var info = stat()
        guard stat(path, &info) == 0, UInt64(info.st_size) > limit else { return nil }
        return TernError(
            code: .fileTooLarge,
            message: "upload of \(path) (\(info.st_size) bytes) refused before sending: \(server) "
                + "accepts at most \(limit) bytes (max_file_size)",
            host: server.host, phase: .setup)
    }
}
