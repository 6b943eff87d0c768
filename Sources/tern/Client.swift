// One `tern` invocation: builds a Request per URL from the options, streams the body to
// stdout (through Request.dataHandler, on the engine thread, so memory stays flat) or to a
// file (Request.downloadFile), and turns the outcome into curl's messages and exit codes.
// The transfers run one after another, or with -Z several at once (Transfers.swift holds the
// limit), each awaiting Request.response().

import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import Logging
import Tern

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The result of one transfer: curl's exit code, and whether `--retry` may try again.
struct TransferOutcome {
    var code: Int32
    var transient = false
    var reason = ""
}

/// State shared between the engine thread (head and data handlers) and the main thread.
final class TransferState: Sendable {
    struct Values {
        var headShown = false
        var writeFailed = false
    }
    // Guarded by `lock` (a pthread mutex, which ThreadSanitizer follows).
    private let lock = ConditionLock()
    nonisolated(unsafe) private var values = Values()

    var headShown: Bool {
        get { lock.withLock { values.headShown } }
        set { lock.withLock { values.headShown = newValue } }
    }

    var writeFailed: Bool {
        get { lock.withLock { values.writeFailed } }
        set { lock.withLock { values.writeFailed = newValue } }
    }
}

// Immutable once built: the transfers of a -Z run share it from several tasks.
final class CommandRunner: Sendable {
    let options: TernCommand
    let engine: Engine
    let dataItems: [DataItem]
    let formItems: [(value: String, literal: Bool)]
    /// The schemes -u (and URL) credentials may answer: the last of --basic, --digest, --ntlm
    /// and --anyauth, Basic when none (curl's default).
    let authSchemes: Request.AuthenticationSchemes
    /// The same for proxy credentials (--proxy-basic, --proxy-digest, --proxy-ntlm,
    /// --proxy-anyauth).
    let proxyAuthSchemes: Request.AuthenticationSchemes
    /// curl's cookie engine: on with -b FILE or -c, shared by every URL of the run.
    let cookieJar: CookieJar?
    /// The -b "N=V" strings, sent as they are (never saved by -c), joined.
    let cookieLine: String?
    /// The -Z progress line (on a terminal, without -s or -v), fed by every transfer.
    let board: TransferBoard?
    /// --cache DIR: the HTTP cache every transfer of the run reads and writes.
    let cache: HTTPCache?
    /// --proxy-pac: the script, loaded once when the run starts (before any transfer).
    private let pac = PACHolder()

    init(
        options: TernCommand, dataItems: [DataItem], formItems: [(value: String, literal: Bool)],
        authFlag: String? = nil, proxyAuthFlag: String? = nil
    ) {
        self.options = options
        self.dataItems = dataItems
        self.formItems = formItems
        authSchemes = Self.schemes(for: authFlag, prefix: "--")
        proxyAuthSchemes = Self.schemes(for: proxyAuthFlag, prefix: "--proxy-")
        // -b: a value with '=' is cookies to send; anything else names a file to read, as
        // curl decides. Reading a file, or -c, turns the cookie engine on.
        var lines: [String] = []
        var files: [String] = []
        for value in options.cookies {
            if value.contains("=") { lines.append(value) } else { files.append(value) }
        }
        cookieLine = lines.isEmpty ? nil : lines.joined(separator: "; ")
        if !files.isEmpty || options.cookieJar != nil {
            let jar = CookieJar()
            for file in files where !file.isEmpty && file != "-" {
                // curl reads what it can and silently ignores a file it cannot open.
                _ = try? jar.loadNetscapeCookieFile(
                    at: URL(fileURLWithPath: file),
                    includingSessionCookies: !options.junkSessionCookies)
            }
            cookieJar = jar
        } else {
            cookieJar = nil
        }
        let verbose = options.verbose
        let logger = Logger(label: "tern") { _ in
            verbose ? StarLogHandler() as any LogHandler : SwiftLogNoOpLogHandler()
        }
        board = options.parallel && ParallelMeter.shouldShow(options: options) ? TransferBoard() : nil
        do {
            // With -Z the run's limit is the only one, as in curl (whose --parallel-max-host is
            // off by default): no per-origin cap of the engine's (6) holds transfers back.
            var configuration = Engine.Configuration(logger: logger)
            if options.parallel { configuration.maxConnectionsPerOrigin = 0 }
            engine = try Engine(configuration: configuration)
        } catch {
            Output.stderr("tern: cannot start the engine: \(error.message)\n")
            exit(2)
        }
        if let folder = options.cacheFolder {
            do {
                cache = try HTTPCache(folder: folder, sizeLimit: 1 << 30)
            } catch {
                // curl's "failed creating file" (23) is the nearest: nothing was transferred.
                Output.stderr("tern: --cache \(folder): \(error.message)\n")
                exit(23)
            }
        } else {
            cache = nil
        }
    }

