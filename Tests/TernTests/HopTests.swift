// Hops through the Swift API, against real servers: redirects (faultserver's /redirect*,
// nginx's https → http), cookies across a redirect chain, Digest against Apache (MD5) and
// lighttpd (SHA-256, SHA-512-256), Basic against nginx, the credential stores and the
// challenge handler, squid as a forward proxy (absolute form and CONNECT, with and without
// proxy authentication), and no credential or cookie leaving its origin on a cross-origin
// redirect.

import Foundation
import HTTPTypes
import Testing
@testable import Tern

/// Head statuses and the `X-Echo-*` credentials each hop's response reported, in order.
final class HopLog: Sendable {
    struct Hop: Sendable, CustomStringConvertible {
        var url: String
        var status: Int
        var authorization: String?
        var cookie: String?
        var proxyAuthorization: String?

        var description: String {
            "\(status) \(url) auth=\(authorization ?? "-") cookie=\(cookie ?? "-")"
        }
    }

    private let hops = Locked<[Hop]>([])

    var all: [Hop] { hops.withLock { $0 } }
    var statuses: [Int] { all.map(\.status) }

    /// Installs itself as the request's head handler.
    func attach(to request: Request) {
        request.headHandler = { [self] request in
            let fields = request.responseHeaders
            hops.withLock {
                $0.append(Hop(
                    url: request.effectiveURL?.absoluteString ?? "?", status: request.statusCode,
                    authorization: fields[HTTPField.Name("X-Echo-Authorization")!],
                    cookie: fields[HTTPField.Name("X-Echo-Cookie")!],
                    proxyAuthorization: fields[HTTPField.Name("X-Echo-Proxy-Authorization")!]))
            }
            return true
        }
    }
}

extension TernTests {
    @Suite struct Hops {
        /// A request that keeps its cookies and credentials to itself: a private jar, no
        /// shared credential store (tests must not leak state into each other).
        func isolated(_ url: URL, method: HTTPRequest.Method = .get) -> Request {
            let request = Request(url: url, method: method)
            request.callbackQueue = .global()
            request.cookieJar = CookieJar()
            request.sessionCredentialStore = SessionCredentialStore()
            return request
        }

        func outcome(_ request: Request) async -> Result<Response, TernError> {
            do {
                return .success(try await request.response())
            } catch let error as TernError {
                return .failure(error)
            } catch {
                return .failure(TernError(code: .invalidArgument, message: "\(error)"))
            }
        }

        func url(_ string: String) -> URL { URL(string: string)! }

        func alice(_ servers: Servers, persistence: Credential.Persistence = .none) throws
            -> Credential
        {
            Credential(
                user: try servers.must("AUTH_USER"), password: try servers.must("AUTH_PASSWORD"),
                persistence: persistence)
        }

        // MARK: - Redirects

        @Test func followsRedirectsByDefaultAndReportsTheEffectiveURL() async throws {
            let servers = try Servers.get()
            let start = servers.fault("/redirect-chain?n=3")
            let request = isolated(start)
            #expect(request.maxRedirects == 20)
            let log = HopLog()
            log.attach(to: request)
            let response = try await request.response()
            #expect(response.statusCode == 200)
            #expect(response.redirectCount == 3)
            #expect(response.originalURL == start)
            #expect(response.url.absoluteString.hasSuffix("/redirect-chain?n=3&i=3&status=302"))
            #expect(request.effectiveURL == response.url)
            #expect(request.originalURL == start)
            #expect(request.redirectCount == 3)
            #expect(request.url == start, "the setting is left alone")
            #expect(log.statuses == [302, 302, 302, 200])
            // Each hop's head handler saw its own URL.
            #expect(log.all.first?.url == start.absoluteString)
            let echo = try Echo(response.data)
            #expect(echo.target == "/redirect-chain?n=3&i=3&status=302")
        }

        @Test func setCookieOnARedirectIsSentOnTheNextHop() async throws {
            let servers = try Servers.get()
            let request = isolated(servers.fault("/redirect-chain?n=3"))
            let jar = request.cookieJar
            let log = HopLog()
            log.attach(to: request)
            let response = try await request.response()
            // What each hop was sent, as its response echoes it.
            #expect(
                log.all.map(\.cookie) == [
                    nil, "chain0=0", "chain0=0; chain1=1", "chain0=0; chain1=1; chain2=2",
                ])
            #expect(try Echo(response.data).headers("Cookie") == ["chain0=0; chain1=1; chain2=2"])
            #expect(jar.allCookies.map(\.name).sorted() == ["chain0", "chain1", "chain2"])

