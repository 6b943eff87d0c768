// urlsession — the benchmark driver for URLSession (FoundationNetworking on Linux, which runs on
// libcurl), used as an app would use it.
//
//   urlsession get URL N C        C concurrent tasks share N requests through the async
//                                 `data(for:)`; httpMaximumConnectionsPerHost = C
//   urlsession fanout URL N C W   N `data(for:)` calls, each in a child task of its own in one task
//                                 group, W in flight at any time; httpMaximumConnectionsPerHost = C
//   urlsession download URL PATH  a data task whose delegate streams the body to PATH (or only
//                                 counts it for /dev/null), so memory stays flat as with the others
//
// The session is ephemeral with no URLCache: nginx's responses carry Last-Modified, and a cache
// answering from memory would not be a request at all.
//
// https: FoundationNetworking on Linux has no per-session trust setting; libcurl uses the system
// bundle /etc/ssl/certs/ca-certificates.crt. The wrapper script bench/drivers/urlsession makes
// $BENCH_CAFILE that bundle inside a private mount namespace for this one process (root only);
// without the wrapper, https works only against certificates the system already trusts.

import BenchSupport
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let driver = Driver.parse(name: "urlsession")

func makeSession(connections: Int, delegate: (any URLSessionDelegate)? = nil) -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.httpMaximumConnectionsPerHost = connections
    configuration.urlCache = nil
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.timeoutIntervalForRequest = 60
    return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
}

func check(_ response: URLResponse, bytes: Int) -> String? {
    guard let http = response as? HTTPURLResponse else { return "not an HTTP response" }
    if http.statusCode != 200 { return "status \(http.statusCode)" }
    if response.expectedContentLength >= 0 && Int(response.expectedContentLength) != bytes {
        return "body of \(bytes) bytes, Content-Length \(response.expectedContentLength)"
    }
    return nil
}

func runGet(url: URL, count: Int, connections: Int, inflight: Int? = nil) async -> ExitCode {
    let session = makeSession(connections: connections)
    let counter = RequestCounter(total: count)
    let request = URLRequest(url: url)
    @Sendable func one() async {
        do {
            let (data, response) = try await session.data(for: request)
            counter.finish(bytes: data.count, error: check(response, bytes: data.count))
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
    session.invalidateAndCancel()
    if result.failures > 0 {
        driver.warn("\(url): \(result.failures) of \(result.completed) requests failed; first: \(result.firstError ?? "?")")
        return .failed
    }
    return .ok
}

/// Streams one response body to a file descriptor (or nowhere) and reports the end.
final class DownloadDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private struct State {
        var bytes = 0
        var failure: String?
        var continuation: CheckedContinuation<Void, Never>?
        var finished = false
    }
    private let state = Mutex(State())
    private let fd: Int32 // -1: discard

    init(fd: Int32) {
        self.fd = fd
    }

    var result: (bytes: Int, failure: String?) {
        state.withLock { ($0.bytes, $0.failure) }
    }

    /// Suspends until the task completed.
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.finished { return true }
                s.continuation = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        var failed = false
        if fd >= 0 {
            data.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
                    if n < 0 {
                        if errno == EINTR { continue }
                        failed = true
                        return
                    }
                    offset += n
                }
            }
        }
        state.withLock { s in
            s.bytes += data.count
            if failed && s.failure == nil { s.failure = "write failed: errno \(errno)" }
        }
        if failed { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let continuation = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if s.failure == nil {
                if let error {
                    s.failure = "\(error)"
                } else if let response = task.response {
                    s.failure = check(response, bytes: s.bytes)
                } else {
                    s.failure = "no response"
                }
            }
            s.finished = true
            defer { s.continuation = nil }
            return s.continuation
        }
        continuation?.resume()
    }
}

func runDownload(url: URL, path: String) async -> ExitCode {
    var fd: Int32 = -1
    if path != "/dev/null" {
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        if fd < 0 {
            driver.warn("\(path): \(String(cString: strerror(errno)))")
            return .failed
        }
    }
    let delegate = DownloadDelegate(fd: fd)
    let session = makeSession(connections: 1, delegate: delegate)
    let start = monotonicNow()
    session.dataTask(with: URLRequest(url: url)).resume()
    await delegate.wait()
    if fd >= 0 { close(fd) }
    let elapsed = monotonicNow() - start
    let result = delegate.result
    driver.report(elapsed: elapsed, requests: 1, bytes: result.bytes)
    session.finishTasksAndInvalidate()
    if let failure = result.failure {
        driver.warn("\(url): \(failure)")
        return .failed
    }
    return .ok
}

func parseURL(_ text: String) -> URL {
    guard let url = URL(string: text) else { exitWith(.usage, "urlsession: bad URL '\(text)'") }
    return url
}

switch driver.workload {
case let .get(url, count, connections):
    exitProcess(await runGet(url: parseURL(url), count: count, connections: connections))
case let .fanout(url, count, connections, inflight):
    exitProcess(await runGet(url: parseURL(url), count: count, connections: connections, inflight: inflight))
case let .download(url, path):
    exitProcess(await runDownload(url: parseURL(url), path: path))
case .upload:
    exitWith(.unsupported, "\(driver.name): unsupported workload: upload")
case .cacheHit:
    exitWith(.unsupported, "\(driver.name): unsupported workload: cachehit (no HTTP cache of its own here)")
case .cacheDownload:
    exitWith(.unsupported, "\(driver.name): unsupported workload: cachedownload (no HTTP cache of its own here)")
}
