// CookieJar: an RFC 6265 cookie store. Parses Set-Cookie (section 5.2), stores with the
// replacement and eviction rules of section 5.3 (plus RFC 6265bis's Secure-origin and cookie
// prefix rules, as curl and browsers apply them), and builds Cookie headers (section 5.4).
// Persistent in a JSON format of its own and in the Netscape cookie-file format curl reads
// with `-b FILE` and writes with `-c FILE`.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// One HTTP cookie, as stored in a ``CookieJar``.
///
/// A cookie is identified by its ``name``, ``domain`` and ``path``: storing a cookie with the
/// same three replaces the old one (keeping its ``creationDate``).
///
/// ```swift
/// let url = URL(string: "https://www.example.com/account/login")!
/// let cookie = Cookie(setCookieHeader: "sid=31d4; Path=/; Secure; HttpOnly", from: url)
/// // cookie?.domain == "www.example.com", cookie?.isHostOnly == true
/// ```
public struct Cookie: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The `SameSite` attribute. Tern sends cookies from an HTTP client, where there is no
    /// "site" making a request, so the attribute is kept (and saved) but does not filter.
    public struct SameSitePolicy: RawRepresentable, Sendable, Hashable, Codable {
        /// The lower-cased attribute value: `"strict"`, `"lax"` or `"none"`.
        public let rawValue: String

        /// Wraps an attribute value; it is lower-cased.
        public init(rawValue: String) {
            self.rawValue = rawValue.lowercased()
        }

        /// `SameSite=Strict`.
        public static let strict = SameSitePolicy(rawValue: "strict")
        /// `SameSite=Lax`.
        public static let lax = SameSitePolicy(rawValue: "lax")
        /// `SameSite=None`.
        public static let none = SameSitePolicy(rawValue: "none")
    }

    /// The cookie's name (not empty).
    public var name: String
    /// The cookie's value, exactly as sent (surrounding double quotes included).
    public var value: String
    /// The host (``isHostOnly``) or domain the cookie belongs to: lower-cased, no leading dot.
    public var domain: String
    /// The path the cookie is sent for, and below.
    public var path: String
    /// `true` when the cookie goes to ``domain`` exactly; `false` when it also goes to its
    /// subdomains (it came with a `Domain` attribute).
    public var isHostOnly: Bool
    /// When the cookie expires; `nil` for a session cookie, which lives as long as the jar
    /// (it is not saved by ``CookieJar/save(to:includingSessionCookies:)`` by default).
    public var expiresDate: Date?
    /// `true` when the cookie goes only over secure connections (https; see
    /// ``CookieJar/treatsLoopbackAsSecure``).
    public var isSecure: Bool
    /// `true` when the cookie is meant for HTTP only (no scripts). Kept and saved; an HTTP
    /// client sends such cookies like any other.
    public var isHTTPOnly: Bool
    /// The `SameSite` attribute, if the server sent a known value.
    public var sameSitePolicy: SameSitePolicy?
    /// When the cookie was first stored (a replacement keeps the original date).
    public var creationDate: Date

    /// `true` for a session cookie (no ``expiresDate``).
    public var isSessionOnly: Bool { expiresDate == nil }

    /// Creates a cookie from its parts.
    ///
    /// - Parameters:
    ///   - name: The name; must not be empty for the cookie to be stored.
    ///   - value: The value.
    ///   - domain: The host or domain; lower-cased and stripped of a leading dot.
    ///   - path: The path; `"/"` when empty.
    ///   - isHostOnly: Whether the cookie goes to `domain` only (the default) or to its
    ///     subdomains too.
    ///   - expiresDate: The expiry, or `nil` for a session cookie.
    ///   - isSecure: Whether the cookie goes over secure connections only.
    ///   - isHTTPOnly: The `HttpOnly` flag.
    ///   - sameSitePolicy: The `SameSite` attribute.
    ///   - creationDate: When the cookie was created (orders cookies of equal path length).
    public init(
        name: String, value: String, domain: String, path: String = "/", isHostOnly: Bool = true,
        expiresDate: Date? = nil, isSecure: Bool = false, isHTTPOnly: Bool = false,
        sameSitePolicy: SameSitePolicy? = nil, creationDate: Date = Date()
    ) {
        self.name = name
        self.value = value
        var domain = HostName.canonical(domain)
        while domain.hasPrefix(".") { domain.removeFirst() }
        self.domain = domain
        self.path = path.isEmpty ? "/" : path
        self.isHostOnly = isHostOnly
        self.expiresDate = expiresDate
        self.isSecure = isSecure
        self.isHTTPOnly = isHTTPOnly
        self.sameSitePolicy = sameSitePolicy
        self.creationDate = creationDate
    }

    /// Parses one `Set-Cookie` header value received from `url`, applying RFC 6265's rules for
    /// accepting it; `nil` when a browser would ignore the cookie.
    ///
    /// Refused: no `=` or an empty name; control characters; name and value longer than
    /// 4096 bytes together; a `Domain` the host does not domain-match; a `Domain` that is a
    /// bare top-level name such as `com` (see ``CookieJar`` for this public-suffix
    /// approximation); `Secure` from an insecure origin (https is secure, and so are
    /// `localhost`, `127.0.0.1` and `::1`, as in curl); `__Secure-` and `__Host-` names
    /// without what their prefix requires.
    ///
    /// A cookie whose expiry is already past parses; storing it deletes its namesake.
    ///
    /// - Parameters:
    ///   - setCookieHeader: The field value, such as `"id=a3fWa; Max-Age=2592000; Path=/"`.
    ///   - url: The URL of the response that carried it.
    public init?(setCookieHeader: String, from url: URL) {
        guard
            let cookie = Cookie.parse(
                setCookieHeader, from: url, now: Date(),
                treatsLoopbackAsSecure: true)
        else { return nil }
        self = cookie
    }

    /// Whether this cookie would be sent to `url`: domain and path match, and a secure cookie
    /// only over https (or to a loopback host, as curl does). Expiry is not checked.
    public func matches(_ url: URL) -> Bool {
        guard let host = HostName.canonical(of: url) else { return false }
        let domainOK =
            isHostOnly ? host == domain : Cookie.domainMatches(host: host, domain: domain)
        return domainOK
            && Cookie.pathMatches(requestPath: Cookie.requestPath(of: url), cookiePath: path)
            && (!isSecure || CookieJar.isSecureContext(url, treatsLoopbackAsSecure: true))
    }

    /// Whether the cookie has expired at `date`; session cookies never do.
    public func isExpired(at date: Date = Date()) -> Bool {
        guard let expiresDate else { return false }
        return expiresDate <= date
    }

    /// `name=value`, the form it takes in a `Cookie` header.
    public var description: String { "\(name)=\(value)" }

    // MARK: Codable: the entries of the JSON jar file (see CookieJar.save(to:)).

    private enum CodingKeys: String, CodingKey {
        case name, value, domain, path
        case isHostOnly = "hostOnly"
        case expiresDate = "expires"
        case isSecure = "secure"
        case isHTTPOnly = "httpOnly"
        case sameSitePolicy = "sameSite"
        case creationDate = "created"
    }

    /// Decodes a cookie from the jar file format: dates are seconds since 1970 (whatever the
    /// decoder's date strategy), missing flags are `false`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            name: try c.decode(String.self, forKey: .name),
            value: try c.decode(String.self, forKey: .value),
            domain: try c.decode(String.self, forKey: .domain),
            path: try c.decodeIfPresent(String.self, forKey: .path) ?? "/",
            isHostOnly: try c.decodeIfPresent(Bool.self, forKey: .isHostOnly) ?? true,
            expiresDate: try c.decodeIfPresent(Double.self, forKey: .expiresDate)
                .map { Date(timeIntervalSince1970: $0) },
            isSecure: try c.decodeIfPresent(Bool.self, forKey: .isSecure) ?? false,
            isHTTPOnly: try c.decodeIfPresent(Bool.self, forKey: .isHTTPOnly) ?? false,
            sameSitePolicy: try c.decodeIfPresent(String.self, forKey: .sameSitePolicy)
                .map { SameSitePolicy(rawValue: $0) },
            creationDate: Date(
                timeIntervalSince1970:
                    try c.decodeIfPresent(Double.self, forKey: .creationDate) ?? 0))
    }

    /// Encodes the cookie in the jar file format (dates as seconds since 1970).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encode(value, forKey: .value)
        try c.encode(domain, forKey: .domain)
        try c.encode(path, forKey: .path)
        try c.encode(isHostOnly, forKey: .isHostOnly)
        try c.encodeIfPresent(expiresDate?.timeIntervalSince1970, forKey: .expiresDate)
        try c.encode(isSecure, forKey: .isSecure)
        try c.encode(isHTTPOnly, forKey: .isHTTPOnly)
        try c.encodeIfPresent(sameSitePolicy?.rawValue, forKey: .sameSitePolicy)
        try c.encode(creationDate.timeIntervalSince1970, forKey: .creationDate)
    }
}

