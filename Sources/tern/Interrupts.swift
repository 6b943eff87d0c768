// Ctrl-C and kill during a transfer: the request is cancelled so the engine cleans up (a
// download's .part file goes unless -C keeps it to resume; the file at the -o path is never
// touched), then the process ends by the same signal, as curl's does.

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

// `running` and `signalNumber` are guarded by `lock`; the signal sources run on a global queue.
final class Interrupts: @unchecked Sendable {
    static let shared = Interrupts()

    private let lock = ConditionLock()
    /// The requests being executed (several with -Z), cancelled by a signal.
    private var running: [ObjectIdentifier: Request] = [:]
    private var signalNumber: Int32 = 0
    private var sources: [any DispatchSourceSignal] = []

    /// Registers a request about to be executed, so that a signal cancels it. `false` when a
    /// signal came already: the request must not start (the process is about to end).
    func begin(_ request: Request) -> Bool {
        lock.withLock {
            guard signalNumber == 0 else { return false }
            running[ObjectIdentifier(request)] = request
            return true
        }
    }

    /// The request is done (finished, failed or cancelled).
    func end(_ request: Request) {
        lock.withLock { _ = running.removeValue(forKey: ObjectIdentifier(request)) }
    }

    /// The signal caught, or 0.
    var caught: Int32 { lock.withLock { signalNumber } }

    /// Routes SIGINT and SIGTERM through dispatch sources instead of their default action.
    /// Called once, on the main thread before any other thread exists: the signals are
    /// blocked there, so every thread started later inherits the block and a signal stays
    /// pending until a source reads it. No SIG_IGN: setting it would discard a signal that
    /// is already pending (one sent before this), and with the signals blocked everywhere the
    /// default action never runs.
    @discardableResult
    static func install() -> Interrupts {
        let shared = Interrupts.shared
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        for number in [SIGINT, SIGTERM] {
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { shared.handle(number) }
            source.resume()
            shared.lock.withLock { shared.sources.append(source) }
        }
        return shared
    }

    private func handle(_ number: Int32) {
        // Taken under the lock that begin() takes: a request either is in this list (and is
        // cancelled here) or sees the signal and never starts.
        let requests: [Request] = lock.withLock {
            if signalNumber == 0 { signalNumber = number }
            return Array(running.values)
        }
        if requests.isEmpty {
            exitIfCaught()  // between transfers: nothing to clean up
        }
        for request in requests {
            request.cancel()  // each transfer returns, then run() ends the process
        }
    }

    /// Ends the process by the caught signal, if any.
    func exitIfCaught() {
        let number = caught
        guard number != 0 else { return }
        signal(number, SIG_DFL)
        // Blocked in every thread (install()); let this one through in this thread.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, number)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        raise(number)
        exit(128 + number)
    }
}
