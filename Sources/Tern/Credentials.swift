// Credentials: protection spaces, credentials, the stores that keep them (in memory for the
// session, in a 0600 file for good), and the challenge handler a caller can install to be asked
// for credentials when a server (or proxy) wants some. The C engine computes Basic, Digest and NTLM;
// this file only decides which user and password to hand it.

import Dispatch
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// An HTTP authentication scheme, such as Basic, Digest or NTLM.
///
/// A struct rather than an enum so that schemes can be added without breaking callers.
public struct AuthenticationScheme: RawRepresentable, Sendable, Hashable, Codable,
    CustomStringConvertible
{
    /// The scheme's name as it appears in a challenge: `"Basic"`, `"Digest"`, `"NTLM"`.
    public let rawValue: String

    /// Wraps a scheme name; the known names are matched without regard to case.
    public init(rawValue: String) {
        switch rawValue.lowercased() {
        case "basic": self.rawValue = "Basic"
        case "digest": self.rawValue = "Digest"
        case "ntlm": self.rawValue = "NTLM"
        default: self.rawValue = rawValue
        }
    }

    /// The scheme's name, such as `"Digest"`.
    public var description: String { rawValue }

    /// Basic (RFC 7617): user and password in every request; may be sent preemptively.
    public static let basic = AuthenticationScheme(rawValue: "Basic")
    /// Digest (RFC 7616): answers a server nonce; needs a challenge first.
    public static let digest = AuthenticationScheme(rawValue: "Digest")
    /// NTLM (MS-NLMP, NTLMv2 responses): a handshake that authenticates the connection, not
    /// the request; the user may name a Windows domain (``Credential/domain``).
    public static let ntlm = AuthenticationScheme(rawValue: "NTLM")
}

/// Where a credential applies: an origin (or a proxy) and, once known, the realm it announced.
///
/// Stores match protection spaces by ``scheme``, ``host``, ``port``, ``isProxy`` and ``realm``;
/// ``authenticationScheme`` is kept as information (only a Basic space can be answered before
/// the server asks). A space without a realm stands for every realm of its origin.
public struct ProtectionSpace: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The URL scheme of the origin (`"http"`, `"https"`), or of the proxy URL; lower-cased.
    public var scheme: String
    /// The host, lower-cased, without the brackets of an IPv6 literal.
    public var host: String
    /// The port (the scheme's default when the URL names none).
    public var port: Int
    /// The realm of the challenge, or `nil` when not (yet) known.
    public var realm: String?
    /// `true` for a proxy's protection space (407 and `Proxy-Authenticate`).
    public var isProxy: Bool
    /// The scheme the server asked for, when known.
    public var authenticationScheme: AuthenticationScheme?

    /// Creates a protection space from its parts.
    ///
    /// - Parameters:
    ///   - scheme: The URL scheme; lower-cased.
    ///   - host: The host; lower-cased, brackets of an IPv6 literal removed.
    ///   - port: The port.
    ///   - realm: The realm, or `nil` for any realm.
    ///   - isProxy: Whether this is a proxy's space.
    ///   - authenticationScheme: The authentication scheme, when known.
    public init(
        scheme: String, host: String, port: Int, realm: String? = nil, isProxy: Bool = false,
        authenticationScheme: AuthenticationScheme? = nil
    ) {
        self.scheme = scheme.lowercased()
        self.host = HostName.canonical(host)
        self.port = port
        self.realm = realm
        self.isProxy = isProxy
        self.authenticationScheme = authenticationScheme
    }

    /// The protection space of a URL's origin (for a proxy: of the proxy's URL); `nil` when the
    /// URL has no host, or no port and a scheme without a default port.
    ///
    /// - Parameters:
    ///   - url: The URL; only its scheme, host and port count.
    ///   - realm: The realm, or `nil` for any realm.
    ///   - isProxy: Whether `url` is a proxy's.
    ///   - authenticationScheme: The authentication scheme, when known.
    public init?(
        url: URL, realm: String? = nil, isProxy: Bool = false,
        authenticationScheme: AuthenticationScheme? = nil
    ) {
        guard let host = HostName.canonical(of: url), let port = HostName.port(of: url) else {
            return nil
        }
        self.init(
            scheme: HostName.scheme(of: url), host: host, port: port, realm: realm,
            isProxy: isProxy, authenticationScheme: authenticationScheme)
    }

    /// `"http://example.com:80 realm \"staff\""`, with `(proxy)` for a proxy's space.
    public var description: String {
        let hostPart = host.contains(":") ? "[\(host)]" : host
        var text = "\(scheme)://\(hostPart):\(port)"
        if let realm { text += " realm \"\(realm)\"" }
        if let authenticationScheme { text += " \(authenticationScheme)" }
        if isProxy { text += " (proxy)" }
        return text
    }

    /// What stores compare: the origin, the proxy flag and the realm.
    struct Key: Hashable, Sendable {
        var scheme: String
        var host: String
        var port: Int
        var isProxy: Bool
        var realm: String?
    }

    var key: Key { Key(scheme: scheme, host: host, port: port, isProxy: isProxy, realm: realm) }

    /// The key of this space's origin with any realm.
    var originKey: Key { Key(scheme: scheme, host: host, port: port, isProxy: isProxy, realm: nil) }
}

