// What a new user meets first: defaults that cannot hang or flood a server, headers by plain
// names, errors that read well, URLs rejected up front, closures that are easy to write.

import Dispatch
import Foundation
import Testing
@testable import Tern

extension TernTests {
    @Suite struct Newcomer {
        @Test func headersByPlainNames() async throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/echo"))
            request.setHeader("X-Tern-Test", "42")
            request.setHeader("X-Removed", "1")
            request.setHeader("X-Removed", nil)
            #expect(request.header("x-tern-test") == "42")
            let response = try await request.response()
            let echo = try Echo(response.data)
            #expect(echo.headers("X-Tern-Test") == ["42"])
            #expect(echo.headers("X-Removed").isEmpty)
        }

        @Test func invalidHeadersFailBeforeSending() async throws {
            for (name, value) in [("Bad Name", "1"), ("X-Ok", "a\r\nEvil: 1"), ("", "x")] {
                let request = Request(url: URL(string: "http://127.0.0.1:1/")!)
                request.setHeader(name, value)
                await #expect(throws: TernError.badHeader) { try await request.response() }
            }
        }

        @Test func requestFromAStringTakesOnlyHTTPURLs() {
            for bad in [
                "not a url", "ftp://example.com/file", "http://", "/relative/path", "example.com",
                "mailto:someone@example.com", "file:///etc/passwd", "http://host:99999/",
                "http://host:0/",
            ] {
                #expect(Request(string: bad) == nil, "\(bad) was accepted")
            }
            for good in ["http://example.com", "https://example.com:8443/x?y=1", "HTTP://h/"] {
                #expect(Request(string: good) != nil, "\(good) was rejected")
            }
        }

