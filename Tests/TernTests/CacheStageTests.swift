// The cache as a stage of a request, against the fault-injection server's /cacheable endpoint
// (caching headers of the test's choosing, requests counted per key) and nginx's static files
// (/cached/: expires 1h; requests counted in its access log): fresh hits, revalidation with 304,
// no-store, downloads to a file, bodies streamed to a data handler and the CLI's stdout,
// invalidation, every policy, Vary, stale-if-error, HEAD refreshing a stored GET, and two CLI
// processes on one folder.

import Dispatch
import Foundation
import HTTPTypes
import Testing
@testable import Tern

/// What /cacheable-count reports for a key.
struct CacheableCount: Decodable, Equatable {
    var requests: Int
    var full: Int
    var not_modified: Int
}

extension TernTests {
    @Suite struct CacheStage {
        let servers: Servers
        let cache: HTTPCache
        let folder = temporaryPath("cache")
        let key = "c-\(UUID().uuidString.prefix(8))"

        init() throws {
            servers = try Servers.get()
            cache = try HTTPCache(folder: folder, sizeLimit: 64 << 20)
        }

        func url(_ query: String, key: String? = nil) -> URL {
            servers.fault("/cacheable?key=\(key ?? self.key)&\(query)")
        }

        func get(_ url: URL, policy: HTTPCache.Policy = .useDefault, fields: [(String, String)] = [])
            async throws -> Request
        {
            let request = Request(url: url)
            request.cache = cache
            request.cachePolicy = policy
            for (name, value) in fields { request.setHeader(name, value) }
            _ = try await request.response()
            return request
        }

        func count(_ key: String? = nil) async throws -> CacheableCount {
            let response = try await Request(url: servers.fault("/cacheable-count?key=\(key ?? self.key)")).response()
            return try JSONDecoder().decode(CacheableCount.self, from: response.data)
        }

        @Test func aFreshResponseIsAnsweredFromTheCache() async throws {
            let target = url("cc=max-age=60&size=5000")
            let first = try await get(target)
            #expect(first.statusCode == 200 && !first.isFromCache)
            let second = try await get(target)
            #expect(second.isFromCache)
            #expect(second.statusCode == 200)
            #expect(second.data == first.data && second.data?.count == 5002)
            #expect(second.result.flatMap { try? $0.get().headerFields[.age] } != nil, "no Age field")
            #expect(try await count() == CacheableCount(requests: 1, full: 1, not_modified: 0))
        }

        @Test func aStaleResponseIsRevalidatedAndA304ServesTheStoredBody() async throws {
            let target = url("cc=max-age=0&etag=auto&size=300")
            let first = try await get(target)
            let second = try await get(target)
            #expect(second.isFromCache, "a 304 confirms the stored response")
            #expect(second.statusCode == 200 && second.data == first.data)
            #expect(try await count() == CacheableCount(requests: 2, full: 1, not_modified: 1))
        }

        @Test func noStoreIsNeverStored() async throws {
            let target = url("cc=no-store")
            _ = try await get(target)
            let second = try await get(target)
            #expect(!second.isFromCache)
            #expect(try await count().full == 2)
            #expect(!cache.hasResponse(for: target))
        }

        @Test func aDownloadIsStoredAndServedAsAFile() async throws {
            let target = url("cc=max-age=60&size=3000000")
            let path = temporaryPath("download")
            defer { try? FileManager.default.removeItem(atPath: path) }
            for round in 0..<2 {
                try? FileManager.default.removeItem(atPath: path)
                let request = Request(url: target)
                request.cache = cache
                request.downloadFile = path
                let response = try await request.response()
                #expect(response.isFromCache == (round == 1))
                let data = try Data(contentsOf: URL(fileURLWithPath: path))
                #expect(data.count == 3_000_002)
                #expect(data.suffix(2) == Data("v1".utf8))
                #expect(!FileManager.default.fileExists(atPath: path + ".part"))
            }
            #expect(try await count().requests == 1)
        }

