// NTLM through the Swift API and the `tern` command line, against ntlmserver.py (pyspnego's
// NTLM acceptor checking the responses against its user file): the scheme with a domain field
// or "DOMAIN\user", wrong credentials, the credential stores and the challenge handler, a proxy
// demanding NTLM, and --ntlm, --proxy-ntlm and --anyauth. Every served body says which
// connections the handshake's messages came on ("... conn=N ... negotiate_conn=N
// authenticate_conn=N").

import CTern
import Foundation
import HTTPTypes
import Testing
@testable import Tern

/// The number after " key=" in ntlmserver.py's facts line; -1 when absent.
private func fact(_ facts: String, _ key: String) -> Int {
    guard let range = facts.range(of: " \(key)=") else { return -1 }
    return Int(facts[range.upperBound...].prefix { $0.isNumber }) ?? -1
}

/// The handshake's messages came on the connection that was served.
private func oneConnection(_ facts: String) -> Bool {
    let conn = fact(facts, "conn")
    return conn > 0 && fact(facts, "negotiate_conn") == conn
        && fact(facts, "authenticate_conn") == conn
}

extension TernTests {
    @Suite struct NTLM {
        func isolated(_ url: URL, method: HTTPRequest.Method = .get) -> Request {
            let request = Request(url: url, method: method)
            request.callbackQueue = .global()
            request.cookieJar = CookieJar()
            request.sessionCredentialStore = SessionCredentialStore()
            return request
        }

        func origin(_ servers: Servers, _ path: String) throws -> URL {
            URL(string: "http://127.0.0.1:\(try servers.must("NTLM_PORT"))\(path)")!
        }

        func ntlmUser(_ servers: Servers, domain: String? = nil, persistence: Credential.Persistence = .none)
            throws -> Credential
        {
            Credential(
                user: try servers.must("NTLM_USER"), password: try servers.must("NTLM_PASSWORD"),
                domain: domain, persistence: persistence)
        }

