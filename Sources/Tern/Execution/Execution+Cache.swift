// The cache as a stage of an execution: answer from the stored response before any attempt,
// send the conditional fields of a revalidation, and after the exchange store the response,
// serve the stored one on a 304, invalidate after unsafe methods, or fall back to it on failure.

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What the cache lookup of one execution found, and what its attempts sent.
final class CacheStage: @unchecked Sendable {
    let settings: CacheSettings

    // Guarded by `lock`.
    private let lock = ConditionLock()
    private var entryStorage: CacheEntry?
    private var conditionsStorage: HTTPFields?
    private var requestTimeStorage = Date()
    private var writerStorage: CacheWriter?
    private var holdsBackStorage = false

    init(_ settings: CacheSettings) {
        self.settings = settings
    }

    /// The stored response the lookup found (answered, revalidated or kept for a fallback).
    var entry: CacheEntry? { lock.withLock { entryStorage } }

    /// The fields that make the request conditional (a stale entry with validators).
    var conditionalFields: HTTPFields? { lock.withLock { conditionsStorage } }

    /// When the latest attempt went out (RFC 9111's request_time).
    var requestTime: Date { lock.withLock { requestTimeStorage } }

    func attemptStarted() {
        let dropped: CacheWriter? = lock.withLock {
            requestTimeStorage = Date()
            holdsBackStorage = false
            defer { writerStorage = nil }
            return writerStorage
        }
        dropped?.discard()
    }

    /// The writer a streamed body goes into as it arrives (set at the final hop's head).
    var streamWriter: CacheWriter? { lock.withLock { writerStorage } }

    /// Replaces the stream writer (an earlier attempt's is discarded).
    func setStreamWriter(_ writer: CacheWriter?) {
        let old: CacheWriter? = lock.withLock {
            defer { writerStorage = writer }
            return writerStorage
        }
        if let old, old !== writer { old.discard() }
    }

    /// Takes the stream writer out, to commit or discard it.
    func takeStreamWriter() -> CacheWriter? {
        lock.withLock {
            defer { writerStorage = nil }
            return writerStorage
        }
    }

    /// True while a streamed 5xx is held back from the handlers because the stored response
    /// will answer instead (the data handler must not see two bodies).
    var holdsBack: Bool {
        get { lock.withLock { holdsBackStorage } }
        set { lock.withLock { holdsBackStorage = newValue } }
    }

    /// What a body chunk needs to know, under one lock: whether it is held back, and the
    /// writer it goes into.
    var streamSink: (holdsBack: Bool, writer: CacheWriter?) {
        lock.withLock { (holdsBackStorage, writerStorage) }
    }

    /// Whether a 5xx (or a failure: `nil`) may be answered from the stored response: the
    /// fallback policy or `stale-if-error`.
    func servesStoredOnError(status: Int?) -> Bool {
        guard let entry else { return false }
        return settings.cache.behaviour(for: settings.policy).fallbackOnFailure
            || CacheRules.canServeStale(entry.head, onErrorStatus: status, request: settings.requestFields, now: Date())
    }

    enum Start {
        /// Answer from this stored response.
        case answer(CacheEntry)
        /// Answer from this stored response and revalidate it in the background.
        case answerAndRevalidate(CacheEntry)
        /// Nothing may be used and the network may not be asked: 504.
        case unavailable
        /// Go to the network (conditionally when ``conditionalFields`` is set).
        case network
    }

    func begin(url: URL) -> Start {
        guard settings.readsAndWrites else { return .network }
        let (entry, decision) = settings.cache.plan(
            method: settings.method, url: url, request: settings.requestFields, policy: settings.policy)
        lock.withLock { entryStorage = entry }
        switch decision {
        case .useStored:
            return entry.map { .answer($0) } ?? .network
        case .useStoredAndRevalidate:
            return entry.map { .answerAndRevalidate($0) } ?? .network
        case .validate(let conditions):
            // The caller's own validators go as they are; the stored response is still served
            // on a 304, which answers them too.
            let own = settings.requestFields[.ifNoneMatch] != nil || settings.requestFields[.ifModifiedSince] != nil
            lock.withLock { conditionsStorage = own ? [:] : conditions }
            return .network
        case .fetch:
            return .network
        case .unavailable:
            return .unavailable
        }
    }
}

