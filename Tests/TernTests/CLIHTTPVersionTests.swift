// The `tern` command line and HTTP versions: --http1.0, --http1.1, --http2 and
// --http2-prior-knowledge (the last one wins, as in curl), -w '%{http_version}' and the status
// lines of -i and -v, compared with curl's against the same servers. The flag parsing and the
// formatting are also unit-tested through the `tern` module itself. The HTTP/2 servers are
// nginx's H2_TLS_PORT and H2C_PORT (see HTTPVersionTests.swift).

import Foundation
import Testing
@testable import Tern
@testable import tern

extension TernTests {
    @Suite struct CLIHTTPVersions {
        // MARK: - Unit: the flags and the formatting

        /// The command as `tern` parses `words`.
        func parsed(_ words: [String]) throws -> TernCommand {
            try TernCommand.parse(normalized: CurlArguments.normalize(words + ["http://h/"]))
        }

        @Test func theLastVersionFlagWins() throws {
            let cases: [([String], Bool, Request.HTTPVersionPreference)] = [
                ([], false, .automatic),
                (["--http1.0"], true, .automatic),
                (["-0"], true, .automatic),
                (["-s0"], true, .automatic),
                (["--http1.1"], false, .http1_1),
                (["--http2"], false, .http2),
                (["--http2-prior-knowledge"], false, .http2PriorKnowledge),
                (["--http2", "--http1.0"], true, .automatic),
                (["-0", "--http2"], false, .http2),
                (["--http1.1", "--http2-prior-knowledge"], false, .http2PriorKnowledge),
                (["--http2-prior-knowledge", "--http1.1"], false, .http1_1),
                (["--http2", "-H", "--http1.1", "--http1.0"], true, .automatic),
                (["--http1.0", "--http2", "-s", "--http1.1"], false, .http1_1),
            ]
            for (words, http10, preference) in cases {
                let command = try parsed(words)
                #expect(command.http10 == http10, "\(words)")
                #expect(command.httpVersion == preference, "\(words)")
            }
            // A header value that looks like a flag is a value, not a flag.
            let header = try parsed(["--http2", "-H", "--http1.1"])
            #expect(header.httpVersion == .http2 && header.headers == ["--http1.1"])
        }

        @Test func writeOutPrintsCurlsVersionNumbers() {
            #expect(WriteOut.httpVersion(nil) == "0")
            #expect(WriteOut.httpVersion(.http1_0) == "1.0")
            #expect(WriteOut.httpVersion(.http1_1) == "1.1")
            #expect(WriteOut.httpVersion(.http2) == "2")
            #expect(WriteOut.httpVersion(Response.HTTPVersion(major: 3, minor: 0)) == "3")
        }

        @Test func statusLinesAreCurls() {
            #expect(CommandRunner.statusLine(version: .http1_1, code: 200, reason: "OK") == "HTTP/1.1 200 OK")
            #expect(CommandRunner.statusLine(version: .http1_0, code: 404, reason: "Not Found")
                == "HTTP/1.0 404 Not Found")
            #expect(CommandRunner.statusLine(version: .http1_1, code: 299, reason: "") == "HTTP/1.1 299")
            // curl 7.88 and 8: "HTTP/2 200 " with a trailing space, whatever the reason.
            #expect(CommandRunner.statusLine(version: .http2, code: 200, reason: "") == "HTTP/2 200 ")
            #expect(CommandRunner.statusLine(version: .http2, code: 404, reason: "Not Found") == "HTTP/2 404 ")
        }

        // MARK: - The binary against HTTP/1 servers

        @Test func helpNamesTheVersionFlags() throws {
            let run = try ternTool(["--help"])
            for flag in ["--http1.0", "--http1.1", "--http2", "--http2-prior-knowledge"] {
                #expect(run.text.contains(flag), "\(flag)")
            }
        }

        @Test func theLastVersionFlagChoosesTheRequestLine() throws {
            let servers = try Servers.get()
            let url = servers.nginx("/1k.bin").absoluteString
            let cases: [([String], String)] = [
                ([], "HTTP/1.1"),
                (["--http2", "--http1.0"], "HTTP/1.0"),
                (["--http1.0", "--http1.1"], "HTTP/1.1"),
                (["--http1.0", "--http2"], "HTTP/1.1"),
                (["--http1.1", "-0"], "HTTP/1.0"),
            ]
            for (flags, version) in cases {
                let run = try ternTool(["-s", "-v", "-o", "/dev/null"] + flags + [url])
                #expect(run.status == 0, "\(flags): \(run.stderr)")
                #expect(run.stderr.contains("> GET /1k.bin \(version)\n"), "\(flags): \(run.stderr)")
            }
        }