// MARK: - Parsing and matching (RFC 6265 section 5)

extension Cookie {
    /// The largest name plus value accepted, in bytes (RFC 6265 6.1's minimum, and what
    /// browsers enforce).
    static let maximumSize = 4096
    /// Attribute values longer than this are ignored (RFC 6265bis 5.6).
    static let maximumAttributeSize = 1024

    /// RFC 6265 5.2 and 5.3 steps 1–10 (with RFC 6265bis's Secure and prefix rules): the cookie
    /// a `Set-Cookie` value creates, or `nil` when it must be ignored.
    static func parse(_ header: String, from url: URL, now: Date, treatsLoopbackAsSecure: Bool)
        -> Cookie?
    {
        guard let host = HostName.canonical(of: url) else { return nil }
        let secureOrigin = CookieJar.isSecureContext(
            url, treatsLoopbackAsSecure: treatsLoopbackAsSecure)

        // 5.2 steps 1–5: the name-value pair, up to the first ';'.
        let (pair, attributes) = split(header, at: ";")
        guard let (rawName, rawValue) = splitOptional(pair, at: "=") else { return nil }
        let name = trimWhitespace(rawName)
        let value = trimWhitespace(rawValue)
        guard !name.isEmpty, !containsControl(name), !containsControl(value),
            name.utf8.count + value.utf8.count <= maximumSize
        else { return nil }

        // 5.2 step 6: the attributes; for each, the last occurrence wins.
        var expires: Date?
        var maxAge: Date?
        var domainAttribute: String?
        var pathAttribute: String?
        var secure = false
        var httpOnly = false
        var sameSite: SameSitePolicy?
        var rest = attributes
        while let remaining = rest {
            let (av, next) = split(remaining, at: ";")
            rest = next
            let (rawKey, rawAttributeValue) = splitOptional(av, at: "=") ?? (av, "")
            let key = trimWhitespace(rawKey).lowercased()
            let attributeValue = trimWhitespace(rawAttributeValue)
            if attributeValue.utf8.count > maximumAttributeSize { continue }
            switch key {
            case "expires":
                if let date = parseDate(attributeValue) { expires = date }
            case "max-age":
                if let seconds = parseMaxAge(attributeValue) {
                    // 5.2.2: zero or negative means "already expired".
                    maxAge =
                        seconds <= 0
                        ? Date(timeIntervalSince1970: 0)
                        : now.addingTimeInterval(min(Double(seconds), 400 * 365 * 86400))
                }
            case "domain":
                // 5.2.3: an empty value is ignored; a leading dot is dropped.
                if !attributeValue.isEmpty {
                    var domain = attributeValue
                    if domain.hasPrefix(".") { domain.removeFirst() }
                    domainAttribute = HostName.canonical(domain)
                }
            case "path":
                pathAttribute = attributeValue.hasPrefix("/") ? attributeValue : nil
            case "secure":
                secure = true
            case "httponly":
                httpOnly = true
            case "samesite":
                let policy = SameSitePolicy(rawValue: attributeValue)
                if [.strict, .lax, .none].contains(policy) { sameSite = policy }
            default:
                break
            }
        }

        // 5.3 step 3: Max-Age takes precedence over Expires, whatever their order.
        let expiresDate = maxAge ?? expires

        // 5.3 steps 4–6: Domain. A bare name (no dot) stands in for a public suffix, which
        // is allowed only when it is the host itself (then the cookie is host-only). An IP
        // address matches only itself, so a Domain on an IP host makes a host-only cookie.
        var domain = host
        var hostOnly = true
        if let attribute = domainAttribute, !attribute.isEmpty {
            if attribute == host {
                hostOnly = HostName.isIPAddress(host) || !attribute.contains(".")
            } else if !attribute.contains(".") || HostName.isIPAddress(attribute)
                || !domainMatches(host: host, domain: attribute)
            {
                return nil
            } else {
                domain = attribute
                hostOnly = false
            }
        }

        // 5.3 step 7: Path, or the default path of the request URL (5.1.4).
        let path = pathAttribute ?? defaultPath(of: url)

        // RFC 6265bis 5.6: only a secure origin may set a Secure cookie, and the __Secure- and
        // __Host- prefixes promise Secure (and, for __Host-, host-only with Path=/).
        if secure && !secureOrigin { return nil }
        if name.hasPrefix("__Secure-") && !secure { return nil }
        if name.hasPrefix("__Host-") && !(secure && hostOnly && pathAttribute == "/") { return nil }

        return Cookie(
            name: name, value: value, domain: domain, path: path, isHostOnly: hostOnly,
            expiresDate: expiresDate, isSecure: secure, isHTTPOnly: httpOnly,
            sameSitePolicy: sameSite, creationDate: now)
    }

