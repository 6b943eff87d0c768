// The `tern` executable, run as a process: curl's exit codes, byte-identical downloads and
// resumes, -w, and the output flags.

import Foundation
import Testing
@testable import Tern

/// The built `tern` binary: $TERN_BIN, else next to the test bundle in the build products.
enum TernBinary {
    static let path: String = {
        if let path = ProcessInfo.processInfo.environment["TERN_BIN"], !path.isEmpty {
            return path
        }
        var isDirectory: ObjCBool = false
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("tern").path
            if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory),
                !isDirectory.boolValue, FileManager.default.isExecutableFile(atPath: candidate)
            {
                return candidate
            }
            dir = dir.deletingLastPathComponent()
        }
        return Servers.root.appendingPathComponent(".build/debug/tern").path
    }()
}

struct TernRun {
    var status: Int32
    var stdout: Data
    var stderr: String
    var seconds: Double

    var text: String { String(decoding: stdout, as: UTF8.self) }
}

/// The environment for a child process under test: the test process's own, with
/// `atexit_sleep_ms=0` put first in `TSAN_OPTIONS` (later settings, such as the caller's own, still
/// win). A program built with ThreadSanitizer (`swift test --sanitize=thread` builds `tern` that
/// way too) otherwise sleeps 1 s at exit to catch races at exit, which adds a second to every
/// run that a test times, or to the time between two runs that a test compares. Programs built
/// without ThreadSanitizer ignore the variable.
func childEnvironment(_ base: [String: String] = ProcessInfo.processInfo.environment) -> [String: String] {
    var environment = base
    let given = environment["TSAN_OPTIONS"] ?? ""
    environment["TSAN_OPTIONS"] = "atexit_sleep_ms=0" + (given.isEmpty ? "" : ":" + given)
    return environment
}

/// Runs `tern` with arguments; stdout and stderr are captured through files.
func tern(_ arguments: [String], stdin: Data? = nil, directory: String? = nil) throws -> TernRun {
    guard FileManager.default.isExecutableFile(atPath: TernBinary.path) else {
        throw TestServerError(description: "tern binary not found at \(TernBinary.path); build it with `swift build`")
    }
    let out = temporaryPath("stdout")
    let err = temporaryPath("stderr")
    _ = FileManager.default.createFile(atPath: out, contents: nil)
    _ = FileManager.default.createFile(atPath: err, contents: nil)
    defer {
        try? FileManager.default.removeItem(atPath: out)
        try? FileManager.default.removeItem(atPath: err)
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: TernBinary.path)
    process.arguments = arguments
    process.environment = childEnvironment()
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    process.standardOutput = FileHandle(forWritingAtPath: out)
    process.standardError = FileHandle(forWritingAtPath: err)
    let input = Pipe()
    process.standardInput = input
    let started = Date()
    try process.run()
    if let stdin { input.fileHandleForWriting.write(stdin) }
    try input.fileHandleForWriting.close()
    process.waitUntilExit()
    return TernRun(
        status: process.terminationStatus,
        stdout: FileManager.default.contents(atPath: out) ?? Data(),
        stderr: String(decoding: FileManager.default.contents(atPath: err) ?? Data(), as: UTF8.self),
        seconds: Date().timeIntervalSince(started))
}

extension TernTests {
    @Suite struct CLI {
        @Test func refusedExits7() throws {
            let run = try tern(["-sS", "http://127.0.0.1:1/"])
            #expect(run.status == 7)
            #expect(run.stderr.contains("(7)"))
            #expect(run.stdout.isEmpty)
        }

        @Test func versionListsTheLibrariesProtocolsAndFeaturesAsCurlDoes() throws {
            for flag in ["-V", "--version"] {
                // Like curl, the flag wins over the rest of the command line: no URL needed,
                // and a URL given is not fetched.
                let run = try tern([flag, "http://127.0.0.1:1/"])
                #expect(run.status == 0)
                let lines = run.text.split(separator: "\n").map(String.init)
                #expect(lines.count == 3)
                #expect(lines.first?.hasPrefix("tern \(Engine.version) (") == true)
                for library in ["libtern/\(Engine.version) ", " libuv/", " OpenSSL/", " zlib/", " nghttp2/"] {
                    #expect(lines.first?.contains(library) == true, "\(library) in \(lines)")
                }
                #expect(lines.dropFirst().first == "Protocols: http https")
                let features = lines.last?.split(separator: " ").map(String.init) ?? []
                #expect(features.first == "Features:")
                #expect(features.contains("HTTP2") && features.contains("NTLM") && features.contains("libz"))
                #expect(run.stderr.isEmpty)
            }
        }