        @Test func aCachedDownloadToADeviceLeavesTheDeviceAlone() async throws {
            let target = url("cc=max-age=60&size=1000")
            _ = try await get(target)  // stored from memory
            for _ in 0..<2 {
                let request = Request(url: target)
                request.cache = cache
                request.downloadFile = "/dev/null"
                let response = try await request.response()
                #expect(response.isFromCache)
                var info = stat()
                #expect(stat("/dev/null", &info) == 0 && (info.st_mode & S_IFMT) == S_IFCHR, "/dev/null was replaced")
            }
            // A download to /dev/null stores nothing (there is nothing to read back).
            let other = url("cc=max-age=60&size=1000", key: key + "-dev")
            let request = Request(url: other)
            request.cache = cache
            request.downloadFile = "/dev/null"
            _ = try await request.response()
            #expect(!cache.hasResponse(for: other))
            var info = stat()
            #expect(stat("/dev/null", &info) == 0 && (info.st_mode & S_IFMT) == S_IFCHR)
        }

        @Test func anUnsafeMethodInvalidatesTheStoredResponse() async throws {
            let target = url("cc=max-age=60")
            _ = try await get(target)
            #expect(cache.hasResponse(for: target))
            let post = Request(url: target, method: .post)
            post.cache = cache
            post.body = Data("x".utf8)
            _ = try await post.response()
            #expect(!cache.hasResponse(for: target))
            let again = try await get(target)
            #expect(!again.isFromCache)
        }

        @Test func policies() async throws {
            let target = url("cc=max-age=60")
            _ = try await get(target)
            let bypass = try await get(target, policy: .doNotReadFromCache)
            #expect(!bypass.isFromCache)
            let ask = try await get(target, policy: .askServerIfModified)
            #expect(!ask.isFromCache, "no validator: the server answers in full")
            #expect(try await count().full == 3)
            // Nothing stored under another key: only-if-cached answers 504 without the network.
            let other = url("cc=max-age=60", key: key + "-none")
            let offline = try await get(other, policy: .dontLoad)
            #expect(offline.statusCode == 504 && !offline.isFromCache)
            #expect(try await count(key + "-none").requests == 0)
            let directive = try await get(other, fields: [("Cache-Control", "only-if-cached")])
            #expect(directive.statusCode == 504)
            // A write-less request leaves nothing behind.
            let unwritten = url("cc=max-age=60", key: key + "-nowrite")
            _ = try await get(unwritten, policy: .doNotWriteToCache)
            #expect(!cache.hasResponse(for: unwritten))
        }

        @Test func varyKeepsOneResponsePerValue() async throws {
            let target = url("cc=max-age=60&vary=X-Lang")
            _ = try await get(target, fields: [("X-Lang", "en")])
            _ = try await get(target, fields: [("X-Lang", "fr")])
            let en = try await get(target, fields: [("X-Lang", "en")])
            let fr = try await get(target, fields: [("X-Lang", "fr")])
            #expect(en.isFromCache && fr.isFromCache)
            #expect(try await count().full == 2)
        }

        @Test func staleIfErrorServesTheStoredResponseOnA503() async throws {
            let target = url("cc=max-age=0,stale-if-error=60&fail_after=1")
            let first = try await get(target)
            #expect(first.statusCode == 200)
            let second = try await get(target)
            #expect(second.statusCode == 200 && second.isFromCache, "status \(second.statusCode)")
            #expect(second.data == first.data)
            let counts = try await count()
            #expect(counts.requests == 2 && counts.full == 1)
        }

        @Test func theCLIsCacheFolderAnswersTheSecondRun() async throws {
            let folder = temporaryPath("cli-cache")
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let target = url("cc=max-age=60&size=200000").absoluteString
            var outputs: [Data] = []
            var lines: [String] = []
            for round in 0..<2 {
                let file = temporaryPath("cli-out-\(round)")
                defer { try? FileManager.default.removeItem(atPath: file) }
                let run = try tern(["-s", "--cache", folder, "-o", file, "-w", "%{http_code} %{size_download}", target])
                #expect(run.status == 0)
                lines.append(String(decoding: run.stdout, as: UTF8.self))
                outputs.append(try Data(contentsOf: URL(fileURLWithPath: file)))
            }
            #expect(outputs[0].count == 200_002 && outputs[0] == outputs[1])
            #expect(lines == ["200 200002", "200 200002"])
            #expect(try await count().requests == 1, "the second run went to the network")
            let bad = try tern(["-s", "--cache", "/proc/forbidden/cache", target])
            #expect(bad.status == 23)
        }

