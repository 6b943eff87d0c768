// Response decoding from the Swift API: gzip and deflate from faultserver's hand-made streams
// and nginx's gzip module, raw bytes on request, bombs and limits, and streaming through the
// data handler with flat memory.

import Foundation
import HTTPTypes
import Testing
@testable import Tern

#if canImport(Glibc)
import Glibc
#endif

/// The resident set size of this process now, in bytes (from /proc/self/statm).
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let pages = text.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// Runs a shell command; returns its output.
func shell(_ command: String) -> String {
    run("/bin/sh", ["-c", command]).output
}

extension TernTests {
    @Suite struct Decoding {
        func run(_ request: Request) throws -> Response {
            request.callbackQueue = .global()
            return try request.executeAndWait()
        }

        @Test func gzipAndDeflateAreDecoded() throws {
            let servers = try Servers.get()
            let cases: [(query: String, size: Int, decoded: String)] = [
                ("kind=gzip", 100_000, "gzip"),
                ("kind=deflate", 100_000, "deflate"),
                ("kind=rawdeflate", 70_000, "deflate"),
                ("kind=gzip&members=5", 300_000, "gzip"),
                ("kind=gzip&chunked=1", 200_000, "gzip"),
                ("kind=gzip", 0, "gzip"),
            ]
            for c in cases {
                let request = Request(url: servers.fault("/gzip?size=\(c.size)&\(c.query)"))
                let response = try run(request)
                #expect(response.data == pattern(c.size), "\(c.query)")
                #expect(response.decodedEncoding == c.decoded, "\(c.query)")
                #expect(response.bytesDelivered == UInt64(c.size))
                #expect(response.isCompressed)
                #expect(response.rawData == nil, "the encoded bytes are not kept")
                #expect(request.isResponseCompressed)
                #expect(request.rawResponseData == nil)
                #expect(request.decodedEncoding == c.decoded)
                #expect(response.sentRequestHead?.contains("Accept-Encoding: gzip, deflate, br, zstd\r\n") == true)
            }
        }

        @Test func rawKeepsTheEncodedBytes() throws {
            let servers = try Servers.get()
            let request = Request(url: servers.fault("/gzip?size=150000"))
            request.decoding = .raw
            let response = try run(request)
            let raw = try #require(response.rawData)
            #expect(raw == response.data)
            #expect(response.decodedEncoding == nil)
            #expect(response.isCompressed)
            #expect(request.rawResponseData == raw)
            #expect(response.bytesDelivered == response.bytesReceived)
            #expect(raw.prefix(2) == Data([0x1F, 0x8B]), "a gzip stream")
            let file = temporaryPath("raw.gz")
            _ = FileManager.default.createFile(atPath: file, contents: raw)
            defer { try? FileManager.default.removeItem(atPath: file) }
            #expect(shell("gzip -dc '\(file)' | sha256sum").prefix(64) == sha256(pattern(150_000)))

            let plain = Request(url: servers.nginx("/1k.bin"))
            let plainResponse = try run(plain)
            #expect(plainResponse.rawData == plainResponse.data, "nothing decoded: raw is the body")
            #expect(!plainResponse.isCompressed)
        }

        @Test func acceptEncodingOnlyWhenAsked() throws {
            let servers = try Servers.get()
            let automatic = try Echo(run(Request(url: servers.fault("/echo"))).data)
            #expect(automatic.headers("Accept-Encoding") == ["gzip, deflate, br, zstd"])
            let off = Request(url: servers.fault("/echo"))
            off.decoding = .none
            #expect(try Echo(run(off).data).headers("Accept-Encoding").isEmpty)
            let custom = Request(url: servers.fault("/echo"))
            custom.decoding = .none
            custom.headerFields[.acceptEncoding] = "br"
            #expect(try Echo(run(custom).data).headers("Accept-Encoding") == ["br"])
        }

        @Test func brokenStreamsFailClearly() throws {
            let servers = try Servers.get()
            let corrupt = Request(url: servers.fault("/gzip?size=100000&corrupt=20"))
            let error = try #require(throws: TernError.self) { try run(corrupt) }
            #expect(error.code == .badContentEncoding, "\(error)")
            let truncated = Request(url: servers.fault("/gzip?size=100000&truncate=10"))
            let cut = try #require(throws: TernError.self) { try run(truncated) }
            #expect([.badContentEncoding, .partialBody].contains(cut.code), "\(cut)")
        }

        @Test func decompressionBombsAreRefused() throws {
            let servers = try Servers.get()
            let bomb = Request(url: servers.fault("/gzip?size=1073741824&zeros=1"))
            let file = temporaryPath("bomb")
            bomb.downloadFile = file
            let error = try #require(throws: TernError.self) { try run(bomb) }
            #expect(error.code == .decodeLimitExceeded)
            #expect(error.message.contains("decompression bomb"), "\(error.message)")
            #expect(!FileManager.default.fileExists(atPath: file))
            #expect(!FileManager.default.fileExists(atPath: file + ".part"), "no debris")

            let capped = Request(url: servers.fault("/gzip?size=300000"))
            capped.decodingLimits = .init(maxBytes: 200_000)
            let cappedError = try #require(throws: TernError.self) { try run(capped) }
            #expect(cappedError.code == .decodeLimitExceeded)
            #expect(cappedError.message.contains("200000"), "\(cappedError.message)")

            // Ordinary compressible data passes the default ratio.
            let text = Request(url: servers.nginx("/gzip/64k.txt"))
            let response = try run(text)
            #expect(response.decodedEncoding == "gzip")
            #expect(response.data == (try fixture(servers, "64k.txt")))
        }

        @Test func nginx100MiBDecodesByteIdenticalToAFile() throws {
            let servers = try Servers.get()
            let file = temporaryPath("gzip-100m")
            defer { try? FileManager.default.removeItem(atPath: file) }
            let request = Request(url: servers.nginx("/gzip/100m.bin"))
            request.downloadFile = file
            let response = try run(request)
            #expect(response.decodedEncoding == "gzip")
            #expect(response.bytesDelivered == 100 * 1024 * 1024)
            #expect(sha256(file: file) == servers.sha("SHA_100M"))
        }

        @Test func dataHandlerAccumulatesNothing() throws {
            let servers = try Servers.get()
            let counted = Locked((bytes: 0, pieces: 0, peak: 0))
            let before = residentBytes()
            let request = Request(url: servers.nginx("/gzip/100m.bin"))
            request.dataHandler = { data in
                counted.withLock { c in
                    c.bytes += data.count
                    c.pieces += 1
                    if c.pieces % 64 == 0 { c.peak = max(c.peak, residentBytes()) }
                }
                return true
            }
            let response = try run(request)
            let result = counted.withLock { $0 }
            #expect(result.bytes == 100 * 1024 * 1024)
            #expect(response.data.isEmpty)
            #expect(request.data?.isEmpty == true)
            #expect(response.bytesDelivered == 100 * 1024 * 1024)
            let growth = max(0, result.peak - before)
            #expect(growth < 24 << 20, "memory grew by \(growth >> 20) MiB while streaming 100 MiB")
        }
    }
}