        @Test func unresolvableExits6() throws {
            #expect(try tern(["-s", "http://tern-test.invalid/"]).status == 6)
        }

        @Test func maxTimeAgainstAStallExits28Within2Seconds() throws {
            let servers = try Servers.get()
            let run = try tern(["-s", "-o", "/dev/null", "-m", "1", servers.fault("/stall?stall_ms=3000").absoluteString])
            #expect(run.status == 28)
            #expect(run.seconds < 2)
        }

        @Test func failOn404Exits22WithoutBody() throws {
            let servers = try Servers.get()
            let run = try tern(["-sSf", servers.fault("/status/404?size=100").absoluteString])
            #expect(run.status == 22)
            #expect(run.stdout.isEmpty)
            #expect(run.stderr.contains("404"))
            let plain = try tern(["-s", servers.fault("/status/404?size=100").absoluteString])
            #expect(plain.status == 0, "without -f a 404 is a response")
            #expect(plain.stdout == pattern(100))
        }

        @Test func otherExitCodes() throws {
            let servers = try Servers.get()
            #expect(try tern(["-s", "http://127.0.0.1:99999/"]).status == 3)
            #expect(try tern(["-s", "ftp://127.0.0.1/"]).status == 1)
            #expect(try tern(["-s", servers.fault("/truncate").absoluteString]).status == 18)
            #expect(try tern(["-s", "-o", "/nonexistent-dir/x", servers.nginx("/1k.bin").absoluteString]).status == 23)
            #expect(try tern(["-s", "--data-binary", "@/nonexistent/file", servers.fault("/echo").absoluteString]).status == 26)
            #expect(try tern(["-s", "-d", "@/nonexistent/file", servers.fault("/echo").absoluteString]).status == 26)
            #expect(try tern(["--no-such-flag", "http://x/"]).status == 2)
            #expect(try tern(["-s"]).status == 2)
        }

        @Test func downloadIsByteIdentical() throws {
            let servers = try Servers.get()
            let file = temporaryPath("100m")
            defer { try? FileManager.default.removeItem(atPath: file) }
            let run = try tern(["-s", "-o", file, servers.nginx("/100m.bin").absoluteString])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(sha256(file: file) == servers.sha("SHA_100M"))
        }

        @Test func resumeIsByteIdentical() throws {
            let servers = try Servers.get()
            let file = temporaryPath("resume")
            defer { try? FileManager.default.removeItem(atPath: file) }
            let whole = try FileHandle(forReadingFrom: URL(fileURLWithPath: servers.www + "/100m.bin"))
            _ = FileManager.default.createFile(atPath: file, contents: try whole.read(upToCount: 3_000_017))
            try whole.close()
            let url = servers.nginx("/100m.bin").absoluteString
            let run = try tern(["-s", "-C", "-", "-o", file, url])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(sha256(file: file) == servers.sha("SHA_100M"))
            let again = try tern(["-s", "-C", "-", "-o", file, url])  // already complete
            #expect(again.status == 0, "\(again.stderr)")
            #expect(sha256(file: file) == servers.sha("SHA_100M"))
        }

        @Test func writeOut() throws {
            let servers = try Servers.get()
            let url = servers.nginx("/1k.bin").absoluteString
            let run = try tern(["-s", "-o", "/dev/null", "-w",
                                "%{http_code} %{size_download} %{url_effective} %{time_total}\\n", url])
            #expect(run.status == 0)
            let parts = run.text.split(separator: " ")
            #expect(parts.count == 4)
            #expect(parts.prefix(3) == ["200", "1024", Substring(url)])
            let total = Double(parts.last?.dropLast() ?? "") ?? -1
            #expect(total >= 0 && total < 5)
            #expect(run.text.hasSuffix("\n"))
            let failed = try tern(["-s", "-w", "%{http_code}|%{exitcode}", "http://127.0.0.1:1/"])
            #expect(failed.text == "000|7")
        }

        @Test func stdoutStreamsTheBody() throws {
            let servers = try Servers.get()
            let url = servers.nginx("/1k.bin").absoluteString
            let expected = try fixture(servers, "1k.bin")
            #expect(try tern(["-s", url]).stdout == expected)
            #expect(try tern(["-s", url, url]).stdout == expected + expected, "URLs run in order")
            #expect(try tern(["-s", "-r", "10-19", url]).stdout == expected[10..<20])
        }

