// The driver contract shared by the Swift benchmark drivers (bench/README.md has the long form):
//
//   DRIVER get URL N C        N GETs over C keep-alive connections, bodies read and discarded
//   DRIVER fanout URL N C W   N GETs, each its own child task of one task group, W in flight at
//                             any time (one added as one finishes), over at most C connections
//   DRIVER download URL PATH  one GET, the body written to PATH ("/dev/null": discarded)
//
// Exit 0 only when every response was a complete 200, 1 on any failure, 2 on bad usage, 3 for an
// unsupported workload. https trusts the PEM CA file in $BENCH_CAFILE. One line on stdout:
// "elapsed_s=S requests=N bytes=B" for the request loop only.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// What the command line asked for.
public enum Workload: Sendable {
    case get(url: String, count: Int, connections: Int)
    /// N GETs with W (`inflight`) at a time, each in a child task of its own, over at most C
    /// connections: the structured-concurrency path (`fanOut` runs it).
    case fanout(url: String, count: Int, connections: Int, inflight: Int)
    case download(url: String, path: String)
    /// The `upload URL FILE` extension: FILE as one multipart/form-data part, sent with PUT.
    case upload(url: String, path: String)
    /// The `cachehit URL N` extension: N GETs, one at a time, answered from the client's HTTP
    /// cache (one request first stores the response; it is not counted).
    case cacheHit(url: String, count: Int)
    /// The `cachedownload URL PATH` extension: the body stored in the client's HTTP cache by
    /// one download first (not timed), then served from the cache to PATH (timed).
    case cacheDownload(url: String, path: String)
}

/// Exit codes of the driver contract.
public enum ExitCode: Int32 {
    case ok = 0
    case failed = 1
    case usage = 2
    case unsupported = 3
}

/// The command line and environment of one driver run.
public struct Driver: Sendable {
    /// The driver's name, used in messages ("ahc").
    public let name: String
    public let workload: Workload
    /// The PEM CA file from $BENCH_CAFILE, or nil.
    public let caFile: String?

    /// Parses `CommandLine.arguments`, exiting with the contract's codes on bad usage;
    /// `upload` is accepted only from drivers that say they support it.
    public static func parse(name: String, supportsUpload: Bool = false, supportsCacheHit: Bool = false) -> Driver {
        let args = Array(CommandLine.arguments.dropFirst())
        let ca = getenv("BENCH_CAFILE").map { String(cString: $0) }
        let caFile = (ca?.isEmpty ?? true) ? nil : ca
        func count(_ text: String, _ what: String) -> Int {
            guard let value = Int(text), value > 0 else {
                exitWith(.usage, "\(name): \(what) must be a positive integer, not '\(text)'")
            }
            return value
        }
        switch (args.first, args.count) {
        case ("get", 4):
            let n = count(args[2], "N")
            let c = min(count(args[3], "C"), n)
            return Driver(name: name, workload: .get(url: args[1], count: n, connections: c), caFile: caFile)
        case ("fanout", 5):
            let n = count(args[2], "N")
            let w = min(count(args[4], "W"), n)
            let c = min(count(args[3], "C"), w)
            return Driver(
                name: name, workload: .fanout(url: args[1], count: n, connections: c, inflight: w), caFile: caFile)
        case ("download", 3):
            return Driver(name: name, workload: .download(url: args[1], path: args[2]), caFile: caFile)
        case ("upload", 3) where supportsUpload:
            return Driver(name: name, workload: .upload(url: args[1], path: args[2]), caFile: caFile)
        case ("cachehit", 3) where supportsCacheHit:
            return Driver(name: name, workload: .cacheHit(url: args[1], count: count(args[2], "N")), caFile: caFile)
        case ("cachedownload", 3) where supportsCacheHit:
            return Driver(name: name, workload: .cacheDownload(url: args[1], path: args[2]), caFile: caFile)
        case (let verb?, _)
        where verb != "get" && verb != "fanout" && verb != "download" && (verb != "upload" || !supportsUpload)
            && ((verb != "cachehit" && verb != "cachedownload") || !supportsCacheHit):
            exitWith(.unsupported, "\(name): unsupported workload: \(verb)")
        default:
            exitWith(
                .usage,
                "usage: \(name) get URL N C | fanout URL N C W | download URL PATH\n  env BENCH_CAFILE: PEM CA file to trust for https"
            )
        }
    }

