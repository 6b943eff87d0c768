// tern-swift — the benchmark driver for Tern's Swift API, used as an app would use it: one
// `Request` object per exchange, async/await `response()`, listener events on a private serial
// queue (no one runs the main queue here).
//
//   tern-swift get URL N C        an Engine allowing C connections per origin; C tasks share N
//                                 requests; each body is kept in memory (`Response.data`, 1 KiB)
//                                 and counted, as URLSession's `data(for:)` does
//   tern-swift fanout URL N C W   N `response()` calls, each in a child task of its own in one task
//                                 group, W in flight at any time, on one Engine allowing C
//                                 connections (it queues the rest): many small requests through
//                                 structured concurrency
//   tern-swift download URL PATH  `Request.downloadFile = PATH`; for /dev/null a `dataHandler`
//                                 counts the body in-process instead
//   tern-swift upload URL FILE    (extension) a `MultipartForm` with FILE as its one file part,
//                                 `requestBody = .multipart(form)`, method PUT
//   tern-swift cachehit URL N     (extension) N GETs answered from an `HTTPCache`, one at a time
//   tern-swift cachedownload URL PATH  (extension) the body stored in an `HTTPCache` first (its
//                                 GET streamed through a `dataHandler`, not timed), then served
//                                 from the cache to PATH (timed)
//
// Started as tern-swift-queue (bench/run makes the symlink), `get` sends each request through
// one `RequestQueue` of C slots (`queue.response(for:)`); every other workload exits 3.
//
// https trusts $BENCH_CAFILE through the engine's `TLSOptions(caFile:)`. A response counts only
// when it is a 200 (any 2xx for uploads) whose body length matches its Content-Length.

import BenchSupport
import Dispatch
import Synchronization
import Tern
#if canImport(Glibc)
import Glibc
#endif

// URL and Data only: FoundationEssentials, as async-http-client uses, so that the driver itself
// does not load full Foundation (and ICU) when Tern does not.
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Started as tern-swift-queue (a symlink): every GET goes through a `RequestQueue` with one
/// slot per connection, to show what the queue costs; the other workloads are not supported.
let throughQueue = CommandLine.arguments.first.map { $0.hasSuffix("tern-swift-queue") } ?? false
let driver = Driver.parse(
    name: throughQueue ? "tern-swift-queue" : "tern-swift", supportsUpload: !throughQueue,
    supportsCacheHit: !throughQueue)
if throughQueue {
    guard case .get = driver.workload else {
        exitWith(.unsupported, "tern-swift-queue: unsupported workload (GET loads only)")
    }
}
let listenerQueue = DispatchQueue(label: "tern-swift.listener")

func parseURL(_ text: String) -> URL {
    guard let url = URL(string: text) else { exitWith(.usage, "tern-swift: bad URL '\(text)'") }
    return url
}

func makeEngine(connections: Int) -> Engine {
    do {
        let tls = driver.caFile.map { TLSOptions(caFile: $0) } ?? .default
        return try Engine(configuration: .init(maxConnectionsPerOrigin: connections, tls: tls))
    } catch {
        exitWith(.failed, "tern-swift: engine: \(error)")
    }
}

/// Nil for a complete 200 (any 2xx with `anySuccess`), else what was wrong.
func check(_ response: Response, bytes: Int, anySuccess: Bool = false) -> String? {
    let code = response.status.code
    if anySuccess ? !(200...299).contains(code) : code != 200 { return "status \(code)" }
    if let length = response.contentLength, length != Int64(bytes) {
        return "body of \(bytes) bytes, Content-Length \(length)"
    }
    return nil
}

/// One GET as an app makes it: a `Request` on the shared engine, `response()`, the body in memory.
func fetch(_ url: URL, engine: Engine, queue: RequestQueue?, into counter: RequestCounter) async {
    let request = Request(url: url)
    request.engine = engine
    request.callbackQueue = listenerQueue
    do {
        let response: Response
        if let queue {
            response = try await queue.response(for: request)
        } else {
            response = try await request.response()
        }
        counter.finish(bytes: response.data.count, error: check(response, bytes: response.data.count))
    } catch {
        counter.finish(bytes: 0, error: "\(error)")
    }
}

