// The RFC 9111 rules of the cache, case by case, without I/O: storability, freshness, age,
// Vary, request and response directives, validation, 304 updates, invalidation, policies.

import Foundation
import HTTPTypes
import Testing
@testable import Tern

/// A fixed clock: t0 and seconds after it.
private let t0 = Date(timeIntervalSince1970: 1_700_000_000)
private func at(_ seconds: TimeInterval) -> Date { t0.addingTimeInterval(seconds) }

private func fields(_ pairs: [(String, String)]) -> HTTPFields {
    var result = HTTPFields()
    for (name, value) in pairs { result.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
    return result
}

/// A response received at t0 (sent at t0 too), with a Date of t0 unless given.
private func stored(
    _ pairs: [(String, String)], status: Int = 200, date: Bool = true, request: [(String, String)] = [],
    received: TimeInterval = 0, sent: TimeInterval = 0
) -> CachedHead {
    var headers = fields(pairs)
    if date, headers[.date] == nil { headers[.date] = httpDate(t0) }
    let names = CacheRules.varyNames(headers) ?? []
    return CachedHead(
        key: "http://example.com/", status: status, headers: headers,
        varyValues: CacheRules.varyValues(request: fields(request), names: names),
        requestTime: at(sent), responseTime: at(received))
}

private func decide(
    _ head: CachedHead?, _ request: [(String, String)] = [], method: HTTPRequest.Method = .get,
    now: TimeInterval, behaviour: HTTPCache.Behaviour = .standard
) -> CacheDecision {
    let decision = CacheRules.decide(method: method, request: fields(request), stored: head, behaviour: behaviour, now: at(now))
    // A held entry decides from facts worked out when it was opened: always the same answer.
    let fromFacts = CacheRules.decide(
        method: method, request: fields(request), stored: head, facts: head.map(StoredFacts.init), behaviour: behaviour,
        now: at(now))
    #expect(fromFacts == decision, "StoredFacts decide as the head itself does")
    return decision
}

extension TernTests {
    @Suite struct CacheRulesTests {
        @Test func cacheControlParsing() {
            let cc = CacheControl(["max-age=60, no-cache=\"Set-Cookie, X-A\"", "Private,MUST-REVALIDATE"])
            #expect(cc.maxAge == 60)
            #expect(cc.fieldNames("no-cache") == ["set-cookie", "x-a"])
            #expect(!cc.noCache, "qualified no-cache: the fields are left out, the response reusable")
            #expect(CacheControl(["max-age=60, No-Cache"]).noCache)
            #expect(cc.isPrivate && cc.mustRevalidate)
            #expect(CacheControl(["max-age=\"3600\""]).maxAge == 3600, "quoted delta-seconds accepted")
            #expect(CacheControl(["max-age=003600"]).maxAge == 3600)
            #expect(CacheControl(["foo=\"max-age=3600\", max-age=0"]).maxAge == 0, "max-age inside quotes is no directive")
            #expect(CacheControl(["foo=\"max-age=3600\""]).maxAge == nil)
            #expect(CacheControl(["max-age=3600.5"]).maxAge == 0, "invalid value: stale")
            #expect(CacheControl(["max-age=a100"]).maxAge == 0)
            #expect(CacheControl(["max-age='3600'"]).maxAge == 0)
            #expect(CacheControl(["max-age=3600, max-age=1"]).maxAge == 3600, "conflicting duplicates: the first")
            #expect(CacheControl(["max-age=1", "max-age=3600"]).maxAge == 1)
            #expect(CacheControl(["max-age=3600", "max-age=3600"]).maxAge == 3600)
            #expect(CacheControl(["max-age=99999999999"]).maxAge == 2_147_483_648)
            #expect(CacheControl(["max-stale"]).maxStale == .max)
            #expect(CacheControl(["max-stale=5"]).maxStale == 5)
            #expect(CacheControl(["no-store"]).noStore)
        }

        @Test func httpDates() {
            let expected = Date(timeIntervalSince1970: 784_111_777)
            #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == expected)
            #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == expected)
            #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == expected)
            #expect(HTTPDate.parse(httpDate(t0)) == t0)
            #expect(HTTPDate.parse("0") == nil)
            #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 UTC") == nil)
            #expect(HTTPDate.parse("Sun, 32 Nov 1994 08:49:37 GMT") == nil)
            #expect(HTTPDate.parse("2024-01-01T00:00:00Z") == nil)
            // Two spaces where IMF-fixdate has one: invalid (cache-tests
            // freshness-expires-invalid-multiple-spaces); the zone's case does not matter.
            #expect(HTTPDate.parse("Sun, 06  Nov  1994 08:49:37 GMT") == nil)
            #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 gMT") == expected)
            // RFC 850's two-digit year: at most 50 years ahead, else the century before.
            #expect(HTTPDate.parse("Thursday, 18-Aug-50 02:01:18 GMT").map { $0 > Date() } == true)
            #expect(HTTPDate.parse("Thursday, 18-Aug-99 02:01:18 GMT").map { $0 < Date() } == true)
        }

        @Test func storability() {
            func storable(
                _ response: [(String, String)], status: Int = 200, method: HTTPRequest.Method = .get,
                request: [(String, String)] = [], shared: Bool = false
            ) -> Bool {
                CacheRules.isStorable(method: method, request: fields(request), status: status, response: fields(response), shared: shared)
            }
            #expect(storable([]), "200 is heuristically cacheable")
            #expect(storable([], status: 404))
            #expect(!storable([], status: 302), "302 needs explicit freshness")
            #expect(storable([("Cache-Control", "max-age=60")], status: 302))
            #expect(storable([("Expires", "Thu, 01 Jan 2099 00:00:00 GMT")], status: 307))
            #expect(!storable([], status: 206), "partial responses are never stored as whole ones")
            #expect(!storable([], status: 304))
            #expect(!storable([("Cache-Control", "max-age=60")], method: .post))
            #expect(!storable([("Cache-Control", "max-age=60")], method: .head))
            #expect(!storable([("Cache-Control", "no-store")]))
            #expect(!storable([("Cache-Control", "max-age=60, no-store")]))
            #expect(!storable([], request: [("Cache-Control", "no-store")]), "request no-store")
            #expect(storable([("Cache-Control", "private, max-age=60")]), "private is storable in a private cache")
            #expect(!storable([("Cache-Control", "private, max-age=60")], shared: true))
            #expect(storable([("Cache-Control", "max-age=60")], request: [("Authorization", "Basic eA==")]))
            #expect(!storable([("Cache-Control", "max-age=60")], request: [("Authorization", "Basic eA==")], shared: true))
            #expect(storable([("Cache-Control", "max-age=60, public")], request: [("Authorization", "Basic eA==")], shared: true))
            #expect(!storable([("Vary", "*")]))
            #expect(storable([("Cache-Control", "no-store, must-understand")]), "must-understand overrides no-store for 200")
            #expect(!storable([("Cache-Control", "max-age=60, must-understand")], status: 299))
        }

        @Test func storedFieldsDropHopByHop() {
            let kept = CacheRules.storedFields(fields([
                ("Connection", "close, X-Hop"), ("X-Hop", "1"), ("Keep-Alive", "timeout=5"),
                ("Cache-Control", "no-cache=\"Set-Cookie\""), ("Set-Cookie", "a=1"), ("ETag", "\"a\""),
            ]))
            #expect(kept.map(\.name.canonicalName) == ["cache-control", "etag"])
        }

        @Test func freshnessLifetime() {
            #expect(CacheRules.freshnessLifetime(stored([("Cache-Control", "max-age=100")])) == 100)
            #expect(CacheRules.freshnessLifetime(stored([("Cache-Control", "s-maxage=5, max-age=100")]), shared: true) == 5)
            #expect(CacheRules.freshnessLifetime(stored([("Cache-Control", "max-age=100"), ("Expires", httpDate(at(5)))])) == 100,
                    "max-age wins over Expires")
            #expect(CacheRules.freshnessLifetime(stored([("Expires", httpDate(at(50)))])) == 50)
            #expect(CacheRules.freshnessLifetime(stored([("Expires", "0")])) == 0, "invalid Expires is in the past")
            #expect(CacheRules.freshnessLifetime(stored([("Expires", httpDate(at(50)))], date: false, received: 10)) == 40,
                    "no Date: the time of receipt stands in")
            // Heuristic: 10% of Date - Last-Modified (RFC 9111 4.2.2).
            #expect(CacheRules.freshnessLifetime(stored([("Last-Modified", httpDate(at(-1000)))])) == 100)
            #expect(CacheRules.freshnessLifetime(stored([("Last-Modified", httpDate(at(-1000)))], status: 302)) == 0,
                    "302 is not heuristically cacheable")
            #expect(CacheRules.freshnessLifetime(stored([("Last-Modified", httpDate(at(-100 * 86400)))])) == 7 * 86400,
                    "heuristic capped at a week")
            #expect(CacheRules.freshnessLifetime(stored([])) == 0)
        }

        @Test func currentAge() {
            // RFC 9111 4.2.3: sent at 0, received at 2, Date of 0, Age 10, now 7.
            let head = stored([("Age", "10")], received: 2, sent: 0)
            // corrected_initial_age = max(apparent 2, 10 + delay 2) = 12; resident 5.
            #expect(CacheRules.currentAge(head, now: at(7)) == 17)
            #expect(CacheRules.ageField(head, now: at(7)) == "17")
            #expect(CacheRules.ageSeconds(head, facts: StoredFacts(head), now: at(7)) == 17)
            // A Date in the future of the receipt makes no negative age.
            let skewed = stored([("Date", httpDate(at(100)))])
            #expect(CacheRules.currentAge(skewed, now: at(1)) == 1)
            // An invalid Age is ignored.
            #expect(CacheRules.currentAge(stored([("Age", "abc")]), now: at(3)) == 3)
            // A list counts by its first member (RFC 9111 5.1; cache-tests age-parse-suffix).
            #expect(CacheRules.ageValue(stored([("Age", "7200, 0")]).headers) == 7200)
            #expect(CacheRules.ageValue(stored([("Age", "0, 7200")]).headers) == 0)
        }

        @Test func freshAndStale() {
            let head = stored([("Cache-Control", "max-age=100"), ("ETag", "\"v1\"")])
            #expect(decide(head, now: 50) == .useStored(stale: false))
            #expect(decide(head, method: .head, now: 50) == .useStored(stale: false), "HEAD answered from a stored GET")
            #expect(decide(head, method: .post, now: 50) == .fetch)
            #expect(decide(head, now: 150) == .validate(conditions: fields([("If-None-Match", "\"v1\"")])))
            #expect(decide(stored([("Cache-Control", "max-age=100")]), now: 150) == .fetch, "no validator: plain fetch")
            #expect(decide(nil, now: 0) == .fetch)
            let lm = stored([("Cache-Control", "max-age=1"), ("Last-Modified", httpDate(at(-10)))])
            #expect(decide(lm, now: 5) == .validate(conditions: fields([("If-Modified-Since", httpDate(at(-10)))])))
        }

        @Test func responseDirectives() {
            let noCache = stored([("Cache-Control", "max-age=100, no-cache"), ("ETag", "\"a\"")])
            #expect(decide(noCache, now: 1) == .validate(conditions: fields([("If-None-Match", "\"a\"")])))
            let mustRevalidate = stored([("Cache-Control", "max-age=10, must-revalidate"), ("ETag", "\"a\"")])
            #expect(decide(mustRevalidate, [("Cache-Control", "max-stale=1000")], now: 20)
                    == .validate(conditions: fields([("If-None-Match", "\"a\"")])), "must-revalidate beats max-stale")
            let swr = stored([("Cache-Control", "max-age=10, stale-while-revalidate=30"), ("ETag", "\"a\"")])
            #expect(decide(swr, now: 5) == .useStored(stale: false))
            #expect(decide(swr, now: 30) == .useStoredAndRevalidate(conditions: fields([("If-None-Match", "\"a\"")])))
            #expect(decide(swr, now: 41) == .validate(conditions: fields([("If-None-Match", "\"a\"")])))
        }

        @Test func requestDirectives() {
            let head = stored([("Cache-Control", "max-age=100"), ("ETag", "\"a\"")])
            let revalidate = CacheDecision.validate(conditions: fields([("If-None-Match", "\"a\"")]))
            #expect(decide(head, [("Cache-Control", "max-age=10")], now: 20) == revalidate)
            #expect(decide(head, [("Cache-Control", "max-age=30")], now: 20) == .useStored(stale: false))
            #expect(decide(head, [("Cache-Control", "min-fresh=90")], now: 20) == revalidate)
            #expect(decide(head, [("Cache-Control", "min-fresh=50")], now: 20) == .useStored(stale: false))
            #expect(decide(head, [("Cache-Control", "no-cache")], now: 1) == revalidate)
            #expect(decide(head, [("Pragma", "no-cache")], now: 1) == revalidate)
            #expect(decide(head, [("Pragma", "no-cache"), ("Cache-Control", "max-age=50")], now: 1) == .useStored(stale: false),
                    "Pragma is ignored when Cache-Control is present")
            #expect(decide(head, [("Cache-Control", "max-stale=50")], now: 140) == .useStored(stale: true))
            #expect(decide(head, [("Cache-Control", "max-stale=50")], now: 160) == revalidate)
            #expect(decide(head, [("Cache-Control", "max-stale")], now: 100_000) == .useStored(stale: true))
            #expect(decide(head, [("Cache-Control", "only-if-cached")], now: 1) == .useStored(stale: false))
            #expect(decide(head, [("Cache-Control", "only-if-cached")], now: 200) == .unavailable)
            #expect(decide(nil, [("Cache-Control", "only-if-cached")], now: 0) == .unavailable)
        }

        @Test func varyMatching() {
            let head = stored([("Cache-Control", "max-age=100"), ("Vary", "Accept-Encoding, accept-language")],
                              request: [("Accept-Encoding", "gzip"), ("Accept-Language", "en")])
            #expect(decide(head, [("Accept-Encoding", "gzip"), ("Accept-Language", "en")], now: 1) == .useStored(stale: false))
            #expect(decide(head, [("Accept-Encoding", "br"), ("Accept-Language", "en")], now: 1) == .fetch)
            #expect(decide(head, [("Accept-Encoding", "gzip")], now: 1) == .fetch, "a field absent on one side only")
            #expect(CacheRules.varyMatches(head, request: fields([("accept-encoding", "gzip"), ("Accept-Language", " en ")])))
            let absent = stored([("Cache-Control", "max-age=100"), ("Vary", "X-Absent")])
            #expect(decide(absent, now: 1) == .useStored(stale: false), "absent in both: match")
            #expect(CacheRules.varyNames(fields([("Vary", "A, *")])) == nil)
        }

        @Test func staleIfError() {
            let head = stored([("Cache-Control", "max-age=10, stale-if-error=60")])
            #expect(CacheRules.canServeStale(head, onErrorStatus: 503, request: [:], now: at(50)))
            #expect(CacheRules.canServeStale(head, onErrorStatus: nil, request: [:], now: at(50)))
            #expect(!CacheRules.canServeStale(head, onErrorStatus: 404, request: [:], now: at(50)))
            #expect(!CacheRules.canServeStale(head, onErrorStatus: 500, request: [:], now: at(80)))
            let plain = stored([("Cache-Control", "max-age=10")])
            #expect(!CacheRules.canServeStale(plain, onErrorStatus: 500, request: [:], now: at(20)))
            #expect(CacheRules.canServeStale(plain, onErrorStatus: 500, request: fields([("Cache-Control", "stale-if-error=30")]), now: at(20)))
            let strict = stored([("Cache-Control", "max-age=10, stale-if-error=60, must-revalidate")])
            #expect(!CacheRules.canServeStale(strict, onErrorStatus: 500, request: [:], now: at(20)))
        }

        @Test func notModifiedUpdates() {
            let head = stored([("Cache-Control", "max-age=1"), ("ETag", "\"a\""), ("Content-Length", "36"),
                               ("X-Test", "old"), ("Content-Type", "text/plain")])
            let notModified = fields([("Cache-Control", "max-age=3600"), ("ETag", "\"a\""), ("Content-Length", "10"),
                                      ("X-Test", "new"), ("Connection", "close")])
            #expect(CacheRules.validates(notModified, head))
            #expect(!CacheRules.validates(fields([("ETag", "\"b\"")]), head))
            #expect(CacheRules.validates(fields([("ETag", "W/\"a\"")]), head), "weak comparison")
            let updated = CacheRules.updated(head, with: notModified, requestTime: at(100), responseTime: at(100))
            #expect(updated.headers[.cacheControl] == "max-age=3600")
            #expect(updated.headers[HTTPField.Name("X-Test")!] == "new")
            #expect(updated.headers[.contentLength] == "36", "Content-Length describes the stored body")
            #expect(updated.headers[.contentType] == "text/plain", "fields the 304 omits are kept")
            #expect(updated.headers[.connection] == nil)
            #expect(decide(updated, now: 200) == .useStored(stale: false), "fresh again from the 304's times")
        }

        @Test func invalidation() throws {
            let url = try #require(URL(string: "http://example.com/a/b?x=1#frag"))
            #expect(CacheRules.key(for: url) == "http://example.com/a/b?x=1")
            let keys = CacheRules.invalidatedKeys(
                method: .post, url: url, status: 201,
                response: fields([("Location", "/new"), ("Content-Location", "http://other.example/c")]))
            #expect(keys == ["http://example.com/a/b?x=1", "http://example.com/new"], "another origin is left alone")
            #expect(CacheRules.invalidatedKeys(method: .delete, url: url, status: 204, response: [:]).count == 1)
            #expect(CacheRules.invalidatedKeys(method: .put, url: url, status: 500, response: [:]).isEmpty)
            #expect(CacheRules.invalidatedKeys(method: .get, url: url, status: 200, response: [:]).isEmpty)
            #expect(CacheRules.invalidatedKeys(method: .patch, url: url, status: 302,
                                               response: fields([("Location", "../c")])).last == "http://example.com/c")
        }

        @Test func policiesResolve() {
            typealias P = HTTPCache.Policy
            #expect(P.useDefault.behaviour() == .standard)
            #expect(P.askServerIfModifiedWhenStale.behaviour() == .standard)
            #expect(P.doNotReadFromCache.behaviour().read == .never)
            #expect(P.doNotReadFromCache.behaviour().write == .standard)
            #expect(P.doNotWriteToCache.behaviour().write == .never)
            #expect(P.askServerIfModified.behaviour().read == .alwaysRevalidate)
            #expect(P.onlyLoadIfNotCached.behaviour().read == .anyStored)
            #expect(!P.dontLoad.behaviour().mayLoad)
            #expect(P([.askServerIfModified, .fallbackToCacheIfLoadFails]).behaviour().fallbackOnFailure)
            #expect(P.useDefault.behaviour(default: .doNotWriteToCache).write == .never, "the cache's default fills in")
            // Mesibo's flags are opt-in.
            #expect(P.readCache.behaviour().write == .never)
            #expect(P.updateCache.behaviour().read == .never)
            #expect(P([.readCache, .updateCache]).behaviour() == .standard)
            #expect(P.readCacheForced.behaviour().read == .anyStored)
            #expect(P.updateCacheForced.behaviour().write == .forced)
            #expect(P.useDefault.behaviour(respectsCacheHeaders: false).write == .forced)
        }

        @Test func policiesDecide() {
            let stale = stored([("Cache-Control", "max-age=10"), ("ETag", "\"a\"")])
            let fresh = stored([("Cache-Control", "max-age=1000"), ("ETag", "\"a\"")])
            let revalidate = CacheDecision.validate(conditions: fields([("If-None-Match", "\"a\"")]))
            typealias P = HTTPCache.Policy
            #expect(decide(fresh, now: 1, behaviour: P.askServerIfModified.behaviour()) == revalidate)
            #expect(decide(stale, now: 100, behaviour: P.onlyLoadIfNotCached.behaviour()) == .useStored(stale: true))
            #expect(decide(nil, now: 100, behaviour: P.onlyLoadIfNotCached.behaviour()) == .fetch)
            #expect(decide(stale, now: 100, behaviour: P.dontLoad.behaviour()) == .useStored(stale: true))
            #expect(decide(nil, now: 100, behaviour: P.dontLoad.behaviour()) == .unavailable)
            #expect(decide(fresh, now: 1, behaviour: P.doNotReadFromCache.behaviour()) == .fetch)
            #expect(decide(stale, now: 100, behaviour: P.readCacheForced.behaviour()) == .useStored(stale: true))
            // shouldRespectCacheControlHeaders = false: stored means fresh, until secondsToCache.
            let ignoring = P.useDefault.behaviour(respectsCacheHeaders: false)
            var forced = stored([("Cache-Control", "no-cache, max-age=0"), ("ETag", "\"a\"")])
            #expect(decide(forced, now: 5000, behaviour: ignoring) == .useStored(stale: false))
            forced.expiresOverride = at(60)  // secondsToCache = 60
            #expect(decide(forced, now: 30, behaviour: ignoring) == .useStored(stale: false))
            #expect(decide(forced, now: 61, behaviour: ignoring) == revalidate)
            // secondsToCache alone overrides the headers' lifetime.
            var override = stored([("Cache-Control", "max-age=0"), ("Age", "500")])
            override.expiresOverride = at(60)
            #expect(decide(override, now: 30) == .useStored(stale: false))
        }
    }
}