        @Test func errorsReadWellWithHostAndPhase() async throws {
            let refused = Request(url: URL(string: "http://127.0.0.1:1/")!)
            do {
                _ = try await refused.response()
                Issue.record("no error")
            } catch {
                let text = error.localizedDescription
                #expect(text.contains("127.0.0.1"), "\(text)")
                #expect(text.contains("connect"), "\(text)")
                #expect(!text.contains("The operation could not be completed"), "\(text)")
            }

            let unresolvable = Request(url: URL(string: "http://no-such-host.invalid/")!)
            do {
                _ = try await unresolvable.response()
                Issue.record("no error")
            } catch {
                let text = error.localizedDescription
                #expect(text.contains("no-such-host.invalid"), "\(text)")
                #expect(text.contains("resolve"), "\(text)")
            }

            let servers = try Servers.get()
            let stalled = Request(url: servers.fault("/slowheaders?delay_ms=3000"))
            stalled.timeouts.headers = 0.3
            do {
                _ = try await stalled.response()
                Issue.record("no error")
            } catch {
                let text = error.localizedDescription
                #expect(text.contains("127.0.0.1"), "\(text)")
                #expect(text.contains("headers"), "\(text)")
            }

            // executeAndWait() throws the same typed error.
            #expect(throws: TernError.connectionRefused) {
                try Request(url: URL(string: "http://127.0.0.1:1/")!).executeAndWait()
            }
        }

        @Test func outOfRangePortsSaySo() async {
            let request = Request(url: URL(string: "http://127.0.0.1:70000/")!)
            do {
                _ = try await request.response()
                Issue.record("no error")
            } catch let error as TernError {
                #expect(error.code == .badURL)
                #expect(error.message.contains("70000"), "\(error.message)")
                #expect(error.message.contains("out of range"), "\(error.message)")
            } catch {
                Issue.record("\(error)")
            }
        }

        @Test func aListenerThatReturnsNothing() async throws {
            let servers = try Servers.get()
            let percents = Recorder<Int>()
            let request = Request(url: servers.nginx("/64k.txt"))
            request.setListener { _, _, percent in percents.append(percent) }
            _ = try await request.response()
            #expect(percents.all.last == 100)
            #expect(percents.all == percents.all.sorted())
        }

        @Test func progressAsAnAsyncSequence() async throws {
            let servers = try Servers.get()
            let file = temporaryPath("newcomer-progress")
            defer { try? FileManager.default.removeItem(atPath: file) }
            let request = Request(url: servers.nginx("/100m.bin"))
            request.downloadFile = file
            request.progressInterval = 0.01
            let events = request.progressEvents
            async let response = request.response()
            var seen: [Request.Progress] = []
            for await progress in events { seen.append(progress) }
            let done = try await response
            #expect(done.statusCode == 200)
            #expect(seen.count > 1, "\(seen.count) events")
            #expect(seen.map(\.bytesReceived) == seen.map(\.bytesReceived).sorted())
            #expect(seen.last?.bytesReceived == 100 << 20)
            #expect(seen.last?.bytesExpected == 100 << 20)
        }

        @Test func fileLocationsAsURLs() async throws {
            let servers = try Servers.get()
            let file = URL(fileURLWithPath: temporaryPath("newcomer-url"))
            defer { try? FileManager.default.removeItem(at: file) }
            let request = Request(url: servers.nginx("/1k.bin"))
            request.downloadFileURL = file
            #expect(request.downloadFile == file.path)
            _ = try await request.response()
            #expect(sha256(file: file.path) == servers.sha("SHA_1K"))
        }

        /// 200 concurrent requests to a server whose listen queue holds 5: the default cap per
        /// origin makes them wait for pooled connections instead of overflowing it.
        @Test func aBurstDoesNotOverflowASmallServer() async throws {
            let server = try BacklogServer(backlog: 5)
            defer { server.stop() }
            let engine = try Engine()
            #expect(engine.configuration.maxConnectionsPerOrigin == 6)
            let url = URL(string: "http://127.0.0.1:\(server.port)/small.txt")!
            let failures = await withTaskGroup(of: String?.self) { group in
                for _ in 0..<200 {
                    group.addTask {
                        let request = Request(url: url)
                        request.engine = engine
                        request.timeouts.headers = 20
                        do {
                            let response = try await request.response()
                            return response.statusCode == 200 && response.data == Data("hello\n".utf8)
                                ? nil : "status \(response.statusCode)"
                        } catch {
                            return "\(error)"
                        }
                    }
                }
                var failures: [String] = []
                for await failure in group { if let failure { failures.append(failure) } }
                return failures
            }
            #expect(failures.count == 0, "\(failures.count) failed, first: \(failures.first ?? "")")
        }
    }
}

/// Python's single-threaded http.server with a listen backlog of `backlog`, serving a temporary
/// directory: the server a newcomer tries first.
final class BacklogServer: Sendable {
    let port: Int
    private let pid: pid_t
    private let directory: String

    init(backlog: Int) throws {
        directory = temporaryPath("backlog-server")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: directory + "/small.txt"))
        let portFile = directory + "/port"
        let script = """
            import http.server, os, sys
            class Server(http.server.HTTPServer):
                request_queue_size = \(backlog)
            class Quiet(http.server.SimpleHTTPRequestHandler):
                def log_message(self, *args): pass
            os.chdir(sys.argv[1])
            server = Server(("127.0.0.1", 0), Quiet)
            with open(sys.argv[2] + ".tmp", "w") as f: f.write(str(server.server_address[1]))
            os.rename(sys.argv[2] + ".tmp", sys.argv[2])
            server.serve_forever()
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, directory, portFile]
        try process.run()
        pid = process.processIdentifier
        var found: Int?
        for _ in 0..<500 {
            if let text = try? String(contentsOfFile: portFile, encoding: .utf8), let n = Int(text) {
                found = n
                break
            }
            usleep(10_000)
        }
        guard let found else {
            kill(pid, SIGKILL)
            throw TestServerError(description: "python3 http.server did not start")
        }
        port = found
    }

    func stop() {
        kill(pid, SIGKILL)
        try? FileManager.default.removeItem(atPath: directory)
    }
}
