// Issue 18 through the `tern` executable: closed standard descriptors, odd -o targets, endless
// interim responses, decompression limits, unknown codings, header injection through -F, and
// argument edge cases, each compared with what curl does.

import Foundation
import Testing
@testable import Tern

/// Runs a shell command line (for redirections such as `<&-` that Process cannot express).
func shell(_ command: String) -> (status: Int32, output: String) {
    let result = run("/bin/sh", ["-c", command])
    return (result.status, result.output)
}

extension TernTests {
    @Suite struct CLIHostile {
        @Test func closedStandardDescriptorsDoNotCrash() throws {
            let servers = try Servers.get()
            let url = servers.nginx("/1k.bin").absoluteString
            for redirection in ["<&-", ">&-", "2>&-", "<&- >&- 2>&-"] {
                let file = temporaryPath("stdfds")
                defer { try? FileManager.default.removeItem(atPath: file) }
                let output: String = shell("'\(TernBinary.path)' -sS -o '\(file)' '\(url)' \(redirection); echo \"exit=$?\"").output
                #expect(output.contains("exit=0"), Comment(rawValue: redirection + ": " + output))
                #expect(sha256(file: file) == servers.sha("SHA_1K"), Comment(rawValue: redirection))
            }
        }
    
        /// Runs `program` with `arguments` as an unprivileged user when the tests run as root
        /// (root ignores file permissions, and the cases below are about them).
        static func unprivileged(_ program: String, _ arguments: [String]) -> (status: Int32, output: String) {
            if geteuid() != 0 { return run(program, arguments) }
            return run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", program] + arguments)
        }

        static func scratch() -> String {
            let dir = temporaryPath("odir")
            try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            chmod(dir, 0o777)
            return dir
        }

