// tern-cache-torture: stores and reads cache entries in a loop, for the tests that kill it
// with SIGKILL at random moments or run two of it on one folder at once. Not a product.
//
//   tern-cache-torture store  DIR SEED [COUNT]   store entries (COUNT, or until killed)
//   tern-cache-torture mixed  DIR SEED COUNT     store and read at random, checking each read
//   tern-cache-torture verify DIR                read every key back; print "whole N missing M"
//
// Every body is a pattern derived from its key and a generation number carried in the entry's
// headers, so any entry can be checked on its own: a torn or mixed entry fails the check.
// Exit status 0, or 1 when a read found a damaged entry (details on stderr).

import FoundationEssentials
import HTTPTypes
import Tern

#if canImport(Glibc)
import Glibc
#endif

let keyCount = 40

func key(_ index: Int) -> String { "http://torture.test/item/\(index)" }

/// The body of generation `generation` of key `index`: 0 to about 96 KiB of a pattern.
func body(index: Int, generation: UInt64) -> [UInt8] {
    var state = generation &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(index)
    let length = Int(state % 98_304)
    return (0..<length).map { i in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return UInt8(truncatingIfNeeded: (state >> 33) ^ UInt64(i))
    }
}

func head(index: Int, generation: UInt64) -> CachedHead {
    var fields = HTTPFields()
    fields[.cacheControl] = "max-age=3600"
    fields[HTTPField.Name("X-Generation")!] = String(generation)
    fields[.contentLength] = String(body(index: index, generation: generation).count)
    let now = Date()
    return CachedHead(key: key(index), status: 200, reason: "OK", headers: fields, requestTime: now, responseTime: now)
}

/// Stores generation `generation` of key `index`, in pieces, as a response streams in.
func store(_ cache: CacheStore, index: Int, generation: UInt64) throws {
    let bytes = body(index: index, generation: generation)
    let writer = try cache.makeWriter(head: head(index: index, generation: generation), expectedLength: Int64(bytes.count))
    var offset = 0
    while offset < bytes.count {
        let end = min(bytes.count, offset + Int.random(in: 1...16384))
        bytes[offset..<end].withUnsafeBytes { writer.append($0) }
        offset = end
    }
    try writer.commit()
}

/// Reads key `index` back: nil if absent, false if damaged, true if whole.
func check(_ cache: CacheStore, index: Int) -> Bool? {
    let entries = cache.entries(key: key(index))
    if entries.isEmpty { return nil }
    for entry in entries {
        guard let text = entry.head.headers[HTTPField.Name("X-Generation")!], let generation = UInt64(text) else {
            printError("key \(index): no generation\n")
            return false
        }
        let expected = body(index: index, generation: generation)
        guard let data = try? entry.readBody(), Array(data) == expected,
              entry.head.headers[.contentLength] == String(expected.count) else {
            printError("key \(index) generation \(generation): damaged body\n")
            return false
        }
    }
    return true
}

func printError(_ text: String) {
    _ = Array(text.utf8).withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    printError("usage: tern-cache-torture store|mixed|verify DIR [SEED [COUNT]]\n")
    exit(2)
}
let mode = arguments[1]
let cache = try CacheStore(folder: arguments[2], sizeLimit: 2 << 20, syncsToDisk: false)
let seed = arguments.count > 3 ? UInt64(arguments[3]) ?? 1 : 1
let count = arguments.count > 4 ? Int(arguments[4]) ?? .max : .max

switch mode {
case "store":
    var generation = seed << 32
    for _ in 0..<count {
        generation += 1
        try store(cache, index: Int.random(in: 0..<keyCount), generation: generation)
    }
case "mixed":
    var generation = seed << 32
    var bad = 0
    for _ in 0..<count {
        let index = Int.random(in: 0..<keyCount)
        if Bool.random() {
            generation += 1
            try store(cache, index: index, generation: generation)
        } else if check(cache, index: index) == false {
            bad += 1
        }
    }
    print("bad \(bad)")
    exit(bad == 0 ? 0 : 1)
case "verify":
    var whole = 0, missing = 0, bad = 0
    for index in 0..<keyCount {
        switch check(cache, index: index) {
        case nil: missing += 1
        case true?: whole += 1
        case false?: bad += 1
        }
    }
    print("whole \(whole) missing \(missing) bad \(bad)")
    exit(bad == 0 ? 0 : 1)
default:
    printError("unknown mode \(mode)\n")
    exit(2)
}
