// Locked: a value behind a lock, the one place mutable shared state lives (Alamofire's
// `Protected`, NIO's `NIOLockedValueBox`). NSLock wraps a pthread mutex, which
// ThreadSanitizer understands; Synchronization.Mutex's futex slow path on Linux is invisible
// to it and shows up as false races.

import Foundation

// Sendable because `value` is only touched inside withLock, under `lock`.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with exclusive access to the value. `body` must not call user code.
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