    /// RFC 6265 5.1.3: `host` is `domain`, or ends with `"." + domain` and is a name (an IP
    /// address matches only itself).
    static func domainMatches(host: String, domain: String) -> Bool {
        if host == domain { return true }
        // Byte comparisons: hosts and paths compare as sent, not as Unicode text.
        let h = host.utf8
        let d = domain.utf8
        guard !d.isEmpty, h.count > d.count, h.reversed().starts(with: d.reversed()),
            !HostName.isIPAddress(host)
        else { return false }
        return h[h.index(h.endIndex, offsetBy: -(d.count + 1))] == UInt8(ascii: ".")
    }

    /// RFC 6265 5.1.4: the cookie path is the request path, or a prefix of it that ends with
    /// `/` or is followed in the request path by `/`.
    static func pathMatches(requestPath: String, cookiePath: String) -> Bool {
        let r = requestPath.utf8
        let c = cookiePath.utf8
        guard r.starts(with: c) else { return false }
        if r.count == c.count || c.last == UInt8(ascii: "/") { return true }
        return r[r.index(r.startIndex, offsetBy: c.count)] == UInt8(ascii: "/")
    }

    /// The path of a URL as cookies see it: percent-encoded as sent, `/` when empty.
    static func requestPath(of url: URL) -> String {
        let path = url.path(percentEncoded: true)
        return path.isEmpty ? "/" : path
    }

    /// RFC 6265 5.1.4's default-path: the request path up to, not including, its last `/`;
    /// `/` when that leaves nothing.
    static func defaultPath(of url: URL) -> String {
        let path = requestPath(of: url)
        guard path.hasPrefix("/"), let slash = path.lastIndex(of: "/"), slash != path.startIndex
        else { return "/" }
        return String(path[..<slash])
    }

    /// RFC 6265 5.1.1, the lenient date parser browsers use for `Expires`: tokens in any order,
    /// a time `h:m:s`, a day of month, a month name (first three letters), a year (two-digit
    /// years 70–99 are 19xx, 00–69 are 20xx). `nil` when a part is missing or out of range.
    static func parseDate(_ text: String) -> Date? {
        func isDelimiter(_ b: UInt8) -> Bool {
            b == 0x09 || (0x20...0x2F).contains(b) || (0x3B...0x40).contains(b)
                || (0x5B...0x60).contains(b) || (0x7B...0x7E).contains(b)
        }
        func isDigit(_ b: UInt8) -> Bool { (0x30...0x39).contains(b) }
        /// 1...maxDigits digits at `i`: the number and the index after them.
        func digits(_ t: [UInt8], _ i: Int, min minDigits: Int, max maxDigits: Int) -> (Int, Int)? {
            var j = i
            var n = 0
            while j < t.count, j - i < maxDigits, isDigit(t[j]) {
                n = n * 10 + Int(t[j] - 0x30)
                j += 1
            }
            guard j - i >= minDigits else { return nil }
            // The production requires a non-digit (or the end) after the digits.
            if j < t.count, isDigit(t[j]) { return nil }
            return (n, j)
        }
        func time(_ t: [UInt8]) -> (Int, Int, Int)? {
            var parts: [Int] = []
            var i = 0
            for k in 0..<3 {
                var j = i
                var n = 0
                while j < t.count, j - i < 2, isDigit(t[j]) {
                    n = n * 10 + Int(t[j] - 0x30)
                    j += 1
                }
                guard j > i else { return nil }
                parts.append(n)
                if k < 2 {
                    guard j < t.count, t[j] == UInt8(ascii: ":") else { return nil }
                    i = j + 1
                } else if j < t.count, isDigit(t[j]) {
                    return nil
                }
            }
            return (parts[0], parts[1], parts[2])
        }
        let months = [
            "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
        ]

        var hms: (Int, Int, Int)?
        var day: Int?
        var month: Int?
        var year: Int?
        var token: [UInt8] = []
        func consume(_ t: [UInt8]) {
            guard !t.isEmpty else { return }
            if hms == nil, let found = time(t) {
                hms = found
            } else if day == nil, let (n, _) = digits(t, 0, min: 1, max: 2) {
                day = n
            } else if month == nil, t.count >= 3,
                let index = months.firstIndex(
                    of: String(decoding: t.prefix(3), as: UTF8.self).lowercased())
            {
                month = index + 1
            } else if year == nil, let (n, _) = digits(t, 0, min: 2, max: 4) {
                year = n
            }
        }
        for b in text.utf8 {
            if isDelimiter(b) {
                consume(token)
                token.removeAll(keepingCapacity: true)
            } else {
                token.append(b)
            }
        }
        consume(token)

        guard var year, let month, let day, let (hour, minute, second) = hms else { return nil }
        if (70...99).contains(year) {
            year += 1900
        } else if (0...69).contains(year) {
            year += 2000
        }
        guard (1...31).contains(day), year >= 1601, hour <= 23, minute <= 59, second <= 59,
            day <= daysInMonth(month, year: year)
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        return Date(
            timeIntervalSince1970: Double(days * 86400 + hour * 3600 + minute * 60 + second))
    }

