// Cache-Control (RFC 9111 5.2) and HTTP-date (RFC 9110 5.6.7) parsing for the cache: pure
// functions over header values, no I/O. Parsing is strict where RFC 9111 asks a cache to be
// careful (a bad max-age makes a response stale, never fresher) and lenient where it costs
// nothing (case, spaces around commas, quoted delta-seconds).

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes

/// The directives of one or more `Cache-Control` field lines, request or response.
///
/// Names are case-insensitive; arguments may be tokens or quoted strings (a directive name
/// inside a quoted string is not a directive). A directive that appears more than once with
/// different delta-seconds values is *conflicting*: RFC 9111 4.2.1 lets a cache use the first
/// or treat the response as stale; this parser uses the first, as Chrome and Safari do (the
/// cache-tests corpus checks both ways), unless it is invalid.
struct CacheControl: Sendable, Equatable {
    /// Every directive in order: lower-cased name and the argument (unquoted) if any.
    var directives: [(name: String, argument: String?)] = []

    init() {}

    /// Parses every `Cache-Control` line of `fields`.
    init(_ fields: HTTPFields) {
        self.init(fields[values: .cacheControl])
    }

    /// Parses the given field values (each one line, or the lines already joined by commas).
    init(_ values: [String]) {
        for value in values { Self.parse(Array(value.utf8), into: &directives) }
    }

    static func == (a: CacheControl, b: CacheControl) -> Bool {
        a.directives.count == b.directives.count
            && zip(a.directives, b.directives).allSatisfy { $0.name == $1.name && $0.argument == $1.argument }
    }

    /// Whether the directive is present (with or without an argument).
    func has(_ name: String) -> Bool { directives.contains { $0.name == name } }

    /// The argument of the first occurrence of the directive.
    func argument(_ name: String) -> String?? {
        guard let found = directives.first(where: { $0.name == name }) else { return nil }
        return .some(found.argument)
    }

    /// The delta-seconds value of a directive's first occurrence: `nil` when absent, `0` when
    /// invalid, capped at 2^31 as RFC 9111 1.2.2 allows.
    func seconds(_ name: String) -> Int? {
        guard let first = directives.first(where: { $0.name == name }) else { return nil }
        return first.argument.flatMap(Self.deltaSeconds) ?? 0
    }

    /// `max-stale`: `nil` when absent, `.max` when present without a value (any staleness).
    var maxStale: Int? {
        guard let found = directives.first(where: { $0.name == "max-stale" }) else { return nil }
        guard let argument = found.argument else { return .max }
        return Self.deltaSeconds(argument) ?? 0
    }

    var maxAge: Int? { seconds("max-age") }
    var sharedMaxAge: Int? { seconds("s-maxage") }
    var minFresh: Int? { seconds("min-fresh") }
    var staleWhileRevalidate: Int? { seconds("stale-while-revalidate") }
    var staleIfError: Int? { seconds("stale-if-error") }
    var noStore: Bool { has("no-store") }
    /// Unqualified `no-cache` only: the qualified form (`no-cache="Set-Cookie"`) forbids reusing
    /// the named fields, which are not stored (CacheRules.storedFields), not the response.
    var noCache: Bool { directives.contains { $0.name == "no-cache" && $0.argument == nil } }
    var mustRevalidate: Bool { has("must-revalidate") }
    var proxyRevalidate: Bool { has("proxy-revalidate") }
    var isPrivate: Bool { has("private") }
    var isPublic: Bool { has("public") }
    var onlyIfCached: Bool { has("only-if-cached") }
    var mustUnderstand: Bool { has("must-understand") }

    /// The field names listed by a qualified directive such as `no-cache="Set-Cookie"`.
    func fieldNames(_ name: String) -> [String] {
        directives.filter { $0.name == name }.flatMap { directive -> [String] in
            guard let argument = directive.argument else { return [] }
            return argument.split(separator: ",").map {
                Cookie.trimWhitespace($0).lowercased()
            }.filter { !$0.isEmpty }
        }
    }

