// The queue at work: admission, picking the next requests, and what their executions report.
// Lock order: the queue's state lock may be held while taking a request's storage lock, never
// the other way round; no user code and no request start runs under the state lock.

import Dispatch
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

/// Byte counts summed over entries.
struct ByteTotals {
    var sent: UInt64 = 0
    var toSend: UInt64 = 0
    var received: UInt64 = 0
    var expected: UInt64 = 0
    /// Bytes moved of the bodies whose size is known (each capped at its size).
    var moved: UInt64 = 0

    mutating func add(_ entry: QueueEntry) {
        sent += entry.bytesSent
        received += entry.bytesReceived
        if let total = entry.bytesToSend {
            toSend += total
            moved += min(entry.bytesSent, total)
        }
        if let total = entry.bytesExpected {
            expected += total
            moved += min(entry.bytesReceived, total)
        }
    }
}

/// Everything a queue guards with its lock.
struct QueueState {
    var configuration: RequestQueue.Configuration
    var isPaused = false
    /// Waiting entries, in the order they will start.
    var pending: [QueueEntry] = []
    var running: [ObjectIdentifier: QueueEntry] = [:]
    var runningPerHost: [String: Int] = [:]
    var nextBack: Int64 = 0
    var nextFront: Int64 = -1
    /// A thread is starting entries; others leave the picking to it.
    var pumping = false
    var idleWaiters: [@Sendable () -> Void] = []
    /// Requests of the current batch (HEAD probes excluded), and how many of them ended; the
    /// bytes of those that ended are summed (the queue keeps no finished request).
    var batchTotal = 0
    var batchFinished = 0
    var finishedBytes = ByteTotals()
    var lastPercent = 0
    var lastProgressEvent = -Double.infinity
    /// The last batch's final counts, reported while the queue is idle.
    var finishedBatch: RequestQueue.Progress?
    /// Tests only: called with each picked request just before it starts (no lock held), to
    /// act in the window between the pick and the start.
    var pickedHook: (@Sendable (Request) -> Void)?

    init(configuration: RequestQueue.Configuration) {
        self.configuration = configuration
    }

    var isIdle: Bool { pending.isEmpty && running.isEmpty }

    /// Puts an entry among the waiting ones, after every entry that precedes it.
    mutating func insert(_ entry: QueueEntry) {
        var low = 0
        var high = pending.count
        while low < high {
            let mid = (low + high) / 2
            if pending[mid].precedes(entry) { low = mid + 1 } else { high = mid }
        }
        pending.insert(entry, at: low)
    }

    /// Moves the entries that may start now from waiting to running.
    mutating func pick() -> [QueueEntry] {
        guard !isPaused else { return [] }
        let limit = max(1, configuration.maxSimultaneous)
        let perHost = configuration.maxSimultaneousPerHost
        var picked: [QueueEntry] = []
        var index = 0
        while running.count < limit, index < pending.count {
            let entry = pending[index]
            if entry.awaitsSize {
                index += 1
                continue
            }
            if perHost > 0 {
                let host = entry.host ?? RequestQueue.hostKey(entry.request.url)
                entry.host = host
                if runningPerHost[host, default: 0] >= perHost {
                    index += 1
                    continue
                }
                runningPerHost[host, default: 0] += 1
                entry.countedHost = host
            }
            pending.remove(at: index)
            running[ObjectIdentifier(entry)] = entry
            entry.isRunning = true
            picked.append(entry)
        }
        return picked
    }

    /// The entries to start when no other thread is starting some; the caller then starts
    /// them with ``RequestQueue/pump(from:)``, which ends the claim.
    mutating func claimPump() -> [QueueEntry] {
        guard !pumping else { return [] }
        let picked = pick()
        pumping = !picked.isEmpty
        return picked
    }

    /// Takes a running entry off the running set.
    mutating func stopRunning(_ entry: QueueEntry) {
        guard running.removeValue(forKey: ObjectIdentifier(entry)) != nil else { return }
        entry.isRunning = false
        if let host = entry.countedHost {
            entry.countedHost = nil
            let left = runningPerHost[host, default: 1] - 1
            runningPerHost[host] = left > 0 ? left : nil
        }
    }

    /// An entry left the queue or ended: a request waiting for this HEAD probe may start.
    mutating func ended(_ entry: QueueEntry) {
        entry.sizeOf?.awaitsSize = false
    }

