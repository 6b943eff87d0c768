// HTTPCache: the public face of the cache (folder, size limit, default policies, clearing)
// and the package-level operations the request path calls: look up, decide, write, refresh
// after a 304, invalidate after an unsafe method.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
package import HTTPTypes

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A private HTTP cache (RFC 9111) kept in a folder on disk, with a size limit and
/// least-recently-used eviction: Mesibo's `setCacheFolder(path, size)`, ASIHTTPRequest's
/// `ASIDownloadCache`.
///
/// ```swift
/// let cache = try HTTPCache(folder: "/var/cache/myapp/http", sizeLimit: 256 << 20)
/// cache.defaultPolicy = [.askServerIfModifiedWhenStale, .fallbackToCacheIfLoadFails]
/// ```
///
/// Entries are stored whole or not at all: a process killed while storing leaves nothing a
/// later run would serve, and several processes (two `tern --cache DIR` runs) may use one
/// folder at once. Responses stored with ``StoragePolicy/sessionOnly`` live in a folder of
/// this instance's own and go away with it.
public final class HTTPCache: Sendable {
    /// The cache folder.
    public let folder: String
    /// The most bytes the stored entries may take on disk (permanent and session entries
    /// each); the least recently used go first when a store passes it.
    public let sizeLimit: Int64
    /// The bytes of bodies the memory layer keeps (0: no memory layer).
    public let memoryLimit: Int

    let permanent: CacheStore
    private let session: Locked<(store: CacheStore, owner: Int32)?> = Locked(nil)
    private let settings = Locked(Settings())

    private struct Settings {
        var defaultPolicy: Policy = []
        var defaultStoragePolicy: StoragePolicy = .permanent
        var respectsCacheControlHeaders = true
        var secondsToCache: TimeInterval?
    }

    /// Opens the cache in `folder` (created if missing), limited to `sizeLimit` bytes.
    ///
    /// Opening removes what killed processes left behind (temporary files, session folders)
    /// and evicts down to the limit.
    ///
    /// - Parameters:
    ///   - folder: The cache folder; entries go in `entries/`, writes in progress in `tmp/`.
    ///   - sizeLimit: The most bytes the entries may take (default 64 MiB).
    ///   - memoryLimit: The bytes of response bodies kept in memory as well, for the most
    ///     recently used entries (0, the default: none). Entries read from memory are still
    ///     checked against the folder, so another process's newer entry is never shadowed.
    ///     Either way the most recently used entries stay open with their head parsed (at
    ///     most 64 with bodies up to 1 MiB without a memory limit), so a hit reads only the
    ///     body.
    ///   - syncsToDisk: Whether each entry is flushed to disk before it becomes visible, so
    ///     that it is also whole or absent after a power loss (the default). Without it an
    ///     entry is still whole or absent after a crash of the process.
    /// - Throws: ``TernError/Code/fileWriteFailed`` when the folder cannot be created.
    public init(
        folder: String, sizeLimit: Int64 = 64 << 20, memoryLimit: Int = 0, syncsToDisk: Bool = true
    ) throws(TernError) {
        self.folder = folder
        self.sizeLimit = sizeLimit
        self.memoryLimit = memoryLimit
        permanent = try CacheStore(folder: folder, sizeLimit: sizeLimit, memoryLimit: memoryLimit, syncsToDisk: syncsToDisk)
        removeAbandonedSessions()
    }

    deinit {
        session.withLock { current in
            guard let current else { return }
            removeTree(current.store.folder)
            close(current.owner)
        }
    }

    /// The policy of requests whose own policy is ``Policy/useDefault`` (empty: RFC 9111).
    public var defaultPolicy: Policy {
        get { settings.withLock { $0.defaultPolicy } }
        set { settings.withLock { $0.defaultPolicy = newValue } }
    }

    /// Where responses are stored unless a request says otherwise (``StoragePolicy/permanent``).
    public var defaultStoragePolicy: StoragePolicy {
        get { settings.withLock { $0.defaultStoragePolicy } }
        set { settings.withLock { $0.defaultStoragePolicy = newValue } }
    }

