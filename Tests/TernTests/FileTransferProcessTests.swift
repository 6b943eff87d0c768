// FileTransferManager in a process of its own (tern-file-transfer-run): a 200 MiB upload
// streams from disk with the same peak memory as a 2 MiB one, and a download killed with
// SIGKILL and started again ends byte-identical.

import Foundation
@testable import Tern
import Testing

/// The built `tern-file-transfer-run` binary, next to the test bundle in the build products.
enum FileTransferRunBinary {
    static let path: String = {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("tern-file-transfer-run").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return Servers.root.appendingPathComponent(".build/debug/tern-file-transfer-run").path
    }()
}

@Suite struct FileTransferProcessTests {
    /// Runs the binary to completion; its output lines.
    static func run(_ arguments: [String], state: String? = nil) throws -> (status: Int32, lines: [String]) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: FileTransferRunBinary.path)
        process.arguments = arguments
        if let state {
            process.environment = ProcessInfo.processInfo.environment.merging(["TERN_FT_STATE": state]) { $1 }
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let lines = String(decoding: output, as: UTF8.self).split(separator: "\n").map(String.init)
        return (process.terminationStatus, lines)
    }

    static func value(_ key: String, in lines: [String]) -> String? {
        lines.last { $0.hasPrefix(key + " ") }.map { String($0.dropFirst(key.count + 1)) }
    }

    /// A sparse file of `size` bytes (zeros, no disk space until written).
    static func sparseFile(_ path: String, size: Int) throws {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.truncate(atOffset: UInt64(size))
        try handle.close()
    }

    @Test(.timeLimit(.minutes(2))) func maxFileSizeSurvivesAProcessRestart() throws {
        let servers = try Servers.get()
        let dir = try FileTransferTests.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let state = dir + "/state"
        _ = try FileTransferTests.randomFile(dir + "/small.bin", size: 500)
        _ = try FileTransferTests.randomFile(dir + "/big.bin", size: 5000)
        let upload = try FileTransferTests.uploadURL(servers, "?max_file_size=1200").absoluteString
        // uid 321 is this test's alone: tests running at the same time use the others.
        let before = try FileTransferTests.stats(servers, uid: "321").uploads
        // One process learns the server's limit and exits...
        let first = try Self.run(["upload", upload, "123", "token", dir + "/small.bin"], state: state)
        #expect(first.status == 0, "\(first.lines.suffix(3))")
        // ...the next one, another uid, refuses the larger file before sending anything.
        let start = Date()
        let second = try Self.run(["upload", upload, "321", "tok321", dir + "/big.bin"], state: state)
        #expect(second.status == 1)
        let error = Self.value("error", in: second.lines) ?? ""
        #expect(error.contains("1200"), "\(second.lines.suffix(3))")
        #expect(Date().timeIntervalSince(start) < 10)
        #expect(try FileTransferTests.stats(servers, uid: "321").uploads == before, "the server saw the upload")
    }

    @Test(.timeLimit(.minutes(2))) func a200MiBUploadStreamsWithFlatMemory() throws {
        let servers = try Servers.get()
        let dir = try FileTransferTests.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let upload = try FileTransferTests.uploadURL(servers, "?max_file_size=300000000")
            .absoluteString
        var peaks: [Int] = []
        for (name, size) in [("small.bin", 2 << 20), ("big.bin", 200 << 20)] {
            try Self.sparseFile(dir + "/" + name, size: size)
            let (status, lines) = try Self.run(["upload", upload, "123", "token", dir + "/" + name])
            #expect(status == 0, "\(lines.suffix(3))")
            let url = try #require(Self.value("url", in: lines).flatMap(URL.init(string:)))
            // The server keeps what it stored under its state folder: let it go.
            let id = url.deletingLastPathComponent().lastPathComponent
            try? FileManager.default.removeItem(atPath: servers.state + "/files/" + id)
            peaks.append(Int(Self.value("peak_rss_kib", in: lines) ?? "") ?? -1)
        }
        #expect(peaks.allSatisfy { $0 > 0 })
        // 200 MiB more file, at most 16 MiB more peak memory.
        #expect(peaks[1] - peaks[0] < 16 << 10, "peak RSS KiB: 2 MiB \(peaks[0]), 200 MiB \(peaks[1])")
    }

    @Test(.timeLimit(.minutes(2))) func aDownloadKilledWithSIGKILLResumesByteIdentical() async throws {
        let servers = try Servers.get()
        let dir = try FileTransferTests.folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let original = try FileTransferTests.randomFile(dir + "/f.bin", size: 3_000_000)
        let (manager, _) = try FileTransferTests.manager(servers)
        let url = try #require(
            try await manager.upload(file: dir + "/f.bin", options: .init(signed: true)).result())
        let upload = try FileTransferTests.uploadURL(servers).absoluteString
        let dest = dir + "/copy.bin"

        // 500 KB/s: six seconds for the file; killed once about 600 KB arrived.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: FileTransferRunBinary.path)
        process.arguments = [
            "download", upload, "123", "token", url.absoluteString + "?rate=500000", dest,
        ]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let deadline = ContinuousClock.now + .seconds(20)
        func partSize() -> Int {
            (try? FileManager.default.attributesOfItem(atPath: dest + ".part")[.size] as? Int) ?? 0
        }
        while partSize() < 600_000, ContinuousClock.now < deadline, process.isRunning {
            try await Task.sleep(for: .milliseconds(10))
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal)
        let left = partSize()
        #expect(left >= 600_000 && left < original.count, "partial file of \(left) bytes")
        #expect(!FileManager.default.fileExists(atPath: dest))

        // Started again, it continues the partial file to the end.
        let (status, lines) = try Self.run(["download", upload, "123", "token", url.absoluteString, dest])
        #expect(status == 0, "\(lines.suffix(3))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: dest)) == original)
    }
}
