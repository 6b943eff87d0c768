// maxRetries: transient failures get fresh attempts, only when safe; delays double; the total
// timeout spans attempts; cancel works between attempts; listeners hear one ending.

import Dispatch
import Foundation
import Testing
@testable import Tern

extension TernTests {
    @Suite struct Retry {
        func run(_ request: Request) -> TernError? {
            request.callbackQueue = .global()
            do {
                try request.executeAndWait()
                return nil
            } catch {
                return error
            }
        }

        @Test func refusedIsRetriedForAnyMethod() {
            let request = Request(url: URL(string: "http://127.0.0.1:1/")!, method: .post)
            request.maxRetries = 2
            #expect(run(request) == .connectionRefused)
            #expect(request.attempts == 3)
        }

        @Test func resetIsRetriedOnlyWhenIdempotent() throws {
            let servers = try Servers.get()
            let get = Request(url: servers.fault("/reset"))
            get.maxRetries = 2
            #expect(run(get) == .connectionReset)
            #expect(get.attempts == 3)

            let post = Request(url: servers.fault("/reset"), method: .post)
            post.body = Data("x".utf8)
            post.maxRetries = 2
            #expect(run(post) == .connectionReset)
            #expect(post.attempts == 1, "a POST that reached the server is not sent twice")
        }

        @Test func delaysDouble() {
            let request = Request(url: URL(string: "http://127.0.0.1:1/")!)
            request.maxRetries = 2
            request.retryDelay = 0.2
            let started = Date()
            #expect(run(request) == .connectionRefused)
            let elapsed = Date().timeIntervalSince(started)
            #expect(elapsed >= 0.6 && elapsed < 2, "0.2 + 0.4 s expected, took \(elapsed)")
        }

        @Test func totalTimeoutSpansAttempts() {
            let request = Request(url: URL(string: "http://127.0.0.1:1/")!)
            request.maxRetries = 100
            request.retryDelay = 0.1
            request.timeouts.total = 1
            let started = Date()
            _ = run(request)
            #expect(Date().timeIntervalSince(started) < 1.5)
            #expect(request.attempts < 10)
        }

        @Test func cancelBetweenAttempts() {
            let request = Request(url: URL(string: "http://127.0.0.1:1/")!)
            request.maxRetries = 5
            request.retryDelay = 2
            request.callbackQueue = .global()
            request.execute()
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { request.cancel() }
            let started = Date()
            #expect(throws: TernError.cancelled) { try request.executeAndWait() }
            #expect(Date().timeIntervalSince(started) < 1)
            #expect(request.attempts == 1)
        }

        @Test func streamedBytesAreNeverRepeated() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/truncate?len=100000&send=50000"))
            request.maxRetries = 3
            let received = Recorder<Int>()
            request.dataHandler = { data in
                received.append(data.count)
                return true
            }
            #expect(run(request) == .partialBody)
            #expect(request.attempts == 1)
            #expect(received.all.reduce(0, +) == 50000)
        }

        @Test func listenerHearsOneEndingAcrossAttempts() async throws {
            let servers = try Servers.get()
            let events = Recorder<Event>()
            let request = Request(url: servers.fault("/truncate?len=100000&send=50000"))
            request.maxRetries = 2
            request.callbackQueue = DispatchQueue(label: "tern.test.retry")
            request.listener = { _, state, percent in
                events.append(Event(state: state, percent: percent, onQueue: true))
                return true
            }
            await runToCompletion(request)
            #expect(request.attempts == 3)
            let percents = events.all.map(\.percent)
            #expect(percents.filter { $0 == -1 }.count == 1)
            #expect(percents.last == -1)
            #expect(percents.dropLast() == percents.dropLast().sorted())
        }
    }
}
