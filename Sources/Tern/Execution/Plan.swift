// Plan: an immutable copy of a request's settings, resolved into what the engine needs (the
// URL without credentials, the final header list, body and sink), taken when an execution
// starts so that later changes to the Request cannot race with it. A struct, kept inline in
// its execution (its only holder): an object of its own was one more allocation, retain and
// release per request, and one more pointer to follow at every read.

import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes

struct Plan: Sendable {
    enum Body: Sendable {
        case none
        case data(Data)
        case file(path: String, offset: UInt64, end: UInt64)
        case segments([BodySegment])
        case stream(length: UInt64?, BodyStream)
    }

    struct Download: Sendable {
        var path: String
        var offset: UInt64
        var end: UInt64
        var resume: Bool
        var anyStatus: Bool
    }

    let requestID: UInt64
    let engine: Engine
    let queue: DispatchQueue
    /// The request's rarely set settings, shared with it (see ``Request/Settings``): the
    /// plan reads them in place rather than copying each.
    let options: Request.OptionsBox
    /// No rarely set setting was changed: the C request's set-up skips them all.
    var hasDefaultOptions: Bool { options === Request.OptionsBox.defaults }
    /// The URL without user info or fragment.
    let url: URL
    let urlString: String
    /// The URL's host, for messages: read only when one is made.
    var host: String { url.host ?? "" }
    let method: String
    let headers: [(name: String, value: String)]
    /// The origin's credential: the request's own, else `user:password` from the URL; `nil`
    /// when neither, or when the caller set an `Authorization` field (which wins).
    let credential: Credential?
    /// The `TERN_AUTH_*` bits for ``credential`` (and for credentials from the stores).
    var authSchemes: Request.AuthenticationSchemes { options.value.authenticationSchemes }
    /// The caller set `Authorization` itself: the engine answers no server challenge.
    let hasExplicitAuthorization: Bool
    var sessionStore: (any CredentialStore)? { options.value.sessionCredentialStore }
    var persistentStore: (any CredentialStore)? { options.value.persistentCredentialStore }
    var authHandler: AuthenticationChallenge.Handler? { options.value.authenticationHandler }
    var maxRedirects: UInt32 { UInt32(clamping: max(0, options.value.maxRedirects)) }
    var redirectPolicy: Request.RedirectPolicy { options.value.redirectPolicy }
    /// The jar, unless the request opted out of cookies.
    var cookieJar: CookieJar? { options.value.usesCookies ? options.value.cookieJar : nil }
    /// The caller's own cookies (``Request/cookie`` and `Cookie` fields, joined), sent per hop
    /// to the request's origin only; kept out of ``headers``.
    let manualCookie: String?
    /// The proxy chosen for the URL and the rules it came from, boxed: most requests have
    /// neither, and two large optionals stored inline cost a copy of their nil and an outlined
    /// destroy per plan where a nil reference costs one store.
    final class ProxyChoice: Sendable {
        let proxy: ProxyConfiguration?
        let rules: ProxyEnvironment?

        init(proxy: ProxyConfiguration?, rules: ProxyEnvironment?) {
            self.proxy = proxy
            self.rules = rules
        }
    }
    private let proxyChoice: ProxyChoice?
    /// The proxy chosen for the URL: the request's, else its (or the engine's) environment's.
    var proxy: ProxyConfiguration? { proxyChoice?.proxy }
    var proxySchemes: Request.AuthenticationSchemes { options.value.proxyAuthenticationSchemes }
    /// The environment ``proxy`` came from (none when the request set its own): the engine
    /// applies its rules again for every redirect hop.
    var proxyRules: ProxyEnvironment? { proxyChoice?.rules }
    /// A PAC script that chooses every hop's proxies instead of ``proxy`` and ``proxyRules``.
    var proxyAutoConfiguration: ProxyAutoConfiguration? { options.value.proxyAutoConfiguration }
    /// With a PAC script: ``Request/proxy``'s credential, for whichever proxy it chooses.
    var proxyAutoConfigurationCredential: Credential? {
        options.value.proxyAutoConfiguration != nil ? options.value.proxy?.credential : nil
    }
    var omittedFields: [String] { options.value.omittedHeaderFields }
    var maxReceiveSpeed: UInt64 { options.value.maxReceiveSpeed }
    var maxSendSpeed: UInt64 { options.value.maxSendSpeed }
    /// Keeps the C budget alive whenever an attempt's C request is built from this plan;
    /// each C request then holds a reference of its own until it is freed.
    let bandwidthBudget: BandwidthBudget?
    /// The cache stage's settings, `nil` when the request uses no cache.
    let cache: CacheSettings?
    var priority: Int { options.value.priority }
    let body: Body
    let download: Download?
    let streamsBody: Bool
    var timeouts: Request.Timeouts { options.value.timeouts }
    var decoding: Request.Decoding { options.value.decoding }
    var decodingLimits: Request.DecodingLimits { options.value.decodingLimits }
    var compressBody: Bool { options.value.compressBody }
    var expectContinue: Request.ExpectContinue { options.value.expectContinue }
    /// The request's own TLS options; `nil`: the engine's (read where applied, not copied here).
    var tls: TLSOptions? { options.value.tls }
    var persistent: Bool { options.value.persistent }
    var http10: Bool { options.value.http10 }
    var httpVersion: Request.HTTPVersionPreference { options.value.httpVersion }
    var pipelining: Bool { options.value.allowsPipelining }
    var bufferSize: Int { options.value.bufferSize }
    var concatData: Bool { options.value.concatData }
    /// Retries, the total limit and progress coalescing, for the execution's state machine.
    let policy: ExecutionMachine.Policy
    let idempotent: Bool
    /// Seconds between two progress-handler events.
    var progressInterval: TimeInterval { max(0, options.value.progressInterval) }
    /// The engine's logger takes debug lines: only then are they built.
    let logsDebug: Bool
    /// A problem found while planning: the execution fails with it before reaching the
    /// network.
    let setupError: TernError?