extension Execution {
    /// Answers the request from the cache when the lookup allows; true when it did (the
    /// execution is finished).
    func answerFromCache(_ stage: CacheStage) -> Bool {
        switch stage.begin(url: plan.url) {
        case .network:
            return false
        case .unavailable:
            let response = gatewayTimeout()
            deliverHead()
            finishWithoutAttempt(.success(response))
            return true
        case .answer(let entry):
            guard let result = serveFromCache(entry) else { return false }
            finishWithoutAttempt(result)
            return true
        case .answerAndRevalidate(let entry):
            guard let result = serveFromCache(entry) else { return false }
            finishWithoutAttempt(result)
            request.revalidationCopy()?.execute()
            return true
        }
    }

    /// Answers with a stored response: its head to the head handler, then, when the request
    /// streams, its body to the data handler in pieces of at most 64 KiB (coalesced as network
    /// bodies are with `concatData`), never as one buffer. `nil` when the stored body cannot
    /// be read (checked before anything is handed over, so the network can still answer).
    func serveFromCache(_ entry: CacheEntry) -> Result<Response, TernError>? {
        let streams = plan.cache?.streamsBody == true && plan.method != "HEAD"
        if streams, (try? entry.bodyIsIntact()) != true { return nil }
        guard let response = responseFromCache(entry, streamed: streams) else { return nil }
        let headAccepted = deliverHead()
        guard streams else { return .success(response) }
        guard headAccepted else { return .failure(cancelledError()) }
        var accepted = true
        let read = entry.forEachBodyChunk(while: { piece in
            accepted = didReceive(piece)
            return accepted
        })
        if accepted { accepted = flushPending() }
        if !accepted { return .failure(cancelledError()) }
        guard read == .complete else {
            return .failure(TernError(code: .fileReadFailed, message: "cache entry \(entry.path): the body ended early"))
        }
        return .success(response)
    }

    /// A response head arrived: true when the cache answers instead of it, so the head
    /// handler is not called now (afterExchange gives it the head of what is served).
    /// - a 304 to the cache's own revalidation: the stored response it refreshes answers;
    /// - a 2xx to a HEAD with a stored GET response: the stored head it refreshes answers
    ///   (RFC 9111 4.3.5), or this head if it does not describe the stored response;
    /// - a 5xx to a streamed request that the stored response will answer for.
    /// On the final hop of a streamed request, a storable response also gets the cache
    /// writer its body is fed into as it arrives.
    func cacheHoldsHead(_ head: ResponseHead, status: Int, finalHop: Bool, stage: CacheStage) -> Bool {
        if status == 304, stage.conditionalFields != nil { return true }
        let settings = stage.settings
        if settings.method == .head, settings.readsAndWrites, stage.entry != nil, (200...299).contains(status) {
            return true
        }
        guard finalHop, settings.readsAndWrites, settings.streamsBody else { return false }
        if status >= 500, stage.servesStoredOnError(status: status) {
            stage.setStreamWriter(nil)
            stage.holdsBack = true
            return true
        }
        guard settings.method == .get, status != 304 else {
            stage.setStreamWriter(nil)
            return false
        }
        stage.setStreamWriter(
            settings.cache.writer(
                method: settings.method, url: local.hopURL, request: settings.requestFields, status: status,
                reason: head.reason, response: head.fields, requestTime: stage.requestTime, responseTime: Date(),
                policy: settings.policy, storagePolicy: settings.storagePolicy,
                secondsToCache: settings.secondsToCache, expectedLength: head.contentLength))
        return false
    }

