// Small helpers with no state: text decoding by charset, HTTP dates.

import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The charset parameter of a `Content-Type` value, lower-cased, or `nil`.
func charset(ofContentType contentType: String) -> String? {
    for parameter in contentType.split(separator: ";").dropFirst() {
        let pair = parameter.split(separator: "=", maxSplits: 1)
        guard pair.count == 2,
            pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "charset"
        else { continue }
        var value = pair[1].trimmingCharacters(in: .whitespaces)
        if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
            value = String(value.dropFirst().dropLast())
        }
        return value.lowercased()
    }
    return nil
}

/// The Foundation encoding for an IANA charset name, or `nil` when unknown.
func stringEncoding(forCharset name: String) -> String.Encoding? {
    switch name {
    case "utf-8", "utf8": return .utf8
    case "iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "l1", "iso-latin-1", "cp819":
        return .isoLatin1
    case "us-ascii", "ascii": return .ascii
    case "utf-16": return .utf16
    case "utf-16le": return .utf16LittleEndian
    case "utf-16be": return .utf16BigEndian
    case "utf-32": return .utf32
    case "utf-32le": return .utf32LittleEndian
    case "utf-32be": return .utf32BigEndian
    case "iso-8859-2", "latin2": return .isoLatin2
    case "windows-1250", "cp1250": return .windowsCP1250
    case "windows-1251", "cp1251": return .windowsCP1251
    case "windows-1252", "cp1252": return .windowsCP1252
    case "windows-1253", "cp1253": return .windowsCP1253
    case "windows-1254", "cp1254": return .windowsCP1254
    case "shift_jis", "shift-jis", "sjis": return .shiftJIS
    case "euc-jp": return .japaneseEUC
    case "iso-2022-jp": return .iso2022JP
    case "macintosh", "mac", "x-mac-roman": return .macOSRoman
    default: return nil
    }
}

/// Decodes a body as text: the charset of `Content-Type`, else UTF-8 for JSON media types,
/// else ISO-8859-1. `nil` when the bytes are not valid in that charset.
func decodeText(_ data: Data, contentType: String?) -> String? {
    var encoding = String.Encoding.isoLatin1
    if let contentType {
        if let name = charset(ofContentType: contentType) {
            encoding = stringEncoding(forCharset: name) ?? .isoLatin1
        } else {
            let mediaType = contentType.split(separator: ";").first
                .map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
            if mediaType == "application/json" || mediaType.hasSuffix("+json") {
                encoding = .utf8
            }
        }
    }
    if encoding == .isoLatin1 {
        // Every byte is a Latin-1 character; decode directly rather than trust Foundation's
        // platform tables.
        return String(data.lazy.map { Character(Unicode.Scalar($0)) })
    }
    if encoding == .utf8 {
        return String(validating: data, as: UTF8.self)
    }
    return String(data: data, encoding: encoding)
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