    /// The buffer size that bounds coalescing: the request's, else the engine's.
    var effectiveBufferSize: Int {
        bufferSize > 0 ? bufferSize : engine.configuration.bufferSize
    }

    /// - Parameter queueBudget: The bandwidth budget of the queue that started the request,
    ///   used unless the request has its own.
    init(settings s: borrowing Request.Settings, requestID: UInt64, queueBudget: BandwidthBudget? = nil) {
        self.requestID = requestID
        let engine = s.engine ?? .shared
        self.engine = engine
        queue = s.callbackQueue
        let o = s.options
        options = o
        logsDebug = engine.logsDebug
        streamsBody = s.dataHandler != nil

        var problem: TernError?
        func fail(_ code: TernError.Code, _ message: String) {
            if problem == nil { problem = TernError(code: code, message: message, phase: .setup) }
        }

        // Credentials and fragments never reach the request line. The request's credential,
        // else the URL's, goes to the engine, which answers this origin's challenges with it
        // (never another origin's after a redirect); an explicit Authorization field wins.
        var fields = s.headerFields
        let target = RequestTarget(s.url)
        url = target.url
        urlString = target.string
        hasExplicitAuthorization = !fields.isEmpty && fields[.authorization] != nil
        func checkFieldsAndURL() {
            if _slowPath(s.invalidHeader != nil), let name = s.invalidHeader {
                fail(.badHeader, "header field \"\(name)\" has an invalid name or a CR, LF or NUL in its value")
            }
            if _slowPath(target.isMalformed) { fail(.badURL, "malformed URL \(s.url)") }
        }

        // The method and the retry policy, read in place from the options (the shared defaults
        // or the request's own) for both paths below.
        var method = _slowPath(o.value.headOnly) ? "HEAD" : s.method.rawValue
        // Post values make a GET a POST, as ASIHTTPRequest does.
        if _slowPath(!o.value.postValues.isEmpty), method == "GET" { method = "POST" }
        self.method = method
        idempotent = Self.isIdempotent(method)
        policy = ExecutionMachine.Policy(
            maxRetries: max(0, o.value.maxRetries), retryDelay: max(0, o.value.retryDelay),
            maxRetryDelay: max(0, o.value.maxRetryDelay), totalTimeout: max(0, o.value.timeouts.total),
            idempotent: idempotent,
            coalesceBytes: o.value.concatData
                ? UInt64(o.value.bufferSize > 0 ? o.value.bufferSize : engine.configuration.bufferSize) : 0)

        if _fastPath(s.hasDefaultOptions) {
            // Nothing rarely set was changed: no body, download, cache, retries, proxy of the
            // request's own or dedicated header properties to look at.
            checkFieldsAndURL()
            credential = hasExplicitAuthorization ? nil : target.credential
            bandwidthBudget = queueBudget
            if _fastPath(engine.proxyEnvironmentNamesNoProxy) {
                proxyChoice = nil
            } else {
                proxyChoice = Self.chooseProxy(
                    for: target.url, own: nil, environment: nil, engine: engine, fail: &problem)
            }
            body = .none
            download = nil
            cache = nil
            (headers, manualCookie) = Self.lines(of: fields, problem: &problem)
            setupError = problem
            return
        }

        let v = o.value
        if hasExplicitAuthorization {
            credential = nil
        } else if let own = v.credential {
            credential = own
        } else {
            credential = target.credential
        }
        bandwidthBudget = v.bandwidthBudget ?? queueBudget
        if v.authenticationSchemes.intersection(.any).isEmpty {
            fail(.invalidArgument, "authenticationSchemes names no scheme")
        }
        if v.proxyAuthenticationSchemes.intersection(.any).isEmpty {
            fail(.invalidArgument, "proxyAuthenticationSchemes names no scheme")
        }
        checkFieldsAndURL()
        if v.proxyAutoConfiguration != nil {
            // The engine asks the script for every hop.
            proxyChoice = nil
        } else {
            proxyChoice = Self.chooseProxy(
                for: target.url, own: v.proxy, environment: v.proxyEnvironment, engine: engine,
                fail: &problem)
        }

        // The dedicated properties replace fields of the same name.
        func put(_ name: String, _ value: String?) {
            guard let value, let fieldName = HTTPField.Name(name) else { return }
            fields[fieldName] = value
        }
        put("User-Agent", v.userAgent)
        put("Referer", v.referrer)
        put("Origin", v.origin)
        put("Cookie", v.cookie)
        put("Content-Encoding", v.encoding)
        put("Cache-Control", v.cacheControl)
        if let ims = v.ims { put("If-Modified-Since", httpDate(ims)) }
        if v.sendCacheHeader {
            if v.cacheControl == nil { put("Cache-Control", "no-cache") }
            put("Pragma", "no-cache")
        }
        // The body: exactly one of body, bodyFile and requestBody; post values alone make a
        // form, and join a multipart body as its first fields.
        var resolved: RequestBody?
        // Counted without an array: two allocations per request for a bodiless GET.
        let given = (v.body != nil ? 1 : 0) + (v.bodyFile != nil ? 1 : 0) + (v.requestBody != nil ? 1 : 0)
        if given > 1 {
            fail(.invalidArgument, "set only one of body, bodyFile and requestBody")
        } else if let data = v.body {
            resolved = .data(data)
        } else if let path = v.bodyFile {
            resolved = .file(path, offset: v.uploadOffset, end: v.uploadEnd == 0 ? nil : v.uploadEnd)
        } else {
            resolved = v.requestBody
        }
        if !v.postValues.isEmpty {
            if resolved == nil {
                resolved = .form(v.postValues)
            } else if var form = resolved?.form {
                form.prepend(v.postValues.fields.map { MultipartForm.Part.field($0.name, value: $0.value) })
                resolved = .multipart(form)
            } else if given <= 1 {
                fail(.invalidArgument, "post values combine only with a multipart requestBody")
            }
        }
        if let type = resolved?.contentType, fields[.contentType] == nil {
            fields[.contentType] = type
        }
        switch resolved?.storage {
        case nil: body = .none
        case .data(let data)?: body = .data(data)
        case .file(let path, let offset, let end)?:
            body = .file(path: path, offset: offset, end: end)
            if end != 0, end < offset {
                fail(.invalidArgument, "upload range \(offset)..<\(end) of \(path) is empty")
            }
        case .segments(let segments)?: body = .segments(segments)
        case .stream(let length, let stream)?: body = .stream(length: length, stream)
        }
        (headers, manualCookie) = Self.lines(of: fields, problem: &problem)

        if let path = v.downloadFile {
            download = Download(
                path: path, offset: v.downloadOffset, end: v.downloadEnd, resume: v.resume,
                anyStatus: v.downloadsErrorBodies)
            if s.dataHandler != nil {
                fail(.invalidArgument, "set either downloadFile or dataHandler, not both")
            }
        } else {
            download = nil
        }
        cache = v.cache == nil ? nil : CacheSettings(settings: copy s, method: method, fields: fields, download: download)
        setupError = problem
    }

