// The client generated from openapi.yaml (Generated/) running on TernTransport against the
// fault-injection server: typed calls, streamed uploads and downloads, undocumented statuses,
// cancellation and errors.

import Dispatch
import Foundation
import HTTPTypes
import OpenAPIRuntime
import Synchronization
import Tern
import TernOpenAPI
import Testing

/// A generated client for the fault server over a Tern transport.
func makeClient(_ servers: TestServers, configuration: TernTransport.Configuration = .init()) -> Client {
    Client(serverURL: servers.fault("/"), transport: TernTransport(configuration: configuration))
}

/// SHA-256 (hex) of the faultserver pattern's first `count` bytes (byte i is i % 251), worked
/// out by python3 so the test needs no hashing library; on a Dispatch thread, so that the
/// wait blocks none of Swift concurrency's few threads (two on a 2-core machine).
func patternSHA256(_ count: Int) async -> String {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(returning: patternSHA256Now(count)) }
    }
}

private func patternSHA256Now(_ count: Int) -> String {
    let script = """
        import hashlib, sys
        n = int(sys.argv[1]); block = bytes(i % 251 for i in range(251 * 4096)); h = hashlib.sha256()
        while n > 0:
            k = min(n, len(block)); h.update(block[:k]); n -= k
        print(h.hexdigest())
        """
    let out = run("/usr/bin/env", ["python3", "-c", script, String(count)]).output
    return out.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// The pattern as chunks of `chunk` bytes, `count` bytes in all, produced lazily: each chunk
/// is handed out when the transport asks for it (the whole body is never in memory).
struct PatternChunks: AsyncSequence, Sendable {
    typealias Element = ArraySlice<UInt8>
    let count: Int
    let chunk: Int
    /// How many chunks were made.
    let produced = Counter()
    /// The pattern, long enough for a chunk from any point of it.
    let block: [UInt8]

    init(count: Int, chunk: Int) {
        self.count = count
        self.chunk = chunk
        block = (0..<(chunk + 251)).map { UInt8($0 % 251) }
    }

    func makeAsyncIterator() -> Iterator { Iterator(source: self) }

    struct Iterator: AsyncIteratorProtocol {
        let source: PatternChunks
        var offset = 0

        mutating func next() async -> ArraySlice<UInt8>? {
            guard offset < source.count else { return nil }
            let n = Swift.min(source.chunk, source.count - offset)
            // The pattern repeats every 251 bytes: a chunk at `offset` is a slice of a longer
            // run of it, from offset % 251.
            let start = offset % 251
            offset += n
            source.produced.add(1)
            return source.block[start..<(start + n)]
        }
    }
}

/// A count shared between tasks.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    func add(_ n: Int) { value.add(n, ordering: .relaxed) }
    var current: Int { value.load(ordering: .relaxed) }
}

@Suite struct TernTransportTests {
    @Test func typedCallsSucceed() async throws {
        let servers = try TestServers.get()
        let client = makeClient(servers)
        let echo = try await client.getEcho(query: .init(note: "hello tern"), headers: .init(xTernTest: "typed"))
            .ok.body.json
        #expect(echo.method == "GET")
        #expect(echo.path == "/echo")
        #expect(echo.target.contains("note=hello%20tern"), "\(echo.target)")
        #expect(echo.headers.contains(["X-Tern-Test", "typed"]), "\(echo.headers)")
        #expect(echo.bodyLength == 0)

        let small = try await client.upload(body: .binary(HTTPBody("twelve bytes")))
        let ok = try small.ok
        #expect(try ok.body.json.bodyLength == 12)
        #expect(ok.headers.xEchoBodySha256 == (try ok.body.json.bodySha256))
        #expect(try ok.body.json.headers.contains { $0.first?.lowercased() == "content-length" && $0.last == "12" })
    }