/// A user name and password, and how long Tern may keep them once they worked.
///
/// Printing a credential (`description`, `debugDescription`, `dump`) never shows the password.
public struct Credential: Sendable, Hashable, Codable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    /// How long a credential that worked is remembered.
    public enum Persistence: String, Sendable, Hashable, Codable {
        /// Used for this request only.
        case none
        /// Kept in the session store (``SessionCredentialStore``) for later requests to the
        /// same protection space, until the process ends.
        case session
        /// Kept in the persistent store (a ``FileCredentialStore``) as well.
        case permanent
    }

    /// The user name.
    public var user: String
    /// The password.
    public var password: String
    /// The Windows domain NTLM authenticates the user in (`nil`: none, or one named in
    /// ``user`` as `DOMAIN\user`). Basic and Digest send it as `DOMAIN\user` too.
    public var domain: String?
    /// How long the credential is kept once it worked.
    public var persistence: Persistence

    /// Creates a credential.
    ///
    /// - Parameters:
    ///   - user: The user name (for NTLM, `DOMAIN\user` names the domain too).
    ///   - password: The password.
    ///   - domain: The NTLM domain, when not part of `user` (default: none).
    ///   - persistence: How long to keep it once it worked (default: the session).
    public init(
        user: String, password: String, domain: String? = nil, persistence: Persistence = .session
    ) {
        self.user = user
        self.password = password
        self.domain = domain
        self.persistence = persistence
    }

    /// The user name the engine sends: `DOMAIN\user` with a ``domain``, else ``user``.
    var engineUser: String {
        guard let domain, !domain.isEmpty else { return user }
        return domain + "\\" + user
    }

    /// `Credential(user: "alice", password: <hidden>, persistence: session)`.
    public var description: String {
        let dom = domain.map { ", domain: \"\($0)\"" } ?? ""
        return "Credential(user: \"\(user)\"\(dom), password: <hidden>, persistence: \(persistence))"
    }

    /// The same as ``description``: no password.
    public var debugDescription: String { description }

    /// A mirror without the password, for `dump` and debuggers.
    public var customMirror: Mirror {
        Mirror(
            self, children: ["user": user, "domain": domain as Any, "persistence": persistence],
            displayStyle: .struct)
    }
}

// MARK: - Stores

/// A place that keeps credentials per protection space.
///
/// Tern consults stores when a server or proxy challenges a request (after the request's own
/// credentials), and before sending a request, for credentials it may send preemptively. It
/// records credentials that worked according to their ``Credential/Persistence``.
///
/// Conforming types must be safe to call from any thread, including the engine's loop thread,
/// and must not block there: keep lookups in memory.
public protocol CredentialStore: AnyObject, Sendable {
    /// The credential for `space`: the one stored for its realm, else one stored for its origin
    /// without a realm; `nil` when there is none.
    func credential(for space: ProtectionSpace) -> Credential?

    /// The credential most recently stored for `space`'s origin (scheme, host, port and proxy
    /// flag), whatever its realm, together with the space it was stored for; `nil` when
    /// none. This is what Tern sends before the server asks, when the realm is not yet known.
    func mostRecentCredential(forOriginOf space: ProtectionSpace)
        -> (space: ProtectionSpace, credential: Credential)?

