// Host names and ports as the cookie jar, the credential stores and the proxy rules compare
// them: lower-cased, IPv6 literals without brackets, default ports filled in.

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

/// Helpers for comparing hosts and origins (a namespace; no state).
enum HostName {
    /// The URL's host, lower-cased, without the brackets of an IPv6 literal; `nil` when the URL
    /// has no host.
    static func canonical(of url: URL) -> String? {
        guard let host = url.host(percentEncoded: false), !host.isEmpty else { return nil }
        return canonical(host)
    }

    /// A host name lower-cased, without the brackets of an IPv6 literal.
    static func canonical(_ host: String) -> String {
        var host = host.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        }
        return host
    }

    /// The URL's scheme, lower-cased (`""` when absent).
    static func scheme(of url: URL) -> String {
        url.scheme?.lowercased() ?? ""
    }

    /// The URL's port, or the scheme's default port (80 for http and ws, 443 for https and
    /// wss); `nil` when neither is known.
    static func port(of url: URL) -> Int? {
        if let port = url.port { return port }
        return defaultPort(forScheme: scheme(of: url))
    }

    /// The well-known port of a scheme, or `nil`.
    static func defaultPort(forScheme scheme: String) -> Int? {
        switch scheme.lowercased() {
        case "http", "ws": return 80
        case "https", "wss": return 443
        default: return nil
        }
    }

    /// Whether `host` is an IPv4 or IPv6 address literal (without brackets).
    static func isIPAddress(_ host: String) -> Bool {
        ipAddressBytes(host) != nil
    }

    /// The bytes of an IPv4 (4 bytes) or IPv6 (16 bytes) address literal, or `nil` for a name.
    static func ipAddressBytes(_ host: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// Whether a host counts as a secure context although reached over plain HTTP: the loopback
    /// names curl treats so (`localhost`, `127.0.0.1`, `::1`).
    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "127.0.0.1" || host == "::1"
    }
}
