// The CLI's body flags (-d, --data-urlencode, --data-binary, --data-raw, -F, --form-string, -T),
// --compressed, and the memory the `tern` process needs for a 200 MiB multipart upload and a
// 100 MiB gzip download, measured with /usr/bin/time.

import Foundation
import Testing
@testable import Tern

/// Runs `tern` under /usr/bin/time; returns the run and its peak resident set size in KiB.
func ternPeakRSS(_ arguments: [String]) throws -> (run: TernRun, kilobytes: Int) {
    let report = temporaryPath("time")
    defer { try? FileManager.default.removeItem(atPath: report) }
    let out = temporaryPath("stdout")
    defer { try? FileManager.default.removeItem(atPath: out) }
    let quoted = ([TernBinary.path] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
    let started = Date()
    let (status, errors) = run(
        "/bin/sh", ["-c", "/usr/bin/time -f %M -o '\(report)' \(quoted.joined(separator: " ")) > '\(out)'"])
    let text = (try? String(contentsOfFile: report, encoding: .utf8)) ?? ""
    let kilobytes = Int(text.split(separator: "\n").last.map(String.init) ?? "") ?? -1
    return (
        TernRun(
            status: status, stdout: FileManager.default.contents(atPath: out) ?? Data(),
            stderr: errors, seconds: Date().timeIntervalSince(started)),
        kilobytes
    )
}

extension TernTests {
    @Suite struct CLIBodies {
        @Test func dataFlagsJoinInCommandLineOrder() throws {
            let servers = try Servers.get()
            let url = servers.fault("/echo").absoluteString
            let file = temporaryPath("lines")
            _ = FileManager.default.createFile(atPath: file, contents: Data("x y\r\nz\n".utf8))
            defer { try? FileManager.default.removeItem(atPath: file) }
            // What curl 7.88 sends for the same flags.
            let run = try tern(["-s", "-d", "@\(file)", "-d", "b", "--data-urlencode", "x y",
                                "--data-binary", "@\(file)", "--data-raw", "@raw", url])
            let echo = try Echo(run.stdout)
            let expected = Data("x yz&b&x+y&x y\r\nz\n&@raw".utf8)
            #expect(echo.method == "POST")
            #expect(echo.bodySHA256 == sha256(expected))
            #expect(echo.headers("Content-Type") == ["application/x-www-form-urlencoded"])
        }

        @Test func dataURLEncodeForms() throws {
            let servers = try Servers.get()
            let url = servers.fault("/echo").absoluteString
            let file = temporaryPath("value")
            _ = FileManager.default.createFile(atPath: file, contents: Data("x y\r\nz\n".utf8))
            defer { try? FileManager.default.removeItem(atPath: file) }
            let cases: [(String, String)] = [
                ("c d&e~*+", "c+d%26e~%2A%2B"),
                ("=c d", "c+d"),
                ("n=c d/é", "n=c+d%2F%C3%A9"),
                ("a=b=c", "a=b%3Dc"),
                ("@\(file)", "x+y%0D%0Az%0A"),
                ("n@\(file)", "n=x+y%0D%0Az%0A"),
            ]
            for (argument, body) in cases {
                let echo = try Echo(tern(["-s", "--data-urlencode", argument, url]).stdout)
                #expect(echo.bodySHA256 == sha256(Data(body.utf8)), "\(argument) -> \(body)")
            }
            let both = try Echo(tern(["-s", "--data-urlencode", "a=1 2", "--data-urlencode", "b=3", url]).stdout)
            #expect(both.bodySHA256 == sha256(Data("a=1+2&b=3".utf8)))
        }

        @Test func dataBinaryFileIsStreamedVerbatim() throws {
            let servers = try Servers.get()
            let file = patternFile(3_000_000)
            defer { try? FileManager.default.removeItem(atPath: file) }
            let run = try tern(["-s", "-X", "PATCH", "--data-binary", "@\(file)", servers.fault("/echo").absoluteString])
            let echo = try Echo(run.stdout)
            #expect(echo.method == "PATCH")
            #expect(echo.headers("Content-Length") == ["3000000"])
            #expect(echo.bodySHA256 == sha256(pattern(3_000_000)))
        }

        @Test func formParts() throws {
            let servers = try Servers.get()
            let dir = temporaryPath("form")
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let text = dir + "/hello.txt"
            let image = dir + "/pic.png"
            let semi = dir + "/a;b.bin"
            _ = FileManager.default.createFile(atPath: text, contents: Data("hello\n".utf8))
            _ = FileManager.default.createFile(atPath: image, contents: pattern(40_000))
            _ = FileManager.default.createFile(atPath: semi, contents: pattern(7))
            let run = try tern([
                "-s", "-F", "a=1", "-F", "f=@\(text);type=text/x-foo;filename=z.txt", "-F", "g=<\(text)",
                "-F", "img=@\(image)", "--form-string", "s=@lit;x", "-F", "q=\"quo;ted\";type=text/q",
                "-F", "semi=@\"\(semi)\"", "-F", "plain=x;y",
                servers.fault("/multipart").absoluteString,
            ])
            #expect(run.status == 0, "\(run.stderr)")
            let report = try MultipartReport(run.stdout)
            #expect(report.ok, "\(report.error ?? "")")
            let hello = sha256(Data("hello\n".utf8))
            #expect(report.parts == [
                .init(name: "a", fileName: nil, contentType: nil, size: 1, sha256: sha256(Data("1".utf8))),
                .init(name: "f", fileName: "z.txt", contentType: "text/x-foo", size: 6, sha256: hello),
                .init(name: "g", fileName: nil, contentType: nil, size: 6, sha256: hello),
                .init(name: "img", fileName: "pic.png", contentType: "image/png", size: 40_000,
                      sha256: sha256(pattern(40_000))),
                .init(name: "s", fileName: nil, contentType: nil, size: 6, sha256: sha256(Data("@lit;x".utf8))),
                .init(name: "q", fileName: nil, contentType: "text/q", size: 7, sha256: sha256(Data("quo;ted".utf8))),
                .init(name: "semi", fileName: "a;b.bin", contentType: "application/octet-stream", size: 7,
                      sha256: sha256(pattern(7))),
                .init(name: "plain", fileName: nil, contentType: nil, size: 3, sha256: sha256(Data("x;y".utf8))),
            ], "\(report.parts)")

            #expect(try tern(["-s", "-F", "f=@/nonexistent/file", servers.fault("/multipart").absoluteString]).status == 26)
            #expect(try tern(["-s", "-F", "novalue", servers.fault("/multipart").absoluteString]).status == 2)
            #expect(try tern(["-s", "-F", "a=1", "-d", "b=2", servers.fault("/echo").absoluteString]).status == 2)
        }

        /// Runs `tern` with stdin a pipe that `feed` writes to (the pipe closes when it
        /// returns); stdout and stderr through files; `seconds` runs to tern's exit.
        func ternFedSlowly(_ arguments: [String], feed: (FileHandle) throws -> Void) throws -> TernRun {
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
            process.standardOutput = FileHandle(forWritingAtPath: out)
            process.standardError = FileHandle(forWritingAtPath: err)
            let input = Pipe()
            process.standardInput = input
            let exited = Locked<Date?>(nil)
            process.terminationHandler = { _ in exited.withLock { $0 = Date() } }
            let started = Date()
            try process.run()
            try? feed(input.fileHandleForWriting)  // EPIPE once tern is gone
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
            while exited.withLock({ $0 }) == nil { usleep(1000) }
            return TernRun(
                status: process.terminationStatus,
                stdout: FileManager.default.contents(atPath: out) ?? Data(),
                stderr: String(decoding: FileManager.default.contents(atPath: err) ?? Data(), as: UTF8.self),
                seconds: exited.withLock { $0 ?? Date() }.timeIntervalSince(started))
        }

        @Test func uploadFromASlowPipeWithT() throws {
            let servers = try Servers.get()
            // Bytes as they come, chunked, to the end of stdin.
            let run = try ternFedSlowly(["-sS", "-T", "-", servers.fault("/echo").absoluteString]) { pipe in
                try pipe.write(contentsOf: pattern(70_000))
                usleep(300_000)
                try pipe.write(contentsOf: pattern(30_000, from: 70_000))
            }
            #expect(run.status == 0, "\(run.stderr)")
            let echo = try Echo(run.stdout)
            #expect(echo.method == "PUT")
            #expect(echo.json["chunked"] as? Bool == true)
            #expect(echo.bodyLength == 100_000)
            #expect(echo.bodySHA256 == sha256(pattern(100_000)))

            // The engine's loop never waits in read(2): -m fires while stdin stays silent
            // (reading on the loop, the timer could not run until stdin closed 3 s later),
            let slow = try ternFedSlowly(["-sS", "-m", "1", "-T", "-", servers.fault("/echo").absoluteString]) { pipe in
                try pipe.write(contentsOf: Data("partial".utf8))
                usleep(3_000_000)
            }
            #expect(slow.status == 28, "\(slow.stderr)")
            #expect(slow.seconds < 2.5, "exited after \(slow.seconds) s")

            // and an early final response ends the upload, as curl does.
            let early = try ternFedSlowly(
                ["-sS", "-w", "%{http_code}", "-T", "-", servers.fault("/status/413?early=1").absoluteString]
            ) { pipe in
                try pipe.write(contentsOf: Data("partial".utf8))
                usleep(3_000_000)
            }
            #expect(early.text.hasSuffix("413"), "\(early.text) \(early.stderr)")
            #expect(early.seconds < 2.5, "exited after \(early.seconds) s")
        }

        @Test func uploadFileWithT() throws {
            let servers = try Servers.get()
            let dir = temporaryPath("upload")
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let name = "t-\(UUID().uuidString.prefix(8)) x.bin"
            let file = dir + "/" + name
            _ = FileManager.default.createFile(atPath: file, contents: pattern(1_234_567))
            let stored = servers.state + "/uploads/upload/" + name
            defer { try? FileManager.default.removeItem(atPath: stored) }

            // A URL ending in / gets the file name appended (URL-encoded).
            let put = try tern(["-sS", "-T", file, "-w", "%{http_code}", servers.nginx("/upload/").absoluteString])
            #expect(put.status == 0, "\(put.stderr)")
            #expect(put.text.hasSuffix("201"), "\(put.text)")
            #expect(sha256(file: stored) == sha256(pattern(1_234_567)))

            let echo = try Echo(tern(["-s", "-T", file, servers.fault("/echo").absoluteString]).stdout)
            #expect(echo.method == "PUT")
            #expect(echo.headers("Content-Length") == ["1234567"])
            #expect(echo.bodySHA256 == sha256(pattern(1_234_567)))

            // stdin from a pipe goes chunked; -X picks another method.
            let piped = try Echo(tern(["-s", "-T", "-", "-X", "POST", servers.fault("/echo").absoluteString],
                                      stdin: pattern(100_000)).stdout)
            #expect(piped.method == "POST")
            #expect(piped.json["chunked"] as? Bool == true)
            #expect(piped.bodySHA256 == sha256(pattern(100_000)))

            #expect(try tern(["-s", "-T", "/nonexistent/file", servers.fault("/echo").absoluteString]).status == 26)
        }

        @Test func compressedAsksAndDecodes() throws {
            let servers = try Servers.get()
            let plain = try Echo(tern(["-s", servers.fault("/echo").absoluteString]).stdout)
            #expect(plain.headers("Accept-Encoding").isEmpty, "no Accept-Encoding without --compressed")
            let asked = try Echo(tern(["-s", "--compressed", servers.fault("/echo").absoluteString]).stdout)
            #expect(asked.headers("Accept-Encoding") == ["gzip, deflate, br, zstd"])

            let gz = try tern(["-s", "--compressed", servers.fault("/gzip?size=300000&kind=deflate").absoluteString])
            #expect(gz.stdout == pattern(300_000))
            let raw = try tern(["-s", servers.fault("/gzip?size=300000").absoluteString])
            #expect(raw.stdout.prefix(2) == Data([0x1F, 0x8B]), "without --compressed the body is left as sent")

            let bomb = try tern(["-sS", "--compressed", "-o", "/dev/null",
                                 servers.fault("/gzip?size=1073741824&zeros=1").absoluteString])
            #expect(bomb.status == 61)
            #expect(bomb.stderr.contains("decompression bomb"), "\(bomb.stderr)")
        }

        // MARK: - Memory of the tern process

        @Test func multipartUploadOf200MiBKeepsMemoryFlat() throws {
            let servers = try Servers.get()
            let file = temporaryPath("200m.bin")
            defer { try? FileManager.default.removeItem(atPath: file) }
            #expect(run("/bin/sh", ["-c", "head -c 209715200 /dev/urandom > '\(file)'"]).status == 0)
            let expected = sha256(file: file)

            let baseline = try ternPeakRSS(["-s", "-o", "/dev/null", servers.nginx("/1k.bin").absoluteString])
            let upload = try ternPeakRSS(["-s", "-F", "note=hello", "-F", "file=@\(file)",
                                          servers.fault("/multipart").absoluteString])
            #expect(upload.run.status == 0, "\(upload.run.stderr)")
            let report = try MultipartReport(upload.run.stdout)
            #expect(report.ok, "\(report.error ?? "")")
            #expect(report.parts.last?.size == 209_715_200)
            #expect(report.parts.last?.sha256 == expected, "the 200 MiB part arrived byte-identical")
            print("tern peak RSS: baseline \(baseline.kilobytes) KiB, 200 MiB multipart upload \(upload.kilobytes) KiB")
            #expect(baseline.kilobytes > 0 && upload.kilobytes > 0)
            // The process's own memory for the upload (beyond the Swift runtime's and the
            // libraries' mapped pages, which the baseline run maps too) stays small.
            #expect(upload.kilobytes - baseline.kilobytes < 4096,
                    "upload \(upload.kilobytes) KiB vs baseline \(baseline.kilobytes) KiB")
            #expect(upload.kilobytes < 20480 || isDynamicallyLinkedBuild,
                    "peak RSS \(upload.kilobytes) KiB is over 20 MiB")
        }

        @Test func gzip100MiBDownloadKeepsMemoryFlat() throws {
            let servers = try Servers.get()
            let file = temporaryPath("g100")
            defer { try? FileManager.default.removeItem(atPath: file) }
            let baseline = try ternPeakRSS(["-s", "-o", "/dev/null", servers.nginx("/1k.bin").absoluteString])
            let download = try ternPeakRSS(["-s", "--compressed", "-o", file, servers.nginx("/gzip/100m.bin").absoluteString])
            #expect(download.run.status == 0, "\(download.run.stderr)")
            #expect(sha256(file: file) == servers.sha("SHA_100M"))
            let toStdout = try ternPeakRSS(["-s", "--compressed", servers.nginx("/gzip/100m.bin").absoluteString])
            #expect(toStdout.run.stdout.count == 100 << 20)
            print("tern peak RSS: baseline \(baseline.kilobytes) KiB, gzip 100 MiB to a file "
                  + "\(download.kilobytes) KiB, to stdout \(toStdout.kilobytes) KiB")
            #expect(download.kilobytes - baseline.kilobytes < 4096)
            #expect(toStdout.kilobytes - baseline.kilobytes < 4096)
        }
    }
}

/// True when the `tern` under test links the Swift runtime and Foundation dynamically (a
/// debug build): their mapped pages alone come to about 25 MiB of resident memory, so only
/// the growth over a baseline run says something about Tern there. A release build with
/// `--static-swift-stdlib` is measured against the absolute 20 MiB.
let isDynamicallyLinkedBuild: Bool = {
    run("/usr/bin/ldd", [TernBinary.path]).output.contains("libswiftCore.so")
}()
