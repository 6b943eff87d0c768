// CookieJar: RFC 6265 parsing, storage and matching without sockets; JSON and Netscape files;
// and interoperation with curl's cookie files against the fault server.

import Foundation
import Testing

@testable import Tern

/// A clock the tests move by hand.
final class TestClock: Sendable {
    /// Starts at the current second, so that cookies it dates stay valid for real jars too.
    private let now = Locked(
        Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)))

    var date: Date { now.withLock { $0 } }
    func advance(_ seconds: TimeInterval) { now.withLock { $0 += seconds } }
    var function: @Sendable () -> Date { { [self] in date } }
}

/// A URL from a string literal.
func url(_ string: String) -> URL { URL(string: string)! }

/// Percent-encodes everything but letters and digits (for faultserver query values).
func queryValue(_ text: String) -> String {
    text.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
}

extension TernTests {
    @Suite struct CookieJarTests {
        let clock = TestClock()
        var jar: CookieJar { CookieJar(clock: clock.function) }

        /// Names of the cookies the jar sends to `address`, in header order.
        func names(_ jar: CookieJar, _ address: String) -> [String] {
            jar.cookies(for: url(address)).map(\.name)
        }

        // MARK: Parsing

        @Test func hostOnlyAndDomainCookies() {
            let jar = self.jar
            jar.store(
                setCookieHeaders: ["host=1", "dom=2; Domain=.Example.COM"],
                from: url("http://www.example.com/"))
            let stored = Dictionary(uniqueKeysWithValues: jar.allCookies.map { ($0.name, $0) })
            #expect(stored["host"]?.isHostOnly == true)
            #expect(stored["host"]?.domain == "www.example.com")
            #expect(stored["dom"]?.isHostOnly == false)
            #expect(stored["dom"]?.domain == "example.com")

            #expect(names(jar, "http://www.example.com/") == ["host", "dom"])
            #expect(names(jar, "http://WWW.EXAMPLE.com/x") == ["host", "dom"])
            #expect(names(jar, "http://example.com/") == ["dom"])
            #expect(names(jar, "http://a.b.example.com/") == ["dom"])
            #expect(names(jar, "http://sub.www.example.com/") == ["dom"])
            #expect(names(jar, "http://notexample.com/").isEmpty)
            #expect(names(jar, "http://example.org/").isEmpty)
            // Cookies do not depend on the port.
            #expect(names(jar, "http://www.example.com:8080/") == ["host", "dom"])
        }

        @Test func domainMustMatchTheHost() {
            let jar = self.jar
            let from = url("http://www.example.com/")
            #expect(jar.store(setCookieHeaders: ["a=1; Domain=other.com"], from: from).isEmpty)
            #expect(jar.store(setCookieHeaders: ["a=1; Domain=ww.example.com"], from: from).isEmpty)
            #expect(
                jar.store(setCookieHeaders: ["a=1; Domain=sub.www.example.com"], from: from).isEmpty
            )
            // The host itself with a Domain attribute is a domain cookie.
            let same = jar.store(setCookieHeaders: ["a=1; Domain=www.example.com"], from: from)
            #expect(same.first?.isHostOnly == false)
            // An empty Domain is ignored: host-only.
            let empty = jar.store(setCookieHeaders: ["b=1; Domain="], from: from)
            #expect(empty.first?.isHostOnly == true)
        }