    /// Stores `credential` for `space`, replacing what was stored for the same space; it becomes
    /// the most recent credential of the origin.
    func set(_ credential: Credential, for space: ProtectionSpace)

    /// Removes the credential that ``credential(for:)`` returns for `space`, if any.
    func removeCredential(for space: ProtectionSpace)

    /// Every stored credential by protection space.
    var allCredentials: [ProtectionSpace: Credential] { get }
}

/// The entries of a store, with their order of storage; shared by the two stores.
struct CredentialTable: Sendable, CountedValue {
    struct Entry: Sendable, Codable {
        var space: ProtectionSpace
        var credential: Credential
        /// Increases with every `set`: the most recent entry of an origin has the largest.
        var stamp: UInt64
    }

    private(set) var entries: [ProtectionSpace.Key: Entry] = [:]
    var count: Int { entries.count }
    private var nextStamp: UInt64 = 1

    init(entries: [Entry] = []) {
        for entry in entries.sorted(by: { $0.stamp < $1.stamp }) {
            set(entry.credential, for: entry.space)
        }
    }

    /// The entry for the space's realm, else the realm-less entry of its origin.
    func entry(for space: ProtectionSpace) -> Entry? {
        entries[space.key] ?? (space.realm == nil ? nil : entries[space.originKey])
    }

    func mostRecent(forOriginOf space: ProtectionSpace) -> Entry? {
        let origin = space.originKey
        return entries.values.filter { $0.space.originKey == origin }.max { $0.stamp < $1.stamp }
    }

    mutating func set(_ credential: Credential, for space: ProtectionSpace) {
        entries[space.key] = Entry(space: space, credential: credential, stamp: nextStamp)
        nextStamp += 1
    }

    mutating func remove(for space: ProtectionSpace) {
        if let entry = entry(for: space) { entries[entry.space.key] = nil }
    }

    var all: [ProtectionSpace: Credential] {
        Dictionary(
            entries.values.map { ($0.space, $0.credential) }, uniquingKeysWith: { a, _ in a })
    }
}

/// Credentials kept in memory for the life of the process: reused by later requests to the same
/// protection space, and the most recent one of an origin sent preemptively (ASIHTTPRequest's
/// session credential store).
///
/// ```swift
/// SessionCredentialStore.shared.set(Credential(user: "alice", password: "wonderland"),
///     for: ProtectionSpace(url: URL(string: "https://api.example.com")!)!)
/// ```
public final class SessionCredentialStore: CredentialStore {
    /// The process-wide store that requests use unless given another.
    public static let shared = SessionCredentialStore()

    // Sendable: the table lives in a Locked box.
    private let table = CountedLocked(CredentialTable())

    /// Creates an empty store.
    public init() {}

    /// True when nothing is stored: every request asks the shared store, which most apps
    /// never fill, so the lookup's URL parsing and the table's lock are skipped then.
    var isEmpty: Bool { table.isEmpty }

    /// The credential for `space`'s realm, else the realm-less one of its origin.
    public func credential(for space: ProtectionSpace) -> Credential? {
        table.withLock { $0.entry(for: space)?.credential }
    }

    /// The credential stored last for `space`'s origin, whatever its realm, and its space.
    public func mostRecentCredential(forOriginOf space: ProtectionSpace)
        -> (space: ProtectionSpace, credential: Credential)?
    {
        table.withLock { $0.mostRecent(forOriginOf: space).map { ($0.space, $0.credential) } }
    }

    /// Stores `credential` for `space`; it becomes the origin's most recent.
    public func set(_ credential: Credential, for space: ProtectionSpace) {
        table.withLock { $0.set(credential, for: space) }
    }

    /// Removes the credential ``credential(for:)`` returns for `space`.
    public func removeCredential(for space: ProtectionSpace) {
        table.withLock { $0.remove(for: space) }
    }

    /// Every stored credential by protection space.
    public var allCredentials: [ProtectionSpace: Credential] {
        table.withLock { $0.all }
    }

    /// Forgets every credential.
    public func removeAll() {
        table.withLock { $0 = CredentialTable() }
    }
}

