// The `tern` command line on hops: -L and --max-redirs, --post30x, -u with --basic, --digest
// and --anyauth, -b/-c/-j cookies, -x/-U/--noproxy/--proxy-* and the proxy environment
// variables, --limit-rate; a table of cases run through both tern and curl whose results
// (exit code, status, body, what the echo server saw) must agree; and cookie files written by
// one tool and read by the other.

import Foundation
import Testing
@testable import Tern

/// One run of a command line tool.
struct ToolRun {
    var status: Int32
    var stdout: Data
    var stderr: String
    var seconds: Double

    var text: String { String(decoding: stdout, as: UTF8.self) }
}

/// The environment for tool runs: the test process's, without proxy variables (which would
/// send requests elsewhere) plus `extra`; no exit-time sleep under ThreadSanitizer
/// (`childEnvironment`).
func toolEnvironment(_ extra: [String: String] = [:]) -> [String: String] {
    var environment = childEnvironment()
    for name in [
        "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY",
        "no_proxy", "NO_PROXY",
    ] {
        environment[name] = nil
    }
    environment.merge(extra) { _, new in new }
    return environment
}

/// Runs a program with arguments and an environment; stdout and stderr through files.
func runTool(_ path: String, _ arguments: [String], environment: [String: String] = toolEnvironment())
    throws -> ToolRun
{
    let out = temporaryPath("stdout")
    let err = temporaryPath("stderr")
    _ = FileManager.default.createFile(atPath: out, contents: nil)
    _ = FileManager.default.createFile(atPath: err, contents: nil)
    defer {
        try? FileManager.default.removeItem(atPath: out)
        try? FileManager.default.removeItem(atPath: err)
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.environment = environment
    process.standardOutput = FileHandle(forWritingAtPath: out)
    process.standardError = FileHandle(forWritingAtPath: err)
    process.standardInput = FileHandle.nullDevice
    let started = Date()
    try process.run()
    process.waitUntilExit()
    return ToolRun(
        status: process.terminationStatus,
        stdout: FileManager.default.contents(atPath: out) ?? Data(),
        stderr: String(decoding: FileManager.default.contents(atPath: err) ?? Data(), as: UTF8.self),
        seconds: Date().timeIntervalSince(started))
}

/// `tern` with a clean environment.
func ternTool(_ arguments: [String], environment: [String: String] = toolEnvironment()) throws
    -> ToolRun
{
    guard FileManager.default.isExecutableFile(atPath: TernBinary.path) else {
        throw TestServerError(description: "tern binary not found at \(TernBinary.path)")
    }
    return try runTool(TernBinary.path, arguments, environment: environment)
}

let curlPath = "/usr/bin/curl"
let curlIsInstalled = FileManager.default.isExecutableFile(atPath: curlPath)

/// What a run produced, reduced to what the comparison with curl looks at.
struct Observation: Equatable, CustomStringConvertible {
    var exit: Int32
    var status: String
    var bodySHA: String
    /// From faultserver's echo, when the body is one: method, body hash, the Authorization
    /// scheme (or the whole value for Basic), the cookies (sorted: curl sends the newest
    /// first, RFC 6265 the oldest), Proxy-Authorization presence, the request target.
    var echo: [String: String]

    /// The body with every IMF-fixdate ("Tue, 24 Nov 2026 21:13:51 GMT") replaced by a fixed
    /// placeholder. Error pages carry the time they were made (squid's 407 page: "Generated
    /// <date> by ..."), so two runs a second apart, as curl's and tern's can be, would differ in
    /// nothing else; every other byte is still compared.
    static func withoutDates(_ body: Data) -> Data {
        guard let text = String(data: body, encoding: .utf8) else { return body }
        let pattern = #"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT"#
        let replaced = text.replacingOccurrences(of: pattern, with: "<date>", options: .regularExpression)
        return Data(replaced.utf8)
    }

    var description: String {
        var text = "exit \(exit), status \(status), body \(bodySHA.prefix(12))"
        for key in echo.keys.sorted() { text += ", \(key)=\(echo[key]!)" }
        return text
    }

    init(run: ToolRun, body: Data) {
        exit = run.status
        status = run.text
        bodySHA = sha256(Self.withoutDates(body))
        echo = [:]
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            object["method"] != nil
        else { return }
        let parsed = try? Echo(body)
        echo["method"] = parsed?.method ?? "-"
        echo["target"] = parsed?.target ?? "-"
        echo["body"] = String((parsed?.bodySHA256 ?? "-").prefix(12))
        let authorization = parsed?.headers("Authorization").first
        echo["authorization"] =
            authorization.map { $0.hasPrefix("Basic ") ? $0 : String($0.prefix { $0 != " " }) }
            ?? "none"
        echo["cookie"] =
            parsed?.headers("Cookie").flatMap { $0.components(separatedBy: "; ") }.sorted()
            .joined(separator: "; ") ?? ""
        echo["proxy-authorization"] =
            parsed?.headers("Proxy-Authorization").isEmpty == false ? "sent" : "none"
        echo["content-type"] = parsed?.headers("Content-Type").first ?? "none"
    }
}

/// One case of the comparison: arguments with placeholders, and where tern knowingly differs.
struct CurlCase: CustomStringConvertible, Sendable {
    var name: String
    var arguments: [String]
    /// Echo fields that are expected to differ, with the reason.
    var differs: [String] = []
    var reason: String = ""

    var description: String { name }
}

extension TernTests {
    @Suite struct CLIHops {
        // MARK: - Same results as curl

        static let curlCases: [CurlCase] = [
            CurlCase(name: "redirect chain with -L", arguments: ["-L", "$F/redirect-chain?n=3"]),
            CurlCase(
                name: "absolute 301 chain", arguments: ["-L", "$F/redirect-chain?n=2&absolute=1&status=301"]),
            CurlCase(name: "302 without -L", arguments: ["$F/redirect-chain?n=2"]),
            CurlCase(
                name: "303 after POST", arguments: ["-L", "-d", "a=1", "$F/redirect?status=303&to=%2Fecho"],
                differs: ["content-type"],
                reason: "the engine keeps -d's Content-Type on the GET that replaces the POST (C fix requested)"),
            CurlCase(
                name: "302 after POST", arguments: ["-L", "-d", "a=1", "$F/redirect?status=302&to=%2Fecho"],
                differs: ["content-type"],
                reason: "the engine keeps -d's Content-Type on the GET that replaces the POST (C fix requested)"),
            CurlCase(
                name: "--post301", arguments: ["-L", "--post301", "-d", "a=1", "$F/redirect?status=301&to=%2Fecho"]),
            CurlCase(
                name: "--post302", arguments: ["-L", "--post302", "-d", "a=1", "$F/redirect?status=302&to=%2Fecho"]),
            CurlCase(name: "307 keeps POST", arguments: ["-L", "-d", "a=1", "$F/redirect?status=307&to=%2Fecho"]),
            CurlCase(name: "--max-redirs exceeded", arguments: ["-L", "--max-redirs", "3", "$F/redirect-loop"]),
            CurlCase(name: "unparsable Location", arguments: ["-L", "$F/redirect?to=http%3A%2F%2F%5Bbad"]),
            CurlCase(name: "--digest Apache (MD5)", arguments: ["--digest", "-u", "$USER:$PASS", "$APACHE/nest/apache/echo"]),
            CurlCase(
                name: "--digest Apache POST", arguments: ["--digest", "-u", "$USER:$PASS", "-d", "x=1", "$APACHE/nest/apache/echo"]),
            CurlCase(
                name: "--digest lighttpd (SHA-256)", arguments: ["--digest", "-u", "$USER:$PASS", "$LIGHTTPD/digest/1k.bin"]),
            CurlCase(
                name: "--digest lighttpd echo", arguments: ["--digest", "-u", "$USER:$PASS", "$LIGHTTPD/nest/lighttpd/echo"]),
            CurlCase(
                name: "--anyauth lighttpd", arguments: ["--anyauth", "-u", "$USER:$PASS", "$LIGHTTPD/digest-any/1k.bin"]),
            CurlCase(name: "--basic nginx", arguments: ["--basic", "-u", "$USER:$PASS", "$NGINX/nest/basic/echo"]),
            CurlCase(name: "-u without password", arguments: ["-u", "$USER", "$NGINX/basic/1k.bin"]),
            CurlCase(name: "wrong Digest password", arguments: ["--digest", "-u", "$USER:wrong", "$APACHE/digest/1k.bin"]),
            CurlCase(name: "wrong password with -f", arguments: ["-f", "--digest", "-u", "$USER:wrong", "$APACHE/digest/1k.bin"]),
            CurlCase(name: "-x squid, http", arguments: ["-x", "$SQUID", "$F/echo"]),
            CurlCase(name: "-x squid, https CONNECT", arguments: ["-x", "$SQUID", "--cacert", "$CA", "$TLS/1k.bin"]),
            CurlCase(
                name: "-x squid --proxy-digest, http",
                arguments: ["-x", "$SQUID_AUTH", "-U", "$USER:$PASS", "--proxy-digest", "$F/echo"]),
            CurlCase(
                name: "-x squid -U (Basic), https",
                arguments: ["-x", "$SQUID_AUTH", "-U", "$USER:$PASS", "--cacert", "$CA", "$TLS/1k.bin"]),
            CurlCase(name: "-x squid without credentials, https", arguments: ["-x", "$SQUID_AUTH", "--cacert", "$CA", "$TLS/1k.bin"]),
            CurlCase(name: "-x squid without credentials, http", arguments: ["-x", "$SQUID_AUTH", "$F/echo"]),
            CurlCase(name: "-x socks5h dante, http", arguments: ["-x", "socks5h://$SOCKS", "$F/echo"]),
            CurlCase(name: "--socks5 dante, https", arguments: ["--socks5", "$SOCKS", "--cacert", "$CA", "$TLS/1k.bin"]),
            CurlCase(name: "--socks4 dante, http", arguments: ["--socks4", "$SOCKS", "$F/echo"]),
            CurlCase(
                name: "--socks5-hostname with user and password",
                arguments: ["--socks5-hostname", "$SOCKS_USER:$SOCKS_PASS@$SOCKS_AUTH", "$F/echo"]),
            CurlCase(
                name: "-x socks5 -U, https",
                arguments: ["-x", "socks5://$SOCKS_AUTH", "-U", "$SOCKS_USER:$SOCKS_PASS", "--cacert", "$CA", "$TLS/1k.bin"]),
            CurlCase(
                name: "wrong SOCKS5 password (97)",
                arguments: ["--socks5-hostname", "$SOCKS_USER:wrong@$SOCKS_AUTH", "$F/echo"]),
            CurlCase(name: "no SOCKS5 credentials (97)", arguments: ["--socks5-hostname", "$SOCKS_AUTH", "$F/echo"]),
            CurlCase(name: "--socks4a refused by dante (97)", arguments: ["--socks4a", "$SOCKS", "$F/echo"]),
            CurlCase(name: "-x squid then --socks5: the last wins", arguments: ["-x", "$SQUID", "--socks5", "$SOCKS", "$F/echo"]),
            CurlCase(name: "-H Accept: removes it, -H X-Empty; sends it empty", arguments: ["-H", "Accept:", "-H", "X-Empty;", "$F/echo"]),
            CurlCase(name: "-b N=V on a chain", arguments: ["-L", "-b", "n=v", "$F/redirect-chain?n=2"]),
            CurlCase(name: "-b FILE on a chain", arguments: ["-L", "-b", "$JAR", "$F/redirect-chain?n=2"]),
            CurlCase(name: "-c engine on a chain", arguments: ["-L", "-c", "/dev/null", "$F/redirect-chain?n=3"]),
            CurlCase(
                name: "-u across origins",
                arguments: ["-L", "-u", "$USER:$PASS", "$F/redirect?to=http%3A%2F%2F127.0.0.1%3A$FAULT2%2Fecho"]),
            CurlCase(
                name: "-H Cookie across origins",
                arguments: ["-L", "-H", "Cookie: h=1", "$F/redirect?to=http%3A%2F%2F127.0.0.1%3A$FAULT2%2Fecho"]),
            CurlCase(
                name: "-b N=V across origins",
                arguments: ["-L", "-b", "n=v", "$F/redirect?to=http%3A%2F%2F127.0.0.1%3A$FAULT2%2Fecho"],
                differs: ["cookie"],
                reason: "curl sends -b 'N=V' cookies to every host a redirect leads to; tern keeps them on their origin"),
        ]

        /// The arguments with placeholders filled in.
        static func expand(_ arguments: [String], _ servers: Servers, jar: String) throws -> [String] {
            let values: [(String, String)] = [
                ("$SQUID_AUTH", "http://127.0.0.1:\(try servers.must("SQUID_AUTH_PORT"))"),
                ("$SOCKS_AUTH", "127.0.0.1:\(try servers.must("SOCKS_AUTH_PORT"))"),
                ("$SOCKS_USER", try servers.must("SOCKS_USER")),
                ("$SOCKS_PASS", try servers.must("SOCKS_PASSWORD")),
                ("$SOCKS", "127.0.0.1:\(try servers.must("SOCKS_PORT"))"),
                ("$SQUID", "http://127.0.0.1:\(try servers.must("SQUID_PORT"))"),
                ("$APACHE", "http://127.0.0.1:\(try servers.must("APACHE_PORT"))"),
                ("$LIGHTTPD", "http://127.0.0.1:\(try servers.must("LIGHTTPD_PORT"))"),
                ("$NGINX", "http://127.0.0.1:\(servers.nginxPort)"),
                ("$FAULT2", try servers.must("FAULT2_PORT")),
                ("$F", "http://127.0.0.1:\(servers.faultPort)"),
                ("$TLS", "https://localhost:\(try servers.must("TLS_PORT"))"),
                ("$CA", try servers.must("CA_PEM")),
                ("$USER", try servers.must("AUTH_USER")),
                ("$PASS", try servers.must("AUTH_PASSWORD")),
                ("$JAR", jar),
            ]
            return arguments.map { argument in
                values.reduce(argument) { $0.replacingOccurrences(of: $1.0, with: $1.1) }
            }
        }

        /// Runs one tool on a case: the body on stdout, then the status from -w on a line of
        /// its own. (Not -o: curl writes any status's body to the file, tern's -o only a 2xx
        /// body; that is no hop matter.)
        static func observe(_ tool: String, _ testCase: CurlCase, _ servers: Servers) throws
            -> Observation
        {
            let jar = temporaryPath("jar")
            defer { try? FileManager.default.removeItem(atPath: jar) }
            // The same starting cookie file for both tools.
            try (CookieJar.netscapeHeader + "\n127.0.0.1\tFALSE\t/\tFALSE\t0\tfromfile\t1\n")
                .write(toFile: jar, atomically: true, encoding: .utf8)
            let arguments =
                (tool == curlPath ? ["-q"] : [])
                + ["-s", "-w", "\\n%{http_code}"]
                + (try expand(testCase.arguments, servers, jar: jar))
            var run = try runTool(tool, arguments)
            let newline = run.stdout.lastIndex(of: 0x0A) ?? run.stdout.startIndex
            let body = run.stdout[..<newline]
            run.stdout = Data(run.stdout[(newline == run.stdout.endIndex ? newline : newline + 1)...])
            return Observation(run: run, body: Data(body))
        }

        @Test(
            .enabled(
                if: curlIsInstalled,
                "curl is not installed at /usr/bin/curl: the tern-versus-curl comparison did not run"))
        func sameResultsAsCurl() throws {
            let servers = try Servers.get()
            var table = "case | exit tern/curl | status | body | echo | verdict\n"
            for testCase in Self.curlCases {
                let ours = try Self.observe(TernBinary.path, testCase, servers)
                let theirs = try Self.observe(curlPath, testCase, servers)
                var mismatches: [String] = []
                if ours.exit != theirs.exit { mismatches.append("exit") }
                if ours.status != theirs.status { mismatches.append("status") }
                // An echo is compared field by field (its connection serials and header lists
                // differ by tool); any other body byte for byte.
                if ours.echo.isEmpty && theirs.echo.isEmpty && ours.bodySHA != theirs.bodySHA {
                    mismatches.append("body")
                }
                for key in Set(ours.echo.keys).union(theirs.echo.keys).sorted()
                where ours.echo[key] != theirs.echo[key] {
                    mismatches.append(key)
                }
                let unexpected = mismatches.filter { !testCase.differs.contains($0) }
                let verdict =
                    unexpected.isEmpty
                    ? (mismatches.isEmpty ? "same" : "differs as expected: \(testCase.reason)")
                    : "DIFFERS: \(unexpected.joined(separator: ", "))"
                table += "\(testCase.name) | \(ours.exit)/\(theirs.exit) | \(ours.status)/\(theirs.status)"
                    + " | \(!ours.echo.isEmpty ? "(echo)" : ours.bodySHA == theirs.bodySHA ? "same" : "differs")"
                    + " | \(ours.echo == theirs.echo ? (ours.echo.isEmpty ? "-" : "same") : "differs")"
                    + " | \(verdict)\n"
                #expect(
                    unexpected.isEmpty,
                    "\(testCase.name): tern \(ours) vs curl \(theirs)")
                // Where tern differs on purpose, it is the safe side.
                if testCase.differs.contains("cookie") {
                    #expect(ours.echo["cookie"] == "", "\(testCase.name): \(ours)")
                }
            }
            print("tern versus curl (\(Self.curlCases.count) cases):\n" + table)
        }

        // MARK: - Cookie files between tern and curl

        @Test(
            .enabled(
                if: curlIsInstalled,
                "curl is not installed at /usr/bin/curl: the cookie-file exchange with curl did not run"))
        func cookieFilesGoBothWaysBetweenTernAndCurl() throws {
            let servers = try Servers.get()
            let setter =
                servers.fault("/status/200").absoluteString
                + "?header=Set-Cookie:keep=1;%20Max-Age=3600;%20Path=/"
                + "&header=Set-Cookie:http=2;%20HttpOnly;%20Path=/"
                + "&header=Set-Cookie:session=3;%20Path=/"
                + "&header=Set-Cookie:deep=4;%20Path=/nest"
            let echo = servers.fault("/echo").absoluteString
            let nestEcho = servers.fault("/nest/x/echo").absoluteString
            for (writer, reader) in [(TernBinary.path, curlPath), (curlPath, TernBinary.path)] {
                let file = temporaryPath("cookies.txt")
                defer { try? FileManager.default.removeItem(atPath: file) }
                let write = try runTool(writer, ["-s", "-o", "/dev/null", "-c", file, setter])
                #expect(write.status == 0, "\(writer): \(write.stderr)")
                let text = try String(contentsOfFile: file, encoding: .utf8)
                #expect(text.hasPrefix("# Netscape HTTP Cookie File"), "\(writer) wrote:\n\(text)")
                #expect(text.contains("#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t0\thttp\t2"), "\(text)")

                let read = try runTool(reader, ["-s", "-b", file, echo])
                #expect(read.status == 0)
                let sent = try Echo(read.stdout).headers("Cookie").first ?? ""
                #expect(
                    Set(sent.components(separatedBy: "; ")) == ["keep=1", "http=2", "session=3"],
                    "\(reader) read \(writer)'s file and sent \(sent)")
                let deep = try runTool(reader, ["-s", "-b", file, nestEcho])
                let deepSent = try Echo(deep.stdout).headers("Cookie").first ?? ""
                #expect(deepSent.components(separatedBy: "; ").first == "deep=4", "\(deepSent)")
                // -j drops the session cookies of the file.
                let junk = try runTool(reader, ["-s", "-j", "-b", file, echo])
                let junkSent = try Echo(junk.stdout).headers("Cookie").first ?? ""
                #expect(
                    Set(junkSent.components(separatedBy: "; ")) == ["keep=1"],
                    "\(reader) -j sent \(junkSent)")
            }
        }

        @Test func cookieJarToStdoutAndBackThroughTheFile() throws {
            let servers = try Servers.get()
            let chain = servers.fault("/redirect-chain?n=2").absoluteString
            let run = try ternTool(["-s", "-L", "-o", "/dev/null", "-c", "-", chain])
            #expect(run.status == 0)
            #expect(run.text.hasPrefix("# Netscape HTTP Cookie File\n"))
            #expect(run.text.contains("127.0.0.1\tFALSE\t/\tFALSE\t0\tchain0\t0\n"))
            #expect(run.text.contains("127.0.0.1\tFALSE\t/\tFALSE\t0\tchain1\t1\n"))

            // -b FILE and -c FILE together: read, add, write back; -b N=V stays out of it.
            let file = temporaryPath("jar.txt")
            defer { try? FileManager.default.removeItem(atPath: file) }
            #expect(try ternTool(["-s", "-L", "-o", "/dev/null", "-c", file, chain]).status == 0)
            let more = servers.fault("/status/200?header=Set-Cookie:more=1").absoluteString
            let again = try ternTool(["-s", "-o", "/dev/null", "-b", file, "-b", "manual=1", "-c", file, more])
            #expect(again.status == 0)
            let text = try String(contentsOfFile: file, encoding: .utf8)
            for name in ["chain0", "chain1", "more"] {
                #expect(text.contains("\t\(name)\t"), "\(name) in\n\(text)")
            }
            #expect(!text.contains("manual"))
            // A missing -b file is no error, as in curl.
            let missing = try ternTool(["-s", "-b", "/nonexistent/cookies.txt", servers.fault("/echo").absoluteString])
            #expect(missing.status == 0)
        }

        // MARK: - Redirects

        @Test func redirectsAndTheirExitCodes() throws {
            let servers = try Servers.get()
            let chain = servers.fault("/redirect-chain?n=3").absoluteString
            let run = try ternTool([
                "-s", "-L", "-o", "/dev/null", "-w", "%{http_code} %{num_redirects} %{url_effective}", chain,
            ])
            #expect(run.status == 0)
            #expect(run.text == "200 3 \(chain)&i=3&status=302")
            // Without -L the 302 is the response, and -w names where it points.
            let plain = try ternTool(["-s", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", chain])
            #expect(plain.text == "302 http://127.0.0.1:\(servers.faultPort)/redirect-chain?n=3&i=1&status=302")

            let loop = try ternTool(["-sS", "-L", "--max-redirs", "2", servers.fault("/redirect-loop").absoluteString])
            #expect(loop.status == 47)
            #expect(loop.stderr.contains("Maximum (2) redirects followed"))
            let zero = try ternTool(["-sS", "-L", "--max-redirs", "0", chain])
            #expect(zero.status == 47)
            let bad = try ternTool(["-s", "-L", servers.fault("/redirect?to=http%3A%2F%2F%5Bbad").absoluteString])
            #expect(bad.status == 3)
            // curl follows https → http; so does tern's -L.
            let downgrade = try ternTool([
                "-s", "-L", "--cacert", try servers.must("CA_PEM"), "-o", "/dev/null", "-w", "%{http_code}",
                servers.https("TLS_PORT", "/to-http/1k.bin").absoluteString,
            ])
            #expect(downgrade.status == 0)
            #expect(downgrade.text == "200")
        }

        @Test func includeShowsEveryHopsHead() throws {
            let servers = try Servers.get()
            let run = try ternTool(["-s", "-i", "-L", servers.fault("/redirect-chain?n=2").absoluteString])
            #expect(run.status == 0)
            #expect(run.text.components(separatedBy: "HTTP/1.1 302").count == 3)
            #expect(run.text.contains("HTTP/1.1 200"))
        }

        // MARK: - Authentication

        @Test func digestAndBasicFromTheCommandLine() throws {
            let servers = try Servers.get()
            let user = "\(try servers.must("AUTH_USER")):\(try servers.must("AUTH_PASSWORD"))"
            let sha = servers.sha("SHA_1K")
            for (flags, url) in [
                (["--digest"], "http://127.0.0.1:\(try servers.must("APACHE_PORT"))/digest/1k.bin"),
                (["--digest"], "http://127.0.0.1:\(try servers.must("LIGHTTPD_PORT"))/digest/1k.bin"),
                (["--anyauth"], "http://127.0.0.1:\(try servers.must("LIGHTTPD_PORT"))/digest-sha512-256/1k.bin"),
                (["--basic"], servers.nginx("/basic/1k.bin").absoluteString),
                ([], servers.nginx("/basic/1k.bin").absoluteString),
                (["--digest", "--basic"], servers.nginx("/basic/1k.bin").absoluteString),
            ] {
                let run = try ternTool(["-sS"] + flags + ["-u", user, url])
                #expect(run.status == 0, "\(flags) \(url): \(run.stderr)")
                #expect(sha256(run.stdout) == sha, "\(flags) \(url)")
            }
            // User and password in the URL, with escapes.
            let bob = "bob:p%40ss%3Aw0rd%25"
            let inURL = try ternTool(["-sS", "--digest", "http://\(bob)@127.0.0.1:\(try servers.must("APACHE_PORT"))/digest/1k.bin"])
            #expect(sha256(inURL.stdout) == sha, "\(inURL.stderr)")

            // A refused password: the 401 is the answer (exit 0), or exit 22 with -f.
            let wrong = ["--digest", "-u", "alice:wrong", "http://127.0.0.1:\(try servers.must("APACHE_PORT"))/digest/1k.bin"]
            let plain = try ternTool(["-s", "-o", "/dev/null", "-w", "%{http_code}"] + wrong)
            #expect(plain.status == 0)
            #expect(plain.text == "401")
            let failing = try ternTool(["-s", "-f"] + wrong)
            #expect(failing.status == 22)
            #expect(failing.stdout.isEmpty)
            // -f lets the challenge be answered.
            let answered = try ternTool(["-sf", "--digest", "-u", user, "http://127.0.0.1:\(try servers.must("APACHE_PORT"))/digest/1k.bin"])
            #expect(answered.status == 0)
            #expect(sha256(answered.stdout) == sha)
        }

        @Test func nothingLeavesItsOriginOnTheCommandLine() throws {
            let servers = try Servers.get()
            let fault2 = try servers.must("FAULT2_PORT")
            for target in ["http://127.0.0.1:\(fault2)/echo", "http://localhost:\(fault2)/echo"] {
                let to = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                let jar = temporaryPath("jar")
                defer { try? FileManager.default.removeItem(atPath: jar) }
                let run = try ternTool([
                    "-s", "-L", "-u", "alice:wonderland", "-b", "manual=1", "-c", jar,
                    "-H", "X-Other: kept", "-D", "-",
                    servers.fault("/redirect?to=\(to)&cookie=jar%3D1%3B%20Path%3D%2F").absoluteString,
                ])
                #expect(run.status == 0, "\(run.stderr)")
                // The first hop got everything (its head is dumped before the echo).
                #expect(run.text.contains("X-Echo-Authorization: Basic "))
                #expect(run.text.contains("X-Echo-Cookie: manual=1"))
                let body = run.text[run.text.range(of: "{")!.lowerBound...]
                let echo = try Echo(Data(body.utf8))
                #expect(echo.headers("Authorization").isEmpty, "\(target)")
                #expect(echo.headers("X-Other") == ["kept"])
                #expect(
                    echo.headers("Cookie") == (target.contains("localhost") ? [] : ["jar=1"]),
                    "\(target)")
            }
            // -H fields with credentials too.
            let headers = try ternTool([
                "-s", "-L", "-H", "Authorization: Bearer t", "-H", "Cookie: h=1",
                servers.fault("/redirect?to=http%3A%2F%2F127.0.0.1%3A\(fault2)%2Fecho").absoluteString,
            ])
            let echo = try Echo(headers.stdout)
            #expect(echo.headers("Authorization").isEmpty)
            #expect(echo.headers("Cookie").isEmpty)
            // --location-trusted sends them on.
            let trusted = try ternTool([
                "-s", "--location-trusted", "-u", "alice:wonderland",
                servers.fault("/redirect?to=http%3A%2F%2F127.0.0.1%3A\(fault2)%2Fecho").absoluteString,
            ])
            #expect(try Echo(trusted.stdout).headers("Authorization").first?.hasPrefix("Basic ") == true)
        }

        // MARK: - Proxies

        func viaSquid(_ run: ToolRun) -> Bool {
            (try? Echo(run.stdout).headers("Via").first?.contains("tern-squid")) == true
        }

        @Test func proxyFlags() throws {
            let servers = try Servers.get()
            let squid = "127.0.0.1:\(try servers.must("SQUID_PORT"))"
            let squidAuth = "http://127.0.0.1:\(try servers.must("SQUID_AUTH_PORT"))"
            let echo = servers.fault("/echo").absoluteString
            let tls = "https://localhost:\(try servers.must("TLS_PORT"))/1k.bin"
            let ca = try servers.must("CA_PEM")
            let sha = servers.sha("SHA_1K")

            #expect(viaSquid(try ternTool(["-s", "-x", squid, echo])))
            let connect = try ternTool(["-sS", "-x", squid, "--cacert", ca, tls])
            #expect(sha256(connect.stdout) == sha, "\(connect.stderr)")
            for flags in [["--proxy-basic"], ["--proxy-digest"], ["--proxy-anyauth"], []] {
                let run = try ternTool(["-sS", "-x", squidAuth, "-U", "alice:wonderland"] + flags + [echo])
                #expect(viaSquid(run), "\(flags): \(run.stderr)")
                let tunnel = try ternTool(["-sS", "-x", squidAuth, "-U", "alice:wonderland", "--cacert", ca] + flags + [tls])
                #expect(sha256(tunnel.stdout) == sha, "\(flags): \(tunnel.stderr)")
            }
            // Credentials in the proxy URL.
            let inURL = try ternTool(["-sS", "-x", "http://alice:wonderland@127.0.0.1:\(try servers.must("SQUID_AUTH_PORT"))", echo])
            #expect(viaSquid(inURL), "\(inURL.stderr)")
            // A refused CONNECT is curl's 56; an unresolvable proxy 5; a bad proxy string 5.
            #expect(try ternTool(["-s", "-x", squidAuth, "--cacert", ca, tls]).status == 56)
            #expect(try ternTool(["-s", "-x", "http://tern-proxy.invalid:3128", echo]).status == 5)
            #expect(try ternTool(["-s", "-x", "http://[bad", echo]).status == 5)
            // --noproxy exempts a host; -x "" goes direct.
            #expect(!viaSquid(try ternTool(["-s", "-x", squid, "--noproxy", "127.0.0.1", echo])))
            #expect(!viaSquid(try ternTool(["-s", "-x", "", echo])))
        }

        @Test func proxyEnvironmentVariables() throws {
            let servers = try Servers.get()
            let squid = "http://127.0.0.1:\(try servers.must("SQUID_PORT"))"
            let echo = servers.fault("/echo").absoluteString
            let tls = "https://localhost:\(try servers.must("TLS_PORT"))/1k.bin"
            let ca = try servers.must("CA_PEM")

            #expect(viaSquid(try ternTool(["-s", echo], environment: toolEnvironment(["http_proxy": squid]))))
            // curl ignores upper-case HTTP_PROXY (CGI programs get it from a request header).
            #expect(!viaSquid(try ternTool(["-s", echo], environment: toolEnvironment(["HTTP_PROXY": squid]))))
            #expect(viaSquid(try ternTool(["-s", echo], environment: toolEnvironment(["all_proxy": squid]))))
            for name in ["no_proxy", "NO_PROXY"] {
                #expect(!viaSquid(try ternTool(
                    ["-s", echo], environment: toolEnvironment(["http_proxy": squid, name: "localhost,127.0.0.1"]))))
            }
            #expect(!viaSquid(try ternTool(
                ["-s", "--noproxy", "127.0.0.1", echo], environment: toolEnvironment(["http_proxy": squid]))))
            #expect(!viaSquid(try ternTool(["-s", "-x", "", echo], environment: toolEnvironment(["http_proxy": squid]))))
            // https_proxy takes https URLs through CONNECT: proven by a proxy that refuses.
            let squidAuth = "http://127.0.0.1:\(try servers.must("SQUID_AUTH_PORT"))"
            let refused = try ternTool(["-s", "--cacert", ca, tls], environment: toolEnvironment(["https_proxy": squidAuth]))
            #expect(refused.status == 56)
            let allowed = try ternTool(
                ["-s", "-U", "alice:wonderland", "--cacert", ca, tls],
                environment: toolEnvironment(["https_proxy": squidAuth, "http_proxy": "http://tern-proxy.invalid:1"]))
            #expect(allowed.status == 0, "\(allowed.stderr)")
            #expect(sha256(allowed.stdout) == servers.sha("SHA_1K"))
            // An unresolvable proxy from the environment is exit 5.
            #expect(try ternTool(
                ["-s", echo], environment: toolEnvironment(["http_proxy": "http://tern-proxy.invalid:3128"])).status == 5)
        }

        /// curl chooses the proxy again for every hop: a redirect to https goes through
        /// https_proxy, one to a no_proxy host goes direct; -w %{http_connect} is the CONNECT's
        /// status on success too.
        @Test func proxyChosenAgainForEveryHop() throws {
            let servers = try Servers.get()
            let squid = "http://127.0.0.1:\(try servers.must("SQUID_PORT"))"
            let squidAuth = "http://127.0.0.1:\(try servers.must("SQUID_AUTH_PORT"))"
            let ca = try servers.must("CA_PEM")
            let tls = "https://localhost:\(try servers.must("TLS_PORT"))/1k.bin"
            func redirect(to target: String) -> String {
                let encoded = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? target
                return servers.fault("/redirect").absoluteString + "?status=302&to=" + encoded
            }
            let tools = curlIsInstalled ? [TernBinary.path, curlPath] : [TernBinary.path]
            for tool in tools {
                let q = tool == curlPath ? ["-q"] : []
                // http_proxy for the first hop, https_proxy (squid's open port) for the second.
                let ok = try runTool(
                    tool, q + ["-sL", "--cacert", ca, "-o", "/dev/null", "-w", "%{http_connect}", redirect(to: tls)],
                    environment: toolEnvironment(["http_proxy": squid, "https_proxy": squid]))
                #expect(ok.status == 0 && ok.text == "200", "\(tool): \(ok.status) \(ok.text) \(ok.stderr)")
                // https_proxy refuses CONNECT without credentials: the https hop took it (56),
                // and the http proxy's credentials did not go with it. (curl 7.88 keeps the
                // first proxy URL's credentials for a later proxy with none; tern gives a
                // proxy URL's credentials to that proxy setting only.)
                if tool == TernBinary.path {
                    let refused = try runTool(
                        tool, q + ["-sL", "--cacert", ca, "-o", "/dev/null", redirect(to: tls)],
                        environment: toolEnvironment([
                            "http_proxy": "http://alice:wonderland@127.0.0.1:\(try servers.must("SQUID_AUTH_PORT"))",
                            "https_proxy": squidAuth,
                        ]))
                    #expect(refused.status == 56, "\(tool): \(refused.status) \(refused.stderr)")
                }
                // A redirect to a no_proxy host goes direct.
                let direct = try runTool(
                    tool, q + ["-sL", redirect(to: "http://localhost:\(try servers.must("FAULT2_PORT"))/echo")],
                    environment: toolEnvironment(["http_proxy": squid, "no_proxy": "localhost"]))
                #expect(direct.status == 0, "\(tool): \(direct.stderr)")
                #expect(!viaSquid(direct), "\(tool): the no_proxy hop went through squid")
                // -x with --noproxy: the same per hop.
                let flags = try runTool(
                    tool, q + ["-sL", "-x", squid, "--noproxy", "localhost",
                               redirect(to: "http://localhost:\(try servers.must("FAULT2_PORT"))/echo")])
                #expect(flags.status == 0 && !viaSquid(flags), "\(tool): \(flags.stderr)")
                // A plain request through the proxy sends no CONNECT: 000.
                let plain = try runTool(
                    tool, q + ["-s", "-x", squid, "-o", "/dev/null", "-w", "%{http_connect}", servers.fault("/echo").absoluteString])
                #expect(plain.text == "000", "\(tool): \(plain.text)")
            }
        }

        // MARK: - Rate

        @Test func limitRate() throws {
            let servers = try Servers.get()
            let run = try ternTool(["-s", "--limit-rate", "96k", "-o", "/dev/null", servers.nginx("/64k.txt").absoluteString])
            #expect(run.status == 0)
            #expect(run.seconds > 0.4, "64 KiB at 96 KiB/s took \(run.seconds) s")
            // The syntax: HEAD requests, so that no body crawls at 5 bytes per second.
            let url = servers.nginx("/64k.txt").absoluteString
            for rate in ["100", "64k", "2M", "1g", "5B", "1G"] {
                #expect(try ternTool(["-s", "-I", "--limit-rate", rate, "-o", "/dev/null", url]).status == 0, "\(rate)")
            }
            for rate in ["fast", "1.5k", "k", "10x", ""] {
                #expect(try ternTool(["-s", "--limit-rate", rate, url]).status == 2, "\(rate)")
            }
        }
    }
}