    /// Max-Age (5.2.2): an optional `-` then digits; `nil` otherwise. Huge values saturate.
    static func parseMaxAge(_ text: String) -> Int64? {
        var utf8 = Substring(text).utf8[...]
        let negative = utf8.first == UInt8(ascii: "-")
        if negative { utf8 = utf8.dropFirst() }
        guard !utf8.isEmpty, utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        var n: Int64 = 0
        for b in utf8 {
            let (m, o1) = n.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(Int64(b - 0x30))
            if o1 || o2 {
                n = Int64.max
                break
            }
            n = s
        }
        return negative ? -n : n
    }

    private static func daysInMonth(_ month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    /// `text` split at the first `separator`: the part before, and the rest (or `nil`).
    private static func split(_ text: some StringProtocol, at separator: Character)
        -> (Substring, Substring?)
    {
        let text = Substring(text)
        guard let index = text.firstIndex(of: separator) else { return (text, nil) }
        return (text[..<index], text[text.index(after: index)...])
    }

    /// `text` split at the first `separator`, or `nil` when there is none.
    private static func splitOptional(_ text: Substring, at separator: Character)
        -> (Substring, Substring)?
    {
        let (before, after) = split(text, at: separator)
        guard let after else { return nil }
        return (before, after)
    }

    /// Strips spaces and horizontal tabs (RFC 6265's WSP) from both ends.
    static func trimWhitespace(_ text: some StringProtocol) -> String {
        let utf8 = Array(text.utf8)
        var start = 0
        var end = utf8.count
        while start < end, utf8[start] == 0x20 || utf8[start] == 0x09 { start += 1 }
        while end > start, utf8[end - 1] == 0x20 || utf8[end - 1] == 0x09 { end -= 1 }
        return String(decoding: utf8[start..<end], as: UTF8.self)
    }

    /// RFC 6265bis: a name or value with a control character other than HTAB is refused.
    private static func containsControl(_ text: String) -> Bool {
        text.utf8.contains { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }
    }
}

// MARK: - The jar

/// An RFC 6265 cookie store: receives `Set-Cookie` fields and says which cookies go to a URL.
///
/// ```swift
/// let jar = CookieJar()
/// jar.store(setCookieHeaders: ["sid=31d4; Path=/; HttpOnly"], from: url)
/// let header = jar.cookieHeader(for: url)   // "sid=31d4"
/// try jar.save(to: URL(fileURLWithPath: "/var/lib/app/cookies.json"))
/// ```
///
/// The jar follows RFC 6265 sections 5.2–5.4:
///
/// - A cookie without a `Domain` attribute is *host-only*: it goes back to the very host that
///   set it. With `Domain`, it goes to that domain and its subdomains, provided the setting
///   host domain-matches it (a leading dot is ignored).
/// - Without a `Path`, the path is the request path's directory (the *default-path*).
/// - `Max-Age` takes precedence over `Expires`; a past expiry deletes the cookie.
/// - A cookie with the same name, domain and path replaces the earlier one and keeps its
///   creation date.
/// - The `Cookie` header lists cookies with longer paths first, then earlier-created first.
/// - Like curl and browsers (RFC 6265bis), `Secure` cookies are accepted only from secure
///   origins, a plain-HTTP response cannot overwrite a `Secure` cookie, and the `__Secure-`
///   and `__Host-` name prefixes are enforced.
///
/// **Public suffixes.** No public suffix list is available offline, so the jar approximates
/// the rule: a `Domain` without a dot (a bare top-level name such as `com`, or `localhost`) is
/// refused unless it is the setting host itself, and an IP-address `Domain` must be the host
/// exactly. Multi-label public suffixes (`co.uk`, `github.io`) are *not* recognised: a host
/// under them may set a cookie for the whole suffix. Use the jar with servers you trust to
/// this extent.
///
/// **Limits.** At most 180 cookies per domain and 3000 in all; beyond them, expired cookies go
/// first, then the least recently used. Name and value together are limited to 4096 bytes.
///
/// All methods may be called from any thread. The jar holds its state behind a lock and never
/// calls out while holding it, so it can be used from the engine's hop callbacks.
public final class CookieJar: Sendable {
    /// Where saved jars and Netscape files may be found, and how to tell them apart.
    static let jsonFormatName = "tern-cookie-jar"
    /// The current JSON format version; newer files are refused.
    static let jsonFormatVersion = 1
    /// Maximum cookies sharing one ``Cookie/domain``.
    static let maximumCookiesPerDomain = 180
    /// Maximum cookies in a jar.
    static let maximumCookies = 3000

    /// The jar requests use unless given another (``Request/cookieJar``), like
    /// `HTTPCookieStorage.shared`: in memory for the life of the process, loopback hosts
    /// treated as secure. Save it (``save(to:includingSessionCookies:)``) to keep its cookies,
    /// or opt a request out with ``Request/usesCookies``.
    public static let shared = CookieJar()