/// Credentials kept in a file, for good: a JSON document with mode 0600, replaced whole on
/// every change (temporary file, `fsync`, `rename`), so a crash leaves the old or the new file.
///
/// Lookups are served from memory. Changes are written on a private background queue, so
/// ``set(_:for:)`` may be called on the engine's thread; call ``synchronize()`` before the
/// process exits to wait for the last write and learn whether it failed.
///
/// **Security.** Passwords are stored in clear text, protected only by the file's mode (like
/// curl's `.netrc`); the directory is created with mode 0700 when missing. Two processes
/// sharing a file do not see each other's changes until they create a new store, and the last
/// writer wins.
///
/// The format: `{"format": "tern-credentials", "version": 1, "credentials": [...]}`, each entry
/// holding `space` (``ProtectionSpace`` fields: `scheme`, `host`, `port`, `realm`, `isProxy`,
/// `authenticationScheme`), `credential` (`user`, `password`, `persistence`) and `stamp` (the
/// order of storage).
public final class FileCredentialStore: CredentialStore {
    static let formatName = "tern-credentials"
    static let formatVersion = 1

    private struct File: Codable {
        var format: String
        var version: Int
        var credentials: [CredentialTable.Entry]
    }

    private struct State: Sendable {
        var table: CredentialTable
        /// Bumped by every change; the writer writes only when behind.
        var generation: UInt64 = 0
        var writtenGeneration: UInt64 = 0
        var lastError: TernError?
    }

    /// The file the store reads and writes.
    public let fileURL: URL

    // Sendable: the state lives in a Locked box; the queue and URL are immutable and Sendable.
    private let state: Locked<State>
    private let writer = DispatchQueue(label: "tern.credential-file")

    /// Opens the store at `fileURL`, reading the file when it exists (a missing file is an
    /// empty store; it is created at the first change).
    ///
    /// - Throws: ``TernError`` with code ``TernError/Code/fileReadFailed`` when the file exists
    ///   but cannot be read or is not a credential file of a known version.
    public init(fileURL: URL) throws(TernError) {
        self.fileURL = fileURL
        var table = CredentialTable()
        if fileExists(at: fileURL.path) {
            let data = try readFile(at: fileURL.path)
            let file: File
            do {
                file = try JSONDecoder().decode(File.self, from: data)
            } catch {
                throw TernError(
                    code: .fileReadFailed,
                    message: "\(fileURL.path) is not a credential file: \(error)")
            }
            guard file.format == Self.formatName, file.version <= Self.formatVersion else {
                throw TernError(
                    code: .fileReadFailed,
                    message:
                        "\(fileURL.path): unsupported credential file format "
                        + "\(file.format) \(file.version)"
                )
            }
            table = CredentialTable(entries: file.credentials)
        }
        state = Locked(State(table: table))
    }

    /// The credential for `space`'s realm, else the realm-less one of its origin.
    public func credential(for space: ProtectionSpace) -> Credential? {
        state.withLock { $0.table.entry(for: space)?.credential }
    }

    /// The credential stored last for `space`'s origin, whatever its realm, and its space.
    public func mostRecentCredential(forOriginOf space: ProtectionSpace)
        -> (space: ProtectionSpace, credential: Credential)?
    {
        state.withLock { $0.table.mostRecent(forOriginOf: space).map { ($0.space, $0.credential) } }
    }

    /// Stores `credential` for `space` and schedules the file's rewrite.
    public func set(_ credential: Credential, for space: ProtectionSpace) {
        change { $0.set(credential, for: space) }
    }

    /// Removes the credential ``credential(for:)`` returns for `space`, and schedules the file's
    /// rewrite.
    public func removeCredential(for space: ProtectionSpace) {
        change { $0.remove(for: space) }
    }

    /// Forgets every credential (the file is rewritten empty).
    public func removeAll() {
        change { $0 = CredentialTable() }
    }

    /// Every stored credential by protection space.
    public var allCredentials: [ProtectionSpace: Credential] {
        state.withLock { $0.table.all }
    }

    /// Waits until every change so far is on disk.
    ///
    /// - Throws: ``TernError`` with code ``TernError/Code/fileWriteFailed`` when the last write
    ///   failed (the file then holds the last state written successfully). The error is
    ///   reported once.
    public func synchronize() throws(TernError) {
        writer.sync {}
        let error = state.withLock { state -> TernError? in
            defer { state.lastError = nil }
            return state.lastError
        }
        if let error { throw error }
    }

    private func change(_ body: (inout CredentialTable) -> Void) {
        state.withLock { state in
            body(&state.table)
            state.generation += 1
        }
        writer.async { [self] in writeIfBehind() }
    }

