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
    

        /// A /flaky URL with a key of its own (the server counts requests per key).
        func flaky(_ servers: Servers, _ query: String) -> (url: URL, key: String) {
            let key = "retry-\(UInt64.random(in: 0...UInt64.max))"
            return (servers.fault("/flaky?key=\(key)&\(query)"), key)
        }

        /// A directory removed by the caller's defer, and a file path in it.
        func scratchFile() throws -> (dir: URL, file: String) {
            let dir = FileManager.default.temporaryDirectory
                .appendingPathComponent("tern-retry-\(UInt64.random(in: 0...UInt64.max))")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            return (dir, dir.appendingPathComponent("out.bin").path)
        }

        /// How many requests the fault server saw for a /flaky key.
        func flakyCount(_ servers: Servers, _ key: String) throws -> Int {
            let request = Request(url: servers.fault("/flaky-count?key=\(key)"))
            request.callbackQueue = .global()
            let response = try request.executeAndWait()
            return Int(response.string?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? -1
        }

        @Test func transientStatusesAreRetriedUntilASuccess() throws {
            let servers = try Servers.get()
            let (url, key) = flaky(servers, "fail=2&status=503&size=4096")
            let request = Request(url: url)
            request.maxRetries = 3
            request.callbackQueue = .global()
            let response = try request.executeAndWait()
            #expect(response.statusCode == 200)
            #expect(response.data == pattern(4096))
            #expect(response.attempts == 3)
            #expect(try flakyCount(servers, key) == 3)
        }

        @Test func whenRetriesRunOutTheLastResponseIsTheResult() throws {
            let servers = try Servers.get()
            let (url, key) = flaky(servers, "fail=5&status=502")
            let request = Request(url: url)
            request.maxRetries = 1
            request.callbackQueue = .global()
            let response = try request.executeAndWait()
            #expect(response.statusCode == 502)
            #expect(response.string == "failure 2\n")
            #expect(response.attempts == 2)
            #expect(try flakyCount(servers, key) == 2)
        }

        @Test func retryAfterIsHonoured() throws {
            let servers = try Servers.get()
            let (url, _) = flaky(servers, "fail=1&status=429&retry_after=1")
            let request = Request(url: url)
            request.maxRetries = 1
            request.callbackQueue = .global()
            let started = Date()
            let response = try request.executeAndWait()
            let elapsed = Date().timeIntervalSince(started)
            #expect(response.statusCode == 200)
            #expect(elapsed >= 1, "Retry-After: 1 asked for a second, took \(elapsed) s")
        }

        @Test func aPostIsNotRepeatedAfterA503() throws {
            let servers = try Servers.get()
            let (url, key) = flaky(servers, "fail=1&status=503")
            let request = Request(url: url, method: .post)
            request.body = Data("x".utf8)
            request.maxRetries = 3
            request.callbackQueue = .global()
            #expect(try request.executeAndWait().statusCode == 503)
            #expect(try flakyCount(servers, key) == 1)
        }

        @Test func aRetriedDownloadContinuesFromItsPartFile() throws {
            let servers = try Servers.get()
            let (dir, file) = try scratchFile()
            defer { try? FileManager.default.removeItem(at: dir) }
            let size = 300_000
            let (url, _) = flaky(servers, "fail=1&how=truncate&size=\(size)")
            let request = Request(url: url)
            request.downloadFile = file
            request.maxRetries = 2
            request.callbackQueue = .global()
            let response = try request.executeAndWait()
            #expect(response.statusCode == 206, "the second attempt asked for the rest")
            #expect(response.offset == UInt64(size / 2))
            #expect(response.attempts == 2)
            #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == pattern(size))
            #expect(!FileManager.default.fileExists(atPath: file + ".part"))
        }

        @Test func aDownloadThatRunsOutOfRetriesLeavesNoPartFile() throws {
            let servers = try Servers.get()
            let (dir, file) = try scratchFile()
            defer { try? FileManager.default.removeItem(at: dir) }
            try Data("good".utf8).write(to: URL(fileURLWithPath: file))
            let (url, key) = flaky(servers, "fail=9&how=truncate&size=100000")
            let request = Request(url: url)
            request.downloadFile = file
            request.maxRetries = 2
            request.callbackQueue = .global()
            #expect(throws: TernError.partialBody) { try request.executeAndWait() }
            #expect(try flakyCount(servers, key) == 3)
            #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == Data("good".utf8))
            #expect(!FileManager.default.fileExists(atPath: file + ".part"))
            #expect(!FileManager.default.fileExists(atPath: file + ".part.validator"))
        }
    }
}