    /// delta-seconds: digits only (a quoted form was already unquoted), big values capped.
    static func deltaSeconds(_ text: String) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        var value = 0
        for digit in text.utf8 {
            value = value * 10 + Int(digit - 0x30)
            if value >= 2_147_483_648 { return 2_147_483_648 }
        }
        return value
    }

    /// Splits one field value into directives, honouring quoted strings.
    private static func parse(_ bytes: [UInt8], into directives: inout [(name: String, argument: String?)]) {
        let comma = UInt8(ascii: ","), equals = UInt8(ascii: "="), quote = UInt8(ascii: "\"")
        let backslash = UInt8(ascii: "\\")
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 }
        var i = 0
        while i < bytes.count {
            while i < bytes.count, isSpace(bytes[i]) || bytes[i] == comma { i += 1 }
            let nameStart = i
            while i < bytes.count, bytes[i] != comma, bytes[i] != equals, !isSpace(bytes[i]) { i += 1 }
            let name = String(decoding: bytes[nameStart..<i], as: UTF8.self).lowercased()
            var argument: String?
            var valid = !name.isEmpty
            if i < bytes.count, bytes[i] == equals {
                i += 1
                if i < bytes.count, bytes[i] == quote {
                    i += 1
                    var value: [UInt8] = []
                    var closed = false
                    while i < bytes.count {
                        if bytes[i] == backslash, i + 1 < bytes.count {
                            value.append(bytes[i + 1])
                            i += 2
                        } else if bytes[i] == quote {
                            closed = true
                            i += 1
                            break
                        } else {
                            value.append(bytes[i])
                            i += 1
                        }
                    }
                    if !closed { valid = false }
                    argument = String(decoding: value, as: UTF8.self)
                } else {
                    let start = i
                    while i < bytes.count, bytes[i] != comma, !isSpace(bytes[i]) { i += 1 }
                    argument = String(decoding: bytes[start..<i], as: UTF8.self)
                    // A space before or after "=" makes "max-age = 5": not a valid directive.
                    if start == i { valid = false }
                }
            } else if i < bytes.count, isSpace(bytes[i]) {
                // "max-age =5": the name is followed by spaces then "=": invalid.
                var j = i
                while j < bytes.count, isSpace(bytes[j]) { j += 1 }
                if j < bytes.count, bytes[j] == equals { valid = false }
            }
            // Skip to the next comma (garbage after a directive invalidates it).
            while i < bytes.count, isSpace(bytes[i]) { i += 1 }
            if i < bytes.count, bytes[i] != comma {
                valid = false
                var inQuote = false
                while i < bytes.count, inQuote || bytes[i] != comma {
                    if bytes[i] == quote { inQuote.toggle() }
                    i += 1
                }
            }
            if valid {
                directives.append((name, argument))
            } else if !name.isEmpty {
                // Keep an invalid delta-seconds directive visible as invalid (so max-age with a
                // broken value makes the response stale rather than falling back to Expires).
                directives.append((name, argument ?? ""))
            }
        }
    }
}

/// HTTP-date parsing and formatting (RFC 9110 5.6.7): IMF-fixdate, the obsolete RFC 850 form
/// and asctime. Anything else is `nil`, which callers treat as "in the past".
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun",
                                 "jul", "aug", "sep", "oct", "nov", "dec"]

    static func parse(_ text: String) -> Date? {
        let parts = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        func month(_ name: String) -> Int? { months.firstIndex(of: name.lowercased()).map { $0 + 1 } }
        func number(_ s: String, digits: ClosedRange<Int>) -> Int? {
            guard digits.contains(s.count), s.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
            return Int(s)
        }
        func clock(_ s: String) -> (Int, Int, Int)? {
            let p = s.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard p.count == 3, let h = number(p[0], digits: 2...2), let m = number(p[1], digits: 2...2),
                  let sec = number(p[2], digits: 2...2), h < 24, m < 60, sec < 61 else { return nil }
            return (h, m, sec)
        }
        func weekday(_ s: String, long: Bool) -> Bool {
            let short = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
            let full = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
            return (long ? full : short).contains(s.lowercased())
        }
        // IMF-fixdate and RFC 850 separate their parts by exactly one space (an `Expires` with
        // two is invalid, so expired); asctime pads a one-digit day with a second one.
        let singleSpaced = text == parts.joined(separator: " ")
        var y = 0, mo = 0, d = 0, time = (0, 0, 0)
        if singleSpaced, parts.count == 6, parts[0].hasSuffix(","), weekday(String(parts[0].dropLast()), long: false),
           parts[5].uppercased() == "GMT" {
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            guard let day = number(parts[1], digits: 2...2), let m = month(parts[2]),
                  let year = number(parts[3], digits: 4...4), let t = clock(parts[4]) else { return nil }
            (y, mo, d, time) = (year, m, day, t)
        } else if singleSpaced, parts.count == 4, parts[0].hasSuffix(","), weekday(String(parts[0].dropLast()), long: true),
                  parts[3].uppercased() == "GMT" {
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
            let p = parts[1].split(separator: "-", omittingEmptySubsequences: false).map(String.init)
            guard p.count == 3, let day = number(p[0], digits: 2...2), let m = month(p[1]),
                  let yy = number(p[2], digits: 2...2), let t = clock(parts[2]) else { return nil }
            // RFC 9110 5.6.7: a two-digit year more than 50 years ahead is in the past century.
            let thisYear = 1970 + Int(Date().timeIntervalSince1970 / 31_556_952)
            let year = (thisYear / 100) * 100 + yy
            (y, mo, d, time) = (year > thisYear + 50 ? year - 100 : year, m, day, t)
        } else if parts.count == 5, weekday(parts[0], long: false) {
            // asctime: Sun Nov  6 08:49:37 1994
            guard let m = month(parts[1]), let day = number(parts[2], digits: 1...2),
                  let t = clock(parts[3]), let year = number(parts[4], digits: 4...4) else { return nil }
            (y, mo, d, time) = (year, m, day, t)
        } else {
            return nil
        }
        guard (1...31).contains(d) else { return nil }
        let days = daysFromCivil(year: y, month: mo, day: d)
        let seconds = days * 86400 + time.0 * 3600 + time.1 * 60 + time.2
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (the era arithmetic: 400-year
    /// cycles of 146097 days, years starting in March so the leap day comes last).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let monthFromMarch = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * monthFromMarch + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146097 + dayOfEra - 719468
    }

    /// An IMF-fixdate.
    static func format(_ date: Date) -> String { httpDate(date) }
}
