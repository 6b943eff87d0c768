// The disk store: one immutable file per stored response, written to a temporary file and
// renamed into place, found by a hash of its key, evicted least-recently-used under an flock
// shared by every process that opens the folder. docs/cache.md explains the choice.
//
//   <folder>/lock                    flock'ed (exclusive) while evicting or clearing
//   <folder>/entries/<xx>/<K>.<V>    one entry: K = hash of the key (xx its first two digits),
//                                    V = hash of the Vary-selected request values, "0" if none
//   <folder>/tmp/<pid>-<random>      entries being written, flock'ed by their writer

#if canImport(FoundationEssentials)
package import FoundationEssentials
#else
package import Foundation
#endif
package import HTTPTypes

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One stored response, opened: the head and an open descriptor on the entry's file, so the
/// body stays readable even if the entry is replaced or evicted meanwhile (files are never
/// modified in place, only replaced or unlinked).
package final class CacheEntry: Sendable {
    /// The stored head (after any 304 refreshes).
    package let head: CachedHead
    /// What the freshness rules need of the head, worked out once (``StoredFacts``).
    package let facts: StoredFacts
    /// The entry file's path (it may be gone by the time it is read; use the methods).
    package let path: String
    /// Where the body starts in the file, and its length.
    package let bodyOffset: Int64
    package let bodyLength: Int64
    let bodyChecksum: UInt64
    let inode: UInt64
    /// Open for the entry's lifetime: reads and the LRU stamp go through it.
    let fd: Int32
    /// Set for entries held by the store's memory layer: the body, once read, stays here.
    let keepsBody: Bool
    private let memoryBody = Locked<Data?>(nil)
    /// The fields last served (``servedFields(now:)``), by their Age.
    private let served = Locked<(age: Int, fields: HTTPFields, contentLength: Int64?)?>(nil)
    /// The last-use stamp this process last gave the file through this entry (0: none yet), in
    /// nanoseconds; guarded by the store's state lock (see ``CacheStore/touch(_:)``).
    nonisolated(unsafe) var lastStamp: Int64 = 0

    init(head: CachedHead, path: String, prefix: CacheFile.Prefix, inode: UInt64, fd: Int32, keepsBody: Bool = false) {
        self.keepsBody = keepsBody
        self.head = head
        self.facts = StoredFacts(head)
        self.path = path
        self.bodyOffset = prefix.bodyOffset
        self.bodyLength = prefix.bodyLength
        self.bodyChecksum = prefix.bodyChecksum
        self.inode = inode
        self.fd = fd
    }

    deinit { close(fd) }

    /// The stored fields as a hit serves them at `now`, with an `Age` field (RFC 9111 5.1),
    /// and the `Content-Length` they give. Made once per Age value: an entry held by the store
    /// answers the hits of one second with the same fields, not a copy each.
    package func servedFields(now: Date) -> (fields: HTTPFields, contentLength: Int64?) {
        let age = CacheRules.ageSeconds(head, facts: facts, now: now)
        if let memo = served.withLock({ $0 }), memo.age == age { return (memo.fields, memo.contentLength) }
        var fields = head.headers
        fields[.age] = String(age)
        let length = fields[.contentLength].flatMap { Int64($0) }
        served.withLock { $0 = (age, fields, length) }
        return (fields, length)
    }

    /// The whole body in memory, its checksum verified.
    ///
    /// - Throws: ``TernError/Code/fileReadFailed`` if the file cannot be read or the body does
    ///   not match its checksum (the entry is then not to be used).
    package func readBody() throws(TernError) -> Data {
        if let kept = memoryBody.withLock({ $0 }) { return kept }
        var data = Data(count: Int(bodyLength))
        var sum = CacheChecksum()
        let ok = data.withUnsafeMutableBytes { buffer -> Bool in
            var done = 0
            while done < buffer.count {
                let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(bodyOffset) + off_t(done))
                if n < 0, errno == EINTR { continue }
                if n <= 0 { return false }
                done += n
            }
            sum.update(UnsafeRawBufferPointer(buffer))
            return true
        }
        guard ok, sum.value == bodyChecksum else {
            throw TernError(code: .fileReadFailed, message: "cache entry \(path): body is damaged")
        }
        if keepsBody { memoryBody.withLock { $0 = data } }
        return data
    }

    /// Copies the body to `destination` (a descriptor open for writing, at its current
    /// position) by `sendfile`, in the kernel: no user-space buffer, no memory growth.
    /// With `verify` the body's checksum is checked too (one more read of the body).
    package func copyBody(to destination: Int32, verify: Bool = false) throws(TernError) {
        var offset = off_t(bodyOffset)
        var left = Int(bodyLength)
        while left > 0 {
            let n = sendfile(destination, fd, &offset, min(left, 1 << 30))
            if n < 0, errno == EINTR { continue }
            if n <= 0 {
                let reason = n < 0 ? String(cString: strerror(errno)) : "file ended early"
                throw TernError(code: .fileWriteFailed, message: "copy cached body of \(path): \(reason)")
            }
            left -= n
        }
        if verify, try !bodyIsIntact() {
            throw TernError(code: .fileReadFailed, message: "cache entry \(path): body is damaged")
        }
    }

    /// Reads the body through a fixed buffer and compares its checksum.
    package func bodyIsIntact() throws(TernError) -> Bool {
        var sum = CacheChecksum()
        guard forEachBodyChunk({ sum.update($0) }) else { return false }
        return sum.value == bodyChecksum
    }

    /// Hands the body to `body` in pieces of at most 64 KiB, read through one buffer;
    /// false if the file ended early.
    func forEachBodyChunk(_ body: (UnsafeRawBufferPointer) -> Void) -> Bool {
        forEachBodyChunk(while: { body($0); return true }) != .endedEarly
    }

    /// How a piecewise read of the body ended.
    package enum ChunkedRead: Equatable {
        case complete, stopped, endedEarly
    }

    /// Hands the body to `body` in pieces of at most 64 KiB, read through one buffer, until
    /// `body` returns false (``ChunkedRead/stopped``) or the file ends early.
    package func forEachBodyChunk(while body: (UnsafeRawBufferPointer) -> Bool) -> ChunkedRead {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var offset = Int64(0)
        while offset < bodyLength {
            let want = Int(min(Int64(buffer.count), bodyLength - offset))
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, want, off_t(bodyOffset + offset)) }
            if n < 0, errno == EINTR { continue }
            if n <= 0 { return .endedEarly }
            let goOn = buffer.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += Int64(n)
            if !goOn { return .stopped }
        }
        return .complete
    }
}

