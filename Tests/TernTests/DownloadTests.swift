// Safe downloads, from Swift and the CLI: a failed or cancelled download never touches the file
// at the destination, and a resumed download of a resource that changed in the meantime ends
// byte-identical to the new version (If-Range), while an unchanged one continues (206).

import Foundation
import HTTPTypes
import Testing
@testable import Tern

/// A file of random bytes in nginx's docroot, removed by `remove()`.
struct ServedFile {
    let name: String
    let path: String

    init(_ servers: Servers, size: Int) throws {
        name = "changing-\(UUID().uuidString.prefix(8)).bin"
        path = servers.www + "/" + name
        try write(size: size)
    }

    /// Replaces the content with `size` new random bytes.
    func write(size: Int) throws {
        var bytes = Data(count: size)
        bytes.withUnsafeMutableBytes { buffer in
            var generator = SystemRandomNumberGenerator()
            for i in stride(from: 0, to: size - size % 8, by: 8) {
                buffer.storeBytes(of: generator.next() as UInt64, toByteOffset: i, as: UInt64.self)
            }
        }
        try bytes.write(to: URL(fileURLWithPath: path))
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? -1
}

extension TernTests {
    @Suite struct Downloads {
        /// Runs a download that the listener cancels once `after` bytes arrived.
        func runCancelled(_ request: Request, after bytes: UInt64) -> TernError? {
            request.callbackQueue = .global()
            request.listener = { request, state, _ in
                !(state == .download && request.progress.bytesReceived >= bytes)
            }
            do {
                _ = try request.executeAndWait()
                return nil
            } catch {
                return error
            }
        }

        @Test func cancelledOrFailedDownloadsLeaveTheFileAlone() throws {
            let servers = try Servers.get()
            let file = temporaryPath("precious")
            defer {
                try? FileManager.default.removeItem(atPath: file)
                try? FileManager.default.removeItem(atPath: file + ".part")
            }
            let precious = Data("the previous, good version\n".utf8)
            _ = FileManager.default.createFile(atPath: file, contents: precious)

            let slow = servers.fault("/ok?size=20000000&drip_ms=20&drip_bytes=65536")
            let request = Request(url: slow)
            request.downloadFile = file
            #expect(request.temporaryDownloadFile == file + ".part")
            let error = runCancelled(request, after: 100_000)
            #expect(error?.code == .cancelled)
            #expect(FileManager.default.contents(atPath: file) == precious)
            #expect(!FileManager.default.fileExists(atPath: file + ".part"), "no debris without resume")

            let truncated = Request(url: servers.fault("/truncate?len=500000&send=200000"))
            truncated.downloadFile = file
            truncated.callbackQueue = .global()
            #expect(throws: TernError.partialBody) { try truncated.executeAndWait() }
            #expect(FileManager.default.contents(atPath: file) == precious)

            let notFound = Request(url: servers.nginx("/no-such-file"))
            notFound.downloadFile = file
            notFound.callbackQueue = .global()
            #expect(try notFound.executeAndWait().statusCode == 404)
            #expect(FileManager.default.contents(atPath: file) == precious, "a 404 body stays in memory")

            // With resume the partial file stays for later, and the destination still holds
            // the old version.
            let resumable = Request(url: slow)
            resumable.downloadFile = file
            resumable.resume = true
            #expect(runCancelled(resumable, after: 100_000)?.code == .cancelled)
            #expect(FileManager.default.contents(atPath: file) == precious)
            #expect(fileSize(file + ".part") > 0)
        }

