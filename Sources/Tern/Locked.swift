// Locks: a value behind a lock (Locked: Alamofire's `Protected`, NIO's `NIOLockedValueBox`),
// one whose emptiness is read without the lock (CountedLocked, over a Locked and an atomic), a
// mutex with a condition for the places that wait, and the lock of an execution's guarded
// fields (StateLock). Locked and the mutex are plain pthread objects: ThreadSanitizer
// understands them (Synchronization.Mutex's futex path on Linux is invisible to it and shows up
// as false races), and they need nothing from Foundation. StateLock is a Mutex except in the
// ThreadSanitizer build.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A pthread mutex, optionally recursive, with one condition variable (one allocation for
/// both).
package final class ConditionLock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    package init(recursive: Bool = false) {
        let conditionOffset =
            (MemoryLayout<pthread_mutex_t>.stride + MemoryLayout<pthread_cond_t>.alignment - 1)
            / MemoryLayout<pthread_cond_t>.alignment * MemoryLayout<pthread_cond_t>.alignment
        let raw = UnsafeMutableRawPointer.allocate(
            byteCount: conditionOffset + MemoryLayout<pthread_cond_t>.size,
            alignment: max(MemoryLayout<pthread_mutex_t>.alignment, MemoryLayout<pthread_cond_t>.alignment))
        mutex = raw.bindMemory(to: pthread_mutex_t.self, capacity: 1)
        condition = (raw + conditionOffset).bindMemory(to: pthread_cond_t.self, capacity: 1)
        if recursive {
            var attributes = pthread_mutexattr_t()
            pthread_mutexattr_init(&attributes)
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE))
            pthread_mutex_init(mutex, &attributes)
            pthread_mutexattr_destroy(&attributes)
        } else {
            pthread_mutex_init(mutex, nil)
        }
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        UnsafeMutableRawPointer(mutex).deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }
    /// Waits for ``broadcast()``; the lock must be held.
    package func wait() { pthread_cond_wait(condition, mutex) }
    package func broadcast() { pthread_cond_broadcast(condition) }

    package func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}

// Sendable because `value` is only touched inside withLock, under `mutex`.
final class Locked<Value>: @unchecked Sendable {
    // A bare mutex, no condition: every Request has one of these.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    @exclusivity(unchecked) private var value: Value  // the mutex keeps accesses apart

    init(_ value: consuming Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value. `body` must not call user code.
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

/// A locked value that counts what it holds (a jar's cookies, a store's credentials).
protocol CountedValue {
    var count: Int { get }
}

/// A ``Locked`` value whose count every locked section publishes, so that ``isEmpty`` takes no
/// lock: every request asks the shared cookie jar and credential store whether they hold
/// anything, and most apps fill neither. A reader that sees a count (acquire) then takes the
/// lock for the contents.
final class CountedLocked<Value: CountedValue>: Sendable {
    private let locked: Locked<Value>
    private let published = Atomic<Int>(0)

    init(_ value: consuming Value) {
        published.store(value.count, ordering: .relaxed)
        locked = Locked(value)
    }

    var isEmpty: Bool { published.load(ordering: .acquiring) == 0 }

    /// Runs `body` with exclusive access to the value, then publishes its count.
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try locked.withLock { value in
            defer { published.store(value.count, ordering: .releasing) }
            return try body(&value)
        }
    }
}

#if TERN_PTHREAD_LOCKS
/// ThreadSanitizer builds (scripts/test.sh defines the flag): a pthread mutex, which it
/// understands. Not `Locked<Void>`: TSan took the inout accesses to its zero-sized value, all
/// at one address, for racing accesses to the object (216 reports in one run, every one on
/// an execution's lock).
final class StateLock: Sendable {
    private let mutex = ConditionLock()

    init(_: Void) {}

    func withLock<Result>(_ body: (inout Void) throws -> Result) rethrows -> Result {
        try mutex.withLock {
            var nothing: Void = ()
            return try body(&nothing)
        }
    }
}
#else
/// A lock guarding fields its owner marks as guarded, not a value of its own: the standard
/// library's mutex, stored inline (no allocation, a futex rather than a pthread call).
/// ThreadSanitizer cannot see its futex path, hence the pthread variant above.
typealias StateLock = Mutex<Void>
#endif