/// Streams one response body into a temporary file; ``commit()`` makes it an entry, ``discard()``
/// (or dropping the writer) removes it. Use from one thread at a time.
package final class CacheWriter: @unchecked Sendable {
    private let store: CacheStore
    private var head: CachedHead
    private let temporary: String
    private let destination: String
    private var fd: Int32
    private let headBytes: [UInt8]
    private let bodyOffset: Int64
    private var length: Int64 = 0
    private var sum = CacheChecksum()
    private var failure: TernError?

    init(store: CacheStore, head: CachedHead, temporary: String, destination: String, fd: Int32, expectedLength: Int64?) {
        self.store = store
        self.head = head
        self.temporary = temporary
        self.destination = destination
        self.fd = fd
        self.headBytes = CacheFile.encode(head)
        let packed = Int64(CacheFile.prefixSize + headBytes.count)
        if let expected = expectedLength, expected >= CacheFile.alignedBodyThreshold {
            bodyOffset = (packed + 4095) / 4096 * 4096
        } else {
            bodyOffset = packed
        }
        // The prefix is written with a zero checksum now and completed at commit: a file
        // is never visible under its final name before that.
        let prefix = CacheFile.prefix(
            .init(headLength: headBytes.count, bodyOffset: bodyOffset, bodyLength: 0, bodyChecksum: 0), head: headBytes)
        if !writeAll(prefix + headBytes, at: 0) { fail("write") }
    }

    deinit { discard() }

    /// The bytes appended so far.
    package var bytesWritten: Int64 { length }

    /// Appends a piece of the body.
    package func append(_ bytes: UnsafeRawBufferPointer) {
        guard fd >= 0, failure == nil else { return }
        sum.update(bytes)
        if !writeAll(bytes, at: bodyOffset + length) { fail("write") }
        length += Int64(bytes.count)
    }

    /// Appends a piece of the body.
    package func append(_ data: some ContiguousBytes) {
        data.withUnsafeBytes { append($0) }
    }

    /// Makes the written response an entry (replacing any entry of the same key and variant)
    /// and returns it opened.
    ///
    /// - Throws: ``TernError/Code/fileWriteFailed`` when a write failed; nothing is stored.
    @discardableResult
    package func commit() throws(TernError) -> CacheEntry {
        guard fd >= 0 else { throw TernError(code: .fileWriteFailed, message: "cache writer already finished") }
        if let failure {
            discard()
            throw failure
        }
        let prefix = CacheFile.prefix(
            .init(headLength: headBytes.count, bodyOffset: bodyOffset, bodyLength: length, bodyChecksum: sum.value),
            head: headBytes)
        if !writeAll(prefix, at: 0) { fail("write") }
        if failure == nil, store.syncsToDisk, fsync(fd) != 0 { fail("fsync") }
        store.stampUse(fd)
        if failure == nil, !store.moveIntoPlace(temporary, destination) { fail("rename") }
        if let failure {
            discard()
            throw failure
        }
        var info = stat()
        fstat(fd, &info)
        let entry = CacheEntry(
            head: head, path: destination,
            prefix: .init(headLength: headBytes.count, bodyOffset: bodyOffset, bodyLength: length, bodyChecksum: sum.value),
            inode: UInt64(info.st_ino), fd: fd)  // the entry now owns the descriptor (and its flock)
        fd = -1
        store.committed(entry, size: bodyOffset + length)
        return entry
    }

    /// Drops the written bytes; nothing is stored.
    package func discard() {
        guard fd >= 0 else { return }
        unlink(temporary)
        close(fd)
        fd = -1
    }

    private func fail(_ what: String) {
        if failure == nil {
            failure = TernError(code: .fileWriteFailed, message: "\(what) cache file \(temporary): \(String(cString: strerror(errno)))")
        }
    }

    private func writeAll(_ bytes: [UInt8], at offset: Int64) -> Bool {
        bytes.withUnsafeBytes { writeAll($0, at: offset) }
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Bool {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0, errno == EINTR { continue }
            if n <= 0 { return false }
            done += n
        }
        return true
    }
}

