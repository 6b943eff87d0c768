// The on-disk form of one cache entry: a fixed prefix, a checksummed head, then the body.
// See docs/cache.md for why one immutable file per entry.
//
//   offset  size  field
//   0       8     magic "TERNCAC1"
//   8       4     head length H (little endian, like every number here)
//   12      4     reserved (0)
//   16      8     body offset O (48 + H, or rounded up to 4096 for large bodies)
//   24      8     body length L
//   32      8     body checksum (CacheChecksum of the L body bytes)
//   40      8     head checksum (CacheChecksum of bytes 0..<40 and of the H head bytes)
//   48      H     head (CachedHead, encoded below)
//   O       L     body
//
// A file is valid when the magic, the head checksum and the decoded head check out and its
// size is exactly O + L. The body checksum is verified whenever the body is read through the
// store into memory (see CacheEntry.readBody).

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes

/// A fast 64-bit checksum that can be fed in pieces of any size: 8 bytes at a time through a
/// multiply-xorshift mix, the tail and the length folded in at the end. It detects torn,
/// zeroed or mixed files; it is not a cryptographic hash (keys are verified in full).
struct CacheChecksum {
    private var state: UInt64 = 0x243F_6A88_85A3_08D3
    private var pending: UInt64 = 0
    private var pendingCount = 0
    private var length: UInt64 = 0

    init() {}

    private mutating func mix(_ word: UInt64) {
        state = (state ^ word) &* 0x9E37_79B9_7F4A_7C15
        state ^= state >> 29
    }

    mutating func update(_ buffer: UnsafeRawBufferPointer) {
        length &+= UInt64(buffer.count)
        var i = 0
        if pendingCount > 0 {
            while pendingCount < 8, i < buffer.count {
                pending |= UInt64(buffer[i]) << (8 * UInt64(pendingCount))
                pendingCount += 1
                i += 1
            }
            if pendingCount == 8 {
                mix(pending)
                pending = 0
                pendingCount = 0
            }
        }
        while i + 8 <= buffer.count {
            mix(UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
            i += 8
        }
        while i < buffer.count {
            pending |= UInt64(buffer[i]) << (8 * UInt64(pendingCount))
            pendingCount += 1
            i += 1
        }
    }

    mutating func update(_ bytes: some ContiguousBytes) {
        bytes.withUnsafeBytes { update($0) }
    }

    var value: UInt64 {
        var copy = self
        copy.mix(copy.pending ^ 0xFF)
        copy.mix(copy.length)
        return copy.state ^ (copy.state >> 32)
    }

    static func of(_ bytes: some ContiguousBytes) -> UInt64 {
        var sum = CacheChecksum()
        sum.update(bytes)
        return sum.value
    }
}

/// Encoding and decoding of the entry file's prefix and head.
enum CacheFile {
    static let magic: [UInt8] = Array("TERNCAC1".utf8)
    static let prefixSize = 48
    /// Bodies expected to be at least this large start on a 4096-byte boundary, so that a
    /// file system that clones extents (btrfs, XFS) can share them when copied out.
    static let alignedBodyThreshold: Int64 = 64 * 1024

    struct Prefix: Equatable {
        var headLength: Int
        var bodyOffset: Int64
        var bodyLength: Int64
        var bodyChecksum: UInt64
    }

    /// The 48-byte prefix with its head checksum over itself and `head`.
    static func prefix(_ p: Prefix, head: [UInt8]) -> [UInt8] {
        var bytes = magic
        bytes.append(le: UInt32(p.headLength))
        bytes.append(le: UInt32(0))
        bytes.append(le: UInt64(p.bodyOffset))
        bytes.append(le: UInt64(p.bodyLength))
        bytes.append(le: p.bodyChecksum)
        var sum = CacheChecksum()
        sum.update(bytes)
        sum.update(head)
        bytes.append(le: sum.value)
        return bytes
    }

    /// Parses and checks a prefix; `nil` when the magic or sizes are wrong.
    static func parsePrefix(_ bytes: [UInt8]) -> (Prefix, headChecksum: UInt64)? {
        guard bytes.count >= prefixSize, Array(bytes[0..<8]) == magic else { return nil }
        var reader = ByteReader(bytes, at: 8)
        guard let h = reader.u32(), reader.u32() != nil, let o = reader.u64(), let l = reader.u64(),
              let b = reader.u64(), let c = reader.u64() else { return nil }
        let p = Prefix(headLength: Int(h), bodyOffset: Int64(bitPattern: o), bodyLength: Int64(bitPattern: l), bodyChecksum: b)
        guard p.headLength < 16 << 20, p.bodyOffset >= Int64(prefixSize + p.headLength), p.bodyLength >= 0 else { return nil }
        return (p, c)
    }