        @Test func resumeRestartsAChangedResourceAndContinuesAnUnchangedOne() throws {
            let servers = try Servers.get()
            let ca = try servers.must("CA_PEM")
            let served = try ServedFile(servers, size: 1_500_000)
            let file = temporaryPath("resumed")
            defer {
                served.remove()
                for suffix in ["", ".part", ".part.validator"] {
                    try? FileManager.default.removeItem(atPath: file + suffix)
                }
            }

            // Interrupted while coming slowly over TLS (128 KiB/s).
            func interrupt() throws -> Int {
                let request = Request(url: servers.https("TLS_PORT", "/slow/\(served.name)"))
                request.tls = TLSOptions(caFile: ca)
                request.downloadFile = file
                request.resume = true
                #expect(runCancelled(request, after: 100_000)?.code == .cancelled)
                #expect(!FileManager.default.fileExists(atPath: file))
                let partial = fileSize(file + ".part")
                #expect(partial > 0 && partial < 1_500_000)
                #expect(FileManager.default.fileExists(atPath: file + ".part.validator"))
                return partial
            }

            // Unchanged: the partial file continues from where it stopped.
            let partial = try interrupt()
            let resume = Request(url: servers.nginx("/\(served.name)"))
            resume.downloadFile = file
            resume.resume = true
            resume.callbackQueue = .global()
            let continued = try resume.executeAndWait()
            #expect(continued.statusCode == 206)
            #expect(continued.offset == UInt64(partial))
            #expect(continued.sentRequestHead?.contains("Range: bytes=\(partial)-\r\n") == true)
            #expect(continued.sentRequestHead?.contains("If-Range: ") == true)
            #expect(sha256(file: file) == sha256(file: served.path))
            #expect(!FileManager.default.fileExists(atPath: file + ".part"))
            try FileManager.default.removeItem(atPath: file)

            // Changed meanwhile: If-Range fails, the server sends the new version whole.
            _ = try interrupt()
            try served.write(size: 1_200_000)
            let again = Request(url: servers.nginx("/\(served.name)"))
            again.downloadFile = file
            again.resume = true
            again.callbackQueue = .global()
            let restarted = try again.executeAndWait()
            #expect(restarted.statusCode == 200)
            #expect(restarted.sentRequestHead?.contains("If-Range: ") == true)
            #expect(sha256(file: file) == sha256(file: served.path), "the new version, not a splice")
            #expect(fileSize(file) == 1_200_000)
            #expect(!FileManager.default.fileExists(atPath: file + ".part"))
            #expect(!FileManager.default.fileExists(atPath: file + ".part.validator"))
        }

        // MARK: - CLI

        @Test func cliFailedOrInterruptedDownloadsLeaveTheFileAlone() throws {
            let servers = try Servers.get()
            let file = temporaryPath("cli-precious")
            defer {
                try? FileManager.default.removeItem(atPath: file)
                try? FileManager.default.removeItem(atPath: file + ".part")
            }
            let precious = Data("keep me\n".utf8)
            _ = FileManager.default.createFile(atPath: file, contents: precious)
            let slow = servers.fault("/ok?size=20000000&drip_ms=20&drip_bytes=65536").absoluteString

            let timedOut = try tern(["-s", "-m", "1", "-o", file, slow])
            #expect(timedOut.status == 28)
            #expect(FileManager.default.contents(atPath: file) == precious)
            #expect(!FileManager.default.fileExists(atPath: file + ".part"))

            // Ctrl-C: the transfer is cancelled, the process ends by SIGINT, the file stays.
            let process = Process()
            process.executableURL = URL(fileURLWithPath: TernBinary.path)
            process.arguments = ["-s", "-o", file, slow]
            try process.run()
            #expect(eventually(within: 5) { fileSize(file + ".part") > 0 }, "the download began")
            process.interrupt()
            process.waitUntilExit()
            #expect(process.terminationReason == .uncaughtSignal)
            #expect(process.terminationStatus == SIGINT)
            #expect(FileManager.default.contents(atPath: file) == precious)
            #expect(!FileManager.default.fileExists(atPath: file + ".part"), "cleaned up on cancel")
        }

        @Test func cliResumeOfAChangedResourceEndsWithTheNewVersion() throws {
            let servers = try Servers.get()
            let ca = try servers.must("CA_PEM")
            let served = try ServedFile(servers, size: 1_000_000)
            let file = temporaryPath("cli-resumed")
            defer {
                served.remove()
                for suffix in ["", ".part", ".part.validator"] {
                    try? FileManager.default.removeItem(atPath: file + suffix)
                }
            }
            let interrupted = try tern(["-s", "--cacert", ca, "-C", "-", "-m", "1", "-o", file,
                                        servers.https("TLS_PORT", "/slow/\(served.name)").absoluteString])
            #expect(interrupted.status == 28)
            #expect(fileSize(file + ".part") > 0)
            #expect(!FileManager.default.fileExists(atPath: file))
            try served.write(size: 1_100_000)
            let resumed = try tern(["-sS", "-C", "-", "-o", file, "-w", "%{http_code}",
                                    servers.nginx("/\(served.name)").absoluteString])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            #expect(resumed.text == "200", "If-Range did not match: the whole new version")
            #expect(sha256(file: file) == sha256(file: served.path))
        }
    }
}
