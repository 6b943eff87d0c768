// Plan: an immutable copy of a request's settings, resolved into what the engine needs (the
// URL without credentials, the final header list, body and sink), taken when an execution
// starts so that later changes to the Request cannot race with it.

import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes

final class Plan: Sendable {
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
    let authSchemes: Request.AuthenticationSchemes
    /// The caller set `Authorization` itself: the engine answers no server challenge.
    let hasExplicitAuthorization: Bool
    let sessionStore: (any CredentialStore)?
    let persistentStore: (any CredentialStore)?
    let authHandler: AuthenticationChallenge.Handler?
    let maxRedirects: UInt32
    let redirectPolicy: Request.RedirectPolicy
    /// The jar, unless the request opted out of cookies.
    let cookieJar: CookieJar?
    /// The caller's own cookies (``Request/cookie`` and `Cookie` fields, joined), sent per hop
    /// to the request's origin only; kept out of ``headers``.
    let manualCookie: String?
    /// The proxy chosen for the URL: the request's, else its (or the engine's) environment's.
    let proxy: ProxyConfiguration?
    let proxySchemes: Request.AuthenticationSchemes
    /// The environment ``proxy`` came from (none when the request set its own): the engine
    /// applies its rules again for every redirect hop.
    let proxyRules: ProxyEnvironment?
    /// A PAC script that chooses every hop's proxies instead of ``proxy`` and ``proxyRules``.
    let proxyAutoConfiguration: ProxyAutoConfiguration?
    /// With a PAC script: ``Request/proxy``'s credential, for whichever proxy it chooses.
    let proxyAutoConfigurationCredential: Credential?
    let omittedFields: [String]
    let maxReceiveSpeed: UInt64
    let maxSendSpeed: UInt64
    /// Keeps the C budget alive whenever an attempt's C request is built from this plan;
    /// each C request then holds a reference of its own until it is freed.
    let bandwidthBudget: BandwidthBudget?
    /// The cache stage's settings, `nil` when the request uses no cache.
    let cache: CacheSettings?
    let priority: Int
    let body: Body
    let download: Download?
    let streamsBody: Bool
    let timeouts: Request.Timeouts
    let decoding: Request.Decoding
    let decodingLimits: Request.DecodingLimits
    let compressBody: Bool
    let expectContinue: Request.ExpectContinue
    /// The request's own TLS options; `nil`: the engine's (read where applied, not copied here).
    let tls: TLSOptions?
    let persistent: Bool
    let http10: Bool
    let httpVersion: Request.HTTPVersionPreference
    let pipelining: Bool
    let bufferSize: Int
    let concatData: Bool
    /// Retries, the total limit and progress coalescing, for the execution's state machine.
    let policy: ExecutionMachine.Policy
    let idempotent: Bool
    /// Seconds between two progress-handler events.
    let progressInterval: TimeInterval
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
        engine = s.engine ?? .shared
        queue = s.callbackQueue
        timeouts = s.timeouts
        decoding = s.decoding
        decodingLimits = s.decodingLimits
        compressBody = s.compressBody
        expectContinue = s.expectContinue
        tls = s.tls
        persistent = s.persistent
        http10 = s.http10
        httpVersion = s.httpVersion
        pipelining = s.allowsPipelining
        bufferSize = s.bufferSize
        concatData = s.concatData
        progressInterval = max(0, s.progressInterval)
        logsDebug = engine.logger.logLevel <= .debug
        streamsBody = s.dataHandler != nil
        var method = s.headOnly ? "HEAD" : s.method.rawValue
        // Post values make a GET a POST, as ASIHTTPRequest does.
        if !s.postValues.isEmpty, method == "GET" { method = "POST" }
        self.method = method
        switch method {
        case "GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE": idempotent = true
        default: idempotent = false
        }
        policy = ExecutionMachine.Policy(
            maxRetries: max(0, s.maxRetries), retryDelay: max(0, s.retryDelay),
            maxRetryDelay: max(0, s.maxRetryDelay), totalTimeout: max(0, s.timeouts.total),
            idempotent: idempotent,
            coalesceBytes: s.concatData
                ? UInt64(s.bufferSize > 0 ? s.bufferSize : engine.configuration.bufferSize) : 0)

        var problem: TernError?
        func fail(_ code: TernError.Code, _ message: String) {
            if problem == nil { problem = TernError(code: code, message: message, phase: .setup) }
        }

