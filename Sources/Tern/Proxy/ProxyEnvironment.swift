// Proxies: the configuration of one HTTP proxy (parsed as curl parses `-x`), the `no_proxy`
// list, and the environment variables curl honours (http_proxy, https_proxy, all_proxy,
// no_proxy), with curl's rules for which variable applies to which URL.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// A proxy: what it speaks, where it listens and, optionally, the credentials it wants.
///
/// Through an HTTP proxy, requests to `http` URLs go to the proxy in absolute form and `https`
/// URLs go through a `CONNECT` tunnel, so the proxy sees only the host and port. A SOCKS proxy
/// opens a TCP tunnel to the origin for every connection, whatever the URL's scheme.
///
/// ```swift
/// let proxy = try ProxyConfiguration("http://alice:secret@proxy.example:3128")
/// // proxy.url == http://proxy.example:3128, proxy.credential?.user == "alice"
/// let socks = try ProxyConfiguration("socks5h://proxy.example")  // port 1080
/// // socks.kind == .socks5h: the proxy resolves the origin's name
/// ```
public struct ProxyConfiguration: Sendable, Hashable, CustomStringConvertible {
    /// The port curl assumes when a proxy string names none.
    public static let defaultPort = 1080

    /// What a proxy speaks, named by the scheme of its URL.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// An HTTP proxy (`http://`): absolute-form requests, `CONNECT` for `https`.
        case http
        /// SOCKS4 (`socks4://`): takes an IPv4 address, resolved here; the user name goes as
        /// its user id.
        case socks4
        /// SOCKS4A (`socks4a://`): SOCKS4 that takes the host name and resolves it itself.
        case socks4a
        /// SOCKS5 (`socks5://`, RFC 1928): the host name is resolved here and the proxy gets
        /// the address; credentials go as a user name and password (RFC 1929).
        case socks5
        /// SOCKS5 with the host name given to the proxy, which resolves it (`socks5h://`, as
        /// in curl).
        case socks5h