    /// Runs on `writer`: writes the newest state unless it is already on disk.
    private func writeIfBehind() {
        let snapshot = state.withLock { state -> (UInt64, [CredentialTable.Entry])? in
            guard state.generation > state.writtenGeneration else { return nil }
            return (state.generation, state.table.entries.values.sorted { $0.stamp < $1.stamp })
        }
        guard let (generation, entries) = snapshot else { return }
        var failure: TernError?
        do throws(TernError) {
            let directory = fileURL.deletingLastPathComponent().path
            if !fileExists(at: directory) {
                try? FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            guard
                let data = try? encoder.encode(
                    File(format: Self.formatName, version: Self.formatVersion, credentials: entries)
                )
            else {
                throw TernError(
                    code: .fileWriteFailed, message: "encode credentials for \(fileURL.path)")
            }
            try writeAtomically(data, to: fileURL.path, permissions: 0o600)
        } catch {
            failure = error
        }
        state.withLock { state in
            if let failure {
                state.lastError = failure
            } else {
                state.writtenGeneration = max(state.writtenGeneration, generation)
            }
        }
    }
}

// MARK: - Asking at challenge time

/// A server's (or proxy's) request for credentials that Tern could not answer from the
/// request or the stores, as passed to an ``AuthenticationChallenge/Handler``.
public struct AuthenticationChallenge: Sendable {
    /// What the handler decides (ASIHTTPRequest's `retryUsingSuppliedCredentials`,
    /// `cancelAuthentication`, or doing nothing).
    public enum Disposition: Sendable, Hashable {
        /// Answer the challenge with this credential; the request is sent again (a body
        /// already sent is sent again whole). If it works, it is kept according to its
        /// ``Credential/persistence``.
        case useCredential(Credential)
        /// Give up: the request fails with ``TernError/authenticationFailed``.
        case cancel
        /// Go on without credentials: the 401 or 407 response becomes the request's response.
        case performDefaultHandling
    }

    /// Decides what to do about a challenge.
    ///
    /// It runs synchronously on the engine's loop thread, so it must return quickly: look the
    /// answer up, don't wait for it. To ask a person, return ``Disposition/cancel`` (or
    /// ``Disposition/performDefaultHandling``), show the prompt, store what they type in a
    /// ``CredentialStore`` (or set it on the request), and execute the request again.
    public typealias Handler = @Sendable (AuthenticationChallenge) -> Disposition

    /// The space that asked: origin (or proxy), realm and scheme.
    public let protectionSpace: ProtectionSpace
    /// The URL the request was sending to when challenged (the target URL, also for a proxy).
    public let url: URL
    /// How many credentials were refused for this space during this request.
    public let previousFailureCount: Int
    /// The last credential refused for this space, if any (to pre-fill a prompt).
    public let proposedCredential: Credential?

    /// Creates a challenge (Tern makes them; this is for tests of handlers).
    public init(
        protectionSpace: ProtectionSpace, url: URL, previousFailureCount: Int = 0,
        proposedCredential: Credential? = nil
    ) {
        self.protectionSpace = protectionSpace
        self.url = url
        self.previousFailureCount = previousFailureCount
        self.proposedCredential = proposedCredential
    }
}

// MARK: - Per-request glue (internal)

/// Decides, for one execution of one request, which credentials answer its challenges, and
/// records those that worked. The C engine's hooks drive it:
///
/// 1. Before submission, ``preemptiveCredential(for:isProxy:)`` (when the request brought no
///    credentials of its own) or ``noteRequestCredential(_:for:isProxy:)`` (when it did).
/// 2. In the auth callback, ``respond(isProxy:scheme:realm:url:)``.
/// 3. In the hop-response callback, ``hopResponded(status:url:isProxy:challenges:)``.
///
/// It never calls stores or the handler while holding its lock.
final class AuthenticationCoordinator: Sendable {
    /// What the auth callback should do.
    enum Action: Sendable, Hashable {
        /// `tern_request_supply_auth(user, password)` and return non-zero.
        case supply(Credential)
        /// Return 0: the challenge response becomes the request's response.
        case stop
        /// Return 0 and fail the request with ``TernError/authenticationFailed``.
        case cancel
    }