    /// Whether `localhost`, `127.0.0.1` and `::1` count as secure even over plain HTTP, so
    /// that `Secure` cookies are accepted from and sent to them, as curl and browsers do.
    /// `true` by default.
    public let treatsLoopbackAsSecure: Bool

    /// A stored cookie's identity (RFC 6265 5.3 step 11).
    struct Key: Hashable, Sendable {
        var name: String
        var domain: String
        var path: String
    }

    /// A stored cookie plus what the store keeps about it.
    struct Entry: Sendable {
        var cookie: Cookie
        /// Creation order, to break ties between equal creation dates.
        var sequence: UInt64
        var lastAccess: Date
    }

    struct State: Sendable, CountedValue {
        /// Entries by domain, then identity: a lookup visits only the host's own domains.
        var domains: [String: [Key: Entry]] = [:]
        var count = 0
        var nextSequence: UInt64 = 0
    }

    // Sendable: `state` is a Locked box and `clock` is a Sendable function.
    private let state = CountedLocked(State())
    private let clock: @Sendable () -> Date

    /// Creates an empty jar.
    ///
    /// - Parameter treatsLoopbackAsSecure: Whether loopback hosts count as secure contexts
    ///   (see ``treatsLoopbackAsSecure``).
    public convenience init(treatsLoopbackAsSecure: Bool = true) {
        self.init(treatsLoopbackAsSecure: treatsLoopbackAsSecure, clock: { Date() })
    }

    /// Creates an empty jar whose idea of "now" comes from `clock` (for tests).
    init(treatsLoopbackAsSecure: Bool = true, clock: @escaping @Sendable () -> Date) {
        self.treatsLoopbackAsSecure = treatsLoopbackAsSecure
        self.clock = clock
    }

    /// Creates a jar from a file written by ``save(to:includingSessionCookies:)``; expired
    /// cookies are dropped.
    ///
    /// - Parameters:
    ///   - url: A file URL.
    ///   - treatsLoopbackAsSecure: See ``treatsLoopbackAsSecure``.
    /// - Throws: ``TernError`` with code ``TernError/Code/fileReadFailed`` when the file cannot
    ///   be read or is not a cookie jar of a known version.
    public convenience init(contentsOf url: URL, treatsLoopbackAsSecure: Bool = true)
        throws(TernError)
    {
        self.init(treatsLoopbackAsSecure: treatsLoopbackAsSecure)
        try load(contentsOf: url)
    }

    // MARK: Receiving and sending

    /// Stores the cookies of a response's `Set-Cookie` fields, one value per field.
    ///
    /// Call it for every hop, redirects included, with the URL of that hop. Refused cookies
    /// (see ``Cookie/init(setCookieHeader:from:)``) are skipped silently, as browsers do.
    ///
    /// - Parameters:
    ///   - setCookieHeaders: The values of the response's `Set-Cookie` fields.
    ///   - url: The URL the response came from.
    /// - Returns: The cookies stored (a deleting cookie, already expired, is not among them).
    @discardableResult
    public func store(setCookieHeaders: [String], from url: URL) -> [Cookie] {
        let now = clock()
        let secureOrigin = Self.isSecureContext(url, treatsLoopbackAsSecure: treatsLoopbackAsSecure)
        var stored: [Cookie] = []
        for header in setCookieHeaders {
            guard
                let cookie = Cookie.parse(
                    header, from: url, now: now,
                    treatsLoopbackAsSecure: treatsLoopbackAsSecure)
            else { continue }
            if let kept = insert(cookie, now: now, fromSecureOrigin: secureOrigin) {
                stored.append(kept)
            }
        }
        return stored
    }

    /// The cookies to send to `url`, in `Cookie` header order: domain- and path-matching,
    /// unexpired, `Secure` ones only for https (or loopback, see ``treatsLoopbackAsSecure``);
    /// longer paths first, then earlier creation first.
    public func cookies(for url: URL) -> [Cookie] {
        guard let host = HostName.canonical(of: url) else { return [] }
        let now = clock()
        let secure = Self.isSecureContext(url, treatsLoopbackAsSecure: treatsLoopbackAsSecure)
        let path = Cookie.requestPath(of: url)

        // The domains a cookie for `host` can have: the host, then each parent domain.
        var candidates = [host]
        if !HostName.isIPAddress(host) {
            var rest = Substring(host)
            while let dot = rest.firstIndex(of: ".") {
                rest = rest[rest.index(after: dot)...]
                if !rest.isEmpty { candidates.append(String(rest)) }
            }
        }

        var found: [Entry] = []
        state.withLock { state in
            for domain in candidates {
                guard var entries = state.domains[domain] else { continue }
                var changed = false
                for (key, entry) in entries {
                    let cookie = entry.cookie
                    if cookie.isExpired(at: now) {
                        entries[key] = nil
                        state.count -= 1
                        changed = true
                        continue
                    }
                    guard !cookie.isHostOnly || domain == host,
                        !cookie.isSecure || secure,
                        Cookie.pathMatches(requestPath: path, cookiePath: cookie.path)
                    else { continue }
                    entries[key]!.lastAccess = now
                    changed = true
                    found.append(entry)
                }
                if changed { state.domains[domain] = entries.isEmpty ? nil : entries }
            }
        }
        found.sort { a, b in
            let la = a.cookie.path.utf8.count
            let lb = b.cookie.path.utf8.count
            if la != lb { return la > lb }
            if a.cookie.creationDate != b.cookie.creationDate {
                return a.cookie.creationDate < b.cookie.creationDate
            }
            return a.sequence < b.sequence
        }
        return found.map(\.cookie)
    }

    /// True when the jar holds no cookie (expired ones not yet removed count).
    public var isEmpty: Bool { state.isEmpty }

    /// The value of the `Cookie` header for `url` (`"a=1; b=2"`), or `nil` when no cookie
    /// applies. See ``cookies(for:)`` for which cookies and in which order.
    public func cookieHeader(for url: URL) -> String? {
        let cookies = cookies(for: url)
        guard !cookies.isEmpty else { return nil }
        return cookies.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }

    // MARK: Manual cookies

    /// Stores a cookie made by the caller, replacing one with the same name, domain and path.
    ///
    /// No origin rules apply (the caller is trusted), but a cookie with an empty name or
    /// domain is ignored, and an already expired cookie deletes its namesake.
    public func add(_ cookie: Cookie) {
        // The properties are settable: normalise them as the initialiser does.
        var cookie = cookie
        cookie.domain = HostName.canonical(cookie.domain)
        while cookie.domain.hasPrefix(".") { cookie.domain.removeFirst() }
        if cookie.path.isEmpty { cookie.path = "/" }
        guard !cookie.name.isEmpty, !cookie.domain.isEmpty else { return }
        _ = insert(cookie, now: clock(), fromSecureOrigin: true)
    }

    /// Stores the cookies of a `Cookie`-header-style string (`"n=v; n2=v2"`, the form of
    /// curl's `-b 'n=v'`) as session cookies for `url`'s host and every path (`/`).
    ///
    /// Unlike curl, which sends such a string verbatim to every host a request reaches, the
    /// cookies belong to `url`'s host only, so they never follow a redirect to another host.
    /// Pairs without `=` or with an empty name are skipped.
    ///
    /// - Parameters:
    ///   - cookieHeader: The `name=value` pairs, separated by `;`.
    ///   - url: The URL whose host the cookies are for.
    /// - Returns: The cookies stored.
    @discardableResult
    public func add(cookieHeader: String, for url: URL) -> [Cookie] {
        guard let host = HostName.canonical(of: url) else { return [] }
        let now = clock()
        var added: [Cookie] = []
        for pair in cookieHeader.split(separator: ";") {
            guard let equals = pair.firstIndex(of: "=") else { continue }
            let name = Cookie.trimWhitespace(pair[..<equals])
            let value = Cookie.trimWhitespace(pair[pair.index(after: equals)...])
            guard !name.isEmpty else { continue }
            let cookie = Cookie(name: name, value: value, domain: host, creationDate: now)
            if let kept = insert(cookie, now: now, fromSecureOrigin: true) { added.append(kept) }
        }
        return added
    }

    // MARK: Inspecting and removing

    /// Every unexpired cookie, oldest first.
    public var allCookies: [Cookie] {
        let now = clock()
        return sortedEntries().map(\.cookie).filter { !$0.isExpired(at: now) }
    }

    /// Removes the cookie with `cookie`'s name, domain and path, if stored.
    public func remove(_ cookie: Cookie) {
        let key = Key(name: cookie.name, domain: cookie.domain, path: cookie.path)
        state.withLock { state in
            if state.domains[key.domain]?.removeValue(forKey: key) != nil {
                state.count -= 1
                if state.domains[key.domain]?.isEmpty == true { state.domains[key.domain] = nil }
            }
        }
    }

    /// Removes every cookie.
    public func removeAll() {
        state.withLock { $0 = State(nextSequence: $0.nextSequence) }
    }

    /// Removes the cookies that have expired.
    public func removeExpiredCookies() {
        let now = clock()
        removeAll { $0.isExpired(at: now) }
    }

    /// Removes the session cookies (those without an expiry): what ends a "session", and
    /// what curl's `-j` (`--junk-session-cookies`) does to cookies read from a file.
    public func removeSessionCookies() {
        removeAll { $0.isSessionOnly }
    }

    /// Removes the cookies for which `shouldBeRemoved` returns `true`.
    ///
    /// - Parameter shouldBeRemoved: Called for each cookie; it must not use the jar.
    public func removeAll(where shouldBeRemoved: (Cookie) throws -> Bool) rethrows {
        let keys = try sortedEntries().filter { try shouldBeRemoved($0.cookie) }
            .map { Key(name: $0.cookie.name, domain: $0.cookie.domain, path: $0.cookie.path) }
        state.withLock { state in
            for key in keys where state.domains[key.domain]?.removeValue(forKey: key) != nil {
                state.count -= 1
                if state.domains[key.domain]?.isEmpty == true { state.domains[key.domain] = nil }
            }
        }
    }

    // MARK: Storage (RFC 6265 5.3 steps 11–12, eviction)

    /// Inserts a parsed cookie; returns it as stored, or `nil` when it was refused or deleted.
    private func insert(_ cookie: Cookie, now: Date, fromSecureOrigin: Bool) -> Cookie? {
        let key = Key(name: cookie.name, domain: cookie.domain, path: cookie.path)
        return state.withLock { state -> Cookie? in
            // RFC 6265bis 5.6 step 16: a cookie from an insecure origin may not shadow a
            // Secure cookie of the same name whose domain and path overlap it.
            if !cookie.isSecure && !fromSecureOrigin {
                for (_, entries) in state.domains {
                    for (_, entry) in entries
                    where entry.cookie.isSecure && entry.cookie.name == cookie.name
                        && !entry.cookie.isExpired(at: now)
                        && (Cookie.domainMatches(host: entry.cookie.domain, domain: cookie.domain)
                            || Cookie.domainMatches(
                                host: cookie.domain, domain: entry.cookie.domain))
                        && Cookie.pathMatches(
                            requestPath: entry.cookie.path, cookiePath: cookie.path)
                    {
                        return nil
                    }
                }
            }

            var stored = cookie
            var sequence = state.nextSequence
            if let old = state.domains[key.domain]?.removeValue(forKey: key) {
                state.count -= 1
                stored.creationDate = old.cookie.creationDate
                sequence = old.sequence
            } else {
                state.nextSequence += 1
            }
            // An expired cookie is how a server deletes one: the old one is gone, and the new
            // one is not kept.
            if stored.isExpired(at: now) {
                if state.domains[key.domain]?.isEmpty == true { state.domains[key.domain] = nil }
                return nil
            }
            state.domains[key.domain, default: [:]][key] =
                Entry(cookie: stored, sequence: sequence, lastAccess: now)
            state.count += 1
            Self.evict(&state, domain: key.domain, now: now, keeping: key)
            return stored
        }
    }