        @Test func aRedirectedResponseIsStoredUnderTheURLThatAnswered() async throws {
            let target = url("cc=max-age=60")
            let redirect = servers.fault(
                "/redirect?status=302&to=\(target.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)")
            let request = Request(url: redirect)
            request.cache = cache
            let response = try await request.response()
            #expect(response.statusCode == 200 && response.url == target)
            #expect(cache.hasResponse(for: target))
            #expect(!cache.hasResponse(for: redirect))
            let direct = try await get(target)
            #expect(direct.isFromCache)
        }

        @Test func theFallbackPolicyAnswersA5xxFromAStaleResponse() async throws {
            let target = url("cc=max-age=0&fail_after=1")
            _ = try await get(target)
            let plain = try await get(target)
            #expect(plain.statusCode == 503, "no stale-if-error, no fallback: the 503 goes through")
            let fallback = try await get(target, policy: .fallbackToCacheIfLoadFails)
            #expect(fallback.statusCode == 200 && fallback.isFromCache)
        }

        @Test func theCLIsHeadIsTheServedResponsesOnAHitAndAfterA304() async throws {
            // -D shows the head of what was served: the stored 200 (with Age) on a hit, and
            // on a revalidation the refreshed 200, not the 304 that refreshed it.
            let folder = temporaryPath("cli-cache-head")
            let headFile = temporaryPath("cli-cache-head.txt")
            let bodyFile = temporaryPath("cli-cache-head.body")
            defer {
                for path in [folder, headFile, bodyFile] { try? FileManager.default.removeItem(atPath: path) }
            }
            func run(_ target: String) throws -> String {
                let result = try tern(["-s", "--cache", folder, "-D", headFile, "-o", bodyFile, target])
                #expect(result.status == 0)
                return (try? String(contentsOfFile: headFile, encoding: .utf8)) ?? ""
            }
            let fresh = url("cc=max-age=60").absoluteString
            #expect(try run(fresh).hasPrefix("HTTP/1.1 200"))
            let hit = try run(fresh)
            #expect(hit.hasPrefix("HTTP/1.1 200") && hit.contains("\r\nAge: "), "\(hit)")
            #expect(try await count().requests == 1)
            let stale = url("cc=no-cache&etag=auto").absoluteString
            _ = try run(stale)
            let revalidated = try run(stale)
            #expect(revalidated.hasPrefix("HTTP/1.1 200") && !revalidated.contains("304"), "\(revalidated)")
        }

        @Test func aCachedAnswerRunsTheListenerAndCompletions() async throws {
            let target = url("cc=max-age=60")
            _ = try await get(target)
            let events = Recorder<Int>()
            let request = Request(url: target)
            request.cache = cache
            request.listener = { _, _, percent in
                events.append(percent)
                return true
            }
            let completed = Recorder<Bool>()
            request.onCompletion { request in completed.append(request.isFromCache) }
            let response = try await request.response()
            #expect(response.isFromCache)
            #expect(eventually { completed.all == [true] })
            #expect(events.all.last == 100 && events.all.filter { $0 == 100 }.count == 1, "\(events.all)")
        }
    
        // MARK: Bodies streamed to a data handler (the CLI without -o)

        @Test func aStreamedBodyIsStoredAndAHitIsHandedOverInPieces() async throws {
            let target = url("cc=max-age=60&size=1000000")
            var bodies: [Data] = []
            for round in 0..<2 {
                let pieces = Recorder<Int>()
                let body = Locked(Data())
                let request = Request(url: target)
                request.cache = cache
                request.dataHandler = { data in
                    pieces.append(data.count)
                    body.withLock { $0.append(data) }
                    return true
                }
                let response = try await request.response()
                #expect(response.statusCode == 200)
                #expect(response.isFromCache == (round == 1))
                bodies.append(body.withLock { $0 })
                if round == 1 {
                    #expect(pieces.all.count >= 15 && pieces.all.allSatisfy { $0 <= 65536 }, "\(pieces.all.count) pieces")
                }
            }
            #expect(bodies[0].count == 1_000_002 && bodies[0] == bodies[1])
            #expect(try await count().requests == 1, "the second request went to the network")
        }

