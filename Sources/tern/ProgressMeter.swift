// The progress bar on stderr: percent, bytes, rate and ETA, redrawn five times a second from
// Request.progress while the transfer runs. Shown only on a terminal, never with -s or -v, and
// not while the body itself goes to a terminal.

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

/// Redraws a meter five times a second on a queue of its own, and once more at the end; the
/// meter's state is touched only from its drawing, so the queue serialises it.
final class MeterClock: @unchecked Sendable {
    private let queue: DispatchQueue
    private let timer: any DispatchSourceTimer

    init(label: String) {
        queue = DispatchQueue(label: label)
        timer = DispatchSource.makeTimerSource(queue: queue)
    }

    func start(_ draw: @escaping @Sendable () -> Void) {
        timer.schedule(deadline: .now() + 0.2, repeating: 0.2)
        timer.setEventHandler(handler: draw)
        timer.resume()
    }

    /// Stops the clock, draws the last state and ends the line.
    func finish(_ draw: () -> Void) {
        queue.sync {
            timer.cancel()
            draw()
            Output.stderr("\n")
        }
    }
}

// All drawing runs on the clock's queue, which serialises `startBytes`.
final class ProgressMeter: @unchecked Sendable {
    private let request: Request
    private let clock = MeterClock(label: "tern.progress")
    private let started = Date()
    private var startBytes: UInt64?

    static func shouldShow(options: TernCommand, toStdout: Bool) -> Bool {
        isatty(2) != 0 && !options.silent && !options.verbose && !(toStdout && isatty(1) != 0)
    }

    init(request: Request) {
        self.request = request
    }

    func start() {
        clock.start { [self] in draw() }
    }

    func finish() {
        clock.finish { draw() }
    }

    private func draw() {
        let progress = request.progress
        // While the body is being sent (a -T, -d or -F upload), the upload is the progress.
        let uploading = progress.state == .upload && progress.bytesReceived == 0
        let done = uploading ? progress.bytesSent : progress.bytesReceived
        if !uploading, startBytes == nil { startBytes = request.offset }
        let base = uploading ? 0 : startBytes ?? 0
        let elapsed = max(Date().timeIntervalSince(started), 0.001)
        let rate = Double(done &- min(done, base)) / elapsed
        var line = "\r\u{1B}[K" + (uploading ? "up " : "")
        if let total = uploading ? progress.bytesToSend : progress.bytesExpected, total > 0 {
            let percent = min(100, Double(done) * 100 / Double(total))
            let eta = rate > 0 ? Double(total &- min(done, total)) / rate : -1
            line += formatted("%5.1f%%  ", percent)
            line += "\(Self.bytes(done)) of \(Self.bytes(total))  \(Self.bytes(UInt64(rate)))/s"
            line += "  ETA \(Self.clock(eta))"
        } else {
            line += "  \(Self.bytes(done))  \(Self.bytes(UInt64(rate)))/s  \(Self.clock(elapsed))"
        }
        Output.stderr(line)
    }

    static func bytes(_ n: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(n) B" : formatted("%.1f ", value) + units[unit]
    }

    static func clock(_ seconds: Double) -> String {
        guard seconds >= 0, seconds.isFinite else { return "--:--" }
        let s = Int(seconds.rounded())
        return s >= 3600
            ? formatted("%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60)
            : formatted("%02ld:%02ld", s / 60, s % 60)
    }
}