        @Test func outputOntoExistingFilesAsCurl() throws {
            let servers = try Servers.get()
            let url = servers.nginx("/1k.bin").absoluteString
            let dir = Self.scratch()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            // A 0600 file keeps its mode; a symlink is written through and stays a link.
            let secret = dir + "/secret"
            _ = FileManager.default.createFile(atPath: secret, contents: Data("old".utf8), attributes: [.posixPermissions: 0o600])
            #expect(try tern(["-sS", "-o", secret, url]).status == 0)
            #expect(sha256(file: secret) == servers.sha("SHA_1K"))
            let mode = (try FileManager.default.attributesOfItem(atPath: secret)[.posixPermissions] as? Int) ?? 0
            #expect(mode == 0o600)
            let link = dir + "/link"
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: secret)
            _ = FileManager.default.createFile(atPath: secret, contents: Data("old".utf8))
            #expect(try tern(["-sS", "-o", link, url]).status == 0)
            #expect(sha256(file: secret) == servers.sha("SHA_1K"))
            #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: link)) == secret)
            // -o DIR: a clear failure (23), no DIR.part.
            let sub = dir + "/sub"
            try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: false)
            let onDir = try tern(["-sS", "-o", sub, url])
            #expect(onDir.status == 23)
            #expect(onDir.stderr.contains("Is a directory"), Comment(rawValue: onDir.stderr))
            #expect(!FileManager.default.fileExists(atPath: sub + ".part"))
        }

        @Test func readOnlyTargetsAsCurl() throws {
            let servers = try Servers.get()
            let url = servers.nginx("/1k.bin").absoluteString
            let dir = Self.scratch()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            // A read-only file in a writable directory is refused (curl: 23) and left alone.
            for program in [TernBinary.path, "/usr/bin/curl"] {
                let file = dir + "/ro-" + URL(fileURLWithPath: program).lastPathComponent
                _ = FileManager.default.createFile(atPath: file, contents: Data("keep".utf8), attributes: [.posixPermissions: 0o444])
                chown(file, 65534, 65534)
                let r = Self.unprivileged(program, ["-sS", "-o", file, url])
                #expect(r.status == 23, Comment(rawValue: program + ": " + r.output))
                #expect(FileManager.default.contents(atPath: file) == Data("keep".utf8))
                #expect(!FileManager.default.fileExists(atPath: file + ".part"))
            }
            // A writable file in a read-only directory is written in place, as curl does.
            for program in [TernBinary.path, "/usr/bin/curl"] {
                let sub = dir + "/rodir-" + URL(fileURLWithPath: program).lastPathComponent
                try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: false)
                let file = sub + "/file"
                _ = FileManager.default.createFile(atPath: file, contents: Data("old".utf8), attributes: [.posixPermissions: 0o666])
                chmod(sub, 0o555)
                let r = Self.unprivileged(program, ["-sS", "-o", file, url])
                chmod(sub, 0o755)
                #expect(r.status == 0, Comment(rawValue: program + ": " + r.output))
                #expect(sha256(file: file) == servers.sha("SHA_1K"))
            }
        }
    
        @Test func endlessInterimResponsesStopLikeCurl() throws {
            let servers = try Servers.get()
            let url = servers.fault("/interim?count=0&pad=100").absoluteString
            let run = try tern(["-sS", "-o", "/dev/null", url])
            #expect(run.status == 56, Comment(rawValue: run.stderr))  // curl: (56) Too large response headers
            #expect(run.seconds < 10)
            #expect(run.stderr.contains("interim"))
            let curl = Self.unprivileged("/usr/bin/curl", ["-sS", "-o", "/dev/null", url])
            #expect(curl.status == run.status)
        }
    
        @Test func formTypeCannotInjectAPartHeader() throws {
            let servers = try Servers.get()
            let file = temporaryPath("part")
            defer { try? FileManager.default.removeItem(atPath: file) }
            _ = FileManager.default.createFile(atPath: file, contents: Data("hello".utf8))
            for spec in ["f=@\(file);type=text/plain\r\nEvil: 1", "f=@\(file);type=text/plain\nEvil: 1",
                         "f=@\(file);type=text/plain\rEvil: 1"] {
                let run = try tern(["-sS", "-F", spec, servers.fault("/multipart").absoluteString])
                #expect(run.status == 0, Comment(rawValue: run.stderr))
                let json = try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any]
                let parts = json?["parts"] as? [[String: Any]] ?? []
                #expect(parts.count == 1)
                #expect(parts.first?["fields"] as? [String] == ["content-disposition", "content-type"],
                        Comment(rawValue: run.text))
            }
        }

        @Test func multipartHeadsHoldNoLineBreakFromTheCaller() {
            let part = MultipartForm.Part.field("n\r\nEvil: 1", contentsOf: "/dev/null",
                                                contentType: "text/plain\r\nEvil: 2\u{0}")
            let head = String(decoding: part.head(boundary: "b"), as: UTF8.self)
            #expect(head.components(separatedBy: "\r\n").filter { $0.hasPrefix("Evil") }.isEmpty)
            #expect(MultipartForm(boundary: "ok\r\nEvil: 1").boundary.hasPrefix("tern-"))
            #expect(MultipartForm(boundary: String(repeating: "a", count: 71)).boundary.hasPrefix("tern-"))
            #expect(MultipartForm(boundary: "fixed-'()+_,./:=? x").boundary == "fixed-'()+_,./:=? x")
        }
    
        @Test func compressibleBodiesDecodeLikeCurl() throws {
            let servers = try Servers.get()
            let url = servers.fault("/gzip?size=10485760&zeros=1").absoluteString  // 1000:1
            for program in [TernBinary.path, "/usr/bin/curl"] {
                let file = temporaryPath("zeros")
                defer { try? FileManager.default.removeItem(atPath: file) }
                let r = run(program, ["-sS", "--compressed", "-o", file, url])
                #expect(r.status == 0, Comment(rawValue: program + ": " + r.output))
                let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? -1
                #expect(size == 10_485_760, Comment(rawValue: program))
            }
            let toStdout = try tern(["-sS", "--compressed", url])
            #expect(toStdout.status == 0)
            #expect(toStdout.stdout.count == 10_485_760)
        }
    
        @Test func tenThousandURLsParseAtOnce() throws {
            // A bad --max-redirs is reported after the whole command line was parsed: the time
            // is the parser's (it was 2.2 s for 10,000 URLs, growing with the square).
            let urls = (0..<10_000).map { "http://127.0.0.1:1/\($0)" }
            let run = try tern(["-s"] + urls + ["--max-redirs", "-5"])
            #expect(run.status == 2)
            #expect(run.seconds < 1, "\(run.seconds) s")
        }

        @Test func maxTimeValuesAsCurl() throws {
            let servers = try Servers.get()
            let url = servers.nginx("/1k.bin").absoluteString
            for value in ["-1", "inf", "nan", "-0.5"] {
                let run = try tern(["-sS", "-o", "/dev/null", "-m", value, url])
                #expect(run.status == 2, Comment(rawValue: value + ": " + run.stderr))
                #expect(run.stderr.contains("-m:"), Comment(rawValue: run.stderr))
                let connect = try tern(["-sS", "-o", "/dev/null", "--connect-timeout", value, url])
                #expect(connect.status == 2, Comment(rawValue: value))
            }
            // curl refuses these two as well (it takes nan as 0, Tern refuses it).
            for value in ["-1", "inf"] {
                #expect(run("/usr/bin/curl", ["-sS", "-o", "/dev/null", "-m", value, url]).status == 2)
            }
            #expect(try tern(["-sS", "-o", "/dev/null", "-m", "0", url]).status == 0, "0: no limit")
        }

        @Test func severalURLsExitWithTheLastTransfersCodeAsCurl() throws {
            let servers = try Servers.get()
            let good = servers.nginx("/1k.bin").absoluteString
            let refused = "http://127.0.0.1:1/"
            let missing = servers.fault("/truncate").absoluteString  // 18
            for urls in [[refused, good], [good, refused], [refused, missing], [missing, refused]] {
                let args = ["-s"] + urls.flatMap { ["-o", "/dev/null", $0] }
                let ours = try tern(args).status
                let curls = run("/usr/bin/curl", args).status
                #expect(ours == curls, Comment(rawValue: urls.joined(separator: " ")))
            }
        }

        @Test func nonUTF8URLBytesArePercentEncoded() throws {
            let servers = try Servers.get()
            let base = servers.nginx("/a").absoluteString
            let out: String = shell("'\(TernBinary.path)' -sv -o /dev/null \"\(base)$(printf '\\351')b\" 2>&1").output
            #expect(out.contains("> GET /a%e9b HTTP/1.1"), Comment(rawValue: out))
            let curlOut: String = shell("curl -sv -o /dev/null \"\(base)$(printf '\\351')b\" 2>&1").output
            #expect(curlOut.contains("> GET /a%e9b HTTP/1.1"))
        }

        @Test func fileURLsSayTheSchemeIsUnsupported() throws {
            let run = try tern(["-sS", "file:///etc/hostname"])
            #expect(run.status == 1)
            #expect(run.stderr.contains("Protocol \"file\" not supported"), Comment(rawValue: run.stderr))
            #expect(Self.unprivileged("/usr/bin/curl", ["-sS", "--proto", "=http,https", "file:///etc/hostname"]).status == 1)
        }
    
        @Test func brotliZstdAndUnknownCodingsAsCurl() throws {
            let servers = try Servers.get()
            for query in ["kind=br", "kind=zstd", "kind=zstd&members=2&chunked=1"] {
                let url = servers.fault("/gzip?size=300000&" + query).absoluteString
                let run = try tern(["-sS", "--compressed", url])
                #expect(run.status == 0, Comment(rawValue: query + ": " + run.stderr))
                #expect(run.stdout == pattern(300_000), Comment(rawValue: query))
                let raw = try tern(["-sS", url])  // not asked to decode: as sent
                #expect(raw.status == 0)
                #expect(raw.stdout != pattern(300_000))
            }
            // A coding Tern cannot decode, with --compressed: 61, as curl.
            let unknown = servers.fault("/gzip?size=1000&coding=compress").absoluteString
            let run = try tern(["-sS", "--compressed", "-o", "/dev/null", unknown])
            #expect(run.status == 61)
            #expect(run.stderr.contains("unsupported Content-Encoding"), Comment(rawValue: run.stderr))
            #expect(Self.unprivileged("/usr/bin/curl", ["-sS", "--compressed", "-o", "/dev/null", unknown]).status == 61)
            #expect(try tern(["-sS", "-o", "/dev/null", unknown]).status == 0, "not asked to decode")
        }
    
        /// The hostile-server matrix through the CLI: each response downloaded with -o onto an
        /// existing file ends with curl's exit code for it, a message, in bounded time, with
        /// the file intact and no .part left.
        @Test func hostileServerMatrix() throws {
            let servers = try Servers.get()
            let cases: [(path: String, exit: Int32)] = [
                ("/random?size=4096", 8), ("/badstatus?variant=garbage", 8),
                ("/badstatus?variant=empty", 52), ("/bigheaders?size=5000000&single=1", 56),
                ("/interim?count=0&pad=1000", 56), ("/lengths?variant=conflict", 8),
                ("/lengths?variant=te-unknown", 61), ("/lengths?variant=short", 18),
                ("/badchunk?variant=hex", 56), ("/badchunk?variant=nolast", 18),
                ("/truncate", 18), ("/reset?len=100000", 56), ("/stall?stall_ms=10000", 28),
                ("/endless", 28), ("/endless?chunked=0", 28),
                ("/gzip?size=300000&corrupt=100", 61), ("/gzip?size=1000&coding=compress", 61),
                ("/gzip?size=300000&kind=zstd&truncate=5", 61),
            ]
            let file = temporaryPath("matrix")
            defer { try? FileManager.default.removeItem(atPath: file) }
            for c in cases {
                _ = FileManager.default.createFile(atPath: file, contents: Data("good".utf8))
                let run = try tern(["-sS", "--compressed", "-m", "2", "-o", file, servers.fault(c.path).absoluteString])
                #expect(run.status == c.exit, Comment(rawValue: c.path + ": " + run.stderr))
                #expect(run.stderr.hasPrefix("tern: ("), Comment(rawValue: c.path + ": " + run.stderr))
                #expect(run.seconds < 10, Comment(rawValue: c.path))
                #expect(FileManager.default.contents(atPath: file) == Data("good".utf8), Comment(rawValue: c.path))
                #expect(!FileManager.default.fileExists(atPath: file + ".part"), Comment(rawValue: c.path))
            }
        }
    }
}