    /// The cache's part in the end of an exchange; returns the result to finish with.
    func afterExchange(_ result: Result<Response, TernError>, stage: CacheStage) -> Result<Response, TernError> {
        let settings = stage.settings
        let cache = settings.cache
        guard settings.readsAndWrites else {
            if case .success(let response) = result {
                cache.invalidate(
                    method: settings.method, url: plan.url, status: response.statusCode,
                    response: response.headerFields)
            }
            return result
        }
        let streamWriter = stage.takeStreamWriter()
        let heldBack = stage.holdsBack
        stage.holdsBack = false
        switch result {
        case .success(let response):
            if response.statusCode == 304, stage.conditionalFields != nil, let entry = stage.entry {
                streamWriter?.discard()
                // The 304's head was held back from the head handler (didReceiveHead): the
                // handler sees the stored response's, or the 304's when it cannot be served.
                let refreshed = cache.refresh(
                    entry, with: response.headerFields, requestTime: stage.requestTime, responseTime: Date())
                if let refreshed, let served = serveFromCache(refreshed) {
                    return served
                }
                deliverHead()
                return result
            }
            // A 5xx held back when its head came was judged then (its body is gone): not again
            // now, when stale-if-error may just have run out.
            if response.statusCode >= 500, let entry = stage.entry,
                heldBack || stage.servesStoredOnError(status: response.statusCode),
                let served = serveFromCache(entry)
            {
                streamWriter?.discard()
                return served
            }
            if settings.method == .head, stage.entry != nil, (200...299).contains(response.statusCode) {
                // The head was held back (cacheHoldsHead): a stored GET it describes is
                // refreshed and answers; otherwise this response does.
                if let refreshed = refreshStoredGET(from: response, stage: stage), let served = serveFromCache(refreshed) {
                    return served
                }
                deliverHead()
                return result
            }
            if heldBack { deliverHead() }  // the stored response could not be read after all
            if let streamWriter {
                // The body went into the writer as it arrived (cacheHoldsHead, didReceive).
                _ = try? streamWriter.commit()
            } else if !settings.streamsBody {
                store(response, stage: stage)
            }
            return result
        case .failure(let error):
            streamWriter?.discard()
            // A streamed body some of which reached the data handler cannot be followed by
            // another.
            guard error.code != .cancelled, !hasStreamedBody, let entry = stage.entry,
                stage.servesStoredOnError(status: nil)
            else { return result }
            return serveFromCache(entry) ?? result
        }
    }

    /// Gives the head handler the head of a response the cache answers with (set in the
    /// outcome by responseFromCache or gatewayTimeout), as a network response's head is given:
    /// `-D` and `-i` then show what was served. False when the handler asks to stop.
    @discardableResult
    private func deliverHead() -> Bool {
        callOnEngineThread({ $0.headHandler }) { $0(request) }
    }

    /// RFC 9111 4.3.5: a HEAD response of the stored GET response's status, which its
    /// validators select (4.3.3) and whose `Content-Length`, if both have one, agrees,
    /// refreshes the stored header (unless the policy writes nothing); the refreshed entry, or
    /// `nil`.
    private func refreshStoredGET(from response: Response, stage: CacheStage) -> CacheEntry? {
        let cache = stage.settings.cache
        guard cache.behaviour(for: stage.settings.policy).write != .never,
            let entry = cache.lookup(url: response.url, request: stage.settings.requestFields),
            entry.head.status == response.statusCode
        else { return nil }
        if let length = response.headerFields[.contentLength], let stored = entry.head.headers[.contentLength],
            length != stored
        {
            return nil
        }
        return cache.refresh(entry, with: response.headerFields, requestTime: stage.requestTime, responseTime: Date())
    }

    /// Writes a response to the cache when the policy and RFC 9111 allow: the body from
    /// memory, or from the download file it went to.
    private func store(_ response: Response, stage: CacheStage) {
        let settings = stage.settings
        // Stored under the URL that answered: after redirects, the last hop's (a lookup of the
        // first URL then misses rather than serving another resource's body).
        guard settings.method == .get,
            let writer = settings.cache.writer(
                method: settings.method, url: response.url, request: settings.requestFields,
                status: response.statusCode, reason: response.status.reasonPhrase,
                response: response.headerFields, requestTime: stage.requestTime, responseTime: Date(),
                policy: settings.policy, storagePolicy: settings.storagePolicy,
                secondsToCache: settings.secondsToCache, expectedLength: response.contentLength)
        else { return }
        if let path = response.downloadFile, plan.download != nil {
            // A device (/dev/null) kept nothing to read back: nothing is stored.
            guard Self.isRegularFile(path), Self.copyFile(path, into: writer) else {
                writer.discard()
                return
            }
        } else {
            writer.append(response.data)
        }
        _ = try? writer.commit()
    }