    private static func isIdempotent(_ method: String) -> Bool {
        switch method {
        case "GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE": true
        default: false
        }
    }

    /// The proxy: the request's own, else the rules of its (or the engine's) environment,
    /// kept for later hops.
    private static func chooseProxy(
        for url: URL, own: ProxyConfiguration?, environment: ProxyEnvironment?, engine: Engine,
        fail problem: inout TernError?
    ) -> ProxyChoice? {
        if let own { return ProxyChoice(proxy: own, rules: nil) }
        if environment == nil, engine.proxyEnvironmentNamesNoProxy {
            // Most machines: no variable names a proxy. Nothing to choose or keep for later
            // hops, and no copy of the rules (with its release, about 500 instructions).
            return nil
        }
        let rules = environment ?? engine.configuration.proxyEnvironment
        do throws(TernError) {
            return ProxyChoice(proxy: try rules.proxy(for: url), rules: rules)
        } catch {
            if problem == nil {
                problem = TernError(
                    code: error.code, message: "proxy for \(url.absoluteString): " + error.message,
                    host: url.host ?? "", phase: .setup)
            }
            return ProxyChoice(proxy: nil, rules: rules)
        }
    }

    /// The header lines to send, and the `Cookie` pairs joined into the one line sent per hop.
    /// HTTPFields keeps Cookie split into one field per pair (as HTTP/2 compresses it);
    /// HTTP/1.1 allows one Cookie line, so the pairs are joined back with "; ". That line is
    /// sent per hop (merged with the jar's cookies), to this origin only.
    private static func lines(of fields: HTTPFields, problem: inout TernError?)
        -> ([(name: String, value: String)], String?)
    {
        var lines: [(name: String, value: String)] = []
        var cookies: [String] = []
        for field in fields {
            if field.name == .cookie {
                if !field.value.isEmpty { cookies.append(field.value) }
                continue
            }
            lines.append((name: field.name.rawName, value: field.value))
        }
        let cookie = cookies.isEmpty ? nil : cookies.joined(separator: "; ")
        if let cookie, cookie.utf8.contains(where: { $0 == 0 || $0 == 10 || $0 == 13 }), problem == nil {
            problem = TernError(code: .badHeader, message: "the Cookie field holds CR, LF or NUL", phase: .setup)
        }
        return (lines, cookie)
    }
}