    /// Counts an entry of the batch as ended; its sizes become what it moved when unknown or
    /// when it failed, so the batch can reach 100.
    mutating func countFinished(_ entry: QueueEntry, success: Bool) {
        guard entry.sizeOf == nil else { return }
        batchFinished += 1
        if !success || entry.bytesToSend == nil {
            entry.bytesToSend = max(entry.bytesSent, success ? entry.bytesToSend ?? 0 : 0)
        }
        if !success || entry.bytesExpected == nil {
            entry.bytesExpected = entry.bytesReceived
        }
        if success, let expected = entry.bytesExpected, entry.bytesReceived > expected {
            entry.bytesExpected = entry.bytesReceived
        }
        finishedBytes.add(entry)
    }

    /// The batch's counts now; percent below 100 until it is done, never below the last one.
    mutating func progressNow() -> RequestQueue.Progress {
        if batchTotal == 0, let finishedBatch { return finishedBatch }
        var bytes = finishedBytes
        for entry in running.values where entry.sizeOf == nil { bytes.add(entry) }
        for entry in pending where entry.sizeOf == nil { bytes.add(entry) }
        var p = RequestQueue.Progress(
            requestsTotal: batchTotal, requestsFinished: batchFinished, bytesSent: bytes.sent,
            bytesToSend: bytes.toSend, bytesReceived: bytes.received,
            bytesExpected: bytes.expected, percent: 0)
        var percent = 0
        let totalBytes = bytes.toSend + bytes.expected
        if configuration.progressMode == .accurate, totalBytes > 0 {
            percent = Int(Double(bytes.moved) * 100 / Double(totalBytes))
        } else if batchTotal > 0 {
            percent = batchFinished * 100 / batchTotal
        }
        percent = max(lastPercent, min(percent, 99))
        lastPercent = percent
        p.percent = percent
        return p
    }

    /// When the batch just ended: its final counts (percent 100), the batch reset, and the
    /// idle waiters to wake.
    mutating func endBatchIfIdle() -> (final: RequestQueue.Progress, waiters: [@Sendable () -> Void])? {
        guard isIdle, batchTotal > 0 || !idleWaiters.isEmpty else { return nil }
        var final = progressNow()
        final.percent = 100
        if batchTotal > 0 { finishedBatch = final }
        batchTotal = 0
        batchFinished = 0
        finishedBytes = ByteTotals()
        lastPercent = 0
        lastProgressEvent = -Double.infinity
        defer { idleWaiters = [] }
        return (final, idleWaiters)
    }
}

extension RequestQueue {
    /// Adds `request` unless it is busy or the queue is full; see ``add(_:priority:at:)``.
    @discardableResult
    func enqueue(
        _ request: Request, priority: Int, position: Position,
        continuation: ResponseContinuation?
    ) -> Bool {
        let entry = QueueEntry(queue: self, request: request, priority: priority)
        enum Admission { case queued([QueueEntry]), busy, full(Int) }
        let admission: Admission = state.withLock { s in
            let free = request.storage.withLock { r in
                guard r.run == nil, r.queueEntry == nil else { return false }
                r.queueEntry = entry
                if let continuation { entry.continuations.append(continuation) }
                return true
            }
            guard free else { return .busy }
            guard s.pending.count < s.configuration.maxPending else {
                return .full(s.configuration.maxPending)
            }
            admit(entry, position: position, into: &s)
            if s.configuration.progressMode == .accurate {
                entry.bytesToSend = Self.knownUploadLength(request)
                makeSizeProbe(for: entry, into: &s)
            }
            return .queued(s.claimPump())
        }
        switch admission {
        case .queued(let startable):
            pump(from: startable)
            return true
        case .busy:
            continuation?.resume(
                throwing: TernError(
                    code: .busy, message: "request to \(request.url.host ?? "") is already running or queued",
                    phase: .caller))
            return false
        case .full(let limit):
            let error = TernError(
                code: .queueFull,
                message: "request to \(request.url.host ?? "") refused: \(limit) requests already wait in its queue",
                host: request.url.host, phase: .caller)
            if request.failQueued(entry, error), eventPump.hasConsumers {
                eventPump.send([.failed(request, error)])
            }
            return false
        }
    }