    /// `--basic`/`--digest`/`--ntlm`/`--anyauth` (or the proxy forms) as schemes; Basic by
    /// default. `--anyauth` includes NTLM, as curl's does.
    private static func schemes(for flag: String?, prefix: String) -> Request.AuthenticationSchemes {
        if flag == prefix + "digest" { return .digest }
        if flag == prefix + "ntlm" { return .ntlm }
        if flag == prefix + "anyauth" { return .any }
        return .basic
    }

    /// Fetches every URL, in turn or (-Z) at most --parallel-max at once, and returns curl's
    /// exit code for the run: without -Z the last transfer's; with -Z the last failed
    /// transfer's (in the order they ended), 0 when all succeeded. --fail-early, or an error
    /// curl deems fatal (2, 27, 43: the same trouble awaits every URL), stops the run at the
    /// first failure with its code: no transfer starts after it, and with -Z the running ones
    /// are aborted (42, their codes do not count).
    ///
    /// SIGINT and SIGTERM cancel the transfers in progress, so the engine cleans up (a
    /// download's `.part` file goes unless -C keeps it for a later resume; the file at the -o
    /// path is never touched, and files already complete stay), start no more, and then end
    /// the process by that signal, as curl does.
    func run() async -> Int32 {
        if let source = options.proxyPAC {
            do {
                pac.value = try await Self.loadPAC(source)
            } catch let error as TernError {
                Output.stderr("tern: (5) \(error.message)\n")
                return 5
            } catch {
                Output.stderr("tern: (5) cannot load the PAC script \(source): \(error)\n")
                return 5
            }
        }
        let interrupts = Interrupts.shared  // installed by main before this task started
        let parallel = options.parallel
        let failEarly = options.failEarly
        let urls = options.urls
        let meter = board.map { ParallelMeter(board: $0, total: urls.count) }
        meter?.start()
        var exitCode: Int32 = 0
        var stopped = false
        await Transfers.run(urls.count, atMost: options.concurrencyLimit) { index in
            await self.transferWithRetries(urls[index], index: index)
        } ended: { _, code in
            if stopped { return false }  // aborted after a failure: its 42 does not count
            if !parallel || code != 0 { exitCode = code }
            if code != 0, failEarly || Self.fatalCodes.contains(code) {
                stopped = true
                return false
            }
            return interrupts.caught == 0
        }
        meter?.finish()
        interrupts.exitIfCaught()
        saveCookies()
        return exitCode
    }

    /// curl's critical errors (is_fatal_error in its tool_operate.c: failed init, out of
    /// memory, bad function argument), which end a run of several transfers at once.
    static let fatalCodes: Set<Int32> = [2, 27, 43]

    /// -c: every cookie of the run (not the -b "N=V" ones) to the file, or stdout for "-".
    /// A file that cannot be written is a warning, as in curl.
    private func saveCookies() {
        guard let path = options.cookieJar, let jar = cookieJar else { return }
        if path == "-" {
            Output.stdout(jar.netscapeCookieFileText())
            return
        }
        do {
            try jar.saveNetscapeCookieFile(to: URL(fileURLWithPath: path))
        } catch {
            if !options.silent || options.showError {
                Output.stderr("tern: WARNING: failed to save cookies in \(path): \(error.message)\n")
            }
        }
    }

