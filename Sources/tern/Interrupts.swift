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

// `current` and `caught` are guarded by `lock`; the signal sources run on a global queue.
final class Interrupts: @unchecked Sendable {
    static let shared = Interrupts()

    private let lock = ConditionLock()
    private var running: Request?
    private var signalNumber: Int32 = 0
    private var sources: [any DispatchSourceSignal] = []

    /// The request being executed, cancelled by a signal.
    var current: Request? {
        get { lock.withLock { running } }
        set { lock.withLock { running = newValue } }
    }

    /// The signal caught, or 0.
    var caught: Int32 { lock.withLock { signalNumber } }

    /// Routes SIGINT and SIGTERM through dispatch sources instead of their default action.
    static func install() -> Interrupts {
        let shared = Interrupts.shared
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { shared.handle(number) }
            source.resume()
            shared.lock.withLock { shared.sources.append(source) }
        }
        return shared
    }

    private func handle(_ number: Int32) {
        let request: Request? = lock.withLock {
            if signalNumber == 0 { signalNumber = number }
            return running
        }
        if let request {
            request.cancel()  // the transfer returns, then run() ends the process
        } else {
            exitIfCaught()  // between transfers: nothing to clean up
        }
    }

    /// Ends the process by the caught signal, if any.
    func exitIfCaught() {
        let number = caught
        guard number != 0 else { return }
        signal(number, SIG_DFL)
        // libdispatch blocks the signals its sources watch; let this one through.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, number)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        raise(number)
        exit(128 + number)
    }
}
