// The cache's disk store and HTTPCache: put/get, streaming writers, Vary variants, LRU
// eviction under the size limit, damaged files, session storage, 304 refreshes and
// invalidation; then the crash test (tern-cache-torture killed with SIGKILL at random points,
// every entry read back whole or missing) and two processes sharing one folder.

import Foundation
import HTTPTypes
import Testing
@testable import Tern

/// The built `tern-cache-torture` binary, next to the test bundle in the build products.
enum TortureBinary {
    static let path: String = {
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("tern-cache-torture").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return Servers.root.appendingPathComponent(".build/debug/tern-cache-torture").path
    }()
}

private func headers(_ pairs: [(String, String)]) -> HTTPFields {
    var result = HTTPFields()
    for (name, value) in pairs { result.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
    return result
}

private func head(
    _ key: String, _ pairs: [(String, String)] = [("Cache-Control", "max-age=600")], vary: [String: String] = [:]
) -> CachedHead {
    CachedHead(key: key, status: 200, reason: "OK", headers: headers(pairs), varyValues: vary,
               requestTime: Date(), responseTime: Date())
}

private func bytes(_ count: Int, seed: Int = 0) -> Data {
    Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ seed) })
}

private func makeStore(limit: Int64 = 1 << 20) throws -> CacheStore {
    try CacheStore(folder: temporaryPath("cache"), sizeLimit: limit, syncsToDisk: false)
}

/// Runs the torture binary to completion: exit status and stdout.
private func torture(_ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: TortureBinary.path)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: output, as: UTF8.self))
}

extension TernTests {
    @Suite struct CacheStoreTests {
        @Test func putAndGet() throws {
            let store = try makeStore()
            defer { removeTree(store.folder) }
            let body = bytes(100_000)
            let written = try store.store(head: head("http://a.test/x"), body: body)
            let entry = try #require(store.lookup(key: "http://a.test/x", request: [:]))
            #expect(entry.head == written.head)
            #expect(entry.head.headers[.cacheControl] == "max-age=600")
            #expect(try entry.readBody() == body)
            #expect(store.lookup(key: "http://a.test/y", request: [:]) == nil)

            // Served as a file: copied in the kernel.
            let path = temporaryPath("copy")
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            try entry.copyBody(to: fd, verify: true)
            close(fd)
            defer { unlink(path) }
            #expect(FileManager.default.contents(atPath: path) == body)

            // Replacing keeps one entry; the old one stays readable through its open descriptor.
            try store.store(head: head("http://a.test/x"), body: bytes(10, seed: 1))
            #expect(try store.lookup(key: "http://a.test/x", request: [:])?.readBody() == bytes(10, seed: 1))
            #expect(try entry.readBody() == body)
            #expect(store.entries(key: "http://a.test/x").count == 1)
            store.remove(key: "http://a.test/x")
            #expect(store.entries(key: "http://a.test/x").isEmpty)
        }

        @Test func streamingWriterCommitsOrDiscards() throws {
            let store = try makeStore()
            defer { removeTree(store.folder) }
            let body = bytes(300_000)
            let writer = try store.makeWriter(head: head("http://a.test/big"), expectedLength: Int64(body.count))
            for start in stride(from: 0, to: body.count, by: 7_777) {
                writer.append(body[start..<min(body.count, start + 7_777)])
            }
            #expect(store.entries(key: "http://a.test/big").isEmpty, "nothing visible before commit")
            let entry = try writer.commit()
            #expect(entry.bodyOffset % 4096 == 0, "large bodies are block-aligned")
            #expect(try store.lookup(key: "http://a.test/big", request: [:])?.readBody() == body)

            let dropped = try store.makeWriter(head: head("http://a.test/dropped"))
            dropped.append(bytes(1000))
            dropped.discard()
            do {
                let abandoned = try store.makeWriter(head: head("http://a.test/abandoned"))
                abandoned.append(bytes(1000))
            }
            #expect(store.entries(key: "http://a.test/dropped").isEmpty)
            #expect(store.entries(key: "http://a.test/abandoned").isEmpty)
            #expect(listDirectory(store.folder + "/tmp").isEmpty, "no temporary file left behind")
        }