    private func transferWithRetries(_ url: String, index: Int) async -> Int32 {
        var left = options.retry
        var delay: TimeInterval = 1
        while true {
            let outcome = await transfer(url, index: index, retriesLeft: left)
            // A transient failure, or (as in curl, with or without -f) a 408, 429, 500, 502,
            // 503 or 504 response, is tried again; the last attempt's outcome stands.
            guard outcome.transient, left > 0, Interrupts.shared.caught == 0, !Task.isCancelled
            else { return outcome.code }
            if !options.silent || options.showError {
                Output.stderr(
                    "Warning: Problem : \(outcome.reason). Will retry in \(Int(delay)) second"
                        + "\(delay == 1 ? "" : "s"). \(left) retr\(left == 1 ? "y" : "ies") left.\n")
            }
            // The wait ends early when a -Z run stops (--fail-early): then no attempt follows.
            try? await Task.sleep(nanoseconds: UInt64(delay * 1_000_000_000))
            if Task.isCancelled { return 42 }
            delay = min(delay * 2, 600)
            left -= 1
        }
    }

    private func failure(_ code: Int32, _ message: String) -> TransferOutcome {
        report(code, message)
        return TransferOutcome(code: code)
    }

    private func report(_ code: Int32, _ message: String) {
        if Interrupts.shared.caught != 0 { return }  // cancelled by Ctrl-C: say nothing, as curl
        if options.verbose { Output.stderr("* \(message)\n") }
        if !options.silent || options.showError {
            Output.stderr("tern: (\(code)) \(message)\n")
        }
    }

    // MARK: - One transfer

