// `-T -` from a pipe or terminal: stdin read on a thread of its own, handed to the request as
// an AsyncSequence body. A blocking read(2) there never holds up the engine's loop, which
// sends what has arrived and waits for more without a body timeout.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Tern

/// Standard input as chunks of whatever each read(2) returned, ending at end of file. Each
/// `next()` asks the reader thread for one read, so nothing is read ahead of what the request
/// buffers (the body's back-pressure reaches the pipe).
struct StandardInputChunks: AsyncSequence, Sendable {
    private let reader = StandardInputReader()

    struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate let reader: StandardInputReader

        mutating func next() async throws -> [UInt8]? {
            try await reader.next()
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(reader: reader) }
}

/// The thread that reads stdin, one read per request; started by the first.
///
/// `@unchecked Sendable`: `pending`, `started` and `finished` are guarded by `lock`.
private final class StandardInputReader: @unchecked Sendable {
    private let lock = ConditionLock()
    private var pending: CheckedContinuation<[UInt8]?, any Error>?
    private var started = false
    private var finished = false

    /// The next chunk of stdin; `nil` at its end.
    func next() async throws -> [UInt8]? {
        try await withCheckedThrowingContinuation { continuation in
            let (done, start): (Bool, Bool) = lock.withLock {
                if finished { return (true, false) }
                pending = continuation
                lock.broadcast()
                defer { started = true }
                return (false, !started)
            }
            if done {
                continuation.resume(returning: nil)
            } else if start {
                startThread()
            }
        }
    }

    private func startThread() {
        let context = Unmanaged.passRetained(self).toOpaque()
        #if canImport(Darwin)
        var thread: pthread_t?
        #else
        var thread = pthread_t()
        #endif
        let r = pthread_create(&thread, nil, { context in
            #if canImport(Darwin)
            let context: UnsafeMutableRawPointer? = context
            #endif
            guard let context else { return nil }
            Unmanaged<StandardInputReader>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, context)
        if r == 0 {
            #if canImport(Darwin)
            if let thread { pthread_detach(thread) }
            #else
            pthread_detach(thread)
            #endif
        } else {
            Unmanaged<StandardInputReader>.fromOpaque(context).release()
            let continuation: CheckedContinuation<[UInt8]?, any Error>? = lock.withLock {
                finished = true
                defer { pending = nil }
                return pending
            }
            continuation?.resume(throwing: StandardInputError(code: r))
        }
    }

    /// The thread: waits for a request, reads once (blocking), answers; ends with stdin.
    private func run() {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            lock.lock()
            while pending == nil { lock.wait() }
            let continuation = pending!
            pending = nil
            lock.unlock()
            var n: Int
            repeat {
                n = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            } while n < 0 && errno == EINTR
            let code = errno
            if n > 0 {
                continuation.resume(returning: Array(buffer[..<n]))
                continue
            }
            lock.withLock { finished = true }
            if n == 0 {
                continuation.resume(returning: nil)
            } else {
                continuation.resume(throwing: StandardInputError(code: code))
            }
            return
        }
    }
}
