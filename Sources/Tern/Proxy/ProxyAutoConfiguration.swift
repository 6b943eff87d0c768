// Proxy auto-configuration (PAC): a JavaScript `FindProxyForURL(url, host)` chooses the proxies
// of every hop. The script runs in a process of its own, `tern-pac` (Sources/tern-pac, on
// Debian's duktape), spoken to over pipes: Debian's duktape cannot interrupt a script, so a
// script that loops for ever is stopped by killing that process (as Chrome runs PAC out of
// process). docs/pac.md describes the program and its protocol.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch

/// A proxy auto-configuration (PAC) script, which chooses the proxies of each request and of
/// each redirect: `FindProxyForURL(url, host)` answers with a list such as
/// `"PROXY a.example:3128; PROXY b.example:3128; DIRECT"`, and a proxy that cannot be reached
/// fails over to the next entry, as in browsers.
///
/// ```swift
/// let pac = try ProxyAutoConfiguration(contentsOfFile: "/etc/proxy.pac")
/// request.proxyAutoConfiguration = pac
/// ```
///
/// The script runs in a separate process, `tern-pac` (built with Tern, on the duktape
/// JavaScript engine), with the standard helpers (`isPlainHostName`, `dnsDomainIs`,
/// `localHostOrDomainIs`, `isResolvable`, `isInNet`, `dnsResolve`, `myIpAddress`,
/// `dnsDomainLevels`, `shExpMatch`, `weekdayRange`, `dateRange`, `timeRange`). A script that
/// throws, answers something else than a string, or runs past ``timeout`` fails the request
/// with ``TernError/Code/proxyError`` (the process is killed and started again for the next
/// request). The script is loaded once; answers are not cached, so a script may look at the
/// URL's path and the time of day.
public final class ProxyAutoConfiguration: Sendable {
    /// The script's source.
    public let script: String
    /// How long one `FindProxyForURL` call may run before it is stopped.
    public let timeout: Duration
    /// The `tern-pac` program that runs the script.
    public let evaluatorPath: String

    private let worker = Locked<Worker?>(nil)

    /// Loads a script; fails when `tern-pac` cannot be found or started, or the script does
    /// not compile or defines no `FindProxyForURL`.
    ///
    /// - Parameters:
    ///   - script: The PAC script's JavaScript source.
    ///   - timeout: How long one evaluation may run (default 2 seconds).
    ///   - evaluatorPath: The `tern-pac` program; `nil` (the default) looks for `$TERN_PAC`, then
    ///     `tern-pac` beside the running program, then on `PATH`.
    public init(script: String, timeout: Duration = .seconds(2), evaluatorPath: String? = nil)
        throws(TernError)
    {
        self.script = script
        self.timeout = timeout
        guard let path = evaluatorPath ?? Self.findEvaluator() else {
            throw TernError(
                code: .unsupported,
                message: "tern-pac, the program that runs PAC scripts, was not found (set "
                    + "TERN_PAC, or install it beside this program or on PATH)")
        }
        self.evaluatorPath = path
        let started = try Worker.start(path: path, script: script, timeout: timeout)
        worker.withLock { $0 = started }
    }

    /// Loads a script from a file (see ``init(script:timeout:evaluatorPath:)``).
    public convenience init(
        contentsOfFile path: String, timeout: Duration = .seconds(2), evaluatorPath: String? = nil
    ) throws(TernError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TernError(code: .fileReadFailed, message: "cannot read the PAC file \(path)")
        }
        try self.init(
            script: String(decoding: data, as: UTF8.self), timeout: timeout,
            evaluatorPath: evaluatorPath)
    }

    /// Loads a script from a URL, fetched with Tern (see
    /// ``init(script:timeout:evaluatorPath:)``); a status other than 2xx is an error.
    public static func load(
        from url: URL, timeout: Duration = .seconds(2), evaluatorPath: String? = nil
    ) async throws -> ProxyAutoConfiguration {
        let request = Request(url: url)
        request.callbackQueue = .global()
        request.proxyEnvironment = .direct
        let response = try await request.response()
        guard (200..<300).contains(response.statusCode) else {
            throw TernError(
                code: .proxyError,
                message: "the PAC file \(url.absoluteString) answered \(response.statusCode)")
        }
        return try ProxyAutoConfiguration(
            script: String(decoding: response.data, as: UTF8.self), timeout: timeout,
            evaluatorPath: evaluatorPath)
    }

    /// The script's answer for `url`: its proxies in PAC syntax (`"PROXY h:3128; DIRECT"`).
    /// Thread-safe; calls are run one at a time.
    public func findProxy(for url: URL) throws(TernError) -> String {
        try findProxy(url: url.absoluteString, host: HostName.canonical(of: url) ?? "")
    }

    func findProxy(url: String, host: String) throws(TernError) -> String {
        let result = worker.withLock { (current: inout Worker?) -> Result<String, TernError> in
            do {
                if current == nil {
                    current = try Worker.start(path: evaluatorPath, script: script, timeout: timeout)
                }
                guard let live = current else {
                    return .failure(TernError(code: .proxyError, message: "no PAC evaluator"))
                }
                do {
                    return .success(try live.find(url: url, host: host, timeout: timeout))
                } catch let failure as WorkerFailure {
                    // A stuck or dead evaluator is replaced by a fresh one for the next call.
                    live.stop()
                    current = nil
                    return .failure(TernError(code: .proxyError, message: "PAC script: " + failure.message))
                }
            } catch let error as TernError {
                return .failure(error)
            } catch {
                return .failure(TernError(code: .proxyError, message: "PAC script: \(error)"))
            }
        }
        return try result.get()
    }

    deinit {
        worker.withLock { current in
            current?.stop()
            current = nil
        }
    }

    /// `$TERN_PAC`, else `tern-pac` beside the running program, else on `PATH`.
    static func findEvaluator() -> String? {
        let environment = ProcessInfo.processInfo.environment
        if let forced = environment["TERN_PAC"], !forced.isEmpty { return forced }
        var candidates: [String] = []
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if n > 0 {
            let exe = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if let slash = exe.lastIndex(of: "/") {
                candidates.append(String(exe[..<slash]) + "/tern-pac")
            }
        }
        for dir in (environment["PATH"] ?? "/usr/local/bin:/usr/bin").split(separator: ":") {
            candidates.append("\(dir)/tern-pac")
        }
        return candidates.first { access($0, X_OK) == 0 }
    }
}