        @Test func varyVariants() throws {
            let store = try makeStore()
            defer { removeTree(store.folder) }
            let key = "http://a.test/v"
            let vary = [("Cache-Control", "max-age=600"), ("Vary", "Accept-Language")]
            try store.store(head: head(key, vary, vary: ["accept-language": "en"]), body: Data("english".utf8))
            try store.store(head: head(key, vary, vary: ["accept-language": "fr"]), body: Data("french".utf8))
            #expect(store.entries(key: key).count == 2)
            #expect(try store.lookup(key: key, request: headers([("Accept-Language", "fr")]))?.readBody() == Data("french".utf8))
            #expect(try store.lookup(key: key, request: headers([("Accept-Language", "en")]))?.readBody() == Data("english".utf8))
            #expect(store.lookup(key: key, request: headers([("Accept-Language", "de")])) == nil)
            // A response without Vary replaces every variant.
            try store.store(head: head(key), body: Data("any".utf8))
            #expect(store.entries(key: key).count == 1)
            #expect(try store.lookup(key: key, request: headers([("Accept-Language", "de")]))?.readBody() == Data("any".utf8))
        }

        @Test func leastRecentlyUsedEviction() throws {
            // Five entries of about 10 KB under a 45 KB limit: the fifth store evicts.
            let store = try makeStore(limit: 45_000)
            defer { removeTree(store.folder) }
            for name in ["a", "b", "c", "d"] { try store.store(head: head("http://lru.test/" + name), body: bytes(10_000)) }
            #expect(store.size <= 45_000)
            _ = store.lookup(key: "http://lru.test/a", request: [:])  // a is now the most recent
            try store.store(head: head("http://lru.test/e"), body: bytes(10_000))
            #expect(store.size <= 45_000 - 4_500, "evicted to 90% of the limit")
            #expect(!store.entries(key: "http://lru.test/a").isEmpty, "recently read: kept")
            #expect(!store.entries(key: "http://lru.test/e").isEmpty, "just written: kept")
            #expect(store.entries(key: "http://lru.test/b").isEmpty, "least recently used: evicted first")
            #expect(store.entries(key: "http://lru.test/c").isEmpty)
            #expect(!store.entries(key: "http://lru.test/d").isEmpty)

            // A new store on the same folder sees the same entries and the limit.
            let reopened = try CacheStore(folder: store.folder, sizeLimit: 15_000, syncsToDisk: false)
            #expect(reopened.size <= 15_000)
            #expect(!reopened.entries(key: "http://lru.test/e").isEmpty, "the most recent survives a smaller limit")
        }

        @Test func memoryLayer() throws {
            let store = try CacheStore(folder: temporaryPath("cache"), sizeLimit: 1 << 20, memoryLimit: 64_000, syncsToDisk: false)
            defer { removeTree(store.folder) }
            try store.store(head: head("http://m.test/a"), body: bytes(1000))
            let first = try #require(store.lookup(key: "http://m.test/a", request: [:]))
            #expect(try first.readBody() == bytes(1000))
            let second = try #require(store.lookup(key: "http://m.test/a", request: [:]))
            #expect(first === second, "the held entry is reused while the file is the same")
            // Replaced by another writer (another process, say): the new file wins.
            try store.store(head: head("http://m.test/a"), body: bytes(500, seed: 3))
            #expect(try store.lookup(key: "http://m.test/a", request: [:])?.readBody() == bytes(500, seed: 3))
            store.remove(key: "http://m.test/a")
            #expect(store.lookup(key: "http://m.test/a", request: [:]) == nil, "removed files are not served from memory")
            // Bodies over a quarter of the limit are not held.
            try store.store(head: head("http://m.test/big"), body: bytes(20_000))
            #expect(store.lookup(key: "http://m.test/big", request: [:])?.keepsBody == false)
        }