    /// Streams a file into a cache writer in buffer-sized pieces; false on a read error.
    private static func copyFile(_ path: String, into writer: CacheWriter) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = read(fd, buffer.baseAddress, buffer.count)
            if n == 0 { return true }
            if n < 0 {
                if errno == EINTR { continue }
                return false
            }
            writer.append(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
        }
    }

    /// The response a stored entry gives, with its body in memory or written to the download
    /// file (through a `.part` file, as the engine does), and the request's fields set as after
    /// a network response; `nil` when the stored body cannot be read (then the network answers).
    func responseFromCache(_ entry: CacheEntry, streamed: Bool = false) -> Response? {
        let head = entry.head
        let (fields, contentLength) = entry.servedFields(now: Date())
        let isHead = plan.method == "HEAD"
        var data = Data()
        var downloadFile: String?
        if streamed {
            // The body goes to the data handler afterwards (serveFromCache).
        } else if !isHead, let download = plan.download, (200...299).contains(head.status) || download.anyStatus {
            guard Self.writeBody(of: entry, to: download.path) else { return nil }
            downloadFile = download.path
        } else if !isHead {
            guard let body = try? entry.readBody() else { return nil }
            data = body
        }
        let length = UInt64(isHead ? 0 : entry.bodyLength)
        let responseHead = ResponseHead(
            status: head.status, reason: head.reason, httpVersion: .http1_1,
            fields: fields, contentLength: contentLength, isReused: false)
        let report = AttemptReport(
            stored: responseHead, data: data, length: length, url: plan.url, downloadFile: downloadFile,
            isFromCache: true)
        request.storage.withLock { s in
            s.outcome.head = responseHead
            s.outcome.report = report
            s.outcome.progress.bytesReceived = length
            s.outcome.progress.bytesExpected = length
        }
        return Response(report: report)
    }

    /// True for a regular file (false for a device such as /dev/null, or nothing).
    private static func isRegularFile(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG
    }

    /// A stored body written to `path` whole or not at all (a `.part` file renamed into place),
    /// or in place when `path` is a device, as the engine does (a rename would replace
    /// /dev/null with a regular file).
    private static func writeBody(of entry: CacheEntry, to path: String) -> Bool {
        var info = stat()
        if stat(path, &info) == 0, (info.st_mode & S_IFMT) != S_IFREG {
            let fd = open(path, O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { return false }
            let ok = (try? entry.copyBody(to: fd, verify: true)) != nil
            return close(fd) == 0 && ok
        }
        let part = path + ".part"
        let fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return false }
        var ok = (try? entry.copyBody(to: fd, verify: true)) != nil
        ok = close(fd) == 0 && ok
        if ok, rename(part, path) == 0 { return true }
        unlink(part)
        return false
    }

    /// `only-if-cached` (or the "don't load" policy) with nothing usable stored.
    private func gatewayTimeout() -> Response {
        let head = ResponseHead(
            status: 504, reason: "Gateway Timeout", httpVersion: .http1_1, fields: [:],
            contentLength: 0, isReused: false)
        let report = AttemptReport(
            stored: head, data: Data(), length: 0, url: plan.url, downloadFile: nil, isFromCache: false)
        request.storage.withLock { s in
            s.outcome.head = head
            s.outcome.report = report
        }
        return Response(report: report)
    }
}

extension Request {
    /// A copy that revalidates the stored response in the background
    /// (`stale-while-revalidate`): same URL, fields, cache and engine, no handlers.
    func revalidationCopy() -> Request? {
        var settings = storage.withLock { $0.settings }
        guard settings.cache != nil else { return nil }
        settings.downloadFile = nil
        settings.listener = nil
        settings.completions = []
        settings.headHandler = nil
        settings.dataHandler = nil
        settings.progressHandler = nil
        settings.progressStreams = []
        settings.authenticationHandler = nil
        settings.cachePolicy = [.askServerIfModified]
        let copy = Request(url: settings.url, method: settings.method)
        copy.storage.withLock { $0.settings = settings }
        return copy
    }
}

extension AttemptReport {
    /// What a response the cache answers with stands for: its head and body, no exchange.
    convenience init(
        stored head: ResponseHead, data: Data, length: UInt64, url: URL, downloadFile: String?,
        isFromCache: Bool
    ) {
        self.init(
            error: nil, head: head, data: data, bytesReceived: length,
            contentLength: head.contentLength, offset: 0, timings: Response.Timings(), sentHead: nil,
            tlsInfo: nil, decodedEncoding: nil, bytesDelivered: length, bodySkipped: false,
            connectStatus: 0, redirectedURL: nil, redirectCount: 0, originalURL: url,
            downloadFile: downloadFile, isFromCache: isFromCache, attempts: 0)
    }
}
