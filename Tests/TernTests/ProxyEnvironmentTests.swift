// Proxy settings: curl's proxy string syntax, which environment variable applies to which URL,
// no_proxy matching, and the same choices as curl itself makes for the same environments.

import Foundation
import Testing

@testable import Tern

extension TernTests {
    @Suite struct ProxyEnvironmentTests {
        // MARK: Proxy strings

        @Test func proxyStrings() throws {
            let plain = try ProxyConfiguration("proxy.example:3128")
            #expect(plain.url.absoluteString == "http://proxy.example:3128")
            #expect(plain.host == "proxy.example")
            #expect(plain.port == 3128)
            #expect(plain.credential == nil)

            #expect(try ProxyConfiguration("proxy.example").port == 1080)
            #expect(
                try ProxyConfiguration("  HTTP://Proxy.EXAMPLE:8080/some/path?x  ").url
                    .absoluteString
                    == "http://proxy.example:8080")

            let withUser = try ProxyConfiguration("http://bob:p%40ss%3Aw0rd%25@127.0.0.1:3128/")
            #expect(withUser.credential?.user == "bob")
            #expect(withUser.credential?.password == "p@ss:w0rd%")
            #expect(withUser.host == "127.0.0.1")
            #expect(!withUser.description.contains("p@ss"))
            #expect(withUser.description == "http://bob@127.0.0.1:3128")
            #expect(try ProxyConfiguration("alice@proxy:1").credential?.password == "")

            let override = try ProxyConfiguration(
                "http://a:b@proxy:1", credential: Credential(user: "c", password: "d"))
            #expect(override.credential?.user == "c")

            let v6 = try ProxyConfiguration("[::1]:3128")
            #expect(v6.host == "::1")
            #expect(v6.url.absoluteString == "http://[::1]:3128")
            #expect(try ProxyConfiguration("http://[fe80::1]").port == 1080)

