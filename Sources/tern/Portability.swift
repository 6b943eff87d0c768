// What the CLI took from full Foundation, in plain Swift and libc, so that it links only
// FoundationEssentials (no ICU): printf-style number formatting, reading stdin to its end,
// and percent-encoding a path component.

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

/// `String(format:)` for C formats of numbers (`%5.1f`, `%03ld`, ...), through vsnprintf in the
/// C locale (a "." decimal point, as Foundation's `String(format:)` without a locale). A Swift
/// `Int` is a C `long`: format it with `%ld`.
func formatted(_ format: String, _ arguments: any CVarArg...) -> String {
    var buffer = [CChar](repeating: 0, count: 64)
    while true {
        let count = buffer.count
        let needed = withVaList(arguments) { list in
            buffer.withUnsafeMutableBufferPointer { vsnprintf($0.baseAddress, count, format, list) }
        }
        if needed < 0 { return "" }
        if Int(needed) < count {
            let bytes = buffer[..<Int(needed)].map { UInt8(bitPattern: $0) }
            return String(decoding: bytes, as: UTF8.self)
        }
        buffer = [CChar](repeating: 0, count: Int(needed) + 1)
    }
}

/// All of stdin, read to its end (Foundation's `FileHandle.standardInput.readDataToEndOfFile()`);
/// what was read before an error when reading fails.
func readStandardInput() -> Data {
    var data = Data()
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR { continue }
        if n <= 0 { return data }
        data.append(contentsOf: chunk[..<n])
    }
}

/// `text` with every byte outside Foundation's `CharacterSet.urlPathAllowed` (unreserved
/// characters, sub-delimiters, `:`, `@` and `/`) percent-encoded as UTF-8.
func percentEncodedPath(_ text: String) -> String {
    let allowed = Set("!$&'()*+,-./:;=@_~".utf8)
    let hex = Array("0123456789ABCDEF".utf8)
    var out: [UInt8] = []
    for byte in text.utf8 {
        let isAlphanumeric = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a)
            || (byte >= 0x61 && byte <= 0x7a)
        if isAlphanumeric || allowed.contains(byte) {
            out.append(byte)
        } else {
            out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xf)]]
        }
    }
    return String(decoding: out, as: UTF8.self)
}

/// Reading stdin as a -T body failed; its text ends up in the transfer's error message.
struct StandardInputError: Error, CustomStringConvertible {
    var code: Int32
    var description: String {
        "reading the body stream failed: \(String(cString: strerror(code)))"
    }
}