    enum Source: Sendable, Hashable {
        case request, sessionStore, persistentStore, handler
    }

    struct Attempt: Sendable {
        var space: ProtectionSpace
        var credential: Credential
        var source: Source
        /// Whether the engine sent it: supplied in the auth callback, sent preemptively as
        /// Basic, or seen answering a challenge. An unused credential is not "confirmed" by a
        /// response that needed none.
        var wasUsed: Bool
        var confirmed = false
    }

    struct State: Sendable {
        /// The credential last handed to the engine, per slot (false: server, true: proxy).
        var current: [Bool: Attempt] = [:]
        var failures: [ProtectionSpace.Key: Int] = [:]
        var refused: [ProtectionSpace.Key: Set<Credential>] = [:]
    }

    let sessionStore: (any CredentialStore)?
    let persistentStore: (any CredentialStore)?
    let handler: AuthenticationChallenge.Handler?
    /// Challenges answered per protection space before giving up (a handler that keeps
    /// returning a wrong password would otherwise loop).
    let maximumAttempts: Int
    // Sendable: the state lives in a Locked box; the rest is immutable and Sendable.
    private let state = Locked(State())

    init(
        sessionStore: (any CredentialStore)?, persistentStore: (any CredentialStore)?,
        handler: AuthenticationChallenge.Handler?, maximumAttempts: Int = 8
    ) {
        self.sessionStore = sessionStore
        self.persistentStore = persistentStore
        self.handler = handler
        self.maximumAttempts = maximumAttempts
    }

    /// False only for a store known to be empty (the built-in session store); any other
    /// store may hold credentials.
    static func mayHoldCredentials(_ store: (any CredentialStore)?) -> Bool {
        guard let store else { return false }
        if let session = store as? SessionCredentialStore { return !session.isEmpty }
        return true
    }

    /// A credential to give the engine before the request starts (`tern_request_set_auth`, or
    /// `tern_request_set_proxy_auth` with `isProxy`), from the stores' most recent for the
    /// origin; `nil` when none. With ``AuthenticationScheme/basic`` as the returned scheme,
    /// send it preemptively (`TERN_AUTH_BASIC`); otherwise let the challenge pick
    /// (`TERN_AUTH_ANY`).
    ///
    /// - Parameters:
    ///   - url: The request's URL, or the proxy's URL when `isProxy`.
    ///   - isProxy: Whether this is for the proxy.
    func preemptiveCredential(for url: URL, isProxy: Bool)
        -> (credential: Credential, scheme: AuthenticationScheme?)?
    {
        guard Self.mayHoldCredentials(sessionStore) || Self.mayHoldCredentials(persistentStore),
            let origin = ProtectionSpace(url: url, isProxy: isProxy)
        else { return nil }
        let found: (ProtectionSpace, Credential, Source)?
        if let (space, credential) = sessionStore?.mostRecentCredential(forOriginOf: origin) {
            found = (space, credential, .sessionStore)
        } else if let (space, credential) = persistentStore?.mostRecentCredential(
            forOriginOf: origin)
        {
            found = (space, credential, .persistentStore)
        } else {
            found = nil
        }
        guard let (space, credential, source) = found else { return nil }
        state.withLock {
            $0.current[isProxy] = Attempt(
                space: space, credential: credential, source: source,
                wasUsed: space.authenticationScheme == .basic)
        }
        return (credential, space.authenticationScheme)
    }

    /// Tells the coordinator that the request carries its own credential (from its URL or
    /// fields), so that a refusal is known and a success is stored by its persistence.
    ///
    /// - Parameters:
    ///   - credential: The request's user and password.
    ///   - url: The request's URL, or the proxy's URL when `isProxy`.
    ///   - isProxy: Whether these are proxy credentials.
    ///   - sentPreemptively: Whether the engine sends them before any challenge (Basic alone).
    func noteRequestCredential(
        _ credential: Credential, for url: URL, isProxy: Bool,
        sentPreemptively: Bool
    ) {
        guard
            let space = ProtectionSpace(
                url: url, isProxy: isProxy, authenticationScheme: sentPreemptively ? .basic : nil)
        else { return }
        state.withLock {
            $0.current[isProxy] = Attempt(
                space: space, credential: credential, source: .request,
                wasUsed: sentPreemptively)
        }
    }

