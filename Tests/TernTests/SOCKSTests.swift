// SOCKS proxies from Swift: ProxyConfiguration's kinds (socks4, socks4a, socks5, socks5h),
// plain http and https through Dante (the real SOCKS server servers.py starts), RFC 1929 user
// name and password against Dante's system-user check, the proxy environment variables, and
// the errors a caller sees. The C tests (test-socks.c) cover the wire details and misbehaving
// proxies.

import Foundation
import Testing
@testable import Tern

extension TernTests.Hops {
    /// Dante on SOCKS_PORT (no authentication) or SOCKS_AUTH_PORT (user name and password).
    func dante(
        _ servers: Servers, _ kind: ProxyConfiguration.Kind, auth: Bool = false,
        credential: Credential? = nil
    ) throws -> ProxyConfiguration {
        ProxyConfiguration(
            host: "127.0.0.1", port: Int(try servers.must(auth ? "SOCKS_AUTH_PORT" : "SOCKS_PORT"))!,
            credential: credential, kind: kind)
    }

    /// How many connections Dante's log (`open` or `auth`) shows it made to 127.0.0.1:port.
    func danteConnections(_ servers: Servers, _ log: String, to port: String) throws -> Int {
        try danteLog(servers, log).split(separator: "\n").filter {
            $0.hasSuffix(" 127.0.0.1.\(port)")
        }.count
    }

    func danteLog(_ servers: Servers, _ log: String) throws -> String {
        let path = "\(try servers.must("STATE"))/dante/\(log).log"
        return String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
    }

    /// Whether Dante carried the connection the server saw as coming from `remotePort` (its
    /// X-Remote-Port): the log names the tunnel's outgoing side, "127.0.0.1.PORT
    /// 127.0.0.1.TARGET". Unlike counting lines, this holds while other tests use Dante too.
    func danteCarried(
        _ servers: Servers, _ log: String = "open", remotePort: String?, to target: String
    ) throws -> Bool {
        guard let remotePort else { return false }
        return try danteLog(servers, log).contains("127.0.0.1.\(remotePort) 127.0.0.1.\(target)\n")
    }

    func danteCarried(
        _ servers: Servers, _ response: Response, to target: String, log: String = "open"
    ) throws -> Bool {
        try danteCarried(
            servers, log, remotePort: response.headerFields[HTTPField.Name("X-Remote-Port")!],
            to: target)
    }

    @Test(arguments: [ProxyConfiguration.Kind.socks5h, .socks5, .socks4, .socks4a])
    func httpAndHTTPSThroughSOCKS(kind: ProxyConfiguration.Kind) async throws {
        let servers = try Servers.get()
        let faultPort = String(servers.faultPort)
        let tlsPort = try servers.must("TLS_PORT")
        if kind == .socks4a {
            // Dante speaks SOCKS4 but not its 4A extension: it refuses, and the caller hears
            // which proxy said what.
            let refused = isolated(url("http://localhost:\(faultPort)/echo"))
            refused.proxy = try dante(servers, kind)
            guard case .failure(let error) = await outcome(refused) else {
                Issue.record("Dante accepted SOCKS4A")
                return
            }
            #expect(error == .proxyError)
            #expect(error.message.contains("SOCKS4A proxy 127.0.0.1:"))
            #expect(error.message.contains("request rejected or failed (91)"))
            return
        }
        // A name only where the proxy resolves it: Dante connects out over IPv4 only, and
        // "localhost" may resolve to ::1 here first.
        let host = kind == .socks5h ? "localhost" : "127.0.0.1"
        let plain = isolated(url("http://\(host):\(faultPort)/echo"))
        plain.proxy = try dante(servers, kind)
        let response = try await plain.response()
        #expect(response.statusCode == 200)
        // An ordinary origin-form request inside the tunnel: no proxy field, no absolute URL.
        #expect(response.sentRequestHead?.hasPrefix("GET /echo HTTP/1.1\r\n") == true)
        #expect(response.sentRequestHead?.contains("Proxy-") == false)
        #expect(try danteCarried(servers, response, to: faultPort))

        let tls = isolated(url("https://\(host):\(tlsPort)/1k.bin"))
        tls.proxy = try dante(servers, kind)
        tls.tls = TLSOptions(caFile: try servers.must("CA_PEM"))
        let tlsResponse = try await tls.response()
        #expect(tlsResponse.statusCode == 200)
        #expect(tlsResponse.data == (try fixture(servers, "1k.bin")))
        #expect(tlsResponse.tlsInfo != nil)
        #expect(try danteCarried(servers, tlsResponse, to: tlsPort))
    }