        @Test func entriesAreHeldWithoutAMemoryLayer() throws {
            // No memory limit: recently used entries are still held open with their parsed head
            // (not their body), reused while the path names the same file.
            let store = try makeStore(limit: 8 << 20)
            defer { removeTree(store.folder) }
            try store.store(head: head("http://h.test/a"), body: bytes(1000))
            let first = try #require(store.lookup(key: "http://h.test/a", request: [:]))
            #expect(!first.keepsBody)
            let second = try #require(store.lookup(key: "http://h.test/a", request: [:]))
            #expect(first === second, "the held entry is reused while the file is the same")
            #expect(try second.readBody() == bytes(1000), "the body is read from the file each time")

            // Replaced behind the store's back (another process renames a new file into place):
            // the new file wins.
            let other = try makeStore()
            defer { removeTree(other.folder) }
            let replacement = try other.store(head: head("http://h.test/a"), body: bytes(700, seed: 5))
            #expect(rename(replacement.path, first.path) == 0)
            let third = try #require(store.lookup(key: "http://h.test/a", request: [:]))
            #expect(third !== first)
            #expect(try third.readBody() == bytes(700, seed: 5))
            // Removed behind its back: not served from the held entry.
            #expect(unlink(third.path) == 0)
            #expect(store.lookup(key: "http://h.test/a", request: [:]) == nil)

            // The store's own writes and removals drop what they replace at once.
            try store.store(head: head("http://h.test/b"), body: bytes(100))
            let b = try #require(store.lookup(key: "http://h.test/b", request: [:]))
            try store.store(head: head("http://h.test/b"), body: bytes(200, seed: 1))
            let b2 = try #require(store.lookup(key: "http://h.test/b", request: [:]))
            #expect(b2 !== b)
            #expect(try b2.readBody() == bytes(200, seed: 1))
            store.remove(key: "http://h.test/b")
            #expect(store.lookup(key: "http://h.test/b", request: [:]) == nil)

            // Large bodies are not held without a memory layer (a held descriptor would keep an
            // evicted file on disk).
            try store.store(head: head("http://h.test/big"), body: bytes(Int(CacheStore.heldBodyLimit) + 1))
            let big = try #require(store.lookup(key: "http://h.test/big", request: [:]))
            #expect(store.lookup(key: "http://h.test/big", request: [:]) !== big)
        }

        @Test func repeatedHitsKeepTheLeastRecentlyUsedOrder() throws {
            // Hits of the entry that already has the process's latest stamp do not write its
            // inode again; a use of another entry in between does re-stamp it.
            let store = try makeStore()
            defer { removeTree(store.folder) }
            try store.store(head: head("http://s.test/a"), body: bytes(10))
            try store.store(head: head("http://s.test/b"), body: bytes(10))
            func mtime(_ entry: CacheEntry) -> Int64 {
                var info = stat()
                _ = stat(entry.path, &info)
                return Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
            }
            let a = try #require(store.lookup(key: "http://s.test/a", request: [:]))
            let stamped = mtime(a)
            _ = store.lookup(key: "http://s.test/a", request: [:])
            #expect(mtime(a) == stamped, "still the most recent use: no new stamp")
            let b = try #require(store.lookup(key: "http://s.test/b", request: [:]))
            #expect(mtime(b) > stamped)
            _ = store.lookup(key: "http://s.test/a", request: [:])
            #expect(mtime(a) > mtime(b), "used after b: stamped after it")
        }

        @Test func damagedFilesAreNeverServed() throws {
            let store = try makeStore()
            defer { removeTree(store.folder) }
            let entry = try store.store(head: head("http://d.test/head"), body: bytes(5000))
            // Flip a byte in the head: the entry is gone (and its file removed).
            var data = try #require(FileManager.default.contents(atPath: entry.path))
            data[60] ^= 0xFF
            try data.write(to: URL(fileURLWithPath: entry.path))
            #expect(store.lookup(key: "http://d.test/head", request: [:]) == nil)
            #expect(!FileManager.default.fileExists(atPath: entry.path))

            // Truncated: the size no longer matches.
            let truncated = try store.store(head: head("http://d.test/short"), body: bytes(5000))
            #expect(truncate(truncated.path, off_t(truncated.bodyOffset + 100)) == 0)
            #expect(store.lookup(key: "http://d.test/short", request: [:]) == nil)

            // A body byte changed (same size): the body check refuses it.
            let body = try store.store(head: head("http://d.test/body"), body: bytes(5000))
            var whole = try #require(FileManager.default.contents(atPath: body.path))
            whole[whole.count - 1] ^= 0x01
            try whole.write(to: URL(fileURLWithPath: body.path))
            let reread = try #require(store.lookup(key: "http://d.test/body", request: [:]))
            #expect(throws: TernError.self) { try reread.readBody() }
            #expect(try !reread.bodyIsIntact())
        }