            #expect(
                ProxyConfiguration(host: "Proxy.Example", port: 8080).protectionSpace
                    == ProtectionSpace(
                        scheme: "http", host: "proxy.example", port: 8080, isProxy: true))
        }

        @Test func badProxyStrings() {
            for (string, code) in [
                ("socks6://127.0.0.1:1080", TernError.Code.unsupported),
                ("https://proxy:443", .unsupported),
                ("ftp://proxy", .unsupported),
                ("http://:8080", .badURL),
                ("", .badURL),
                ("proxy:99999", .badURL),
                ("proxy:0", .badURL),
                ("proxy:80x", .badURL),
                ("[::1", .badURL),
                ("[::1]x", .badURL),
                ("http://u:%zz@proxy", .badURL),
            ] {
                let error = #expect(throws: TernError.self, "\(string)") {
                    try ProxyConfiguration(string)
                }
                #expect(error?.code == code, "\(string)")
            }
            // Messages never show a password.
            let error = #expect(throws: TernError.self) {
                try ProxyConfiguration("socks6://u:secret@h")
            }
            #expect(error?.message.contains("secret") == false)
            #expect(error?.message.contains("u:***@h") == true)
        }

        // MARK: Variables

        let http = URL(string: "http://www.example.com/")!
        let https = URL(string: "https://www.example.com/")!

        func proxy(_ environment: [String: String], _ url: URL) throws -> String? {
            try ProxyEnvironment(environment: environment).proxy(for: url).map(\.url.absoluteString)
        }

        @Test func whichVariableApplies() throws {
            #expect(try proxy([:], http) == nil)
            #expect(try proxy(["http_proxy": "h:1"], http) == "http://h:1")
            #expect(try proxy(["http_proxy": "h:1"], https) == nil)
            // HTTP_PROXY is never read (a CGI program gets it from a request's Proxy: header).
            #expect(try proxy(["HTTP_PROXY": "h:2"], http) == nil)
            #expect(try proxy(["HTTP_PROXY": "h:2", "all_proxy": "a:3"], http) == "http://a:3")
            #expect(try proxy(["https_proxy": "s:1", "HTTPS_PROXY": "s:2"], https) == "http://s:1")
            #expect(try proxy(["HTTPS_PROXY": "s:2", "all_proxy": "a:3"], https) == "http://s:2")
            #expect(try proxy(["all_proxy": "a:3", "ALL_PROXY": "a:4"], https) == "http://a:3")
            #expect(try proxy(["ALL_PROXY": "a:4"], http) == "http://a:4")
            // An empty variable counts as unset.
            #expect(try proxy(["https_proxy": "", "all_proxy": "a:3"], https) == "http://a:3")
            #expect(try proxy(["http_proxy": " "], http) == nil)
            // A variable that cannot be used fails the lookup instead of going direct.
            #expect(throws: TernError.unsupported) {
                try proxy(["http_proxy": "socks6://s:1"], http)
            }
        }

        @Test func explicitProxyAndOverrides() throws {
            var settings = ProxyEnvironment(environment: [
                "http_proxy": "h:1", "no_proxy": "internal.example",
            ])
            settings.explicitProxy = try ProxyConfiguration("x:9")
            #expect(try settings.proxy(for: https)?.port == 9)
            #expect(try settings.proxy(for: URL(string: "http://internal.example/")!) == nil)
            settings.noProxy = NoProxyList("*")
            #expect(try settings.proxy(for: https) == nil)
            #expect(try ProxyEnvironment.direct.proxy(for: http) == nil)
            #expect(ProxyEnvironment(environment: ["NO_PROXY": "a"]).noProxy?.rawValue == "a")
            #expect(
                ProxyEnvironment(environment: ["NO_PROXY": "a", "no_proxy": "b"]).noProxy?.rawValue
                    == "b")
        }

        // MARK: no_proxy

        @Test func noProxyNames() {
            let list = NoProxyList("example.com, .internal.test,Other.ORG  localhost")
            #expect(list.matches(host: "example.com"))
            #expect(list.matches(host: "www.example.com"))
            #expect(list.matches(host: "a.b.example.com"))
            #expect(!list.matches(host: "myexample.com"))
            #expect(!list.matches(host: "example.com.evil"))
            #expect(list.matches(host: "internal.test"))
            #expect(list.matches(host: "db.internal.test"))
            #expect(list.matches(host: "OTHER.org"))
            #expect(list.matches(host: "www.example.com."))
            #expect(list.matches(host: "localhost"))
            #expect(!list.matches(host: "127.0.0.1"))
            #expect(list.matches(URL(string: "http://WWW.Example.com:8080/x")!))
            #expect(!list.matches(URL(fileURLWithPath: "/tmp")))
        }

        @Test func noProxyStarAndPorts() {
            #expect(NoProxyList("*").matches(host: "anything.example"))
            #expect(NoProxyList(" * ").matchesAll)
            #expect(!NoProxyList("foo.com,*").matches(host: "anything.example"))  // as curl
            #expect(NoProxyList("*.example.com").matches(host: "www.example.com"))
            // Ports in entries are ignored; so are the URL's.
            #expect(NoProxyList("example.com:8080").matches(host: "www.example.com"))
            #expect(NoProxyList("[::1]:8080").matches(host: "::1"))
            #expect(NoProxyList("10.1.2.3:80").matches(host: "10.1.2.3"))
            #expect(!NoProxyList("").matches(host: "example.com"))
            #expect(!NoProxyList(", ,").matches(host: "example.com"))
        }

        @Test func noProxyAddresses() {
            let list = NoProxyList(
                "127.0.0.1, 10.0.0.0/8, 192.168.1.0/24, ::1, [fd00::]/8, 172.16.0.0/33")
            #expect(list.matches(host: "127.0.0.1"))
            #expect(!list.matches(host: "127.0.0.2"))
            #expect(list.matches(host: "10.200.3.4"))
            #expect(!list.matches(host: "11.0.0.1"))
            #expect(list.matches(host: "192.168.1.77"))
            #expect(!list.matches(host: "192.168.2.1"))
            #expect(list.matches(host: "::1"))
            #expect(list.matches(host: "[::1]"))
            #expect(list.matches(host: "fd12:3456::1"))
            #expect(!list.matches(host: "fe80::1"))
            #expect(list.matches(host: "172.16.0.0"))  // prefix clamped to 32 bits
            #expect(!list.matches(host: "172.16.0.1"))
            // Addresses never match by suffix.
            #expect(!NoProxyList("0.0.1").matches(host: "127.0.0.1"))
            #expect(NoProxyList("0.0.0.0/0").matches(host: "8.8.8.8"))
            #expect(!NoProxyList("0.0.0.0/0").matches(host: "::1"))
        }

        // MARK: The same choices as curl

        static let curl = "/usr/bin/curl"
        static var hasCurl: Bool { FileManager.default.isExecutableFile(atPath: curl) }

        /// Which proxy curl picks for `url` in `environment`: the port of the refusing proxy it
        /// tries (proxies listen on 127.0.0.1 ports 1 to 4, where nothing listens), or `nil`
        /// when it goes direct. Learnt from `curl -v`'s "Trying" line.
        func curlChoice(_ environment: [String: String], _ url: String) -> Int? {
            let result = run(
                Self.curl, ["-sv", "--connect-timeout", "2", "-o", "/dev/null", url],
                environment: environment)
            for line in result.output.split(whereSeparator: \.isNewline)
            where line.contains("Trying ") {
                for port in 1...4 where line.hasSuffix("Trying 127.0.0.1:\(port)...") {
                    return port
                }
                return nil
            }
            return nil
        }

        @Test(.enabled(if: hasCurl)) func sameChoicesAsCurl() throws {
            let p1 = "http://127.0.0.1:1"
            let p2 = "http://127.0.0.1:2"
            let p3 = "127.0.0.1:3"
            let p4 = "127.0.0.1:4"
            // Targets that fail fast when reached directly: unresolvable names, closed ports.
            let cases: [([String: String], String)] = [
                (["http_proxy": p1, "HTTP_PROXY": p2], "http://www.example.invalid/"),
                (["HTTP_PROXY": p2, "all_proxy": p3], "http://www.example.invalid/"),
                (["HTTP_PROXY": p2], "http://www.example.invalid/"),
                (["https_proxy": p1, "HTTPS_PROXY": p2], "https://www.example.invalid/"),
                (["HTTPS_PROXY": p2, "ALL_PROXY": p4], "https://www.example.invalid/"),
                (
                    ["https_proxy": "", "all_proxy": p3, "ALL_PROXY": p4],
                    "https://www.example.invalid/"
                ),
                (["http_proxy": p1], "https://www.example.invalid/"),
                (["ALL_PROXY": p4], "http://127.0.0.9:9/"),
                (["http_proxy": p1, "no_proxy": "example.invalid"], "http://www.example.invalid/"),
                (["http_proxy": p1, "no_proxy": "example.invalid"], "http://example.invalid/"),
                (["http_proxy": p1, "no_proxy": "example.invalid"], "http://myexample.invalid/"),
                (["http_proxy": p1, "no_proxy": ".example.invalid"], "http://example.invalid/"),
                (
                    ["http_proxy": p1, "NO_PROXY": "EXAMPLE.invalid"],
                    "http://WWW.example.invalid./"
                ),
                (
                    ["http_proxy": p1, "no_proxy": "foo.invalid, example.invalid"],
                    "http://www.example.invalid/"
                ),
                (["http_proxy": p1, "no_proxy": "*"], "http://www.example.invalid/"),
                (["http_proxy": p1, "no_proxy": "foo.invalid,*"], "http://www.example.invalid/"),
                (["http_proxy": p1, "no_proxy": "127.0.0.9"], "http://127.0.0.9:9/"),
                (["http_proxy": p1, "no_proxy": "127.0.0.0/8"], "http://127.0.0.9:9/"),
                (["http_proxy": p1, "no_proxy": "10.0.0.0/8"], "http://127.0.0.9:9/"),
                (["http_proxy": p1, "no_proxy": "0.0.9"], "http://127.0.0.9:9/"),
                (["http_proxy": p1, "no_proxy": "::1"], "http://[::1]:9/"),
            ]
            // The probe itself tells the three outcomes apart.
            #expect(curlChoice(["http_proxy": p1], "http://www.example.invalid/") == 1)
            #expect(curlChoice(["http_proxy": p3], "http://www.example.invalid/") == 3)
            #expect(curlChoice([:], "http://127.0.0.9:9/") == nil)
            var proxied = 0
            for (environment, address) in cases {
                let ours = try ProxyEnvironment(environment: environment).proxy(
                    for: URL(string: address)!)?.port
                #expect(ours == curlChoice(environment, address), "\(environment) \(address)")
                if ours != nil { proxied += 1 }
            }
            #expect(proxied == 10)
        }
    }
}