        @Test func aStreamedRequestFallsBackWithoutTheErrorBody() async throws {
            // The 503's body is held back: the data handler sees the stored body only.
            let target = url("cc=max-age=0,stale-if-error=60&fail_after=1")
            let stored = try await get(target)
            let body = Locked(Data())
            let request = Request(url: target)
            request.cache = cache
            request.dataHandler = { data in
                body.withLock { $0.append(data) }
                return true
            }
            let response = try await request.response()
            #expect(response.statusCode == 200 && response.isFromCache)
            #expect(body.withLock { $0 } == stored.data)
            #expect(try await count().requests == 2)
        }

        @Test func theCLIWithoutOutputFileReadsAndStoresTheCache() async throws {
            let folder = temporaryPath("cli-cache-stdout")
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let target = url("cc=max-age=60&size=300000").absoluteString
            let first = try tern(["-s", "--cache", folder, target])
            let second = try tern(["-s", "--cache", folder, target])
            #expect(first.status == 0 && second.status == 0)
            #expect(first.stdout.count == 300_002 && first.stdout == second.stdout)
            #expect(try await count().requests == 1, "the second run went to the network")
        }

        @Test func theCLIsHeadAndWriteOutOfAHitAreTheNetworkRunsPlusAge() async throws {
            let folder = temporaryPath("cli-cache-idw")
            let heads = [temporaryPath("cli-cache-D0"), temporaryPath("cli-cache-D1")]
            defer { for path in [folder] + heads { try? FileManager.default.removeItem(atPath: path) } }
            let target = url("cc=max-age=60&size=70000").absoluteString
            var outputs: [String] = []
            var dumped: [String] = []
            for round in 0..<2 {
                let run = try tern([
                    "-s", "-i", "--cache", folder, "-D", heads[round],
                    "-w", "\n%{http_code} %{size_download} %{content_type} %{http_version} %{num_redirects} %{url_effective}|%{num_connects} %{size_header}", target,
                ])
                #expect(run.status == 0)
                outputs.append(String(decoding: run.stdout, as: UTF8.self))
                dumped.append((try? String(contentsOfFile: heads[round], encoding: .utf8)) ?? "")
            }
            #expect(try await count().requests == 1)
            // RFC 9111 5.1: a response served from a cache carries Age; nothing else differs.
            func withoutAge(_ text: String) -> String {
                text.replacingOccurrences(of: #"\r\nAge: \d+"#, with: "", options: .regularExpression)
            }
            #expect(!outputs[0].contains("\r\nAge: ") && outputs[1].contains("\r\nAge: "))
            #expect(dumped[1].contains("\r\nAge: "))
            #expect(dumped[0] == withoutAge(dumped[1]))
            // -w: the same, except what a hit does not do (no connection) and the Age line's bytes.
            let lines = outputs.map { $0.split(separator: "\n").last.map(String.init) ?? "" }
            let same = lines.map { $0.split(separator: "|").first.map(String.init) ?? "" }
            #expect(same[0] == same[1] && same[0] == "200 70002 application/octet-stream 1.1 0 \(target)", "\(lines)")
            let rest = lines.map { $0.split(separator: "|").last?.split(separator: " ").compactMap { Int($0) } ?? [] }
            let ageLine = dumped[1].utf8.count - dumped[0].utf8.count
            #expect(rest[0].count == 2 && rest[1].count == 2 && rest[0][0] == 1 && rest[1][0] == 0, "\(lines)")
            #expect(rest.count == 2 && rest[1].last == (rest[0].last ?? 0) + ageLine, "\(lines)")
            let headAndBody = outputs.map { withoutAge(String($0[..<($0.lastIndex(of: "\n") ?? $0.endIndex)])) }
            #expect(headAndBody[0] == headAndBody[1])
            #expect(outputs[0].count > 70002)
        }

        // MARK: Policies end to end

        /// Requests nginx's access log shows for paths containing `token`.
        func nginxRequests(_ token: String) -> [String] {
            let log = (try? String(contentsOfFile: servers.state + "/access.log", encoding: .utf8)) ?? ""
            return log.split(separator: "\n").filter { $0.contains(token) }.map(String.init)
        }

        @Test func nginxStaticFilesWithALifetimeAreServedAndRevalidated() async throws {
            let token = "t=\(key)"
            let target = servers.nginx("/cached/64k.txt?\(token)")
            let first = try await get(target)
            #expect(first.statusCode == 200 && !first.isFromCache && first.data?.count == 65536)
            #expect(first.result.flatMap { try? $0.get().headerFields[.cacheControl] } == "max-age=3600")
            let hit = try await get(target)
            #expect(hit.isFromCache && hit.data == first.data)
            #expect(nginxRequests(token).count == 1)
            // askServerIfModified: a conditional GET, nginx's 304, the stored body.
            let asked = try await get(target, policy: .askServerIfModified)
            #expect(asked.isFromCache && asked.statusCode == 200 && asked.data == first.data)
            let lines = nginxRequests(token)
            #expect(lines.count == 2 && lines.last?.contains("\" 304 ") == true, "\(lines)")
            // A plain static file has no lifetime but Last-Modified: secondsToCache makes it fresh.
            let plain = servers.nginx("/1k.bin?\(token)-plain")
            let request = Request(url: plain)
            request.cache = cache
            request.secondsToCache = 60
            _ = try await request.response()
            let again = Request(url: plain)
            again.cache = cache
            let response = try await again.response()
            #expect(response.isFromCache)
            #expect(nginxRequests("\(token)-plain").count == 1)
        }

        @Test func mesibosReadAndUpdateFlags() async throws {
            let target = url("cc=max-age=60")
            // readCache alone reads but never writes.
            _ = try await get(target, policy: .readCache)
            #expect(!cache.hasResponse(for: target))
            // updateCache alone writes but never reads.
            _ = try await get(target, policy: .updateCache)
            #expect(cache.hasResponse(for: target))
            let written = try await get(target, policy: .updateCache)
            #expect(!written.isFromCache)
            #expect(try await count().requests == 3)
            let read = try await get(target, policy: .readCache)
            #expect(read.isFromCache)
            #expect(try await count().requests == 3)

            // updateCache honours no-store; updateCacheForced stores it anyway, stale at once:
            // readCache does not use it, readCacheForced does.
            let forbidden = url("cc=no-store", key: key + "-ns")
            _ = try await get(forbidden, policy: .updateCache)
            #expect(!cache.hasResponse(for: forbidden))
            _ = try await get(forbidden, policy: .updateCacheForced)
            #expect(cache.hasResponse(for: forbidden))
            let standard = try await get(forbidden, policy: .readCache)
            #expect(!standard.isFromCache)
            let forced = try await get(forbidden, policy: .readCacheForced)
            #expect(forced.isFromCache && forced.statusCode == 200)
            #expect(try await count(key + "-ns").requests == 3)
        }

        @Test func onlyLoadIfNotCachedServesStaleAndLoadsTheRest() async throws {
            let target = url("cc=max-age=0")
            _ = try await get(target)
            let stale = try await get(target, policy: .onlyLoadIfNotCached)
            #expect(stale.isFromCache && stale.statusCode == 200)
            #expect(try await count().requests == 1)
            let other = url("cc=max-age=0", key: key + "-new")
            let loaded = try await get(other, policy: .onlyLoadIfNotCached)
            #expect(!loaded.isFromCache && loaded.statusCode == 200)
            #expect(try await count(key + "-new").requests == 1)
        }

        @Test func sessionOnlyEntriesGoAwayWithTheirCache() async throws {
            let folder = temporaryPath("cache-session")
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let target = url("cc=max-age=60")
            let byDefault = url("cc=max-age=60", key: key + "-default")
            nonisolated(unsafe) weak var released: HTTPCache?
            do {
                let session = try HTTPCache(folder: folder)
                released = session
                session.defaultStoragePolicy = .sessionOnly
                let request = Request(url: target)
                request.cache = session
                request.cacheStoragePolicy = .sessionOnly
                _ = try await request.response()
                let other = Request(url: byDefault)
                other.cache = session
                _ = try await other.response()
                #expect(session.hasResponse(for: target) && session.hasResponse(for: byDefault))
                let hit = Request(url: target)
                hit.cache = session
                #expect(try await hit.response().isFromCache)
                #expect(!((try? FileManager.default.contentsOfDirectory(atPath: folder + "/sessions")) ?? []).isEmpty)
            }
            // Once the instance is gone (the finished requests let go of it a moment after
            // their answers), so are its entries: its folder is removed in deinit.
            // (A weak reference is cleared as deinit starts: its removal may still be going on.)
            #expect(eventually { released == nil }, "the HTTPCache instance stayed alive")
            #expect(eventually { (FileManager.default.subpaths(atPath: folder + "/sessions") ?? []).isEmpty },
                "\(FileManager.default.subpaths(atPath: folder + "/sessions") ?? [])")
            let reopened = try HTTPCache(folder: folder)
            #expect(!reopened.hasResponse(for: target) && !reopened.hasResponse(for: byDefault))
            let request = Request(url: target)
            request.cache = reopened
            #expect(try await !request.response().isFromCache)
            #expect(try await count().requests == 2)
        }