        @Test func abandonedTemporaryFilesAreRemoved() throws {
            let store = try makeStore()
            defer { removeTree(store.folder) }
            let old = store.folder + "/tmp/12345-dead"
            _ = FileManager.default.createFile(atPath: old, contents: bytes(100))
            var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, old, &times, 0) == 0)
            let live = try store.makeWriter(head: head("http://t.test/live"))  // flock'ed by this process
            _ = try CacheStore(folder: store.folder, sizeLimit: store.sizeLimit, syncsToDisk: false)
            #expect(!FileManager.default.fileExists(atPath: old), "an old, unlocked temporary file is removed")
            #expect(listDirectory(store.folder + "/tmp").count == 1, "a live writer's file stays")
            try live.commit()
        }

        @Test func httpCacheWritesReadsAndClears() throws {
            let folder = temporaryPath("httpcache")
            defer { removeTree(folder) }
            let url = try #require(URL(string: "http://h.test/page"))
            let cache = try HTTPCache(folder: folder, sizeLimit: 1 << 20, syncsToDisk: false)
            let response = headers([("Cache-Control", "max-age=60"), ("ETag", "\"1\""), ("Connection", "close")])
            let now = Date()

            #expect(cache.writer(method: .get, url: url, request: [:], status: 200, response: headers([("Cache-Control", "no-store")]),
                                 requestTime: now, responseTime: now) == nil, "no-store is not written")
            #expect(cache.writer(method: .get, url: url, request: [:], status: 200, response: response, requestTime: now,
                                 responseTime: now, policy: .doNotWriteToCache) == nil)
            let writer = try #require(cache.writer(method: .get, url: url, request: [:], status: 200, response: response,
                                                   requestTime: now, responseTime: now))
            writer.append(Data("hello".utf8))
            try writer.commit()

            let (entry, decision) = cache.plan(method: .get, url: url, request: [:])
            #expect(decision == .useStored(stale: false))
            #expect(try entry?.readBody() == Data("hello".utf8))
            #expect(entry?.head.headers[.connection] == nil, "hop-by-hop fields are not stored")
            #expect(cache.plan(method: .head, url: url, request: [:]).decision == .useStored(stale: false))
            #expect(cache.plan(method: .get, url: url, request: [:], policy: .askServerIfModified).decision
                    == .validate(conditions: headers([("If-None-Match", "\"1\"")])))

            // A 304 refreshes the stored head and keeps the body.
            let later = now.addingTimeInterval(120)
            #expect(cache.plan(method: .get, url: url, request: [:], now: later).decision
                    == .validate(conditions: headers([("If-None-Match", "\"1\"")])))
            let stored = try #require(entry)
            let refreshed = try #require(cache.refresh(
                stored, with: headers([("ETag", "\"1\""), ("X-New", "yes")]), requestTime: later, responseTime: later))
            #expect(refreshed.head.headers[HTTPField.Name("X-New")!] == "yes")
            #expect(try refreshed.readBody() == Data("hello".utf8))
            #expect(cache.plan(method: .get, url: url, request: [:], now: later.addingTimeInterval(30)).decision == .useStored(stale: false))
            #expect(cache.refresh(refreshed, with: headers([("ETag", "\"2\"")]), requestTime: later, responseTime: later) == nil,
                    "a 304 for another representation does not refresh")

            // A POST to the URL invalidates it.
            cache.invalidate(method: .post, url: url, status: 200, response: [:])
            #expect(!cache.hasResponse(for: url))
            #expect(cache.plan(method: .get, url: url, request: [:], policy: .dontLoad).decision == .unavailable)
        }

        @Test func httpCachePoliciesAndStorage() throws {
            let folder = temporaryPath("httpcache")
            defer { removeTree(folder) }
            let url = try #require(URL(string: "http://h.test/session"))
            let other = try #require(URL(string: "http://h.test/permanent"))
            var cache: HTTPCache? = try HTTPCache(folder: folder, sizeLimit: 1 << 20, syncsToDisk: false)
            let now = Date()
            let uncacheable = headers([("Cache-Control", "no-store")])

            // updateCacheForced writes what the headers forbid; readCacheForced reads it.
            let forced = try #require(cache?.writer(method: .get, url: url, request: [:], status: 200, response: uncacheable,
                                                    requestTime: now, responseTime: now, policy: .updateCacheForced,
                                                    storagePolicy: .sessionOnly))
            forced.append(Data("s".utf8))
            try forced.commit()
            #expect(cache?.plan(method: .get, url: url, request: [:], policy: .readCacheForced).decision == .useStored(stale: true))
            #expect(cache?.plan(method: .get, url: url, request: [:], policy: .readCache).decision == .fetch)

            // secondsToCache overrides the headers' lifetime.
            cache?.secondsToCache = 300
            let timed = try #require(cache?.writer(method: .get, url: other, request: [:], status: 200,
                                                   response: headers([("Cache-Control", "max-age=0")]), requestTime: now, responseTime: now))
            timed.append(Data("p".utf8))
            try timed.commit()
            #expect(cache?.plan(method: .get, url: other, request: [:], now: now.addingTimeInterval(200)).decision == .useStored(stale: false))

            // Clearing by storage policy.
            cache?.removeAll(storagePolicy: .permanent)
            #expect(cache?.hasResponse(for: other) == false)
            #expect(cache?.hasResponse(for: url) == true)

            // Session entries go away with the instance; permanent ones stay for the next.
            cache?.defaultStoragePolicy = .permanent
            let kept = try #require(cache?.writer(method: .get, url: other, request: [:], status: 200,
                                                  response: headers([("Cache-Control", "max-age=60")]), requestTime: now, responseTime: now))
            try kept.commit()
            cache = nil
            let next = try HTTPCache(folder: folder, sizeLimit: 1 << 20, syncsToDisk: false)
            #expect(!next.hasResponse(for: url), "session-only entries are gone")
            #expect(next.hasResponse(for: other))
            #expect(listDirectory(folder + "/sessions").isEmpty)
            next.removeAll()
            #expect(next.size == 0)
        }

        /// SIGKILL at random points while storing, many times; after each kill every key
        /// reads back whole or is missing, and the store keeps working.
        @Test(.timeLimit(.minutes(3))) func survivesSIGKILLWhileStoring() throws {
            #expect(FileManager.default.isExecutableFile(atPath: TortureBinary.path), "build with swift build --build-tests")
            let folder = temporaryPath("kill")
            defer { removeTree(folder) }
            let kills = 40
            var checked = 0, whole = 0
            for round in 0..<kills {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: TortureBinary.path)
                process.arguments = ["store", folder, String(round + 1)]
                try process.run()
                usleep(UInt32.random(in: 30_000...250_000))
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                #expect(process.terminationReason == .uncaughtSignal, "killed, not finished (round \(round))")

                let verify = try torture(["verify", folder])
                #expect(verify.status == 0, "round \(round): \(verify.output)")
                let numbers = verify.output.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
                if numbers.count == 3 {
                    checked += numbers[0] + numbers[1]
                    whole += numbers[0]
                    #expect(numbers[2] == 0)
                }
            }
            // Every temporary file left is one a killed writer abandoned (at most one per kill).
            #expect(listDirectory(folder + "/tmp").count <= kills)
            #expect(whole > 0, "the writer got entries stored between kills")
            print("cache kill test: \(kills) kills, \(checked) keys checked, \(whole) whole, \(checked - whole) missing, 0 damaged")
        }

        /// Two processes storing and reading one folder at once: no read ever sees a damaged
        /// entry, and the folder is sound afterwards.
        @Test(.timeLimit(.minutes(3))) func twoProcessesShareAFolder() throws {
            let folder = temporaryPath("shared")
            defer { removeTree(folder) }
            let results = Locked<[(Int32, String)]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { i in
                let result = (try? torture(["mixed", folder, String(i + 1), "250"])) ?? (-1, "did not run")
                results.withLock { $0.append(result) }
            }
            for (status, output) in results.withLock({ $0 }) {
                #expect(status == 0, "\(output)")
            }
            let verify = try torture(["verify", folder])
            #expect(verify.status == 0, "\(verify.output)")
            #expect(verify.output.hasPrefix("whole "))
        }
    }
}
