// ahc — the benchmark driver for async-http-client 1.37.0, used as a Swift server app would use
// it: one HTTPClient on the shared event loop group, async/await `execute`, HTTP/1.1 only.
//
//   ahc get URL N C        C concurrent tasks share N requests; the pool may open C connections
//                          (concurrentHTTP1ConnectionsPerHostSoftLimit); bodies are iterated and
//                          counted, never kept
//   ahc fanout URL N C W   N requests, each in a child task of its own in one task group, W in
//                          flight at any time, at most C connections (the pool queues the rest)
//   ahc download URL PATH  /dev/null: the body is iterated and counted; a file: FileDownloadDelegate,
//                          the client's own way to stream a download to disk
//
// https trusts $BENCH_CAFILE through TLSConfiguration.trustRoots. A response counts only when it
// is a 200 whose body length matches its Content-Length.

import AsyncHTTPClient
import BenchSupport
import NIOCore
import NIOSSL

let driver = Driver.parse(name: "ahc")

func makeClient(connections: Int) -> HTTPClient {
    var tls: TLSConfiguration?
    if let ca = driver.caFile {
        var config = TLSConfiguration.makeClientConfiguration()
        config.trustRoots = .file(ca)
        tls = config
    }
    var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
    configuration.httpVersion = .http1Only
    configuration.connectionPool = .init(
        idleTimeout: .seconds(60),
        concurrentHTTP1ConnectionsPerHostSoftLimit: connections
    )
    return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
}

/// One GET with its body counted; returns the body size, or throws a description of the failure.
func fetch(_ client: HTTPClient, _ request: HTTPClientRequest) async throws -> Int {
    let response = try await client.execute(request, timeout: .seconds(60))
    var bytes = 0
    for try await chunk in response.body {
        bytes += chunk.readableBytes
    }
    guard response.status == .ok else {
        throw BenchFailure("status \(response.status.code)")
    }
    if let length = response.headers.first(name: "content-length").flatMap(Int.init), length != bytes {
        throw BenchFailure("body of \(bytes) bytes, Content-Length \(length)")
    }
    return bytes
}

struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func runGet(url: String, count: Int, connections: Int, inflight: Int? = nil) async -> ExitCode {
    let client = makeClient(connections: connections)
    let counter = RequestCounter(total: count)
    let request = HTTPClientRequest(url: url)
    @Sendable func one() async {
        do {
            let bytes = try await fetch(client, request)
            counter.finish(bytes: bytes, error: nil)
        } catch {
            counter.finish(bytes: 0, error: "\(error)")
        }
    }
    let start = monotonicNow()
    await runLoad(count: count, connections: connections, inflight: inflight, counter: counter) {
        await one()
    }
    let elapsed = monotonicNow() - start
    let result = counter.snapshot
    driver.report(elapsed: elapsed, requests: result.completed, bytes: result.bytes)
    try? await client.shutdown()
    if result.failures > 0 {
        driver.warn("\(url): \(result.failures) of \(result.completed) requests failed; first: \(result.firstError ?? "?")")
        return .failed
    }
    return .ok
}

func runDownload(url: String, path: String) async -> ExitCode {
    let client = makeClient(connections: 1)
    var failure: String?
    var bytes = 0
    let start = monotonicNow()
    if path == "/dev/null" {
        do {
            bytes = try await fetch(client, HTTPClientRequest(url: url))
        } catch {
            failure = "\(error)"
        }
    } else {
        do {
            let delegate = try FileDownloadDelegate(path: path)
            let request = try HTTPClient.Request(url: url)
            let progress = try await client.execute(request: request, delegate: delegate).futureResult.get()
            bytes = progress.receivedBytes
            if progress.head.status != .ok {
                failure = "status \(progress.head.status.code)"
            } else if let total = progress.totalBytes, total != bytes {
                failure = "body of \(bytes) bytes, Content-Length \(total)"
            }
        } catch {
            failure = "\(error)"
        }
    }
    let elapsed = monotonicNow() - start
    driver.report(elapsed: elapsed, requests: 1, bytes: bytes)
    try? await client.shutdown()
    if let failure {
        driver.warn("\(url): \(failure)")
        return .failed
    }
    return .ok
}

switch driver.workload {
case let .get(url, count, connections):
    exitProcess(await runGet(url: url, count: count, connections: connections))
case let .fanout(url, count, connections, inflight):
    exitProcess(await runGet(url: url, count: count, connections: connections, inflight: inflight))
case let .download(url, path):
    exitProcess(await runDownload(url: url, path: path))
case .upload:
    exitWith(.unsupported, "\(driver.name): unsupported workload: upload")
case .cacheHit:
    exitWith(.unsupported, "\(driver.name): unsupported workload: cachehit (no HTTP cache of its own here)")
case .cacheDownload:
    exitWith(.unsupported, "\(driver.name): unsupported workload: cachedownload (no HTTP cache of its own here)")
}