    /// One attempt at one URL. `retriesLeft` tells whether a transient outcome will be tried
    /// again: then, as in curl, neither -w nor the error message is printed for it.
    private func transfer(_ rawURL: String, index: Int, retriesLeft: Int) async -> TransferOutcome {
        var text = rawURL
        if !text.contains("://") { text = "http://" + text }
        // -T to a URL without a file name (ending in /) uploads under the file's own name.
        if let upload = options.uploadFile, upload != "-", var parts = URLComponents(string: text),
            parts.percentEncodedPath.isEmpty || parts.percentEncodedPath.hasSuffix("/")
        {
            let name = URL(fileURLWithPath: upload).lastPathComponent
            let encoded = percentEncodedPath(name)
            parts.percentEncodedPath = (parts.percentEncodedPath.isEmpty ? "/" : parts.percentEncodedPath) + encoded
            text = parts.string ?? text
        }
        // The scheme first: file:///x has no host, yet its trouble is the scheme (curl: 1).
        if let colon = text.firstRange(of: "://") {
            let scheme = text[..<colon.lowerBound].lowercased()
            if scheme != "http" && scheme != "https" {
                return failure(1, "Protocol \"\(scheme)\" not supported")
            }
        }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
            let host = url.host, !host.isEmpty
        else {
            return failure(3, "URL rejected: Malformed input to a URL function")
        }

        let request = Request(url: url)
        request.engine = engine
        var timeouts = Request.Timeouts(connect: 300, headers: 0, body: 0, total: 0)
        if let seconds = options.connectTimeout { timeouts.connect = seconds }
        if let seconds = options.maxTime { timeouts.total = seconds }
        request.timeouts = timeouts
        request.http10 = options.http10
        request.httpVersion = options.httpVersion
        // curl sends no Accept-Encoding without --compressed; with it, bodies are decoded as
        // they stream (a decompression bomb ends with exit 61).
        request.decoding = options.compressed ? .automatic : .none
        request.tls = tlsOptions()
        if let agent = options.userAgent { request.userAgent = agent }
        if let rate = options.limitRate.flatMap(CurlArguments.rate) {
            request.maxReceiveSpeed = rate
        }
        request.cache = cache

        // Redirects: only with -L, at most --max-redirs (curl's default 50). Like curl, an
        // https page may send us to http.
        let follows = options.location || options.locationTrusted
        request.maxRedirects = follows ? (options.maxRedirs < 0 ? Int(UInt32.max) : options.maxRedirs) : 0
        var policy: Request.RedirectPolicy = [.allowsDowngrade]
        if options.post301 { policy.insert(.keepsPOSTOn301) }
        if options.post302 { policy.insert(.keepsPOSTOn302) }
        if options.post303 { policy.insert(.keepsPOSTOn303) }
        if options.locationTrusted { policy.insert(.trustsCrossOrigin) }
        request.redirectPolicy = policy

        // Credentials: -u, else the URL's; curl keeps nothing between runs.
        request.authenticationSchemes = authSchemes
        request.sessionCredentialStore = nil
        if let user = options.user {
            let (name, password) = Self.userAndPassword(user)
            request.credential = Credential(user: name, password: password, persistence: .none)
        }

        // Cookies: the jar (-b FILE, -c) on every hop, -b "N=V" to this origin.
        request.usesCookies = cookieJar != nil
        if let jar = cookieJar { request.cookieJar = jar }
        request.cookie = cookieLine

        // The proxy: -x, else the environment's (curl's rules); --noproxy and no_proxy exempt
        // hosts; -U gives credentials to whichever proxy applies.
        let proxy: ProxyConfiguration?
        let proxyRules: ProxyEnvironment?
        do throws(TernError) {
            (proxy, proxyRules) = try proxyConfiguration(for: url)
        } catch {
            return error.code == .unsupported
                ? failure(4, error.message)
                : failure(5, "Unsupported proxy syntax: \(error.message)")
        }
        // With the rules, the engine chooses the proxy again for every redirect hop, as curl.
        if let proxyRules { request.proxyEnvironment = proxyRules } else { request.proxy = proxy }
        // --proxy-pac chooses every hop's proxies; -U's credential goes to the one chosen.
        if let script = pac.value {
            request.proxyAutoConfiguration = script
            if let user = options.proxyUser {
                let (name, password) = Self.userAndPassword(user)
                request.proxy = ProxyConfiguration(
                    host: "pac", credential: Credential(user: name, password: password, persistence: .none))
            }
        }
        request.proxyAuthenticationSchemes = proxyAuthSchemes
        if let referer = options.referer {
            request.referrer = referer.hasSuffix(";auto") ? String(referer.dropLast(5)) : referer
        }

        // Header fields.
        var fields = HTTPFields()
        var omitted: [String] = []
        for line in options.headers {
            guard let colon = line.firstIndex(of: ":") else {
                if line.hasSuffix(";"), let name = HTTPField.Name(String(line.dropLast())) {
                    fields.append(HTTPField(name: name, value: ""))
                }
                continue
            }
            let nameText = line[..<colon].trimmingWhitespace()
            let value = line[line.index(after: colon)...].trimmingWhitespace()
            guard let name = HTTPField.Name(nameText) else {
                return failure(43, "invalid header field name \"\(nameText)\"")
            }
            if value.isEmpty {  // curl: "Name:" removes the field the engine adds by itself
                if !["content-length", "transfer-encoding"].contains(name.canonicalName) {
                    omitted.append(nameText)
                }
                continue
            }
            if ["content-length", "transfer-encoding"].contains(name.canonicalName) {
                if options.verbose { Output.stderr("* ignoring \(nameText): the engine frames the body\n") }
                continue
            }
            fields.append(HTTPField(name: name, value: value))
        }
        request.omittedHeaderFields = omitted

        // The request body: -d and friends (a form), -F (multipart, files streamed from
        // disk), or -T (a file streamed as it is, stdin chunked).
        var defaultMethod: HTTPRequest.Method?
        do throws(BodyFailure) {
            if !dataItems.isEmpty {
                request.requestBody = try Bodies.data(dataItems)
                if fields[.contentType] == nil {
                    fields[.contentType] = "application/x-www-form-urlencoded"
                }
                defaultMethod = .post
            } else if !formItems.isEmpty {
                request.requestBody = .multipart(try Bodies.multipart(formItems))
                defaultMethod = .post
            } else if let upload = options.uploadFile {
                request.requestBody = try uploadBody(upload)
                defaultMethod = .put
            }
        } catch {
            return failure(error.code, error.message)
        }

        // The method.
        if let name = options.method {
            guard let method = HTTPRequest.Method(name) else {
                return failure(43, "invalid request method \"\(name)\"")
            }
            request.method = method
        } else if let defaultMethod {
            request.method = defaultMethod
        }
        request.headOnly = options.head

        // Where the body goes.
        var outputPath: String?
        if index < options.outputs.count {
            outputPath = options.outputs[index]
        }
        if outputPath == CurlArguments.remoteNameMarker
            || (outputPath == nil && (options.remoteName > 0 || options.remoteNameAll))
        {
            let name = url.lastPathComponent
            guard !name.isEmpty, name != "/" else {
                return failure(23, "Remote file name has no length")
            }
            outputPath = name
        }
        if outputPath == "-" { outputPath = nil }
        let state = TransferState()
        if let range = options.range { fields[.range] = "bytes=\(range)" }
        if let path = outputPath {
            request.downloadFile = path
            // curl's -o writes whatever the final response says, error pages included; -f
            // writes nothing for them.
            request.downloadsErrorBodies = !options.fail
            if options.continueAt == "-" {
                request.resume = true
            } else if let offset = options.continueAt.flatMap(UInt64.init), offset > 0 {
                request.downloadOffset = offset
            }
        } else {
            if let offset = options.continueAt.flatMap(UInt64.init), offset > 0 {
                fields[.range] = "bytes=\(offset)-"
            }
            let failOnError = options.fail
            request.dataHandler = { [unowned request] data in
                // Only the final hop's body arrives here: with -f, an error status stops it.
                if failOnError && request.statusCode >= 400 { return false }
                if Output.writeAll(1, data) { return true }
                state.writeFailed = true
                return false
            }
        }
        request.headerFields = fields

        // -D: the response head goes to a file.
        var dumpFD: Int32 = -1
        if let dump = options.dumpHeader {
            if dump == "-" {
                dumpFD = 1
            } else {
                dumpFD = open(dump, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o666)
                if dumpFD < 0 {
                    return failure(23, "Failed to open \(dump): \(String(cString: strerror(errno)))")
                }
            }
        }
        defer { if dumpFD > 2 { close(dumpFD) } }

        let verbose = options.verbose
        let showHead = (options.include || options.head) && outputPath == nil
        let failOnError = options.fail
        let dump = dumpFD
        request.headHandler = { request in
            // Interim 1xx heads come first, as curl prints them with -i, -D and -v.
            let head = (request.interimResponseHeads ?? "") + Self.headText(request)
            if verbose {
                Self.printSentHead(request)
                Output.stderr(head.split(separator: "\r\n", omittingEmptySubsequences: false)
                    .dropLast().map { "< \($0)\n" }.joined())
            }
            state.headShown = true
            if dump >= 0 { _ = Output.writeAll(dump, Data(head.utf8)) }
            // A 401 or 407 may be a challenge the engine answers with another hop; the body
            // handler stops a final one.
            if failOnError && request.statusCode >= 400 && request.statusCode != 401
                && request.statusCode != 407
            {
                return false
            }
            if showHead, !Output.writeAll(1, Data(head.utf8)) {
                state.writeFailed = true
                return false
            }
            return true
        }

        if verbose, let host = url.host {
            Output.stderr("* Trying \(host):\(url.port ?? (scheme == "https" ? 443 : 80))...\n")
        }
        // One transfer's meter; with -Z the run's one line (ParallelMeter) instead.
        let meter = !options.parallel && ProgressMeter.shouldShow(options: options, toStdout: outputPath == nil)
            ? ProgressMeter(request: request) : nil
        guard Interrupts.shared.begin(request) else {
            return TransferOutcome(code: 42)  // a signal came: the process is ending
        }
        meter?.start()
        board?.began(request)
        let result: Result<Response, TernError>
        do {
            result = .success(try await request.response())
        } catch let error as TernError {
            result = .failure(error)
        } catch {
            result = .failure(TernError(code: .cancelled, message: "\(error)"))
        }
        board?.ended(request)
        Interrupts.shared.end(request)
        meter?.finish()
        // -Z with --fail-early: another transfer failed and the run cancelled this one.
        let abortedByRun = Task.isCancelled
        if verbose, !state.headShown { Self.printSentHead(request) }

        var outcome = TransferOutcome(code: 0)
        let status = request.statusCode
        let retryableStatus = [408, 429, 500, 502, 503, 504].contains(status)
        var message = ""
        switch result {
        case .success:
            if failOnError && status >= 400 {
                outcome = TransferOutcome(code: 22, transient: retryableStatus, reason: "HTTP error")
                message = "The requested URL returned error: \(status)"
            } else if retryableStatus {
                outcome.transient = true
                outcome.reason = "HTTP error"
            }
        case .failure(let error):
            if abortedByRun, error.code == .cancelled {
                outcome = TransferOutcome(code: 42)
                message = "Transfer aborted due to critical error in another transfer"
            } else if state.writeFailed {
                outcome = TransferOutcome(code: 23)
                message = "Failure writing output to destination"
            } else if failOnError && status >= 400 {
                outcome = TransferOutcome(code: 22, transient: retryableStatus, reason: "HTTP error")
                message = "The requested URL returned error: \(status)"
            } else if proxy != nil, error.code == .resolveFailed {
                // Through a proxy only the proxy's name is resolved here.
                outcome = TransferOutcome(code: 5, transient: true, reason: "resolve proxy")
                message = "Could not resolve proxy: \(proxy?.host ?? ""): \(error.message)"
            } else {
                outcome = TransferOutcome(
                    code: ExitCodes.curl(for: error),
                    transient: error.isTimeout || error.code == .resolveFailed,
                    reason: error.isTimeout ? "timeout" : error.code.description)
                message = error.code == .tooManyRedirects
                    ? "Maximum (\(request.maxRedirects)) redirects followed (\(error.message))"
                    : error.message
            }
        }
        // curl -L --max-redirs 0 fails on the first redirect instead of returning it.
        if outcome.code == 0, follows, options.maxRedirs == 0, Self.isRedirect(request) {
            outcome = TransferOutcome(code: 47)
            message = "Maximum (0) redirects followed"
        }
        // nginx answers 400 after a handshake in which it asked for a certificate it did not
        // get; say what to do about it.
        if status == 400, options.cert == nil, request.tlsInfo?.wasClientCertificateRequested == true,
            !options.silent
        {
            Output.stderr("tern: the server asked for a client certificate; use -E/--cert\n")
        }
        if outcome.transient, retriesLeft > 0, Interrupts.shared.caught == 0 {
            return outcome  // the retry loop says what happened and tries again
        }
        if let format = options.writeOut {
            WriteOut.print(
                format, request: request, url: text, outputPath: outputPath,
                exitCode: outcome.code, errorMessage: message)
        }
        if outcome.code != 0 {
            report(outcome.code, message)
        } else if verbose {
            Output.stderr("* done\n")
        }
        return outcome
    }