    /// Gives an entry its rank and puts it in the waiting line and the batch.
    private func admit(_ entry: QueueEntry, position: Position, into s: inout QueueState) {
        if s.isIdle, s.batchTotal == 0 { s.finishedBatch = nil }
        switch position {
        case .back:
            entry.order = s.nextBack
            s.nextBack += 1
        case .front:
            entry.order = s.nextFront
            s.nextFront -= 1
        }
        s.insert(entry)
        if entry.sizeOf == nil { s.batchTotal += 1 }
    }

    /// Accurate progress: a HEAD request that learns the size of a GET's response, at the front.
    private func makeSizeProbe(for entry: QueueEntry, into s: inout QueueState) {
        guard let head = entry.request.sizeProbe() else { return }
        let probe = QueueEntry(
            queue: self, request: head, priority: Priority.immediate.rawValue, sizeOf: entry)
        head.storage.withLock { $0.queueEntry = probe }
        admit(probe, position: .front, into: &s)
        entry.awaitsSize = true
    }

    /// Starts what may start, until nothing more may (a request that ends while starting frees
    /// its slot for the next round).
    func pump() {
        pump(from: state.withLock { $0.claimPump() })
    }

    /// Starts `first` (claimed with ``QueueState/claimPump()``), then whatever may start next.
    func pump(from first: [QueueEntry]) {
        var next = first
        while !next.isEmpty {
            for entry in next { start(entry) }
            next = state.withLock { s in
                let picked = s.pick()
                if picked.isEmpty { s.pumping = false }
                return picked
            }
        }
    }

    private func start(_ entry: QueueEntry) {
        let announce = entry.sizeOf == nil && eventPump.hasConsumers
        let (budget, hook) = state.withLock { ($0.configuration.bandwidthBudget, $0.pickedHook) }
        hook?(entry.request)
        switch entry.request.startQueued(entry, budget: budget, beforeStart: {
            if announce { self.eventPump.send([.started(entry.request)]) }
        }) {
        case .started:
            return
        case .left:
            break
        case .cancelled(let error):
            if entry.sizeOf == nil, eventPump.hasConsumers { eventPump.send([.failed(entry.request, error)]) }
        }
        // It left the queue (cancelled) between being picked and starting: free its slot.
        let ended: BatchEnd = state.withLock { s in
            s.stopRunning(entry)
            s.ended(entry)
            s.countFinished(entry, success: false)
            return batchEnd(&s)
        }
        conclude(ended)
    }

    /// Cancels every waiting and running request; see ``cancelAll()``.
    func cancelEverything() {
        let (waiting, running, ended): ([QueueEntry], [QueueEntry], BatchEnd) = state.withLock { s in
            let waiting = s.pending
            s.pending.removeAll()
            for entry in waiting { s.countFinished(entry, success: false) }
            return (waiting, Array(s.running.values), batchEnd(&s))
        }
        for entry in waiting { endWaiting(entry, TernError.cancelledInQueue(entry.request)) }
        conclude(ended)
        for entry in running { entry.request.cancel() }
    }

    /// A waiting request was cancelled: it leaves the line and ends as cancelled.
    func cancelWaiting(_ entry: QueueEntry) {
        let (ended, probes): (BatchEnd, [QueueEntry]) = state.withLock { s in
            guard let index = s.pending.firstIndex(where: { $0 === entry }) else { return (BatchEnd(), []) }
            s.pending.remove(at: index)
            s.ended(entry)
            s.countFinished(entry, success: false)
            // Its HEAD probe, if still waiting, has nothing left to measure.
            let probes = s.pending.filter { $0.sizeOf === entry }
            s.pending.removeAll { $0.sizeOf === entry }
            return (batchEnd(&s), probes)
        }
        for probe in probes { probe.request.failQueued(probe, TernError.cancelledInQueue(probe.request)) }
        endWaiting(entry, TernError.cancelledInQueue(entry.request))
        conclude(ended)
    }

    /// Ends a request taken out of the waiting line.
    func endWaiting(_ entry: QueueEntry, _ error: TernError) {
        if entry.request.failQueued(entry, error), entry.sizeOf == nil, eventPump.hasConsumers {
            eventPump.send([.failed(entry.request, error)])
        }
    }

    /// What follows the end of a batch: its last events and the callers waiting for it.
    struct BatchEnd {
        var events: [Event] = []
        var waiters: [@Sendable () -> Void] = []
    }