        @Test(.enabled(if: curlIsInstalled, "curl is not installed at /usr/bin/curl"))
        func writeOutHTTPVersionMatchesCurlOnHTTP1() throws {
            let servers = try Servers.get()
            let url = servers.nginx("/1k.bin").absoluteString
            for flags in [[], ["--http1.0"], ["--http1.1"], ["--http2"]] {
                let arguments = ["-s", "-o", "/dev/null", "-w", "%{http_version}"] + flags + [url]
                let ours = try ternTool(arguments)
                let curls = try runTool(curlPath, ["-q"] + arguments)
                #expect(ours.text == "1.1", "\(flags)")
                #expect(ours.text == curls.text, "\(flags)")
            }
            // No response: 0, as curl.
            let refused = try ternTool(["-s", "-w", "%{http_version}", "http://127.0.0.1:1/"])
            #expect(refused.text == "0")
        }

        // MARK: - The binary against HTTP/2 servers (need the engine's HTTP/2)

        @Test(.enabled(if: curlIsInstalled, "curl is not installed at /usr/bin/curl"))
        func writeOutHTTPVersionMatchesCurlOnHTTP2() throws {
            let servers = try Servers.get()
            let ca = try servers.must("CA_PEM")
            let tls = try servers.h2TLS("/1k.bin").absoluteString
            let h2c = try servers.h2c("/1k.bin").absoluteString
            let cases: [([String], String, String)] = [
                ([], tls, "2"),
                (["--http2"], tls, "2"),
                (["--http1.1"], tls, "1.1"),
                (["--http2", "--http1.1"], tls, "1.1"),
                (["--http1.1", "--http2"], tls, "2"),
                (["--http2-prior-knowledge"], tls, "2"),
                (["--http2-prior-knowledge"], h2c, "2"),
                (["--http1.1", "--http2-prior-knowledge"], h2c, "2"),
            ]
            for (flags, url, expected) in cases {
                let arguments = ["-s", "--cacert", ca, "-o", "/dev/null", "-w", "%{http_version}"] + flags + [url]
                let ours = try ternTool(arguments)
                let curls = try runTool(curlPath, ["-q"] + arguments)
                #expect(ours.status == 0, "\(flags) \(url): \(ours.stderr)")
                #expect(ours.text == expected, "\(flags) \(url)")
                #expect(ours.text == curls.text, "\(flags) \(url)")
            }
        }

        @Test(.enabled(if: curlIsInstalled, "curl is not installed at /usr/bin/curl"))
        func statusLinesOfHTTP2AreCurls() throws {
            let servers = try Servers.get()
            let ca = try servers.must("CA_PEM")
            let url = try servers.h2TLS("/1k.bin").absoluteString
            /// The bytes before the first LF ("\r\n" is one Character to String).
            func firstLine(_ data: Data) -> String {
                String(decoding: data.prefix(while: { $0 != 0x0A }), as: UTF8.self)
            }
            // -i: the head on stdout, its status line byte for byte as curl prints it.
            let ours = try ternTool(["-s", "-i", "--cacert", ca, url])
            let curls = try runTool(curlPath, ["-q", "-s", "-i", "--cacert", ca, url])
            #expect(firstLine(ours.stdout) == "HTTP/2 200 \r")
            #expect(firstLine(ours.stdout) == firstLine(curls.stdout))
            #expect(ours.stdout.suffix(1024) == curls.stdout.suffix(1024))
            // -v: "< HTTP/2 200" on stderr.
            let verbose = try ternTool(["-s", "-v", "-o", "/dev/null", "--cacert", ca, url])
            #expect(verbose.stderr.contains("< HTTP/2 200"), "\(verbose.stderr)")
            // --http1.1 keeps nginx's HTTP/1.1 status line.
            let old = try ternTool(["-s", "-i", "--http1.1", "--cacert", ca, url])
            #expect(firstLine(old.stdout) == "HTTP/1.1 200 OK\r")
        }

        @Test func priorKnowledgeAgainstAnHTTP1ServerFails() throws {
            let servers = try Servers.get()
            let run = try ternTool([
                "-s", "-m", "10", "--http2-prior-knowledge", "-o", "/dev/null",
                servers.nginx("/1k.bin").absoluteString,
            ])
            #expect(run.status != 0)
        }
    }
}