    /// A 3xx response that -L would follow: a redirect status with a Location.
    static func isRedirect(_ request: Request) -> Bool {
        [301, 302, 303, 307, 308].contains(request.statusCode)
            && request.responseHeaders[.location] != nil
    }

    /// --proxy-pac's script: from an http(s) URL (fetched directly), else a file.
    static func loadPAC(_ source: String) async throws -> ProxyAutoConfiguration {
        let lower = source.lowercased()
        if lower.hasPrefix("http://") || lower.hasPrefix("https://") {
            guard let url = URL(string: source) else {
                throw TernError(code: .badURL, message: "bad PAC URL \(source)")
            }
            return try await ProxyAutoConfiguration.load(from: url)
        }
        return try ProxyAutoConfiguration(contentsOfFile: source)
    }

    /// USER[:PASSWORD] split at the first colon; no colon means an empty password (curl
    /// would prompt).
    static func userAndPassword(_ text: String) -> (String, String) {
        guard let colon = text.firstIndex(of: ":") else { return (text, "") }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }

    /// The proxy for `url` by curl's rules: -x ("" for none), else http_proxy, https_proxy,
    /// all_proxy; --noproxy (else no_proxy) exempts hosts; -U supplies the credential.
    /// The rules themselves come back too (for every hop) unless -U must replace the
    /// credentials of an environment variable's proxy.
    private func proxyConfiguration(for url: URL) throws(TernError)
        -> (ProxyConfiguration?, ProxyEnvironment?)
    {
        var environment = ProxyEnvironment()
        let credential = options.proxyUser.map { text -> Credential in
            let (name, password) = Self.userAndPassword(text)
            return Credential(user: name, password: password, persistence: .none)
        }
        if let explicit = options.proxy {
            if explicit.isEmpty {
                environment = .direct
            } else {
                environment.explicitProxy = try ProxyConfiguration(explicit, credential: credential)
            }
        }
        if let list = options.noProxy { environment.noProxy = NoProxyList(list) }
        let rules = credential == nil || environment.explicitProxy != nil ? environment : nil
        guard var proxy = try environment.proxy(for: url) else { return (nil, rules) }
        if let credential { proxy.credential = credential }
        return (proxy, rules)
    }