func runGet(url: URL, count: Int, connections: Int, inflight: Int? = nil) async -> ExitCode {
    let engine = makeEngine(connections: connections)
    let queue = throughQueue ? RequestQueue(maxSimultaneous: connections) : nil
    let counter = RequestCounter(total: count)
    let start = monotonicNow()
    // The workers run on the engine's own thread (Engine.executor): submitting a request and
    // resuming after its response then cost no thread switch. Fan-out tasks run as an app's
    // would, on the default executor.
    await runLoad(
        count: count, connections: connections, inflight: inflight, counter: counter,
        preference: inflight == nil ? engine.executor : nil
    ) {
        await fetch(url, engine: engine, queue: queue, into: counter)
    }
    let elapsed = monotonicNow() - start
    let result = counter.snapshot
    driver.report(elapsed: elapsed, requests: result.completed, bytes: result.bytes)
    if result.failures > 0 {
        driver.warn("\(url): \(result.failures) of \(result.completed) requests failed; first: \(result.firstError ?? "?")")
        return .failed
    }
    return .ok
}

/// Body bytes counted by a data handler on the engine's thread.
final class ByteCount: Sendable {
    let value = Atomic<Int>(0)
}

func runDownload(url: URL, path: String) async -> ExitCode {
    let engine = makeEngine(connections: 1)
    let counted = ByteCount()
    let request = Request(url: url)
    request.engine = engine
    request.callbackQueue = listenerQueue
    if path == "/dev/null" {
        request.dataHandler = { data in
            counted.value.add(data.count, ordering: .relaxed)
            return true
        }
    } else {
        request.downloadFile = path
    }
    var failure: String?
    var bytes = 0
    let start = monotonicNow()
    do {
        let response = try await request.response()
        bytes = path == "/dev/null" ? counted.value.load(ordering: .relaxed) : Int(response.bytesReceived)
        failure = check(response, bytes: bytes)
    } catch {
        failure = "\(error)"
    }
    let elapsed = monotonicNow() - start
    driver.report(elapsed: elapsed, requests: 1, bytes: bytes)
    if let failure {
        driver.warn("\(url): \(failure)")
        return .failed
    }
    return .ok
}

func runUpload(url: URL, path: String) async -> ExitCode {
    let engine = makeEngine(connections: 1)
    // stat(2), not FileManager's attributes: their number type differs between Foundation and
    // FoundationEssentials (an `as? Int` cast quietly gave nil, reported as -1 bytes).
    var info = stat()
    guard stat(path, &info) == 0 else {
        driver.warn("\(path): \(String(cString: strerror(errno)))")
        return .failed
    }
    let size = Int(info.st_size)
    var form = MultipartForm()
    form.addFile(at: path, name: "file", fileName: "upload.bin", contentType: "application/octet-stream")
    let request = Request(url: url, method: .put)
    request.engine = engine
    request.callbackQueue = listenerQueue
    request.requestBody = .multipart(form)
    var failure: String?
    let start = monotonicNow()
    do {
        let response = try await request.response()
        failure = check(response, bytes: response.data.count, anySuccess: true)
    } catch {
        failure = "\(error)"
    }
    let elapsed = monotonicNow() - start
    // bytes: the file's size (the engine sends all of it or fails the request).
    driver.report(elapsed: elapsed, requests: 1, bytes: size)
    if let failure {
        driver.warn("\(url): \(failure)")
        return .failed
    }
    return .ok
}

