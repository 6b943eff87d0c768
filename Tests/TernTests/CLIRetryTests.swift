// --retry and -o as curl has them: transient statuses are tried again with or without -f, the
// last attempt stands, and -o holds what the final response said (nothing with -f).

import Foundation
import Testing
@testable import Tern

extension TernTests {
    @Suite struct CLIRetry {
        func flaky(_ servers: Servers, _ query: String) -> (url: String, key: String) {
            let key = "cli-\(UInt64.random(in: 0...UInt64.max))"
            return (servers.fault("/flaky?key=\(key)&\(query)").absoluteString, key)
        }

        func count(_ servers: Servers, _ key: String) throws -> Int {
            let run = try tern(["-s", servers.fault("/flaky-count?key=\(key)").absoluteString])
            return Int(run.text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }

        @Test func twoFailuresThenASuccess() throws {
            let servers = try Servers.get()
            let (url, key) = flaky(servers, "fail=2&status=503&size=2048")
            let out = temporaryPath("retry-out")
            defer { try? FileManager.default.removeItem(atPath: out) }
            let run = try tern(["-s", "--retry", "3", "-o", out, url])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(FileManager.default.contents(atPath: out) == pattern(2048))
            #expect(try count(servers, key) == 3)
        }

        @Test func retriesRunOutAndTheLast503Stands() throws {
            let servers = try Servers.get()
            let (url, key) = flaky(servers, "fail=5&status=503")
            let out = temporaryPath("retry-spent")
            defer { try? FileManager.default.removeItem(atPath: out) }
            let run = try tern(["-s", "--retry", "1", "-o", out, "-w", "%{http_code}", url])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.text == "503")
            #expect(try count(servers, key) == 2)
            #expect(FileManager.default.contents(atPath: out) == Data("failure 2\n".utf8))
        }

        @Test func anErrorPageGoesToTheOutputFileAsInCurl() throws {
            let servers = try Servers.get()
            for tool in [TernBinary.path, curlPath] {
                let (url, _) = flaky(servers, "fail=1&status=503")
                let out = temporaryPath("error-page")
                defer { try? FileManager.default.removeItem(atPath: out) }
                let run = try runTool(tool, ["-s", "-o", out, url])
                #expect(run.status == 0, "\(tool): \(run.stderr)")
                #expect(FileManager.default.contents(atPath: out) == Data("failure 1\n".utf8), "\(tool)")
            }
        }

        @Test func withFailNothingIsWrittenAndTheExitIs22() throws {
            let servers = try Servers.get()
            for tool in [TernBinary.path, curlPath] {
                let (url, _) = flaky(servers, "fail=1&status=503")
                let out = temporaryPath("error-fail")
                defer { try? FileManager.default.removeItem(atPath: out) }
                let run = try runTool(tool, ["-sf", "-o", out, url])
                #expect(run.status == 22, "\(tool): \(run.stderr)")
                #expect(!FileManager.default.fileExists(atPath: out), "\(tool)")
            }
        }

        @Test func anErrorPageNeverReplacesAPartialDownload() throws {
            let servers = try Servers.get()
            let (url, _) = flaky(servers, "fail=1&status=503")
            let out = temporaryPath("error-resume")
            defer { try? FileManager.default.removeItem(atPath: out) }
            try Data("partial".utf8).write(to: URL(fileURLWithPath: out))
            let run = try tern(["-s", "-C", "-", "-o", out, url])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(FileManager.default.contents(atPath: out) == Data("partial".utf8))
        }

        @Test func includePrintsInterimHeadsAsCurl() throws {
            let servers = try Servers.get()
            let url = servers.fault("/interim?count=2").absoluteString
            let ours = try tern(["-si", url])
            let theirs = try runTool(curlPath, ["-si", url])
            #expect(ours.status == 0 && theirs.status == 0, "\(ours.stderr) \(theirs.stderr)")
            let ourLines = ours.text.split(separator: "\r\n").filter { $0.hasPrefix("HTTP/") }
            let curlLines = String(decoding: theirs.stdout, as: UTF8.self).split(separator: "\r\n")
                .filter { $0.hasPrefix("HTTP/") }
            #expect(ourLines == curlLines)
            #expect(ourLines.count == 3, "\(ourLines)")
        }
    }
}
