// The cache policies of the two seeds, as values: ASIHTTPRequest's cachePolicy flags and
// storage policies, and Mesibo's readCache/updateCache flags, resolved into one Behaviour that
// the pure rules (CacheRules.decide) and the store act on.

extension HTTPCache {
    /// How a request uses the cache: which stored responses it may read, whether it may go to the
    /// network, and whether its response is written.
    ///
    /// A policy is a set of flags, as in both libraries it replaces. ASIHTTPRequest's flags read and
    /// write by default and turn behaviours off or on; Mesibo's flags (``readCache``,
    /// ``readCacheForced``, ``updateCache``, ``updateCacheForced``) are opt-in: as soon as one of
    /// them is in the set, the request reads only if a `readCache` flag is present and writes only
    /// if an `updateCache` flag is present.
    ///
    /// ```swift
    /// let asi: HTTPCache.Policy = [.askServerIfModified, .fallbackToCacheIfLoadFails]
    /// let mesibo: HTTPCache.Policy = [.readCache, .updateCache]
    /// cache.defaultPolicy = asi
    /// ```
    ///
    /// An empty set, ``useDefault``, means the cache's ``HTTPCache/defaultPolicy``; when that is
    /// empty too the cache behaves as RFC 9111 says (``askServerIfModifiedWhenStale``).
    public struct Policy: OptionSet, Sendable, Hashable {
        /// The flags as bits (ASIHTTPRequest's values are not kept: combine the named flags).
        public let rawValue: UInt32

        /// Creates a policy from raw flags.
        public init(rawValue: UInt32) {
            self.rawValue = rawValue
        }

        /// The cache's default policy (ASIHTTPRequest's `ASIUseDefaultCachePolicy`).
        public static let useDefault: Policy = []
        /// Never answer from the cache; the response is still written
        /// (`ASIDoNotReadFromCacheCachePolicy`).
        public static let doNotReadFromCache = Policy(rawValue: 1 << 0)
        /// Never write the response to the cache (`ASIDoNotWriteToCacheCachePolicy`).
        public static let doNotWriteToCache = Policy(rawValue: 1 << 1)
        /// Answer from a fresh stored response; revalidate a stale one with a conditional request
        /// (`ASIAskServerIfModifiedWhenStaleCachePolicy`): RFC 9111's behaviour.
        public static let askServerIfModifiedWhenStale = Policy(rawValue: 1 << 2)
        /// Always revalidate a stored response with a conditional request, fresh or not
        /// (`ASIAskServerIfModifiedCachePolicy`).
        public static let askServerIfModified = Policy(rawValue: 1 << 3)
        /// Answer from any stored response, fresh or stale, without asking the server; load only
        /// what is not stored (`ASIOnlyLoadIfNotCachedCachePolicy`).
        public static let onlyLoadIfNotCached = Policy(rawValue: 1 << 4)
        /// Answer only from the cache, never from the network; a request with nothing stored fails
        /// with 504 (`ASIDontLoadCachePolicy`).
        public static let dontLoad = Policy(rawValue: 1 << 5)
        /// When the load fails (no connection, a timeout, a 5xx), answer from a stored response
        /// however stale (`ASIFallbackToCacheIfLoadFailsCachePolicy`).
        public static let fallbackToCacheIfLoadFails = Policy(rawValue: 1 << 6)

        /// Mesibo's `readCache`: answer from the cache as RFC 9111 allows (fresh responses, stale
        /// ones after revalidation).
        public static let readCache = Policy(rawValue: 1 << 8)
        /// Mesibo's `readCacheForced`: answer from any stored response, even a stale one.
        public static let readCacheForced = Policy(rawValue: 1 << 9)
        /// Mesibo's `updateCache`: write the response if RFC 9111 allows storing it.
        public static let updateCache = Policy(rawValue: 1 << 10)
        /// Mesibo's `updateCacheForced`: write the response even when its headers forbid storing
        /// it (`no-store`, no freshness information); only a GET's whole, final response is ever
        /// written. Such a response is stale at once unless ``readCacheForced`` reads it.
        public static let updateCacheForced = Policy(rawValue: 1 << 11)

        private static let mesibo: Policy = [.readCache, .readCacheForced, .updateCache, .updateCacheForced]

        /// The behaviour this policy asks for; `fallback` stands in for ``useDefault``.
        package func behaviour(default fallback: Policy = [], respectsCacheHeaders: Bool = true)
            -> HTTPCache.Behaviour
        {
            let flags = isEmpty ? fallback : self
            var result = HTTPCache.Behaviour()
            result.ignoresCacheHeaders = !respectsCacheHeaders
            if !flags.isDisjoint(with: Self.mesibo) {
                result.read = flags.contains(.readCacheForced) ? .anyStored : flags.contains(.readCache) ? .standard : .never
                result.write = flags.contains(.updateCacheForced) ? .forced : flags.contains(.updateCache) ? .standard : .never
            }
            if flags.contains(.askServerIfModified) { result.read = .alwaysRevalidate }
            if flags.contains(.onlyLoadIfNotCached) { result.read = .anyStored }
            if flags.contains(.dontLoad) {
                result.read = .anyStored
                result.mayLoad = false
            }
            if flags.contains(.doNotReadFromCache) { result.read = .never }
            if flags.contains(.doNotWriteToCache) { result.write = .never }
            if flags.contains(.fallbackToCacheIfLoadFails) { result.fallbackOnFailure = true }
            if !respectsCacheHeaders, result.write == .standard { result.write = .forced }
            return result
        }
    }

    /// Where a stored response lives (ASIHTTPRequest's `ASICacheStoragePolicy`).
    public enum StoragePolicy: Sendable, Hashable {
        /// Kept only for the life of this ``HTTPCache`` instance (in a folder of its own inside the
        /// cache folder, removed when the instance goes away, or by the next process to open the
        /// folder if this one was killed): `ASICacheForSessionDurationCacheStoragePolicy`.
        case sessionOnly
        /// Kept across runs until evicted or cleared: `ASICachePermanentlyCacheStoragePolicy`.
        case permanent
    }
}

extension HTTPCache {
    /// A policy resolved into what the cache does (see ``HTTPCache/Policy``).
    package struct Behaviour: Sendable, Equatable {
        /// Which stored responses a request may be answered from.
        package enum Read: Sendable, Equatable {
            /// None.
            case never
            /// RFC 9111: fresh ones, stale ones after revalidation or as directives allow.
            case standard
            /// Any stored one, but only after a conditional request succeeds.
            case alwaysRevalidate
            /// Any stored one as it is, fresh or stale.
            case anyStored
        }

        /// Whether the response is written.
        package enum Write: Sendable, Equatable {
            /// Never.
            case never
            /// When RFC 9111 allows (``CacheRules/isStorable(method:request:status:response:shared:)``).
            case standard
            /// Whenever the method and status could be stored at all.
            case forced
        }

        /// Which stored responses may answer.
        package var read: Read = .standard
        /// Whether the response is written.
        package var write: Write = .standard
        /// False for the "don't load" policy: the network is never used.
        package var mayLoad = true
        /// Answer from any stored response when the load fails.
        package var fallbackOnFailure = false
        /// ASIHTTPRequest's `shouldRespectCacheControlHeaders = false`.
        package var ignoresCacheHeaders = false

        package init() {}

        /// RFC 9111 behaviour.
        package static let standard = Behaviour()
    }
}