        @Test func secondsToCacheMakesAResponseFreshForThatLong() async throws {
            // max-age=0 would be stale at once: the request's, then the cache's secondsToCache win.
            let target = url("cc=max-age=0")
            let request = Request(url: target)
            request.cache = cache
            request.secondsToCache = 60
            _ = try await request.response()
            #expect(try await get(target).isFromCache)
            let other = url("cc=max-age=0", key: key + "-cache")
            cache.secondsToCache = 60
            _ = try await get(other)
            #expect(try await get(other).isFromCache)
            cache.secondsToCache = nil
            let unset = url("cc=max-age=0", key: key + "-unset")
            _ = try await get(unset)
            #expect(try await !get(unset).isFromCache)
            #expect(try await count().requests == 1)
            #expect(try await count(key + "-cache").requests == 1)
            #expect(try await count(key + "-unset").requests == 2)
        }

        @Test func ignoringCacheControlStoresAndServesEverything() async throws {
            let folder = temporaryPath("cache-ignore")
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let ignoring = try HTTPCache(folder: folder)
            ignoring.shouldRespectCacheControlHeaders = false
            let target = url("cc=no-store,no-cache,max-age=0")
            for round in 0..<3 {
                let request = Request(url: target)
                request.cache = ignoring
                let response = try await request.response()
                #expect(response.isFromCache == (round > 0))
            }
            #expect(try await count().requests == 1)
            // The same response through a cache that respects the headers: never stored.
            _ = try await get(target)
            #expect(!cache.hasResponse(for: target))
        }

