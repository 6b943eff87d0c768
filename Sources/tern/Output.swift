// Unbuffered writes to file descriptors: the body, heads and -w output go straight to fd 1 in
// the order they are produced, from whichever thread produces them.

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

enum Output {
    /// Writes all of `data` to `fd`; false on any error (EPIPE included: SIGPIPE is ignored).
    static func writeAll(_ fd: Int32, _ data: Data) -> Bool {
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += n
            }
            return true
        }
    }

    /// Writes text to stderr, ignoring errors.
    static func stderr(_ text: String) {
        _ = writeAll(2, Data(text.utf8))
    }

    /// Writes text to stdout; false on error.
    @discardableResult
    static func stdout(_ text: String) -> Bool {
        writeAll(1, Data(text.utf8))
    }
}