        @Test func schemeNamesAndChallenges() {
            #expect(AuthenticationScheme(rawValue: "ntlm") == .ntlm)
            #expect(AuthenticationScheme.ntlm.rawValue == "NTLM")
            #expect(Request.AuthenticationSchemes.any.contains(.ntlm))
            #expect(!Request.AuthenticationSchemes.any.contains(.ntlmV1))
            #expect(Request.AuthenticationSchemes.ntlm.rawValue == TERN_AUTH_NTLM.rawValue)
            #expect(Request.AuthenticationSchemes.any.rawValue == TERN_AUTH_ANY.rawValue)
            // NTLM is the strongest offer, as in the engine.
            let strongest = AuthenticationCoordinator.strongestChallenge(
                in: [#"Basic realm="b""#, #"Digest realm="d", nonce="n""#, "NTLM"])
            #expect(strongest?.0 == .ntlm)
            #expect(AuthenticationCoordinator.strongestChallenge(in: ["NTLM TlRMTVNTUAACAAAA"])?.0 == .ntlm)
        }

        @Test func credentialDomain() throws {
            let plain = Credential(user: "alice", password: "pw")
            #expect(plain.engineUser == "alice")
            let withDomain = Credential(user: "alice", password: "secret-pw", domain: "CORP")
            #expect(withDomain.engineUser == "CORP\\alice")
            #expect(!withDomain.description.contains("secret-pw"))
            #expect(withDomain.description.contains("CORP"))
            // Files written before the domain existed still read.
            let old = #"{"user":"alice","password":"pw","persistence":"session"}"#
            let decoded = try JSONDecoder().decode(Credential.self, from: Data(old.utf8))
            #expect(decoded.domain == nil)
            #expect(decoded == plain)
            let again = try JSONDecoder().decode(Credential.self, from: JSONEncoder().encode(withDomain))
            #expect(again == withDomain)
        }

        @Test func domainFieldAndOneConnection() async throws {
            let servers = try Servers.get()
            let request = isolated(try origin(servers, "/swift"))
            request.credential = try ntlmUser(servers, domain: try servers.must("NTLM_DOMAIN"))
            request.authenticationSchemes = .ntlm
            let log = HopLog()
            log.attach(to: request)
            let response = try await request.response()
            #expect(response.statusCode == 200)
            let facts = response.string ?? ""
            #expect(facts.hasPrefix("ok user=TERNDOM\\alice "), "\(facts)")
            #expect(oneConnection(facts), "\(facts)")
            #expect(fact(facts, "requests") == 3)
            #expect(log.statuses == [401, 401, 200])
            #expect(response.sentRequestHead?.contains("Authorization: NTLM TlRMTVNTUAAD") == true)
        }

        @Test func domainInTheUserNameWithAnyScheme() async throws {
            let servers = try Servers.get()
            let request = isolated(try origin(servers, "/swift-any"))
            request.credential = Credential(
                user: "\(try servers.must("NTLM_DOMAIN"))\\\(try servers.must("NTLM_USER"))",
                password: try servers.must("NTLM_PASSWORD"), persistence: .none)
            let response = try await request.response()  // .any: NTLM included
            #expect(response.statusCode == 200)
            #expect(response.string?.hasPrefix("ok user=TERNDOM\\alice ") == true)
        }

        @Test func aRefusedCredentialEndsWithThe401() async throws {
            let servers = try Servers.get()
            let request = isolated(try origin(servers, "/wrong"))
            request.credential = Credential(
                user: "alice", password: "wrong", domain: "TERNDOM", persistence: .session)
            let response = try await request.response()
            #expect(response.statusCode == 401)
            #expect(response.string?.contains("NTLM authentication failed") == true)
            #expect(request.sessionCredentialStore?.allCredentials.isEmpty == true)
        }

        @Test func theSessionStoreKeepsTheNTLMCredential() async throws {
            let servers = try Servers.get()
            let store = SessionCredentialStore()
            // Engines of their own: a connection another test authenticated with the same
            // credentials would answer at once, and only a challenge answered stores them.
            let first = isolated(try origin(servers, "/first"))
            first.engine = try Engine()
            first.sessionCredentialStore = store
            first.credential = try ntlmUser(servers, domain: "TERNDOM", persistence: .session)
            #expect(try await first.response().statusCode == 200)
            let stored = store.mostRecentCredential(
                forOriginOf: try #require(ProtectionSpace(url: try origin(servers, "/"))))
            #expect(stored?.space.authenticationScheme == .ntlm)
            #expect(stored?.credential.domain == "TERNDOM")
            // A later request with no credential of its own is answered from the store.
            let second = isolated(try origin(servers, "/second"))
            second.engine = try Engine()
            second.sessionCredentialStore = store
            let log = HopLog()
            log.attach(to: second)
            let response = try await second.response()
            #expect(response.statusCode == 200)
            #expect(log.statuses == [401, 401, 200])
            #expect(response.string?.hasPrefix("ok user=TERNDOM\\alice ") == true)
        }

        @Test func theChallengeHandlerSuppliesAnNTLMCredential() async throws {
            let servers = try Servers.get()
            let right = try ntlmUser(servers, domain: "TERNDOM")
            let challenges = Recorder<AuthenticationChallenge>()
            let request = isolated(try origin(servers, "/handler"))
            request.authenticationHandler = { challenge in
                challenges.append(challenge)
                return .useCredential(
                    challenge.previousFailureCount == 0
                        ? Credential(user: right.user, password: "wrong", domain: "TERNDOM", persistence: .none)
                        : right)
            }
            let response = try await request.response()
            #expect(response.statusCode == 200)
            let facts = response.string ?? ""
            #expect(oneConnection(facts), "\(facts)")
            let seen = challenges.all
            #expect(seen.count == 2)
            #expect(seen.first?.protectionSpace.authenticationScheme == .ntlm)
            #expect(seen.last?.previousFailureCount == 1)
        }

        @Test func aProxyDemandingNTLM() async throws {
            let servers = try Servers.get()
            let request = isolated(servers.nginx("/1k.bin"))
            request.proxy = ProxyConfiguration(
                host: "127.0.0.1", port: Int(try servers.must("NTLM_PROXY_PORT"))!,
                credential: try ntlmUser(servers, domain: "TERNDOM"))
            request.proxyAuthenticationSchemes = .ntlm
            let log = HopLog()
            log.attach(to: request)
            let response = try await request.response()
            #expect(response.statusCode == 200)
            #expect(response.data == (try fixture(servers, "1k.bin")))
            let facts = response.headerFields[HTTPField.Name("X-NTLM-Proxy")!] ?? ""
            #expect(facts.hasPrefix("ok user=TERNDOM\\alice "), "\(facts)")
            #expect(oneConnection(facts), "\(facts)")
            #expect(log.statuses == [407, 407, 200])

            // https: the handshake on the CONNECT requests of the connection that becomes the
            // tunnel.
            let tls = isolated(url("https://localhost:\(try servers.must("TLS_PORT"))/1k.bin"))
            tls.engine = try Engine()
            tls.proxy = request.proxy
            tls.proxyAuthenticationSchemes = .ntlm
            tls.tls = TLSOptions(caFile: try servers.must("CA_PEM"))
            let tlsLog = HopLog()
            tlsLog.attach(to: tls)
            let tlsResponse = try await tls.response()
            #expect(tlsResponse.statusCode == 200)
            #expect(tlsResponse.data == (try fixture(servers, "1k.bin")))
            #expect(tlsLog.statuses == [407, 407, 200])
        }

        // MARK: - The command line

        @Test func ntlmFlagsOnTheCommandLine() throws {
            let servers = try Servers.get()
            let user = "TERNDOM\\\(try servers.must("NTLM_USER")):\(try servers.must("NTLM_PASSWORD"))"
            let url = try origin(servers, "/cli").absoluteString
            for flags in [["--ntlm"], ["--anyauth"], ["--basic", "--ntlm"]] {
                let run = try ternTool(["-sS"] + flags + ["-u", user, url])
                #expect(run.status == 0, "\(flags): \(run.stderr)")
                #expect(run.text.hasPrefix("ok user=TERNDOM\\alice "), "\(flags): \(run.text)")
                #expect(oneConnection(run.text), "\(flags): \(run.text)")
            }
            // Basic (the default) cannot answer an NTLM challenge: the 401 is the answer.
            let basic = try ternTool(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-u", user, url])
            #expect(basic.text == "401")
            // A refused password: exit 0 with the 401, or 22 with -f.
            let wrong = ["--ntlm", "-u", "TERNDOM\\alice:wrong", url]
            let plain = try ternTool(["-s", "-o", "/dev/null", "-w", "%{http_code}"] + wrong)
            #expect(plain.status == 0)
            #expect(plain.text == "401")
            #expect(try ternTool(["-s", "-f"] + wrong).status == 22)
            // Through a proxy demanding NTLM.
            let proxy = "http://127.0.0.1:\(try servers.must("NTLM_PROXY_PORT"))"
            let target = servers.nginx("/1k.bin").absoluteString
            let proxied = try ternTool(
                ["-sS", "-D", "-", "-o", "/dev/null", "-x", proxy, "--proxy-ntlm", "-U", user, target])
            #expect(proxied.status == 0, "\(proxied.stderr)")
            #expect(proxied.text.contains("X-NTLM-Proxy: ok user=TERNDOM\\alice "), "\(proxied.text)")
            let anyProxy = try ternTool(
                ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", proxy, "--proxy-anyauth", "-U", user, target])
            #expect(anyProxy.text == "200")
            let tunnel = try ternTool(
                ["-sS", "-o", "/dev/null", "-w", "%{http_code} %{http_connect}", "-x", proxy,
                 "--proxy-ntlm", "-U", user, "--cacert", try servers.must("CA_PEM"),
                 "https://localhost:\(try servers.must("TLS_PORT"))/1k.bin"])
            #expect(tunnel.text == "200 200", "\(tunnel.stderr)")
            let noNTLM = try ternTool(
                ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-x", proxy, "--proxy-digest", "-U", user, target])
            #expect(noNTLM.text == "407")
        }
    }
}