        /// Whether this is one of the SOCKS kinds.
        public var isSOCKS: Bool { self != .http }
    }

    /// What the proxy speaks (default ``Kind/http``).
    public private(set) var kind: Kind
    /// The proxy's URL, `SCHEME://host:port`, without credentials or path.
    public private(set) var url: URL
    /// The proxy's host, lower-cased, without the brackets of an IPv6 literal.
    public private(set) var host: String
    /// The proxy's port.
    public private(set) var port: Int
    /// The user and password for the proxy (`Proxy-Authorization` for an HTTP proxy, RFC 1929
    /// for SOCKS5, the user id for SOCKS4), if any.
    public var credential: Credential?

    /// Creates a proxy configuration from its host and port.
    ///
    /// - Parameters:
    ///   - host: The proxy's host name or IP address (an IPv6 literal with or without brackets).
    ///   - port: The proxy's port (default 1080, as curl).
    ///   - credential: The proxy's credentials, if it wants some.
    ///   - kind: What the proxy speaks (default ``Kind/http``).
    public init(
        host: String, port: Int = ProxyConfiguration.defaultPort, credential: Credential? = nil,
        kind: Kind = .http
    ) {
        let host = HostName.canonical(host)
        self.host = host
        self.port = port
        self.kind = kind
        let hostPart = host.contains(":") ? "[\(host)]" : host
        // A host that does not form a URL (it would need percent-encoding) still gets one, from
        // components; the engine rejects such a proxy when the request starts.
        self.url =
            URL(string: "\(kind.rawValue)://\(hostPart):\(port)")
            ?? {
                var components = URLComponents()
                components.scheme = kind.rawValue
                components.host = host
                components.port = port
                return components.url ?? URL(fileURLWithPath: "/")
            }()
        self.credential = credential
    }

    /// Parses a proxy the way curl parses `-x` and the proxy environment variables:
    /// `[SCHEME://][user[:password]@]host[:port][/]`, where SCHEME is `http`, `socks4`,
    /// `socks4a`, `socks5` or `socks5h` (see ``Kind``), a missing scheme means `http`, a
    /// missing port means 1080, an IPv6 address is written in brackets, and the user and
    /// password are percent-decoded.
    ///
    /// - Parameters:
    ///   - string: The proxy string.
    ///   - credential: Credentials that replace those in the string (curl's `-U`).
    /// - Throws: ``TernError`` with code ``TernError/Code/unsupported`` for another scheme
    ///   (`https` proxies are not supported), and ``TernError/Code/badURL`` for a malformed
    ///   string.
    public init(_ string: String, credential: Credential? = nil) throws(TernError) {
        var rest = Substring(string.trimmingWhitespace())
        var kind = Kind.http
        if let range = rest.firstRange(of: "://") {
            let scheme = rest[..<range.lowerBound].lowercased()
            guard let named = Kind(rawValue: scheme) else {
                throw TernError(
                    code: .unsupported,
                    message:
                        "unsupported proxy scheme \"\(scheme)\" in \(Self.redacted(string)): "
                        + "http, socks4, socks4a, socks5 and socks5h proxies are supported"
                )
            }
            kind = named
            rest = rest[range.upperBound...]
        }
        // The authority ends at the first '/', '?' or '#'.
        if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            rest = rest[..<end]
        }
        var parsedCredential: Credential?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let user: Substring
            let password: Substring
            if let colon = userinfo.firstIndex(of: ":") {
                user = userinfo[..<colon]
                password = userinfo[userinfo.index(after: colon)...]
            } else {
                user = userinfo
                password = ""
            }
            guard let decodedUser = String(user).percentDecoded(),
                let decodedPassword = String(password).percentDecoded()
            else {
                throw TernError(
                    code: .badURL,
                    message:
                        "bad percent-encoding in the proxy credentials of \(Self.redacted(string))")
            }
            parsedCredential = Credential(
                user: decodedUser, password: decodedPassword, persistence: .none)
        }
        let host: String
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                throw TernError(
                    code: .badURL,
                    message: "unterminated IPv6 address in proxy \(Self.redacted(string))")
            }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else {
                    throw TernError(code: .badURL, message: "bad proxy \(Self.redacted(string))")
                }
                portText = after.dropFirst()
            }
        } else if let colon = rest.firstIndex(of: ":") {
            host = String(rest[..<colon])
            portText = rest[rest.index(after: colon)...]
        } else {
            host = String(rest)
        }
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "\t" }) else {
            throw TernError(code: .badURL, message: "no proxy host in \(Self.redacted(string))")
        }
        var port = Self.defaultPort
        if let portText, !portText.isEmpty {
            guard portText.allSatisfy(\.isASCII), let number = Int(portText),
                (1...65535).contains(number)
            else {
                throw TernError(
                    code: .badURL,
                    message: "bad proxy port \"\(portText)\" in \(Self.redacted(string))")
            }
            port = number
        }
        self.init(host: host, port: port, credential: credential ?? parsedCredential, kind: kind)
    }

    /// The proxy's protection space (any realm), for ``CredentialStore`` lookups.
    public var protectionSpace: ProtectionSpace {
        ProtectionSpace(scheme: kind.rawValue, host: host, port: port, isProxy: true)
    }

    /// `SCHEME://host:port`, with the user but never the password.
    public var description: String {
        guard let credential else { return url.absoluteString }
        let prefix = "\(kind.rawValue)://"
        return prefix + "\(credential.user)@\(url.absoluteString.dropFirst(prefix.count))"
    }

    /// `SCHEME://user:password@host:port` for the engine (user and password percent-encoded),
    /// or the plain URL without a credential.
    var engineURL: String {
        guard let credential else { return url.absoluteString }
        let prefix = "\(kind.rawValue)://"
        return prefix + credential.engineUser.percentEncodedUserinfo() + ":"
            + credential.password.percentEncodedUserinfo() + "@"
            + url.absoluteString.dropFirst(prefix.count)
    }

    /// A proxy string for messages: the password replaced by `***`.
    static func redacted(_ string: String) -> String {
        guard let at = string.lastIndex(of: "@") else { return "\"\(string)\"" }
        let head = string[..<at]
        let userStart = head.firstRange(of: "://")?.upperBound ?? head.startIndex
        guard let colon = head[userStart...].firstIndex(of: ":") else { return "\"\(string)\"" }
        return "\"\(string[..<colon]):***\(string[at...])\""
    }
}