        @Test func theCachesDefaultPolicyAppliesToRequestsWithoutOne() async throws {
            let target = url("cc=max-age=60")
            _ = try await get(target)
            cache.defaultPolicy = .doNotReadFromCache
            let bypass = try await get(target)
            #expect(!bypass.isFromCache)
            let own = try await get(target, policy: .askServerIfModifiedWhenStale)
            #expect(own.isFromCache, "a request's own policy wins over the default")
            cache.defaultPolicy = .dontLoad
            let nothing = try await get(url("cc=max-age=60", key: key + "-none"))
            #expect(nothing.statusCode == 504)
            #expect(try await count().requests == 2)
            #expect(try await count(key + "-none").requests == 0)
        }

        @Test func fallbackToCacheAfterAConnectionFailure() async throws {
            // A stale response stored for a port nothing listens on (connections are refused).
            let target = URL(string: "http://127.0.0.1:9/down-\(key)")!
            let writer = try #require(
                cache.writer(
                    method: .get, url: target, request: [:], status: 200, reason: "OK",
                    response: [.cacheControl: "max-age=0", .contentType: "text/plain"],
                    requestTime: Date(), responseTime: Date()))
            writer.append(Data("stored body".utf8))
            try writer.commit()
            let plain = Request(url: target)
            plain.cache = cache
            await #expect(throws: TernError.self) { _ = try await plain.response() }
            let fallback = Request(url: target)
            fallback.cache = cache
            fallback.cachePolicy = .fallbackToCacheIfLoadFails
            let response = try await fallback.response()
            #expect(response.statusCode == 200 && response.isFromCache)
            #expect(response.data == Data("stored body".utf8))
            // The same through a data handler, and through the cache's default policy.
            cache.defaultPolicy = .fallbackToCacheIfLoadFails
            let body = Locked(Data())
            let streamed = Request(url: target)
            streamed.cache = cache
            streamed.dataHandler = { data in
                body.withLock { $0.append(data) }
                return true
            }
            #expect(try await streamed.response().isFromCache)
            #expect(body.withLock { $0 } == Data("stored body".utf8))
        }