/// Why an evaluator could not answer: it is killed and replaced.
struct WorkerFailure: Error {
    var message: String
}

/// One `tern-pac` process, spoken to over a socket pair (its standard input and output): a
/// socket, unlike a pipe, lets a write to a dead process fail with EPIPE instead of raising
/// SIGPIPE (MSG_NOSIGNAL). Used under the configuration's lock only.
final class Worker: @unchecked Sendable {
    private let pid: pid_t
    private let socket: Int32
    private var pending: [UInt8] = []
    /// Where answers are read into: made once per process, not per evaluation.
    private var chunk = [UInt8](repeating: 0, count: 4096)
    private var stopped = false

    private init(pid: pid_t, socket: Int32) {
        self.pid = pid
        self.socket = socket
    }

    static func start(path: String, script: String, timeout: Duration) throws(TernError) -> Worker {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw TernError(code: .proxyError, message: "cannot make a socket pair for tern-pac")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 0)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // The child starts with no signal blocked and INT, TERM and PIPE at their default
        // actions, whatever the spawning thread had: a libdispatch worker blocks nearly every
        // signal, and the tern CLI blocks INT and TERM in every thread for its signal sources
        // (a Ctrl-C at the terminal must still end tern-pac with the rest of the process group).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for number in [SIGINT, SIGTERM, SIGPIPE] { sigaddset(&defaults, number) }
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup(path), nil]
        defer { for arg in argv { free(arg) } }
        let rc = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        close(ends[1])
        guard rc == 0 else {
            close(ends[0])
            throw TernError(
                code: .proxyError, message: "cannot start \(path): \(String(cString: strerror(rc)))")
        }
        let worker = Worker(pid: pid, socket: ends[0])
        do {
            let bytes = Array(script.utf8)
            try worker.send(Array("SCRIPT \(bytes.count)\n".utf8) + bytes)
            let answer = try worker.readLine(timeout: timeout)
            if answer == "OK" { return worker }
            worker.stop()
            throw TernError(
                code: .proxyError,
                message: "PAC script: "
                    + (answer.hasPrefix("ERR ") ? String(answer.dropFirst(4)) : answer))
        } catch let error as TernError {
            throw error
        } catch let failure as WorkerFailure {
            worker.stop()
            throw TernError(code: .proxyError, message: "PAC script: " + failure.message)
        } catch {
            worker.stop()
            throw TernError(code: .proxyError, message: "PAC script: \(error)")
        }
    }

    func find(url: String, host: String, timeout: Duration) throws -> String {
        // The protocol is line-based with space-separated fields: no such bytes may pass.
        func clean(_ s: String) -> String {
            String(s.map { $0 == " " || $0 == "\n" || $0 == "\r" || $0 == "\t" ? "%" : $0 })
        }
        try send(Array("FIND \(clean(url)) \(clean(host))\n".utf8))
        let answer = try readLine(timeout: timeout)
        if answer.hasPrefix("OK ") { return String(answer.dropFirst(3)) }
        if answer == "OK" { return "" }
        if answer.hasPrefix("ERR ") {
            throw TernError(code: .proxyError, message: "PAC script: " + answer.dropFirst(4))
        }
        throw WorkerFailure(message: "tern-pac answered \"\(answer.prefix(200))\"")
    }

    private func send(_ bytes: [UInt8]) throws {
        var at = 0
        while at < bytes.count {
            let n = bytes[at...].withUnsafeBytes {
                Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw WorkerFailure(message: "tern-pac stopped (\(String(cString: strerror(errno))))")
            }
            at += n
        }
    }

    private func readLine(timeout: Duration) throws -> String {
        let (seconds, attoseconds) = timeout.components
        let limitMs = max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(limitMs) * 1_000_000
        while true {
            if let newline = pending.firstIndex(of: 0x0A) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeSubrange(...newline)
                return line
            }
            guard pending.count < 256 * 1024 else {
                throw WorkerFailure(message: "tern-pac sent a line over 256 KiB")
            }
            let now = DispatchTime.now().uptimeNanoseconds
            guard now < deadline else {
                throw WorkerFailure(
                    message: "FindProxyForURL did not return within \(timeout) (stopped)")
            }
            var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let wait = Int32(min(UInt64(Int32.max), (deadline - now) / 1_000_000 + 1))
            let ready = poll(&poller, 1, wait)
            if ready <= 0 { continue }  // EINTR or the deadline: looked at above
            let n = chunk.withUnsafeMutableBytes { read(socket, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw WorkerFailure(message: "tern-pac exited") }
            pending.append(contentsOf: chunk[0..<n])
        }
    }

    /// Kills the process (a stuck script cannot be stopped otherwise) and reaps it.
    func stop() {
        guard !stopped else { return }
        stopped = true
        close(socket)
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }
}