    /// Answers the engine's auth callback.
    ///
    /// - Parameters:
    ///   - isProxy: The callback's `is_proxy`.
    ///   - scheme: The callback's `scheme` (`"Basic"`, `"Digest"`, `"NTLM"` or `""`).
    ///   - realm: The callback's `realm` (`""` when none).
    ///   - url: The URL of the hop that was challenged.
    ///   - proxyURL: The proxy's URL, for a proxy challenge.
    func respond(isProxy: Bool, scheme: String, realm: String, url: URL, proxyURL: URL? = nil)
        -> Action
    {
        guard
            let space = ProtectionSpace(
                url: isProxy ? (proxyURL ?? url) : url, realm: realm.isEmpty ? nil : realm,
                isProxy: isProxy,
                authenticationScheme: scheme.isEmpty ? nil : AuthenticationScheme(rawValue: scheme))
        else { return .stop }

        // The engine asks again only after the credential it had was refused.
        let (failures, proposed, refusedAttempt, refused) = state.withLock { state in
            var refusedAttempt: Attempt?
            if let attempt = state.current[isProxy], attempt.space.originKey == space.originKey {
                refusedAttempt = attempt
                state.refused[space.key, default: []].insert(attempt.credential)
                state.failures[space.key, default: 0] += 1
                state.current[isProxy] = nil
            }
            return (
                state.failures[space.key] ?? 0, refusedAttempt?.credential, refusedAttempt,
                state.refused[space.key] ?? []
            )
        }
        guard failures < maximumAttempts else { return .stop }

        // A refused credential from the session store is dropped, as ASIHTTPRequest does; the
        // persistent store is left alone (a server's bad day should not erase it).
        if let refusedAttempt, refusedAttempt.source == .sessionStore,
            sessionStore?.credential(for: refusedAttempt.space) == refusedAttempt.credential
        {
            sessionStore?.removeCredential(for: refusedAttempt.space)
        }

        var candidates: [(Credential, Source)] = []
        if let c = sessionStore?.credential(for: space) { candidates.append((c, .sessionStore)) }
        if let c = persistentStore?.credential(for: space) {
            candidates.append((c, .persistentStore))
        }
        if let (_, c) = sessionStore?.mostRecentCredential(forOriginOf: space) {
            candidates.append((c, .sessionStore))
        }
        if let (_, c) = persistentStore?.mostRecentCredential(forOriginOf: space) {
            candidates.append((c, .persistentStore))
        }
        if let (credential, source) = candidates.first(where: { !refused.contains($0.0) }) {
            return supply(credential, source: source, space: space, isProxy: isProxy)
        }

        guard let handler else { return .stop }
        let challenge = AuthenticationChallenge(
            protectionSpace: space, url: url, previousFailureCount: failures,
            proposedCredential: proposed)
        switch handler(challenge) {
        case .useCredential(let credential):
            return supply(credential, source: .handler, space: space, isProxy: isProxy)
        case .cancel:
            return .cancel
        case .performDefaultHandling:
            return .stop
        }
    }

    private func supply(
        _ credential: Credential, source: Source, space: ProtectionSpace,
        isProxy: Bool
    ) -> Action {
        state.withLock {
            $0.current[isProxy] = Attempt(
                space: space, credential: credential, source: source,
                wasUsed: true)
        }
        return .supply(credential)
    }

    /// Tells the coordinator about a hop's response head. A response that is not a challenge
    /// (401 for the server, 407 for the proxy) from the space of the credential last supplied
    /// means the credential worked: it is stored by its persistence.
    ///
    /// - Parameters:
    ///   - status: The hop's status.
    ///   - url: The hop's URL.
    ///   - challenges: The values of the hop's `WWW-Authenticate` fields (on a 401) or
    ///     `Proxy-Authenticate` fields (on a 407), to learn the realm of a credential the engine
    ///     answered by itself.
    /// True when a credential went out (or is ready to) on this request: only then can a
    /// response confirm one.
    var hasAttempts: Bool { state.withLock { !$0.current.isEmpty } }

