// The root suite and shared helpers. Every suite is nested in TernTests (as an extension), so
// `.serialized` makes the whole run sequential: the leak checks read engine counters, and
// TERN_STAT_REQUESTS_LIVE counts C requests of all engines, so parallel tests would blur them.

import Dispatch
import Foundation
import Testing
@testable import Tern

@Suite(.serialized, .timeLimit(.minutes(3)))
struct TernTests {}

/// Polls `condition` every 10 ms until it holds or `seconds` pass; returns whether it held.
func eventually(within seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

/// Collects values from any thread.
final class Recorder<Value: Sendable>: Sendable {
    private let values = Locked<[Value]>([])

    func append(_ value: Value) { values.withLock { $0.append(value) } }
    var all: [Value] { values.withLock { $0 } }
    var count: Int { values.withLock { $0.count } }
}

/// A listener event as recorded by the tests.
struct Event: Sendable, Equatable, CustomStringConvertible {
    var state: Request.State
    var percent: Int
    var onQueue: Bool

    var description: String { "\(state) \(percent)\(onQueue ? "" : " (wrong queue)")" }
}

/// Tells whether code runs on a given queue, through a specific set on it.
final class QueueProbe: Sendable {
    private let key = DispatchSpecificKey<Int>()
    private let token = Int.random(in: 1...Int.max)

    init(_ queue: DispatchQueue) {
        queue.setSpecific(key: key, value: token)
    }

    var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == token }
}

/// Starts the request and suspends until its completion handlers ran.
func runToCompletion(_ request: Request) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        request.onCompletion { _ in continuation.resume() }
        request.execute()
    }
}

/// A fresh path in the temporary directory (the file is not created).
func temporaryPath(_ name: String = "file") -> String {
    FileManager.default.temporaryDirectory
        .appendingPathComponent("tern-test-\(UUID().uuidString.prefix(8))-\(name)").path
}

/// SHA-256 of a file, through sha256sum.
func sha256(file: String) -> String {
    String(run("/usr/bin/sha256sum", [file]).output.prefix(64))
}

/// SHA-256 of bytes, through a temporary file and sha256sum.
func sha256(_ data: Data) -> String {
    let path = temporaryPath("sha")
    _ = FileManager.default.createFile(atPath: path, contents: data)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return sha256(file: path)
}

/// The faultserver body pattern: byte i is i % 251.
func pattern(_ count: Int, from offset: Int = 0) -> Data {
    Data((offset..<(offset + count)).map { UInt8($0 % 251) })
}

/// A fixture file from nginx's document root.
func fixture(_ servers: Servers, _ name: String) throws -> Data {
    try Data(contentsOf: URL(fileURLWithPath: servers.www + "/" + name))
}

/// The parsed JSON of faultserver's /echo.
struct Echo {
    let json: [String: Any]

    init(_ data: Data?) throws {
        let object = try JSONSerialization.jsonObject(with: data ?? Data())
        json = object as? [String: Any] ?? [:]
    }

    var method: String? { json["method"] as? String }
    var target: String? { json["target"] as? String }
    var version: String? { json["version"] as? String }
    var bodyLength: Int? { json["body_length"] as? Int }
    var bodySHA256: String? { json["body_sha256"] as? String }

    /// Values of a request header, case-insensitively.
    func headers(_ name: String) -> [String] {
        let pairs = json["headers"] as? [[String]] ?? []
        return pairs.filter { $0.count == 2 && $0[0].lowercased() == name.lowercased() }.map { $0[1] }
    }
}