/// A request's URL as the request line and the engine take it: without user info or fragment,
/// resolved against its base; the user info becomes a credential.
struct RequestTarget {
    let url: URL
    let string: String
    let credential: Credential?
    /// URLComponents could not take the URL apart: it is used as given, and the plan fails.
    let isMalformed: Bool

    init(_ requested: URL) {
        // Most URLs carry no credentials, fragment or base: they are used as they are, without
        // a URLComponents round trip.
        if requested.baseURL == nil, requested.user == nil, requested.password == nil,
            requested.fragment == nil
        {
            url = requested
            string = requested.absoluteString
            credential = nil
            isMalformed = false
            return
        }
        guard var components = URLComponents(url: requested, resolvingAgainstBaseURL: true) else {
            url = requested
            string = requested.absoluteString
            credential = nil
            isMalformed = true
            return
        }
        credential = components.user.map {
            Credential(user: $0, password: components.password ?? "", persistence: .none)
        }
        components.user = nil
        components.password = nil
        components.fragment = nil
        let clean = components.url ?? requested
        url = clean
        string = clean.absoluteString
        isMalformed = false
    }
}

/// What the cache stage needs from a request's settings.
struct CacheSettings: Sendable {
    let cache: HTTPCache
    let policy: HTTPCache.Policy
    let storagePolicy: HTTPCache.StoragePolicy?
    let secondsToCache: TimeInterval?
    let method: HTTPRequest.Method
    /// The request's own fields: directives (`Cache-Control`, `Pragma`) and `Vary` values.
    let requestFields: HTTPFields
    /// GET or HEAD whose whole response goes to memory, a file or a data handler: read and
    /// written. Other methods only invalidate (RFC 9111 4.4).
    let readsAndWrites: Bool
    /// The body goes to a data handler: a response is fed to the cache as it arrives, and a
    /// stored one is handed to the handler in pieces.
    let streamsBody: Bool

    /// `nil` without a cache. A ranged or resumed download, or a request with its own
    /// `Range` field, passes the cache by (a 206 is never stored, and a stored whole
    /// response is not the part asked for).
    init?(settings s: Request.Settings, method: String, fields: HTTPFields, download: Plan.Download?) {
        guard let cache = s.cache, let parsed = HTTPRequest.Method(method) else { return nil }
        let wholeResponse =
            fields[.range] == nil
            && (download.map { $0.offset == 0 && $0.end == 0 && !$0.resume } ?? true)
        let safe = parsed == .get || parsed == .head
        guard !safe || wholeResponse else { return nil }
        streamsBody = s.dataHandler != nil
        self.cache = cache
        policy = s.cachePolicy
        storagePolicy = s.cacheStoragePolicy
        secondsToCache = s.secondsToCache
        self.method = parsed
        requestFields = fields
        readsAndWrites = safe && s.body == nil && s.bodyFile == nil && s.requestBody == nil
            && s.postValues.isEmpty
    }
}
