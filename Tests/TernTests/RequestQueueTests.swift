// RequestQueue against the fault-injection server's /probe endpoint, which counts the requests
// of one tag in progress at once and records their arrival order: limits, priorities, pause,
// cancel-all, cancel-on-failure, max pending, per-host limits, events and aggregate progress.

import Dispatch
import Foundation
import HTTPTypes
import Testing
@testable import Tern

/// What /probe-stats reports for a tag.
struct ProbeStats: Decodable {
    var count: Int
    var inflight: Int
    var max_inflight: Int
    var order: [String]
    /// The method of each arrival in `order` (absent from an older fault server).
    var methods: [String]?
}

extension TernTests {
    @Suite struct Queue {
        let servers: Servers
        let tag = "q-\(UUID().uuidString.prefix(8))"

        init() throws {
            servers = try Servers.get()
        }

        func probe(_ id: Any, holdMS: Int = 50, size: Int = 16, tag: String? = nil) -> Request {
            Request(url: servers.fault("/probe?tag=\(tag ?? self.tag)&id=\(id)&hold_ms=\(holdMS)&size=\(size)"))
        }

        func stats(_ tag: String? = nil) async throws -> ProbeStats {
            let response = try await Request(url: servers.fault("/probe-stats?tag=\(tag ?? self.tag)")).response()
            return try JSONDecoder().decode(ProbeStats.self, from: response.data)
        }

        @Test func aThousandRequestsFourAtATime() async throws {
            let engine = try Engine()
            let queue = RequestQueue(maxSimultaneous: 4)
            let requests = (0..<1000).map { i in
                let request = probe(i, holdMS: 5)
                request.engine = engine
                return request
            }
            for request in requests { #expect(queue.add(request)) }
            #expect(queue.runningCount == 4)
            await queue.allRequestsFinished()
            #expect(requests.allSatisfy { $0.statusCode == 200 && $0.data?.count == 16 })
            let seen = try await stats()
            #expect(seen.count == 1000)
            #expect(seen.max_inflight == 4, "the server saw \(seen.max_inflight) at once")
            let counters = engine._stats
            #expect(counters.requestsActive == 0)
            #expect(counters.connectionsOpen <= 4, "\(counters)")
            #expect(counters.connectionsOpened <= 8, "\(counters)")
            // As queue_engine_limit_200 checks in C: every connection left open is idle in
            // the pool, none still busy with a request the queue thinks ended.
            #expect(counters.connectionsOpen == counters.connectionsIdle, "\(counters)")
            #expect(counters.requestsWaiting == 0, "\(counters)")
            #expect(queue.runningCount == 0 && queue.pendingCount == 0)
        }

        @Test func finishedRequestsAreReleased() async throws {
            let queue = RequestQueue(maxSimultaneous: 4)
            var weak: [WeakReference<Request>] = []
            for i in 0..<50 {
                let request = probe(i, holdMS: 1)
                weak.append(WeakReference(request))
                if i % 2 == 0 {
                    queue.add(request)
                } else {
                    _ = try await queue.response(for: request)
                }
            }
            await queue.allRequestsFinished()
            #expect(eventually { weak.allSatisfy { $0.value == nil } },
                    "\(weak.filter { $0.value != nil }.count) of 50 requests still alive")
        }

        @Test func prioritiesThenFrontThenInsertionOrder() async throws {
            let queue = RequestQueue(maxSimultaneous: 1)
            queue.pause()
            let adds: [(String, RequestQueue.Priority, RequestQueue.Position)] = [
                ("n1", .normal, .back), ("l1", .low, .back), ("h1", .high, .back),
                ("n2", .normal, .back), ("f1", .normal, .front), ("i1", .immediate, .back),
                ("h2", .high, .back), ("f2", .normal, .front), ("custom", .init(rawValue: 50), .back),
            ]
            for (id, priority, position) in adds {
                #expect(queue.add(probe(id, holdMS: 1), priority: priority, at: position))
            }
            #expect(queue.pendingCount == adds.count && queue.runningCount == 0)
            queue.resume()
            await queue.allRequestsFinished()
            let seen = try await stats()
            #expect(seen.order == ["i1", "h1", "h2", "custom", "f2", "f1", "n1", "n2", "l1"])
            #expect(seen.max_inflight == 1)
        }

