// Bodies that arrive over time (RequestBody.stream(_:length:contentType:) over an
// AsyncSequence): pauses longer than the body timeout, other requests of the same engine going
// on while a body waits, errors, cancellation, back-pressure, and a body that cannot be
// replayed on a 307.

import Foundation
import Testing
@testable import Tern

/// Pieces handed out one by one, each after a pause (the first one too).
struct PacedChunks: AsyncSequence, Sendable {
    let pieces: [ArraySlice<UInt8>]
    let pause: Duration

    struct AsyncIterator: AsyncIteratorProtocol {
        var rest: ArraySlice<ArraySlice<UInt8>>
        let pause: Duration

        mutating func next() async throws -> ArraySlice<UInt8>? {
            guard let piece = rest.popFirst() else { return nil }
            try await Task.sleep(for: pause)
            return piece
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(rest: pieces[...], pause: pause) }
}

/// As many 64 KiB chunks as are asked for (up to `limit` bytes), counting what was pulled.
struct CountedChunks: AsyncSequence, Sendable {
    let pulled: Locked<Int>
    let limit: Int

    struct AsyncIterator: AsyncIteratorProtocol {
        let pulled: Locked<Int>
        let limit: Int

        mutating func next() async -> [UInt8]? {
            let more = pulled.withLock { count in
                guard count < limit else { return false }
                count += 65_536
                return true
            }
            return more ? [UInt8](repeating: 0x61, count: 65_536) : nil
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(pulled: pulled, limit: limit) }
}

/// Waits up to `seconds` for `condition`.
private func eventually(_ seconds: Double, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while !condition() {
        if ContinuousClock.now > deadline { return false }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return true
}

private func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

extension TernTests {
    @Suite struct SequenceBodies {
        @Test func pausesLongerThanTheBodyTimeoutDoNotTimeOut() async throws {
            let servers = try Servers.get()
            let whole = [UInt8](pattern(400_001))
            let pieces = [whole[..<100_000], whole[100_000..<100_001], whole[100_001...]]
            let request = Request(url: servers.fault("/echo"), method: .post)
            request.timeouts.body = 0.3
            request.requestBody = .stream(
                PacedChunks(pieces: pieces, pause: .milliseconds(700)), contentType: "application/x-paced")
            let start = ContinuousClock.now
            let echo = try Echo(await request.response().data)
            #expect(echo.bodyLength == 400_001)
            #expect(echo.bodySHA256 == sha256(Data(whole)))
            #expect(echo.json["chunked"] as? Bool == true)
            #expect(echo.headers("Content-Type") == ["application/x-paced"])
            #expect(seconds(ContinuousClock.now - start) >= 2.0, "the pauses were waited for")

            // A known length goes as Content-Length; Data chunks are fine too.
            let known = Request(url: servers.fault("/echo"), method: .put)
            known.timeouts.body = 0.3
            let (chunks, feed) = AsyncStream.makeStream(of: Data.self)
            known.requestBody = .stream(chunks, length: 7)
            known.execute()
            let knownResponse = Task { try await known.response() }  // joined before it can end
            feed.yield(Data("abc".utf8))
            try await Task.sleep(for: .milliseconds(500))
            feed.yield(Data())  // skipped
            feed.yield(Data("defg".utf8))
            feed.finish()
            let knownEcho = try Echo(await knownResponse.value.data)
            #expect(knownEcho.headers("Content-Length") == ["7"])
            #expect(knownEcho.json["chunked"] as? Bool == false)
            #expect(knownEcho.bodySHA256 == sha256(Data("abcdefg".utf8)))
        }

        @Test func aWaitingBodyDoesNotHoldUpTheEngine() async throws {
            let servers = try Servers.get()
            let engine = try Engine()
            let (chunks, feed) = AsyncStream.makeStream(of: [UInt8].self)
            let upload = Request(url: servers.fault("/echo"), method: .put)
            upload.engine = engine
            upload.requestBody = .stream(chunks)
            feed.yield([UInt8](pattern(70_000)))
            upload.execute()
            // Joined while the body waits: once fed, the upload may end before a later
            // response() call, which would then start it over (and find its stream spent).
            let uploaded = Task { try await upload.response() }
            try await Task.sleep(for: .milliseconds(300))  // sent what there is; waits

            for _ in 0..<3 {
                let quick = Request(url: servers.fault("/ok"))
                quick.engine = engine
                let start = ContinuousClock.now
                let response = try await quick.response()
                #expect(response.statusCode == 200)
                #expect(seconds(ContinuousClock.now - start) < 1, "the loop is free while the body waits")
            }
            #expect(upload.isExecuting, "the upload still waits for its body")

            feed.yield([UInt8](pattern(30_000, from: 70_000)))
            feed.finish()
            let echo = try Echo(await uploaded.value.data)
            #expect(echo.bodyLength == 100_000)
            #expect(echo.bodySHA256 == sha256(pattern(100_000)))
        }

        @Test func anErrorFromTheSequenceFailsTheRequest() async throws {
            struct Unplugged: Error, CustomStringConvertible {
                var description: String { "sensor unplugged" }
            }
            let servers = try Servers.get()
            let (chunks, feed) = AsyncThrowingStream.makeStream(of: [UInt8].self)
            let request = Request(url: servers.fault("/echo"), method: .post)
            request.requestBody = .stream(chunks)
            request.execute()
            let ended = Task { try await request.response() }  // joined before it can end
            feed.yield([1, 2, 3])
            try await Task.sleep(for: .milliseconds(200))
            feed.finish(throwing: Unplugged())
            let error = try await #require(throws: TernError.self) { try await ended.value }
            #expect(error.code == .fileReadFailed)
            #expect(error.message.contains("sensor unplugged"), "\(error.message)")
        }

        @Test func cancellingStopsReadingTheSequence() async throws {
            let servers = try Servers.get()
            let terminated = Locked(false)
            let (chunks, feed) = AsyncStream.makeStream(of: [UInt8].self)
            feed.onTermination = { _ in terminated.withLock { $0 = true } }
            let request = Request(url: servers.fault("/echo"), method: .post)
            request.requestBody = .stream(chunks)
            feed.yield([1, 2, 3])
            let task = Task { try await request.response() }
            try await Task.sleep(for: .milliseconds(300))
            #expect(!terminated.withLock { $0 })
            task.cancel()
            let error = try await #require(throws: TernError.self) { try await task.value }
            #expect(error.code == .cancelled)
            #expect(await eventually(2) { terminated.withLock { $0 } }, "the producer stopped")

            // The sequence was read: the body cannot be sent again.
            let again = try await #require(throws: TernError.self) { try await request.response() }
            #expect(again.code == .fileReadFailed)
            #expect(again.message.contains("only once"), "\(again.message)")
        }

        @Test func theProducerStopsWhenTheBufferIsFull() async throws {
            let servers = try Servers.get()
            let pulled = Locked(0)
            // The server answers after 3 s without reading the body: the socket buffers fill,
            // then the body's buffer, then the producer must stop pulling.
            let request = Request(url: servers.fault("/slowheaders?delay_ms=3000&early=1"), method: .post)
            request.requestBody = .stream(CountedChunks(pulled: pulled, limit: 1 << 30))
            request.execute()
            try await Task.sleep(for: .milliseconds(1500))
            let first = pulled.withLock { $0 }
            try await Task.sleep(for: .milliseconds(300))
            let second = pulled.withLock { $0 }
            #expect(first > 0)
            #expect(second < 48 << 20, "pulled \(second) bytes for a server that reads none")
            #expect(second == first, "nothing more is pulled while nothing is sent")
            request.cancel()
            _ = try? await request.response()
        }

        @Test func aReadSequenceIsNotReplayedOnA307() async throws {
            let servers = try Servers.get()
            let target = servers.fault("/redirect?status=307&to=/echo")
            let request = Request(url: target, method: .post)
            request.maxRedirects = 3
            request.requestBody = .stream(PacedChunks(pieces: [[1, 2, 3]], pause: .milliseconds(10)))
            let error = try await #require(throws: TernError.self) { try await request.response() }

            // The same as for a closure stream.
            let closure = Request(url: target, method: .post)
            closure.maxRedirects = 3
            let once = Locked(false)
            closure.requestBody = .stream { buffer in
                once.withLock { done in
                    if done { return 0 }
                    done = true
                    buffer.copyBytes(from: [1, 2, 3])
                    return 3
                }
            }
            let closureError = try await #require(throws: TernError.self) { try await closure.response() }
            #expect(error.code == closureError.code)
            #expect(error.code == .redirectRefused, "\(error)")
        }
    }
}
