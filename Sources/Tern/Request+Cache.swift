// The request's cache settings: which HTTPCache, which policy, how long and where to keep.

#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

extension Request {
    /// The HTTP cache that answers and stores this request's responses (default `nil`: none,
    /// as curl). GET and HEAD requests are answered from it when RFC 9111 and
    /// ``cachePolicy`` allow, revalidated with `If-None-Match`/`If-Modified-Since` when stale,
    /// and their responses stored (to memory, to a ``downloadFile`` and through a
    /// ``dataHandler`` alike: a streamed body goes into the cache as it arrives, and a stored
    /// one reaches the handler in pieces of at most 64 KiB); a HEAD response refreshes the
    /// stored GET response it describes (RFC 9111 4.3.5); unsafe methods invalidate what they
    /// change. A ranged or resumed download, and a request with its own `Range` field, pass
    /// the cache by.
    ///
    /// ```swift
    /// let cache = try HTTPCache(folder: "/var/cache/myapp", sizeLimit: 100 << 20)
    /// request.cache = cache
    /// let response = try await request.response()
    /// print(response.isFromCache)
    /// ```
    public var cache: HTTPCache? {
        get { setting(\.cache) }
        set { set(\.cache, newValue) }
    }

    /// How this request uses ``cache`` (default ``HTTPCache/Policy/useDefault``: the cache's
    /// ``HTTPCache/defaultPolicy``).
    public var cachePolicy: HTTPCache.Policy {
        get { setting(\.cachePolicy) }
        set { set(\.cachePolicy, newValue) }
    }

    /// Whether this request's response is kept for this process only or on disk for good
    /// (default `nil`: the cache's ``HTTPCache/defaultStoragePolicy``).
    public var cacheStoragePolicy: HTTPCache.StoragePolicy? {
        get { setting(\.cacheStoragePolicy) }
        set { set(\.cacheStoragePolicy, newValue) }
    }

    /// Keeps the response fresh for this many seconds whatever its headers say
    /// (ASIHTTPRequest's `secondsToCache`; default `nil`: the cache's, else the headers').
    public var secondsToCache: TimeInterval? {
        get { setting(\.secondsToCache) }
        set { set(\.secondsToCache, newValue) }
    }
}
