// Small helpers with no state: whitespace trimming and percent-decoding (Foundation's
// NSString versions without Foundation), text decoding by charset, HTTP dates.

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

extension StringProtocol {
    /// The text without leading and trailing whitespace: Foundation's
    /// `trimmingWhitespace()`, that is Unicode's space separators (category
    /// Zs) and the tab, without importing Foundation. Line breaks are kept.
    package func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        var start = scalars.startIndex
        var end = scalars.endIndex
        while start < end, isWhitespace(scalars[start]) { scalars.formIndex(after: &start) }
        while end > start {
            let last = scalars.index(before: end)
            guard isWhitespace(scalars[last]) else { break }
            end = last
        }
        if start == scalars.startIndex, end == scalars.endIndex { return String(self) }
        return String(String.UnicodeScalarView(scalars[start..<end]))
    }

    /// The text with each `%XX` replaced by the byte it names: Foundation's
    /// `removingPercentEncoding`. `nil` when a `%` is not followed by two hex digits or the
    /// bytes are not UTF-8.
    func percentDecoded() -> String? {
        let utf8 = self.utf8
        guard utf8.contains(UInt8(ascii: "%")) else { return String(self) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count)
        var i = utf8.startIndex
        while i < utf8.endIndex {
            let byte = utf8[i]
            utf8.formIndex(after: &i)
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard i < utf8.endIndex, let high = hexValue(utf8[i]) else { return nil }
            utf8.formIndex(after: &i)
            guard i < utf8.endIndex, let low = hexValue(utf8[i]) else { return nil }
            utf8.formIndex(after: &i)
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The text as a URL's user or password: every byte but the unreserved characters and the
    /// sub-delimiters percent-encoded (so `:`, `@` and `/` are), as Foundation's
    /// `addingPercentEncoding(withAllowedCharacters: .urlUserAllowed - ":@/")` does.
    func percentEncodedUserinfo() -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for byte in self.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                out.append(byte)
            case _ where "-._~!$&'()*+,;=".utf8.contains(byte):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Foundation's `CharacterSet.whitespaces`, as CoreFoundation defines it: the tab, the space
/// separators (Zs) and U+200B ZERO WIDTH SPACE.
private func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.value {
    case 0x20, 0x09, 0xA0, 0x1680, 0x2000...0x200B, 0x202F, 0x205F, 0x3000: return true
    default: return false
    }
}

/// The value of an ASCII hex digit, or `nil`.
private func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
    default: return nil
    }
}

/// The charset parameter of a `Content-Type` value, lower-cased, or `nil`.
func charset(ofContentType contentType: String) -> String? {
    for parameter in contentType.split(separator: ";").dropFirst() {
        let pair = parameter.split(separator: "=", maxSplits: 1)
        guard pair.count == 2,
            pair[0].trimmingWhitespace().lowercased() == "charset"
        else { continue }
        var value = pair[1].trimmingWhitespace()
        if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
            value = String(value.dropFirst().dropLast())
        }
        return value.lowercased()
    }
    return nil
}

/// A charset Tern decodes, named by its IANA names.
enum TextCharset: Equatable {
    case utf8
    case latin1
    /// Decoded by FoundationEssentials (which handles these without ICU).
    case essentials(String.Encoding)
    /// A single-byte charset: ASCII below 0x80, a table above.
    case singleByte(SingleByteTables.Table)
    /// A multi-byte legacy charset, decoded by the C library's iconv (glibc's gconv modules)
    /// under this name.
    case iconv(String)

