// streamingResponse(): the body as an AsyncSequence, with back-pressure reaching the engine.

import Foundation
import Testing
@testable import Tern

extension TernTests {
    @Suite struct Streaming {
        /// A consumer slower than the network: the engine pauses reading, so what waits stays
        /// near the limit, and every byte arrives in order.
        @Test func aSlowConsumerPausesTheEngineAndGetsEveryByte() async throws {
            let servers = try Servers.get()
            let size = 8 << 20
            let request = Request(url: servers.fault("/ok?size=\(size)"))
            let limit = 256 << 10
            let response = try await request.streamingResponse(bufferLimit: limit)
            #expect(response.statusCode == 200)
            var received = Data()
            var pieces = 0
            for try await chunk in response.body {
                received.append(chunk)
                pieces += 1
                if pieces % 8 == 0 { try await Task.sleep(for: .milliseconds(5)) }
            }
            #expect(received.count == size)
            #expect(received == pattern(size))
            let pipe = try #require(response.body.pipe as BodyPipe?)
            // One buffer of the engine may arrive after the pause: limit + 64 KiB at most.
            #expect(pipe.highWater <= limit + (64 << 10), "\(pipe.highWater) bytes waited")
            #expect(pipe.highWater >= limit, "the consumer was slow enough to pause the engine")
        }

        /// The engine thread decides to pause and is preempted; meanwhile the consumer drains
        /// the pieces and resumes. The late pause must not stop reading for good (it did: the
        /// stream hung once the consumer had taken every piece).
        @Test func aResumeThatOvertakesAPauseKeepsTheStreamGoing() async throws {
            let servers = try Servers.get()
            let size = 4 << 20
            let request = Request(url: servers.fault("/ok?size=\(size)"))
            let response = try await request.streamingResponse(bufferLimit: 64 << 10)
            let pipe = try #require(response.body.pipe as BodyPipe?)
            let delayed = Locked(0)
            pipe.setPauseDecidedHook {
                // The first few pauses wait long enough for the consumer to drain and resume.
                if delayed.withLock({ $0 += 1; return $0 }) <= 3 { usleep(150_000) }
            }
            let received = try await withThrowingTaskGroup(of: Int?.self) { group in
                group.addTask {
                    var count = 0
                    for try await chunk in response.body {
                        // Slow until the hook has run once: the engine may have paused (and been
                        // resumed) before the hook was set, and a consumer as fast as the engine
                        // never makes it pause again (the test then proved nothing).
                        if delayed.withLock({ $0 }) == 0 { try await Task.sleep(for: .milliseconds(10)) }
                        count += chunk.count
                    }
                    return count
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(30))
                    return nil
                }
                let first = try await group.next() ?? nil
                group.cancelAll()
                request.cancel()
                return first
            }
            #expect(received == size, "the stream stalled after a resume overtook a pause")
            #expect(delayed.withLock { $0 } >= 1, "the engine paused at least once")
        }

        @Test func otherRequestsGoOnWhileOneIsPaused() async throws {
            let servers = try Servers.get()
            let engine = try Engine(configuration: .init(maxConnectionsPerOrigin: 4))
            let slow = Request(url: servers.fault("/ok?size=\(16 << 20)"))
            slow.engine = engine
            let response = try await slow.streamingResponse(bufferLimit: 128 << 10)
            var iterator = response.body.makeAsyncIterator()
            _ = try await iterator.next()  // then stop consuming: the engine pauses this one
            try await Task.sleep(for: .milliseconds(200))
            let other = Request(url: servers.nginx("/64k.txt"))
            other.engine = engine
            #expect(try await other.response().statusCode == 200)
            slow.cancel()
        }

        /// A task cancelled before it calls streamingResponse() cancels the request at once
        /// (its cancellation handler ran before anything was running to cancel).
        @Test func aTaskCancelledBeforehandCancelsTheRequest() async throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/ok?size=10&delay_ms=5000"))
            let started = ContinuousClock.now
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await request.streamingResponse()
            }
            await #expect(throws: TernError.cancelled) { _ = try await task.value }
            #expect(ContinuousClock.now - started < .seconds(3))
        }

        @Test func aFailureBeforeTheHeadIsThrown() async {
            let request = Request(url: URL(string: "http://127.0.0.1:1/")!)
            await #expect(throws: TernError.connectionRefused) {
                _ = try await request.streamingResponse()
            }
        }

        @Test func aTruncatedBodyEndsWithItsError() async throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/truncate?len=100000&send=50000"))
            let response = try await request.streamingResponse()
            var count = 0
            await #expect(throws: TernError.partialBody) {
                for try await chunk in response.body { count += chunk.count }
            }
            #expect(count == 50000)
        }
    }
}