/// A `no_proxy` list: the hosts to reach directly, without a proxy (curl's `--noproxy` and
/// `no_proxy` syntax).
///
/// Entries are separated by commas (or spaces). An entry matches a host name that is equal to
/// it or ends with `.` plus it, with or without a leading dot in the entry (`example.com` and
/// `.example.com` both match `example.com` and `www.example.com`, not `myexample.com`). An IP
/// address entry matches that address, and a CIDR entry (`10.0.0.0/8`, `fd00::/8`) the
/// addresses in it; IP addresses never match by suffix. Ports in entries are ignored, and
/// comparisons ignore case. A list that is just `*` matches every host.
public struct NoProxyList: Sendable, Hashable, CustomStringConvertible {
    enum Entry: Sendable, Hashable {
        case name(String)
        case address([UInt8], prefixLength: Int)
    }

    /// The list as given.
    public let rawValue: String
    /// `true` when the list is `*`: no host uses a proxy.
    public let matchesAll: Bool
    let entries: [Entry]

    /// Parses a list such as `"localhost,.internal.example,10.0.0.0/8"`.
    public init(_ list: String) {
        rawValue = list
        let trimmed = list.trimmingWhitespace()
        matchesAll = trimmed == "*"
        var entries: [Entry] = []
        for raw in trimmed.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }) {
            if let entry = Self.entry(String(raw)) { entries.append(entry) }
        }
        self.entries = entries
    }

    private static func entry(_ token: String) -> Entry? {
        var token = token.lowercased()
        // Ports are ignored: "[::1]:8080", "host:8080"; a bare IPv6 address has several colons.
        if token.hasPrefix("[") {
            guard let close = token.firstIndex(of: "]") else { return nil }
            let inside = token[token.index(after: token.startIndex)..<close]
            // "[fd00::]/8" keeps its prefix length.
            let after = token[token.index(after: close)...]
            token =
                String(inside) + (after.hasPrefix("/") ? String(after.prefix { $0 != ":" }) : "")
        } else if token.filter({ $0 == ":" }).count == 1, let colon = token.firstIndex(of: ":") {
            token = String(token[..<colon])
        }
        var prefixLength: Int?
        var address = token
        if let slash = token.firstIndex(of: "/") {
            address = String(token[..<slash])
            prefixLength = Int(token[token.index(after: slash)...])
            if prefixLength == nil { return nil }
        }
        if let bytes = HostName.ipAddressBytes(address) {
            let bits = min(max(prefixLength ?? bytes.count * 8, 0), bytes.count * 8)
            return .address(bytes, prefixLength: bits)
        }
        if prefixLength != nil { return nil }
        if token.hasPrefix("*.") { token.removeFirst() }
        while token.hasPrefix(".") { token.removeFirst() }
        while token.hasSuffix(".") { token.removeLast() }
        return token.isEmpty ? nil : .name(token)
    }

    /// Whether requests to `host` bypass the proxy.
    ///
    /// - Parameter host: A host name or IP address (an IPv6 literal with or without brackets).
    public func matches(host: String) -> Bool {
        if matchesAll { return true }
        var host = HostName.canonical(host)
        while host.hasSuffix(".") { host.removeLast() }
        if let bytes = HostName.ipAddressBytes(host) {
            for case .address(let network, let prefixLength) in entries
            where network.count == bytes.count && Self.prefix(bytes, network, bits: prefixLength) {
                return true
            }
            return false
        }
        for case .name(let name) in entries {
            if host == name || host.hasSuffix("." + name) { return true }
        }
        return false
    }

    /// Whether requests to `url`'s host bypass the proxy; `false` when it has no host.
    public func matches(_ url: URL) -> Bool {
        guard let host = HostName.canonical(of: url) else { return false }
        return matches(host: host)
    }

    /// The list as given.
    public var description: String { rawValue }

    private static func prefix(_ a: [UInt8], _ b: [UInt8], bits: Int) -> Bool {
        var remaining = bits
        for i in 0..<a.count where remaining > 0 {
            let take = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - take))
            if a[i] & mask != b[i] & mask { return false }
            remaining -= take
        }
        return true
    }
}

