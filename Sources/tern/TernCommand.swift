// The `tern` command line: curl's flags and meanings for the subset Tern supports, parsed
// with swift-argument-parser after a curl-style pass over argv (see CurlArguments).

import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Tern

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

struct TernCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tern",
        abstract: "Transfer URLs over HTTP/1.1 and HTTP/2, with curl's flags.",
        discussion: """
            Several URLs are fetched one after another, or at once with -Z; the n-th -o or -O \
            goes with the n-th URL. The exit code is the last transfer's (-Z: the \
            last failed transfer's, 0 when all succeeded; --fail-early: the first failure's). \
            Exit codes follow curl's: 3 bad URL \
            (also a redirect Location that cannot be followed), 5 could not resolve the proxy, \
            6 could not resolve, 7 could not connect, 18 partial body, 22 HTTP error with -f, \
            23 write error, 26 read error, 28 timeout, 35 TLS handshake failed, 47 too many \
            redirects, 56 receive failure or the proxy refused CONNECT, 58 client certificate \
            problem, 60 server certificate not trusted, 61 bad or oversized compressed body, \
            67 authentication failed, 77 CA certificates unreadable, 97 SOCKS proxy \
            handshake failed. A final 401 is a response \
            (exit 0, or 22 with -f). http_proxy, https_proxy, all_proxy and no_proxy are \
            honoured as curl honours them.
            """,
        version: "tern \(Engine.version)")

    @Option(name: [.customShort("X"), .customLong("request")], parsing: .unconditional,
            help: "Request method to use.")
    var method: String?

    @Option(name: [.customShort("H"), .customLong("header")], parsing: .unconditionalSingleValue,
            help: ArgumentHelp("Extra header field \"Name: value\" (repeatable).", valueName: "header"))
    var headers: [String] = []

    @Option(name: [.customShort("d"), .customLong("data")], parsing: .unconditionalSingleValue,
            help: ArgumentHelp("POST data; @FILE reads a file without its newlines (repeatable, joined by &).", valueName: "data"))
    var data: [String] = []

    @Option(name: .customLong("data-binary"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("POST data as is; @FILE streams a file (repeatable).", valueName: "data"))
    var dataBinary: [String] = []

    @Option(name: .customLong("data-raw"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("POST data like -d, but @ has no special meaning (repeatable).", valueName: "data"))
    var dataRaw: [String] = []

    @Option(name: .customLong("data-urlencode"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("POST data, URL-encoded: CONTENT, =CONTENT, NAME=CONTENT, @FILE or NAME@FILE (repeatable).", valueName: "data"))
    var dataURLEncode: [String] = []

    @Option(name: [.customShort("F"), .customLong("form")], parsing: .unconditionalSingleValue,
            help: ArgumentHelp("multipart/form-data part: NAME=VALUE, NAME=@FILE[;type=TYPE][;filename=NAME], NAME=<FILE (repeatable).", valueName: "name=content"))
    var form: [String] = []

    @Option(name: .customLong("form-string"), parsing: .unconditionalSingleValue,
            help: ArgumentHelp("multipart/form-data field taken literally: NAME=VALUE (repeatable).", valueName: "name=string"))
    var formString: [String] = []

    @Option(name: [.customShort("T"), .customLong("upload-file")], parsing: .unconditional,
            help: ArgumentHelp("Upload FILE with PUT (\"-\": stdin, chunked); a URL ending in / gets the file name appended.", valueName: "file"))
    var uploadFile: String?

    @Flag(name: .customLong("compressed"),
          help: "Ask for a compressed response (Accept-Encoding: gzip, deflate, br, zstd) and decode it; another coding fails (61).")
    var compressed = false

    @Option(name: .customLong("cacert"), parsing: .unconditional,
            help: ArgumentHelp("Trust the CA certificates in this PEM file instead of the system store.", valueName: "file"))
    var caCert: String?

    @Option(name: .customLong("capath"), parsing: .unconditional,
            help: ArgumentHelp("Trust the CA certificates in this hashed directory instead of the system store.", valueName: "dir"))
    var caPath: String?

    @Flag(name: [.customShort("k"), .customLong("insecure")],
          help: "Do not verify the server's certificate or host name.")
    var insecure = false

    @Option(name: [.customShort("E"), .customLong("cert")], parsing: .unconditional,
            help: ArgumentHelp("Client certificate (PEM) and optional key password: CERT[:PASSWORD] (\\: for a colon in the name).", valueName: "certificate[:password]"))
    var cert: String?

    @Option(name: .customLong("key"), parsing: .unconditional,
            help: ArgumentHelp("Private key (PEM) of the client certificate, when not in the certificate file.", valueName: "key"))
    var key: String?

    @Option(name: .customLong("pass"), parsing: .unconditional,
            help: ArgumentHelp("Password of the private key.", valueName: "phrase"))
    var pass: String?

    @Option(name: [.customShort("o"), .customLong("output")], parsing: .unconditionalSingleValue,
            help: ArgumentHelp("Write the body to FILE instead of stdout (one per URL); it goes to FILE.part and replaces FILE only when complete, keeping its mode, owner, links and symlink.", valueName: "file"))
    var outputs: [String] = []

    @Flag(name: [.customShort("O"), .customLong("remote-name")],
          help: "Write the body to a file named like the URL's last path component (one per URL).")
    var remoteName: Int

    @Flag(name: .customLong("remote-name-all"),
          help: "Like -O for every URL that has no -o or -O of its own.")
    var remoteNameAll = false

    @Flag(name: [.customShort("Z"), .customLong("parallel")],
          help: "Run the transfers at once (at most --parallel-max), not one after another.")
    var parallel = false

    @Option(name: .customLong("parallel-max"), parsing: .unconditional,
            help: ArgumentHelp("With -Z, at most NUM transfers at once, to any hosts (largest 300; more means 300, less than 1 the default).", valueName: "num"))
    var parallelMax: Int = TernCommand.parallelDefault

    @Flag(name: .customLong("parallel-immediate"),
          help: "Accepted for curl; changes nothing. curl's option opens new connections rather than wait to multiplex transfers on one; Tern, like curl without it, lets transfers wait while a connection finds out whether it speaks HTTP/2, then multiplexes them on it.")
    var parallelImmediate = false

    @Flag(name: .customLong("fail-early"),
          help: "Stop at the first failed transfer and exit with its code (with -Z, the running ones are aborted with 42).")
    var failEarly = false

    @Option(name: [.customShort("C"), .customLong("continue-at")], parsing: .unconditional,
            help: ArgumentHelp("Resume at OFFSET; \"-\" continues FILE.part (or FILE) from its size, restarting if the resource changed (If-Range).", valueName: "offset"))
    var continueAt: String?

    @Option(name: [.customShort("r"), .customLong("range")], parsing: .unconditional,
            help: ArgumentHelp("Byte range to fetch, such as 0-499.", valueName: "range"))
    var range: String?

    @Flag(name: [.customShort("I"), .customLong("head")], help: "Fetch the headers only (HEAD).")
    var head = false

    @Flag(name: [.customShort("i"), .customLong("include")], help: "Include the response head in the output.")
    var include = false

    @Option(name: [.customShort("D"), .customLong("dump-header")], parsing: .unconditional,
            help: ArgumentHelp("Write the response head to FILE (\"-\": stdout).", valueName: "file"))
    var dumpHeader: String?

    @Flag(name: [.customShort("s"), .customLong("silent")], help: "No progress meter or error messages.")
    var silent = false

    @Flag(name: [.customShort("S"), .customLong("show-error")], help: "Show errors even with -s.")
    var showError = false

    @Flag(name: [.customShort("f"), .customLong("fail")], help: "Fail with exit code 22 and no body on HTTP status >= 400.")
    var fail = false

    @Option(name: [.customShort("w"), .customLong("write-out")], parsing: .unconditional,
            help: ArgumentHelp("Print FORMAT after the transfer: %{http_code}, %{size_download}, %{time_total}, %{url_effective}, ...", valueName: "format"))
    var writeOut: String?

    @Flag(name: [.customShort("v"), .customLong("verbose")], help: "Show the exchange on stderr.")
    var verbose = false

    @Option(name: [.customShort("A"), .customLong("user-agent")], parsing: .unconditional,
            help: ArgumentHelp("User-Agent to send.", valueName: "name"))
    var userAgent: String?

    @Option(name: [.customShort("e"), .customLong("referer")], parsing: .unconditional,
            help: ArgumentHelp("Referer URL to send.", valueName: "url"))
    var referer: String?

    @Option(name: .customLong("connect-timeout"), parsing: .unconditional,
            help: ArgumentHelp("Seconds allowed for connecting.", valueName: "seconds"))
    var connectTimeout: Double?

    @Option(name: [.customShort("m"), .customLong("max-time")], parsing: .unconditional,
            help: ArgumentHelp("Seconds allowed for the whole transfer.", valueName: "seconds"))
    var maxTime: Double?

    @Option(name: .customLong("retry"), parsing: .unconditional,
            help: ArgumentHelp("Retry transient failures (timeouts, resolve errors, HTTP 408, 429, 500, 502, 503, 504) up to N times.", valueName: "num"))
    var retry: Int = 0

    @Flag(name: [.customShort("0"), .customLong("http1.0")],
          help: "Speak HTTP/1.0. The last of --http1.0, --http1.1, --http2 and --http2-prior-knowledge wins.")
    var http10 = false

    @Flag(name: .customLong("http1.1"), help: "Speak HTTP/1.1 only (over TLS, ALPN offers http/1.1 alone).")
    var http11 = false

    @Flag(name: .customLong("http2"),
          help: "Speak HTTP/2 when TLS negotiates it, else HTTP/1.1: the default (no h2c upgrade on http://).")
    var http2 = false

    @Flag(name: .customLong("http2-prior-knowledge"),
          help: "Speak HTTP/2 without negotiating it: h2c on http://, ALPN h2 alone over TLS.")
    var http2PriorKnowledge = false

    /// The flags that choose the HTTP version, of which the last given wins (as in curl).
    static let httpVersionFlags: Set<String> = [
        "-0", "--http1.0", "--http1.1", "--http2", "--http2-prior-knowledge",
    ]

    /// Keeps only the last of the HTTP version flags set, as curl takes the last of them.
    mutating func settleHTTPVersion(lastFlag: String?) {
        http10 = lastFlag == "-0" || lastFlag == "--http1.0"
        http11 = lastFlag == "--http1.1"
        http2 = lastFlag == "--http2"
        http2PriorKnowledge = lastFlag == "--http2-prior-knowledge"
    }

    /// The HTTP versions a request may speak by the version flags: with --http1.0 the
    /// request's `http10` wins over this.
    var httpVersion: Request.HTTPVersionPreference {
        if http11 { return .http1_1 }
        if http2 { return .http2 }
        if http2PriorKnowledge { return .http2PriorKnowledge }
        return .automatic
    }

    @Flag(name: [.customShort("L"), .customLong("location")],
          help: "Follow redirects (301, 302, 303, 307, 308).")
    var location = false

    @Flag(name: .customLong("location-trusted"),
          help: "Like -L, and send credentials and -H cookies to other hosts too.")
    var locationTrusted = false

    @Option(name: .customLong("max-redirs"), parsing: .unconditional,
            help: ArgumentHelp("Follow at most NUM redirects with -L (default 50; -1: no limit).", valueName: "num"))
    var maxRedirs: Int = 50

    @Flag(name: .customLong("post301"), help: "Keep POST on a 301 with -L (instead of GET).")
    var post301 = false

    @Flag(name: .customLong("post302"), help: "Keep POST on a 302 with -L (instead of GET).")
    var post302 = false

    @Flag(name: .customLong("post303"), help: "Keep POST on a 303 with -L (instead of GET).")
    var post303 = false

    @Option(name: [.customShort("u"), .customLong("user")], parsing: .unconditional,
            help: ArgumentHelp("Server user and password USER[:PASSWORD] (no password: empty).", valueName: "user:password"))
    var user: String?

    @Flag(name: .customLong("basic"), help: "Send -u credentials with Basic, at once (the default).")
    var basic = false

    @Flag(name: .customLong("digest"), help: "Answer the server's challenge with Digest.")
    var digest = false

    @Flag(name: .customLong("ntlm"), help: "Answer the server's challenge with NTLM (-u 'DOMAIN\\user:password').")
    var ntlm = false

    @Flag(name: .customLong("anyauth"), help: "Answer the server's challenge with its strongest scheme (NTLM, Digest, Basic).")
    var anyAuth = false

    @Option(name: [.customShort("b"), .customLong("cookie")], parsing: .unconditionalSingleValue,
            help: ArgumentHelp("Cookies \"N=V; N2=V2\" to send, or a Netscape cookie FILE to read (enables the cookie engine) (repeatable).", valueName: "data|filename"))
    var cookies: [String] = []

    @Option(name: [.customShort("c"), .customLong("cookie-jar")], parsing: .unconditional,
            help: ArgumentHelp("Write all cookies to FILE (Netscape format) at the end; \"-\": stdout.", valueName: "filename"))
    var cookieJar: String?

    @Flag(name: [.customShort("j"), .customLong("junk-session-cookies")],
          help: "Ignore session cookies read from -b FILE.")
    var junkSessionCookies = false

    @Option(name: [.customShort("x"), .customLong("proxy")], parsing: .unconditional,
            help: ArgumentHelp("Proxy [SCHEME://][user:password@]host[:port], SCHEME http (the default), socks4, socks4a, socks5 or socks5h (\"\": none, not even from the environment).", valueName: "proxy"))
    var proxy: String?

    @Option(name: .customLong("proxy-pac"), parsing: .unconditional,
            help: ArgumentHelp("A proxy auto-configuration script (a file, or an http(s) URL) that chooses the proxies of every transfer and redirect; wins over -x and the proxy variables (exit 5 when it fails).", valueName: "file|url"))
    var proxyPAC: String?

    @Option(name: .customLong("socks4"), parsing: .unconditional,
            help: ArgumentHelp("SOCKS4 proxy [user@]host[:port] (the name resolved here); the last of -x and --socks* wins.", valueName: "host[:port]"))
    var socks4: String?

    @Option(name: .customLong("socks4a"), parsing: .unconditional,
            help: ArgumentHelp("SOCKS4A proxy [user@]host[:port] (the proxy resolves the name).", valueName: "host[:port]"))
    var socks4a: String?

    @Option(name: .customLong("socks5"), parsing: .unconditional,
            help: ArgumentHelp("SOCKS5 proxy [user:password@]host[:port] (the name resolved here).", valueName: "host[:port]"))
    var socks5: String?

    @Option(name: .customLong("socks5-hostname"), parsing: .unconditional,
            help: ArgumentHelp("SOCKS5 proxy [user:password@]host[:port] that resolves the name.", valueName: "host[:port]"))
    var socks5Hostname: String?

    /// The proxy string of the last of -x/--proxy and the --socks* options, as curl takes the
    /// last of them: a --socks* value gets its scheme unless it names one itself.
    mutating func settleProxy(lastFlag: String?) {
        let socks: (String?, String)? = switch lastFlag {
        case "--socks4": (socks4, "socks4")
        case "--socks4a": (socks4a, "socks4a")
        case "--socks5": (socks5, "socks5")
        case "--socks5-hostname": (socks5Hostname, "socks5h")
        default: nil
        }
        guard let (value, scheme) = socks, let value else { return }
        proxy = value.contains("://") ? value : "\(scheme)://\(value)"
    }

    @Option(name: [.customShort("U"), .customLong("proxy-user")], parsing: .unconditional,
            help: ArgumentHelp("Proxy user and password USER[:PASSWORD].", valueName: "user:password"))
    var proxyUser: String?

    @Option(name: .customLong("noproxy"), parsing: .unconditional,
            help: ArgumentHelp("Hosts to reach without a proxy, comma-separated (\"*\": all); replaces no_proxy.", valueName: "no-proxy-list"))
    var noProxy: String?

    @Flag(name: .customLong("proxy-basic"), help: "Send proxy credentials with Basic, at once (the default).")
    var proxyBasic = false

    @Flag(name: .customLong("proxy-digest"), help: "Answer the proxy's challenge with Digest.")
    var proxyDigest = false

    @Flag(name: .customLong("proxy-ntlm"), help: "Answer the proxy's challenge with NTLM (-U 'DOMAIN\\user:password').")
    var proxyNTLM = false

    @Flag(name: .customLong("proxy-anyauth"), help: "Answer the proxy's challenge with its strongest scheme (NTLM, Digest, Basic).")
    var proxyAnyAuth = false

    @Option(name: .customLong("cache"), parsing: .unconditional,
            help: ArgumentHelp("Answer from and store into the HTTP cache in this folder (RFC 9111, private).", valueName: "dir"))
    var cacheFolder: String?

    @Option(name: .customLong("limit-rate"), parsing: .unconditional,
            help: ArgumentHelp("Receive at most RATE bytes per second; suffixes k, m, g (1024-based). The transfer then speaks HTTP/1.1 (the cap counts the bytes of a connection of its own).", valueName: "speed"))
    var limitRate: String?

    @Argument(help: "URLs to fetch, one after another (with -Z, at once).")
    var urls: [String] = []

    /// curl's default and largest --parallel-max.
    static let parallelDefault = 50
    static let parallelLargest = 300

    /// How many transfers may run at once: 1 without -Z; with it --parallel-max as curl takes
    /// it (above 300 is 300, below 1 is the default 50).
    var concurrencyLimit: Int {
        guard parallel else { return 1 }
        if parallelMax > Self.parallelLargest { return Self.parallelLargest }
        return parallelMax < 1 ? Self.parallelDefault : parallelMax
    }

    func validate() throws {
        if urls.isEmpty { throw ValidationError("no URL specified") }
        // curl's rules for seconds: 0 means no limit; negative, infinite and NaN are refused.
        for (flag, value) in [("-m", maxTime), ("--connect-timeout", connectTimeout)] {
            guard let value else { continue }
            if value.isNaN { throw ValidationError("\(flag): expected a proper numerical parameter") }
            if value < 0 { throw ValidationError("\(flag): expected a positive numerical parameter") }
            if value.isInfinite || value > 1e9 { throw ValidationError("\(flag): too large number") }
        }
        if retry < 0 { throw ValidationError("--retry needs a number >= 0") }
        if let range, range.isEmpty { throw ValidationError("-r needs a range") }
        if let c = continueAt, c != "-", UInt64(c) == nil {
            throw ValidationError("-C needs an offset or \"-\"")
        }
        if maxRedirs < -1 { throw ValidationError("--max-redirs needs a number >= -1") }
        if let rate = limitRate, CurlArguments.rate(rate) == nil {
            throw ValidationError("--limit-rate: unsupported rate \"\(rate)\" (use a number with G, M, K or B)")
        }
        let hasData = !(data.isEmpty && dataBinary.isEmpty && dataRaw.isEmpty && dataURLEncode.isEmpty)
        let hasForm = !(form.isEmpty && formString.isEmpty)
        if [hasData, hasForm, uploadFile != nil].filter({ $0 }).count > 1 {
            throw ValidationError("use only one of -d/--data*, -F/--form and -T/--upload-file")
        }
    }
}

extension TernCommand {
    /// The command from normalized arguments (``CurlArguments/normalize(_:)``), read as curl
    /// reads them: the last of -x and --socks*, and of the HTTP version flags, wins.
    static func parse(normalized arguments: [String], urlForms: [String: String] = [:]) throws
        -> TernCommand
    {
        // URLs go around swift-argument-parser, whose handling of positional arguments is
        // quadratic (10,000 URLs took seconds); it sees at most the first one.
        let (options, urls) = CurlArguments.splitURLs(arguments, urlForms: urlForms)
        var command = try TernCommand.parse(options + urls.prefix(1))
        command.urls = urls
        command.settleProxy(lastFlag: CurlArguments.last(
            of: ["-x", "--proxy", "--socks4", "--socks4a", "--socks5", "--socks5-hostname"],
            in: arguments))
        command.settleHTTPVersion(lastFlag: CurlArguments.last(of: httpVersionFlags, in: arguments))
        try command.validate()
        return command
    }
}

// `main` is synchronous: the work runs in a detached task that ends the process with exit(),
// and the main thread parks. An `async` main would park it in dispatch_main() instead, whose
// pthread_exit unwinds the main thread's stack: the unwinder's binary search and FDE reads
// keep about 0.5 MiB of .eh_frame_hdr and .eh_frame resident (bench/HISTORY-swift-path.md).
@main
enum Main {
    static func main() {
        reopenStandardDescriptors()
        signal(SIGPIPE, SIG_IGN)  // a closed pipe becomes a write error (exit 23)
        let argv = CurlArguments.commandLine()
        let arguments = CurlArguments.normalize(argv.words)
        // As curl: -V or --version prints the versions and features and ends, whatever else
        // the command line holds.
        if arguments.contains("-V") || arguments.contains("--version") {
            Output.stdout(versionReport())
            exit(0)
        }
        let command: TernCommand
        do {
            command = try TernCommand.parse(normalized: arguments, urlForms: argv.urlForms)
        } catch {
            if TernCommand.exitCode(for: error) == .success {
                TernCommand.exit(withError: error)  // --help, --version
            }
            Output.stderr("tern: \(TernCommand.message(for: error))\n"
                + "tern: try 'tern --help' for more information\n")
            exit(2)
        }
        // Before the first thread starts, so that every thread inherits the blocked signals
        // and a Ctrl-C at any moment from here on (a PAC script still loading included) reaches
        // Interrupts' sources instead of being dropped.
        Interrupts.install()
        let runner = CommandRunner(
            options: command, dataItems: CurlArguments.dataItems(in: arguments),
            formItems: CurlArguments.formItems(in: arguments),
            authFlag: CurlArguments.last(
                of: ["--basic", "--digest", "--ntlm", "--anyauth"], in: arguments),
            proxyAuthFlag: CurlArguments.last(
                of: ["--proxy-basic", "--proxy-digest", "--proxy-ntlm", "--proxy-anyauth"],
                in: arguments))
        Task.detached { exit(await runner.run()) }
        parkMainThread()
    }
}

/// What `tern -V` prints, in `curl -V`'s shape: the program, its platform and the libraries'
/// versions; the protocols; the features, of which br and zstd only when the engine has them.
func versionReport() -> String {
    var system = utsname()
    uname(&system)
    func field<T>(_ value: T) -> String {
        withUnsafeBytes(of: value) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
    let libraries = Engine.libraryVersions
    var features = ["AsynchDNS"]
    if libraries.contains(" brotli/") { features.append("brotli") }
    features += ["Digest", "HTTP2", "IPv6", "Largefile", "libz", "NTLM", "SSL", "threadsafe"]
    if libraries.contains(" zstd/") { features.append("zstd") }
    return "tern \(Engine.version) (\(field(system.machine))-\(field(system.sysname).lowercased())) "
        + "\(libraries)\n"
        + "Protocols: http https\n"
        + "Features: \(features.joined(separator: " "))\n"
}

/// Parks the calling (main) thread for good. SIGINT and SIGTERM are blocked in it since
/// Interrupts.install(), so pause() never returns: the command's task ends the process.
func parkMainThread() -> Never {
    while true { pause() }
}

/// Started with 0, 1 or 2 closed (`tern URL <&-`), the first file or socket opened would take
/// that number and output meant for a file could land on "stdout": each closed one is opened on
/// /dev/null first, as curl does. open() returns the lowest free number, so this fills exactly
/// the closed ones.
func reopenStandardDescriptors() {
    var fd: Int32
    repeat {
        fd = open("/dev/null", O_RDWR)
    } while fd >= 0 && fd <= 2
    if fd > 2 { close(fd) }
}

/// Rewrites argv the way curl reads it, so swift-argument-parser sees one option per word:
/// grouped short flags (`-sSf`), a short option with its value attached (`-XPOST`, `-o-`),
/// and a value that looks like an option (`-C -`, `-d -x`) after its option.
enum CurlArguments {
    static let shortWithValue: Set<Character> = [
        "X", "H", "d", "o", "C", "r", "D", "w", "A", "e", "m", "F", "T", "E", "u", "b", "c",
        "x", "U",
    ]
    static let longWithValue: Set<String> = [
        "--request", "--header", "--data", "--data-binary", "--output", "--continue-at",
        "--range", "--dump-header", "--write-out", "--user-agent", "--referer",
        "--connect-timeout", "--max-time", "--retry", "--data-raw", "--data-urlencode",
        "--form", "--form-string", "--upload-file", "--cacert", "--capath", "--cert", "--key",
        "--pass", "--max-redirs", "--user", "--cookie", "--cookie-jar", "--proxy",
        "--proxy-user", "--noproxy", "--limit-rate", "--parallel-max", "--cache", "--proxy-pac", "--socks4",
        "--socks4a", "--socks5", "--socks5-hostname",
    ]

    /// Which of `flags` comes last in normalized arguments (curl: the last of --basic,
    /// --digest, --ntlm and --anyauth wins); `nil` when none is there.
    static func last(of flags: Set<String>, in arguments: [String]) -> String? {
        var found: String?
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            index += 1
            if word == "--" { break }
            if flags.contains(word) {
                found = word
            } else if longWithValue.contains(word)
                || (word.count == 2 && word.hasPrefix("-") && shortWithValue.contains(word.last!))
            {
                index += 1  // that option's value
            }
        }
        return found
    }

    /// A --limit-rate value in bytes per second: an integer with an optional unit G, M, K or
    /// B (1024-based; either case), as curl reads it; `nil` when malformed.
    static func rate(_ text: String) -> UInt64? {
        var digits = Substring(text)
        var multiplier: UInt64 = 1
        if let unit = digits.last, !unit.isNumber {
            switch unit {
            case "g", "G": multiplier = 1 << 30
            case "m", "M": multiplier = 1 << 20
            case "k", "K": multiplier = 1 << 10
            case "b", "B": multiplier = 1
            default: return nil
            }
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let value = UInt64(digits) else {
            return nil
        }
        let (product, overflow) = value.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : product
    }

    /// The request body options in command-line order (curl joins them with `&` in the order
    /// given, whichever flag each came from), read from normalized arguments.
    static func dataItems(in arguments: [String]) -> [DataItem] {
        values(of: [
            "-d": DataItem.Kind.data, "--data": .data, "--data-binary": .binary,
            "--data-raw": .raw, "--data-urlencode": .urlencode,
        ], in: arguments).map { DataItem(kind: $0.tag, value: $0.value) }
    }

    /// The -F and --form-string values in command-line order; `literal` marks --form-string.
    static func formItems(in arguments: [String]) -> [(value: String, literal: Bool)] {
        values(of: ["-F": false, "--form": false, "--form-string": true], in: arguments)
            .map { (value: $0.value, literal: $0.tag) }
    }

    /// The values of the given options (each with its tag), in order, from normalized
    /// arguments, where every option with a value is followed by it (or written --name=value).
    private static func values<Tag>(of options: [String: Tag], in arguments: [String])
        -> [(tag: Tag, value: String)]
    {
        var found: [(tag: Tag, value: String)] = []
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            index += 1
            if word == "--" { break }
            if let tag = options[word], index < arguments.count {
                found.append((tag, arguments[index]))
                index += 1
            } else if word.hasPrefix("--"), let eq = word.firstIndex(of: "=") {
                if let tag = options[String(word[..<eq])] {
                    found.append((tag, String(word[word.index(after: eq)...])))
                }
            } else if longWithValue.contains(word)
                || (word.count == 2 && word.hasPrefix("-") && shortWithValue.contains(word.last!))
            {
                index += 1  // that option's value
            }
        }
        return found
    }

    /// argv as Strings. An argument that is not valid UTF-8 comes out of
    /// CommandLine.arguments with U+FFFD in place of its bytes; for URLs the second result maps
    /// that form to the bytes percent-encoded as curl sends them ("%e9"). Other arguments (file
    /// names, data) are taken as CommandLine.arguments gives them.
    static func commandLine() -> (words: [String], urlForms: [String: String]) {
        let words = Array(CommandLine.arguments.dropFirst())
        var forms: [String: String] = [:]
        for index in words.indices {
            guard let raw = CommandLine.unsafeArgv[index + 1] else { continue }
            let bytes = UnsafeBufferPointer(
                start: UnsafeRawPointer(raw).assumingMemoryBound(to: UInt8.self), count: strlen(raw))
            if String(validating: bytes, as: UTF8.self) == nil {
                forms[words[index]] = percentEncodingNonASCII(bytes)
            }
        }
        return (words, forms)
    }

    static func percentEncodingNonASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        var out = ""
        for byte in bytes {
            if byte >= 0x80 {
                out += "%" + String(byte, radix: 16)
            } else {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            }
        }
        return out
    }

    /// Normalized arguments split into options (with their values) and the URLs, in order.
    /// Everything after "--" is a URL.
    static func splitURLs(_ arguments: [String], urlForms: [String: String] = [:])
        -> (options: [String], urls: [String])
    {
        var options: [String] = []
        var urls: [String] = []
        options.reserveCapacity(arguments.count)
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            index += 1
            if word == "--" {
                urls.append(contentsOf: arguments[index...])
                break
            }
            if word.hasPrefix("-"), word.count > 1 {
                options.append(word)
                if longWithValue.contains(word)
                    || (word.count == 2 && shortWithValue.contains(word.last!)),
                    index < arguments.count
                {
                    options.append(arguments[index])
                    index += 1
                }
            } else {
                urls.append(urlForms[word] ?? word)
            }
        }
        return (options, urls)
    }

    /// Stands for "-O" in the output list: -o and -O pair with URLs in the order given.
    static let remoteNameMarker = "\u{1}remote-name"

    static func normalize(_ arguments: [String]) -> [String] {
        var out: [String] = []
        func emit(_ word: String) {
            if word == "-O" || word == "--remote-name" {
                out.append(contentsOf: ["-o", remoteNameMarker])
            } else {
                out.append(word)
            }
        }
        var valueNext = false
        var index = 0
        while index < arguments.count {
            let arg = arguments[index]
            index += 1
            if valueNext {
                out.append(arg)
                valueNext = false
            } else if arg == "--" {
                out.append(contentsOf: arguments[(index - 1)...])
                break
            } else if arg.hasPrefix("--") {
                emit(arg)
                valueNext = longWithValue.contains(arg)
            } else if arg.hasPrefix("-"), arg.count > 1 {
                let letters = Array(arg.dropFirst())
                for (i, letter) in letters.enumerated() {
                    emit("-\(letter)")
                    if shortWithValue.contains(letter) {
                        if i + 1 < letters.count {
                            out.append(String(letters[(i + 1)...]))
                        } else {
                            valueNext = true
                        }
                        break
                    }
                }
            } else {
                out.append(arg)
            }
        }
        return out
    }
}