    /// Enforces the limits: expired cookies first, then the least recently used of an
    /// over-full domain, then the least recently used overall (RFC 6265 5.3 step 12).
    private static func evict(_ state: inout State, domain: String, now: Date, keeping: Key) {
        guard
            state.domains[domain, default: [:]].count > maximumCookiesPerDomain
                || state.count > maximumCookies
        else { return }
        for (d, entries) in state.domains {
            let live = entries.filter { !$0.value.cookie.isExpired(at: now) }
            state.count -= entries.count - live.count
            state.domains[d] = live.isEmpty ? nil : live
        }
        func leastRecentlyUsed(_ entries: [Key: Entry]) -> Key? {
            entries.filter { $0.key != keeping }
                .min {
                    ($0.value.lastAccess, $0.value.sequence) < (
                        $1.value.lastAccess, $1.value.sequence
                    )
                }?.key
        }
        while let entries = state.domains[domain], entries.count > maximumCookiesPerDomain,
            let victim = leastRecentlyUsed(entries)
        {
            state.domains[domain]![victim] = nil
            state.count -= 1
        }
        while state.count > maximumCookies {
            var victim: (Key, Entry)?
            for (_, entries) in state.domains {
                for (key, entry) in entries where key != keeping {
                    if victim == nil
                        || (entry.lastAccess, entry.sequence) < (
                            victim!.1.lastAccess, victim!.1.sequence
                        )
                    {
                        victim = (key, entry)
                    }
                }
            }
            guard let (key, _) = victim else { break }
            state.domains[key.domain]![key] = nil
            if state.domains[key.domain]!.isEmpty { state.domains[key.domain] = nil }
            state.count -= 1
        }
    }

    /// Every entry, expired or not, in creation order.
    private func sortedEntries() -> [Entry] {
        let entries = state.withLock { state in state.domains.values.flatMap(\.values) }
        return entries.sorted { $0.sequence < $1.sequence }
    }

    /// Whether `url` is a secure context for cookies: https or wss, or a loopback host when
    /// allowed.
    static func isSecureContext(_ url: URL, treatsLoopbackAsSecure: Bool) -> Bool {
        let scheme = HostName.scheme(of: url)
        if scheme == "https" || scheme == "wss" { return true }
        guard treatsLoopbackAsSecure, let host = HostName.canonical(of: url) else { return false }
        return HostName.isLoopback(host)
    }
}

// MARK: - JSON persistence

extension CookieJar {
    /// The JSON document of ``save(to:includingSessionCookies:)``.
    private struct JSONFile: Codable {
        var format: String
        var version: Int
        var cookies: [Cookie]
    }

    /// Saves the jar as JSON, crash-safely: the file is replaced whole (temporary file,
    /// `fsync`, `rename`) or not at all, and gets mode 0600 since cookies often carry
    /// sessions.
    ///
    /// The format is one object: `"format": "tern-cookie-jar"`, `"version": 1`, and
    /// `"cookies"`, an array in creation order of objects with `name`, `value`, `domain`
    /// (no leading dot), `path`, `hostOnly`, `secure`, `httpOnly` (Booleans), `sameSite`
    /// (`"strict"`, `"lax"` or `"none"`, or absent), `expires` (seconds since 1970, absent for
    /// a session cookie) and `created` (seconds since 1970). Readers ignore unknown keys.
    ///
    /// - Parameters:
    ///   - url: A file URL.
    ///   - includingSessionCookies: Whether cookies without an expiry are saved too. By
    ///     default they are not, since a session ends when the program does.
    /// - Throws: ``TernError`` with code ``TernError/Code/fileWriteFailed``; the file is then
    ///   unchanged.
    public func save(to url: URL, includingSessionCookies: Bool = false) throws(TernError) {
        let cookies = allCookies.filter { includingSessionCookies || !$0.isSessionOnly }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do {
            data = try encoder.encode(
                JSONFile(
                    format: Self.jsonFormatName,
                    version: Self.jsonFormatVersion, cookies: cookies))
        } catch {
            throw TernError(
                code: .fileWriteFailed, message: "encode cookies for \(url.path): \(error)")
        }
        try writeAtomically(data, to: url.path, permissions: 0o600)
    }

    /// Adds the cookies of a file written by ``save(to:includingSessionCookies:)`` to the jar,
    /// replacing namesakes; expired cookies are dropped.
    ///
    /// - Throws: ``TernError`` with code ``TernError/Code/fileReadFailed`` when the file cannot
    ///   be read or is not a cookie jar of a known version; the jar is then unchanged.
    public func load(contentsOf url: URL) throws(TernError) {
        let data = try readFile(at: url.path)
        let file: JSONFile
        do {
            file = try JSONDecoder().decode(JSONFile.self, from: data)
        } catch {
            throw TernError(
                code: .fileReadFailed, message: "\(url.path) is not a cookie jar: \(error)")
        }
        guard file.format == Self.jsonFormatName, file.version <= Self.jsonFormatVersion else {
            throw TernError(
                code: .fileReadFailed,
                message: "\(url.path): unsupported cookie jar format \(file.format) \(file.version)"
            )
        }
        let now = clock()
        for cookie in file.cookies.sorted(by: { $0.creationDate < $1.creationDate })
        where !cookie.name.isEmpty && !cookie.domain.isEmpty {
            _ = insert(cookie, now: now, fromSecureOrigin: true)
        }
    }
}

// MARK: - Netscape cookie files (curl's -b FILE / -c FILE)

extension CookieJar {
    /// The first line curl writes, and recognises, in a cookie file.
    static let netscapeHeader = "# Netscape HTTP Cookie File"