        @Test func pauseHoldsWaitingRequestsAndResumeStartsThem() async throws {
            let queue = RequestQueue(maxSimultaneous: 2)
            queue.pause()
            #expect(queue.isPaused)
            let requests = (0..<4).map { probe($0, holdMS: 1) }
            for request in requests { queue.add(request) }
            let paused = Date()
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await stats().count == 0, "a paused queue sent requests")
            queue.resume()
            await queue.allRequestsFinished()
            #expect(Date().timeIntervalSince(paused) >= 0.5)
            #expect(try await stats().count == 4)
            #expect(requests.allSatisfy { $0.statusCode == 200 })
        }

        @Test func pauseLetsTheRunningRequestFinishAndStartsNoOther() async throws {
            let queue = RequestQueue(maxSimultaneous: 1)
            let first = probe("first", holdMS: 600)
            let second = probe("second", holdMS: 1)
            queue.add(first)
            queue.add(second)
            #expect(try await eventuallyAsync { try await self.stats().inflight == 1 })
            queue.pause()  // not cancelling: the running one goes on
            #expect(queue.isPaused)
            #expect(eventually { first.isFinished })
            #expect(first.statusCode == 200 && first.error == nil, "\(String(describing: first.error))")
            #expect(first.data?.count == 16)
            // Its slot is free, but nothing waiting starts while paused.
            try await Task.sleep(for: .milliseconds(400))
            #expect(!second.isFinished)
            #expect(queue.pendingCount == 1 && queue.runningCount == 0)
            #expect(try await stats().order == ["first"], "a paused queue started a waiting request")
            queue.resume()
            await queue.allRequestsFinished()
            #expect(second.statusCode == 200)
            #expect(try await stats().order == ["first", "second"])
        }

        @Test func pauseCancellingRunningKeepsWaitingOnes() async throws {
            let queue = RequestQueue(maxSimultaneous: 1)
            let first = probe("first", holdMS: 3000)
            let second = probe("second", holdMS: 1)
            queue.add(first)
            queue.add(second)
            #expect(try await eventuallyAsync { try await self.stats().inflight == 1 })
            queue.pause(cancellingRunning: true)
            #expect(eventually { first.isFinished })
            #expect(first.error == .cancelled)
            #expect(queue.pendingCount == 1 && !second.isFinished)
            queue.resume()
            await queue.allRequestsFinished()
            #expect(second.statusCode == 200)
        }

        @Test func cancelAllEndsEveryRequestOnceWithMinusOne() async throws {
            let queue = RequestQueue(maxSimultaneous: 2)
            let finals = Recorder<Int>()
            let requests = (0..<10).map { i in
                let request = probe(i, holdMS: 5000)
                request.tag = i
                request.listener = { request, _, percent in
                    if percent == -1 { finals.append(request.tag) }
                    return true
                }
                return request
            }
            for request in requests { queue.add(request) }
            #expect(try await eventuallyAsync { try await self.stats().inflight == 2 })
            queue.cancelAll()
            await queue.allRequestsFinished()
            #expect(queue.runningCount == 0 && queue.pendingCount == 0)
            #expect(eventually { finals.count == 10 })
            usleep(100_000)
            #expect(finals.all.sorted() == Array(0..<10), "each listener got -1 exactly once")
            #expect(requests.allSatisfy { $0.error == .cancelled && $0.isCancelled })
            #expect(try await stats().count == 2, "waiting requests reached the server")
        }