    /// The TLS options from --cacert, --capath, -k, -E, --key and --pass.
    private func tlsOptions() -> TLSOptions {
        var tls = TLSOptions(
            verifiesPeer: !options.insecure, caFile: options.caCert, caDirectory: options.caPath)
        if let cert = options.cert {
            let (path, password) = Bodies.certificate(cert)
            tls.clientCertificate = .init(
                certificateFile: path, keyFile: options.key, password: password ?? options.pass)
        }
        return tls
    }

    /// The -T body: a file streamed with its length, or stdin (a regular file the same way,
    /// a pipe or terminal chunked as it comes).
    private func uploadBody(_ upload: String) throws(BodyFailure) -> RequestBody {
        if upload == "-" {
            var info = stat()
            if fstat(0, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG {
                return .file("/dev/stdin")
            }
            // A pipe or terminal: read on a thread of its own, sent chunked as it arrives;
            // the engine's loop never waits in read(2), and no body timeout runs meanwhile.
            return .stream(StandardInputChunks())
        }
        guard FileManager.default.isReadableFile(atPath: upload) else {
            throw Bodies.unreadable(upload)
        }
        return .file(upload)
    }

    /// The response head as curl prints it for -i, -D and -v: status line, fields, blank line.
    static func headText(_ request: Request) -> String {
        var text = statusLine(
            version: request.responseHTTPVersion ?? .http1_1, code: request.statusCode,
            reason: request.status?.reasonPhrase ?? "")
        text += "\r\n"
        for field in request.responseHeaders {
            text += "\(field.name.rawName): \(field.value)\r\n"
        }
        return text + "\r\n"
    }

    /// A status line as curl prints it, without its CRLF: `HTTP/1.1 200 OK`, and for HTTP/2,
    /// which has no reason phrase, `HTTP/2 200 ` with curl's trailing space.
    static func statusLine(version: Response.HTTPVersion, code: Int, reason: String) -> String {
        if version.major >= 2 { return "\(version) \(code) " }
        return reason.isEmpty ? "\(version) \(code)" : "\(version) \(code) \(reason)"
    }

    /// Prints the request head as sent, curl's `> ` lines.
    static func printSentHead(_ request: Request) {
        guard let head = request.sentRequestHead else { return }
        Output.stderr(head.split(separator: "\r\n", omittingEmptySubsequences: false)
            .dropLast().map { "> \($0)\n" }.joined())
    }
}

/// Prints engine log lines as curl's `* ` info lines (for -v).
struct StarLogHandler: LogHandler {
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        Output.stderr("* \(event.message)\n")
    }
}

/// Holds --proxy-pac's script: written once by `run()` before any transfer task starts, read by
/// the transfers afterwards (task creation orders the two).
final class PACHolder: @unchecked Sendable {
    var value: ProxyAutoConfiguration?
}