    /// The jar in the Netscape cookie-file format, as curl's `-c FILE` writes it.
    ///
    /// One line per unexpired cookie, newest first as curl writes them, with seven
    /// tab-separated fields: domain
    /// (with a leading dot for a domain cookie), `TRUE`/`FALSE` for "subdomains too", path,
    /// `TRUE`/`FALSE` for secure, expiry in seconds since 1970 (`0` for a session cookie),
    /// name, value. An HttpOnly cookie's line starts with `#HttpOnly_`. Session cookies are
    /// included, as curl includes them. A cookie whose name or value holds a tab cannot be
    /// written in this format and is left out.
    public func netscapeCookieFileText() -> String {
        var text =
            Self.netscapeHeader + "\n"
            + "# https://curl.se/docs/http-cookies.html\n"
            + "# This file was generated by Tern. Edit at your own risk.\n\n"
        for cookie in allCookies.reversed()
        where !cookie.name.contains("\t") && !cookie.value.contains("\t") {
            let expiry =
                cookie.expiresDate.map { max(1, Int64($0.timeIntervalSince1970.rounded(.down))) }
                ?? 0
            let fields = [
                (cookie.isHTTPOnly ? "#HttpOnly_" : "") + (cookie.isHostOnly ? "" : ".")
                    + cookie.domain,
                cookie.isHostOnly ? "FALSE" : "TRUE",
                cookie.path,
                cookie.isSecure ? "TRUE" : "FALSE",
                String(expiry),
                cookie.name,
                cookie.value,
            ]
            text += fields.joined(separator: "\t") + "\n"
        }
        return text
    }

    /// Writes the jar to a Netscape cookie file (see ``netscapeCookieFileText()``), crash-safely
    /// and with mode 0600, as curl's `-c FILE` does at the end of a run.
    ///
    /// - Throws: ``TernError`` with code ``TernError/Code/fileWriteFailed``; the file is then
    ///   unchanged.
    public func saveNetscapeCookieFile(to url: URL) throws(TernError) {
        try writeAtomically(Data(netscapeCookieFileText().utf8), to: url.path, permissions: 0o600)
    }

    /// Adds the cookies of a Netscape cookie file (curl's `-b FILE`), replacing namesakes.
    ///
    /// - Parameters:
    ///   - url: A file URL.
    ///   - includingSessionCookies: `false` drops cookies with expiry `0`, as curl's `-j`
    ///     (`--junk-session-cookies`) does.
    /// - Returns: The number of cookies added.
    /// - Throws: ``TernError`` with code ``TernError/Code/fileReadFailed`` when the file cannot
    ///   be read.
    @discardableResult
    public func loadNetscapeCookieFile(at url: URL, includingSessionCookies: Bool = true)
        throws(TernError) -> Int
    {
        let data = try readFile(at: url.path)
        return addNetscapeCookies(
            String(decoding: data, as: UTF8.self),
            includingSessionCookies: includingSessionCookies)
    }

    /// Adds the cookies of Netscape cookie-file text, replacing namesakes.
    ///
    /// Lines are read as curl reads them: `#HttpOnly_` marks an HttpOnly cookie; other lines
    /// starting with `#`, and blank lines, are comments; a line has seven tab-separated fields
    /// (six when the value is empty, or in the old form without a path, which means `/`); a
    /// leading dot in the domain is dropped; a line with another shape is skipped. Expired
    /// cookies are skipped. Lines are taken to be newest first, the order curl writes (and
    /// ``netscapeCookieFileText()`` too), so the jar's creation order, which orders cookies of
    /// equal path length in a `Cookie` header, survives a round trip; of two lines for the
    /// same cookie, the later one wins, as in curl.
    ///
    /// - Parameters:
    ///   - text: The file's text.
    ///   - includingSessionCookies: `false` drops cookies with expiry `0` (curl's `-j`).
    /// - Returns: The number of cookies added.
    @discardableResult
    public func addNetscapeCookies(_ text: String, includingSessionCookies: Bool = true) -> Int {
        let now = clock()
        var parsed: [Key: (line: Int, cookie: Cookie)] = [:]
        for (number, rawLine) in text.split(
            omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" }
        ).enumerated() {
            var line = Substring(rawLine)
            if line.hasSuffix("\r") { line = line.dropLast() }
            var httpOnly = false
            if line.hasPrefix("#HttpOnly_") {
                httpOnly = true
                line = line.dropFirst("#HttpOnly_".count)
            } else if line.hasPrefix("#") || line.allSatisfy({ $0 == " " || $0 == "\t" }) {
                continue
            }
            var fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(
                String.init)
            if fields.count == 6 {
                if fields[2] == "TRUE" || fields[2] == "FALSE" {
                    fields.insert("/", at: 2)  // the old form without a path
                } else {
                    fields.append("")  // an empty value
                }
            }
            guard fields.count == 7, !fields[0].isEmpty, !fields[5].isEmpty,
                let expiry = Int64(fields[4])
            else { continue }
            let expiresDate = expiry == 0 ? nil : Date(timeIntervalSince1970: Double(expiry))
            if expiresDate == nil && !includingSessionCookies { continue }
            var domain = HostName.canonical(fields[0])
            while domain.hasPrefix(".") { domain.removeFirst() }
            let subdomains = fields[1].uppercased() == "TRUE"
            let cookie = Cookie(
                name: fields[5], value: fields[6], domain: domain, path: fields[2],
                isHostOnly: !subdomains || HostName.isIPAddress(domain),
                expiresDate: expiresDate, isSecure: fields[3].uppercased() == "TRUE",
                isHTTPOnly: httpOnly, creationDate: now)
            if cookie.isExpired(at: now) || cookie.domain.isEmpty { continue }
            parsed[Key(name: cookie.name, domain: cookie.domain, path: cookie.path)] = (
                number, cookie
            )
        }
        var added = 0
        for (_, cookie) in parsed.values.sorted(by: { $0.line > $1.line })
        where insert(cookie, now: now, fromSecureOrigin: true) != nil {
            added += 1
        }
        return added
    }
}
