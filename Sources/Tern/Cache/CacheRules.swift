// The RFC 9111 decisions of a private cache as pure functions over values: what may be stored,
// how fresh a stored response is, whether a request may be answered from it, which request
// revalidates it, how a 304 refreshes it, and what an unsafe request invalidates. No I/O and no
// clock: `now` is always a parameter, so every rule is tested case by case.

#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
package import HTTPTypes

/// A stored response's head: what the cache keeps besides the body.
package struct CachedHead: Sendable, Equatable {
    /// The primary cache key (``CacheRules/key(for:)``): the target URI without fragment.
    package var key: String
    /// The status code (200, 203, 301, 404, ...).
    package var status: Int
    /// The reason phrase as received.
    package var reason: String
    /// The response's header fields as stored (hop-by-hop fields removed).
    package var headers: HTTPFields
    /// The request's values of the fields the response's `Vary` names (absent fields absent),
    /// normalized by ``CacheRules/varyValue(_:_:)``.
    package var varyValues: [String: String]
    /// When the request that produced this response was sent (`request_time`, RFC 9111 4.2.3).
    package var requestTime: Date
    /// When the response was received (`response_time`).
    package var responseTime: Date
    /// An expiry that replaces the headers' freshness (ASIHTTPRequest's `secondsToCache`, or a
    /// response stored while ignoring cache headers: `.distantFuture`).
    package var expiresOverride: Date?

    package init(
        key: String, status: Int, reason: String = "", headers: HTTPFields,
        varyValues: [String: String] = [:], requestTime: Date, responseTime: Date,
        expiresOverride: Date? = nil
    ) {
        self.key = key
        self.status = status
        self.reason = reason
        self.headers = headers
        self.varyValues = varyValues
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.expiresOverride = expiresOverride
    }
}

/// What to do with a request given a stored response (or none).
package enum CacheDecision: Sendable, Equatable {
    /// Answer from the stored response without contacting the server (`stale` says whether it
    /// is served past its freshness, as `max-stale` or a forced policy allow).
    case useStored(stale: Bool)
    /// Answer from the stored response now and revalidate it in the background
    /// (`stale-while-revalidate`); the fields are the conditional request's additions.
    case useStoredAndRevalidate(conditions: HTTPFields)
    /// Send the request with these conditional fields; on 304 refresh and serve the stored
    /// response (``CacheRules/updated(_:with:)``), otherwise use the new response.
    case validate(conditions: HTTPFields)
    /// Send the request as it is; the stored response, if any, stays available to
    /// ``CacheRules/canServeStale(_:onErrorStatus:request:now:)`` and fallback policies.
    case fetch
    /// Nothing usable may be served and the network must not be used (`only-if-cached`,
    /// the "don't load" policy): answer 504 Gateway Timeout.
    case unavailable
}

/// What the rules need of a stored head that does not change with time: its `Cache-Control`,
/// freshness lifetime and corrected initial age, worked out once per opened entry (the store
/// holds recently used entries, so one parse answers many hits) instead of on every decision.
package struct StoredFacts: Sendable {
    /// The stored response's `Cache-Control` directives.
    let cacheControl: CacheControl
    /// ``CacheRules/freshnessLifetime(_:shared:)`` (private cache).
    let lifetime: TimeInterval
    /// `corrected_initial_age` (RFC 9111 4.2.3); unused with an expiry override.
    let initialAge: TimeInterval

    package init(_ stored: CachedHead) {
        let cc = CacheControl(stored.headers)
        cacheControl = cc
        lifetime = CacheRules.freshnessLifetime(stored, cacheControl: cc)
        initialAge = stored.expiresOverride == nil ? CacheRules.correctedInitialAge(stored) : 0
    }
}