        // Credentials and fragments never reach the request line. The request's credential,
        // else the URL's, goes to the engine, which answers this origin's challenges with it
        // (never another origin's after a redirect); an explicit Authorization field wins.
        var fields = s.headerFields
        // Most URLs carry no credentials, fragment or base: they are used as they are, without
        // a URLComponents round trip.
        let requested = s.url
        let isPlain = requested.baseURL == nil && requested.user == nil && requested.password == nil
            && requested.fragment == nil
        var components = isPlain ? nil : URLComponents(url: requested, resolvingAgainstBaseURL: true)
        hasExplicitAuthorization = fields[.authorization] != nil
        if hasExplicitAuthorization {
            credential = nil
        } else if let own = s.credential {
            credential = own
        } else if let user = components?.user {
            credential = Credential(
                user: user, password: components?.password ?? "", persistence: .none)
        } else {
            credential = nil
        }
        authSchemes = s.authenticationSchemes
        sessionStore = s.sessionCredentialStore
        persistentStore = s.persistentCredentialStore
        authHandler = s.authenticationHandler
        maxRedirects = UInt32(clamping: max(0, s.maxRedirects))
        redirectPolicy = s.redirectPolicy
        cookieJar = s.usesCookies ? s.cookieJar : nil
        proxySchemes = s.proxyAuthenticationSchemes
        maxReceiveSpeed = s.maxReceiveSpeed
        maxSendSpeed = s.maxSendSpeed
        bandwidthBudget = s.bandwidthBudget ?? queueBudget
        priority = s.priority
        if s.authenticationSchemes.intersection(.any).isEmpty {
            fail(.invalidArgument, "authenticationSchemes names no scheme")
        }
        if s.proxyAuthenticationSchemes.intersection(.any).isEmpty {
            fail(.invalidArgument, "proxyAuthenticationSchemes names no scheme")
        }
        if let name = s.invalidHeader {
            fail(.badHeader, "header field \"\(name)\" has an invalid name or a CR, LF or NUL in its value")
        }
        if isPlain {
            url = requested
            urlString = requested.absoluteString
        } else {
            components?.user = nil
            components?.password = nil
            components?.fragment = nil
            let clean = components?.url ?? requested
            url = clean
            urlString = clean.absoluteString
            if components == nil { fail(.badURL, "malformed URL \(requested)") }
        }
        let clean = url

        // The proxy: the request's, else the rules of its (or the engine's) environment.
        omittedFields = s.omittedHeaderFields
        proxyAutoConfiguration = s.proxyAutoConfiguration
        proxyAutoConfigurationCredential =
            s.proxyAutoConfiguration != nil ? s.proxy?.credential : nil
        if s.proxyAutoConfiguration != nil {
            // The engine asks the script for every hop.
            proxy = nil
            proxyRules = nil
        } else if let own = s.proxy {
            proxy = own
            proxyRules = nil
        } else if case .none = s.proxyEnvironment, engine.configuration.proxyEnvironment.namesNoProxy {
            // Most machines: no variable names a proxy. Nothing to choose or keep for later
            // hops, and no copy of the rules (with its release, about 500 instructions).
            proxy = nil
            proxyRules = nil
        } else {
            let rules = s.proxyEnvironment ?? engine.configuration.proxyEnvironment
            proxyRules = rules
            do throws(TernError) {
                proxy = try rules.proxy(for: clean)
            } catch {
                proxy = nil
                if problem == nil {
                    problem = TernError(
                        code: error.code, message: "proxy for \(clean.absoluteString): "
                            + error.message, host: clean.host ?? "", phase: .setup)
                }
            }
        }

        // The dedicated properties replace fields of the same name.
        func put(_ name: String, _ value: String?) {
            guard let value, let fieldName = HTTPField.Name(name) else { return }
            fields[fieldName] = value
        }
        put("User-Agent", s.userAgent)
        put("Referer", s.referrer)
        put("Origin", s.origin)
        put("Cookie", s.cookie)
        put("Content-Encoding", s.encoding)
        put("Cache-Control", s.cacheControl)
        if let ims = s.ims { put("If-Modified-Since", httpDate(ims)) }
        if s.sendCacheHeader {
            if s.cacheControl == nil { put("Cache-Control", "no-cache") }
            put("Pragma", "no-cache")
        }
        // The body: exactly one of body, bodyFile and requestBody; post values alone make a
        // form, and join a multipart body as its first fields.
        var resolved: RequestBody?
        // Counted without an array: two allocations per request for a bodiless GET.
        let given = (s.body != nil ? 1 : 0) + (s.bodyFile != nil ? 1 : 0) + (s.requestBody != nil ? 1 : 0)
        if given > 1 {
            fail(.invalidArgument, "set only one of body, bodyFile and requestBody")
        } else if let data = s.body {
            resolved = .data(data)
        } else if let path = s.bodyFile {
            resolved = .file(path, offset: s.uploadOffset, end: s.uploadEnd == 0 ? nil : s.uploadEnd)
        } else {
            resolved = s.requestBody
        }
        if !s.postValues.isEmpty {
            if resolved == nil {
                resolved = .form(s.postValues)
            } else if var form = resolved?.form {
                form.prepend(s.postValues.fields.map { MultipartForm.Part.field($0.name, value: $0.value) })
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

        // HTTPFields keeps Cookie split into one field per pair (as HTTP/2 compresses it);
        // HTTP/1.1 allows one Cookie line, so the pairs are joined back with "; ". That line
        // is sent per hop (merged with the jar's cookies), to this origin only.
        var lines: [(name: String, value: String)] = []
        var cookies: [String] = []
        for field in fields {
            if field.name == .cookie {
                if !field.value.isEmpty { cookies.append(field.value) }
                continue
            }
            lines.append((name: field.name.rawName, value: field.value))
        }
        headers = lines
        manualCookie = cookies.isEmpty ? nil : cookies.joined(separator: "; ")
        if let line = manualCookie, line.utf8.contains(where: { $0 == 0 || $0 == 10 || $0 == 13 }) {
            fail(.badHeader, "the Cookie field holds CR, LF or NUL")
        }

        if let path = s.downloadFile {
            download = Download(
                path: path, offset: s.downloadOffset, end: s.downloadEnd, resume: s.resume,
                anyStatus: s.downloadsErrorBodies)
            if s.dataHandler != nil {
                fail(.invalidArgument, "set either downloadFile or dataHandler, not both")
            }
        } else {
            download = nil
        }
        cache = s.cache == nil ? nil : CacheSettings(settings: copy s, method: method, fields: fields, download: download)
        setupError = problem
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
