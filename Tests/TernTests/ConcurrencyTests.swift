// Many requests on one engine, and the engine's own counters proving nothing leaks: no request
// left active, every C request object freed, engines torn down from any thread.

import Dispatch
import Foundation
import Synchronization
import Testing
@testable import Tern

extension TernTests {
    @Suite struct Concurrency {
        @Test func aThousandConcurrentRequestsOnOneEngine() async throws {
            let servers = try Servers.get()
            let engine = try Engine(configuration: .init(maxConnectionsPerOrigin: 64))
            let expected = try fixture(servers, "1k.bin")
            let queue = DispatchQueue(label: "tern.test.thousand", attributes: .concurrent)
            let good = Atomic<Int>(0)
            let failures = Recorder<String>()
            let count = 1000
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = Atomic<Int>(0)
                for i in 0..<count {
                    let request = Request(url: servers.nginx("/1k.bin?i=\(i)"))
                    request.engine = engine
                    request.callbackQueue = queue
                    request.onCompletion { request in
                        if request.statusCode == 200, request.data == expected {
                            good.add(1, ordering: .relaxed)
                        } else {
                            failures.append("\(i): \(request.statusCode) \(String(describing: request.error))")
                        }
                        if done.add(1, ordering: .relaxed).newValue == count { continuation.resume() }
                    }
                    request.execute()
                }
            }
            #expect(good.load(ordering: .relaxed) == count, "\(failures.all.prefix(5))")
            let stats = engine._stats
            #expect(stats.requestsActive == 0)
            #expect(stats.requestsCompleted == UInt64(count))
            #expect(stats.connectionsOpened <= 64)
            #expect(stats.reused >= UInt64(count) - 64)
        }

        @Test func noEngineResourcesLeakAfterRequestsEnd() async throws {
            let servers = try Servers.get()
            let engine = try Engine()
            let baseline = engine._stats.requestsLive
            do {
                var requests: [Request] = []
                @discardableResult
                func make(_ url: URL, _ configure: (Request) -> Void = { _ in }) -> Request {
                    let request = Request(url: url)
                    request.engine = engine
                    request.callbackQueue = .global()
                    configure(request)
                    requests.append(request)
                    return request
                }
                let file = temporaryPath("leak")
                defer { try? FileManager.default.removeItem(atPath: file) }
                make(servers.nginx("/1k.bin"))
                make(servers.fault("/ok?size=1000000"))  // > 256 KiB: kept without a copy
                make(servers.nginx("/64k.txt")) { $0.downloadFile = file }
                make(servers.nginx("/64k.txt")) { $0.dataHandler = { _ in true } }
                make(URL(string: "http://127.0.0.1:1/")!) { $0.maxRetries = 2 }
                make(servers.fault("/truncate"))
                make(servers.fault("/stall?stall_ms=2000")) { $0.timeouts.body = 0.2 }
                let cancelled = make(servers.fault("/slowheaders?delay_ms=2000"))
                let cleared = make(servers.fault("/slowheaders?delay_ms=2000")) {
                    $0.listener = { _, _, _ in true }
                }
                for request in requests { request.execute() }
                cancelled.cancel()
                cleared.clearDelegatesAndCancel()
                for request in requests { _ = try? request.executeAndWait() }
                #expect(requests[1].data?.count == 1_000_000)
                #expect(engine._stats.requestsActive == 0)
            }
            #expect(
                eventually { engine._stats.requestsLive <= baseline },
                "C requests still live: \(engine._stats)")
            #expect(engine._stats.requestsActive == 0)
            #expect(engine._stats.requestsCompleted >= 11)
        }

        @Test func anEngineReleasedByItsLastRequestShutsDown() async throws {
            let servers = try Servers.get()
            weak var weakEngine: Engine?
            do {
                let engine = try Engine()
                weakEngine = engine
                let request = Request(url: servers.nginx("/1k.bin"))
                request.engine = engine
                request.callbackQueue = .global()
                request.execute()
            }
            // The request (and its plan) held the engine last; it lets go on the engine's own
            // thread, which must not join itself.
            #expect(eventually { weakEngine == nil })
        }

        /// A host name is resolved once for a burst of new connections, and every time with the
        /// DNS cache off (`dnsCacheTimeout: 0`).
        @Test func dnsAnswersAreReusedForTheCacheTimeout() async throws {
            let servers = try Servers.get()
            for (timeout, lookups) in [(60.0, UInt64(1)), (0.0, UInt64(3))] {
                let engine = try Engine(
                    configuration: .init(idleTimeout: 0, dnsCacheTimeout: timeout))
                for _ in 0..<3 {
                    let request = Request(
                        url: URL(string: "http://localhost:\(servers.nginxPort)/1k.bin")!)
                    request.engine = engine
                    let response = try await request.response()
                    #expect(response.statusCode == 200)
                }
                #expect(engine._stats.connectionsOpened == 3)
                #expect(engine._stats.dnsLookups == lookups, "dnsCacheTimeout \(timeout)")
            }
            #expect(throws: TernError.invalidArgument) {
                _ = try Engine(configuration: .init(dnsCacheTimeout: -1))
            }
        }

        @Test func configurationIsValidated() {
            #expect(throws: TernError.invalidArgument) {
                _ = try Engine(configuration: .init(bufferSize: 10))
            }
            #expect(throws: TernError.invalidArgument) {
                _ = try Engine(configuration: .init(pipelineDepth: 0))
            }
        }
    }
}
