// executeAndWait(): no deadlock on the queue its listener targets (main or custom), the events
// still run on that queue, completion handlers run before it returns, and the calls that
// would deadlock throw instead.

import Dispatch
import Foundation
import Testing
@testable import Tern

extension TernTests {
    @Suite struct ExecuteAndWait {
        @MainActor @Test func onTheMainQueue() throws {
            let servers = try Servers.get()
            let probe = QueueProbe(.main)
            #expect(probe.isCurrent, "a @MainActor test runs on the main queue")
            let events = Recorder<Event>()
            let completions = Recorder<Bool>()
            let request = Request(url: servers.nginx("/64k.txt"))
            request.callbackQueue = .main
            request.listener = { _, state, percent in
                events.append(Event(state: state, percent: percent, onQueue: probe.isCurrent))
                return true
            }
            request.onCompletion { _ in completions.append(probe.isCurrent) }
            let response = try request.executeAndWait()  // would deadlock if it waited for main
            #expect(response.statusCode == 200)
            #expect(response.data.count == 65536)
            #expect(completions.all == [true], "completion ran on main before returning")
            #expect(!events.all.isEmpty)
            #expect(events.all.allSatisfy { $0.onQueue })
            #expect(events.all.last == Event(state: .download, percent: 100, onQueue: true))
        }

        @Test func onACustomSerialQueue() throws {
            let servers = try Servers.get()
            let queue = DispatchQueue(label: "tern.test.wait")
            let probe = QueueProbe(queue)
            let events = Recorder<Event>()
            let request = Request(url: servers.nginx("/64k.txt"))
            request.callbackQueue = queue
            request.listener = { _, state, percent in
                events.append(Event(state: state, percent: percent, onQueue: probe.isCurrent))
                return true
            }
            let status = queue.sync { (try? request.executeAndWait())?.statusCode }
            #expect(status == 200)
            #expect(events.all.allSatisfy { $0.onQueue })
            #expect(events.all.last?.percent == 100)
        }

        @Test func fromAnotherThreadWaitsForTheCompletionHandlers() throws {
            let servers = try Servers.get()
            let queue = DispatchQueue(label: "tern.test.other")
            let probe = QueueProbe(queue)
            let completions = Recorder<Bool>()
            let request = Request(url: servers.nginx("/1k.bin"))
            request.callbackQueue = queue
            request.onCompletion { _ in
                usleep(100_000)
                completions.append(probe.isCurrent)
            }
            let response = try request.executeAndWait()
            #expect(response.data == (try fixture(servers, "1k.bin")))
            #expect(completions.all == [true])
        }

        @Test func throwsTheFailure() {
            let request = Request(url: URL(string: "http://127.0.0.1:1/")!)
            request.callbackQueue = .global()
            #expect(throws: TernError.connectionRefused) { try request.executeAndWait() }
            #expect(request.error?.code == .connectionRefused)
            #expect(request.isFinished)
            #expect(!request.isExecuting)
        }

        @Test func joinsARunningRequestAndRunsAgainWhenFinished() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/ok?size=1000&delay_ms=200"))
            request.callbackQueue = .global()
            #expect(request.execute())
            #expect(!request.execute(), "already running")
            #expect(request.isExecuting)
            let first = try request.executeAndWait()
            #expect(first.statusCode == 200)
            #expect(!request.isExecuting)
            let second = try request.executeAndWait()
            #expect(second.statusCode == 200)
            #expect(second.isReused)
        }

        @Test func fromTheEngineThreadThrowsInsteadOfDeadlocking() throws {
            let servers = try Servers.get()
            let inner = Recorder<String>()
            let request = Request(url: servers.nginx("/1k.bin"))
            request.callbackQueue = .global()
            request.headHandler = { _ in
                let other = Request(url: servers.nginx("/1k.bin"))
                do {
                    try other.executeAndWait()
                    inner.append("returned")
                } catch {
                    inner.append((error as? TernError)?.code.name ?? "?")
                }
                return true
            }
            try request.executeAndWait()
            #expect(inner.all == ["EINVAL"])
        }

        @Test func fromItsOwnListenerThrowsInsteadOfDeadlocking() throws {
            let servers = try Servers.get()
            let inner = Recorder<String>()
            // A slow body keeps the request running while its first download event is heard.
            let request = Request(url: servers.fault("/ok?size=100000&drip_ms=50&drip_bytes=20000"))
            request.callbackQueue = DispatchQueue(label: "tern.test.own")
            request.listener = { request, state, _ in
                if state == .download && inner.count == 0 {
                    do {
                        try request.executeAndWait()
                        inner.append("returned")
                    } catch {
                        inner.append((error as? TernError)?.code.name ?? "?")
                    }
                }
                return true
            }
            try request.executeAndWait()
            #expect(inner.all == ["EINVAL"])
        }
    }
}