/// A folder of cache entries with a size limit, shared safely by threads and processes.
///
/// Safety rests on three facts. An entry's file is complete before it gets its name (written
/// under a temporary name, then `rename`d, which is atomic), so a reader sees a whole entry
/// or none, and a process killed while writing leaves only a temporary file, removed by the
/// next cleanup (it is no longer `flock`ed by a live writer). Entry files are never modified in
/// place, only replaced or unlinked, so an open entry reads consistently. And eviction, which
/// must see every process's files, runs under an exclusive `flock` on `<folder>/lock` and
/// rebuilds its index from the files themselves (size and last-use time: the file's mtime,
/// set explicitly on every use).
package final class CacheStore: Sendable {
    package let folder: String
    /// The bytes the entries may take (file sizes); eviction brings them under 90% of it.
    package let sizeLimit: Int64
    /// Whether entries are `fsync`ed before they are renamed into place, so that they are
    /// whole or absent after a power loss too (a SIGKILL needs no sync).
    package let syncsToDisk: Bool

    private struct State {
        /// Bytes on disk as last scanned plus this process's commits since.
        var estimate: Int64 = 0
        var lastStamp: Int64 = 0
    }

    private let state = Locked(State())
    private let evicting = ConditionLock()
    /// The bytes of bodies the memory layer may hold (0: no memory layer).
    package let memoryLimit: Int
    private let memory = Locked(MemoryLayer())
    /// The names in each bucket directory as last listed, with the directory's change time
    /// then: a lookup lists a bucket again only when a file was added, renamed or removed in it
    /// since (by any process), and otherwise pays one stat instead of a listing.
    private let listings = Locked<[String: (changed: timespec, names: [String])]>([:])

    /// Recently used entries kept open with their head parsed (and, with a memory limit, their
    /// body once read), by path, so that a hit costs one `stat` of the path instead of an
    /// open, a read and a parse of the head. An entry is reused only while the path still
    /// names the same inode; the open descriptor pins the inode, so its number cannot be
    /// recycled for another file meanwhile, and files are never modified in place.
    private struct MemoryLayer {
        var items: [String: (entry: CacheEntry, lastUse: UInt64)] = [:]
        /// The bytes of the bodies held (entries that keep theirs).
        var bytes = 0
        var clock: UInt64 = 0
    }

    /// Without a memory limit, at most this many entries are held (heads only), and only
    /// those whose body is at most ``heldBodyLimit``: a held descriptor keeps an entry another
    /// process evicted on disk until it is dropped here, so what it can pin stays small.
    static let heldEntriesWithoutMemory = 64
    static let heldBodyLimit: Int64 = 1 << 20
    /// With a memory limit, at most this many entries are held (each an open descriptor).
    static let heldEntriesWithMemory = 1024
    /// A hit re-stamps the last use of an entry that already has this process's latest stamp
    /// only once this much time has passed (ns): the order of this process's uses stays exact,
    /// and against other processes' it is at most this late.
    static let restampInterval: Int64 = 1_000_000_000

    /// Opens (creating if needed) a store in `folder`, removes what killed writers left and
    /// evicts down to `sizeLimit`.
    package init(folder: String, sizeLimit: Int64, memoryLimit: Int = 0, syncsToDisk: Bool = true) throws(TernError) {
        self.folder = folder
        self.memoryLimit = memoryLimit
        self.sizeLimit = sizeLimit
        self.syncsToDisk = syncsToDisk
        for dir in [folder, folder + "/entries", folder + "/tmp"] {
            if mkdir(dir, 0o700) != 0, errno != EEXIST {
                throw TernError(code: .fileWriteFailed, message: "create cache folder \(dir): \(String(cString: strerror(errno)))")
            }
        }
        // The 256 bucket folders are made as entries first go into them (moveIntoPlace): no
        // 256 mkdir calls each time a process opens the cache.
        let fd = open(folder + "/lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw TernError(code: .fileWriteFailed, message: "create \(folder)/lock: \(String(cString: strerror(errno)))")
        }
        close(fd)
        evict()
    }

    // MARK: Names

    static func hex2(_ n: Int) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[n >> 4], digits[n & 15]])
    }

    /// 16 lower-case hex digits.
    static func hex(_ value: UInt64) -> String {
        String(unsafeUninitializedCapacity: 16) { buffer in
            let digits: StaticString = "0123456789abcdef"
            for i in 0..<16 { buffer[i] = digits.utf8Start[Int((value >> (60 - 4 * UInt64(i))) & 15)] }
            return 16
        }
    }

    /// The file name prefix of a key's entries ("<K>.") and its bucket folder.
    private func location(key: String) -> (bucket: String, stem: String) {
        var key = key
        let k = Self.hex(key.withUTF8 { CacheChecksum.of(UnsafeRawBufferPointer($0)) })
        return (folder + "/entries/" + String(k.prefix(2)), k + ".")
    }

    private func variantName(_ head: CachedHead) -> String {
        guard !head.varyValues.isEmpty || !(CacheRules.varyNames(head.headers)?.isEmpty ?? true) else { return "0" }
        var text = (CacheRules.varyNames(head.headers) ?? []).joined(separator: ",")
        for (name, value) in head.varyValues.sorted(by: { $0.key < $1.key }) { text += "\n\(name): \(value)" }
        return Self.hex(CacheChecksum.of(Array(text.utf8)))
    }

    // MARK: Reading

    /// Every stored variant of `key`, opened and validated (damaged files are removed).
    /// The bucket's file names, from the last listing while the directory is unchanged.
    private func names(in bucket: String) -> [String] {
        var info = stat()
        guard stat(bucket, &info) == 0 else { return [] }
        let changed = info.st_ctim
        if let cached = listings.withLock({ $0[bucket] }),
            cached.changed.tv_sec == changed.tv_sec, cached.changed.tv_nsec == changed.tv_nsec
        {
            return cached.names
        }
        let names = listDirectory(bucket)
        // File times tick coarsely (a few ms): a listing made within a tick of the last change
        // could miss a file added in the same tick, so only older listings are kept.
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let age = Double(now.tv_sec - changed.tv_sec) + Double(now.tv_nsec - changed.tv_nsec) / 1e9
        if age > 0.05 { listings.withLock { $0[bucket] = (changed, names) } }
        return names
    }

    package func entries(key: String) -> [CacheEntry] {
        let (bucket, stem) = location(key: key)
        var found: [CacheEntry] = []
        // The common case, a response without Vary, needs no directory listing.
        if let entry = openEntry(path: bucket + "/" + stem + "0", key: key) { found.append(entry) }
        for name in names(in: bucket) where name.hasPrefix(stem) && name != stem + "0" {
            if let entry = openEntry(path: bucket + "/" + name, key: key) { found.append(entry) }
        }
        return found
    }

    /// The stored response `request` selects by its `Vary` values, the most recent first.
    package func lookup(key: String, request: HTTPFields) -> CacheEntry? {
        let (bucket, stem) = location(key: key)
        // A response without Vary (`<K>.0`) is stored only after every variant of its key was
        // removed, and a variant's commit removes it: when it is there, it is the answer, with
        // no look at the bucket for variants (a race of two processes' stores may leave both
        // for an instant; either is a valid stored response).
        if let plain = openEntry(path: bucket + "/" + stem + "0", key: key),
            CacheRules.varyMatches(plain.head, request: request)
        {
            touch(plain)
            return plain
        }
        var candidates: [CacheEntry] = []
        for name in names(in: bucket) where name.hasPrefix(stem) && name != stem + "0" {
            if let entry = openEntry(path: bucket + "/" + name, key: key),
                CacheRules.varyMatches(entry.head, request: request)
            {
                candidates.append(entry)
            }
        }
        guard let best = candidates.max(by: { $0.head.responseTime < $1.head.responseTime }) else { return nil }
        touch(best)
        return best
    }

    /// Marks an entry as just used, for least-recently-used eviction.
    package func touch(_ entry: CacheEntry) {
        // Through the descriptor the entry holds: no reopen. Should the path have been replaced
        // meanwhile, the stamp lands on the old, unlinked file, where it is harmless.
        stampUse(entry.fd, entry: entry)
    }

    /// Sets a file's mtime to now, strictly later than the last stamp this process gave.
    /// With `entry` (the file's opened entry), skipped when that entry already has this
    /// process's latest stamp, given less than ``restampInterval`` ago: no use of another
    /// entry came in between, so the order of uses is unchanged (repeated hits of one entry
    /// then cost no inode update each).
    func stampUse(_ fd: Int32, entry: CacheEntry? = nil) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var ns = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
        let stamp: Int64? = state.withLock { s in
            if let entry, entry.lastStamp != 0, entry.lastStamp == s.lastStamp,
                ns - s.lastStamp < Self.restampInterval
            {
                return nil
            }
            if ns <= s.lastStamp { ns = s.lastStamp + 1 }
            s.lastStamp = ns
            entry?.lastStamp = ns
            return ns
        }
        guard let stamp else { return }
        let time = timespec(tv_sec: Int(stamp / 1_000_000_000), tv_nsec: Int(stamp % 1_000_000_000))
        withUnsafeTemporaryAllocation(of: timespec.self, capacity: 2) { times in
            times[0] = time
            times[1] = time
            _ = futimens(fd, times.baseAddress)
        }
    }

    private func openEntry(path: String, key: String) -> CacheEntry? {
        let held: CacheEntry? = memory.withLock { m in
            guard m.items[path] != nil else { return nil }
            m.clock += 1
            m.items[path]!.lastUse = m.clock
            return m.items[path]!.entry
        }
        if let held {
            // The path must still name the held file (another process may have replaced or
            // removed it); the held descriptor pins the inode, so equal numbers mean that file.
            var info = stat()
            let found = stat(path, &info) == 0
            if found, UInt64(info.st_ino) == held.inode { return held.head.key == key ? held : nil }
            forget(path, entry: held)
            if !found, errno == ENOENT { return nil }
        }
        guard let entry = openFile(path: path, key: key) else { return nil }
        remember(entry)
        return entry
    }

    /// Drops the held entry of `path` (only `entry`, when given).
    private func forget(_ path: String, entry: CacheEntry? = nil) {
        let dropped: CacheEntry? = memory.withLock { m in
            guard let item = m.items[path], entry == nil || item.entry === entry else { return nil }
            m.items.removeValue(forKey: path)
            m.bytes -= Self.heldBytes(item.entry)
            return item.entry
        }
        _ = dropped  // released (and its descriptor closed) outside the lock
    }

    /// Drops every held entry.
    private func forgetAll() {
        let dropped = memory.withLock { m in
            defer { m = MemoryLayer() }
            return m.items
        }
        _ = dropped
    }

    private static func heldBytes(_ entry: CacheEntry) -> Int { entry.keepsBody ? Int(entry.bodyLength) : 0 }

    /// Holds an entry, dropping the least recently used beyond the limits: bodies count by
    /// their length against ``memoryLimit``; at most ``heldEntriesWithMemory`` entries (each an
    /// open descriptor), or without a memory limit ``heldEntriesWithoutMemory`` small ones.
    private func remember(_ entry: CacheEntry) {
        let limit = memoryLimit > 0 ? Self.heldEntriesWithMemory : Self.heldEntriesWithoutMemory
        guard entry.keepsBody || entry.bodyLength <= Self.heldBodyLimit else { return }
        var dropped: [CacheEntry] = []
        memory.withLock { m in
            if let old = m.items[entry.path] {
                m.bytes -= Self.heldBytes(old.entry)
                dropped.append(old.entry)
            }
            m.clock += 1
            m.items[entry.path] = (entry, m.clock)
            m.bytes += Self.heldBytes(entry)
            while m.bytes > memoryLimit || m.items.count > limit,
                  let oldest = m.items.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                m.items.removeValue(forKey: oldest.key)
                m.bytes -= Self.heldBytes(oldest.value.entry)
                dropped.append(oldest.value.entry)
            }
        }
    }

    /// `O_NOATIME` (Linux): reads of an entry do not update its access time, an inode write
    /// per hit otherwise (last use is the mtime, set explicitly). Refused (EPERM) for files of
    /// another user, which are then opened without it.
    #if os(Linux)
    private static let noAccessTime: Int32 = 0o1_000_000
    #else
    private static let noAccessTime: Int32 = 0
    #endif

    private func openFile(path: String, key: String) -> CacheEntry? {
        var fd = open(path, O_RDONLY | O_CLOEXEC | Self.noAccessTime)
        if fd < 0, errno == EPERM { fd = open(path, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { return nil }
        var keep = false
        defer { if !keep { close(fd) } }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        func damaged() -> CacheEntry? {
            // Remove it unless another process replaced it meanwhile.
            var now = stat()
            if stat(path, &now) == 0, now.st_ino == info.st_ino { unlink(path) }
            return nil
        }
        var bytes = [UInt8](repeating: 0, count: 4096)
        var n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, $0.count, 0) }
        guard n >= CacheFile.prefixSize else { return damaged() }
        bytes.removeSubrange(n...)
        guard let (prefix, checksum) = CacheFile.parsePrefix(bytes) else { return damaged() }
        let headEnd = CacheFile.prefixSize + prefix.headLength
        if headEnd > bytes.count {
            var more = [UInt8](repeating: 0, count: headEnd - bytes.count)
            n = more.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, $0.count, off_t(bytes.count)) }
            guard n == more.count else { return damaged() }
            bytes += more
            more = []
        }
        let headBytes = bytes[CacheFile.prefixSize..<headEnd]
        guard CacheFile.headIsIntact(prefixBytes: bytes, head: headBytes, checksum: checksum),
              Int64(info.st_size) == prefix.bodyOffset + prefix.bodyLength,
              let head = CacheFile.decode(headBytes) else { return damaged() }
        guard head.key == key else { return nil }  // a hash collision: not ours
        keep = true
        return CacheEntry(
            head: head, path: path, prefix: prefix, inode: UInt64(info.st_ino), fd: fd,
            keepsBody: memoryLimit > 0 && prefix.bodyLength <= Int64(memoryLimit / 4))
    }

    // MARK: Writing

    /// Renames a written file to its entry path, making the bucket folder on its first entry.
    fileprivate func moveIntoPlace(_ temporary: String, _ destination: String) -> Bool {
        if rename(temporary, destination) == 0 { return true }
        guard errno == ENOENT, let slash = destination.utf8.lastIndex(of: UInt8(ascii: "/")) else { return false }
        if mkdir(String(destination[..<slash]), 0o700) != 0, errno != EEXIST { return false }
        return rename(temporary, destination) == 0
    }

    /// Starts writing a response under `head` (its key and Vary values name the entry).
    /// `expectedLength` (Content-Length) only decides the body's alignment.
    package func makeWriter(head: CachedHead, expectedLength: Int64? = nil) throws(TernError) -> CacheWriter {
        let (bucket, stem) = location(key: head.key)
        for _ in 0..<8 {
            let temporary = "\(folder)/tmp/\(getpid())-\(Self.hex(UInt64.random(in: 0...UInt64.max)))"
            let fd = open(temporary, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd < 0 {
                if errno == EEXIST { continue }
                throw TernError(code: .fileWriteFailed, message: "create \(temporary): \(String(cString: strerror(errno)))")
            }
            // Held until the writer finishes: a cleanup never removes a live writer's file.
            if flock(fd, LOCK_EX | LOCK_NB) != 0 {
                close(fd)
                continue
            }
            return CacheWriter(
                store: self, head: head, temporary: temporary, destination: bucket + "/" + stem + variantName(head),
                fd: fd, expectedLength: expectedLength)
        }
        throw TernError(code: .fileWriteFailed, message: "create a temporary file in \(folder)/tmp")
    }

    /// Stores a whole response at once.
    @discardableResult
    package func store(head: CachedHead, body: some ContiguousBytes) throws(TernError) -> CacheEntry {
        let writer = try makeWriter(head: head)
        writer.append(body)
        return try writer.commit()
    }

    /// Called by a writer after its rename: drops variants the new entry supersedes and
    /// evicts if this process's estimate passed the limit.
    fileprivate func committed(_ entry: CacheEntry, size: Int64) {
        let (bucket, stem) = location(key: entry.head.key)
        let mine = entry.path.split(separator: "/").last.map(String.init) ?? ""
        forget(entry.path)  // the file held for this path, if any, was just replaced
        if mine == stem + "0" {
            // A response without Vary replaces every variant.
            for name in listDirectory(bucket) where name.hasPrefix(stem) && name != mine {
                unlink(bucket + "/" + name)
                forget(bucket + "/" + name)
            }
        } else {
            unlink(bucket + "/" + stem + "0")
            forget(bucket + "/" + stem + "0")
        }
        let over = state.withLock { s in
            s.estimate += size
            return s.estimate > sizeLimit
        }
        if over { evict() }
    }

    /// Replaces an entry's head (after a 304) by writing a new file with the same body (copied
    /// in the kernel) and renaming it into place. Skipped when the entry was replaced meanwhile.
    @discardableResult
    package func updateHead(of entry: CacheEntry, to head: CachedHead) throws(TernError) -> CacheEntry? {
        var now = stat()
        guard stat(entry.path, &now) == 0, UInt64(now.st_ino) == entry.inode else { return nil }
        let writer = try makeWriter(head: head, expectedLength: entry.bodyLength)
        try writer.copyBody(of: entry)
        return try writer.commit()
    }

    // MARK: Removing

    /// Removes every variant of `key`.
    package func remove(key: String) {
        let (bucket, stem) = location(key: key)
        for name in listDirectory(bucket) where name.hasPrefix(stem) {
            // Check the key: another key may share the hash.
            if let entry = openEntry(path: bucket + "/" + name, key: key) {
                unlink(entry.path)
                forget(entry.path)
            }
        }
    }

    /// Removes every entry (and abandoned temporary files).
    package func removeAll() {
        withFolderLock {
            for bucket in 0..<256 {
                let dir = folder + "/entries/" + Self.hex2(bucket)
                for name in listDirectory(dir) { unlink(dir + "/" + name) }
            }
            forgetAll()
            removeAbandonedTemporaries()
            state.withLock { $0.estimate = 0 }
        }
    }

    /// The bytes the entries take now (a scan of the folder).
    package var size: Int64 { scan().reduce(0) { $0 + $1.size } }

    /// Every entry file: path, size and last use.
    func scan() -> [(path: String, size: Int64, lastUse: Int64)] {
        var files: [(path: String, size: Int64, lastUse: Int64)] = []
        for bucket in 0..<256 {
            let dir = folder + "/entries/" + Self.hex2(bucket)
            for name in listDirectory(dir) {
                var info = stat()
                let path = dir + "/" + name
                guard stat(path, &info) == 0 else { continue }
                files.append((path, Int64(info.st_size), Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)))
            }
        }
        return files
    }

    /// Under the folder lock: removes abandoned temporary files, rescans and removes the least
    /// recently used entries until they take at most 90% of the limit.
    func evict() {
        evicting.withLock {
            withFolderLock {
                removeAbandonedTemporaries()
                var files = scan()
                var total = files.reduce(0) { $0 + $1.size }
                if total > sizeLimit {
                    let target = sizeLimit - sizeLimit / 10
                    files.sort { $0.lastUse < $1.lastUse }
                    for file in files where total > target {
                        if unlink(file.path) == 0 || errno == ENOENT { total -= file.size }
                        forget(file.path)
                    }
                }
                state.withLock { $0.estimate = total }
            }
        }
    }

    /// Runs `body` holding the exclusive flock on `<folder>/lock` (waiting for other processes).
    private func withFolderLock(_ body: () -> Void) {
        let fd = open(folder + "/lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd >= 0 {
            while flock(fd, LOCK_EX) != 0, errno == EINTR {}
        }
        body()
        if fd >= 0 { close(fd) }  // releases the lock
    }

    /// Temporary files whose writer is gone: not flock'ed, and older than a few seconds (a
    /// live writer takes its lock microseconds after creating the file).
    private func removeAbandonedTemporaries() {
        let dir = folder + "/tmp"
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        for name in listDirectory(dir) {
            let path = dir + "/" + name
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { continue }
            var info = stat()
            if fstat(fd, &info) == 0, now.tv_sec - info.st_mtim.tv_sec >= 5, flock(fd, LOCK_EX | LOCK_NB) == 0 {
                unlink(path)
            }
            close(fd)
        }
    }
}

extension CacheWriter {
    /// Appends the body of `entry` (a 304 refresh keeps the body).
    func copyBody(of entry: CacheEntry) throws(TernError) {
        guard entry.forEachBodyChunk({ append($0) }) else {
            throw TernError(code: .fileReadFailed, message: "read \(entry.path): file ended early")
        }
    }
}

/// The names in a directory, without "." and "..".
func listDirectory(_ path: String) -> [String] {
    guard let dir = opendir(path) else { return [] }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafePointer(to: entry.pointee.d_name) {
            $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
        }
        if name != ".", name != ".." { names.append(name) }
    }
    return names
}