            // Opted out: nothing stored, nothing sent.
            let off = isolated(servers.fault("/redirect-chain?n=2"))
            off.usesCookies = false
            let offResponse = try await off.response()
            #expect(try Echo(offResponse.data).headers("Cookie").isEmpty)
            #expect(off.cookieJar.allCookies.isEmpty)
        }

        /// A final response that comes whole in one read reaches only the engine's complete
        /// callback (tern_request_set_whole_at_completion, for requests without handlers): its
        /// cookies and byte counts are taken there, as its head's callback would have.
        @Test func aWholeResponseInOneReadKeepsItsCookiesAndProgress() async throws {
            let servers = try Servers.get()
            // /stall with send=len writes the head and the whole body at once.
            let target = "/stall?len=100&send=100&stall_ms=1000&cookie=final%3D1"
            let encoded = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let request = isolated(servers.fault("/redirect?status=302&cookie=hop%3D1&to=\(encoded)"))
            let jar = request.cookieJar
            let response = try await request.response()
            #expect(response.statusCode == 200)
            #expect(response.data.count == 100)
            #expect(response.redirectCount == 1)
            #expect(jar.allCookies.map(\.name).sorted() == ["final", "hop"])
            #expect(request.progress.bytesReceived == 100)
            #expect(request.progress.bytesExpected == 100)
            #expect(request.progress.percent == 100)
            #expect(request.progress.state == .download)
        }