/// RFC 9111 for a private (single-user) cache, as pure functions.
package enum CacheRules {
    /// Statuses whose responses are heuristically cacheable (RFC 9110 15.1).
    package static let heuristicStatuses: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]
    /// Statuses whose semantics this cache understands (for `must-understand`).
    package static let understoodStatuses: Set<Int> = [200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 501]
    /// Fields never stored nor taken from a 304 (RFC 9111 3.1): connection-specific ones.
    package static let hopByHop: Set<String> = [
        "connection", "proxy-connection", "keep-alive", "te", "transfer-encoding", "upgrade",
        "proxy-authenticate", "proxy-authorization", "trailer",
    ]
    private static let pragma = HTTPField.Name("Pragma")!
    /// The longest heuristic freshness lifetime granted from `Last-Modified` (one week).
    package static let heuristicCap: TimeInterval = 7 * 86400

    // MARK: Keys

    /// The primary cache key: the absolute URI without its fragment.
    package static func key(for url: URL) -> String {
        let text = url.absoluteString
        guard let hash = text.utf8.firstIndex(of: UInt8(ascii: "#")) else { return text }
        return String(text[..<hash])
    }

    /// The `Vary` field names of a response, lower-cased; `nil` for `Vary: *`.
    package static func varyNames(_ headers: HTTPFields) -> [String]? {
        var names: [String] = []
        for value in headers[values: .vary] {
            for item in value.split(separator: ",") {
                let name = Cookie.trimWhitespace(item).lowercased()
                if name == "*" { return nil }
                if !name.isEmpty, !names.contains(name) { names.append(name) }
            }
        }
        return names.sorted()
    }

    /// A request field's value for `Vary` matching: every line joined by ", ", each item
    /// trimmed (RFC 9111 4.1 allows normalizing whitespace and combining lines); `nil` if absent.
    package static func varyValue(_ headers: HTTPFields, _ name: String) -> String? {
        guard let fieldName = HTTPField.Name(name) else { return nil }
        let values = headers[values: fieldName]
        guard !values.isEmpty else { return nil }
        return values.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }
            .map { Cookie.trimWhitespace($0) }.joined(separator: ", ")
    }

    /// The request's values for the names a response varies on (stored with the response).
    package static func varyValues(request: HTTPFields, names: [String]) -> [String: String] {
        var result: [String: String] = [:]
        for name in names { result[name] = varyValue(request, name) }
        return result
    }

    /// Whether a request selects a stored response (RFC 9111 4.1).
    package static func varyMatches(_ stored: CachedHead, request: HTTPFields) -> Bool {
        guard let names = varyNames(stored.headers) else { return false }
        return names.allSatisfy { varyValue(request, $0) == stored.varyValues[$0] }
    }

    // MARK: Storing (RFC 9111 3)

    /// Whether a response may be stored. `shared` applies the shared-cache rules too
    /// (`private`, `s-maxage`, `Authorization`); Tern's cache is private, so it defaults to false.
    package static func isStorable(
        method: HTTPRequest.Method, request: HTTPFields, status: Int, response: HTTPFields,
        shared: Bool = false
    ) -> Bool {
        guard method == .get else { return false }
        // 206 would need range-aware storage (never stored as a whole response); 304 only
        // updates what is stored; 1xx are interim.
        guard status >= 200, status != 206, status != 304 else { return false }
        let cc = CacheControl(response)
        let requestCC = CacheControl(request)
        if requestCC.noStore { return false }
        if cc.mustUnderstand {
            if !understoodStatuses.contains(status) { return false }
        } else if cc.noStore {
            return false
        }
        if shared {
            if cc.isPrivate && cc.fieldNames("private").isEmpty { return false }
            if request[.authorization] != nil,
               !(cc.mustRevalidate || cc.isPublic || cc.sharedMaxAge != nil) { return false }
        }
        if varyNames(response) == nil { return false }  // Vary: * never matches
        return cc.isPublic || (!shared && cc.isPrivate) || response[.expires] != nil
            || cc.maxAge != nil || (shared && cc.sharedMaxAge != nil)
            || heuristicStatuses.contains(status)
    }

    /// The header fields to store: hop-by-hop ones, those `Connection` names and those a
    /// qualified `no-cache="..."` names (which may not be reused without revalidation) removed.
    package static func storedFields(_ response: HTTPFields) -> HTTPFields {
        var drop = hopByHop
        for value in response[values: .connection] {
            for item in value.split(separator: ",") { drop.insert(Cookie.trimWhitespace(item).lowercased()) }
        }
        for name in CacheControl(response).fieldNames("no-cache") { drop.insert(name) }
        return HTTPFields(response.filter { !drop.contains($0.name.canonicalName) })
    }

    // MARK: Freshness (RFC 9111 4.2)

    /// The freshness lifetime in seconds (4.2.1), the heuristic (4.2.2) included.
    package static func freshnessLifetime(_ stored: CachedHead, shared: Bool = false) -> TimeInterval {
        freshnessLifetime(stored, shared: shared, cacheControl: nil)
    }

    static func freshnessLifetime(_ stored: CachedHead, shared: Bool = false, cacheControl: CacheControl?) -> TimeInterval {
        if let override = stored.expiresOverride { return override.timeIntervalSince(stored.responseTime) }
        let cc = cacheControl ?? CacheControl(stored.headers)
        if shared, let s = cc.sharedMaxAge { return TimeInterval(s) }
        if let maxAge = cc.maxAge { return TimeInterval(maxAge) }
        let expiresLines = stored.headers[values: .expires]
        if let expiresText = expiresLines.first {
            // An invalid Expires (or several disagreeing ones) means "already expired".
            guard expiresLines.allSatisfy({ $0 == expiresText }),
                  let expires = HTTPDate.parse(expiresText) else { return 0 }
            return expires.timeIntervalSince(dateValue(stored))
        }
        // Heuristic: 10% of the time since Last-Modified, for heuristically cacheable statuses
        // or responses marked public.
        guard heuristicStatuses.contains(stored.status) || cc.isPublic,
              let modifiedText = stored.headers[.lastModified],
              let modified = HTTPDate.parse(modifiedText) else { return 0 }
        let age = dateValue(stored).timeIntervalSince(modified)
        return age > 0 ? min(age / 10, heuristicCap) : 0
    }

    /// Whether the lifetime came from the heuristic (no explicit freshness at all).
    package static func isHeuristic(_ stored: CachedHead) -> Bool {
        let cc = CacheControl(stored.headers)
        return stored.expiresOverride == nil && cc.maxAge == nil && stored.headers[.expires] == nil
    }

    /// The `Date` of the response, or the time it was received when absent or invalid.
    package static func dateValue(_ stored: CachedHead) -> Date {
        stored.headers[.date].flatMap(HTTPDate.parse) ?? stored.responseTime
    }

    /// The parsed `Age` field, 0 when absent or invalid. A list-based value counts by its first
    /// member (RFC 9111 5.1: `Age: 7200, 0` is 7200).
    package static func ageValue(_ headers: HTTPFields) -> TimeInterval {
        guard let line = headers[values: .age].first else { return 0 }
        let text = line.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? line
        return CacheControl.deltaSeconds(Cookie.trimWhitespace(text)).map(TimeInterval.init) ?? 0
    }

    /// `corrected_initial_age` of RFC 9111 4.2.3.
    static func correctedInitialAge(_ stored: CachedHead) -> TimeInterval {
        let apparentAge = max(0, stored.responseTime.timeIntervalSince(dateValue(stored)))
        let responseDelay = stored.responseTime.timeIntervalSince(stored.requestTime)
        let correctedAgeValue = ageValue(stored.headers) + responseDelay
        return max(apparentAge, correctedAgeValue)
    }

    /// The current age (RFC 9111 4.2.3), in seconds.
    package static func currentAge(_ stored: CachedHead, now: Date) -> TimeInterval {
        currentAge(stored, facts: nil, now: now)
    }

    /// ``currentAge(_:now:)`` with the stored head's facts already worked out (or `nil`).
    static func currentAge(_ stored: CachedHead, facts: StoredFacts?, now: Date) -> TimeInterval {
        // An override counts from when the response arrived, whatever Age and Date said.
        if stored.expiresOverride != nil { return max(0, now.timeIntervalSince(stored.responseTime)) }
        return (facts?.initialAge ?? correctedInitialAge(stored)) + now.timeIntervalSince(stored.responseTime)
    }

    /// The `Age` value to send with a response served from the cache.
    package static func ageField(_ stored: CachedHead, now: Date) -> String {
        String(ageSeconds(stored, now: now))
    }

    /// The whole seconds of the `Age` value to send (``ageField(_:now:)``).
    package static func ageSeconds(_ stored: CachedHead, facts: StoredFacts? = nil, now: Date) -> Int {
        max(0, Int(currentAge(stored, facts: facts, now: now).rounded(.down)))
    }

    /// Lifetime minus age: positive while fresh, the staleness (negated) after.
    package static func remainingFreshness(_ stored: CachedHead, facts: StoredFacts? = nil, now: Date) -> TimeInterval {
        (facts?.lifetime ?? freshnessLifetime(stored)) - currentAge(stored, facts: facts, now: now)
    }

    // MARK: Reuse (RFC 9111 4)

    /// What to do with a GET or HEAD `request` given the `stored` response matching its key
    /// (or none), under the resolved `behaviour`. `facts` are the stored head's
    /// (``StoredFacts``), when already worked out.
    package static func decide(
        method: HTTPRequest.Method, request: HTTPFields, stored: CachedHead?, facts: StoredFacts? = nil,
        behaviour: HTTPCache.Behaviour = .standard, now: Date
    ) -> CacheDecision {
        let requestCC = CacheControl(request)
        let onlyIfCached = requestCC.onlyIfCached || !behaviour.mayLoad
        guard method == .get || method == .head, behaviour.read != .never,
              let stored, varyMatches(stored, request: request) else {
            return onlyIfCached ? .unavailable : .fetch
        }
        let facts = facts ?? StoredFacts(stored)
        if behaviour.read == .anyStored {
            return .useStored(stale: remainingFreshness(stored, facts: facts, now: now) <= 0)
        }
        if !behaviour.mayLoad { return .useStored(stale: remainingFreshness(stored, facts: facts, now: now) <= 0) }

        let cc = facts.cacheControl
        // Worked out only when needed: a fresh hit, the common answer, parses no validator.
        var revalidate: CacheDecision {
            let conditions = conditionalFields(stored)
            return conditions.isEmpty ? .fetch : .validate(conditions: conditions)
        }
        if behaviour.read == .alwaysRevalidate { return onlyIfCached ? .unavailable : revalidate }

        if behaviour.ignoresCacheHeaders {
            // ASIHTTPRequest's shouldRespectCacheControlHeaders = false: a stored response is
            // good until its own secondsToCache expiry, if it was given one, else for ever.
            if let expiry = stored.expiresOverride, now >= expiry { return onlyIfCached ? .unavailable : revalidate }
            return .useStored(stale: false)
        }
        let pragmaNoCache = !request.contains(.cacheControl)
            && request[values: pragma].contains { $0.lowercased().contains("no-cache") }
        if cc.noCache || requestCC.noCache || pragmaNoCache {
            return onlyIfCached ? .unavailable : revalidate
        }
        let age = currentAge(stored, facts: facts, now: now)
        let lifetime = facts.lifetime
        let remaining = lifetime - age
        var acceptable = remaining > 0
        if let maxAge = requestCC.maxAge, age > TimeInterval(maxAge) { acceptable = false }
        if let minFresh = requestCC.minFresh, remaining < TimeInterval(minFresh) { acceptable = false }
        if acceptable { return .useStored(stale: false) }

        let staleness = -remaining
        let stalenessForbidden = cc.mustRevalidate || cc.noCache
        if !stalenessForbidden, remaining <= 0 {
            // Staleness the request accepts (max-stale), unless it also asked for max-age/min-fresh
            // that this response fails.
            if let maxStale = requestCC.maxStale, staleness <= TimeInterval(maxStale),
               requestCC.maxAge.map({ age <= TimeInterval($0) }) ?? true,
               requestCC.minFresh == nil {
                return .useStored(stale: true)
            }
            if let window = cc.staleWhileRevalidate, staleness <= TimeInterval(window), !onlyIfCached,
               requestCC.maxAge == nil, requestCC.minFresh == nil {
                return .useStoredAndRevalidate(conditions: conditionalFields(stored))
            }
        }
        return onlyIfCached ? .unavailable : revalidate
    }

    /// Whether a stale stored response may answer instead of an error (`stale-if-error`, RFC
    /// 5861 4): `errorStatus` is the failed response's status (500, 502, 503, 504) or `nil` for
    /// a failure without a response. `must-revalidate` and `no-cache` forbid it.
    package static func canServeStale(
        _ stored: CachedHead, onErrorStatus errorStatus: Int?, request: HTTPFields, now: Date
    ) -> Bool {
        if let status = errorStatus, ![500, 502, 503, 504].contains(status) { return false }
        let cc = CacheControl(stored.headers)
        if cc.mustRevalidate || cc.noCache { return false }
        let staleness = -remainingFreshness(stored, now: now)
        if staleness <= 0 { return true }
        let window = [cc.staleIfError, CacheControl(request).staleIfError].compactMap { $0 }.max()
        guard let window else { return false }
        return staleness <= TimeInterval(window)
    }

    // MARK: Validation (RFC 9111 4.3)

    /// The conditional fields that validate `stored`: `If-None-Match` from its `ETag`,
    /// `If-Modified-Since` from its `Last-Modified`. Empty when it has no validator.
    package static func conditionalFields(_ stored: CachedHead) -> HTTPFields {
        var fields = HTTPFields()
        if let etag = stored.headers[.eTag] { fields[.ifNoneMatch] = etag }
        if let modified = stored.headers[.lastModified], HTTPDate.parse(modified) != nil {
            fields[.ifModifiedSince] = modified
        }
        return fields
    }

    /// Whether a 304 (or a HEAD response, RFC 9111 4.3.5) describes `stored` (4.3.3): a strong
    /// or weak `ETag` equal to the stored one, else the same `Last-Modified`, else — with no
    /// validator in the 304 — the stored response if it has no strong validator of its own.
    package static func validates(_ notModified: HTTPFields, _ stored: CachedHead) -> Bool {
        if let etag = notModified[.eTag] {
            guard let storedETag = stored.headers[.eTag] else { return false }
            func opaque(_ tag: String) -> String { tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag }
            return opaque(etag) == opaque(storedETag)
        }
        if let modified = notModified[.lastModified] {
            return stored.headers[.lastModified] == modified
        }
        return true
    }

    /// The stored response refreshed by a 304 (RFC 9111 4.3.4): every field of the 304
    /// replaces the stored field of the same name, except hop-by-hop fields and
    /// `Content-Length` (which describes the stored body); times move to the new exchange.
    package static func updated(
        _ stored: CachedHead, with notModified: HTTPFields, requestTime: Date, responseTime: Date
    ) -> CachedHead {
        let incoming = storedFields(notModified)
        var names = Set<HTTPField.Name>()
        for field in incoming where field.name != .contentLength { names.insert(field.name) }
        var fields = HTTPFields(stored.headers.filter { !names.contains($0.name) })
        for field in incoming where names.contains(field.name) { fields.append(field) }
        var result = stored
        result.headers = fields
        result.requestTime = requestTime
        result.responseTime = responseTime
        return result
    }

    // MARK: Invalidation (RFC 9111 4.4)

    /// The keys an unsafe request's response invalidates: its target, and the `Location` and
    /// `Content-Location` URIs of the same origin. Empty for safe methods and for error or
    /// interim statuses.
    package static func invalidatedKeys(
        method: HTTPRequest.Method, url: URL, status: Int, response: HTTPFields
    ) -> [String] {
        let safe: Set<HTTPRequest.Method> = [.get, .head, .options, .trace]
        guard !safe.contains(method), (200..<400).contains(status) else { return [] }
        var keys = [key(for: url)]
        for name in [HTTPField.Name.location, .contentLocation] {
            guard let value = response[name], let target = URL(string: value, relativeTo: url)?.absoluteURL,
                  sameOrigin(target, url) else { continue }
            let k = key(for: target)
            if !keys.contains(k) { keys.append(k) }
        }
        return keys
    }

    /// Same scheme, host and port (default ports filled in).
    package static func sameOrigin(_ a: URL, _ b: URL) -> Bool {
        func port(_ u: URL) -> Int? { u.port ?? (u.scheme?.lowercased() == "https" ? 443 : u.scheme?.lowercased() == "http" ? 80 : nil) }
        return a.scheme?.lowercased() == b.scheme?.lowercased() && a.host?.lowercased() == b.host?.lowercased()
            && port(a) == port(b)
    }
}