    /// The end of the batch when the queue just became idle (progress at 100, allFinished).
    /// Called with the state locked; ``conclude(_:)`` acts on it once the requests that
    /// ended are recorded.
    func batchEnd(_ s: inout QueueState) -> BatchEnd {
        guard let (final, waiters) = s.endBatchIfIdle() else { return BatchEnd() }
        let events: [Event] = eventPump.hasConsumers ? [.progress(final), .allFinished] : []
        return BatchEnd(events: events, waiters: waiters)
    }

    func conclude(_ end: BatchEnd) {
        eventPump.send(end.events)
        for wake in end.waiters { wake() }
    }

    // MARK: - What executions report (engine thread)

    func entryReceivedHead(_ entry: QueueEntry, contentLength: Int64?) {
        if let contentLength, contentLength >= 0 {
            (entry.sizeOf ?? entry).learnSize(UInt64(contentLength), upload: false)
        }
        if entry.sizeOf == nil, eventPump.hasConsumers { eventPump.send([.receivedHead(entry.request)]) }
    }

    func entryProgressed(_ entry: QueueEntry, upload: Bool, done: UInt64, total: UInt64) {
        guard entry.sizeOf == nil else { return }
        entry.moved(upload: upload, done: done, total: total)
        guard eventPump.hasConsumers else { return }
        let event: Progress? = state.withLock { s in
            let now = monotonicSeconds()
            guard now - s.lastProgressEvent >= s.configuration.progressInterval else { return nil }
            s.lastProgressEvent = now
            return s.progressNow()
        }
        if let event { eventPump.send([.progress(event)]) }
    }

    func entryFinished(_ entry: QueueEntry, result: Result<Response, TernError>) {
        var failure: TernError?
        if case .failure(let error) = result { failure = error }
        let (events, ended, cancelRest, startable): ([Event], BatchEnd, Bool, [QueueEntry]) = state.withLock { s in
            s.stopRunning(entry)
            s.ended(entry)
            s.countFinished(entry, success: failure == nil)
            var events: [Event] = []
            if entry.sizeOf == nil, eventPump.hasConsumers {
                if let failure {
                    events.append(.failed(entry.request, failure))
                } else {
                    events.append(.finished(entry.request))
                }
            }
            let cancelRest =
                entry.sizeOf == nil && s.configuration.cancelsAllOnFailure
                && failure.map { $0.code != .cancelled } == true
            return (events, batchEnd(&s), cancelRest, cancelRest ? [] : s.claimPump())
        }
        eventPump.send(events)
        conclude(ended)
        if cancelRest { cancelEverything() }
        pump(from: startable)
    }

    // MARK: - Helpers

    /// "host:port" with the scheme's default port filled in.
    static func hostKey(_ url: URL) -> String {
        "\(HostName.canonical(of: url) ?? ""):\(HostName.port(of: url) ?? 0)"
    }

    /// The request body's size when it can be known before sending.
    static func knownUploadLength(_ request: Request) -> UInt64? {
        let s = request.storage.withLock { $0.settings }
        if let data = s.body { return UInt64(data.count) }
        if let path = s.bodyFile {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            let size = UInt64(max(0, info.st_size))
            let end = s.uploadEnd == 0 ? size : min(s.uploadEnd, size)
            return end > s.uploadOffset ? end - s.uploadOffset : 0
        }
        if let body = s.requestBody { return body.count }
        return s.postValues.isEmpty ? 0 : nil
    }
}

extension Request {
    /// A HEAD request to the same URL with the same fields, credentials and engine, and no
    /// body or handlers: accurate queue progress learns a GET's size with it. `nil` for
    /// anything but a GET without a body.
    func sizeProbe() -> Request? {
        var settings = storage.withLock { $0.settings }
        guard settings.method == .get, settings.body == nil, settings.bodyFile == nil,
            settings.requestBody == nil, settings.postValues.isEmpty
        else { return nil }
        settings.method = .head
        settings.downloadFile = nil
        settings.listener = nil
        settings.completions = []
        settings.headHandler = nil
        settings.dataHandler = nil
        settings.progressHandler = nil
        settings.progressStreams = []
        settings.authenticationHandler = nil
        settings.maxRetries = 0
        let probe = Request(url: settings.url, method: .head)
        probe.storage.withLock { $0.settings = settings }
        return probe
    }
}