        @Test func manualCookiesJoinTheJarsInOneField() async throws {
            let servers = try Servers.get()
            let request = isolated(servers.fault("/echo"))
            _ = request.cookieJar.store(setCookieHeaders: ["j=1"], from: servers.fault("/"))
            request.cookie = "m=1"
            #expect(try Echo(try await request.response().data).headers("Cookie") == ["j=1; m=1"])
            // Cookie fields (HTTPFields keeps one per pair) become one line too.
            let fields = isolated(servers.fault("/echo"))
            _ = fields.cookieJar.store(setCookieHeaders: ["j=1"], from: servers.fault("/"))
            fields.headerFields.append(HTTPField(name: .cookie, value: "h=1"))
            fields.headerFields.append(HTTPField(name: .cookie, value: "h=2"))
            #expect(
                try Echo(try await fields.response().data).headers("Cookie") == ["j=1; h=1; h=2"])
        }

        @Test func theSharedJarIsTheDefault() async throws {
            let servers = try Servers.get()
            // localhost and a path of its own keep this cookie away from every other test.
            let base = "http://localhost:\(servers.faultPort)/nest/hop-shared-jar"
            let set = Request(
                url: url("\(base)/redirect?to=echo&cookie=shared%3D1%3B%20Path%3D%2Fnest%2Fhop-shared-jar"))
            set.callbackQueue = .global()
            #expect(set.cookieJar === CookieJar.shared)
            #expect(set.usesCookies)
            defer { CookieJar.shared.removeAll(where: { $0.name == "shared" }) }
            let first = try await set.response()
            #expect(try Echo(first.data).headers("Cookie") == ["shared=1"])
            let again = Request(url: url("\(base)/echo"))
            again.callbackQueue = .global()
            #expect(try Echo(try await again.response().data).headers("Cookie") == ["shared=1"])
            let optedOut = Request(url: url("\(base)/echo"))
            optedOut.callbackQueue = .global()
            optedOut.usesCookies = false
            #expect(try Echo(try await optedOut.response().data).headers("Cookie").isEmpty)
        }

        @Test(arguments: [
            // status, policy, expected method on the next hop, body kept
            (303, Request.RedirectPolicy(), "GET", false),
            (302, Request.RedirectPolicy(), "GET", false),
            (301, Request.RedirectPolicy(), "GET", false),
            (307, Request.RedirectPolicy(), "POST", true),
            (308, Request.RedirectPolicy(), "POST", true),
            (301, Request.RedirectPolicy.rfc2616, "POST", true),
            (302, Request.RedirectPolicy.rfc2616, "POST", true),
            (303, Request.RedirectPolicy.rfc2616, "GET", false),
            (303, Request.RedirectPolicy.keepsPOSTOn303, "POST", true),
            (301, Request.RedirectPolicy.keepsPOSTOn301, "POST", true),
        ])
        func methodRulesAfterPOST(
            status: Int, policy: Request.RedirectPolicy, method: String, keepsBody: Bool
        ) async throws {
            let servers = try Servers.get()
            let request = isolated(
                servers.fault("/redirect?status=\(status)&to=%2Fecho"), method: .post)
            let body = Data("name=tern&hops=1".utf8)
            request.body = body
            request.redirectPolicy = policy
            let response = try await request.response()
            let echo = try Echo(response.data)
            #expect(echo.method == method)
            #expect(echo.bodyLength == (keepsBody ? body.count : 0))
            if keepsBody { #expect(echo.bodySHA256 == sha256(body)) }
            #expect(response.redirectCount == 1)
        }

        @Test func relativeLocationsResolvePerRFC3986() async throws {
            let servers = try Servers.get()
            for (location, path) in [
                ("..%2Fecho", "/nest/a/echo"), ("echo%3Fx%3D1", "/nest/a/b/echo"),
                ("%2F%2F127.0.0.1%3A\(servers.faultPort)%2Fnest%2Fc%2Fecho", "/nest/c/echo"),
                ("%3Fx%3D1", "/nest/a/b/redirect"),
            ] {
                let request = isolated(servers.fault("/nest/a/b/redirect?to=\(location)"))
                let response = try await request.response()
                #expect(response.statusCode == 200, "\(location)")
                #expect(try Echo(response.data).json["path"] as? String == path, "\(location)")
            }
        }

        @Test func tooManyRedirectsAndBadLocations() async throws {
            let servers = try Servers.get()
            let loop = isolated(servers.fault("/redirect-loop"))
            loop.maxRedirects = 4
            let log = HopLog()
            log.attach(to: loop)
            guard case .failure(let error) = await outcome(loop) else {
                Issue.record("a redirect loop succeeded")
                return
            }
            #expect(error == .tooManyRedirects)
            #expect(error.phase == .redirect)
            #expect(log.statuses.count == 5, "4 followed, the 5th refused: \(log.statuses)")

            let byDefault = isolated(servers.fault("/redirect-loop"))
            guard case .failure(let defaultError) = await outcome(byDefault) else {
                Issue.record("a redirect loop succeeded")
                return
            }
            #expect(defaultError == .tooManyRedirects)

            let bad = isolated(servers.fault("/redirect?to=http%3A%2F%2F%5Bbad"))
            guard case .failure(let badError) = await outcome(bad) else {
                Issue.record("a malformed Location was followed")
                return
            }
            #expect(badError == .redirectRefused)

            // Not following: the 3xx is the response.
            let none = isolated(servers.fault("/redirect-chain?n=2"))
            none.maxRedirects = 0
            let response = try await none.response()
            #expect(response.statusCode == 302)
            #expect(response.redirectCount == 0)
            #expect(response.url == response.originalURL)
        }

        @Test func httpsToHTTPIsRefusedUnlessAllowed() async throws {
            let servers = try Servers.get()
            let target = servers.https("TLS_PORT", "/to-http/1k.bin")
            let refused = isolated(target)
            refused.tls = TLSOptions(caFile: try servers.must("CA_PEM"))
            guard case .failure(let error) = await outcome(refused) else {
                Issue.record("an https → http redirect was followed")
                return
            }
            #expect(error == .redirectRefused)

            let allowed = isolated(target)
            allowed.tls = TLSOptions(caFile: try servers.must("CA_PEM"))
            allowed.redirectPolicy = .allowsDowngrade
            let response = try await allowed.response()
            #expect(response.statusCode == 200)
            #expect(response.data == (try fixture(servers, "1k.bin")))
            #expect(response.url == servers.nginx("/1k.bin"))
        }

        // MARK: - Nothing leaves its origin

        @Test(arguments: [false, true])
        func credentialsAndCookiesStayOnTheirOrigin(viaHeaderFields: Bool) async throws {
            let servers = try Servers.get()
            let fault2 = try servers.must("FAULT2_PORT")
            // Another port (same host) and another host.
            for other in [
                "http://127.0.0.1:\(fault2)/echo", "http://localhost:\(fault2)/echo",
            ] {
                let to = other.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                let request = isolated(
                    servers.fault("/redirect?to=\(to)&cookie=jar%3D1%3B%20Path%3D%2F"))
                if viaHeaderFields {
                    request.headerFields[.authorization] = "Bearer secret-token"
                    request.headerFields[.cookie] = "manual=1"
                } else {
                    request.credential = try alice(servers)
                    request.authenticationSchemes = .basic
                    request.cookie = "manual=1"
                }
                let log = HopLog()
                log.attach(to: request)
                let response = try await request.response()
                let echo = try Echo(response.data)
                #expect(response.redirectCount == 1)
                // The first hop had everything...
                let sent = log.all.first?.authorization ?? ""
                #expect(sent.hasPrefix(viaHeaderFields ? "Bearer " : "Basic "))
                #expect(log.all.first?.cookie == "manual=1")
                // ...the other origin gets none of it: only the jar's cookie, by the jar's
                // rules (RFC 6265 cookies ignore ports, so 127.0.0.1:other gets it).
                #expect(echo.headers("Authorization").isEmpty, "\(other)")
                let expected = other.contains("localhost") ? [] : ["jar=1"]
                #expect(echo.headers("Cookie") == expected, "\(other)")
            }
        }

        @Test func trustsCrossOriginForwardsThem() async throws {
            let servers = try Servers.get()
            let other = "http%3A%2F%2F127.0.0.1%3A\(try servers.must("FAULT2_PORT"))%2Fecho"
            let request = isolated(servers.fault("/redirect?to=\(other)"))
            request.credential = try alice(servers)
            request.authenticationSchemes = .basic
            request.cookie = "manual=1"
            request.redirectPolicy = .trustsCrossOrigin
            let echo = try Echo(try await request.response().data)
            #expect(echo.headers("Authorization").first?.hasPrefix("Basic ") == true)
            #expect(echo.headers("Cookie") == ["manual=1"])
        }

        // MARK: - Authentication

        @Test(arguments: [
            ("APACHE_PORT", "/digest/1k.bin"), ("LIGHTTPD_PORT", "/digest/1k.bin"),
            ("LIGHTTPD_PORT", "/digest-md5/1k.bin"), ("LIGHTTPD_PORT", "/digest-any/1k.bin"),
            ("LIGHTTPD_PORT", "/digest-sha512-256/1k.bin"),
        ])
        func digest(portKey: String, path: String) async throws {
            let servers = try Servers.get()
            let request = isolated(url("http://127.0.0.1:\(try servers.must(portKey))\(path)"))
            request.credential = try alice(servers)
            let log = HopLog()
            log.attach(to: request)
            let response = try await request.response()
            #expect(response.statusCode == 200)
            #expect(response.data == (try fixture(servers, "1k.bin")))
            #expect(log.statuses == [401, 200])
            #expect(response.sentRequestHead?.contains("Authorization: Digest ") == true)
        }

        @Test func digestResendsAnUploadWhole() async throws {
            let servers = try Servers.get()
            let body = pattern(300_000)
            let request = isolated(
                url("http://127.0.0.1:\(try servers.must("APACHE_PORT"))/nest/apache/echo"),
                method: .post)
            request.credential = try alice(servers)
            request.body = body
            let response = try await request.response()
            #expect(response.statusCode == 200)
            let echo = try Echo(response.data)
            #expect(echo.bodyLength == body.count)
            #expect(echo.bodySHA256 == sha256(body))
        }

        @Test func urlCredentialsAnswerDigest() async throws {
            let servers = try Servers.get()
            let user = try servers.must("AUTH_USER2")
            let password = try servers.must("AUTH_PASSWORD2")
                .addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let request = isolated(
                url("http://\(user):\(password)@127.0.0.1:\(try servers.must("APACHE_PORT"))/digest/1k.bin"))
            let response = try await request.response()
            #expect(response.statusCode == 200)
            #expect(response.url.user == nil)
        }

        @Test func basicAloneIsPreemptive() async throws {
            let servers = try Servers.get()
            let request = isolated(servers.nginx("/basic/1k.bin"))
            request.credential = try alice(servers)
            request.authenticationSchemes = .basic
            let log = HopLog()
            log.attach(to: request)
            let response = try await request.response()
            #expect(response.statusCode == 200)
            #expect(log.statuses == [200], "no 401 round trip")
        }

        @Test func aRefusedCredentialEndsWithThe401() async throws {
            let servers = try Servers.get()
            let request = isolated(
                url("http://127.0.0.1:\(try servers.must("APACHE_PORT"))/digest/1k.bin"))
            request.credential = Credential(user: "alice", password: "wrong", persistence: .session)
            let response = try await request.response()
            #expect(response.statusCode == 401)
            #expect(request.sessionCredentialStore?.allCredentials.isEmpty == true)
        }

        @Test func theSessionStoreAnswersLaterRequestsWithoutARoundTrip() async throws {
            let servers = try Servers.get()
            let store = SessionCredentialStore()
            // Basic (nginx): the first request learns realm and scheme from the 401...
            let first = isolated(servers.nginx("/basic/1k.bin"))
            first.sessionCredentialStore = store
            first.credential = try alice(servers, persistence: .session)
            let firstLog = HopLog()
            firstLog.attach(to: first)
            #expect(try await first.response().statusCode == 200)
            #expect(firstLog.statuses == [401, 200])
            let stored = store.mostRecentCredential(
                forOriginOf: try #require(ProtectionSpace(url: servers.nginx("/"))))
            #expect(stored?.space.realm == servers.env["BASIC_REALM"])
            #expect(stored?.space.authenticationScheme == .basic)
            // ...so the next one, with no credential of its own, sends Basic at once.
            let second = isolated(servers.nginx("/basic/64k.txt"))
            second.sessionCredentialStore = store
            let secondLog = HopLog()
            secondLog.attach(to: second)
            let response = try await second.response()
            #expect(response.statusCode == 200)
            #expect(secondLog.statuses == [200], "no 401 round trip")
            #expect(response.sentRequestHead?.contains("Authorization: Basic ") == true)

            // Digest (Apache) needs the server's nonce: one 401, answered from the store
            // without asking anybody.
            let digestURL = url("http://127.0.0.1:\(try servers.must("APACHE_PORT"))/digest/1k.bin")
            let third = isolated(digestURL)
            third.sessionCredentialStore = store
            third.credential = try alice(servers, persistence: .session)
            #expect(try await third.response().statusCode == 200)
            let fourth = isolated(digestURL)
            fourth.sessionCredentialStore = store
            let asked = Recorder<Int>()
            fourth.authenticationHandler = { _ in
                asked.append(1)
                return .cancel
            }
            #expect(try await fourth.response().statusCode == 200)
            #expect(asked.count == 0)
        }

        @Test func thePersistentStoreKeepsPermanentCredentialsInA0600File() async throws {
            let servers = try Servers.get()
            let path = temporaryPath("credentials.json")
            defer { try? FileManager.default.removeItem(atPath: path) }
            let file = try FileCredentialStore(fileURL: URL(fileURLWithPath: path))
            let request = isolated(
                url("http://127.0.0.1:\(try servers.must("LIGHTTPD_PORT"))/digest/1k.bin"))
            request.persistentCredentialStore = file
            request.credential = try alice(servers, persistence: .permanent)
            #expect(try await request.response().statusCode == 200)
            try file.synchronize()
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            let reread = try FileCredentialStore(fileURL: URL(fileURLWithPath: path))
            let entry = try #require(reread.allCredentials.first)
            #expect(entry.key.realm == servers.env["LIGHTTPD_REALM"])
            #expect(entry.value.user == servers.env["AUTH_USER"])

            // A later request, with a fresh session store, is answered from the file.
            let later = isolated(
                url("http://127.0.0.1:\(try servers.must("LIGHTTPD_PORT"))/digest/64k.txt"))
            later.persistentCredentialStore = reread
            #expect(try await later.response().statusCode == 200)
        }

        @Test func theChallengeHandlerSuppliesCredentials() async throws {
            let servers = try Servers.get()
            let right = try alice(servers)
            let challenges = Recorder<AuthenticationChallenge>()
            let request = isolated(
                url("http://127.0.0.1:\(try servers.must("APACHE_PORT"))/digest/1k.bin"))
            request.authenticationHandler = { challenge in
                challenges.append(challenge)
                // A wrong password first: the handler is asked again, told of the failure.
                return .useCredential(
                    challenge.previousFailureCount == 0
                        ? Credential(user: right.user, password: "wrong", persistence: .none)
                        : right)
            }
            let response = try await request.response()
            #expect(response.statusCode == 200)
            let seen = challenges.all
            #expect(seen.count == 2)
            #expect(seen.first?.protectionSpace.realm == servers.env["APACHE_REALM"])
            #expect(seen.first?.protectionSpace.authenticationScheme == .digest)
            #expect(seen.first?.protectionSpace.isProxy == false)
            #expect(seen.last?.previousFailureCount == 1)
            #expect(seen.last?.proposedCredential?.password == "wrong")
        }

        @Test func theChallengeHandlerCancelsOrDeclines() async throws {
            let servers = try Servers.get()
            let target = url("http://127.0.0.1:\(try servers.must("APACHE_PORT"))/digest/1k.bin")
            let cancelled = isolated(target)
            cancelled.authenticationHandler = { _ in .cancel }
            guard case .failure(let error) = await outcome(cancelled) else {
                Issue.record("a cancelled authentication succeeded")
                return
            }
            #expect(error == .authenticationFailed)

            let declined = isolated(target)
            declined.authenticationHandler = { _ in .performDefaultHandling }
            #expect(try await declined.response().statusCode == 401)
        }

        // MARK: - Proxies

        func squid(_ servers: Servers, auth: Bool = false, credential: Credential? = nil) throws
            -> ProxyConfiguration
        {
            ProxyConfiguration(
                host: "127.0.0.1",
                port: Int(try servers.must(auth ? "SQUID_AUTH_PORT" : "SQUID_PORT"))!,
                credential: credential)
        }

        func viaSquid(_ response: Response) -> Bool {
            (try? Echo(response.data).headers("Via").first?.contains("tern-squid")) == true
        }

        @Test func httpThroughTheProxyAndHTTPSThroughCONNECT() async throws {
            let servers = try Servers.get()
            let plain = isolated(servers.fault("/echo"))
            plain.proxy = try squid(servers)
            let response = try await plain.response()
            #expect(viaSquid(response))
            #expect(response.sentRequestHead?.hasPrefix(
                "GET http://127.0.0.1:\(servers.faultPort)/echo HTTP/1.1") == true)

            let tls = isolated(url("https://localhost:\(try servers.must("TLS_PORT"))/1k.bin"))
            tls.proxy = try squid(servers)
            tls.tls = TLSOptions(caFile: try servers.must("CA_PEM"))
            let tlsResponse = try await tls.response()
            #expect(tlsResponse.statusCode == 200)
            #expect(tlsResponse.data == (try fixture(servers, "1k.bin")))
            #expect(tlsResponse.tlsInfo != nil)
        }

        @Test(arguments: [Request.AuthenticationSchemes.any, .basic, .digest])
        func proxyAuthentication(schemes: Request.AuthenticationSchemes) async throws {
            let servers = try Servers.get()
            let credential = try alice(servers)
            let plain = isolated(servers.fault("/echo"))
            plain.proxy = try squid(servers, auth: true, credential: credential)
            plain.proxyAuthenticationSchemes = schemes
            let log = HopLog()
            log.attach(to: plain)
            let response = try await plain.response()
            #expect(response.statusCode == 200)
            #expect(viaSquid(response))
            #expect(log.statuses == (schemes == .basic ? [200] : [407, 200]))
            // squid consumes the proxy credentials: the origin never sees them.
            #expect(try Echo(response.data).headers("Proxy-Authorization").isEmpty)

            let tls = isolated(url("https://localhost:\(try servers.must("TLS_PORT"))/1k.bin"))
            tls.proxy = try squid(servers, auth: true, credential: credential)
            tls.proxyAuthenticationSchemes = schemes
            tls.tls = TLSOptions(caFile: try servers.must("CA_PEM"))
            let tlsResponse = try await tls.response()
            #expect(tlsResponse.statusCode == 200)
            #expect(tlsResponse.data == (try fixture(servers, "1k.bin")))
        }

        @Test func proxyRefusalsAndFailures() async throws {
            let servers = try Servers.get()
            // Plain http: the proxy's 407 is the response.
            let plain = isolated(servers.fault("/echo"))
            plain.proxy = try squid(servers, auth: true)
            #expect(try await plain.response().statusCode == 407)
            // https: the tunnel was refused.
            let tls = isolated(url("https://localhost:\(try servers.must("TLS_PORT"))/1k.bin"))
            tls.proxy = try squid(servers, auth: true)
            tls.tls = TLSOptions(caFile: try servers.must("CA_PEM"))
            guard case .failure(let error) = await outcome(tls) else {
                Issue.record("a refused CONNECT succeeded")
                return
            }
            #expect(error == .proxyError)
            // A wrong proxy password from the handler's point of view: asked, then cancelled.
            let asked = Recorder<ProtectionSpace>()
            let handled = isolated(servers.fault("/echo"))
            handled.proxy = try squid(servers, auth: true)
            handled.authenticationHandler = { challenge in
                asked.append(challenge.protectionSpace)
                return .cancel
            }
            guard case .failure(let cancelled) = await outcome(handled) else {
                Issue.record("a cancelled proxy authentication succeeded")
                return
            }
            #expect(cancelled == .authenticationFailed)
            #expect(asked.all.first?.isProxy == true)
            #expect(asked.all.first?.realm == servers.env["SQUID_REALM"])

            let unresolvable = isolated(servers.fault("/echo"))
            unresolvable.proxy = ProxyConfiguration(host: "tern-proxy.invalid", port: 3128)
            guard case .failure(let resolve) = await outcome(unresolvable) else {
                Issue.record("an unresolvable proxy worked")
                return
            }
            #expect(resolve == .resolveFailed)
        }

        @Test func proxyEnvironmentIsOptInPerRequestOrEngine() async throws {
            let servers = try Servers.get()
            let squidURL = "http://127.0.0.1:\(try servers.must("SQUID_PORT"))"
            // Variables apply only when given to a request (or an engine).
            let fromVariables = isolated(servers.fault("/echo"))
            fromVariables.proxyEnvironment = ProxyEnvironment(environment: ["http_proxy": squidURL])
            #expect(viaSquid(try await fromVariables.response()))
            let exempt = isolated(servers.fault("/echo"))
            exempt.proxyEnvironment = ProxyEnvironment(
                environment: ["http_proxy": squidURL, "no_proxy": "localhost,127.0.0.1"])
            #expect(!viaSquid(try await exempt.response()))
            let broken = isolated(servers.fault("/echo"))
            broken.proxyEnvironment = ProxyEnvironment(environment: ["http_proxy": "socks6://x"])
            guard case .failure(let error) = await outcome(broken) else {
                Issue.record("an unusable proxy variable was ignored")
                return
            }
            #expect(error == .unsupported)

            var proxies = ProxyEnvironment.direct
            proxies.explicitProxy = try ProxyConfiguration(squidURL)
            let engine = try Engine(configuration: .init(proxyEnvironment: proxies))
            let throughEngine = isolated(servers.fault("/echo"))
            throughEngine.engine = engine
            #expect(viaSquid(try await throughEngine.response()))
            let direct = isolated(servers.fault("/echo"))
            direct.engine = engine
            direct.proxyEnvironment = .direct
            #expect(!viaSquid(try await direct.response()))
            // The default engine reads no variables.
            #expect(Engine.shared.configuration.proxyEnvironment == .direct)
        }

        // MARK: - Rate

        @Test func maxReceiveSpeedSlowsTheBody() async throws {
            let servers = try Servers.get()
            let request = isolated(servers.nginx("/64k.txt"))
            request.maxReceiveSpeed = 96 * 1024
            let started = Date()
            let response = try await request.response()
            let seconds = Date().timeIntervalSince(started)
            #expect(response.data.count == 65536)
            #expect(seconds > 0.4, "64 KiB at 96 KiB/s took \(seconds) s")
            #expect(seconds < 5)
        }
    }
}