/// GETs answered from an `HTTPCache` in a temporary folder, one at a time. nginx's static
/// file has validators but no lifetime, so `secondsToCache` makes the stored copy fresh (as an
/// app caching a resource for an hour would).
func runCacheHit(url: URL, count: Int) async -> ExitCode {
    let engine = makeEngine(connections: 1)
    let folder = "/tmp/tern-swift-cache-\(getpid())"
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let cache: HTTPCache
    do {
        cache = try HTTPCache(folder: folder, sizeLimit: 16 << 20)
    } catch {
        driver.warn("cache folder \(folder): \(error)")
        return .failed
    }
    func fetchCached() async -> (bytes: Int, failure: String?) {
        let request = Request(url: url)
        request.engine = engine
        request.callbackQueue = listenerQueue
        request.cache = cache
        request.secondsToCache = 3600
        do {
            let response = try await request.response()
            return (response.data.count, check(response, bytes: response.data.count))
        } catch {
            return (0, "\(error)")
        }
    }
    if let failure = await fetchCached().failure {  // stores the response: not counted
        driver.warn("\(url): \(failure)")
        return .failed
    }
    var bytes = 0
    var misses = 0
    let start = monotonicNow()
    for _ in 0..<count {
        let (n, failure) = await fetchCached()
        if let failure {
            driver.warn("\(url): \(failure)")
            return .failed
        }
        bytes += n
    }
    let elapsed = monotonicNow() - start
    misses = Int(engine._stats.requestsCompleted) - 1
    driver.report(elapsed: elapsed, requests: count, bytes: bytes)
    if misses > 0 {
        driver.warn("\(url): \(misses) of \(count) requests went to the network")
        return .failed
    }
    return .ok
}

/// The body of URL (100 MiB in bench/run) stored in an `HTTPCache` by one GET whose body
/// streams through a `dataHandler` into the cache (not timed), then served from the cache to
/// PATH (timed): the stored body copied to the file in the kernel, its checksum checked. The
/// process's peak RSS (bench/run's /usr/bin/time) covers both phases.
func runCacheDownload(url: URL, path: String) async -> ExitCode {
    let engine = makeEngine(connections: 1)
    let folder = "/tmp/tern-swift-cache-dl-\(getpid())"
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let cache: HTTPCache
    do {
        cache = try HTTPCache(folder: folder, sizeLimit: 1 << 30)
    } catch {
        driver.warn("cache folder \(folder): \(error)")
        return .failed
    }
    let primed = ByteCount()
    let prime = Request(url: url)
    prime.engine = engine
    prime.callbackQueue = listenerQueue
    prime.cache = cache
    prime.secondsToCache = 3600
    prime.dataHandler = { data in
        primed.value.add(data.count, ordering: .relaxed)
        return true
    }
    do {
        let response = try await prime.response()
        if let failure = check(response, bytes: primed.value.load(ordering: .relaxed)) {
            driver.warn("\(url): \(failure)")
            return .failed
        }
    } catch {
        driver.warn("\(url): \(error)")
        return .failed
    }
    let request = Request(url: url)
    request.engine = engine
    request.callbackQueue = listenerQueue
    request.cache = cache
    request.secondsToCache = 3600
    request.downloadFile = path
    var failure: String?
    var bytes = 0
    let start = monotonicNow()
    do {
        let response = try await request.response()
        bytes = Int(response.bytesReceived)
        failure = check(response, bytes: bytes) ?? (response.isFromCache ? nil : "not answered from the cache")
    } catch {
        failure = "\(error)"
    }
    let elapsed = monotonicNow() - start
    driver.report(elapsed: elapsed, requests: 1, bytes: bytes)
    if engine._stats.requestsCompleted > 1 { failure = failure ?? "the cached download went to the network" }
    if let failure {
        driver.warn("\(url): \(failure)")
        return .failed
    }
    return .ok
}

switch driver.workload {
case let .get(url, count, connections):
    exitProcess(await runGet(url: parseURL(url), count: count, connections: connections))
case let .fanout(url, count, connections, inflight):
    exitProcess(await runGet(url: parseURL(url), count: count, connections: connections, inflight: inflight))
case let .download(url, path):
    exitProcess(await runDownload(url: parseURL(url), path: path))
case let .upload(url, path):
    exitProcess(await runUpload(url: parseURL(url), path: path))
case let .cacheHit(url, count):
    exitProcess(await runCacheHit(url: parseURL(url), count: count))
case let .cacheDownload(url, path):
    exitProcess(await runCacheDownload(url: parseURL(url), path: path))
}