    @Test func aLargeStreamedUploadArrivesWhole() async throws {
        let servers = try TestServers.get()
        let client = makeClient(servers)
        let size = 50 << 20
        let expected = await patternSHA256(size)
        // Known length: sent with Content-Length.
        let chunks = PatternChunks(count: size, chunk: 64 << 10)
        let sized = HTTPBody(chunks, length: .known(Int64(size)), iterationBehavior: .single)
        let echo = try await client.upload(body: .binary(sized)).ok.body.json
        #expect(echo.bodyLength == Int64(size))
        #expect(echo.bodySha256 == expected)
        #expect(echo.chunked == false)
        #expect(chunks.produced.current == size / (64 << 10))
        // Unknown length: sent chunked.
        let unsized = HTTPBody(
            PatternChunks(count: size, chunk: 100_000), length: .unknown, iterationBehavior: .single)
        let chunked = try await client.upload(body: .binary(unsized)).ok.body.json
        #expect(chunked.bodyLength == Int64(size))
        #expect(chunked.bodySha256 == expected)
        #expect(chunked.chunked == true)
    }

    @Test func aStreamedDownloadIsConsumedChunkByChunk() async throws {
        let servers = try TestServers.get()
        // A small buffer limit and a slow consumer: the engine pauses and resumes reading.
        let client = makeClient(servers, configuration: .init(responseBufferLimit: 128 << 10))
        let size: Int64 = 16 << 20
        let body = try await client.download(query: .init(size: size)).ok.body.binary
        #expect(body.length == .known(size))
        var received = 0
        var chunks = 0
        var inOrder = true
        for try await chunk in body {
            for (i, byte) in chunk.enumerated() where byte != UInt8((received + i) % 251) {
                inOrder = false
                break
            }
            received += chunk.count
            chunks += 1
            if chunks % 16 == 0 { try await Task.sleep(for: .milliseconds(2)) }
        }
        #expect(received == Int(size))
        #expect(inOrder)
        #expect(chunks > 16, "\(chunks) chunks")

        // Chunked transfer coding: no length known up front.
        let chunked = try await client.download(query: .init(size: 300_000, chunked: 1)).ok.body.binary
        #expect(chunked.length == .unknown)
        let collected = try await [UInt8](collecting: chunked, upTo: 1 << 20)
        #expect(collected.count == 300_000)
    }

    @Test func anUndocumentedStatusIsTheUndocumentedCase() async throws {
        let servers = try TestServers.get()
        let client = makeClient(servers)
        let output = try await client.getStatus(path: .init(code: 404))
        guard case .undocumented(let statusCode, let payload) = output else {
            Issue.record("expected .undocumented, got \(output)")
            return
        }
        #expect(statusCode == 404)
        #expect(payload.headerFields[.contentType] == "application/octet-stream")
        // The documented case still works on the same transport.
        let ok = try await client.getStatus(path: .init(code: 200))
        #expect(throws: Never.self) { try ok.ok }
    }