    /// Prints the result line.
    public func report(elapsed: Double, requests: Int, bytes: Int) {
        print("elapsed_s=\(formatSeconds(elapsed)) requests=\(requests) bytes=\(bytes)")
    }

    /// Prints `message` to stderr, prefixed with the driver's name.
    public func warn(_ message: String) {
        writeStderr("\(name): \(message)\n")
    }
}

/// Writes `message` to stderr and exits with `code`.
public func exitWith(_ code: ExitCode, _ message: String) -> Never {
    writeStderr(message + "\n")
    exit(code.rawValue)
}

/// Exits with `code`, saying nothing more (exit(3) flushes what print wrote).
public func exitProcess(_ code: ExitCode) -> Never {
    exit(code.rawValue)
}

/// Writes to file descriptor 2 directly: C's `stderr` is a global Swift 6 will not touch.
public func writeStderr(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let n = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if n <= 0 { return }
            offset += n
        }
    }
}

/// Seconds on the monotonic clock.
public func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// "1.234567": six decimals, without Foundation's String(format:).
func formatSeconds(_ s: Double) -> String {
    let micros = Int((s * 1e6).rounded())
    let frac = String(micros % 1_000_000)
    return "\(micros / 1_000_000)." + String(repeating: "0", count: 6 - frac.count) + frac
}

/// Hands out request slots to concurrent workers, so that N requests are shared among C loops
/// the way a queue would share them (a worker that is faster simply takes more), and adds up what
/// they report.
public final class RequestCounter: Sendable {
    private struct State {
        var issued = 0
        var completed = 0
        var failures = 0
        var bodyBytes = 0
        var firstError: String?
    }
    private let state = Mutex(State())
    private let total: Int

    public init(total: Int) {
        self.total = total
    }

    /// Claims the next request; false once all N have been claimed.
    public func claim() -> Bool {
        state.withLock { s in
            guard s.issued < total else { return false }
            s.issued += 1
            return true
        }
    }

    /// Records one finished request: `error` is nil for a complete 200.
    public func finish(bytes: Int, error: String?) {
        state.withLock { s in
            s.completed += 1
            s.bodyBytes += bytes
            if let error {
                s.failures += 1
                if s.firstError == nil { s.firstError = error }
            }
        }
    }

    public var snapshot: (completed: Int, failures: Int, bytes: Int, firstError: String?) {
        state.withLock { s in (s.completed, s.failures, s.bodyBytes, s.firstError) }
    }
}

/// Runs `body` `count` times, each in a child task of its own in one task group, with `inflight`
/// of them running at any time: `inflight` are added at once, then one more each time one ends
/// (the usual way to bound a task group). This is what an app doing many small requests with
/// structured concurrency writes; every driver's `fanout` workload goes through it.
public func fanOut(count: Int, inflight: Int, _ body: @escaping @Sendable () async -> Void) async {
    await withTaskGroup(of: Void.self) { group in
        var started = 0
        while started < min(inflight, count) {
            group.addTask { await body() }
            started += 1
        }
        while await group.next() != nil {
            if started < count {
                group.addTask { await body() }
                started += 1
            }
        }
    }
}

/// The GET workloads' load: with `inflight`, every request its own child task (``fanOut``);
/// otherwise `connections` workers, each sending one request after another until `counter`
/// has handed out all of them. `preference` (tern-swift's engine executor) is where the
/// workers run.
public func runLoad(
    count: Int, connections: Int, inflight: Int?, counter: RequestCounter,
    preference: (any TaskExecutor)? = nil, _ one: @escaping @Sendable () async -> Void
) async {
    if let inflight {
        await fanOut(count: count, inflight: inflight, one)
        return
    }
    await withTaskGroup(of: Void.self) { group in
        for _ in 0..<connections {
            group.addTask(executorPreference: preference) {
                while counter.claim() { await one() }
            }
        }
    }
}