        @Test func headsAndVerbose() throws {
            let servers = try Servers.get()
            let url = servers.nginx("/1k.bin").absoluteString
            let include = try tern(["-si", url])
            #expect(include.text.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(include.stdout.suffix(1024) == (try fixture(servers, "1k.bin")))
            let head = try tern(["-sI", url])
            #expect(head.text.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(head.text.hasSuffix("\r\n\r\n"))
            #expect(head.text.contains("Content-Length: 1024\r\n"))
            let dump = try tern(["-s", "-D", "-", "-o", "/dev/null", url])
            #expect(dump.text.hasPrefix("HTTP/1.1 200 OK\r\n"))
            let verbose = try tern(["-v", "-o", "/dev/null", url])
            #expect(verbose.status == 0)
            #expect(verbose.stderr.contains("> GET /1k.bin HTTP/1.1\n"))
            #expect(verbose.stderr.contains("> Host: 127.0.0.1:\(servers.nginxPort)\n"))
            #expect(verbose.stderr.contains("< HTTP/1.1 200 OK\n"))
            #expect(verbose.stderr.contains("< Content-Length: 1024\n"))
            #expect(verbose.stderr.contains("* "))
            let silent = try tern(["-s", "-o", "/dev/null", url])
            #expect(silent.stderr.isEmpty, "no progress meter off a terminal, nothing with -s")
        }

        @Test func requestFlags() throws {
            let servers = try Servers.get()
            let url = servers.fault("/echo").absoluteString
            let post = try Echo(tern(["-s", "-d", "a=1", "-d", "b=2", "-H", "X-One: 1", "-A", "agent/1",
                                      "-e", "http://ref/", url]).stdout)
            #expect(post.method == "POST")
            #expect(post.bodyLength == 7)
            #expect(post.headers("Content-Type") == ["application/x-www-form-urlencoded"])
            #expect(post.headers("X-One") == ["1"])
            #expect(post.headers("User-Agent") == ["agent/1"])
            #expect(post.headers("Referer") == ["http://ref/"])

            let file = temporaryPath("body")
            let bytes = pattern(200_000)
            _ = FileManager.default.createFile(atPath: file, contents: bytes)
            defer { try? FileManager.default.removeItem(atPath: file) }
            let put = try Echo(tern(["-s", "-XPUT", "--data-binary", "@\(file)", url]).stdout)
            #expect(put.method == "PUT")
            #expect(put.bodySHA256 == sha256(bytes))

            let old = try Echo(tern(["-s", "--http1.0", url]).stdout)
            #expect(old.version == "HTTP/1.0")
            let stdin = try Echo(tern(["-s", "--data-binary", "@-", url], stdin: Data("piped".utf8)).stdout)
            #expect(stdin.bodyLength == 5)
        }

        @Test func retryOnA503() throws {
            let servers = try Servers.get()
            let run = try tern(["-sSf", "--retry", "1", servers.fault("/status/503").absoluteString])
            #expect(run.status == 22)
            #expect(run.stderr.contains("Will retry in 1 second"))
            #expect(run.seconds >= 1)
        }

        @Test func outputsPairWithURLsInOrder() throws {
            let servers = try Servers.get()
            let dir = temporaryPath("outputs")
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let run = try tern(["-sO", servers.nginx("/1k.bin").absoluteString,
                                "-o", "second.txt", servers.nginx("/64k.txt").absoluteString],
                               directory: dir)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(FileManager.default.contents(atPath: dir + "/1k.bin") == (try fixture(servers, "1k.bin")))
            #expect(FileManager.default.contents(atPath: dir + "/second.txt") == (try fixture(servers, "64k.txt")))
            #expect(try tern(["-sO", servers.nginx("/").absoluteString], directory: dir).status == 23)
        }

        @Test func groupedAndAttachedFlags() throws {
            let servers = try Servers.get()
            let file = temporaryPath("grouped")
            defer { try? FileManager.default.removeItem(atPath: file) }
            let run = try tern(["-sSfo", file, "-w%{http_code}", servers.nginx("/1k.bin").absoluteString])
            #expect(run.status == 0)
            #expect(run.text == "200")
            #expect(FileManager.default.contents(atPath: file) == (try fixture(servers, "1k.bin")))
        }
    }
}