    /// ASIHTTPRequest's `shouldRespectCacheControlHeaders`. When false, `Cache-Control`,
    /// `Expires` and `Pragma` are ignored: every whole GET response is stored and served
    /// until ``secondsToCache`` (if set) runs out.
    public var shouldRespectCacheControlHeaders: Bool {
        get { settings.withLock { $0.respectsCacheControlHeaders } }
        set { settings.withLock { $0.respectsCacheControlHeaders = newValue } }
    }

    /// ASIHTTPRequest's `secondsToCache`: when set, a stored response is fresh for this long,
    /// whatever its headers say (`nil`, the default, lets the headers decide).
    public var secondsToCache: TimeInterval? {
        get { settings.withLock { $0.secondsToCache } }
        set { settings.withLock { $0.secondsToCache = newValue } }
    }

    /// The bytes the stored entries take now, permanent and session ones.
    public var size: Int64 {
        permanent.size + (session.withLock { $0?.store }?.size ?? 0)
    }

    /// Removes stored responses: those of one storage policy, or all of them (`nil`).
    /// ASIHTTPRequest's `clearCachedResponsesForStoragePolicy:`.
    public func removeAll(storagePolicy: StoragePolicy? = nil) {
        if storagePolicy != .sessionOnly { permanent.removeAll() }
        if storagePolicy != .permanent { session.withLock { $0?.store }?.removeAll() }
    }

    /// Removes every stored response (all variants) for `url`.
    public func removeResponses(for url: URL) {
        let key = CacheRules.key(for: url)
        permanent.remove(key: key)
        session.withLock { $0?.store }?.remove(key: key)
    }

    /// Whether a response for `url` is stored (fresh or not, any variant).
    public func hasResponse(for url: URL) -> Bool {
        let key = CacheRules.key(for: url)
        return !permanent.entries(key: key).isEmpty || !(sessionStore(create: false)?.entries(key: key).isEmpty ?? true)
    }

    // MARK: For the request path

    /// The behaviour a request's policy asks for, with this cache's defaults filled in.
    package func behaviour(for policy: Policy) -> Behaviour {
        let s = settings.withLock { $0 }
        return policy.behaviour(default: s.defaultPolicy, respectsCacheHeaders: s.respectsCacheControlHeaders)
    }

    /// The stored response a request selects (session entries first), if any.
    package func lookup(url: URL, request: HTTPFields) -> CacheEntry? {
        let key = CacheRules.key(for: url)
        if let store = sessionStore(create: false), let entry = store.lookup(key: key, request: request) { return entry }
        return permanent.lookup(key: key, request: request)
    }

    /// Looks up and decides in one step: the stored response (if any) and what to do.
    package func plan(
        method: HTTPRequest.Method, url: URL, request: HTTPFields, policy: Policy = [], now: Date = Date()
    ) -> (entry: CacheEntry?, decision: CacheDecision) {
        let behaviour = behaviour(for: policy)
        let entry = behaviour.read == .never ? nil : lookup(url: url, request: request)
        let decision = CacheRules.decide(
            method: method, request: request, stored: entry?.head, facts: entry?.facts, behaviour: behaviour, now: now)
        return (entry, decision)
    }