    @Test func socksUserNameAndPassword() async throws {
        let servers = try Servers.get()
        let user = try servers.must("SOCKS_USER")
        let password = try servers.must("SOCKS_PASSWORD")
        let good = isolated(servers.fault("/echo"))
        good.proxy = try dante(
            servers, .socks5h, auth: true,
            credential: Credential(user: user, password: password, persistence: .none))
        #expect(try await good.response().statusCode == 200)

        let wrong = isolated(servers.fault("/echo"))
        wrong.proxy = try dante(
            servers, .socks5, auth: true,
            credential: Credential(user: user, password: "wrong", persistence: .none))
        guard case .failure(let refused) = await outcome(wrong) else {
            Issue.record("a wrong SOCKS password was accepted")
            return
        }
        #expect(refused == .proxyError)
        #expect(refused.message.contains("refused the user name and password"))

        let none = isolated(servers.fault("/echo"))
        none.proxy = try dante(servers, .socks5h, auth: true)
        guard case .failure(let missing) = await outcome(none) else {
            Issue.record("a SOCKS proxy demanding a password let a request through without one")
            return
        }
        #expect(missing == .proxyError)
        #expect(missing.message.contains("accepts none of the authentication methods"))
    }

    @Test func socksProxyFromTheEnvironment() async throws {
        let servers = try Servers.get()
        let faultPort = String(servers.faultPort)
        let socksURL = "socks5h://127.0.0.1:\(try servers.must("SOCKS_PORT"))"
        let request = isolated(servers.fault("/echo"))
        request.proxyEnvironment = ProxyEnvironment(environment: ["all_proxy": socksURL])
        let response = try await request.response()
        #expect(response.statusCode == 200)
        #expect(try danteCarried(servers, response, to: faultPort))
        // no_proxy still exempts a host from a SOCKS proxy.
        let exempt = isolated(servers.fault("/echo"))
        exempt.proxyEnvironment = ProxyEnvironment(
            environment: ["all_proxy": socksURL, "no_proxy": "127.0.0.1"])
        let direct = try await exempt.response()
        #expect(direct.statusCode == 200)
        #expect(try !danteCarried(servers, direct, to: faultPort))
    }

    @Test func cliTakesSOCKSFromTheEnvironment() throws {
        let servers = try Servers.get()
        let faultPort = String(servers.faultPort)
        let socksURL = "socks5h://127.0.0.1:\(try servers.must("SOCKS_PORT"))"
        // The echo's "peer_port" is the client port the fault server saw.
        func peerPort(_ run: ToolRun) -> String? {
            guard let range = run.text.range(of: #""peer_port": [0-9]+"#, options: .regularExpression)
            else { return nil }
            return String(run.text[range].split(separator: " ").last ?? "")
        }
        let run = try ternTool(
            ["-s", servers.fault("/echo").absoluteString],
            environment: toolEnvironment(["ALL_PROXY": socksURL]))
        #expect(run.status == 0)
        #expect(try danteCarried(servers, remotePort: peerPort(run), to: faultPort))
        // --noproxy exempts the host; -x "" ignores the variables.
        for extra in [["--noproxy", "127.0.0.1"], ["-x", ""]] {
            let direct = try ternTool(
                ["-s"] + extra + [servers.fault("/echo").absoluteString],
                environment: toolEnvironment(["ALL_PROXY": socksURL]))
            #expect(direct.status == 0)
            #expect(peerPort(direct) != nil)
            #expect(try !danteCarried(servers, remotePort: peerPort(direct), to: faultPort))
        }
    }

    @Test func proxyConfigurationReadsSOCKSURLs() throws {
        let socks = try ProxyConfiguration("socks5h://ann:s%40cret@proxy.example")
        #expect(socks.kind == .socks5h)
        #expect(socks.kind.isSOCKS)
        #expect(socks.port == ProxyConfiguration.defaultPort)
        #expect(socks.credential?.password == "s@cret")
        #expect(socks.url.absoluteString == "socks5h://proxy.example:1080")
        #expect(socks.description == "socks5h://ann@proxy.example:1080")
        #expect(socks.engineURL == "socks5h://ann:s%40cret@proxy.example:1080")
        #expect(try ProxyConfiguration("SOCKS4A://[::1]:9050").kind == .socks4a)
        #expect(try ProxyConfiguration("proxy.example:3128").kind == .http)
        #expect(throws: TernError.self) { try ProxyConfiguration("socks6://proxy.example") }
        #expect(throws: TernError.self) { try ProxyConfiguration("https://proxy.example") }
    }
}