        @Test func staleWhileRevalidateAnswersAndRevalidatesInTheBackground() async throws {
            let target = url("cc=max-age=0,stale-while-revalidate=60&etag=auto")
            let first = try await get(target)
            let second = try await get(target)
            #expect(second.isFromCache && second.data == first.data)
            #expect(try await eventuallyAsync { try await count().requests == 2 }, "the background request never came")
            let counts = try await count()
            #expect(counts.not_modified == 1 && counts.full == 1, "\(counts)")
        }

        @Test func theProgressHandlerSeesACachedAnswer() async throws {
            let target = url("cc=max-age=60&size=50000")
            _ = try await get(target)
            let seen = Recorder<UInt64>()
            let request = Request(url: target)
            request.cache = cache
            request.progressHandler = { _, progress in seen.append(progress.bytesReceived) }
            let response = try await request.response()
            #expect(response.isFromCache)
            #expect(eventually { seen.all.last == 50002 }, "\(seen.all)")
        }

        @Test func aHEADResponseRefreshesTheStoredGET() async throws {
            // Stored stale without validators; the HEAD's 200 (RFC 9111 4.3.5) brings a new
            // lifetime and a new X-Request-Number into the stored GET's header.
            let target = url("cc=max-age=0&then_cc=max-age=600")
            let first = try await get(target)
            #expect(first.result.flatMap { try? $0.get().headerFields[HTTPField.Name("X-Request-Number")!] } == "1")
            let head = Request(url: target, method: .head)
            head.cache = cache
            let headResponse = try await head.response()
            #expect(headResponse.statusCode == 200)
            #expect(headResponse.headerFields[.cacheControl] == "max-age=600")
            let after = try await get(target)
            #expect(after.isFromCache, "the HEAD did not refresh the stored GET")
            #expect(after.data == first.data)
            let fields = try #require(after.result.flatMap { try? $0.get().headerFields })
            #expect(fields[HTTPField.Name("X-Request-Number")!] == "2" && fields[.cacheControl] == "max-age=600")
            #expect(try await count().requests == 2)
        }

        @Test func aHEADWithAnotherLengthLeavesTheStoredGETAlone() async throws {
            let target = url("cc=max-age=0&then_cc=max-age=600&size=10")
            _ = try await get(target)
            // Stored for the HEAD: a GET whose Content-Length (5) disagrees with the HEAD's (12).
            let writer = try #require(
                cache.writer(
                    method: .get, url: target, request: [:], status: 200, reason: "OK",
                    response: [.cacheControl: "max-age=0", .contentLength: "5"], requestTime: Date(),
                    responseTime: Date()))
            writer.append(Data("short".utf8))
            try writer.commit()
            let head = Request(url: target, method: .head)
            head.cache = cache
            _ = try await head.response()
            let after = try await get(target)
            #expect(!after.isFromCache, "a HEAD that describes another body refreshed the stored GET")
            #expect(after.data?.count == 12)
        }

        // MARK: Two processes

        @Test func twoCLIProcessesShareOneFolder() async throws {
            let folder = temporaryPath("cli-cache-two")
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let targets = (0..<40).map { i in
                url("cc=max-age=600&size=\(1000 + i * 7919)", key: "\(key)-\(i)").absoluteString
            }
            async let a = Task.detached { try tern(["-s", "--cache", folder] + targets) }.value
            async let b = Task.detached { try tern(["-s", "--cache", folder] + targets.reversed()) }.value
            let (runA, runB) = try await (a, b)
            #expect(runA.status == 0 && runB.status == 0)
            let expected = (0..<40).map { i in 1000 + i * 7919 + 2 }
            #expect(runA.stdout.count == expected.reduce(0, +) && runB.stdout.count == runA.stdout.count)
            // Every entry read back whole, equal to what each process printed for it.
            let reader = try HTTPCache(folder: folder, sizeLimit: 1 << 30)
            var offset = 0
            for (i, target) in targets.enumerated() {
                let entry = try #require(reader.lookup(url: URL(string: target)!, request: [:]), "entry \(i) missing")
                let body = try entry.readBody()
                #expect(body.count == expected[i])
                #expect(body == runA.stdout.subdata(in: offset..<offset + expected[i]), "entry \(i)")
                offset += expected[i]
                #expect(try await count("\(key)-\(i)").requests <= 2)
            }
        }
}
}