        @Test func aFailureCancelsTheRestWhenAsked() async throws {
            var configuration = RequestQueue.Configuration(maxSimultaneous: 1)
            configuration.cancelsAllOnFailure = true
            let queue = RequestQueue(configuration: configuration)
            let failing = Request(url: URL(string: "http://127.0.0.1:1/refused")!)
            let rest = (0..<5).map { probe($0, holdMS: 1) }
            queue.pause()  // a refusal can come before the next add
            queue.add(failing)
            for request in rest { queue.add(request) }
            queue.resume()
            await queue.allRequestsFinished()
            #expect(failing.error == .connectionRefused)
            #expect(rest.allSatisfy { $0.error == .cancelled })
            #expect(try await stats().count == 0)
        }

        @Test func withoutCancelOnFailureTheRestRuns() async throws {
            let queue = RequestQueue(maxSimultaneous: 1)
            let failing = Request(url: URL(string: "http://127.0.0.1:1/refused")!)
            queue.add(failing)
            let rest = (0..<3).map { probe($0, holdMS: 1) }
            for request in rest { queue.add(request) }
            await queue.allRequestsFinished()
            #expect(failing.error == .connectionRefused)
            #expect(rest.allSatisfy { $0.statusCode == 200 })
        }

        @Test func beyondMaxPendingARequestFailsAtOnceAndIsNeverSent() async throws {
            let queue = RequestQueue(maxSimultaneous: 1, maxPending: 2)
            queue.pause()
            let finals = Recorder<Int>()
            let requests = (0..<3).map { probe($0, holdMS: 1) }
            requests[2].listener = { _, _, percent in
                finals.append(percent)
                return true
            }
            #expect(queue.add(requests[0]))
            #expect(queue.add(requests[1]))
            #expect(!queue.add(requests[2]))
            #expect(requests[2].error == .queueFull)
            #expect(eventually { finals.all == [-1] })
            await #expect(throws: TernError.self) {
                try await queue.response(for: probe("async", holdMS: 1))
            }
            do {
                _ = try await queue.response(for: probe("async2", holdMS: 1))
                Issue.record("a full queue took the request")
            } catch let error as TernError {
                #expect(error.code == .queueFull)
                #expect(error.message.contains("2 requests already wait"), "\(error.message)")
            }
            queue.resume()
            await queue.allRequestsFinished()
            let seen = try await stats()
            #expect(seen.order.sorted() == ["0", "1"])
        }

        @Test func aWaitingRequestCanBeAwaitedOrCancelled() async throws {
            let queue = RequestQueue(maxSimultaneous: 1)
            queue.pause()
            let awaited = probe("awaited", holdMS: 1)
            let cancelled = probe("cancelled", holdMS: 1)
            queue.add(awaited)
            queue.add(cancelled)
            let blocking = probe("blocking", holdMS: 1)
            queue.add(blocking)
            #expect(!awaited.execute(), "execute() started a request waiting in a queue")
            let task = Task { try await awaited.response() }
            let waited = Locked<Int?>(nil)
            let thread = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                waited.withLock { $0 = try? blocking.executeAndWait().statusCode }
                thread.signal()
            }
            cancelled.cancel()
            #expect(cancelled.error == .cancelled)
            #expect(queue.pendingCount == 2)
            queue.resume()
            let response = try await task.value
            #expect(response.statusCode == 200)
            await queue.allRequestsFinished()
            #expect(thread.wait(timeout: .now() + 5) == .success)
            #expect(waited.withLock { $0 } == 200, "executeAndWait() on a queued request")
            #expect(try await stats().order == ["awaited", "blocking"])
        }

        /// A cancel whose first step (under the request's lock) comes after the queue picked
        /// the request, and whose second after the request started, was lost before: the
        /// queue no longer found the request among the waiting. It now ends unstarted, as a
        /// request cancelled while waiting does: no "started" event, nothing sent.
        @Test func aCancelBetweenPickAndStartEndsTheRequestUnstarted() async throws {
            let queue = RequestQueue(maxSimultaneous: 1)
            let request = probe("picked", holdMS: 1)
            let late = Locked<Request.CancelTarget?>(nil)
            queue.state.withLock { s in
                s.pickedHook = { picked in late.withLock { $0 = picked.cancelTarget() } }
            }
            let log = Recorder<String>()
            queue.eventHandler = { event in
                switch event {
                case .started: log.append("started")
                case .failed(_, let e): log.append("failed \(e.code.name)")
                case .finished: log.append("finished")
                default: break
                }
            }
            do {
                let response = try await queue.response(for: request)
                Issue.record("a cancelled request completed with \(response.statusCode)")
            } catch let error as TernError {
                #expect(error.code == .cancelled)
                #expect(error.message.contains("waiting in its queue"), "\(error.message)")
            }
            late.withLock { $0 }?.cancel()  // the cancel's second step, late: it finds nothing to do
            await queue.allRequestsFinished()
            #expect(eventually { log.all.contains("failed ECANCELED") }, "\(log.all)")
            #expect(!log.all.contains("started"), "\(log.all)")
            #expect(request.error == .cancelled)
            #expect(try await stats().count == 0, "the server saw the cancelled request")
            #expect(queue.runningCount == 0 && queue.pendingCount == 0)
        }

        @Test func perHostLimit() async throws {
            var configuration = RequestQueue.Configuration(maxSimultaneous: 6)
            configuration.maxSimultaneousPerHost = 2
            let queue = RequestQueue(configuration: configuration)
            let other = "\(tag)-localhost"
            let port = servers.fault("/").port!
            for i in 0..<6 {
                queue.add(probe(i, holdMS: 100))
                queue.add(Request(url: URL(string: "http://localhost:\(port)/probe?tag=\(other)&id=\(i)&hold_ms=100")!))
            }
            await queue.allRequestsFinished()
            #expect(try await stats().max_inflight == 2)
            #expect(try await stats(other).max_inflight == 2)
            #expect(try await stats(other).count == 6)
        }

        @Test func eventsArriveInOrderOnTheQueuesDispatchQueue() async throws {
            let key = DispatchSpecificKey<Int>()
            let callbackQueue = DispatchQueue(label: "tern.test.queue-events", attributes: .concurrent)
            callbackQueue.setSpecific(key: key, value: 7)
            let queue = RequestQueue(
                configuration: .init(maxSimultaneous: 3, callbackQueue: callbackQueue))
            let log = Recorder<String>()
            queue.eventHandler = { event in
                let where_ = DispatchQueue.getSpecific(key: key) == 7 ? "" : " (wrong queue)"
                switch event {
                case .started(let r): log.append("started \(r.tag)\(where_)")
                case .receivedHead(let r): log.append("head \(r.tag)\(where_)")
                case .finished(let r): log.append("finished \(r.tag)\(where_)")
                case .failed(let r, let e): log.append("failed \(r.tag) \(e.code.name)\(where_)")
                case .progress: break
                case .allFinished: log.append("all\(where_)")
                }
            }
            let stream = queue.events
            var requests = (1...5).map { i in
                let request = probe(i, holdMS: 20)
                request.tag = i
                return request
            }
            requests[4] = Request(url: URL(string: "http://127.0.0.1:1/refused")!)
            requests[4].tag = 5
            for request in requests { queue.add(request) }
            var streamed: [String] = []
            for await event in stream {
                if case .started(let r) = event { streamed.append("started \(r.tag)") }
                if case .allFinished = event { break }
            }
            #expect(streamed.count == 5)
            #expect(eventually { log.all.last?.hasPrefix("all") == true })
            let lines = log.all
            #expect(!lines.contains { $0.contains("wrong queue") }, "\(lines)")
            #expect(lines.filter { $0 == "all" }.count == 1)
            for i in 1...4 {
                let started = lines.firstIndex(of: "started \(i)")
                let head = lines.firstIndex(of: "head \(i)")
                let finished = lines.firstIndex(of: "finished \(i)")
                #expect(started != nil && head != nil && finished != nil, "\(lines)")
                if let started, let head, let finished { #expect(started < head && head < finished) }
            }
            #expect(lines.contains("failed 5 ECONNREFUSED"), "\(lines)")
        }

        /// Progress events of a batch: monotonic, 100 exactly once (last), counts as given.
        func checkProgress(_ events: [RequestQueue.Progress], requests: Int, received: UInt64, sent: UInt64)
        {
            let percents = events.map(\.percent)
            #expect(zip(percents, percents.dropFirst()).allSatisfy { $0 <= $1 }, "\(percents)")
            #expect(percents.filter { $0 == 100 }.count == 1, "\(percents)")
            #expect(percents.last == 100)
            let last = events.last
            #expect(last?.requestsTotal == requests && last?.requestsFinished == requests)
            #expect(last?.bytesReceived == received && last?.bytesExpected == received)
            #expect(last?.bytesSent == sent && last?.bytesToSend == sent)
        }

        func collectProgress(_ queue: RequestQueue) -> Task<[RequestQueue.Progress], Never> {
            let stream = queue.events
            return Task {
                var seen: [RequestQueue.Progress] = []
                for await event in stream {
                    if case .progress(let p) = event { seen.append(p) }
                    if case .allFinished = event { break }
                }
                return seen
            }
        }

        @Test(arguments: [RequestQueue.ProgressMode.simple, .accurate])
        func aggregateDownloadProgress(mode: RequestQueue.ProgressMode) async throws {
            let queue = RequestQueue(
                configuration: .init(maxSimultaneous: 2, progressMode: mode, progressInterval: 0))
            let events = collectProgress(queue)
            let sizes = [300_000, 1_000_000, 50_000, 700_000, 1]
            let requests = sizes.enumerated().map { i, size in
                Request(url: servers.fault("/ok?size=\(size)&drip_ms=5&drip_bytes=65536&tag=\(tag)-\(i)"))
            }
            queue.pause()  // all added, then started (ASINetworkQueue's go)
            for request in requests { queue.add(request) }
            queue.resume()
            let seen = await events.value
            #expect(requests.allSatisfy { $0.statusCode == 200 })
            checkProgress(seen, requests: sizes.count, received: UInt64(sizes.reduce(0, +)), sent: 0)
            #expect(queue.progress.percent == 100)
            if mode == .accurate {
                // Every size is known (HEAD) while the bodies move, so the percent tracks bytes.
                // Not necessarily from the very first body bytes: a GET whose probe ended may
                // start beside a probe still running (two at a time), and its bytes may come
                // before that probe's head (seen on a loaded machine). Before any request
                // finished, the sizes are all in.
                let total = UInt64(sizes.reduce(0, +))
                let known = seen.first { $0.bytesReceived > 0 && $0.bytesExpected == total }
                #expect(known?.requestsFinished == 0, "\(seen.map { ($0.bytesReceived, $0.bytesExpected) })")
                #expect(seen.contains { $0.percent > 0 && $0.requestsFinished == 0 }, "\(seen.map(\.percent))")
            } else {
                #expect(seen.allSatisfy { $0.percent == $0.requestsFinished * 100 / sizes.count || $0.percent == 100 })
            }
        }

        @Test(arguments: [RequestQueue.ProgressMode.simple, .accurate])
        func aggregateUploadProgress(mode: RequestQueue.ProgressMode) async throws {
            let queue = RequestQueue(
                configuration: .init(maxSimultaneous: 2, progressMode: mode, progressInterval: 0))
            let events = collectProgress(queue)
            let sizes = [200_000, 1_000_000, 10]
            let requests = sizes.map { size in
                let request = Request(url: servers.fault("/echo"), method: .post)
                request.body = Data(repeating: 7, count: size)
                return request
            }
            queue.pause()  // all added, then started
            for request in requests { queue.add(request) }
            queue.resume()
            let seen = await events.value
            #expect(requests.allSatisfy { $0.statusCode == 200 })
            let received = requests.reduce(UInt64(0)) { $0 + $1.bytesReceived }
            let total = UInt64(sizes.reduce(0, +))
            checkProgress(seen, requests: sizes.count, received: received, sent: total)
            #expect(queue.progress.percent == 100)
            if mode == .accurate {
                // The body sizes are known when added: every event counts them all.
                #expect(seen.allSatisfy { $0.bytesToSend == total }, "\(seen.map(\.bytesToSend))")
            } else {
                #expect(seen.allSatisfy { $0.percent == $0.requestsFinished * 100 / sizes.count || $0.percent == 100 },
                        "\(seen.map(\.percent))")
            }
        }

        /// Accurate progress learns each GET's size with one HEAD request (a GET's response size
        /// is never known in advance), and sends none for a request with a body, whose size is
        /// known when added; simple progress sends no HEAD at all. Counted by the server.
        @Test(arguments: [RequestQueue.ProgressMode.simple, .accurate])
        func headProbesOnePerGetInAccurateModeOnly(mode: RequestQueue.ProgressMode) async throws {
            let queue = RequestQueue(
                configuration: .init(maxSimultaneous: 3, progressMode: mode, progressInterval: 0))
            let events = collectProgress(queue)
            let getSizes = [1000, 70_000, 1, 300_000, 5]
            let gets = getSizes.enumerated().map { i, size in probe("g\(i)", holdMS: 20, size: size) }
            let posts = (0..<2).map { i in
                let request = probe("p\(i)", holdMS: 20, size: 10)
                request.method = .post
                request.body = Data(repeating: 1, count: 5000)
                return request
            }
            queue.pause()
            for (get, post) in zip(gets, posts) {
                queue.add(get)
                queue.add(post)
            }
            for get in gets.dropFirst(posts.count) { queue.add(get) }
            queue.resume()
            let seen = await events.value
            #expect(gets.allSatisfy { $0.statusCode == 200 } && posts.allSatisfy { $0.statusCode == 200 })
            for (get, size) in zip(gets, getSizes) { #expect(get.data?.count == size) }
            let stats = try await stats()
            let methods = try #require(stats.methods, "the fault server reports no methods")
            var byID: [String: [String]] = [:]
            for (id, method) in zip(stats.order, methods) { byID[id, default: []].append(method) }
            for i in getSizes.indices {
                let want = mode == .accurate ? ["HEAD", "GET"] : ["GET"]
                #expect(byID["g\(i)"] == want, "g\(i): \(byID)")
            }
            for i in posts.indices { #expect(byID["p\(i)"] == ["POST"], "p\(i): \(byID)") }
            #expect(stats.count == getSizes.count * (mode == .accurate ? 2 : 1) + posts.count)
            // The HEAD requests are not part of the batch.
            #expect(seen.last?.requestsTotal == gets.count + posts.count)
            #expect(seen.last?.bytesExpected == UInt64(getSizes.reduce(0, +) + 10 * posts.count))
        }

        @Test func aQueueBudgetIsSharedByItsRequestsOnly() async throws {
            let mib = 1 << 20
            let budget = BandwidthBudget(receive: UInt64(2 * mib))
            let queue = RequestQueue(
                configuration: .init(maxSimultaneous: 4, bandwidthBudget: budget))
            let queued = (0..<2).map { i in
                Request(url: servers.fault("/ok?size=\(2 * mib)&tag=\(tag)-budget-\(i)"))
            }
            let own = BandwidthBudget(receive: UInt64(8 * mib))
            let ownBudget = Request(url: servers.fault("/ok?size=\(2 * mib)&tag=\(tag)-own"))
            ownBudget.bandwidthBudget = own  // its own budget, not the queue's
            let start = Date()
            for request in queued { queue.add(request) }
            queue.add(ownBudget)
            let outside = try await Request(url: servers.fault("/ok?size=\(8 * mib)")).response()
            #expect(outside.data.count == 8 * mib)
            #expect(Date().timeIntervalSince(start) < 1.2, "a request outside the queue was held back")
            await queue.allRequestsFinished()
            let elapsed = Date().timeIntervalSince(start)
            // 4 MiB under 2 MiB/s: 2 s (the own-budget request is not part of it).
            #expect(elapsed > 1.7 && elapsed < 2.3, "2 x 2 MiB under a 2 MiB/s queue budget took \(elapsed) s")
            #expect(queued.allSatisfy { $0.data?.count == 2 * mib })
            #expect(ownBudget.data?.count == 2 * mib)
            #expect(queued[0].bandwidthBudget == nil, "the queue's budget is not written into the request")
        }

        @Test func aQueueSendBudgetIsSharedByItsRequestsOnly() async throws {
            let mib = 1 << 20
            let budget = BandwidthBudget(send: UInt64(mib))
            let queue = RequestQueue(
                configuration: .init(maxSimultaneous: 4, bandwidthBudget: budget))
            func upload(_ size: Int, _ name: String) -> Request {
                let request = Request(url: servers.fault("/echo?tag=\(tag)-\(name)"), method: .post)
                request.body = Data(repeating: 0x5a, count: size)
                return request
            }
            let queued = (0..<2).map { upload(mib, "send-budget-\($0)") }
            let ownBudget = upload(mib, "send-own")
            ownBudget.bandwidthBudget = BandwidthBudget(send: UInt64(8 * mib))  // not the queue's
            let start = Date()
            for request in queued { queue.add(request) }
            queue.add(ownBudget)
            let outside = try await upload(8 * mib, "send-outside").response()
            #expect(outside.headerFields[HTTPField.Name("X-Echo-Body-Length")!] == "\(8 * mib)")
            #expect(Date().timeIntervalSince(start) < 1.2, "an upload outside the queue was held back")
            await queue.allRequestsFinished()
            let elapsed = Date().timeIntervalSince(start)
            // 2 MiB up under 1 MiB/s: 2 s (the own-budget upload is not part of it).
            #expect(elapsed > 1.7 && elapsed < 2.3, "2 x 1 MiB up under a 1 MiB/s queue budget took \(elapsed) s")
            for request in queued + [ownBudget] {
                #expect(request.statusCode == 200)
                #expect(request.responseHeaders[HTTPField.Name("X-Echo-Body-Length")!] == "\(mib)")
            }
            #expect(queued[0].bandwidthBudget == nil, "the queue's budget is not written into the request")
        }

        @Test func aQueueOfOneHundredSharesTheEngineWithPlainRequests() async throws {
            let queue = RequestQueue(maxSimultaneous: 3)
            let queued = (0..<100).map { probe($0, holdMS: 20) }
            for request in queued { queue.add(request) }
            // The default engine's per-origin limit (6) leaves room beside the queue's 3: the
            // plain request does not wait for the queue's 100 (about 0.7 s of holds).
            let plain = try await Request(url: servers.fault("/ok?size=100")).response()
            #expect(plain.statusCode == 200)
            #expect(queue.pendingCount > 0, "the plain request ended only after the queue had started all")
            await queue.allRequestsFinished()
            #expect(queued.allSatisfy { $0.statusCode == 200 })
            let seen = try await stats()
            #expect(seen.count == 100)
            #expect(seen.max_inflight == 3)
        }
    }
}

/// Polls an async condition every 20 ms until it holds or `seconds` pass.
func eventuallyAsync(within seconds: Double = 5, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return try await condition()
}