    /// The charset for an IANA name (lower-cased), or `nil` when Tern does not know it.
    init?(name: String) {
        switch name {
        case "utf-8", "utf8": self = .utf8
        case "iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "l1", "iso-latin-1", "cp819":
            self = .latin1
        case "us-ascii", "ascii": self = .essentials(.ascii)
        case "utf-16": self = .essentials(.utf16)
        case "utf-16le": self = .essentials(.utf16LittleEndian)
        case "utf-16be": self = .essentials(.utf16BigEndian)
        case "utf-32": self = .essentials(.utf32)
        case "utf-32le": self = .essentials(.utf32LittleEndian)
        case "utf-32be": self = .essentials(.utf32BigEndian)
        case "macintosh", "mac", "x-mac-roman": self = .essentials(.macOSRoman)
        case "iso-8859-2", "latin2": self = .singleByte(.isoLatin2)
        case "windows-1250", "cp1250": self = .singleByte(.windows1250)
        case "windows-1251", "cp1251": self = .singleByte(.windows1251)
        case "windows-1252", "cp1252": self = .singleByte(.windows1252)
        case "windows-1253", "cp1253": self = .singleByte(.windows1253)
        case "windows-1254", "cp1254": self = .singleByte(.windows1254)
        // Foundation's .shiftJIS is Microsoft's variant (CP932).
        case "shift_jis", "shift-jis", "sjis": self = .iconv("CP932")
        case "euc-jp": self = .iconv("EUC-JP")
        case "iso-2022-jp": self = .iconv("ISO-2022-JP")
        default: return nil
        }
    }

    /// The bytes as text, or `nil` when they are not valid in this charset.
    func decode(_ data: Data) -> String? {
        switch self {
        case .utf8:
            return String(validating: data, as: UTF8.self)
        case .latin1:
            return String(String.UnicodeScalarView(data.lazy.map { Unicode.Scalar($0) }))
        case .essentials(let encoding):
            return String(data: data, encoding: encoding)
        case .singleByte(let table):
            let values = table.values
            var scalars = String.UnicodeScalarView()
            for byte in data {
                if byte < 0x80 {
                    scalars.append(Unicode.Scalar(byte))
                } else {
                    let value = values[Int(byte) - 0x80]
                    guard value != 0, let scalar = Unicode.Scalar(value) else { return nil }
                    scalars.append(scalar)
                }
            }
            return String(scalars)
        case .iconv(let name):
            return iconvDecode(data, from: name)
        }
    }
}

/// Decodes a body as text: the charset of `Content-Type`, else UTF-8 for JSON media types,
/// else ISO-8859-1. `nil` when the bytes are not valid in that charset.
func decodeText(_ data: Data, contentType: String?) -> String? {
    var decoding = TextCharset.latin1
    if let contentType {
        if let name = charset(ofContentType: contentType) {
            decoding = TextCharset(name: name) ?? .latin1
        } else {
            let mediaType = contentType.split(separator: ";").first
                .map { $0.trimmingWhitespace().lowercased() } ?? ""
            if mediaType == "application/json" || mediaType.hasSuffix("+json") {
                decoding = .utf8
            }
        }
    }
    return decoding.decode(data)
}

