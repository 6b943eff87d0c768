// The progress display of a -Z run, after curl's parallel meter: a header once, then one line
// redrawn five times a second with the whole run's figures:
//
//   DL% UL%  Dled  Uled  Xfers  Live Total     Current  Left     Speed
//    42  --  118M     0     8     3 0:00:07  0:00:03  0:00:04  31.2M
//
// DL% and UL% are shown when every transfer begun so far knows its size ("--" otherwise),
// Xfers counts transfers begun out of all of them, Live those running now, Total and Left are
// estimates from the DL% and the speed (the faster direction over the last five seconds).
// Shown only when stderr is a terminal, never with -s or -v, and not while a body goes to a
// terminal on stdout.

import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Tern

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The byte counts of a -Z run: its running requests, and the totals of those that ended.
/// Transfers report to it from their tasks; the meter reads it from its timer.
final class TransferBoard: Sendable {
    struct Totals {
        var begun = 0
        var live = 0
        var received: UInt64 = 0
        var sent: UInt64 = 0
        /// nil once a transfer did not know its size.
        var toReceive: UInt64? = 0
        var toSend: UInt64? = 0
        var uploads = 0
    }

    private struct State {
        var running: [ObjectIdentifier: Request] = [:]
        var ended = Totals()
    }

    private let state = Guarded(State())

    func began(_ request: Request) {
        state.withLock { $0.running[ObjectIdentifier(request)] = request }
    }

    func ended(_ request: Request) {
        state.withLock { s in
            s.running.removeValue(forKey: ObjectIdentifier(request))
            Self.add(request.progress, to: &s.ended)
        }
    }

    /// The run so far: the ended transfers' totals plus each running one's progress.
    func totals() -> Totals {
        state.withLock { s in
            var totals = s.ended
            for request in s.running.values { Self.add(request.progress, to: &totals) }
            totals.live = s.running.count
            return totals
        }
    }

    private static func add(_ progress: Request.Progress, to totals: inout Totals) {
        totals.begun += 1
        totals.received += progress.bytesReceived
        totals.sent += progress.bytesSent
        if let expected = progress.bytesExpected, let sum = totals.toReceive {
            totals.toReceive = sum + max(expected, progress.bytesReceived)
        } else {
            totals.toReceive = nil
        }
        if let toSend = progress.bytesToSend {
            totals.uploads += 1
            totals.toSend = totals.toSend.map { $0 + toSend }
        } else if progress.bytesSent > 0 {
            totals.uploads += 1
            totals.toSend = nil
        }
    }
}

/// A value behind a lock (a pthread mutex, which ThreadSanitizer follows).
final class Guarded<Value>: @unchecked Sendable {
    private let lock = ConditionLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try lock.withLock { try body(&value) }
    }
}

// All drawing runs on the clock's queue, which serialises `samples` and `drawn`.
final class ParallelMeter: @unchecked Sendable {
    private let board: TransferBoard
    private let total: Int
    private let clock = MeterClock(label: "tern.parallel-progress")
    private let started = Date()
    /// (seconds since start, bytes received, bytes sent), the last five seconds of them.
    private var samples: [(time: Double, received: UInt64, sent: UInt64)] = []
    private var drawn = false

    /// The run's meter: on a terminal, without -s or -v, and not with a body to a terminal.
    static func shouldShow(options: TernCommand) -> Bool {
        let toStdout = options.urls.indices.contains { index in
            let output = index < options.outputs.count ? options.outputs[index] : nil
            if output == "-" { return true }
            return output == nil && options.remoteName == 0 && !options.remoteNameAll
        }
        return ProgressMeter.shouldShow(options: options, toStdout: toStdout)
    }

    init(board: TransferBoard, total: Int) {
        self.board = board
        self.total = total
    }

    func start() {
        clock.start { [self] in draw() }
    }

    func finish() {
        clock.finish { draw() }
    }

    private func draw() {
        let totals = board.totals()
        let now = Date().timeIntervalSince(started)
        samples.append((now, totals.received, totals.sent))
        while let first = samples.first, now - first.time > 5 { samples.removeFirst() }
        var speed: Double = 0
        if let first = samples.first, now - first.time > 0 {
            let window = now - first.time
            speed = max(Double(totals.received &- first.received), Double(totals.sent &- first.sent))
                / window
        } else if now > 0 {
            speed = max(Double(totals.received), Double(totals.sent)) / now
        }
        let complete = totals.begun == total && totals.live == 0
        var downloadPercent: Double?
        if let goal = totals.toReceive, totals.begun > 0 {
            downloadPercent = goal == 0 ? (complete ? 100 : 0)
                : min(100, Double(totals.received) * 100 / Double(goal))
        }
        var uploadPercent: Double?
        if totals.uploads > 0, let goal = totals.toSend {
            uploadPercent = goal == 0 ? 100 : min(100, Double(totals.sent) * 100 / Double(goal))
        }
        // Time left: the bytes still to come at the current speed, when the sizes are known.
        var left: Double?
        if let goal = totals.toReceive, totals.begun == total, speed > 0 {
            left = Double(goal &- min(goal, totals.received)) / speed
        }
        if complete { left = 0 }
        var line = ""
        if !drawn {
            line += "DL% UL%  Dled  Uled  Xfers  Live Total     Current  Left     Speed\n"
            drawn = true
        }
        line += "\r\u{1B}[K"
        line += Self.percent(downloadPercent) + " " + Self.percent(uploadPercent) + " "
        line += Self.pad(Self.size(totals.received), 5) + " " + Self.pad(Self.size(totals.sent), 5) + " "
        line += Self.pad("\(totals.begun)", 6) + " " + Self.pad("\(totals.live)", 5) + " "
        line += Self.clock(left.map { now + $0 }) + " " + Self.clock(now) + " "
        line += Self.clock(left) + " " + Self.pad(Self.size(UInt64(speed)), 6)
        Output.stderr(line)
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
    }

    /// A percentage in three columns, or "--" when unknown.
    static func percent(_ value: Double?) -> String {
        guard let value else { return " --" }
        return pad("\(Int(value.rounded(.down)))", 3)
    }

    /// Bytes in at most five characters: a plain number below 100000, else in 1024-based
    /// units (k, M, G, T, P) with one decimal below 100 of the unit.
    static func size(_ bytes: UInt64) -> String {
        if bytes < 100_000 { return "\(bytes)" }
        var value = Double(bytes)
        for unit in ["k", "M", "G", "T", "P"] {
            value /= 1024
            if value < 100 { return formatted("%.1f", value) + unit }
            if value < 10000 { return "\(Int(value))" + unit }
        }
        return formatted("%.0f", value) + "P"
    }

    /// H:MM:SS in eight columns, or "--:--:--" when unknown.
    static func clock(_ seconds: Double?) -> String {
        guard let seconds, seconds >= 0, seconds.isFinite, seconds < 360_000 else {
            return "--:--:--"
        }
        let s = Int(seconds.rounded(.down))
        return pad(formatted("%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60), 8)
    }
}
