// A copy of Tests/TernTests/TestServers.swift (test targets cannot share code), trimmed to what
// these tests use and renamed TestServers (the generated client declares its own `Servers`).
//
// The real servers the tests talk to: nginx and faultserver.py (Tests/TestServer). With
// TERN_TEST_STATE set (scripts/test.sh), its env file names running servers; otherwise the
// first test that needs them starts both into a temporary directory, once per test process,
// and stops them at exit. A server that cannot be found or started fails the test, loudly;
// nothing is ever skipped.

import Foundation
import Synchronization
@testable import Tern
import Testing

struct TestServerError: Error, CustomStringConvertible {
    var description: String
}

/// Where the test servers listen, and the fixture facts from their env file.
struct TestServers: Sendable {
    let state: String
    let env: [String: String]
    let nginxPort: Int
    let faultPort: Int
    let www: String

    /// The repository root (three levels above this file).
    static let root: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// An nginx URL, such as `nginx("/1k.bin")`.
    func nginx(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(nginxPort)\(path)")! }

    /// A faultserver URL, such as `fault("/stall?stall_ms=3000")`.
    func fault(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(faultPort)\(path)")! }

    private static let cache = Locked<Result<TestServers, TestServerError>?>(nil)

    /// The servers, started on first use. Throws (failing the test) when they cannot run.
    static func get() throws -> TestServers {
        try cache.withLock { cached in
            if let cached { return try cached.get() }
            let result: Result<TestServers, TestServerError>
            do {
                result = .success(try locateOrStart())
            } catch let error as TestServerError {
                result = .failure(error)
            } catch {
                result = .failure(TestServerError(description: "\(error)"))
            }
            cached = result
            return try result.get()
        }
    }

    private static func locateOrStart() throws -> TestServers {
        if let state = ProcessInfo.processInfo.environment["TERN_TEST_STATE"], !state.isEmpty {
            return try load(state: state, origin: "TERN_TEST_STATE=\(state)")
        }
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("tern-openapi-tests-\(getpid())-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let state = dir.path
        let script = root.appendingPathComponent("Tests/TestServer/servers.py").path
        let (status, output) = run("/usr/bin/env", ["python3", script, "start", state])
        guard status == 0 else {
            throw TestServerError(description:
                "could not start the test servers (python3 \(script) start \(state), exit "
                + "\(status)):\n\(output)")
        }
        startedState.withLock { $0 = state }
        atexit { stopStartedServers() }
        return try load(state: state, origin: "servers.py start \(state)")
    }

    private static func load(state: String, origin: String) throws -> TestServers {
        let envPath = state + "/env"
        guard let text = try? String(contentsOfFile: envPath, encoding: .utf8) else {
            throw TestServerError(description:
                "\(origin): no \(envPath); start the servers with "
                + "`python3 Tests/TestServer/servers.py start \(state)`")
        }
        var env: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { env[String(parts[0])] = String(parts[1]) }
        }
        guard let nginx = env["NGINX_PORT"].flatMap(Int.init),
            let fault = env["FAULT_PORT"].flatMap(Int.init), let www = env["WWW"]
        else {
            throw TestServerError(description: "\(origin): \(envPath) lacks NGINX_PORT, FAULT_PORT or WWW")
        }
        return TestServers(state: state, env: env, nginxPort: nginx, faultPort: fault, www: www)
    }
}

private let startedState = Locked<String?>(nil)

private func stopStartedServers() {
    guard let state = startedState.withLock({ $0 }) else { return }
    let script = TestServers.root.appendingPathComponent("Tests/TestServer/servers.py").path
    _ = run("/usr/bin/env", ["python3", script, "stop", state])
    try? FileManager.default.removeItem(atPath: state)
}

/// Runs a program to completion; returns its exit status and combined output.
@discardableResult
func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil)
    -> (status: Int32, output: String)
{
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    do {
        try process.run()
    } catch {
        return (-1, "cannot run \(executable): \(error)")
    }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}