    /// A writer for a response, or `nil` when the policy or RFC 9111 say not to store it.
    /// The caller appends the body as it arrives and commits when it ended well.
    package func writer(
        method: HTTPRequest.Method, url: URL, request: HTTPFields, status: Int, reason: String = "",
        response: HTTPFields, requestTime: Date, responseTime: Date, policy: Policy = [],
        storagePolicy: StoragePolicy? = nil, secondsToCache: TimeInterval? = nil, expectedLength: Int64? = nil
    ) -> CacheWriter? {
        let behaviour = behaviour(for: policy)
        switch behaviour.write {
        case .never:
            return nil
        case .standard:
            guard CacheRules.isStorable(method: method, request: request, status: status, response: response) else { return nil }
        case .forced:
            guard method == .get, status >= 200, status != 206, status != 304,
                  CacheRules.varyNames(response) != nil else { return nil }
        }
        let s = settings.withLock { $0 }
        var expiry: Date?
        if let seconds = secondsToCache ?? s.secondsToCache {
            expiry = responseTime.addingTimeInterval(seconds)
        } else if behaviour.ignoresCacheHeaders {
            expiry = .distantFuture
        }
        let head = CachedHead(
            key: CacheRules.key(for: url), status: status, reason: reason, headers: CacheRules.storedFields(response),
            varyValues: CacheRules.varyValues(request: request, names: CacheRules.varyNames(response) ?? []),
            requestTime: requestTime, responseTime: responseTime, expiresOverride: expiry)
        let store: CacheStore? = (storagePolicy ?? s.defaultStoragePolicy) == .sessionOnly ? sessionStore(create: true) : permanent
        return try? store?.makeWriter(head: head, expectedLength: expectedLength)
    }

    /// Refreshes a stored response from a 304 (or a HEAD response) that validates it, and
    /// returns the refreshed entry; `nil` when the 304 does not describe it.
    package func refresh(
        _ entry: CacheEntry, with notModified: HTTPFields, requestTime: Date, responseTime: Date
    ) -> CacheEntry? {
        guard CacheRules.validates(notModified, entry.head) else { return nil }
        let head = CacheRules.updated(entry.head, with: notModified, requestTime: requestTime, responseTime: responseTime)
        let store = entry.path.hasPrefix(permanent.folder + "/") ? permanent : sessionStore(create: false) ?? permanent
        return (try? store.updateHead(of: entry, to: head)) ?? nil
    }

    /// Removes what an unsafe request's response invalidates (RFC 9111 4.4).
    package func invalidate(method: HTTPRequest.Method, url: URL, status: Int, response: HTTPFields) {
        for key in CacheRules.invalidatedKeys(method: method, url: url, status: status, response: response) {
            permanent.remove(key: key)
            sessionStore(create: false)?.remove(key: key)
        }
    }

    // MARK: Session storage

    private var sessionsFolder: String { folder + "/sessions" }

    private func sessionStore(create: Bool) -> CacheStore? {
        session.withLock { current in
            if let current { return current.store }
            guard create else { return nil }
            _ = mkdir(sessionsFolder, 0o700)
            let dir = "\(sessionsFolder)/\(getpid())-\(CacheStore.hex(UInt64.random(in: 0...UInt64.max)))"
            guard mkdir(dir, 0o700) == 0 else { return nil }
            let owner = open(dir + "/owner", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard owner >= 0, flock(owner, LOCK_EX | LOCK_NB) == 0,
                  let store = try? CacheStore(folder: dir, sizeLimit: sizeLimit, memoryLimit: memoryLimit, syncsToDisk: false) else {
                if owner >= 0 { close(owner) }
                removeTree(dir)
                return nil
            }
            current = (store, owner)
            return store
        }
    }

    /// Session folders whose owner is gone (its `owner` file is not flock'ed any more).
    private func removeAbandonedSessions() {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        for name in listDirectory(sessionsFolder) {
            let dir = sessionsFolder + "/" + name
            let fd = open(dir + "/owner", O_RDONLY | O_CLOEXEC)
            var info = stat()
            if fd < 0 {
                // A folder whose owner never got to create its lock file: give it time.
                if stat(dir, &info) == 0, now.tv_sec - info.st_mtim.tv_sec >= 5 { removeTree(dir) }
                continue
            }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { removeTree(dir) }
            close(fd)
        }
    }
}

/// Removes a folder and everything in it (no symbolic links followed).
func removeTree(_ path: String) {
    var info = stat()
    guard lstat(path, &info) == 0 else { return }
    if (info.st_mode & S_IFMT) == S_IFDIR {
        for name in listDirectory(path) { removeTree(path + "/" + name) }
        rmdir(path)
    } else {
        unlink(path)
    }
}