    /// Whether `head` matches the checksum stored in `prefixBytes`.
    static func headIsIntact(prefixBytes: [UInt8], head: ArraySlice<UInt8>, checksum: UInt64) -> Bool {
        var sum = CacheChecksum()
        sum.update(Array(prefixBytes[0..<40]))
        sum.update(Array(head))
        return sum.value == checksum
    }

    static func encode(_ head: CachedHead) -> [UInt8] {
        var b: [UInt8] = []
        b.append(string: head.key)
        b.append(le: UInt32(head.status))
        b.append(string: head.reason)
        b.append(le: head.requestTime.timeIntervalSinceReferenceDate.bitPattern)
        b.append(le: head.responseTime.timeIntervalSinceReferenceDate.bitPattern)
        if let expiry = head.expiresOverride {
            b.append(1)
            b.append(le: expiry.timeIntervalSinceReferenceDate.bitPattern)
        } else {
            b.append(0)
        }
        b.append(le: UInt32(head.headers.count))
        for field in head.headers {
            b.append(string: field.name.rawName)
            b.append(string: field.value)
        }
        let vary = head.varyValues.sorted { $0.key < $1.key }
        b.append(le: UInt32(vary.count))
        for (name, value) in vary {
            b.append(string: name)
            b.append(string: value)
        }
        return b
    }

    static func decode(_ bytes: ArraySlice<UInt8>) -> CachedHead? {
        var r = ByteReader(Array(bytes), at: 0)
        guard let key = r.string(), let status = r.u32(), let reason = r.string(),
              let requestTime = r.u64(), let responseTime = r.u64(), let hasExpiry = r.u8() else { return nil }
        var expiry: Date?
        if hasExpiry == 1 {
            guard let e = r.u64() else { return nil }
            expiry = Date(timeIntervalSinceReferenceDate: Double(bitPattern: e))
        }
        guard let fieldCount = r.u32() else { return nil }
        var fields = HTTPFields()
        for _ in 0..<fieldCount {
            guard let name = r.string(), let value = r.string(), let fieldName = HTTPField.Name(name) else { return nil }
            fields.append(HTTPField(name: fieldName, value: value))
        }
        guard let varyCount = r.u32() else { return nil }
        var vary: [String: String] = [:]
        for _ in 0..<varyCount {
            guard let name = r.string(), let value = r.string() else { return nil }
            vary[name] = value
        }
        guard r.atEnd else { return nil }
        return CachedHead(
            key: key, status: Int(status), reason: reason, headers: fields, varyValues: vary,
            requestTime: Date(timeIntervalSinceReferenceDate: Double(bitPattern: requestTime)),
            responseTime: Date(timeIntervalSinceReferenceDate: Double(bitPattern: responseTime)),
            expiresOverride: expiry)
    }
}

extension Array where Element == UInt8 {
    mutating func append<T: FixedWidthInteger>(le value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    mutating func append(string: String) {
        let utf8 = Array(string.utf8)
        append(le: UInt32(utf8.count))
        append(contentsOf: utf8)
    }
}

/// Reads little-endian numbers and length-prefixed strings, `nil` past the end.
struct ByteReader {
    private let bytes: [UInt8]
    private var offset: Int

    init(_ bytes: [UInt8], at offset: Int) {
        self.bytes = bytes
        self.offset = offset
    }

    var atEnd: Bool { offset == bytes.count }

    mutating func u8() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    private mutating func integer<T: FixedWidthInteger>(_: T.Type) -> T? {
        let size = MemoryLayout<T>.size
        guard offset + size <= bytes.count else { return nil }
        var value: T = 0
        for i in 0..<size { value |= T(bytes[offset + i]) << (8 * i) }
        offset += size
        return value
    }

    mutating func u32() -> UInt32? { integer(UInt32.self) }
    mutating func u64() -> UInt64? { integer(UInt64.self) }

    mutating func string() -> String? {
        guard let count = u32(), offset + Int(count) <= bytes.count else { return nil }
        defer { offset += Int(count) }
        return String(decoding: bytes[offset..<offset + Int(count)], as: UTF8.self)
    }
}