    func hopResponded(status: Int, url: URL, challenges: [String] = []) {
        var toStore: [Attempt] = []
        state.withLock { state in
            for isProxy in [false, true] {
                guard var attempt = state.current[isProxy], !attempt.confirmed else { continue }
                let challenged = status == (isProxy ? 407 : 401)
                if !isProxy {
                    guard let origin = ProtectionSpace(url: url),
                        origin.originKey == attempt.space.originKey
                    else { continue }
                }
                if challenged {
                    // The engine answers this challenge with the credential it holds (or asks
                    // the auth callback when it was refused already). Learn the realm and
                    // scheme for when it is stored.
                    attempt.wasUsed = true
                    if let (scheme, realm) = Self.strongestChallenge(in: challenges) {
                        if attempt.space.realm == nil { attempt.space.realm = realm }
                        if attempt.space.authenticationScheme == nil {
                            attempt.space.authenticationScheme = scheme
                        }
                    }
                    state.current[isProxy] = attempt
                    continue
                }
                guard attempt.wasUsed else { continue }
                attempt.confirmed = true
                state.current[isProxy] = attempt
                toStore.append(attempt)
            }
        }
        for attempt in toStore { remember(attempt) }
    }

    /// Stores a credential that worked: by its persistence when it came from the request or
    /// the handler; a stored one is stored again in the session store, which makes it the
    /// origin's most recent (for preemptive use).
    private func remember(_ attempt: Attempt) {
        switch attempt.source {
        case .sessionStore, .persistentStore:
            sessionStore?.set(attempt.credential, for: attempt.space)
        case .request, .handler:
            switch attempt.credential.persistence {
            case .none:
                break
            case .session:
                sessionStore?.set(attempt.credential, for: attempt.space)
            case .permanent:
                sessionStore?.set(attempt.credential, for: attempt.space)
                persistentStore?.set(attempt.credential, for: attempt.space)
            }
        }
    }

    /// The challenge the engine would answer among `WWW-Authenticate` values: NTLM before
    /// Digest before Basic; its scheme and realm (none for NTLM).
    static func strongestChallenge(in values: [String]) -> (AuthenticationScheme, String?)? {
        let challenges = values.flatMap(parseChallenges)
        if let ntlm = challenges.first(where: { $0.scheme == .ntlm }) {
            return (ntlm.scheme, nil)
        }
        if let digest = challenges.first(where: { $0.scheme == .digest }) {
            return (digest.scheme, digest.realm)
        }
        if let basic = challenges.first(where: { $0.scheme == .basic }) {
            return (basic.scheme, basic.realm)
        }
        return nil
    }

    /// The challenges of one `WWW-Authenticate` value (RFC 9110 11.6.1): a scheme, then
    /// comma-separated `name=value` parameters (values may be quoted strings) up to the next
    /// scheme. Only the scheme and `realm` are kept.
    static func parseChallenges(_ value: String) -> [(scheme: AuthenticationScheme, realm: String?)]
    {
        var result: [(scheme: AuthenticationScheme, realm: String?)] = []
        let chars = Array(value.unicodeScalars)
        var i = 0
        func skipSpaces() { while i < chars.count, chars[i] == " " || chars[i] == "\t" { i += 1 } }
        func token() -> String {
            var text = ""
            while i < chars.count, !" \t,=\"".unicodeScalars.contains(chars[i]) {
                text.unicodeScalars.append(chars[i])
                i += 1
            }
            return text
        }
        func quoted() -> String {
            var text = ""
            i += 1  // opening quote
            while i < chars.count, chars[i] != "\"" {
                if chars[i] == "\\", i + 1 < chars.count { i += 1 }
                text.unicodeScalars.append(chars[i])
                i += 1
            }
            i += 1  // closing quote
            return text
        }
        while i < chars.count {
            skipSpaces()
            if i < chars.count, chars[i] == "," {
                i += 1
                continue
            }
            let name = token()
            skipSpaces()
            if name.isEmpty {
                i += 1
                continue
            }
            if i < chars.count, chars[i] == "=" {
                // A parameter of the current challenge (or token68 padding).
                i += 1
                skipSpaces()
                let parameterValue = i < chars.count && chars[i] == "\"" ? quoted() : token()
                if name.lowercased() == "realm", !result.isEmpty,
                    result[result.count - 1].realm == nil
                {
                    result[result.count - 1].realm = parameterValue
                }
                while i < chars.count, chars[i] == "=" { i += 1 }
            } else {
                result.append((AuthenticationScheme(rawValue: name), nil))
            }
        }
        return result
    }
}