    @Test func cancellingTheCallCancelsTheRequest() async throws {
        let servers = try TestServers.get()
        let client = makeClient(servers)
        // The head would come after 30 s; the task is cancelled after 300 ms. (The bound on
        // the time it takes is loose: a loaded 2-core machine running the whole suite can
        // delay any task by seconds; not waiting for the server is what counts.)
        let call = Task { try await client.download(query: .init(size: 10, delayMs: 30_000)) }
        try await Task.sleep(for: .milliseconds(300))
        let cancelled = ContinuousClock.now
        call.cancel()
        let result = await call.result
        let elapsed = ContinuousClock.now - cancelled
        #expect(elapsed < .seconds(10), "took \(elapsed)")
        guard case .failure(let error) = result else {
            Issue.record("the cancelled call succeeded")
            return
        }
        let clientError = try #require(error as? ClientError, "\(error)")
        #expect(clientError.operationID == "download")
        #expect(clientError.underlyingError as? TernError == TernError.cancelled, "\(clientError)")

        // Cancelled before it starts: nothing is sent.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await client.getEcho()
        }
        await #expect(throws: ClientError.self) { try await early.value }
    }

    @Test func cancellingTheBodyReaderCancelsTheRequest() async throws {
        let servers = try TestServers.get()
        let client = makeClient(servers)
        // Half the body, then 30 s of silence.
        let body = try await client.stall(query: .init(len: 100_000, stallMs: 30_000)).ok.body.binary
        let reader = Task {
            var count = 0
            for try await chunk in body { count += chunk.count }
            return count
        }
        try await Task.sleep(for: .milliseconds(300))
        let cancelled = ContinuousClock.now
        reader.cancel()
        let result = await reader.result
        #expect(ContinuousClock.now - cancelled < .seconds(10))
        #expect(throws: TernError.cancelled) { try result.get() }
    }

    @Test func aConnectionErrorIsAClientErrorOverTheTernError() async throws {
        // Nothing listens on port 1.
        let client = Client(serverURL: URL(string: "http://127.0.0.1:1")!, transport: TernTransport())
        do {
            _ = try await client.getEcho()
            Issue.record("a request to a closed port succeeded")
        } catch let error as ClientError {
            let tern = try #require(error.underlyingError as? TernError, "\(error.underlyingError)")
            #expect(tern.code == .connectionRefused)
            #expect(error.operationID == "getEcho")
            #expect(error.request?.path == "/echo")
        }
    }

    @Test func theConfigurationReachesTheRequest() async throws {
        let servers = try TestServers.get()
        let seen = Mutex<[String]>([])
        let configuration = TernTransport.Configuration(
            timeouts: .init(body: 0.5), maxRedirects: 0,
            prepare: { request, operationID in
                request.setHeader("X-Operation", operationID)
                seen.withLock { $0.append(operationID) }
            })
        let client = makeClient(servers, configuration: configuration)
        let echo = try await client.getEcho().ok.body.json
        #expect(echo.headers.contains(["X-Operation", "getEcho"]))
        #expect(seen.withLock { $0 } == ["getEcho"])
        // The body timeout: the stalled body fails with Tern's timeout after 0.5 s.
        let body = try await client.stall(query: .init(stallMs: 5000)).ok.body.binary
        await #expect(throws: TernError.bodyTimedOut) {
            _ = try await [UInt8](collecting: body, upTo: 1 << 20)
        }
    }

    @Test func theHTTPVersionPreferenceReachesTheRequest() throws {
        #expect(TernTransport.Configuration().httpVersion == .automatic)
        let transport = TernTransport(configuration: .init(httpVersion: .http1_1))
        let request = try transport.makeRequest(
            HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/echo"), body: nil,
            baseURL: URL(string: "https://example.com/v1")!, operationID: "getEcho")
        #expect(request.httpVersion == .http1_1)
    }

    @Test func readmeExample() async throws {
        let servers = try TestServers.get()
        let serverURL = servers.fault("/")
        // README: begin
        // Client, Operations and Components are generated by swift-openapi-generator from an
        // OpenAPI document; TernTransport runs their requests on Tern.
        let client = Client(
            serverURL: serverURL,
            transport: TernTransport(configuration: .init(timeouts: .init(connect: 10))))
        let echo = try await client.getEcho(query: .init(note: "hi")).ok.body.json
        print(echo.method, echo.target)  // GET /echo?note=hi

        // Bodies stream both ways: an AsyncSequence of chunks up, chunk by chunk down.
        let (chunks, feed) = AsyncStream.makeStream(of: ArraySlice<UInt8>.self)
        Task {
            for _ in 0..<16 { feed.yield(ArraySlice(repeating: 0x2a, count: 64 << 10)) }
            feed.finish()
        }
        let upload = HTTPBody(chunks, length: .known(1 << 20))
        print(try await client.upload(body: .binary(upload)).ok.headers.xEchoBodySha256)

        let download = try await client.download(query: .init(size: 10 << 20)).ok.body.binary
        var received = 0
        for try await chunk in download { received += chunk.count }  // cancelling the task cancels it
        // README: end
        #expect(echo.target == "/echo?note=hi")
        #expect(received == 10 << 20)
    }
}