/// Decodes `data` with iconv from the charset `name` to UTF-8; `nil` for invalid or
/// incomplete input, or when the C library cannot convert from that charset.
private func iconvDecode(_ data: Data, from name: String) -> String? {
    let converter = iconv_open("UTF-8", name)
    guard let converter, converter != iconv_t(bitPattern: -1) else { return nil }
    defer { iconv_close(converter) }
    var input = [CChar](repeating: 0, count: data.count)
    input.withUnsafeMutableBytes { _ = data.copyBytes(to: $0) }
    // UTF-8 takes at most 3 bytes per byte of these charsets (a 2-byte sequence is at most
    // one BMP character; ISO-2022-JP escapes produce nothing).
    var output = [CChar](repeating: 0, count: data.count * 3 + 4)
    let produced: Int? = input.withUnsafeMutableBufferPointer { inBuffer in
        output.withUnsafeMutableBufferPointer { outBuffer in
            var inPointer = inBuffer.baseAddress
            var inLeft = inBuffer.count
            var outPointer = outBuffer.baseAddress
            var outLeft = outBuffer.count
            guard iconv(converter, &inPointer, &inLeft, &outPointer, &outLeft) != -1,
                // Flush the shift state (ISO-2022-JP).
                iconv(converter, nil, nil, &outPointer, &outLeft) != -1
            else { return nil }
            return outBuffer.count - outLeft
        }
    }
    guard let produced else { return nil }
    return String(
        validating: output[..<produced].lazy.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// The upper halves (0x80-0xFF) of the single-byte charsets, as Unicode scalar values; 0
/// marks a byte the charset leaves undefined. Taken from full Foundation's (ICU's) decoding
/// of each byte, so that text decodes as it did when Tern linked Foundation.
enum SingleByteTables {
    enum Table: Equatable {
        case isoLatin2, windows1250, windows1251, windows1252, windows1253, windows1254

        var values: [UInt16] {
            switch self {
            case .isoLatin2: SingleByteTables.isoLatin2
            case .windows1250: SingleByteTables.windows1250
            case .windows1251: SingleByteTables.windows1251
            case .windows1252: SingleByteTables.windows1252
            case .windows1253: SingleByteTables.windows1253
            case .windows1254: SingleByteTables.windows1254
            }
        }
    }

    /// ISO-8859-2 (Latin-2).
    static let isoLatin2: [UInt16] = [
        0x0080, 0x0081, 0x0082, 0x0083, 0x0084, 0x0085, 0x0086, 0x0087,
        0x0088, 0x0089, 0x008A, 0x008B, 0x008C, 0x008D, 0x008E, 0x008F,
        0x0090, 0x0091, 0x0092, 0x0093, 0x0094, 0x0095, 0x0096, 0x0097,
        0x0098, 0x0099, 0x009A, 0x009B, 0x009C, 0x009D, 0x009E, 0x009F,
        0x00A0, 0x0104, 0x02D8, 0x0141, 0x00A4, 0x013D, 0x015A, 0x00A7,
        0x00A8, 0x0160, 0x015E, 0x0164, 0x0179, 0x00AD, 0x017D, 0x017B,
        0x00B0, 0x0105, 0x02DB, 0x0142, 0x00B4, 0x013E, 0x015B, 0x02C7,
        0x00B8, 0x0161, 0x015F, 0x0165, 0x017A, 0x02DD, 0x017E, 0x017C,
        0x0154, 0x00C1, 0x00C2, 0x0102, 0x00C4, 0x0139, 0x0106, 0x00C7,
        0x010C, 0x00C9, 0x0118, 0x00CB, 0x011A, 0x00CD, 0x00CE, 0x010E,
        0x0110, 0x0143, 0x0147, 0x00D3, 0x00D4, 0x0150, 0x00D6, 0x00D7,
        0x0158, 0x016E, 0x00DA, 0x0170, 0x00DC, 0x00DD, 0x0162, 0x00DF,
        0x0155, 0x00E1, 0x00E2, 0x0103, 0x00E4, 0x013A, 0x0107, 0x00E7,
        0x010D, 0x00E9, 0x0119, 0x00EB, 0x011B, 0x00ED, 0x00EE, 0x010F,
        0x0111, 0x0144, 0x0148, 0x00F3, 0x00F4, 0x0151, 0x00F6, 0x00F7,
        0x0159, 0x016F, 0x00FA, 0x0171, 0x00FC, 0x00FD, 0x0163, 0x02D9,
    ]

    /// windows-1250 (Central European).
    static let windows1250: [UInt16] = [
        0x20AC, 0x0081, 0x201A, 0x0083, 0x201E, 0x2026, 0x2020, 0x2021,
        0x0088, 0x2030, 0x0160, 0x2039, 0x015A, 0x0164, 0x017D, 0x0179,
        0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
        0x0098, 0x2122, 0x0161, 0x203A, 0x015B, 0x0165, 0x017E, 0x017A,
        0x00A0, 0x02C7, 0x02D8, 0x0141, 0x00A4, 0x0104, 0x00A6, 0x00A7,
        0x00A8, 0x00A9, 0x015E, 0x00AB, 0x00AC, 0x00AD, 0x00AE, 0x017B,
        0x00B0, 0x00B1, 0x02DB, 0x0142, 0x00B4, 0x00B5, 0x00B6, 0x00B7,
        0x00B8, 0x0105, 0x015F, 0x00BB, 0x013D, 0x02DD, 0x013E, 0x017C,
        0x0154, 0x00C1, 0x00C2, 0x0102, 0x00C4, 0x0139, 0x0106, 0x00C7,
        0x010C, 0x00C9, 0x0118, 0x00CB, 0x011A, 0x00CD, 0x00CE, 0x010E,
        0x0110, 0x0143, 0x0147, 0x00D3, 0x00D4, 0x0150, 0x00D6, 0x00D7,
        0x0158, 0x016E, 0x00DA, 0x0170, 0x00DC, 0x00DD, 0x0162, 0x00DF,
        0x0155, 0x00E1, 0x00E2, 0x0103, 0x00E4, 0x013A, 0x0107, 0x00E7,
        0x010D, 0x00E9, 0x0119, 0x00EB, 0x011B, 0x00ED, 0x00EE, 0x010F,
        0x0111, 0x0144, 0x0148, 0x00F3, 0x00F4, 0x0151, 0x00F6, 0x00F7,
        0x0159, 0x016F, 0x00FA, 0x0171, 0x00FC, 0x00FD, 0x0163, 0x02D9,
    ]

    /// windows-1251 (Cyrillic).
    static let windows1251: [UInt16] = [
        0x0402, 0x0403, 0x201A, 0x0453, 0x201E, 0x2026, 0x2020, 0x2021,
        0x20AC, 0x2030, 0x0409, 0x2039, 0x040A, 0x040C, 0x040B, 0x040F,
        0x0452, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
        0x0098, 0x2122, 0x0459, 0x203A, 0x045A, 0x045C, 0x045B, 0x045F,
        0x00A0, 0x040E, 0x045E, 0x0408, 0x00A4, 0x0490, 0x00A6, 0x00A7,
        0x0401, 0x00A9, 0x0404, 0x00AB, 0x00AC, 0x00AD, 0x00AE, 0x0407,
        0x00B0, 0x00B1, 0x0406, 0x0456, 0x0491, 0x00B5, 0x00B6, 0x00B7,
        0x0451, 0x2116, 0x0454, 0x00BB, 0x0458, 0x0405, 0x0455, 0x0457,
        0x0410, 0x0411, 0x0412, 0x0413, 0x0414, 0x0415, 0x0416, 0x0417,
        0x0418, 0x0419, 0x041A, 0x041B, 0x041C, 0x041D, 0x041E, 0x041F,
        0x0420, 0x0421, 0x0422, 0x0423, 0x0424, 0x0425, 0x0426, 0x0427,
        0x0428, 0x0429, 0x042A, 0x042B, 0x042C, 0x042D, 0x042E, 0x042F,
        0x0430, 0x0431, 0x0432, 0x0433, 0x0434, 0x0435, 0x0436, 0x0437,
        0x0438, 0x0439, 0x043A, 0x043B, 0x043C, 0x043D, 0x043E, 0x043F,
        0x0440, 0x0441, 0x0442, 0x0443, 0x0444, 0x0445, 0x0446, 0x0447,
        0x0448, 0x0449, 0x044A, 0x044B, 0x044C, 0x044D, 0x044E, 0x044F,
    ]

    /// windows-1252 (Western European).
    static let windows1252: [UInt16] = [
        0x20AC, 0, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
        0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0, 0x017D, 0,
        0, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
        0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0, 0x017E, 0x0178,
        0x00A0, 0x00A1, 0x00A2, 0x00A3, 0x00A4, 0x00A5, 0x00A6, 0x00A7,
        0x00A8, 0x00A9, 0x00AA, 0x00AB, 0x00AC, 0x00AD, 0x00AE, 0x00AF,
        0x00B0, 0x00B1, 0x00B2, 0x00B3, 0x00B4, 0x00B5, 0x00B6, 0x00B7,
        0x00B8, 0x00B9, 0x00BA, 0x00BB, 0x00BC, 0x00BD, 0x00BE, 0x00BF,
        0x00C0, 0x00C1, 0x00C2, 0x00C3, 0x00C4, 0x00C5, 0x00C6, 0x00C7,
        0x00C8, 0x00C9, 0x00CA, 0x00CB, 0x00CC, 0x00CD, 0x00CE, 0x00CF,
        0x00D0, 0x00D1, 0x00D2, 0x00D3, 0x00D4, 0x00D5, 0x00D6, 0x00D7,
        0x00D8, 0x00D9, 0x00DA, 0x00DB, 0x00DC, 0x00DD, 0x00DE, 0x00DF,
        0x00E0, 0x00E1, 0x00E2, 0x00E3, 0x00E4, 0x00E5, 0x00E6, 0x00E7,
        0x00E8, 0x00E9, 0x00EA, 0x00EB, 0x00EC, 0x00ED, 0x00EE, 0x00EF,
        0x00F0, 0x00F1, 0x00F2, 0x00F3, 0x00F4, 0x00F5, 0x00F6, 0x00F7,
        0x00F8, 0x00F9, 0x00FA, 0x00FB, 0x00FC, 0x00FD, 0x00FE, 0x00FF,
    ]

    /// windows-1253 (Greek).
    static let windows1253: [UInt16] = [
        0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
        0x0088, 0x2030, 0x008A, 0x2039, 0x008C, 0x008D, 0x008E, 0x008F,
        0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
        0x0098, 0x2122, 0x009A, 0x203A, 0x009C, 0x009D, 0x009E, 0x009F,
        0x00A0, 0x0385, 0x0386, 0x00A3, 0x00A4, 0x00A5, 0x00A6, 0x00A7,
        0x00A8, 0x00A9, 0x00AA, 0x00AB, 0x00AC, 0x00AD, 0x00AE, 0x2015,
        0x00B0, 0x00B1, 0x00B2, 0x00B3, 0x0384, 0x00B5, 0x00B6, 0x00B7,
        0x0388, 0x0389, 0x038A, 0x00BB, 0x038C, 0x00BD, 0x038E, 0x038F,
        0x0390, 0x0391, 0x0392, 0x0393, 0x0394, 0x0395, 0x0396, 0x0397,
        0x0398, 0x0399, 0x039A, 0x039B, 0x039C, 0x039D, 0x039E, 0x039F,
        0x03A0, 0x03A1, 0, 0x03A3, 0x03A4, 0x03A5, 0x03A6, 0x03A7,
        0x03A8, 0x03A9, 0x03AA, 0x03AB, 0x03AC, 0x03AD, 0x03AE, 0x03AF,
        0x03B0, 0x03B1, 0x03B2, 0x03B3, 0x03B4, 0x03B5, 0x03B6, 0x03B7,
        0x03B8, 0x03B9, 0x03BA, 0x03BB, 0x03BC, 0x03BD, 0x03BE, 0x03BF,
        0x03C0, 0x03C1, 0x03C2, 0x03C3, 0x03C4, 0x03C5, 0x03C6, 0x03C7,
        0x03C8, 0x03C9, 0x03CA, 0x03CB, 0x03CC, 0x03CD, 0x03CE, 0,
    ]

    /// windows-1254 (Turkish).
    static let windows1254: [UInt16] = [
        0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021,
        0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x008E, 0x008F,
        0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014,
        0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x009E, 0x0178,
        0x00A0, 0x00A1, 0x00A2, 0x00A3, 0x00A4, 0x00A5, 0x00A6, 0x00A7,
        0x00A8, 0x00A9, 0x00AA, 0x00AB, 0x00AC, 0x00AD, 0x00AE, 0x00AF,
        0x00B0, 0x00B1, 0x00B2, 0x00B3, 0x00B4, 0x00B5, 0x00B6, 0x00B7,
        0x00B8, 0x00B9, 0x00BA, 0x00BB, 0x00BC, 0x00BD, 0x00BE, 0x00BF,
        0x00C0, 0x00C1, 0x00C2, 0x00C3, 0x00C4, 0x00C5, 0x00C6, 0x00C7,
        0x00C8, 0x00C9, 0x00CA, 0x00CB, 0x00CC, 0x00CD, 0x00CE, 0x00CF,
        0x011E, 0x00D1, 0x00D2, 0x00D3, 0x00D4, 0x00D5, 0x00D6, 0x00D7,
        0x00D8, 0x00D9, 0x00DA, 0x00DB, 0x00DC, 0x0130, 0x015E, 0x00DF,
        0x00E0, 0x00E1, 0x00E2, 0x00E3, 0x00E4, 0x00E5, 0x00E6, 0x00E7,
        0x00E8, 0x00E9, 0x00EA, 0x00EB, 0x00EC, 0x00ED, 0x00EE, 0x00EF,
        0x011F, 0x00F1, 0x00F2, 0x00F3, 0x00F4, 0x00F5, 0x00F6, 0x00F7,
        0x00F8, 0x00F9, 0x00FA, 0x00FB, 0x00FC, 0x0131, 0x015F, 0x00FF,
    ]
}

/// An IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), the preferred HTTP date format.
func httpDate(_ date: Date) -> String {
    var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
    var parts = tm()
    gmtime_r(&seconds, &parts)
    let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
    return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) "
        + "\(parts.tm_year + 1900) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
}