        @Test func bareTopLevelDomainsAreRefused() {
            let jar = self.jar
            #expect(
                jar.store(
                    setCookieHeaders: ["a=1; Domain=com"], from: url("http://www.example.com/")
                ).isEmpty)
            #expect(
                jar.store(setCookieHeaders: ["a=1; Domain=.com"], from: url("http://example.com/"))
                    .isEmpty)
            #expect(
                jar.store(
                    setCookieHeaders: ["a=1; Domain=localhost"], from: url("http://app.localhost/")
                ).isEmpty)
            // The bare name is the host itself: allowed, as a host-only cookie.
            let local = jar.store(
                setCookieHeaders: ["a=1; Domain=localhost"], from: url("http://localhost:8080/"))
            #expect(local.count == 1)
            #expect(local.first?.isHostOnly == true)
            #expect(names(jar, "http://app.localhost/").isEmpty)
        }

        @Test func ipAddressDomains() {
            let jar = self.jar
            let from = url("http://127.0.0.1:8080/")
            #expect(jar.store(setCookieHeaders: ["a=1; Domain=0.0.1"], from: from).isEmpty)
            #expect(jar.store(setCookieHeaders: ["a=1; Domain=127.0.0.2"], from: from).isEmpty)
            #expect(
                jar.store(
                    setCookieHeaders: ["a=1; Domain=127.0.0.1"], from: url("http://localhost/")
                ).isEmpty)
            let same = jar.store(setCookieHeaders: ["ip=1; Domain=127.0.0.1"], from: from)
            #expect(same.first?.isHostOnly == true)
            #expect(names(jar, "http://127.0.0.1/") == ["ip"])
            #expect(names(jar, "http://127.0.0.2/").isEmpty)
            jar.store(setCookieHeaders: ["v6=1"], from: url("http://[::1]:9/"))
            #expect(names(jar, "http://[::1]/") == ["v6"])
        }

        @Test func defaultPathAndPathMatching() {
            let jar = self.jar
            jar.store(
                setCookieHeaders: ["deep=1"], from: url("http://h.example/docs/web/page.html"))
            jar.store(setCookieHeaders: ["top=1"], from: url("http://h.example/page"))
            jar.store(setCookieHeaders: ["rel=1; Path=relative"], from: url("http://h.example/a/b"))
            jar.store(setCookieHeaders: ["slash=1; Path=/docs/"], from: url("http://h.example/"))
            let paths = Dictionary(uniqueKeysWithValues: jar.allCookies.map { ($0.name, $0.path) })
            #expect(paths == ["deep": "/docs/web", "top": "/", "rel": "/a", "slash": "/docs/"])

            #expect(Cookie.pathMatches(requestPath: "/docs/web", cookiePath: "/docs/web"))
            #expect(Cookie.pathMatches(requestPath: "/docs/web/", cookiePath: "/docs/web"))
            #expect(Cookie.pathMatches(requestPath: "/docs/web/x", cookiePath: "/docs/web"))
            #expect(!Cookie.pathMatches(requestPath: "/docs/webx", cookiePath: "/docs/web"))
            #expect(!Cookie.pathMatches(requestPath: "/docs", cookiePath: "/docs/web"))
            #expect(!Cookie.pathMatches(requestPath: "/docs", cookiePath: "/docs/"))
            #expect(Cookie.pathMatches(requestPath: "/docs/x", cookiePath: "/docs/"))

            #expect(names(jar, "http://h.example/docs/web/x?q=1") == ["deep", "slash", "top"])
            #expect(names(jar, "http://h.example/docs") == ["top"])
            #expect(names(jar, "http://h.example") == ["top"])
            #expect(names(jar, "http://h.example/a/c") == ["rel", "top"])
        }

        @Test func secureCookies() {
            let jar = self.jar
            #expect(
                jar.store(setCookieHeaders: ["s=1; Secure"], from: url("https://example.com/"))
                    .count == 1)
            #expect(names(jar, "https://example.com/") == ["s"])
            #expect(names(jar, "http://example.com/").isEmpty)
            // Only a secure origin may set a Secure cookie...
            #expect(
                jar.store(setCookieHeaders: ["t=1; Secure"], from: url("http://example.com/"))
                    .isEmpty)
            // ... and an insecure one cannot overwrite it.
            #expect(jar.store(setCookieHeaders: ["s=2"], from: url("http://example.com/")).isEmpty)
            #expect(jar.allCookies.map(\.value) == ["1"])
            // A secure origin can.
            #expect(
                jar.store(setCookieHeaders: ["s=3"], from: url("https://example.com/")).count == 1)
            #expect(names(jar, "http://example.com/") == ["s"])
        }

        @Test func loopbackIsASecureContextLikeCurl() {
            let jar = self.jar
            #expect(
                jar.store(setCookieHeaders: ["s=1; Secure"], from: url("http://127.0.0.1:9/")).count
                    == 1)
            #expect(
                jar.store(setCookieHeaders: ["s=1; Secure"], from: url("http://localhost:9/")).count
                    == 1)
            #expect(names(jar, "http://127.0.0.1/") == ["s"])
            #expect(
                jar.store(setCookieHeaders: ["s=1; Secure"], from: url("http://10.0.0.1/")).isEmpty)

            let strict = CookieJar(treatsLoopbackAsSecure: false)
            #expect(
                strict.store(setCookieHeaders: ["s=1; Secure"], from: url("http://127.0.0.1:9/"))
                    .isEmpty)
            strict.add(Cookie(name: "m", value: "1", domain: "127.0.0.1", isSecure: true))
            #expect(strict.cookies(for: url("http://127.0.0.1/")).isEmpty)
            #expect(strict.cookies(for: url("https://127.0.0.1/")).map(\.name) == ["m"])
        }

        @Test func cookiePrefixes() {
            let jar = self.jar
            let https = url("https://www.example.com/a/b")
            #expect(jar.store(setCookieHeaders: ["__Secure-a=1"], from: https).isEmpty)
            #expect(jar.store(setCookieHeaders: ["__Secure-a=1; Secure"], from: https).count == 1)
            // Without Path=/ (the default path here is /a).
            #expect(jar.store(setCookieHeaders: ["__Host-b=1; Secure"], from: https).isEmpty)
            #expect(
                jar.store(
                    setCookieHeaders: ["__Host-b=1; Secure; Path=/; Domain=example.com"],
                    from: https
                ).isEmpty)
            #expect(
                jar.store(setCookieHeaders: ["__Host-b=1; Secure; Path=/"], from: https).count == 1)
        }

        @Test func maxAgeAndExpires() {
            let jar = self.jar
            let from = url("http://example.com/")
            let stored = jar.store(
                setCookieHeaders: [
                    "age=1; Max-Age=100",
                    "exp=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT",
                    "both=1; Max-Age=100; Expires=Thu, 01 Jan 1970 00:00:00 GMT",
                    "both2=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Max-Age=-1",
                    "bad=1; Max-Age=1e3",
                    "session=1",
                ], from: from)
            #expect(stored.map(\.name) == ["age", "exp", "both", "bad", "session"])
            let byName = Dictionary(uniqueKeysWithValues: stored.map { ($0.name, $0) })
            #expect(byName["age"]?.expiresDate == clock.date.addingTimeInterval(100))
            #expect(byName["exp"]?.expiresDate == Date(timeIntervalSince1970: 2_139_722_880))
            #expect(byName["both"]?.expiresDate == clock.date.addingTimeInterval(100))
            #expect(byName["bad"]?.isSessionOnly == true)
            #expect(byName["session"]?.isSessionOnly == true)

            clock.advance(101)
            #expect(Set(names(jar, "http://example.com/")) == ["exp", "bad", "session"])
            // A past expiry or Max-Age=0 deletes.
            jar.store(
                setCookieHeaders: [
                    "exp=x; Max-Age=0", "bad=x; Expires=Sun, 06 Nov 1994 08:49:37 GMT",
                ], from: from)
            #expect(names(jar, "http://example.com/") == ["session"])
        }

        @Test func lenientDates() {
            let epoch = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT
            #expect(Cookie.parseDate("Sun, 06 Nov 1994 08:49:37 GMT") == epoch)
            #expect(Cookie.parseDate("Sunday, 06-Nov-94 08:49:37 GMT") == epoch)
            #expect(Cookie.parseDate("Sun Nov  6 08:49:37 1994") == epoch)
            #expect(Cookie.parseDate("6 november 1994 8:49:37") == epoch)
            #expect(Cookie.parseDate("1994-Nov-06 08:49:37 UTC") == epoch)  // any order
            #expect(Cookie.parseDate("06 Nov 1994 08:49:37 +0100") == epoch)  // zones ignored
            #expect(
                Cookie.parseDate("Thu, 01 Jan 70 00:00:00 GMT") == Date(timeIntervalSince1970: 0))
            #expect(
                Cookie.parseDate("Mon, 01 Jan 69 00:00:00 GMT")
                    == Date(timeIntervalSince1970: 3_124_224_000))
            #expect(
                Cookie.parseDate("29 Feb 2024 12:00:00")
                    == Date(timeIntervalSince1970: 1_709_208_000))
            #expect(Cookie.parseDate("30 Feb 2024 12:00:00") == nil)
            #expect(Cookie.parseDate("29 Feb 2023 12:00:00") == nil)
            #expect(Cookie.parseDate("06 Nov 1994 24:00:00") == nil)
            #expect(Cookie.parseDate("06 Nov 1994 23:60:00") == nil)
            #expect(Cookie.parseDate("06 Nov 1994") == nil)
            #expect(Cookie.parseDate("06 Nov 1600 00:00:00") == nil)
            #expect(Cookie.parseDate("32 Nov 1994 00:00:00") == nil)
            #expect(Cookie.parseDate("") == nil)
        }

        @Test func attributesAndMalformedHeaders() {
            let from = url("https://example.com/")
            let cookie = Cookie(
                setCookieHeader: "  id = \"a b\" ; HTTPONLY; samesite=LAX; PATH=/x; secure",
                from: from)
            #expect(cookie?.name == "id")
            #expect(cookie?.value == "\"a b\"")
            #expect(cookie?.isHTTPOnly == true)
            #expect(cookie?.isSecure == true)
            #expect(cookie?.sameSitePolicy == .lax)
            #expect(cookie?.path == "/x")
            #expect(
                Cookie(setCookieHeader: "a=1; SameSite=Sideways", from: from)?.sameSitePolicy == nil
            )
            #expect(
                Cookie(setCookieHeader: "a=1; SameSite=None; Secure", from: from)?.sameSitePolicy
                    == Cookie.SameSitePolicy.none)
            #expect(Cookie(setCookieHeader: "a=", from: from)?.value == "")
            #expect(Cookie(setCookieHeader: "a=b=c", from: from)?.value == "b=c")
            #expect(Cookie(setCookieHeader: "noequals", from: from) == nil)
            #expect(Cookie(setCookieHeader: "=value", from: from) == nil)
            #expect(Cookie(setCookieHeader: "a=1\u{1}", from: from) == nil)
            #expect(
                Cookie(setCookieHeader: "a=" + String(repeating: "x", count: 4096), from: from)
                    == nil)
            #expect(
                Cookie(
                    setCookieHeader: "a=1; Path=/" + String(repeating: "x", count: 2000), from: from
                )?.path == "/")
            #expect(Cookie(setCookieHeader: "a=1", from: URL(fileURLWithPath: "/tmp")) == nil)
            let last = Cookie(
                setCookieHeader:
                    "a=1; Path=/one; Path=/two; Domain=x.example.com; Domain=example.com",
                from: url("http://x.example.com/"))
            #expect(last?.path == "/two")
            #expect(last?.domain == "example.com")
        }

        @Test func replacementKeepsTheCreationDate() {
            let jar = self.jar
            let from = url("http://example.com/a/b")
            let first = jar.store(setCookieHeaders: ["a=1; Path=/"], from: from)[0]
            clock.advance(10)
            jar.store(setCookieHeaders: ["b=1; Path=/", "a=2; Path=/", "a=3; Path=/a"], from: from)
            let all = jar.allCookies
            #expect(all.count == 3)
            let replaced = all.first { $0.name == "a" && $0.path == "/" }
            #expect(replaced?.value == "2")
            #expect(replaced?.creationDate == first.creationDate)
            // a (created first, replaced later) still goes before b on the same path length.
            #expect(jar.cookieHeader(for: url("http://example.com/a/x")) == "a=3; a=2; b=1")
            // Host-only and domain cookies with the same name, domain and path replace each other.
            jar.store(setCookieHeaders: ["a=4; Path=/; Domain=example.com"], from: from)
            #expect(
                jar.allCookies.filter { $0.name == "a" && $0.path == "/" }.map(\.isHostOnly) == [
                    false
                ])
        }

        @Test func headerOrder() {
            let jar = self.jar
            let from = url("http://example.com/a/b/c")
            jar.store(setCookieHeaders: ["root=1; Path=/"], from: from)
            clock.advance(1)
            jar.store(
                setCookieHeaders: ["ab=1; Path=/a/b", "a=1; Path=/a", "root2=1; Path=/"], from: from
            )
            clock.advance(1)
            jar.store(setCookieHeaders: ["ab2=1; Path=/a/b"], from: from)
            #expect(
                jar.cookieHeader(for: url("http://example.com/a/b/c"))
                    == "ab=1; ab2=1; a=1; root=1; root2=1")
            #expect(jar.cookieHeader(for: url("http://other.example/")) == nil)
        }

        @Test func manualCookies() {
            let jar = self.jar
            let added = jar.add(
                cookieHeader: "n=v; n2 = v2;bare; =x; n3=a=b", for: url("http://example.com/x/y"))
            #expect(added.map(\.name) == ["n", "n2", "n3"])
            #expect(added.allSatisfy { $0.isHostOnly && $0.path == "/" && $0.isSessionOnly })
            #expect(jar.cookieHeader(for: url("http://example.com/")) == "n=v; n2=v2; n3=a=b")
            #expect(jar.cookieHeader(for: url("http://www.example.com/")) == nil)

            jar.add(Cookie(name: "m", value: "1", domain: ".Example.com", isHostOnly: false))
            #expect(names(jar, "http://www.example.com/") == ["m"])
            jar.remove(Cookie(name: "m", value: "", domain: "example.com"))
            #expect(names(jar, "http://www.example.com/").isEmpty)
            jar.add(Cookie(name: "", value: "1", domain: "example.com"))
            #expect(jar.allCookies.count == 3)
            jar.removeAll()
            #expect(jar.allCookies.isEmpty)
        }

        @Test func removeSessionAndExpired() {
            let jar = self.jar
            jar.store(
                setCookieHeaders: ["s=1", "p=1; Max-Age=60", "q=1; Max-Age=600"],
                from: url("http://example.com/"))
            clock.advance(61)
            jar.removeExpiredCookies()
            #expect(Set(jar.allCookies.map(\.name)) == ["s", "q"])
            jar.removeSessionCookies()
            #expect(jar.allCookies.map(\.name) == ["q"])
        }

        @Test func evictionKeepsRecentlyUsedCookies() {
            let jar = self.jar
            let from = url("http://example.com/")
            let limit = CookieJar.maximumCookiesPerDomain
            jar.store(setCookieHeaders: (0..<10).map { "c\($0)=1; Path=/keep" }, from: from)
            clock.advance(1)
            jar.store(setCookieHeaders: (10..<limit).map { "c\($0)=1; Path=/other" }, from: from)
            clock.advance(1)
            #expect(jar.cookies(for: url("http://example.com/keep")).count == 10)  // used now
            clock.advance(1)
            jar.store(
                setCookieHeaders: (limit..<limit + 5).map { "c\($0)=1; Path=/other" }, from: from)
            let all = Set(jar.allCookies.map(\.name))
            #expect(all.count == CookieJar.maximumCookiesPerDomain)
            #expect((0..<10).allSatisfy { all.contains("c\($0)") })
            #expect(!all.contains("c10") && !all.contains("c14") && all.contains("c15"))
        }

        @Test func concurrentUse() async {
            let jar = CookieJar()
            await withTaskGroup(of: Void.self) { group in
                for task in 0..<8 {
                    group.addTask {
                        for i in 0..<200 {
                            jar.store(
                                setCookieHeaders: ["t\(task)-\(i % 20)=\(i)"],
                                from: url("http://example.com/"))
                            _ = jar.cookieHeader(for: url("http://example.com/"))
                        }
                    }
                }
            }
            #expect(jar.allCookies.count == 160)
        }

        // MARK: Files

        @Test func jsonRoundTrip() throws {
            let jar = self.jar
            jar.store(
                setCookieHeaders: [
                    "p=1; Max-Age=3600; Path=/a; HttpOnly; SameSite=Strict",
                    "d=2; Max-Age=3600; Domain=example.com; Secure",
                    "s=3",
                ], from: url("https://www.example.com/"))
            let path = temporaryPath("cookies.json")
            defer { try? FileManager.default.removeItem(atPath: path) }
            try jar.save(to: URL(fileURLWithPath: path))
            let mode =
                try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            let text = try String(contentsOfFile: path, encoding: .utf8)
            #expect(text.contains("\"format\" : \"tern-cookie-jar\""))

            let loaded = try CookieJar(contentsOf: URL(fileURLWithPath: path))
            #expect(Set(loaded.allCookies) == Set(jar.allCookies.filter { !$0.isSessionOnly }))
            #expect(loaded.cookieHeader(for: url("https://www.example.com/a")) == "p=1; d=2")

            try jar.save(to: URL(fileURLWithPath: path), includingSessionCookies: true)
            let withSession = try CookieJar(contentsOf: URL(fileURLWithPath: path))
            #expect(Set(withSession.allCookies) == Set(jar.allCookies))
            let leftovers = try FileManager.default.contentsOfDirectory(
                atPath: (path as NSString).deletingLastPathComponent
            )
            .filter { $0.hasPrefix("." + (path as NSString).lastPathComponent + ".tmp-") }
            #expect(leftovers.isEmpty)
        }

        @Test func badJarFiles() throws {
            let path = temporaryPath("bad.json")
            defer { try? FileManager.default.removeItem(atPath: path) }
            #expect(throws: TernError.fileReadFailed) {
                try CookieJar(contentsOf: URL(fileURLWithPath: path))
            }
            try Data("not json".utf8).write(to: URL(fileURLWithPath: path))
            #expect(throws: TernError.fileReadFailed) {
                try CookieJar(contentsOf: URL(fileURLWithPath: path))
            }
            try Data(#"{"format":"tern-cookie-jar","version":99,"cookies":[]}"#.utf8).write(
                to: URL(fileURLWithPath: path))
            #expect(throws: TernError.fileReadFailed) {
                try CookieJar(contentsOf: URL(fileURLWithPath: path))
            }
            // A failed save leaves nothing behind and says where.
            let error = #expect(throws: TernError.self) {
                try CookieJar().save(to: URL(fileURLWithPath: "/nonexistent-dir/x.json"))
            }
            #expect(error?.code == .fileWriteFailed)
            #expect(error?.message.contains("/nonexistent-dir/x.json") == true)
        }

        @Test func netscapeRoundTrip() throws {
            let jar = self.jar
            jar.store(
                setCookieHeaders: [
                    "host=1; Max-Age=3600",
                    "dom=2; Domain=example.com; Path=/p; Secure; Max-Age=7200",
                    "http=3; HttpOnly",
                    "empty=",
                ], from: url("https://www.example.com/"))
            let text = jar.netscapeCookieFileText()
            let lines = text.split(separator: "\n").map(String.init)
            #expect(lines.first == "# Netscape HTTP Cookie File")
            let expiry1 = Int(clock.date.timeIntervalSince1970) + 3600
            let expiry2 = Int(clock.date.timeIntervalSince1970) + 7200
            #expect(lines.contains("www.example.com\tFALSE\t/\tFALSE\t\(expiry1)\thost\t1"))
            #expect(lines.contains(".example.com\tTRUE\t/p\tTRUE\t\(expiry2)\tdom\t2"))
            #expect(lines.contains("#HttpOnly_www.example.com\tFALSE\t/\tFALSE\t0\thttp\t3"))
            #expect(lines.contains("www.example.com\tFALSE\t/\tFALSE\t0\tempty\t"))

            let path = temporaryPath("cookies.txt")
            defer { try? FileManager.default.removeItem(atPath: path) }
            try jar.saveNetscapeCookieFile(to: URL(fileURLWithPath: path))
            let mode =
                try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            let loaded = CookieJar(clock: clock.function)
            #expect(try loaded.loadNetscapeCookieFile(at: URL(fileURLWithPath: path)) == 4)
            func key(_ c: Cookie) -> String {
                "\(c.name) \(c.value) \(c.domain) \(c.path) \(c.isHostOnly) \(c.isSecure) "
                    + "\(c.isHTTPOnly) "
                    + "\(c.expiresDate.map { Int($0.timeIntervalSince1970) } ?? 0)"
            }
            #expect(Set(loaded.allCookies.map(key)) == Set(jar.allCookies.map(key)))

            let junked = CookieJar(clock: clock.function)
            #expect(
                try junked.loadNetscapeCookieFile(
                    at: URL(fileURLWithPath: path), includingSessionCookies: false) == 2)
        }

        @Test func netscapeParsingLikeCurl() {
            let jar = self.jar
            let now = Int(clock.date.timeIntervalSince1970)
            let text = """
                # Netscape HTTP Cookie File
                # a comment\r
                \r
                .example.com\tTRUE\t/\tFALSE\t\(now + 100)\tdom\tv 1\r
                #HttpOnly_Example.com\tFALSE\t/x\tTRUE\t0\tho\tv2
                example.com\tFALSE\t/\tFALSE\t\(now - 1)\texpired\tv
                example.com\tFALSE\t/\tFALSE\t0\tnovalue
                example.com\tFALSE\tFALSE\t0\toldform\tv
                example.com\tFALSE\t/\tFALSE\tsoon\tbadexpiry\tv
                too\tfew\tfields
                .127.0.0.1\tTRUE\t/\tFALSE\t0\tip\tv

                """
            #expect(jar.addNetscapeCookies(text) == 5)
            let byName = Dictionary(uniqueKeysWithValues: jar.allCookies.map { ($0.name, $0) })
            #expect(Set(byName.keys) == ["dom", "ho", "novalue", "oldform", "ip"])
            #expect(byName["dom"]?.domain == "example.com")
            #expect(byName["dom"]?.isHostOnly == false)
            #expect(byName["dom"]?.value == "v 1")
            #expect(byName["ho"]?.isHTTPOnly == true)
            #expect(byName["ho"]?.isSecure == true)
            #expect(byName["ho"]?.domain == "example.com")
            #expect(byName["ho"]?.path == "/x")
            #expect(byName["novalue"]?.value == "")
            #expect(byName["oldform"]?.path == "/")
            #expect(byName["ip"]?.isHostOnly == true)
            #expect(byName["ip"]?.domain == "127.0.0.1")
            #expect(jar.cookieHeader(for: url("http://www.example.com/")) == "dom=v 1")
        }

        // MARK: Interoperation with curl

        static let curl = "/usr/bin/curl"
        static var hasCurl: Bool { FileManager.default.isExecutableFile(atPath: curl) }

        /// The faultserver URL that answers 200 with these Set-Cookie fields.
        func setCookieURL(_ servers: Servers, path: String = "/status/200", _ headers: [String])
            -> URL
        {
            let query = headers.map { "header=" + queryValue("Set-Cookie:" + $0) }.joined(
                separator: "&")
            return servers.fault("\(path)?\(query)")
        }

        @Test(.enabled(if: hasCurl)) func readsACookieFileCurlWrote() throws {
            let servers = try Servers.get()
            let file = temporaryPath("curl-jar.txt")
            defer { try? FileManager.default.removeItem(atPath: file) }
            let headers = [
                "plain=1; Path=/",
                "lasting=2; Max-Age=3600; Path=/",
                "only=3; HttpOnly; Path=/",
                "sec=4; Secure; Path=/",
                "scoped=5; Path=/nest",
                "dflt=6",
                "ipdom=7; Domain=127.0.0.1; Path=/",
            ]
            let setURL = setCookieURL(servers, headers)
            let result = run(
                Self.curl, ["-s", "-o", "/dev/null", "-c", file, setURL.absoluteString])
            #expect(result.status == 0, "\(result.output)")

            let jar = CookieJar()
            let loaded = try jar.loadNetscapeCookieFile(at: URL(fileURLWithPath: file))
            #expect(loaded == headers.count)
            // The same cookies as the jar makes from the same fields.
            let direct = CookieJar()
            direct.store(setCookieHeaders: headers, from: setURL)
            let echo = servers.fault("/nest/a/echo")
            #expect(
                Set(jar.cookies(for: echo).map(\.description))
                    == Set(direct.cookies(for: echo).map(\.description)))
            let byName = Dictionary(uniqueKeysWithValues: jar.allCookies.map { ($0.name, $0) })
            #expect(byName["only"]?.isHTTPOnly == true)
            #expect(byName["sec"]?.isSecure == true)
            #expect(byName["lasting"]?.isSessionOnly == false)
            #expect(byName["plain"]?.isSessionOnly == true)
            #expect(byName["ipdom"]?.isHostOnly == true)

            // What curl sends from that file is what the jar would send.
            let sent = run(
                Self.curl, ["-s", "-o", "/dev/null", "-D", "-", "-b", file, echo.absoluteString])
            #expect(
                Set(echoedCookies(sent.output)) == Set(jar.cookies(for: echo).map(\.description)))
        }

        @Test(.enabled(if: hasCurl)) func curlSendsACookieFileTheJarWrote() throws {
            let servers = try Servers.get()
            let jar = CookieJar()
            let from = servers.fault("/status/200")
            jar.store(
                setCookieHeaders: [
                    "root=1; Path=/",
                    "lasting=2; Max-Age=3600; Path=/",
                    "only=3; HttpOnly; Path=/",
                    "sec=4; Secure; Path=/",
                    "nest=5; Path=/nest",
                    "deeper=6; Path=/nest/a",
                    "elsewhere=7; Path=/other",
                    "gone=8; Path=/; Max-Age=0",
                ], from: from)
            jar.add(Cookie(name: "foreign", value: "9", domain: "example.com"))
            let file = temporaryPath("tern-jar.txt")
            defer { try? FileManager.default.removeItem(atPath: file) }
            try jar.saveNetscapeCookieFile(to: URL(fileURLWithPath: file))

            let echo = servers.fault("/nest/a/echo")
            let sent = run(
                Self.curl, ["-s", "-o", "/dev/null", "-D", "-", "-b", file, echo.absoluteString])
            #expect(sent.status == 0, "\(sent.output)")
            let curlCookies = echoedCookies(sent.output)
            let ours = jar.cookies(for: echo).map(\.description)
            #expect(Set(curlCookies) == Set(ours))
            #expect(Set(ours) == ["root=1", "lasting=2", "only=3", "sec=4", "nest=5", "deeper=6"])
            // Both put longer paths first.
            #expect(curlCookies.prefix(2) == ["deeper=6", "nest=5"])
            #expect(ours.prefix(2) == ["deeper=6", "nest=5"])

            // curl reads the file back and writes it again; the jar reads curl's copy unchanged.
            let copy = temporaryPath("curl-copy.txt")
            defer { try? FileManager.default.removeItem(atPath: copy) }
            _ = run(
                Self.curl,
                [
                    "-s", "-o", "/dev/null", "-b", file, "-c", copy,
                    servers.fault("/status/204").absoluteString,
                ])
            let reread = CookieJar()
            try reread.loadNetscapeCookieFile(at: URL(fileURLWithPath: copy))
            func key(_ c: Cookie) -> String {
                "\(c.name)=\(c.value) \(c.domain) \(c.path) \(c.isHostOnly) \(c.isSecure) "
                    + "\(c.isHTTPOnly) \(c.isSessionOnly)"
            }
            #expect(Set(reread.allCookies.map(key)) == Set(jar.allCookies.map(key)))
        }

        @Test(.enabled(if: hasCurl)) func redirectChainCookiesMatchCurl() throws {
            let servers = try Servers.get()
            let file = temporaryPath("chain.txt")
            defer { try? FileManager.default.removeItem(atPath: file) }
            let start = servers.fault("/redirect-chain?n=3")
            let result = run(
                Self.curl, ["-s", "-o", "/dev/null", "-L", "-c", file, start.absoluteString])
            #expect(result.status == 0, "\(result.output)")
            let fromCurl = CookieJar()
            try fromCurl.loadNetscapeCookieFile(at: URL(fileURLWithPath: file))
            // The jar fed every hop's Set-Cookie gives the same cookies.
            let jar = CookieJar()
            for i in 0..<3 {
                jar.store(
                    setCookieHeaders: ["chain\(i)=\(i); Path=/"],
                    from: servers.fault("/redirect-chain?n=3&i=\(i)"))
            }
            let echo = servers.fault("/echo")
            #expect(fromCurl.cookieHeader(for: echo) == jar.cookieHeader(for: echo))
            #expect(jar.cookieHeader(for: echo) == "chain0=0; chain1=1; chain2=2")
        }

        /// The cookies in the X-Echo-Cookie header of a response head, in order.
        func echoedCookies(_ head: String) -> [String] {
            for line in head.split(whereSeparator: \.isNewline) {
                let parts = line.split(separator: ":", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased() == "x-echo-cookie" {
                    return parts[1].split(separator: ";").map {
                        $0.trimmingCharacters(in: .whitespaces)
                    }
                }
            }
            return []
        }
    }
}