/// The proxy settings of an environment, applied with curl's rules.
///
/// ```swift
/// let proxies = ProxyEnvironment()                    // reads the process environment
/// if let proxy = try proxies.proxy(for: url) { ... }  // nil: connect directly
/// ```
///
/// The library never reads the environment by itself: a request uses a proxy only when given
/// one. Reading these variables is opt-in through this type; the `tern` command line tool
/// honours them, as curl does.
///
/// Which variable applies, as in curl:
///
/// 1. A host matching ``noProxy`` (`no_proxy`, else `NO_PROXY`) goes direct, even when
///    ``explicitProxy`` is set.
/// 2. Otherwise ``explicitProxy`` (curl's `-x`), when set, is used for every URL.
/// 3. Otherwise `http` URLs use `http_proxy` (lower case only: a CGI program's environment
///    holds `HTTP_PROXY` from a request's `Proxy:` header, so curl ignores it), and `https`
///    URLs use `https_proxy`, else `HTTPS_PROXY`.
/// 4. Otherwise `all_proxy`, else `ALL_PROXY`.
///
/// An empty variable counts as unset.
public struct ProxyEnvironment: Sendable, Hashable {
    /// The proxy for `http` URLs (`http_proxy`), as written.
    public var httpProxy: String?
    /// The proxy for `https` URLs (`https_proxy` or `HTTPS_PROXY`), as written.
    public var httpsProxy: String?
    /// The proxy for URLs without a scheme-specific one (`all_proxy` or `ALL_PROXY`).
    public var allProxy: String?
    /// The hosts to reach directly (`no_proxy` or `NO_PROXY`; curl's `--noproxy` replaces it).
    public var noProxy: NoProxyList?
    /// A proxy for every URL, instead of the variables (curl's `-x`); ``noProxy`` still
    /// applies.
    public var explicitProxy: ProxyConfiguration?

    /// True when no variable and no explicit proxy names a proxy (most machines): every URL
    /// goes direct, and nothing needs looking at per request.
    var namesNoProxy: Bool {
        // Matched by case: `== nil` on the Equatable configuration copied it first.
        guard case .none = explicitProxy else { return false }
        return httpProxy == nil && httpsProxy == nil && allProxy == nil
    }

    /// Settings that never use a proxy (curl's `-x ""`).
    public static let direct = ProxyEnvironment(environment: [:])

    /// Reads the settings from environment variables.
    ///
    /// - Parameter environment: The variables; the process environment by default.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        func variable(_ names: String...) -> String? {
            for name in names {
                if let value = environment[name],
                    !value.trimmingWhitespace().isEmpty
                {
                    return value
                }
            }
            return nil
        }
        httpProxy = variable("http_proxy")
        httpsProxy = variable("https_proxy", "HTTPS_PROXY")
        allProxy = variable("all_proxy", "ALL_PROXY")
        noProxy = variable("no_proxy", "NO_PROXY").map(NoProxyList.init)
        explicitProxy = nil
    }

    /// The proxy to use for `url`, or `nil` to connect directly.
    ///
    /// - Parameter url: The request's URL (each redirect target is looked up again).
    /// - Returns: The proxy, with the credentials its string holds.
    /// - Throws: ``TernError`` when the variable that applies holds a proxy that cannot be used
    ///   (see ``ProxyConfiguration/init(_:credential:)``), so that the request fails rather
    ///   than silently going direct, as curl does.
    public func proxy(for url: URL) throws(TernError) -> ProxyConfiguration? {
        if namesNoProxy { return nil }
        if let noProxy, noProxy.matches(url) { return nil }
        if let explicitProxy { return explicitProxy }
        let scheme = HostName.scheme(of: url)
        let string: String?
        switch scheme {
        case "http": string = httpProxy ?? allProxy
        case "https": string = httpsProxy ?? allProxy
        default: string = allProxy
        }
        guard let string else { return nil }
        return try ProxyConfiguration(string)
    }
}
