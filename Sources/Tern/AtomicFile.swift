// Crash-safe file writes for the cookie jar and the credential store: the bytes go to a
// temporary file in the same directory, are flushed to disk, and the temporary file is renamed
// over the target. A crash at any moment leaves either the old file or the new one, whole.

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

/// The text of `errno` as a sentence ("No such file or directory").
private func errnoText(_ code: Int32) -> String {
    String(cString: strerror(code))
}

/// Writes `data` to `path` atomically: temporary file, `fsync`, `rename`, `fsync` of the
/// directory. The file gets exactly `permissions` (no umask), since the callers store secrets.
///
/// A target that exists and is not a regular file (`/dev/null`, a FIFO, a terminal) cannot be
/// replaced by a rename; it is written in place instead.
///
/// - Throws: ``TernError`` with code ``TernError/Code/fileWriteFailed`` naming the path and
///   the system's reason; the target is then unchanged and no temporary file is left behind.
func writeAtomically(_ data: Data, to path: String, permissions: mode_t) throws(TernError) {
    func failure(_ what: String, _ code: Int32) -> TernError {
        TernError(code: .fileWriteFailed, message: "\(what) \(path): \(errnoText(code))")
    }

    var info = stat()
    if stat(path, &info) == 0, (info.st_mode & S_IFMT) != S_IFREG {
        let fd = open(path, O_WRONLY | O_TRUNC)
        guard fd >= 0 else { throw failure("open", errno) }
        defer { close(fd) }
        if let code = writeAll(fd, data) { throw failure("write", code) }
        return
    }

    let (directory, name) = splitPath(path)
    let prefix = directory.isEmpty ? "" : directory + "/"
    var template = Array((prefix + "." + name + ".tmp-XXXXXX").utf8CString)
    let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    guard fd >= 0 else { throw failure("create a temporary file next to", errno) }
    let temporary = String(
        decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    var closed = false
    var renamed = false
    defer {
        if !closed { close(fd) }
        if !renamed { unlink(temporary) }
    }

    if fchmod(fd, permissions) != 0 { throw failure("chmod", errno) }
    if let code = writeAll(fd, data) { throw failure("write", code) }
    // Without fsync a crash after the rename could leave an empty or partial file in place of
    // the old one: the rename may reach the disk before the data does.
    if fsync(fd) != 0 { throw failure("fsync", errno) }
    closed = true
    if close(fd) != 0 { throw failure("close", errno) }
    if rename(temporary, path) != 0 { throw failure("rename onto", errno) }
    renamed = true

    // Make the rename itself durable. A failure here loses nothing already visible, so it is
    // not reported.
    let dirfd = open(directory.isEmpty ? "." : directory, O_RDONLY)
    if dirfd >= 0 {
        _ = fsync(dirfd)
        close(dirfd)
    }
}

/// Writes every byte, retrying on EINTR and short writes; returns `errno` on failure.
private func writeAll(_ fd: Int32, _ data: Data) -> Int32? {
    data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> Int32? in
        var offset = 0
        while offset < buffer.count {
            let n = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += n
        }
        return nil
    }
}

/// Reads a whole file.
///
/// - Throws: ``TernError`` with code ``TernError/Code/fileReadFailed`` naming the path and the
///   system's reason.
func readFile(at path: String) throws(TernError) -> Data {
    func failure(_ what: String, _ code: Int32) -> TernError {
        TernError(code: .fileReadFailed, message: "\(what) \(path): \(errnoText(code))")
    }
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw failure("open", errno) }
    defer { close(fd) }
    var data = Data()
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw failure("read", errno)
        }
        if n == 0 { return data }
        data.append(contentsOf: chunk[0..<n])
    }
}

/// Whether a file exists at `path` (of any kind).
func fileExists(at path: String) -> Bool {
    var info = stat()
    return stat(path, &info) == 0
}

/// A path's directory and last component, as NSString's `deletingLastPathComponent` and
/// `lastPathComponent` give them: trailing slashes ignored, `""` for the directory of a bare
/// name, `"/"` for a name at the root.
func splitPath(_ path: String) -> (directory: String, name: String) {
    var trimmed = Substring(path)
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
    guard let slash = trimmed.lastIndex(of: "/") else { return ("", String(trimmed)) }
    if trimmed == "/" { return ("/", "/") }
    var directory = trimmed[..<slash]
    while directory.count > 1, directory.hasSuffix("/") { directory = directory.dropLast() }
    let name = String(trimmed[trimmed.index(after: slash)...])
    return (directory.isEmpty ? "/" : String(directory), name)
}
